"""The transaction coordinator's state machine over real logs, driven by a manual clock."""

from __future__ import annotations

import pytest

from kfk.common.internal_topics import GROUP_METADATA_TOPIC_NAME
from kfk.coordinator.partitioning import partition_for
from kfk.coordinator.transaction.metadata import TransactionState
from kfk.coordinator.transaction.record_serde import transaction_log_key
from kfk.errors import CoordinatorNotAvailableError, ErrorCode
from kfk.records import iter_batches
from kfk.storage.fetch_data_info import FetchIsolation
from tests.coordinator.transaction.harness import (
    FIRST_PRODUCER_ID,
    Answers,
    Harness,
    append_records,
    tp,
)

S = TransactionState
E = ErrorCode
A0, A1, B0 = tp("a", 0), tp("a", 1), tp("b", 0)


@pytest.fixture
def h(tmp_path):
    harness = Harness(tmp_path)
    yield harness
    harness.close()


def states_written(h: Harness, transactional_id: str) -> list[str]:
    partition = h.coordinator.partition_for(transactional_id)
    return [r.value.state.state_name if r.value else "tombstone" for r in h.records(partition)
            if r.transactional_id == transactional_id]


def markers_in(h: Harness, partition) -> list[tuple[int, int, bool]]:
    """(producer id, epoch, commit) of every marker in a data partition's log."""
    log = h.leader.log(partition)
    data = log.read(0, 1 << 20, FetchIsolation.LOG_END).records.read_bytes()
    found = []
    for batch in iter_batches(data):
        if batch.is_control:
            key = bytes(next(iter(batch.records())).key)
            found.append((batch.producer_id, batch.producer_epoch, key[3] == 1))
    return found


# -- InitProducerId ------------------------------------------------------------------------------------------------

def test_init_producer_id_creates_then_bumps(h: Harness) -> None:
    first = h.init("t1")
    assert (first.error, first.producer_id, first.producer_epoch) == (E.NONE, FIRST_PRODUCER_ID, 0)
    second = h.init("t1")
    assert (second.error, second.producer_id, second.producer_epoch) == (E.NONE, FIRST_PRODUCER_ID, 1)
    assert states_written(h, "t1") == ["Empty", "Empty"]
    metadata = h.metadata("t1")
    # A new instance (no expected epoch) keeps no previous epoch: the instance it replaced, asking with epoch 0,
    # is fenced, not taken for a retry (Apache Kafka's answer, see tests/interop).
    assert (metadata.state, metadata.last_producer_epoch, metadata.txn_timeout_ms) == (S.EMPTY, -1, 60_000)
    fenced = h.init("t1", producer_id=FIRST_PRODUCER_ID, producer_epoch=0)
    assert fenced.error == E.PRODUCER_FENCED


def test_init_producer_id_request_checks(h: Harness) -> None:
    idempotent = h.init(None)
    assert (idempotent.error, idempotent.producer_epoch) == (E.NONE, 0)
    assert h.init(None).producer_id == idempotent.producer_id + 1
    assert h.init("").error == E.INVALID_REQUEST
    assert h.init("t1", timeout_ms=0).error == E.INVALID_TRANSACTION_TIMEOUT
    assert h.init("t1", timeout_ms=h.config.transaction_max_timeout_ms + 1).error == E.INVALID_TRANSACTION_TIMEOUT
    assert h.init("t1", timeout_ms=h.config.transaction_max_timeout_ms).error == E.NONE


def test_ownership_errors(h: Harness) -> None:
    partition = h.coordinator.partition_for("t1")
    h.coordinator.unload(partition)
    assert h.init("t1").error == E.NOT_COORDINATOR
    assert h.add("t1", 1, 0, A0) == E.NOT_COORDINATOR
    assert h.end("t1", 1, 0, True).error == E.NOT_COORDINATOR
    assert h.coordinator.describe("t1").error_code == E.NOT_COORDINATOR
    h.coordinator.begin_loading(partition, 5)
    assert h.init("t1").error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.coordinator.list_transactions([], [], -1, h.now).error_code == E.COORDINATOR_LOAD_IN_PROGRESS
    h.coordinator.complete_loading(partition, h.now)
    assert h.init("t1").error == E.NONE


