"""A simulated quorum for the Raft state machine: in-memory logs and quorum-state stores, a network that loses,
delays and reorders messages and can be partitioned, and replicas that crash and restart (keeping or losing what
they had not flushed). Every replica is a real RaftReplica; only the log, the store and the wire are simulated.

After every event the invariants are checked (`Simulation.check`):
- at most one leader per epoch, ever;
- what was committed (below some replica's high watermark) is never lost or changed: every replica's log agrees
  with the committed prefix up to its own high watermark, and a new leader's log holds every entry committed in the
  epochs before its own.
"""

from __future__ import annotations

import heapq
import itertools
import random
import uuid
from dataclasses import dataclass, field
from typing import Any, Sequence

from kfk.backends.embedded.quorum_state import ElectionState
from kfk.backends.embedded.raft import OutboundRequest, RaftConfig, RaftReplica
from kfk.backends.embedded.raft.log import OffsetAndEpoch
from kfk.backends.embedded.raft.voter_set import Voter, VoterSet, VoterSetHistory
from kfk.protocol.messages.add_raft_voter import AddRaftVoterRequest
from kfk.protocol.messages.remove_raft_voter import RemoveRaftVoterRequest

#: A simulated batch as the in-memory log holds it: (epoch, value); the offset is its index (one record a batch).
Entry = tuple[int, Any]
_READ_ENTRIES = 8


class InMemoryLog:
    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.flushed = 0

    @property
    def log_end_offset(self) -> int:
        return len(self.entries)

    @property
    def last_fetched_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else 0

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        found: OffsetAndEpoch | None = None
        for offset, (entry_epoch, _) in enumerate(self.entries):
            if entry_epoch > epoch:
                return found if found is not None else OffsetAndEpoch(0, 0)
            found = OffsetAndEpoch(offset + 1, entry_epoch)
        return found if found is not None else OffsetAndEpoch(0, 0)

    def append_as_leader(self, records: Sequence[Any], epoch: int) -> int:
        assert len(records) == 1
        self.entries.append((epoch, records[0]))
        return len(self.entries) - 1

    def append_leader_change(self, epoch: int, leader_id: int, voters: Sequence[int]) -> int:
        self.entries.append((epoch, ("leader-change", leader_id)))
        return len(self.entries) - 1

    def append_voters(self, epoch: int, voters: VoterSet) -> int:
        self.entries.append((epoch, ("voters", voters)))
        return len(self.entries) - 1

    def append_as_follower(self, records: tuple[int, list[Entry]]) -> list[tuple[int, VoterSet]]:
        base_offset, entries = records
        assert base_offset == len(self.entries), (base_offset, len(self.entries))
        assert all(entries[i][0] <= entries[i + 1][0] for i in range(len(entries) - 1))
        assert not self.entries or not entries or self.entries[-1][0] <= entries[0][0]
        self.entries.extend(entries)
        return [(base_offset + index, value[1]) for index, (_, value) in enumerate(entries)
                if isinstance(value, tuple) and value[0] == "voters"]

    def voter_sets(self) -> list[tuple[int, VoterSet]]:
        return [(offset, value[1]) for offset, (_, value) in enumerate(self.entries)
                if isinstance(value, tuple) and value[0] == "voters"]

    def read(self, start_offset: int, max_bytes: int) -> tuple[int, list[Entry]] | None:
        if start_offset >= len(self.entries):
            return None
        return start_offset, self.entries[start_offset:start_offset + _READ_ENTRIES]

    def truncate_to(self, offset: int) -> None:
        del self.entries[offset:]
        self.flushed = min(self.flushed, offset)

    def flush(self) -> None:
        self.flushed = len(self.entries)

    def crash(self, lose_unflushed: bool) -> None:
        if lose_unflushed:
            del self.entries[self.flushed:]
        self.flushed = len(self.entries)


class InMemoryStore:
    """The quorum-state file: durable as soon as written, as the real store is (fsync and rename)."""

    def __init__(self) -> None:
        self.state: ElectionState | None = None

    def read(self) -> ElectionState | None:
        return self.state

    def write(self, state: ElectionState) -> None:
        self.state = state


@dataclass(order=True)
class _Event:
    time_ms: int
    seq: int
    kind: str = field(compare=False)
    node: int = field(compare=False)
    payload: Any = field(compare=False, default=None)


class InvariantViolation(AssertionError):
    pass


