"""FetchSnapshot (KIP-630) in the Raft state machine: the leader sends a fetcher below its log start to its newest
snapshot and serves it in chunks (with Kafka's errors for what it cannot serve); the follower fetches it, restarts
its log at the snapshot's end and fetches the log from there. Then the same in the simulated quorum: a voter and an
observer that were down while the others snapshotted and trimmed catch up."""

from __future__ import annotations

import random

from kfk.backends.embedded.quorum_state import ElectionState
from kfk.backends.embedded.raft import OutboundRequest, OutboundResponse, RaftConfig, RaftReplica, messages
from kfk.backends.embedded.raft.log import OffsetAndEpoch
from kfk.errors import ErrorCode
from kfk.protocol.messages.fetch import FetchRequest
from kfk.protocol.messages.fetch_snapshot import FetchSnapshotRequest
from tests.backends.raft.simulation import InMemoryLog, InMemorySnapshots, InMemoryStore, Simulation
from tests.backends.raft.test_raft_replica import elect

CONFIG = RaftConfig(fetch_snapshot_max_bytes=2)
VOTERS = (1, 2, 3)
ENTRIES = [(1, "a"), (1, "b"), (1, "c"), (2, "d"), (2, "e")]
SNAPSHOT = OffsetAndEpoch(4, 2)  # covers a..d


def trimmed_leader() -> tuple[RaftReplica, InMemoryLog, InMemorySnapshots]:
    """Leader 1 of epoch 3 whose log starts at offset 4, behind its snapshot of a..d."""
    log, snapshots = InMemoryLog(), InMemorySnapshots()
    log.entries.extend(ENTRIES)
    log.flush()
    snapshots.add(SNAPSHOT, tuple(ENTRIES[:4]))
    log.trim(SNAPSHOT.offset, SNAPSHOT.epoch)
    store = InMemoryStore()
    store.state = ElectionState(2, -1, -1, VOTERS)
    raft = RaftReplica(1, VOTERS, CONFIG, log, store, random.Random(3), 0, snapshots=snapshots)
    elect(raft, 2 * CONFIG.election_timeout_ms)
    raft.take_outbox()
    assert raft.epoch == 3 and log.start == 4
    return raft, log, snapshots


def answer(raft: RaftReplica, request) -> object:
    raft.handle_request(5000, "token", request)
    (response,) = [item.response for item in raft.take_outbox() if isinstance(item, OutboundResponse)]
    return response


def fetch(raft: RaftReplica, offset: int, last_epoch: int):
    response = answer(raft, messages.fetch_request("", 2, raft.epoch, offset, last_epoch, 0))
    return messages.fetch_response_partition(response)


def fetch_snapshot(raft: RaftReplica, snapshot_id=SNAPSHOT, position: int = 0, epoch: int | None = None):
    request = messages.fetch_snapshot_request("", 2, raft.epoch if epoch is None else epoch, snapshot_id, position,
                                              1 << 20)
    return messages.fetch_snapshot_partition(answer(raft, request))


def test_the_leader_sends_a_fetch_its_log_no_longer_holds_to_its_snapshot() -> None:
    raft, _, _ = trimmed_leader()
    for offset, last_epoch in ((0, 0), (2, 1), (4, 1), (5, 1)):  # below the start; at it from another epoch;
        partition = fetch(raft, offset, last_epoch)              # past it with an epoch older than the snapshot's
        assert messages.response_snapshot_id(partition) == SNAPSHOT, (offset, last_epoch)
        assert partition.records is None and partition.log_start_offset == 4
    partition = fetch(raft, 4, 2)  # exactly at the snapshot's end: the log from there
    assert messages.response_snapshot_id(partition) is None
    assert partition.records == (4, [(2, "e"), (3, ("leader-change", 1))])


def test_the_leader_serves_its_snapshot_in_chunks_and_refuses_what_it_cannot_serve() -> None:
    raft, _, _ = trimmed_leader()
    chunks = []
    for position in (0, 2):
        partition = fetch_snapshot(raft, position=position)
        assert (partition.error_code, partition.size, partition.position) == (ErrorCode.NONE, 4, position)
        assert (partition.snapshot_id.end_offset, partition.snapshot_id.epoch) == SNAPSHOT
        chunks += partition.unaligned_records
    assert chunks == ENTRIES[:4]
    assert fetch_snapshot(raft, position=4).error_code == ErrorCode.POSITION_OUT_OF_RANGE
    assert fetch_snapshot(raft, position=-1).error_code == ErrorCode.POSITION_OUT_OF_RANGE
    assert fetch_snapshot(raft, snapshot_id=OffsetAndEpoch(3, 1)).error_code == ErrorCode.SNAPSHOT_NOT_FOUND
    stale = fetch_snapshot(raft, epoch=raft.epoch - 1)
    assert (stale.error_code, stale.current_leader.leader_id, stale.current_leader.leader_epoch) == \
        (ErrorCode.FENCED_LEADER_EPOCH, 1, raft.epoch)
    assert fetch_snapshot(raft, epoch=raft.epoch + 1).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH


def test_a_follower_fetches_the_snapshot_restarts_its_log_at_its_end_and_fetches_from_there() -> None:
    log, snapshots = InMemoryLog(), InMemorySnapshots()
    log.entries.extend(ENTRIES[:2])
    log.flush()
    raft = RaftReplica(2, VOTERS, CONFIG, log, InMemoryStore(), random.Random(3), 0, snapshots=snapshots)
    raft.handle_request(0, "token", messages.begin_quorum_epoch_request("", 1, 3, 2))
    raft.take_outbox()

    def next_request(now_ms: int) -> OutboundRequest:
        raft.poll(now_ms)
        (request,) = [item for item in raft.take_outbox() if isinstance(item, OutboundRequest)]
        return request

    first = next_request(1)
    assert isinstance(first.request, FetchRequest)
    raft.handle_response(2, first.request_id, messages.fetch_response(ErrorCode.NONE, 1, 3, 5, snapshot_id=SNAPSHOT))
    received = 0
    while received < SNAPSHOT.offset:
        request = next_request(3 + received)
        assert isinstance(request.request, FetchSnapshotRequest)
        partition = messages.fetch_snapshot_partition(request.request)
        assert partition.position == received and partition.current_leader_epoch == 3
        chunk = ENTRIES[received:received + 2]
        raft.handle_response(3 + received, request.request_id, messages.fetch_snapshot_response(
            ErrorCode.NONE, 1, 3, SNAPSHOT, SNAPSHOT.offset, received, chunk))
        received += len(chunk)
    assert snapshots.fetched == [SNAPSHOT] and snapshots.snapshots[SNAPSHOT] == tuple(ENTRIES[:4])
    assert (log.start, log.log_end_offset, log.last_fetched_epoch, raft.high_watermark) == (4, 4, 2, 4)
    after = next_request(10)
    partition = messages.fetch_partition(after.request)
    assert (partition.fetch_offset, partition.last_fetched_epoch) == (4, 2)


def test_a_follower_whose_snapshot_the_leader_dropped_fetches_the_log_again() -> None:
    log, snapshots = InMemoryLog(), InMemorySnapshots()
    raft = RaftReplica(2, VOTERS, CONFIG, log, InMemoryStore(), random.Random(3), 0, snapshots=snapshots)
    raft.handle_request(0, "token", messages.begin_quorum_epoch_request("", 1, 3, 2))
    raft.poll(1)
    (fetch_request,) = [item for item in raft.take_outbox() if isinstance(item, OutboundRequest)]
    raft.handle_response(2, fetch_request.request_id,
                         messages.fetch_response(ErrorCode.NONE, 1, 3, 5, snapshot_id=SNAPSHOT))
    raft.poll(3)
    (snapshot_request,) = [item for item in raft.take_outbox() if isinstance(item, OutboundRequest)]
    assert isinstance(snapshot_request.request, FetchSnapshotRequest) and snapshots.partial is not None
    raft.handle_response(4, snapshot_request.request_id,
                         messages.fetch_snapshot_response(ErrorCode.SNAPSHOT_NOT_FOUND, 1, 3))
    assert snapshots.partial is None
    raft.poll(4 + CONFIG.retry_backoff_ms)
    (again,) = [item for item in raft.take_outbox() if isinstance(item, OutboundRequest)]
    assert isinstance(again.request, FetchRequest)


def test_replicas_down_while_the_others_trimmed_catch_up_through_fetch_snapshot() -> None:
    simulation = Simulation(seed=11, voters=3, observers=1, config=RaftConfig(fetch_snapshot_max_bytes=3))
    simulation.run_until(5_000)
    (leader,) = simulation.leaders()
    away = [node for node in simulation.voter_ids if node != leader.node_id][0]
    for node in (away, 100):
        simulation.crash(node, lose_unflushed=False)
    for _ in range(30):
        simulation.append(leader.node_id)
        simulation.run_until(simulation.now_ms + 30)
    simulation.run_until(simulation.now_ms + 1_000)  # the followers learn the last high watermark
    live = [node for node in simulation.voter_ids if node != away]
    snapshot_ids = {node: simulation.snapshot(node) for node in live}
    assert all(simulation.logs[node].start >= 30 for node in live), snapshot_ids
    for node in (away, 100):
        simulation.start(node)
    simulation.run_until(simulation.now_ms + 3_000)
    leader_snapshot = snapshot_ids[leader.node_id]
    high_watermark = leader.high_watermark
    for node in (away, 100):
        assert simulation.snapshots[node].fetched == [leader_snapshot], node
        assert simulation.logs[node].start == leader_snapshot.offset
        assert simulation.replicas[node].high_watermark == high_watermark
        assert simulation.view(node)[:high_watermark] == simulation.committed[:high_watermark]