# -- a whole transaction -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("commit", [True, False])
def test_transaction_commits_or_aborts_with_markers_on_every_partition(h: Harness, commit: bool) -> None:
    producer = h.init("t1")
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert h.add("t1", pid, epoch, A0, A1) == E.NONE
    assert h.add("t1", pid, epoch, A0) == E.NONE  # already in: nothing written
    assert h.add("t1", pid, epoch, B0) == E.NONE
    for index, partition in enumerate((A0, A1, B0)):
        h.leader.produce(partition, pid, epoch, 0, b"v%d" % index)
        assert h.leader.log(partition).first_unstable_offset == 0
    metadata = h.metadata("t1")
    assert metadata.state is S.ONGOING and metadata.topic_partitions == {A0, A1, B0}
    assert metadata.txn_start_timestamp == h.now
    answer = h.end("t1", pid, epoch, commit)
    assert answer.error == E.NONE
    outcome = "Commit" if commit else "Abort"
    assert states_written(h, "t1") == ["Empty", "Ongoing", "Ongoing", f"Prepare{outcome}", f"Complete{outcome}"]
    assert metadata.state is (S.COMPLETE_COMMIT if commit else S.COMPLETE_ABORT)
    assert metadata.topic_partitions == set() and metadata.producer_epoch == epoch
    for partition in (A0, A1, B0):
        assert markers_in(h, partition) == [(pid, epoch, commit)]
        log = h.leader.log(partition)
        assert log.first_unstable_offset is None and log.last_stable_offset == log.log_end_offset
    # One request to the one leader, one marker entry for the transaction, both topics in it.
    request = h.leader.requests[-1]
    assert len(request.markers) == 1
    assert sorted((t.name, sorted(t.partition_indexes)) for t in request.markers[0].topics) == [
        ("a", [0, 1]), ("b", [0])]
    assert request.markers[0].coordinator_epoch == h.coordinator_epoch
    # The next transaction starts afresh.
    assert h.add("t1", pid, epoch, A0) == E.NONE
    assert h.metadata("t1").topic_partitions == {A0}


def test_add_offsets_adds_the_groups_offsets_partition(h: Harness) -> None:
    producer = h.init("t1")
    assert h.add_offsets("t1", producer.producer_id, producer.producer_epoch, "my-group") == E.NONE
    expected = tp(GROUP_METADATA_TOPIC_NAME, partition_for("my-group", h.config.offsets_topic_num_partitions))
    assert h.metadata("t1").topic_partitions == {expected}


def test_add_partitions_errors(h: Harness) -> None:
    producer = h.init("t1")
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert h.add("", pid, epoch, A0) == E.INVALID_REQUEST
    assert h.add("unknown", pid, epoch, A0) == E.INVALID_PRODUCER_ID_MAPPING
    assert h.add("t1", pid + 1, epoch, A0) == E.INVALID_PRODUCER_ID_MAPPING
    assert h.add("t1", pid, epoch + 1, A0) == E.PRODUCER_FENCED
    h.auto_write = False
    assert h.add("t1", pid, epoch, A0) is None  # waiting for its write
    assert h.add("t1", pid, epoch, A1) == E.CONCURRENT_TRANSACTIONS
    h.release()
    assert h.metadata("t1").topic_partitions == {A0}


