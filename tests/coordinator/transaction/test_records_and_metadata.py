"""__transaction_state records and the transaction state table."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfk.common.structs import TopicPartition
from kfk.coordinator.partitioning import partition_for
from kfk.coordinator.partitioning import partition_for as group_partition_for
from kfk.coordinator.transaction.metadata import (
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from kfk.coordinator.transaction.record_serde import (
    TransactionLogRecord,
    deserialize_record,
    transaction_log_key,
    transaction_log_value,
)
from kfk.errors import CorruptRecordError
from kfk.protocol.transaction_records.transaction_log_value import TransactionLogValue

S = TransactionState


def transit(state: TransactionState = S.ONGOING, partitions=frozenset({TopicPartition("t", 0)}),
            **fields) -> TxnTransitMetadata:
    values = dict(producer_id=7, previous_producer_id=6, next_producer_id=-1, producer_epoch=3,
                  last_producer_epoch=-1, txn_timeout_ms=60_000, state=state, topic_partitions=partitions,
                  txn_start_timestamp=100, txn_last_update_timestamp=200, client_transaction_version=2)
    values.update(fields)
    return TxnTransitMetadata(**values)


def test_key_is_type_zero_then_the_transactional_id() -> None:
    assert transaction_log_key("tx") == b"\x00\x00" + b"\x00\x02tx"


@pytest.mark.parametrize("version", [0, 1])
def test_value_round_trip(version: int) -> None:
    written = transit(partitions=frozenset({TopicPartition("a", 1), TopicPartition("a", 0), TopicPartition("b", 4)}))
    record = deserialize_record(transaction_log_key("tx"), transaction_log_value(written, version))
    assert record.transactional_id == "tx"
    value = record.value
    assert value.state is S.ONGOING
    assert (value.producer_id, value.producer_epoch, value.txn_timeout_ms) == (7, 3, 60_000)
    assert value.topic_partitions == written.topic_partitions
    assert (value.txn_start_timestamp, value.txn_last_update_timestamp) == (100, 200)
    if version == 1:  # tagged fields
        assert (value.previous_producer_id, value.client_transaction_version) == (6, 2)
    else:
        assert (value.previous_producer_id, value.client_transaction_version) == (-1, 0)


def test_value_layout_v0_matches_the_schema() -> None:
    data = transaction_log_value(transit(), 0)
    assert data[:2] == b"\x00\x00"
    decoded = TransactionLogValue.decode(data, 0, 2)
    assert decoded.transaction_status == 1
    assert [(p.topic, p.partition_ids) for p in decoded.transaction_partitions] == [("t", [0])]


def test_empty_is_written_without_partitions() -> None:
    data = transaction_log_value(transit(S.EMPTY, frozenset(), txn_start_timestamp=-1), 1)
    assert TransactionLogValue.decode(data, 1, 2).transaction_partitions is None
    with pytest.raises(ValueError):
        transaction_log_value(transit(S.EMPTY), 1)


def test_tombstone_and_unknown_key_types() -> None:
    assert deserialize_record(transaction_log_key("gone"), None) == TransactionLogRecord("gone", None)
    assert deserialize_record(b"\x00\x05whatever", b"") is None
    with pytest.raises(CorruptRecordError):
        deserialize_record(None, None)
    with pytest.raises(CorruptRecordError):
        deserialize_record(transaction_log_key("tx"), b"\x00\x09")
    with pytest.raises(CorruptRecordError):
        deserialize_record(transaction_log_key("tx"), b"\x00\x00\x01")


@given(st.text(max_size=40), st.integers(min_value=1, max_value=200))
def test_transactional_ids_are_placed_like_group_ids(key: str, partitions: int) -> None:
    assert partition_for(key, partitions) == group_partition_for(key, partitions)
    assert 0 <= partition_for(key, partitions) < partitions


def test_valid_previous_states_are_kafkas() -> None:
    table = {state: {previous.state_name for previous in state.valid_previous_states} for state in S}
    assert table == {
        S.EMPTY: {"Empty", "CompleteCommit", "CompleteAbort"},
        S.ONGOING: {"Ongoing", "Empty", "CompleteCommit", "CompleteAbort"},
        S.PREPARE_COMMIT: {"Ongoing"},
        S.PREPARE_ABORT: {"Ongoing", "PrepareEpochFence", "Empty", "CompleteCommit", "CompleteAbort"},
        S.COMPLETE_COMMIT: {"PrepareCommit"},
        S.COMPLETE_ABORT: {"PrepareAbort"},
        S.DEAD: {"Empty", "CompleteCommit", "CompleteAbort"},
        S.PREPARE_EPOCH_FENCE: {"Ongoing"},
    }
    assert [state.state_id for state in S] == list(range(8))
    assert {state for state in S if state.expiration_allowed} == {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}
    assert S.from_name("PrepareCommit") is S.PREPARE_COMMIT and S.from_name("Nope") is None


def test_transitions_are_prepared_then_completed() -> None:
    metadata = TransactionMetadata("tx", producer_id=5, txn_timeout_ms=1000, state=S.EMPTY,
                                   txn_last_update_timestamp=0, producer_epoch=0)
    partitions = {TopicPartition("t", 0)}
    prepared = metadata.prepare_add_partitions(partitions, 10, 0)
    assert metadata.pending_state is S.ONGOING and metadata.state is S.EMPTY
    with pytest.raises(IllegalTransitionError):  # one pending transition at a time
        metadata.prepare_add_partitions(partitions, 10, 0)
    metadata.complete_transition(prepared)
    assert metadata.state is S.ONGOING and metadata.topic_partitions == partitions
    assert metadata.txn_start_timestamp == 10 and metadata.pending_state is None
    with pytest.raises(IllegalTransitionError):  # Ongoing cannot complete without being prepared
        metadata.prepare_complete(20)
    aborted = metadata.prepare_abort_or_commit(S.PREPARE_ABORT, 0, -1, 20, False)
    metadata.abort_transition()  # the write failed
    assert metadata.state is S.ONGOING and metadata.pending_state is None
    with pytest.raises(IllegalTransitionError):  # nothing pending any more
        metadata.complete_transition(aborted)


def test_tv2_end_bumps_the_epoch_and_overflows_to_the_next_producer_id() -> None:
    metadata = TransactionMetadata("tx", producer_id=5, txn_timeout_ms=1000, state=S.ONGOING,
                                   txn_last_update_timestamp=0, producer_epoch=32766, txn_start_timestamp=1,
                                   topic_partitions={TopicPartition("t", 0)})
    prepared = metadata.prepare_abort_or_commit(S.PREPARE_COMMIT, 2, 99, 5, False)
    assert (prepared.producer_id, prepared.producer_epoch, prepared.next_producer_id) == (5, 32767, 99)
    assert prepared.previous_producer_id == 5  # the id the transition starts from (Kafka 4.4 writes it always)
    metadata.complete_transition(prepared)
    complete = metadata.prepare_complete(6)
    assert (complete.producer_id, complete.producer_epoch, complete.previous_producer_id) == (99, 0, 5)
    metadata.complete_transition(complete)
    assert (metadata.producer_id, metadata.producer_epoch, metadata.state) == (99, 0, S.COMPLETE_COMMIT)
    # The next transition keeps the id: it is the previous one now.
    ongoing = metadata.prepare_add_partitions({TopicPartition("t", 0)}, 7, 2)
    assert (ongoing.previous_producer_id, ongoing.next_producer_id) == (99, -1)


def test_tagged_producer_ids_are_written_when_set() -> None:
    """A tagged producer id at its default (-1) is not written (Kafka 4.4's transitions always set the previous
    one; tests/interop/test_transaction_state_agrees.py compares the bytes)."""
    ordinary = transaction_log_value(transit(previous_producer_id=-1), 1)
    assert TransactionLogValue.decode(ordinary, 1, 2).previous_producer_id == -1
    assert ordinary.endswith(b"\x01\x02\x02\x00\x02")  # one tagged field: tag 2, 2 bytes, version 2
    rotated = transaction_log_value(transit(previous_producer_id=6, next_producer_id=9), 1)
    assert len(rotated) == len(ordinary) + 2 * (1 + 1 + 8)  # tag, size, int64 each
    decoded = TransactionLogValue.decode(rotated, 1, 2)
    assert (decoded.previous_producer_id, decoded.next_producer_id) == (6, 9)
