"""How the leader of a Connect worker group splits the connectors and tasks (kfk.connect.connect_protocol holds the
bytes).

Eager (protocol ``default``): every member has given up everything before the round; connectors and then tasks are
dealt round-robin over the members sorted by id.

Incremental cooperative (``compatible`` and ``sessioned``, KIP-415): each member says what it runs (its
allocation) and keeps running it unless it is revoked. The leader compares the configured connectors and tasks with
what the members run and with what it handed out last round:

- deleted (run or handed out, no longer configured) and duplicated (run by two members) work is revoked;
- new work (configured, neither run nor handed out) goes to the least loaded members;
- lost work (handed out last round, now run by nobody: its worker left) waits up to
  ``scheduled.rebalance.max.delay.ms`` for that worker to come back: every member is told to rejoin when the delay
  is over, and a member that joins empty-handed meanwhile (the restarted worker) gets it then; after the delay it is
  new work. Without a departed member (a member simply missed its assignment) it is new work at once;
- when the load is uneven, the members above their share give up the excess (revoked now, handed out in the next
  round, which the revoking members start at once); never in two rounds in a row, so that the freed work is placed
  before anything else moves.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import cycle

from kfk.connect.connect_protocol import NO_ERROR, Assignment, WorkerState

__all__ = ["eager_assign", "Work", "IncrementalCooperativeAssignor"]

log = logging.getLogger("kfk.connect.assignors")

TaskId = tuple[str, int]


def eager_assign(members: Mapping[str, WorkerState], tasks_by_connector: Mapping[str, int]) -> dict[str, Assignment]:
    """Kafka's eager assignment: members sorted by id, connectors (sorted) dealt round-robin, then every task
    (sorted by connector and id) continuing the same round. The leader, url and offset are filled by the caller."""
    result = {member: Assignment(NO_ERROR, "", "", 0) for member in members}
    if not members:
        return result
    turn = cycle(sorted(members))
    for connector in sorted(tasks_by_connector):
        result[next(turn)].connectors.append(connector)
    for connector in sorted(tasks_by_connector):
        for task in range(tasks_by_connector[connector]):
            result[next(turn)].tasks.append((connector, task))
    return result


@dataclass
class Work:
    """Connectors and tasks (Kafka's ConnectorsAndTasks)."""
    connectors: set[str] = field(default_factory=set)
    tasks: set[TaskId] = field(default_factory=set)

    @classmethod
    def configured(cls, tasks_by_connector: Mapping[str, int]) -> Work:
        return cls(set(tasks_by_connector), {(name, task) for name, count in tasks_by_connector.items()
                                             for task in range(count)})

    @classmethod
    def of(cls, assignment: Assignment | None) -> Work:
        return cls() if assignment is None else cls(set(assignment.connectors), set(assignment.tasks))

    def __or__(self, other: Work) -> Work:
        return Work(self.connectors | other.connectors, self.tasks | other.tasks)

    def __sub__(self, other: Work) -> Work:
        return Work(self.connectors - other.connectors, self.tasks - other.tasks)

    def __and__(self, other: Work) -> Work:
        return Work(self.connectors & other.connectors, self.tasks & other.tasks)

    def __bool__(self) -> bool:
        return bool(self.connectors or self.tasks)

    def __len__(self) -> int:
        return len(self.connectors) + len(self.tasks)


def _union(works: Iterable[Work]) -> Work:
    total = Work()
    for work in works:
        total = total | work
    return total


def _deal(items: Iterable, loads: dict[str, set], added: dict[str, set],
          others: Mapping[str, set] | None = None) -> None:
    """Each item to the member with the fewest; ties go to the member with the fewest `others` (the other kind of
    work: a worker that got a connector is not also the first in line for a task), then to the lowest member id."""
    for item in sorted(items):
        member = min(loads, key=lambda name: (len(loads[name]), len(others[name]) if others else 0, name))
        loads[member].add(item)
        added[member].add(item)


def _excess(loads: Mapping[str, set], total: int) -> dict[str, int]:
    """How many items each member above its share gives up for the others to take, when the load is uneven: the
    shares are total // members, one more for the total % members most loaded."""
    if not loads or max(map(len, loads.values())) - min(map(len, loads.values())) <= 1:
        return {}
    ordered = sorted(loads, key=lambda name: (-len(loads[name]), name))
    floor, extra = divmod(total, len(ordered))
    shares = {member: floor + (1 if rank < extra else 0) for rank, member in enumerate(ordered)}
    return {member: len(loads[member]) - shares[member] for member in ordered if len(loads[member]) > shares[member]}


class IncrementalCooperativeAssignor:
    """The leader's incremental cooperative assignor. It remembers what it handed out last round (to tell work lost
    with a departed member from new work) for as long as it leads without a missed generation."""

    def __init__(self, max_delay_ms: int) -> None:
        self.max_delay_ms = max_delay_ms
        self.previous = Work()
        self.previous_generation = -1
        self.previous_members: set[str] = set()
        self.revoked_in_previous = False
        #: When held-back lost work is handed out (a monotonic ms), 0 when nothing is held back.
        self.scheduled_rebalance_ms = 0
        self.delay_ms = 0

    def assign(self, members: Mapping[str, WorkerState], tasks_by_connector: Mapping[str, int],
               last_completed_generation: int, generation: int, now_ms: int) -> dict[str, Assignment]:
        """Each member's assignment (what to start, what to stop, the delay); leader, url, offset and version are
        filled by the caller."""
        if self.previous_generation != last_completed_generation:  # a round was missed: what it remembers is stale
            self.previous = Work()
        configured = Work.configured(tasks_by_connector)
        running = {member: Work.of(state.allocation) for member, state in members.items()}
        active = _union(running.values())
        deleted = (self.previous | active) - configured
        lost = self.previous - active - deleted
        new = configured - self.previous - active

        revoked = {member: work & deleted for member, work in running.items()}
        seen: dict[object, list[str]] = {}
        for member, work in running.items():
            for item in [*work.connectors, *work.tasks]:
                seen.setdefault(item, []).append(member)
        for item, holders in seen.items():
            if len(holders) > 1:  # run twice: both stop it, and it is placed once in the next round
                for member in holders:
                    (revoked[member].connectors if isinstance(item, str) else revoked[member].tasks).add(item)
        current = {member: work - revoked[member] for member, work in running.items()}

        held = self._handle_lost(lost, new, current, members, now_ms)
        connectors = {member: set(work.connectors) for member, work in current.items()}
        tasks = {member: set(work.tasks) for member, work in current.items()}
        added = {member: Work() for member in members}
        for member, work in held.items():
            connectors[member] |= work.connectors
            tasks[member] |= work.tasks
            added[member] = added[member] | work
        _deal(new.connectors, connectors, {member: added[member].connectors for member in members}, tasks)
        _deal(new.tasks, tasks, {member: added[member].tasks for member in members}, connectors)

        balanced = any(revoked.values()) or self.delay_ms > 0 or self.revoked_in_previous
        if not balanced:
            for loads, total, kind in ((connectors, len(configured.connectors), "connectors"),
                                       (tasks, len(configured.tasks), "tasks")):
                for member, count in _excess(loads, total).items():
                    # what the member already ran (the newest ids first): what it was just handed stays
                    running_here = sorted(loads[member] - getattr(added[member], kind), reverse=True)[:count]
                    getattr(revoked[member], kind).update(running_here)
                    loads[member].difference_update(running_here)
        self.revoked_in_previous = any(revoked.values())

        waiting = lost if self.scheduled_rebalance_ms else Work()
        self.previous = _union(Work(connectors[member], tasks[member]) for member in members) | waiting
        self.previous_generation = generation
        self.previous_members = set(members)
        result = {}
        for member in members:
            result[member] = Assignment(NO_ERROR, "", "", 0, sorted(added[member].connectors),
                                        sorted(added[member].tasks), sorted(revoked[member].connectors),
                                        sorted(revoked[member].tasks), self.delay_ms)
        return result

    def _handle_lost(self, lost: Work, new: Work, current: Mapping[str, Work], members: Mapping[str, WorkerState],
                     now_ms: int) -> dict[str, Work]:
        """Kafka's handling of lost work: new work at once when no member departed or without a delay; else held
        back until the scheduled rebalance, then given to members that hold nothing (a departed worker back under a
        new member id), or dealt as new work. Returns what goes to such members; adds the rest to `new`."""
        if not lost:
            self.scheduled_rebalance_ms = self.delay_ms = 0
            return {}
        departed = not set(members) >= self.previous_members
        if (not self.scheduled_rebalance_ms and not departed) or self.max_delay_ms <= 0:
            new.connectors |= lost.connectors
            new.tasks |= lost.tasks
            return {}
        if self.scheduled_rebalance_ms and now_ms >= self.scheduled_rebalance_ms:
            self.scheduled_rebalance_ms = self.delay_ms = 0
            self.revoked_in_previous = False
            empty = sorted(member for member, work in current.items() if not work)
            if not empty:
                new.connectors |= lost.connectors
                new.tasks |= lost.tasks
                return {}
            given = {member: Work() for member in empty}
            _deal(lost.connectors, {member: set() for member in empty},
                  {member: given[member].connectors for member in empty})
            _deal(lost.tasks, {member: set() for member in empty}, {member: given[member].tasks for member in empty})
            return given
        self.delay_ms = (self.scheduled_rebalance_ms - now_ms) if self.scheduled_rebalance_ms else self.max_delay_ms
        self.scheduled_rebalance_ms = now_ms + self.delay_ms
        log.info("work of departed workers held back for %d ms, for them to come back: %s", self.delay_ms,
                 sorted([*lost.connectors, *(f"{name}-{task}" for name, task in lost.tasks)]))
        return {}