def test_verify_partitions(h: Harness) -> None:
    producer = h.init("t1")
    pid, epoch = producer.producer_id, producer.producer_epoch
    h.add("t1", pid, epoch, A0)
    verify = h.coordinator.verify_partitions
    assert verify("t1", pid, epoch, [A0, A1]) == {A0: E.NONE, A1: E.TRANSACTION_ABORTABLE}
    assert verify("t1", pid, epoch - 1, [A0]) == {A0: E.PRODUCER_FENCED}
    assert verify("t1", pid + 1, epoch, [A0]) == {A0: E.INVALID_PRODUCER_ID_MAPPING}
    assert verify("nope", pid, epoch, [A0]) == {A0: E.INVALID_PRODUCER_ID_MAPPING}
    assert verify("", pid, epoch, [A0]) == {A0: E.INVALID_REQUEST}
    assert not h.held and h.metadata("t1").topic_partitions == {A0}  # nothing written
    h.auto_markers = False
    h.end("t1", pid, epoch, True)
    assert verify("t1", pid, epoch, [A0]) == {A0: E.CONCURRENT_TRANSACTIONS}


# -- EndTxn, transaction version 1 ---------------------------------------------------------------------------------

def test_end_txn_v1_retries_and_invalid_states(h: Harness) -> None:
    producer = h.init("t1")
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert h.end("t1", pid, epoch, True).error == E.INVALID_TXN_STATE  # Empty
    assert h.end("t1", pid, epoch, False).error == E.INVALID_TXN_STATE
    assert h.end("unknown", pid, epoch, True).error == E.INVALID_PRODUCER_ID_MAPPING
    assert h.end("", pid, epoch, True).error == E.INVALID_REQUEST
    h.add("t1", pid, epoch, A0)
    assert h.end("t1", pid + 1, epoch, True).error == E.INVALID_PRODUCER_ID_MAPPING
    assert h.end("t1", pid, epoch + 1, True).error == E.PRODUCER_FENCED
    h.auto_markers = False
    assert h.end("t1", pid, epoch, True).error == E.NONE  # answered once PrepareCommit is durable
    assert h.metadata("t1").state is S.PREPARE_COMMIT
    assert h.end("t1", pid, epoch, True).error == E.CONCURRENT_TRANSACTIONS
    assert h.end("t1", pid, epoch, False).error == E.CONCURRENT_TRANSACTIONS  # CompleteCommit is pending
    assert h.init("t1").error == E.CONCURRENT_TRANSACTIONS
    assert h.add("t1", pid, epoch, A1) == E.CONCURRENT_TRANSACTIONS
    h.answer_markers()
    assert h.metadata("t1").state is S.COMPLETE_COMMIT
    assert h.end("t1", pid, epoch, True).error == E.NONE  # a retry of the commit
    assert h.end("t1", pid, epoch, False).error == E.INVALID_TXN_STATE


# -- EndTxn, transaction version 2 (KIP-890) -----------------------------------------------------------------------

def test_end_txn_v2_bumps_the_epoch_at_every_end(h: Harness) -> None:
    producer = h.init("t1")
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert h.add("t1", pid, epoch, A0, tv=2) == E.NONE
    h.leader.produce(A0, pid, epoch, 0, b"x")
    answer = h.end("t1", pid, epoch, True, tv=2)
    assert (answer.error, answer.producer_id, answer.producer_epoch) == (E.NONE, pid, epoch + 1)
    assert markers_in(h, A0) == [(pid, epoch + 1, True)]
    metadata = h.metadata("t1")
    assert (metadata.state, metadata.producer_epoch, metadata.last_producer_epoch) == (S.COMPLETE_COMMIT,
                                                                                        epoch + 1, epoch)
    # The retry of that end (its answer lost): the client still has the old epoch.
    retry = h.end("t1", pid, epoch, True, tv=2)
    assert (retry.error, retry.producer_epoch) == (E.NONE, epoch + 1)
    assert h.end("t1", pid, epoch, False, tv=2).error == E.INVALID_TXN_STATE
    # Old epoch can no longer add partitions; the new one can.
    assert h.add("t1", pid, epoch, A0, tv=2) == E.PRODUCER_FENCED
    assert h.end("t1", pid, epoch + 1, True, tv=2).error == E.INVALID_TXN_STATE  # nothing open to commit
    # Abort with nothing open is allowed (the client is unsure): another bump, no markers.
    aborted = h.end("t1", pid, epoch + 1, False, tv=2)
    assert (aborted.error, aborted.producer_epoch) == (E.NONE, epoch + 2)
    assert metadata.state is S.COMPLETE_ABORT and markers_in(h, A0) == [(pid, epoch + 1, True)]
    assert h.end("t1", pid, epoch + 5, False, tv=2).error == E.PRODUCER_FENCED


