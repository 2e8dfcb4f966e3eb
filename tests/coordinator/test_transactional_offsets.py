"""Transactional offset commits (TxnOffsetCommit): pending in the producer's transaction until its COMMIT marker
(visible) or ABORT marker (gone), OffsetFetch require_stable, the TxnOffsetCommit checks, expiry, and loads from
real __consumer_offsets logs (transactional batches and real control batches) that show the same view.

The coordinator writes into real Logs (one per partition, in a tmp dir) the way the broker does: its writes become
the batches kfk.coordinator.runtime builds, appended through Partition.append_to_leader_log as the coordinator appends
(validated, offsets assigned, the producer's epoch checked); markers are real control batches appended the same way,
followed by `complete_transaction`, as the transaction coordinator's WriteTxnMarkers does. Time is the harness's
manual clock (`now_ms`, moved by `advance`)."""

from __future__ import annotations

import asyncio
import os
import tempfile
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfk.common.internal_topics import GROUP_METADATA_TOPIC_NAME
from kfk.common.structs import TopicPartition
from kfk.config import LogConfig
from kfk.coordinator.group.config import GroupCoordinatorConfig
from kfk.coordinator.group.group_coordinator import OffsetCommitPartition
from kfk.coordinator.group.service import GroupCoordinatorService, replay_entry
from kfk.coordinator.runtime import batches_for, read_chunk
from kfk.errors import ErrorCode, KafkaError
from kfk.metadata.image import MetadataImage
from kfk.records import (
    ControlRecordType,
    EndTransactionMarker,
    LeaderChangeMessage,
    build_end_transaction_marker_batch,
    build_leader_change_batch,
    iter_batches,
)
from kfk.replication.partition import Partition
from kfk.storage.fetch_data_info import FetchIsolation
from kfk.storage.log import Log
from kfk.storage.producer_state import AppendOrigin
from tests.coordinator.harness import Answers, Harness
from tests.coordinator.test_classic_group_protocol import group_of, stable_group
from tests.replication.conftest import topic_records

LEADER_EPOCH = 0
PID, PID2, PID3 = 1000, 2000, 3000


def open_offsets_partition(directory: str, partition: int, log_config: LogConfig, now_ms: int) -> Partition:
    path = os.path.join(directory, f"{GROUP_METADATA_TOPIC_NAME}-{partition}")
    return Partition(TopicPartition(GROUP_METADATA_TOPIC_NAME, partition), uuid.UUID(int=1), 1,
                     Log.open(path, log_config, now_ms=now_ms))


def append_as_coordinator(hosted: Partition, batch: bytes, now_ms: int) -> ErrorCode:
    """An append as the broker makes it for a coordinator (the replica manager's error code on failure)."""
    try:
        hosted.append_to_leader_log(batch, LEADER_EPOCH, now_ms, AppendOrigin.COORDINATOR)
    except KafkaError as error:
        return error.error_code
    return ErrorCode.NONE


def marker_batch(producer_id: int, producer_epoch: int, commit: bool, timestamp: int) -> bytes:
    control_type = ControlRecordType.COMMIT if commit else ControlRecordType.ABORT
    return build_end_transaction_marker_batch(
        base_offset=0, timestamp=timestamp, partition_leader_epoch=LEADER_EPOCH, producer_id=producer_id,
        producer_epoch=producer_epoch, marker=EndTransactionMarker(control_type, coordinator_epoch=0))


