"""A simulated quorum for the Raft state machine: in-memory logs and quorum-state stores, a network that loses,
delays and reorders messages and can be partitioned, and replicas that crash and restart (keeping or losing what
they had not flushed). Every replica is a real RaftReplica; only the log, the store, the snapshots and the wire are
simulated. `snapshot(node)` has a replica snapshot its committed prefix and trim its log behind it, as the backend
does: a replica that was away meanwhile then catches up through FetchSnapshot (in chunks of
`fetch_snapshot_max_bytes` entries).

After every event the invariants are checked (`Simulation.check`):
- at most one leader per epoch, ever;
- what was committed (below some replica's high watermark) is never lost or changed: every replica's log agrees
  with the committed prefix up to its own high watermark, and a new leader's log holds every entry committed in the
  epochs before its own;
- a replica's log (its newest snapshot's entries, then what its log holds from its start) is what is checked, so a
  snapshot, fetched or written, holds exactly the committed entries it claims;
- in a dynamic quorum (KIP-853: `dynamic`, voters added and removed with `change_voters`), a replica's voter set is
  the newest in that log (snapshot included): truncations, and snapshots fetched, change it with the log.
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
    """`entries` is indexed by offset; below `start` (trimmed behind a snapshot) they are None."""

    def __init__(self) -> None:
        self.entries: list[Entry | None] = []
        self.flushed = 0
        self.start = 0
        #: The epoch of the snapshot the log starts at.
        self.start_epoch = 0

    @property
    def log_start_offset(self) -> int:
        return self.start

    @property
    def log_end_offset(self) -> int:
        return len(self.entries)

    @property
    def last_fetched_epoch(self) -> int:
        return self.entries[-1][0] if len(self.entries) > self.start else self.start_epoch

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        # Below every epoch the log still holds: the end of the snapshot it starts at (Kafka's override).
        below = OffsetAndEpoch(self.start, self.start_epoch) if self.start else OffsetAndEpoch(0, 0)
        found: OffsetAndEpoch | None = None
        for offset in range(self.start, len(self.entries)):
            entry_epoch = self.entries[offset][0]
            if entry_epoch > epoch:
                return found if found is not None else below
            found = OffsetAndEpoch(offset + 1, entry_epoch)
        return found if found is not None else below

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
        assert not entries or self.last_fetched_epoch <= entries[0][0]
        self.entries.extend(entries)
        return [(base_offset + index, value[1]) for index, (_, value) in enumerate(entries)
                if isinstance(value, tuple) and value[0] == "voters"]

    def voter_sets(self) -> list[tuple[int, VoterSet]]:
        return [(offset, self.entries[offset][1][1]) for offset in range(self.start, len(self.entries))
                if isinstance(self.entries[offset][1], tuple) and self.entries[offset][1][0] == "voters"]

    def read(self, start_offset: int, max_bytes: int) -> tuple[int, list[Entry]] | None:
        assert start_offset >= self.start, (start_offset, self.start)
        if start_offset >= len(self.entries):
            return None
        return start_offset, self.entries[start_offset:start_offset + _READ_ENTRIES]

    def truncate_to(self, offset: int) -> None:
        assert offset >= self.start, (offset, self.start)
        del self.entries[offset:]
        self.flushed = min(self.flushed, offset)

    def truncate_fully_and_start_at(self, offset: int, epoch: int) -> None:
        self.entries = [None] * offset
        self.flushed = self.start = offset
        self.start_epoch = epoch

    def trim(self, offset: int, epoch: int) -> None:
        """Drop the entries below `offset` (a snapshot of `epoch` ends there)."""
        assert self.start <= offset <= self.flushed
        self.entries[:offset] = [None] * offset
        self.start, self.start_epoch = offset, epoch

    def flush(self) -> None:
        self.flushed = len(self.entries)

    def crash(self, lose_unflushed: bool) -> None:
        if lose_unflushed:
            del self.entries[self.flushed:]
        self.flushed = len(self.entries)


class SnapshotChunk(list):
    """A chunk of an in-memory snapshot: a slice of its entries, naming the voter set the snapshot holds (a real
    snapshot has it in its header batch)."""

    def __init__(self, entries: Sequence[Entry], voters: VoterSet | None) -> None:
        super().__init__(entries)
        self.voters = voters


class InMemorySnapshots:
    """A replica's snapshots (durable once complete), each the tuple of entries it covers and, in a dynamic quorum,
    the voter set as of its end; the one being fetched is lost in a crash. A chunk is a slice of entries,
    `max_bytes` counting entries."""

    def __init__(self) -> None:
        self.snapshots: dict[OffsetAndEpoch, tuple[Entry, ...]] = {}
        self.voters: dict[OffsetAndEpoch, VoterSet | None] = {}
        self.partial: tuple[OffsetAndEpoch, list[Entry]] | None = None
        self._partial_voters: VoterSet | None = None
        self.fetched_voters: VoterSet | None = None
        #: Every snapshot this replica completed fetching, in order.
        self.fetched: list[OffsetAndEpoch] = []

    @property
    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return max(self.snapshots, default=None)

    def add(self, snapshot_id: OffsetAndEpoch, entries: tuple[Entry, ...], voters: VoterSet | None = None) -> None:
        """A snapshot written (or fetched): the older ones go, as the log is trimmed to it."""
        self.snapshots = {snapshot_id: entries}
        self.voters = {snapshot_id: voters}

    def read_chunk(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int):
        entries = self.snapshots.get(snapshot_id)
        if entries is None:
            return None
        return SnapshotChunk(entries[position:position + max_bytes], self.voters[snapshot_id]), len(entries)

    def begin_fetch(self, snapshot_id: OffsetAndEpoch) -> None:
        self.partial = (snapshot_id, [])
        self._partial_voters = None

    @property
    def fetched_size(self) -> int:
        return len(self.partial[1])

    def append_fetched(self, chunk: list[Entry]) -> None:
        self.partial[1].extend(chunk)
        self._partial_voters = getattr(chunk, "voters", None)

    def complete_fetch(self) -> bool:
        snapshot_id, entries = self.partial
        self.partial = None
        if len(entries) != snapshot_id.offset or entries[-1][0] != snapshot_id.epoch:
            return False
        self.add(snapshot_id, tuple(entries), self._partial_voters)
        self.fetched_voters = self._partial_voters
        self.fetched.append(snapshot_id)
        return True

    def abort_fetch(self) -> None:
        self.partial = None

    def crash(self) -> None:
        self.partial = None


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
        self.snapshots = {node: InMemorySnapshots() for node in self.node_ids}
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
        snapshots = self.snapshots[node]
        if self.dynamic:
            log = self.logs[node]
            if log.start:  # the voter set as of the log's start: that of the snapshot it starts at
                initial = snapshots.voters[OffsetAndEpoch(log.start, log.start_epoch)]
            elif node in self.spare_ids:  # or the one the node was formatted with
                initial = VoterSet()
            else:
                initial = VoterSet.of(self.voter(voter) for voter in self.voter_ids)
            self.replicas[node] = RaftReplica(
                node, VoterSetHistory(initial, log.voter_sets()), self.config, log, self.stores[node],
                random.Random(self.rng.random()), self.now_ms, snapshots=snapshots, dynamic=True,
                directory_id=self.voter(node).directory_id, listeners=self.voter(node).listeners,
                listener_name="CONTROLLER",
                bootstrap_servers=[self.voter(voter).endpoint(None) for voter in self.voter_ids])
        else:
            self.replicas[node] = RaftReplica(node, self.voter_ids, self.config, self.logs[node], self.stores[node],
                                              random.Random(self.rng.random()), self.now_ms, snapshots=snapshots)
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
        self.snapshots[node].crash()

    def snapshot(self, node: int) -> OffsetAndEpoch | None:
        """`node` snapshots what it knows committed and trims its log behind it (the backend's policy); the
        snapshot's id, or None when there is nothing new to snapshot."""
        replica, log = self.replicas[node], self.logs[node]
        if replica is None or replica.high_watermark <= log.start:
            return None
        entries = tuple(self.view(node)[:replica.high_watermark])
        snapshot_id = OffsetAndEpoch(len(entries), entries[-1][0])
        # A dynamic quorum's snapshot holds the voter set as of its end, as the backend writes it.
        voters = replica.voter_history.as_of(snapshot_id.offset) if self.dynamic else None
        self.snapshots[node].add(snapshot_id, entries, voters)
        log.trim(snapshot_id.offset, snapshot_id.epoch)
        self.check(node)
        return snapshot_id

    def view(self, node: int) -> list[Entry]:
        """The entries `node` holds: those of the snapshot its log starts at, then its log's."""
        log = self.logs[node]
        if not log.start:
            return list(log.entries)
        snapshot = self.snapshots[node].snapshots.get(OffsetAndEpoch(log.start, log.start_epoch))
        if snapshot is None:
            self._fail(f"node {node}'s log starts at {log.start} but it has no snapshot ending there")
        return list(snapshot) + log.entries[log.start:]

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
        entries = self.view(node)
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
        if self.dynamic:
            newest = next((value[1] for _, value in reversed(entries)
                           if isinstance(value, tuple) and value[0] == "voters"), None)
            if newest is not None and replica.voter_set != newest:
                self._fail(f"node {node}'s voter set {sorted(replica.voters)} is not the newest in its log "
                           f"({sorted(newest.ids)})")
        high_watermark = replica.high_watermark
        if high_watermark > len(entries):
            self._fail(f"node {node}'s high watermark {high_watermark} is past its log end {len(entries)}")
        known = min(high_watermark, len(self.committed))
        if entries[:known] != self.committed[:known]:
            self._fail(f"node {node}'s log differs from the committed prefix below offset {known}")
        if high_watermark > len(self.committed):
            self.committed.extend(entries[len(self.committed):high_watermark])