def test_end_txn_v2_epoch_overflow_moves_to_a_new_producer_id(h: Harness) -> None:
    producer = h.init("t1")
    pid = producer.producer_id
    metadata = h.metadata("t1")
    metadata.producer_epoch = 32766  # arrange: the last epoch a client may have
    assert h.add("t1", pid, 32766, A0, tv=2) == E.NONE
    answer = h.end("t1", pid, 32766, True, tv=2)
    new_pid = FIRST_PRODUCER_ID + 1
    assert (answer.error, answer.producer_id, answer.producer_epoch) == (E.NONE, new_pid, 0)
    assert markers_in(h, A0) == [(pid, 32767, True)]  # the old id's fencing epoch ends it
    assert (metadata.producer_id, metadata.producer_epoch, metadata.previous_producer_id) == (new_pid, 0, pid)
    retry = h.end("t1", pid, 32766, True, tv=2)  # the retry carries the old id and epoch
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, new_pid, 0)


# -- fencing -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("tv", [0, 2])
def test_init_producer_id_fences_an_ongoing_transaction(h: Harness, tv: int) -> None:
    old = h.init("t1")
    pid, epoch = old.producer_id, old.producer_epoch
    h.add("t1", pid, epoch, A0, B0, tv=tv)
    h.leader.produce(A0, pid, epoch, 0, b"pending")
    fenced = h.init("t1")  # a new instance of the same transactional producer
    assert fenced.error == E.CONCURRENT_TRANSACTIONS
    metadata = h.metadata("t1")
    assert metadata.state is S.COMPLETE_ABORT
    abort_epoch = epoch + 1 if tv < 2 else epoch + 2  # TV2 bumps once more when it aborts
    assert markers_in(h, A0) == [(pid, abort_epoch, False)] and markers_in(h, B0) == [(pid, abort_epoch, False)]
    assert h.leader.log(A0).first_unstable_offset is None
    # The old instance is fenced for everything.
    assert h.add("t1", pid, epoch, A1) == E.PRODUCER_FENCED
    assert h.end("t1", pid, epoch, True).error == E.PRODUCER_FENCED
    # The new instance's retry gets the next epoch.
    retried = h.init("t1")
    assert (retried.error, retried.producer_id, retried.producer_epoch) == (E.NONE, pid, abort_epoch + 1)
    assert states_written(h, "t1")[-3:] == ["PrepareAbort", "CompleteAbort", "Empty"]


def test_a_failed_fence_keeps_the_epoch_bumped_once(h: Harness) -> None:
    old = h.init("t1")
    pid, epoch = old.producer_id, old.producer_epoch
    h.add("t1", pid, epoch, A0)
    h.write_error = E.NOT_ENOUGH_REPLICAS
    assert h.init("t1").error == E.COORDINATOR_NOT_AVAILABLE
    metadata = h.metadata("t1")
    assert (metadata.state, metadata.producer_epoch, metadata.has_failed_epoch_fence) == (S.ONGOING, epoch + 1,
                                                                                          True)
    assert h.add("t1", pid, epoch, A1) == E.PRODUCER_FENCED  # fenced although the abort is not written yet
    h.write_error = E.NONE
    assert h.init("t1").error == E.CONCURRENT_TRANSACTIONS
    assert markers_in(h, A0) == [(pid, epoch + 1, False)]  # not bumped a second time
    assert h.init("t1").producer_epoch == epoch + 2