class Simulation:
    def __init__(self, seed: int, voters: int = 3, observers: int = 0, config: RaftConfig = RaftConfig(),
                 loss: float = 0.0, max_delay_ms: int = 20, dynamic: bool = False, spares: int = 0) -> None:
        """`dynamic`: a KIP-853 quorum, its first voters formatted with them (--initial-controllers), and `spares`
        controllers formatted with none (--no-initial-controllers), which find the leader through the first voters
        as bootstrap servers and can be added as voters (`change_voters`)."""
        self.rng = random.Random(seed)
        self.seed = seed
        self.config = config
        self.dynamic = dynamic
        self.voter_ids = list(range(1, voters + 1))
        self.spare_ids = list(range(200, 200 + spares)) if dynamic else []
        self.node_ids = self.voter_ids + list(range(100, 100 + observers)) + self.spare_ids
        #: The answers to the voter changes asked (by request id): error code.
        self.voter_change_results: dict[int, int] = {}
        self._admin_requests = itertools.count(1)
        self.loss = loss
        self.max_delay_ms = max_delay_ms
        self.now_ms = 0
        self.logs = {node: InMemoryLog() for node in self.node_ids}
        self.stores = {node: InMemoryStore() for node in self.node_ids}
        self.replicas: dict[int, RaftReplica | None] = {}
        self.incarnation = {node: 0 for node in self.node_ids}
        self._events: list[_Event] = []
        self._seq = itertools.count()
        #: Pairs of nodes that cannot talk (both directions).
        self.cut: set[frozenset[int]] = set()
        self.leaders_by_epoch: dict[int, int] = {}
        #: The committed prefix of the log, as far as any replica has known it committed.
        self.committed: list[Entry] = []
        self.appended_values = itertools.count()
        self.events_run = 0
        self._poll_due: dict[int, tuple[int, int]] = {}
        #: Polls per node at the current time, to catch a replica that keeps asking to be polled now.
        self._polls_ms = -1
        self._polls_at: dict[int, int] = {}
        for node in self.node_ids:
            self.start(node)

    # -- replicas ----------------------------------------------------------------------------------------------------

    def start(self, node: int) -> None:
        self.incarnation[node] += 1
        if self.dynamic:
            initial = VoterSet() if node in self.spare_ids else VoterSet.of(self.voter(voter) for voter in self.voter_ids)
            self.replicas[node] = RaftReplica(
                node, VoterSetHistory(initial, self.logs[node].voter_sets()), self.config, self.logs[node],
                self.stores[node], random.Random(self.rng.random()), self.now_ms, dynamic=True,
                directory_id=self.voter(node).directory_id, listeners=self.voter(node).listeners,
                listener_name="CONTROLLER",
                bootstrap_servers=[self.voter(voter).endpoint(None) for voter in self.voter_ids])
        else:
            self.replicas[node] = RaftReplica(node, self.voter_ids, self.config, self.logs[node], self.stores[node],
                                              random.Random(self.rng.random()), self.now_ms)
        if len(self.voter_ids) == 1 and node in self.voter_ids and not self.dynamic:
            self.replicas[node].run_election(self.now_ms)  # a sole voter runs when its owner asks
        self._after(node)
        self.check(node)

    @staticmethod
    def voter(node: int) -> Voter:
        """Node `node` as a voter: its directory id and its controller listener (the host names the node)."""
        return Voter(node, uuid.UUID(int=node), (("CONTROLLER", f"node-{node}", 9093),))

    def change_voters(self, leader: int, add: int | None = None, remove: int | None = None) -> int | None:
        """Ask `leader` to add or remove a voter, as `kfk metadata-quorum` would; the request id whose answer
        `voter_change_results` gets."""
        replica = self.replicas[leader]
        if replica is None:
            return None
        request_id = next(self._admin_requests)
        if add is not None:
            voter = self.voter(add)
            request = AddRaftVoterRequest(voter_id=add, voter_directory_id=voter.directory_id, listeners=[
                AddRaftVoterRequest.Listener(name=name, host=host, port=port) for name, host, port in voter.listeners])
        else:
            request = RemoveRaftVoterRequest(voter_id=remove, voter_directory_id=self.voter(remove).directory_id)
        replica.handle_request(self.now_ms, ("admin", 0, request_id), request)
        self._after(leader)
        self.check(leader)
        return request_id

    def crash(self, node: int, lose_unflushed: bool) -> None:
        self.replicas[node] = None
        self.logs[node].crash(lose_unflushed)

    def leaders(self) -> list[RaftReplica]:
        return [replica for replica in self.replicas.values() if replica is not None and replica.is_leader]

    def append(self, node: int) -> int | None:
        replica = self.replicas[node]
        if replica is None or not replica.is_leader:
            return None
        value = next(self.appended_values)
        offset = replica.append(self.now_ms, [value])
        self._after(node)
        self.check(node)
        return offset

    # -- the network -------------------------------------------------------------------------------------------------

    def _schedule(self, time_ms: int, kind: str, node: int, payload: Any = None) -> None:
        heapq.heappush(self._events, _Event(time_ms, next(self._seq), kind, node, payload))

    def _deliverable(self, source: int, destination: int) -> bool:
        return frozenset((source, destination)) not in self.cut and self.rng.random() >= self.loss

    def _after(self, node: int) -> None:
        """Collect what `node` wants sent and when it wants to be polled."""
        replica = self.replicas[node]
        if replica is None:
            return
        self._send(node)
        # One timer per replica, as the driver has: an earlier poll event still queued is stale.
        self._poll_due[node] = replica.poll(self.now_ms), next(self._seq)
        self._schedule(self._poll_due[node][0], "poll", node, self._poll_due[node][1])
        self._send(node)  # what the poll itself produced

    def _send(self, node: int) -> None:
        incarnation = self.incarnation[node]
        for item in self.replicas[node].take_outbox():
            if isinstance(item, OutboundRequest):
                destination, payload, kind = item.destination, (node, incarnation, item), "request"
            else:
                destination, source_incarnation, request_id = item.token
                if destination == "admin":
                    self.voter_change_results[request_id] = item.response.error_code
                    continue
                payload, kind = (source_incarnation, request_id, item.response), "response"
            if destination < 0 or destination not in self.node_ids:
                # A bootstrap server or a leader known by its endpoint: the host names the node.
                endpoint = self.replicas[node].endpoint(destination)
                assert endpoint is not None, f"node {node} sends to {destination}, whose endpoint it does not know"
                destination = int(endpoint.host.removeprefix("node-"))
            if self._deliverable(node, destination):
                self._schedule(self.now_ms + self.rng.randint(1, self.max_delay_ms), kind, destination, payload)

    def run_until(self, time_ms: int) -> None:
        while self._events and self._events[0].time_ms <= time_ms:
            event = heapq.heappop(self._events)
            self.now_ms = max(self.now_ms, event.time_ms)
            replica = self.replicas.get(event.node)
            if replica is None:
                continue
            if event.kind == "poll":
                if self._poll_due.get(event.node, (0, None))[1] != event.payload:
                    continue
                if self._polls_ms != self.now_ms:
                    self._polls_ms, self._polls_at = self.now_ms, {}
                polls = self._polls_at[event.node] = self._polls_at.get(event.node, 0) + 1
                if polls > 100:
                    self._fail(f"node {event.node} asks to be polled again and again at the same time (a busy loop)")
            elif event.kind == "request":
                source, source_incarnation, request = event.payload
                replica.handle_request(self.now_ms, (source, source_incarnation, request.request_id),
                                       request.request)
            elif event.kind == "response":
                incarnation, request_id, response = event.payload
                if incarnation != self.incarnation[event.node]:
                    continue
                replica.handle_response(self.now_ms, request_id, response)
            self._after(event.node)
            self.events_run += 1
            self.check(event.node)
        self.now_ms = max(self.now_ms, time_ms)

    # -- invariants --------------------------------------------------------------------------------------------------

    def _fail(self, message: str) -> None:
        raise InvariantViolation(f"seed {self.seed} at {self.now_ms} ms: {message}")

    def check(self, node: int) -> None:
        replica = self.replicas[node]
        if replica is None:
            return
        entries = self.logs[node].entries
        if replica.is_leader and replica.epoch not in self.leaders_by_epoch:
            # Leader completeness: a new leader holds every entry committed in the epochs before its own.
            earlier = [entry for entry in self.committed if entry[0] < replica.epoch]
            if entries[:len(earlier)] != earlier:
                self._fail(f"leader {node} of epoch {replica.epoch} lacks committed entries "
                           f"({len(entries)} entries, {len(earlier)} committed before its epoch)")
        if replica.is_leader:
            leader = self.leaders_by_epoch.setdefault(replica.epoch, node)
            if leader != node:
                self._fail(f"two leaders in epoch {replica.epoch}: {leader} and {node}")
        high_watermark = replica.high_watermark
        if high_watermark > len(entries):
            self._fail(f"node {node}'s high watermark {high_watermark} is past its log end {len(entries)}")
        known = min(high_watermark, len(self.committed))
        if entries[:known] != self.committed[:known]:
            self._fail(f"node {node}'s log differs from the committed prefix below offset {known}")
        if high_watermark > len(self.committed):
            self.committed.extend(entries[len(self.committed):high_watermark])
