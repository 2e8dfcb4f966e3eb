"""Where a Streams application's tasks run: the group leader's task assignment, with Kafka Streams' standby
replicas and its high-availability rules (KIP-441).

The balanced target is the range assignor's (see kfk.streams.kafka_streams). Each instance reports, in its threads'
subscriptions, the changelog offset sum of every stateful task it has state for (LATEST_OFFSET for a task it runs),
and the leader compares them with the sums of the changelogs' end offsets: an instance whose lag on a task is at most
acceptable.recovery.lag is caught up on it. A stateful task whose target instance is not caught up while another
instance is stays active where it is caught up (the least lagging such instance, then the least loaded), so that no
instance stops to restore a large store; the target instance gets a warm-up replica instead, a standby beyond
num.standby.replicas that restores the task's stores (at most max.warmup.replicas of them at once). While a task is
kept off its target the leader asks for a probing rebalance after probing.rebalance.interval.ms, and an instance whose
warm-ups have all caught up asks for one at once (kfk.streams.standby): the task then moves to its target, which
restores only the changelog's tail. A task no instance is caught up on goes to its target.

Standbys go to instances other than the active's, the least loaded first. With rack.aware.assignment.tags (KIP-708)
each instance also reports its client tags (client.tag.<key>), and a task's standbys go where, for every listed tag,
the value differs from the active's and from the standbys' placed before (a tag whose values are all taken by then no
longer constrains the next one); when no instance is left that way, the least loaded others take the rest.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping
from typing import NamedTuple

from kfk.common.structs import TopicPartition
from kfk.streams.processor import TaskId

__all__ = ["AssignmentConfigs", "ClientState", "TaskAssignment", "LATEST_OFFSET", "assign_tasks", "task_lag"]

log = logging.getLogger("kfk.streams")

#: The offset sum an instance reports for a task it runs (Kafka's Task.LATEST_OFFSET): it has no lag.
LATEST_OFFSET = -2


class AssignmentConfigs(NamedTuple):
    """The configs the leader assigns with (Kafka's AssignmentConfigs)."""

    num_standby_replicas: int = 0
    acceptable_recovery_lag: int = 10_000
    max_warmup_replicas: int = 2
    probing_rebalance_interval_ms: int = 600_000
    rack_aware_assignment_tags: tuple[str, ...] = ()


class ClientState(NamedTuple):
    """One instance as the leader sees it: its members (one per stream thread), the offset sums it reported, and its
    client tags."""

    members: list[str]
    offset_sums: Mapping[TaskId, int]
    tags: Mapping[str, str] = {}


class TaskAssignment(NamedTuple):
    """What the leader decided: each member's active partitions and standby tasks (warm-ups included), which of
    those standbys are warm-ups, and whether a probing rebalance must follow."""

    partitions: dict[str, list[TopicPartition]]
    standbys: dict[str, set[TaskId]]
    warmups: dict[str, set[TaskId]]
    probing: bool


def task_lag(offset_sum: int | None, end_offset_sum: int) -> int:
    """An instance's lag on a task: none while it runs the task; everything without state, or with an offset sum
    past the changelog's end (its state is of an older changelog: it restores from scratch)."""
    if offset_sum == LATEST_OFFSET:
        return 0
    if offset_sum is None or offset_sum < 0 or offset_sum > end_offset_sum:
        return end_offset_sum
    return end_offset_sum - offset_sum


def assign_tasks(target: Mapping[str, list[TopicPartition]], clients: Mapping[str, ClientState],
                 task_of: Callable[[TopicPartition], TaskId], stateful: set[TaskId],
                 end_offset_sums: Mapping[TaskId, int] | None, configs: AssignmentConfigs) -> TaskAssignment:
    """The assignment from the range assignor's ``target`` (member -> partitions): stateful tasks kept on caught-up
    instances, then standbys of every stateful task, then warm-ups. ``clients`` by process id; ``end_offset_sums``
    None when the changelogs' end offsets could not be read (every task then goes to its target)."""
    partitions = {member: list(assigned) for member, assigned in target.items()}
    instance_of = {member: process_id for process_id, client in clients.items() for member in client.members}
    owner: dict[TaskId, str] = {}
    for member in sorted(partitions):
        for partition in partitions[member]:
            owner.setdefault(task_of(partition), member)
    member_load = Counter(owner.values())
    kept: dict[TaskId, str] = {}
    for task in sorted(end_offset_sums or {}):
        member = owner.get(task)
        if member not in instance_of:
            continue
        lags = {process_id: task_lag(client.offset_sums.get(task), end_offset_sums[task])  # type: ignore[index]
                for process_id, client in clients.items()}
        caught_up = [process_id for process_id, lag in lags.items() if lag <= configs.acceptable_recovery_lag]
        if not caught_up or instance_of[member] in caught_up:
            continue
        instance_load = Counter({process_id: sum(member_load[name] for name in client.members)
                                 for process_id, client in clients.items()})
        source = min(caught_up, key=lambda process_id: (lags[process_id], instance_load[process_id], process_id))
        to = min(clients[source].members, key=lambda name: (member_load[name], name))
        for name in partitions:
            moved = [partition for partition in partitions[name] if task_of(partition) == task]
            if moved and name != to:
                partitions[name] = [partition for partition in partitions[name] if task_of(partition) != task]
                partitions[to].extend(moved)
        member_load[member] -= 1
        member_load[to] += 1
        owner[task] = to
        kept[task] = member
    active = {task: instance_of[member] for task, member in owner.items() if task in stateful and member in instance_of}
    standbys = _standby_tasks(active, clients, member_load, configs.num_standby_replicas,
                              configs.rack_aware_assignment_tags)
    warmups: dict[str, set[TaskId]] = {}
    budget = configs.max_warmup_replicas
    for task, member in sorted(kept.items()):
        if budget == 0:
            break
        if any(task in standbys.get(name, ()) for name in clients[instance_of[member]].members):
            continue  # a standby there already warms it up
        warmups.setdefault(member, set()).add(task)
        standbys.setdefault(member, set()).add(task)
        budget -= 1
    return TaskAssignment(partitions, standbys, warmups, bool(kept))


def _standby_tasks(active: Mapping[TaskId, str], clients: Mapping[str, ClientState], member_load: Counter,
                   replicas: int, tag_keys: tuple[str, ...]) -> dict[str, set[TaskId]]:
    """Each member's standby tasks: for every stateful active task, up to ``replicas`` instances other than the one
    running it (fewer when there are not that many other instances, as Kafka Streams), on other tag values where
    ``tag_keys`` asks, the instances with the fewest standbys first, and in an instance its member with the fewest
    tasks."""
    standbys: dict[str, set[TaskId]] = {}
    if replicas <= 0:
        return standbys
    instance_standbys = dict.fromkeys(clients, 0)
    tag_values = {key: {client.tags.get(key) for client in clients.values()} for key in tag_keys}
    for task, active_instance in sorted(active.items()):
        placed = [active_instance]
        while len(placed) <= replicas:
            free = [process_id for process_id in clients if process_id not in placed]
            if not free:
                break
            apart = [process_id for process_id in free
                     if not _shares_tag_value(clients[process_id], placed, clients, tag_values)]
            if not apart:
                log.warning("task %s: no instance left whose %s differ from those of %s; its other standbys go to the "
                            "least loaded instances", task, ", ".join(tag_keys), ", ".join(placed))
            process_id = min(apart or free, key=lambda candidate: (instance_standbys[candidate], candidate))
            member = min(clients[process_id].members, key=lambda name: (member_load[name], name))
            standbys.setdefault(member, set()).add(task)
            member_load[member] += 1
            instance_standbys[process_id] += 1
            placed.append(process_id)
    return standbys


def _shares_tag_value(client: ClientState, placed: list[str], clients: Mapping[str, ClientState],
                      tag_values: Mapping[str, set[str | None]]) -> bool:
    """Whether ``client`` has, for a tag that still constrains, the value of an instance the task is placed on
    already. A tag constrains while it has more values among all instances than the task has placements."""
    return any(len(values) > len(placed) and client.tags.get(key) in {clients[other].tags.get(key) for other in placed}
               for key, values in tag_values.items())