def test_kip_360_recovery_with_producer_id_and_epoch(h: Harness) -> None:
    first = h.init("t1")
    pid = first.producer_id
    bumped = h.init("t1", producer_id=pid, producer_epoch=0)
    assert (bumped.error, bumped.producer_epoch) == (E.NONE, 1)
    # The answer was lost: the client retries with the epoch it had.
    again = h.init("t1", producer_id=pid, producer_epoch=0)
    assert (again.error, again.producer_epoch) == (E.NONE, 1)
    assert h.init("t1", producer_id=pid + 7, producer_epoch=1).error == E.PRODUCER_FENCED
    assert h.init("t1", producer_id=pid, producer_epoch=5).error == E.PRODUCER_FENCED
    # Epochs used up: a new producer id, and the retry of that rotation is recognised.
    h.metadata("t1").producer_epoch = 32766
    rotated = h.init("t1", producer_id=pid, producer_epoch=32766)
    assert (rotated.error, rotated.producer_id, rotated.producer_epoch) == (E.NONE, FIRST_PRODUCER_ID + 1, 0)
    retry = h.init("t1", producer_id=pid, producer_epoch=32766)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, FIRST_PRODUCER_ID + 1, 0)
    assert h.init("t1", producer_id=pid, producer_epoch=3).error == E.PRODUCER_FENCED


def test_init_without_producer_id_rotates_an_exhausted_epoch(h: Harness) -> None:
    pid = h.init("t1").producer_id
    h.metadata("t1").producer_epoch = 32766
    rotated = h.init("t1")
    assert (rotated.producer_id, rotated.producer_epoch) == (pid + 1, 0)
    assert h.metadata("t1").previous_producer_id == pid


# -- timeouts and expiration ---------------------------------------------------------------------------------------

def test_transactions_past_their_timeout_are_aborted(h: Harness) -> None:
    producer = h.init("t1", timeout_ms=1_000)
    pid, epoch = producer.producer_id, producer.producer_epoch
    h.add("t1", pid, epoch, A0)
    h.leader.produce(A0, pid, epoch, 0, b"x")
    other = h.init("t2", timeout_ms=600_000)
    h.add("t2", other.producer_id, other.producer_epoch, B0)
    h.advance(h.config.abort_timed_out_transactions_interval_ms)
    assert h.metadata("t1").state is S.COMPLETE_ABORT
    assert markers_in(h, A0) == [(pid, epoch + 1, False)]
    assert h.leader.log(A0).first_unstable_offset is None
    assert h.metadata("t2").state is S.ONGOING  # within its timeout
    assert h.end("t1", pid, epoch, True).error == E.PRODUCER_FENCED
    assert h.init("t1", timeout_ms=1_000).producer_epoch == epoch + 2


def test_idle_transactional_ids_expire_with_a_tombstone(tmp_path) -> None:
    h = Harness(tmp_path, transactional_id_expiration_ms=60_000, remove_expired_transactional_ids_interval_ms=10_000)
    try:
        idle = h.init("idle")
        busy = h.init("busy", timeout_ms=900_000)
        h.add("busy", busy.producer_id, busy.producer_epoch, A0)
        h.advance(30_000)
        assert h.metadata("idle") is not None
        h.advance(40_000)
        assert h.metadata("idle") is None
        assert states_written(h, "idle") == ["Empty", "tombstone"]
        assert h.metadata("busy").state is S.ONGOING  # an open transaction never expires
        assert h.coordinator.describe("idle").error_code == E.TRANSACTIONAL_ID_NOT_FOUND
        h.restart()
        assert h.metadata("idle") is None and h.metadata("busy") is not None
        fresh = h.init("idle")
        assert fresh.producer_id != idle.producer_id and fresh.producer_epoch == 0
    finally:
        h.close()


# -- write failures ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("append_error,answer", [
    (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE),
    (E.REQUEST_TIMED_OUT, E.COORDINATOR_NOT_AVAILABLE),
    (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR),
    (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR),
    (E.MESSAGE_TOO_LARGE, E.UNKNOWN_SERVER_ERROR),
])
def test_failed_writes_are_mapped_and_leave_the_state_unchanged(h: Harness, append_error, answer) -> None:
    producer = h.init("t1")
    h.write_error = append_error
    assert h.add("t1", producer.producer_id, producer.producer_epoch, A0) == answer
    metadata = h.metadata("t1")
    assert metadata.state is S.EMPTY and metadata.pending_state is None and not metadata.topic_partitions
    h.write_error = E.NONE
    assert h.add("t1", producer.producer_id, producer.producer_epoch, A0) == E.NONE