class LogHarness(Harness):
    def __init__(self, directory: str, *, log_properties: dict[str, object] | None = None,
                 now_ms: int | None = None, **config) -> None:
        super().__init__(load=False, **config)
        self.directory = directory
        self.log_properties = log_properties or {}
        self.log_config = LogConfig.from_properties({"cleanup.policy": "compact", **self.log_properties})
        self.overrides = config
        self.reloads: list[LogHarness] = []
        if now_ms is not None:
            self.now_ms = now_ms
        self.partitions = {p: open_offsets_partition(directory, p, self.log_config, self.now_ms) for p in self.log}
        self.load()

    def load(self) -> None:
        """Replay every partition's log as the service's load does."""
        for partition, hosted in self.partitions.items():
            self.coordinator.begin_loading(partition)
            offset = hosted.log.log_start_offset
            while offset < hosted.log.log_end_offset:
                entries, offset = read_chunk(hosted.log, offset)
                for entry in entries:
                    replay_entry(self.coordinator, partition, entry, self.now_ms)
            self.coordinator.complete_loading(partition, self.now_ms)

    def reload(self) -> LogHarness:
        """Close the logs; a new coordinator on the reopened logs (a restart, or another broker leading them)."""
        for hosted in self.partitions.values():
            hosted.log.close()
        fresh = LogHarness(self.directory, log_properties=self.log_properties, now_ms=self.now_ms,
                           **self.overrides)
        self.reloads.append(fresh)
        return fresh

    def close(self) -> None:
        for hosted in self.partitions.values():
            hosted.log.close()
        for fresh in self.reloads:
            fresh.close()

    def append(self, partition: int, batch: bytes) -> ErrorCode:
        return append_as_coordinator(self.partitions[partition], batch, self.now_ms)

    def flush(self, error: ErrorCode = ErrorCode.NONE) -> None:
        """Append every pending write to its log as the service does (or fail it with `error`), then complete it."""
        writes = self.held + self.coordinator.take_writes()
        self.held = []
        while writes:
            for partition in dict.fromkeys(write.partition for write in writes):
                queued = [write for write in writes if write.partition == partition]
                for batch_writes, batch in batches_for(queued, self.now_ms):
                    outcome = error if error != ErrorCode.NONE else self.append(partition, batch)
                    for write in batch_writes:
                        self.coordinator.complete_write(write, outcome, self.now_ms)
            writes = self.coordinator.take_writes()

    def txn_commit(self, group_id: str, offsets: dict[tuple[str, int], int], *, producer_id: int = PID,
                   producer_epoch: int = 0, member_id: str = "", generation_id: int = -1,
                   group_instance_id: str | None = None, metadata: str = "") -> Answers:
        answers = Answers()
        partitions = [OffsetCommitPartition(topic, partition, offset, committed_metadata=metadata)
                      for (topic, partition), offset in offsets.items()]
        self.coordinator.commit_transactional_offsets(group_id, producer_id, producer_epoch, member_id,
                                                      group_instance_id, generation_id, partitions, self.now_ms,
                                                      answers)
        self.after()
        return answers

    def marker(self, group_id: str, commit: bool, *, producer_id: int = PID, producer_epoch: int = 0) -> None:
        """The transaction coordinator's marker in the group's partition, then the coordinator told of it."""
        partition = self.coordinator.partition_for(group_id)
        assert self.append(partition, marker_batch(producer_id, producer_epoch, commit, self.now_ms)) == ErrorCode.NONE
        self.coordinator.complete_transaction(partition, producer_id, commit)
        self.after()

    def stable_fetch(self, group_id: str, topic: str, partition: int) -> tuple[int | None, ErrorCode]:
        error, topics = self.coordinator.fetch_offsets(group_id, [(topic, [partition])], require_stable=True)
        assert error == ErrorCode.NONE
        (_, offset, partition_error), = topics[0][1]
        return (None if offset is None else offset.committed_offset), partition_error


@pytest.fixture
def h(tmp_path):
    harness = LogHarness(str(tmp_path))
    yield harness
    harness.close()


def view(h: LogHarness, group_id: str, keys: list[tuple[str, int]]) -> dict:
    """What OffsetFetch answers for the keys, plain and with require_stable."""
    return {(topic, partition): (h.committed(group_id, topic, partition), h.stable_fetch(group_id, topic, partition))
            for topic, partition in keys}