def test_a_write_completing_after_unload_is_not_coordinator(h: Harness) -> None:
    producer = h.init("t1")
    h.auto_write = False
    answers = Answers()
    h.coordinator.add_partitions("t1", producer.producer_id, producer.producer_epoch, [A0], 0, h.now, answers)
    h.flush()
    partition = h.coordinator.partition_for("t1")
    h.coordinator.unload(partition)
    h.coordinator.begin_loading(partition, 9)  # this broker leads it again, in a new term
    h.coordinator.complete_loading(partition, h.now)
    h.release()  # the write of the previous term commits
    assert answers.only == E.NOT_COORDINATOR
    assert h.metadata("t1") is None  # the new term's state (nothing replayed here) is untouched


# -- markers -------------------------------------------------------------------------------------------------------

def ongoing(h: Harness, transactional_id: str, *partitions) -> tuple[int, int]:
    producer = h.init(transactional_id)
    h.add(transactional_id, producer.producer_id, producer.producer_epoch, *partitions)
    return producer.producer_id, producer.producer_epoch


def test_markers_are_retried_until_every_partition_has_one(h: Harness) -> None:
    pid, epoch = ongoing(h, "t1", A0, A1, B0)
    h.leader.errors = {A0: [E.NOT_LEADER_OR_FOLLOWER, E.NOT_ENOUGH_REPLICAS], B0: [E.REQUEST_TIMED_OUT]}
    assert h.end("t1", pid, epoch, True).error == E.NONE
    metadata = h.metadata("t1")
    assert metadata.state is S.PREPARE_COMMIT
    assert markers_in(h, A1) == [(pid, epoch, True)] and markers_in(h, A0) == []
    h.advance(h.config.retry_backoff_ms)
    assert metadata.state is S.PREPARE_COMMIT and markers_in(h, B0) == [(pid, epoch, True)]
    h.advance(h.config.retry_backoff_ms)
    assert metadata.state is S.COMPLETE_COMMIT
    assert markers_in(h, A0) == [(pid, epoch, True)]  # exactly one marker per partition
    assert len(h.leader.requests) == 3


def test_markers_follow_leaders_and_skip_deleted_partitions(h: Harness) -> None:
    pid, epoch = ongoing(h, "t1", A0, A1, B0)
    h.leaders = {A0: 1, A1: 2, B0: -1}  # B0 has no leader for now
    h.auto_markers = False
    h.end("t1", pid, epoch, False)
    assert sorted(sent.broker_id for sent in h.held_markers) == [1, 2]
    h.fail_markers()  # neither broker could be reached
    h.leaders = {A0: 2, A1: 2, B0: None}  # A0 moved, b was deleted
    h.advance(h.config.retry_backoff_ms)
    assert [sent.broker_id for sent in h.held_markers] == [2]
    topics = h.held_markers[0].request.markers[0].topics
    assert [(t.name, sorted(t.partition_indexes)) for t in topics] == [("a", [0, 1])]
    h.answer_markers()
    assert h.metadata("t1").state is S.COMPLETE_ABORT
    assert markers_in(h, B0) == []


def test_a_fenced_marker_write_stops_the_stale_coordinator(h: Harness) -> None:
    pid, epoch = ongoing(h, "t1", A0)
    h.leader.errors = {A0: [E.TRANSACTION_COORDINATOR_FENCED]}
    h.end("t1", pid, epoch, True)
    h.advance(10 * h.config.retry_backoff_ms)
    assert h.metadata("t1").state is S.PREPARE_COMMIT
    assert len(h.leader.requests) == 1 and h.coordinator.markers.pending("t1") is None


def test_complete_write_is_retried(h: Harness) -> None:
    pid, epoch = ongoing(h, "t1", A0)
    h.auto_markers = False
    h.end("t1", pid, epoch, True)
    h.write_error = E.NOT_ENOUGH_REPLICAS
    h.answer_markers()
    assert h.metadata("t1").state is S.PREPARE_COMMIT
    h.write_error = E.NONE
    h.advance(h.config.retry_backoff_ms)
    assert h.metadata("t1").state is S.COMPLETE_COMMIT


# -- loading -------------------------------------------------------------------------------------------------------

def snapshot(h: Harness, transactional_id: str) -> tuple:
    m = h.metadata(transactional_id)
    return (m.producer_id, m.producer_epoch, m.state, m.topic_partitions, m.txn_timeout_ms, m.txn_start_timestamp,
            m.txn_last_update_timestamp, m.previous_producer_id, m.client_transaction_version)


def test_restart_replays_the_same_state(h: Harness) -> None:
    committed = ongoing(h, "committed", A0)
    h.end("committed", *committed, True)
    ongoing(h, "open", A1, B0)
    tv2 = ongoing(h, "tv2", A0)
    h.add("tv2", *tv2, B0, tv=2)
    h.end("tv2", *tv2, False, tv=2)
    h.init("empty")
    before = {t: snapshot(h, t) for t in ("committed", "open", "tv2", "empty")}
    h.restart()
    assert {t: snapshot(h, t) for t in before} == before
    # ...and goes on from it.
    open_pid, open_epoch = before["open"][:2]
    assert h.end("open", open_pid, open_epoch, True).error == E.NONE
    assert h.metadata("open").state is S.COMPLETE_COMMIT


def test_an_epoch_overflow_retry_is_recognised_by_the_next_coordinator(h: Harness) -> None:
    """The previous producer id is written while it matters: a TV2 client whose EndTxn answer was lost in an
    epoch overflow retries with its old id and epoch, after the coordinator moved."""
    pid = h.init("t1").producer_id
    h.metadata("t1").producer_epoch = 32766
    assert h.add("t1", pid, 32766, A0, tv=2) == E.NONE
    new_pid = h.end("t1", pid, 32766, True, tv=2).producer_id
    assert new_pid != pid
    h.restart()
    assert h.metadata("t1").previous_producer_id == pid
    retry = h.end("t1", pid, 32766, True, tv=2)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.NONE, new_pid, 0)
    assert h.add("t1", new_pid, 0, A0, tv=2) == E.NONE
    assert h.metadata("t1").previous_producer_id == new_pid  # the id the last transition started from (Kafka 4.4)


def test_a_prepared_transaction_is_completed_by_the_next_coordinator(h: Harness) -> None:
    pid, epoch = ongoing(h, "t1", A0, B0)
    h.leader.produce(A0, pid, epoch, 0, b"x")
    h.auto_markers = False
    h.end("t1", pid, epoch, True)
    assert h.metadata("t1").state is S.PREPARE_COMMIT and markers_in(h, A0) == []
    h.auto_markers = True
    h.restart()  # the coordinator died before the markers were written
    assert h.metadata("t1").state is S.COMPLETE_COMMIT
    assert markers_in(h, A0) == [(pid, epoch, True)] and markers_in(h, B0) == [(pid, epoch, True)]
    assert h.leader.requests[-1].markers[0].coordinator_epoch == 1
    assert h.leader.log(A0).first_unstable_offset is None


def test_unload_drops_state_and_pending_markers(h: Harness) -> None:
    pid, epoch = ongoing(h, "t1", A0)
    h.auto_markers = False
    h.end("t1", pid, epoch, True)
    partition = h.coordinator.partition_for("t1")
    h.coordinator.unload(partition)
    h.answer_markers()  # answers arrive for the previous term: ignored
    assert h.coordinator.markers.pending("t1") is None
    assert h.init("t1").error == E.NOT_COORDINATOR
    h.auto_markers = True
    h.load(partition)
    assert h.metadata("t1").state is S.COMPLETE_COMMIT