def test_pending_until_the_commit_marker_then_visible(h: LogHarness) -> None:
    answer = h.txn_commit("g", {("t", 0): 10, ("t", 1): 20})
    assert answer.only == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.NONE}
    assert h.committed("g", "t", 0) is None
    assert h.stable_fetch("g", "t", 0) == (None, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    assert h.stable_fetch("g", "t", 2) == (None, ErrorCode.NONE)  # nothing pending there
    h.marker("g", commit=True)
    assert h.committed("g", "t", 0) == 10 and h.committed("g", "t", 1) == 20
    assert h.stable_fetch("g", "t", 0) == (10, ErrorCode.NONE)


def test_records_go_out_as_a_transactional_batch_of_the_producer(h: LogHarness) -> None:
    h.commit("plain", {("t", 0): 1})
    h.txn_commit("g", {("t", 0): 5}, producer_id=PID, producer_epoch=3)
    hosted = h.partitions[h.coordinator.partition_for("g")]
    data = hosted.log.read(0, 1 << 20, FetchIsolation.LOG_END, True).records.read_bytes()
    (batch,) = [b for b in iter_batches(data) if b.producer_id == PID]
    assert batch.is_transactional and not batch.is_control and batch.producer_epoch == 3
    # The open transaction holds the partition's last stable offset, as any producer's would.
    assert hosted.log.first_unstable_offset == batch.base_offset


def test_abort_marker_drops_them_and_the_old_offset_stays(h: LogHarness) -> None:
    h.commit("g", {("t", 0): 5})
    h.txn_commit("g", {("t", 0): 10, ("u", 0): 1})
    h.marker("g", commit=False)
    assert h.committed("g", "t", 0) == 5 and h.committed("g", "u", 0) is None
    assert h.stable_fetch("g", "t", 0) == (5, ErrorCode.NONE)


def test_pending_offsets_of_a_deleted_topic_go_and_its_commit_marker_does_not_bring_them(h: LogHarness) -> None:
    h.txn_commit("g", {("gone", 0): 10, ("kept", 0): 3})
    h.coordinator.on_partitions_deleted({("gone", 0)})
    h.after()
    assert h.stable_fetch("g", "gone", 0) == (None, ErrorCode.NONE)
    assert h.stable_fetch("g", "kept", 0) == (None, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    h.marker("g", commit=True)
    expected = {("gone", 0): (None, (None, ErrorCode.NONE)), ("kept", 0): (3, (3, ErrorCode.NONE))}
    assert view(h, "g", list(expected)) == expected
    assert view(h.reload(), "g", list(expected)) == expected


def test_markers_of_other_producers_or_partitions_change_nothing(h: LogHarness) -> None:
    h.txn_commit("g", {("t", 0): 10})
    h.marker("g", commit=True, producer_id=PID2)
    other = next(group for group in ("a", "b", "c", "d", "e") if h.coordinator.partition_for(group) !=
                 h.coordinator.partition_for("g"))
    h.marker(other, commit=True)
    assert h.stable_fetch("g", "t", 0) == (None, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    h.marker("g", commit=True)
    assert h.committed("g", "t", 0) == 10


def test_one_transaction_commits_offsets_of_several_groups_per_partition_marker(h: LogHarness) -> None:
    a, b = "a", next(g for g in ("b", "c", "d", "e", "f") if h.coordinator.partition_for(g) !=
                     h.coordinator.partition_for("a"))
    h.txn_commit(a, {("t", 0): 1})
    h.txn_commit(b, {("t", 0): 2})
    h.marker(a, commit=True)
    assert h.committed(a, "t", 0) == 1 and h.committed(b, "t", 0) is None
    h.marker(b, commit=False)
    assert h.committed(b, "t", 0) is None and h.stable_fetch(b, "t", 0) == (None, ErrorCode.NONE)


def test_the_later_record_of_a_partition_wins_when_the_transaction_commits(h: LogHarness) -> None:
    # A regular commit after the transactional one: it stays (Kafka keeps the record with the higher offset).
    h.txn_commit("g", {("t", 0): 10, ("t", 1): 11})
    h.commit("g", {("t", 0): 7})
    h.marker("g", commit=True)
    assert h.committed("g", "t", 0) == 7 and h.committed("g", "t", 1) == 11
    # A regular commit before it: the transaction's offset replaces it.
    h.commit("g", {("t", 2): 1})
    h.txn_commit("g", {("t", 2): 30}, producer_id=PID2)
    h.marker("g", commit=True, producer_id=PID2)
    assert h.committed("g", "t", 2) == 30
    # Two producers: the later record wins whichever transaction commits first.
    h.txn_commit("g", {("t", 3): 100}, producer_id=PID3)
    h.txn_commit("g", {("t", 3): 200}, producer_id=PID)
    h.marker("g", commit=True, producer_id=PID)
    h.marker("g", commit=True, producer_id=PID3)
    assert h.committed("g", "t", 3) == 200
    keys = [("t", p) for p in range(4)]
    assert view(h.reload(), "g", keys) == view(h, "g", keys)


def test_reload_shows_committed_hides_aborted_and_keeps_open_ones_pending(h: LogHarness) -> None:
    h.commit("g", {("t", 0): 1})
    h.txn_commit("g", {("t", 0): 2, ("t", 1): 2}, producer_id=PID)    # committed
    h.txn_commit("g", {("t", 2): 3}, producer_id=PID2)                 # aborted
    h.txn_commit("g", {("t", 3): 4}, producer_id=PID3)                 # still open
    h.txn_commit("g2", {("u", 0): 9}, producer_id=PID)                 # same producer, maybe another partition
    h.marker("g", commit=True, producer_id=PID)
    h.marker("g", commit=False, producer_id=PID2)
    h.marker("g2", commit=True, producer_id=PID)
    # A leader-change control record in the log is no transaction marker: the load skips it.
    partition = h.coordinator.partition_for("g")
    leader_change = build_leader_change_batch(base_offset=0, timestamp=h.now_ms, partition_leader_epoch=LEADER_EPOCH,
                                              message=LeaderChangeMessage(leader_id=1))
    assert h.append(partition, leader_change) == ErrorCode.NONE
    keys = [("t", p) for p in range(4)]
    before = view(h, "g", keys)
    assert before == {("t", 0): (2, (2, ErrorCode.NONE)), ("t", 1): (2, (2, ErrorCode.NONE)),
                      ("t", 2): (None, (None, ErrorCode.NONE)),
                      ("t", 3): (None, (None, ErrorCode.UNSTABLE_OFFSET_COMMIT))}
    fresh = h.reload()
    assert view(fresh, "g", keys) == before
    assert fresh.committed("g2", "u", 0) == 9
    # The transaction left open commits after the reload: the reloaded coordinator applies it.
    fresh.marker("g", commit=True, producer_id=PID3)
    assert fresh.committed("g", "t", 3) == 4


def test_fetch_of_every_offset_with_require_stable(h: LogHarness) -> None:
    h.commit("g", {("t", 0): 1, ("t", 1): 2})
    h.txn_commit("g", {("t", 1): 5, ("t", 7): 6})
    error, topics = h.coordinator.fetch_offsets("g", None, require_stable=True)
    assert error == ErrorCode.NONE
    # Committed offsets only are listed; the one with a pending transactional offset is unstable.
    assert [(p, o.committed_offset if o else None, e) for p, o, e in topics[0][1]] == [
        (0, 1, ErrorCode.NONE), (1, None, ErrorCode.UNSTABLE_OFFSET_COMMIT)]
    error, topics = h.coordinator.fetch_offsets("g", None)
    assert [(p, o.committed_offset, e) for p, o, e in topics[0][1]] == [(0, 1, ErrorCode.NONE),
                                                                        (1, 2, ErrorCode.NONE)]


def test_pending_from_the_moment_the_commit_is_accepted(tmp_path) -> None:
    h = LogHarness(str(tmp_path), auto_commit=False)
    answer = h.txn_commit("g", {("t", 0): 10})
    assert answer == []  # not written yet
    assert h.stable_fetch("g", "t", 0) == (None, ErrorCode.UNSTABLE_OFFSET_COMMIT)
    h.flush()
    assert answer.only == {("t", 0): ErrorCode.NONE}
    # A failed write leaves nothing pending.
    answer = h.txn_commit("g2", {("t", 0): 10}, producer_id=PID2)
    h.flush(ErrorCode.NOT_ENOUGH_REPLICAS)
    assert answer.only == {("t", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}
    assert h.stable_fetch("g2", "t", 0) == (None, ErrorCode.NONE)
    h.close()


def test_a_fenced_producer_epoch_is_refused_by_the_log(h: LogHarness) -> None:
    h.txn_commit("g", {("t", 0): 1}, producer_epoch=0)
    # The transaction coordinator timed the transaction out: an abort with the epoch bumped.
    h.marker("g", commit=False, producer_epoch=1)
    h.auto_commit = False
    late = h.txn_commit("g", {("t", 0): 2}, producer_epoch=0)
    h.flush()
    assert late.only == {("t", 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    assert h.stable_fetch("g", "t", 0) == (None, ErrorCode.NONE)
    assert view(h.reload(), "g", [("t", 0)]) == view(h, "g", [("t", 0)])


def test_a_marker_while_the_commit_is_being_written_resolves_it(h: LogHarness) -> None:
    h.auto_commit = False
    late = h.txn_commit("g", {("t", 0): 2}, producer_epoch=0)
    h.marker("g", commit=False, producer_epoch=1)  # appended before the commit's record: the record is fenced
    h.flush()
    assert late.only == {("t", 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    assert h.stable_fetch("g", "t", 0) == (None, ErrorCode.NONE)


def test_request_errors(tmp_path) -> None:
    h = LogHarness(str(tmp_path), offset_metadata_max_bytes=10,
                   log_properties={"max.message.bytes": 300})
    assert h.txn_commit("", {("t", 0): 1}).only == {("t", 0): ErrorCode.INVALID_GROUP_ID}
    partition = h.coordinator.partition_for("g")
    h.coordinator.begin_loading(partition)
    assert h.txn_commit("g", {("t", 0): 1}).only == {("t", 0): ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
    h.coordinator.unload(partition)
    assert h.txn_commit("g", {("t", 0): 1}).only == {("t", 0): ErrorCode.NOT_COORDINATOR}
    h.coordinator.begin_loading(partition)
    h.coordinator.complete_loading(partition, h.now_ms)
    answer = h.txn_commit("g", {("t", 0): 1, ("t", 1): 2}, metadata="x" * 11)
    assert answer.only == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE, ("t", 1): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    # A write over the partition's max.message.bytes is the commit's fault.
    many = {("a-long-topic-name-" + str(i), i): i for i in range(10)}
    assert set(h.txn_commit("g", many, metadata="0123456789").only.values()) == {ErrorCode.INVALID_COMMIT_OFFSET_SIZE}
    assert h.stable_fetch("g", "a-long-topic-name-0", 0) == (None, ErrorCode.NONE)
    h.close()


def test_generation_checks_as_offset_commit(h: LogHarness) -> None:
    leader, follower = stable_group(h, "g", 2)
    generation = group_of(h, "g").generation_id
    ok = h.txn_commit("g", {("t", 0): 1}, member_id=leader, generation_id=generation)
    assert ok.only == {("t", 0): ErrorCode.NONE}
    assert h.txn_commit("g", {("t", 0): 1}, member_id=leader, generation_id=generation + 1).only == \
        {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert h.txn_commit("g", {("t", 0): 1}, member_id="ghost", generation_id=generation).only == \
        {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert h.txn_commit("g", {("t", 0): 1}, member_id=leader, generation_id=generation,
                        group_instance_id="not-a-static-member").only == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    # v0-v2 carry neither member nor generation: accepted even though the group has members (OffsetCommit v0 is not).
    assert h.txn_commit("g", {("t", 0): 1}).only == {("t", 0): ErrorCode.NONE}
    assert h.commit("g", {("t", 0): 1}).only == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    # A group the coordinator does not know: ILLEGAL_GENERATION with a generation, a simple group without one.
    assert h.txn_commit("nope", {("t", 0): 1}, member_id="m", generation_id=1).only == \
        {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert h.coordinator.groups.group("nope") is None
    assert h.txn_commit("simple", {("t", 0): 1}).only == {("t", 0): ErrorCode.NONE}
    assert group_of(h, "simple").protocol_type is None


def test_fenced_static_member_and_no_rebalance_check(h: LogHarness) -> None:
    first = h.join("s", group_instance_id="instance-1", version=5).only
    assert first.error_code == ErrorCode.NONE
    member, generation = first.member_id, first.generation_id
    # CompletingRebalance: OffsetCommit answers REBALANCE_IN_PROGRESS, a transactional commit is accepted.
    assert h.commit("s", {("t", 0): 1}, member_id=member, generation_id=generation,
                    group_instance_id="instance-1").only == {("t", 0): ErrorCode.REBALANCE_IN_PROGRESS}
    assert h.txn_commit("s", {("t", 0): 1}, member_id=member, generation_id=generation,
                        group_instance_id="instance-1").only == {("t", 0): ErrorCode.NONE}
    assert h.txn_commit("s", {("t", 0): 1}, member_id="someone-else", generation_id=generation,
                        group_instance_id="instance-1").only == {("t", 0): ErrorCode.FENCED_INSTANCE_ID}


def test_pending_offsets_keep_their_partition_and_group_from_expiring(tmp_path) -> None:
    h = LogHarness(str(tmp_path), offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    h.commit("simple", {("t", 0): 1})
    h.txn_commit("simple", {("t", 0): 2})
    h.txn_commit("only-pending", {("t", 0): 3}, producer_id=PID2)
    h.advance(120_000)
    assert h.committed("simple", "t", 0) == 1
    assert group_of(h, "simple") is not None and group_of(h, "only-pending") is not None
    h.marker("simple", commit=False)
    h.marker("only-pending", commit=False, producer_id=PID2)
    h.advance(10_000)
    assert h.committed("simple", "t", 0) is None
    assert group_of(h, "simple") is None and group_of(h, "only-pending") is None
    fresh = h.reload()
    assert group_of(fresh, "simple") is None and group_of(fresh, "only-pending") is None
    h.close()


def test_delete_groups_drops_pending_offsets_too(h: LogHarness) -> None:
    h.commit("g", {("t", 0): 1})
    h.txn_commit("g", {("t", 0): 2, ("t", 1): 3})
    answers = Answers()
    h.coordinator.delete_groups(["g"], h.now_ms, answers)
    h.after()
    assert answers.only == {"g": ErrorCode.NONE}
    assert h.stable_fetch("g", "t", 1) == (None, ErrorCode.NONE)
    h.marker("g", commit=True)  # the transaction commits later: nothing of it is left to apply
    assert h.committed("g", "t", 1) is None
    fresh = h.reload()
    assert fresh.coordinator.groups.group("g") is None
    assert view(fresh, "g", [("t", 0), ("t", 1)]) == view(h, "g", [("t", 0), ("t", 1)])


def test_offset_delete_removes_a_pending_only_partition(h: LogHarness) -> None:
    h.txn_commit("g", {("t", 0): 2})
    answers = []
    h.coordinator.delete_offsets("g", [("t", [0])], h.now_ms, lambda error, results: answers.append((error, results)))
    h.after()
    assert answers == [(ErrorCode.NONE, [("t", [(0, ErrorCode.NONE)])])]
    assert h.stable_fetch("g", "t", 0) == (None, ErrorCode.NONE)


OPERATIONS = st.lists(st.one_of(
    st.tuples(st.just("commit"), st.sampled_from([0, 1]), st.integers(0, 10**6)),
    st.tuples(st.just("txn"), st.sampled_from([PID, PID2]), st.sampled_from([0, 1]), st.integers(0, 10**6)),
    st.tuples(st.just("marker"), st.sampled_from([PID, PID2]), st.booleans()),
), max_size=25)


@settings(max_examples=25, deadline=None)
@given(OPERATIONS)
def test_matches_a_log_order_model_and_survives_reload(operations) -> None:
    """Against a model of the log: a marker makes its producer's records committed unless a later record of the
    partition is; the live coordinator and one reloaded from the real logs agree with it."""
    with tempfile.TemporaryDirectory() as directory:
        h = LogHarness(directory)
        committed: dict[int, tuple[int, int]] = {}  # partition -> (position in the log, offset)
        pending: dict[int, dict[int, tuple[int, int]]] = {}  # producer -> partition -> (position, offset)
        for position, operation in enumerate(operations):
            if operation[0] == "commit":
                _, partition, offset = operation
                h.commit("g", {("t", partition): offset})
                committed[partition] = (position, offset)
            elif operation[0] == "txn":
                _, producer_id, partition, offset = operation
                h.txn_commit("g", {("t", partition): offset}, producer_id=producer_id)
                pending.setdefault(producer_id, {})[partition] = (position, offset)
            else:
                _, producer_id, commit = operation
                h.marker("g", commit, producer_id=producer_id)
                for partition, entry in pending.pop(producer_id, {}).items():
                    if commit and (partition not in committed or committed[partition][0] < entry[0]):
                        committed[partition] = entry
        keys = [("t", 0), ("t", 1)]
        expected = {("t", p): (committed[p][1] if p in committed else None,
                               (None, ErrorCode.UNSTABLE_OFFSET_COMMIT)
                               if any(p in offsets for offsets in pending.values())
                               else (committed[p][1] if p in committed else None, ErrorCode.NONE))
                    for p in (0, 1)}
        assert view(h, "g", keys) == expected
        assert view(h.reload(), "g", keys) == expected
        h.close()


def test_service_writes_a_transactional_batch_and_a_load_replays_the_marker(tmp_path) -> None:
    """The asyncio service: a regular and a transactional commit queued together go out as two batches; a marker
    makes the pending offset visible, and a new service loading the logs sees the same."""
    clock = [1_000_000]
    config = GroupCoordinatorConfig(offsets_topic_num_partitions=2)
    log_config = LogConfig.from_properties({"cleanup.policy": "compact"})
    image = MetadataImage().apply(topic_records(GROUP_METADATA_TOPIC_NAME, 2), 1)

    async def start(hosted: dict[int, Partition]) -> GroupCoordinatorService:
        async def append(partition: int, records: bytes) -> ErrorCode:
            return append_as_coordinator(hosted[partition], records, clock[0])

        service = GroupCoordinatorService(config, 1, append, lambda p: hosted[p].log, lambda: clock[0])
        service.on_metadata_update(MetadataImage(), image)
        await service.wait_until_loaded("g", 5000)
        return service

    def fetch(service: GroupCoordinatorService) -> list:
        error, topics = service.fetch_offsets("g", [("t", [0, 1])], require_stable=True)
        assert error == ErrorCode.NONE
        return [(p, o.committed_offset if o else None, e) for p, o, e in topics[0][1]]

    async def scenario() -> None:
        hosted = {p: open_offsets_partition(str(tmp_path), p, log_config, clock[0]) for p in range(2)}
        service = await start(hosted)
        regular, transactional = await asyncio.gather(
            service.commit_offsets("g", "", None, -1, -1, [OffsetCommitPartition("t", 0, 1)], 8),
            service.commit_transactional_offsets("g", PID, 0, "", None, -1, [OffsetCommitPartition("t", 1, 2)]))
        assert regular == {("t", 0): ErrorCode.NONE} and transactional == {("t", 1): ErrorCode.NONE}
        partition = service.coordinator.partition_for("g")
        log_ = hosted[partition].log
        batches = list(iter_batches(log_.read(0, 1 << 20, FetchIsolation.LOG_END, True).records.read_bytes()))
        assert [(b.is_transactional, b.producer_id) for b in batches] == [(False, -1), (True, PID)]
        assert fetch(service) == [(0, 1, ErrorCode.NONE), (1, None, ErrorCode.UNSTABLE_OFFSET_COMMIT)]
        assert append_as_coordinator(hosted[partition], marker_batch(PID, 0, True, clock[0]), clock[0]) == \
            ErrorCode.NONE
        service.complete_transaction(partition, PID, True)
        assert fetch(service) == [(0, 1, ErrorCode.NONE), (1, 2, ErrorCode.NONE)]
        service.stop()
        for p in hosted.values():
            p.log.close()
        reopened = {p: open_offsets_partition(str(tmp_path), p, log_config, clock[0]) for p in range(2)}
        fresh = await start(reopened)
        assert fetch(fresh) == [(0, 1, ErrorCode.NONE), (1, 2, ErrorCode.NONE)]
        fresh.stop()
        for p in reopened.values():
            p.log.close()

    asyncio.run(scenario())