# -- describe and list ---------------------------------------------------------------------------------------------

def test_describe_and_list(h: Harness) -> None:
    pid, epoch = ongoing(h, "open", A0, A1, B0)
    start = h.now
    h.clock.advance(5_000)
    empty = h.init("empty", timeout_ms=30_000)
    described = h.coordinator.describe("open")
    assert (described.error_code, described.transaction_state, described.producer_id, described.producer_epoch,
            described.transaction_timeout_ms, described.transaction_start_time_ms) == (
        E.NONE, "Ongoing", pid, epoch, 60_000, start)
    assert sorted((t.topic, t.partitions) for t in described.topics) == [("a", [0, 1]), ("b", [0])]
    assert h.coordinator.describe("missing").error_code == E.TRANSACTIONAL_ID_NOT_FOUND
    assert h.coordinator.describe("").error_code == E.INVALID_REQUEST

    def listed(states=(), producer_ids=(), duration=-1):
        response = h.coordinator.list_transactions(list(states), list(producer_ids), duration, h.now)
        assert response.error_code == E.NONE
        return sorted(t.transactional_id for t in response.transaction_states), response.unknown_state_filters

    assert listed() == (["empty", "open"], [])
    assert listed(["Ongoing"]) == (["open"], [])
    assert listed(["Ongoing", "Bogus"]) == (["open"], ["Bogus"])
    assert listed(["Bogus"]) == ([], ["Bogus"])
    assert listed(producer_ids=[empty.producer_id]) == (["empty"], [])
    # Running longer than that (5 s); an id with no transaction has no start time and, as in Apache Kafka (see
    # tests/interop), counts as running since the epoch.
    assert listed(duration=4_999) == (["empty", "open"], [])
    assert listed(duration=5_000) == (["empty"], [])


def test_markers_of_concurrent_transactions_share_one_request_per_leader(h: Harness) -> None:
    first = ongoing(h, "t1", A0)
    second = ongoing(h, "t2", A1)
    h.auto_markers = False
    h.end("t1", *first, True)
    h.end("t2", *second, False)
    requests = [sent.request for sent in h.held_markers]
    assert len(requests) == 2  # taken after each end: one request each
    h.answer_markers()
    assert h.metadata("t1").state is S.COMPLETE_COMMIT and h.metadata("t2").state is S.COMPLETE_ABORT
    # Both prepared and not yet taken: one request carries both markers.
    first, second = ongoing(h, "t1", A0), ongoing(h, "t2", B0)
    h.coordinator.end_txn("t1", *first, True, 0, h.now, Answers())
    h.coordinator.end_txn("t2", *second, True, 0, h.now, Answers())
    h.flush()
    assert len(h.held_markers) == 1
    assert sorted(m.producer_id for m in h.held_markers[0].request.markers) == sorted([first[0], second[0]])
    h.answer_markers()
    assert h.metadata("t1").state is S.COMPLETE_COMMIT and h.metadata("t2").state is S.COMPLETE_COMMIT


def test_producer_id_generator_errors_are_answered(h: Harness) -> None:
    h.producer_id_error = CoordinatorNotAvailableError("no producer id block")
    assert h.init(None).error == E.COORDINATOR_NOT_AVAILABLE
    assert h.init("t1").error == E.COORDINATOR_NOT_AVAILABLE
    assert h.metadata("t1") is None
    h.producer_id_error = None
    assert h.init("t1").error == E.NONE


def test_a_corrupt_record_is_skipped_on_load(h: Harness) -> None:
    producer = h.init("t1")
    partition = h.coordinator.partition_for("t1")
    append_records(h.logs[partition], [(transaction_log_key("broken"), b"\x00\x00\x01")], h.now)
    h.restart()
    assert h.metadata("broken") is None
    assert (h.metadata("t1").producer_id, h.metadata("t1").producer_epoch) == (producer.producer_id, 0)
