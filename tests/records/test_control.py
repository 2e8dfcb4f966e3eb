"""Control batches as Kafka writes them: transaction markers and LEADER_CHANGE records."""

from __future__ import annotations

import uuid

import pytest

from kfk.errors import CorruptRecordError
from kfk.records import (
    NO_SEQUENCE,
    ControlRecordType,
    EndTransactionMarker,
    LeaderChangeMessage,
    RecordBatch,
    Voter,
    build_end_transaction_marker_batch,
    build_leader_change_batch,
    control_record_type,
)
from kfk.records.record import Record


@pytest.mark.parametrize("control_type, type_id", [(ControlRecordType.ABORT, 0), (ControlRecordType.COMMIT, 1)])
def test_transaction_marker_batch(control_type: ControlRecordType, type_id: int) -> None:
    data = build_end_transaction_marker_batch(base_offset=40, timestamp=1_000, partition_leader_epoch=6,
                                              producer_id=123, producer_epoch=4,
                                              marker=EndTransactionMarker(control_type, coordinator_epoch=9))
    batch = RecordBatch(data)
    batch.validate()
    assert batch.is_control and batch.is_transactional
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (123, 4, NO_SEQUENCE)
    assert (batch.base_offset, batch.records_count, batch.partition_leader_epoch) == (40, 1, 6)
    [record] = batch
    assert record.key == bytes([0, 0, 0, type_id])  # int16 version 0, int16 type
    assert record.value == bytes([0, 0, 0, 0, 0, 9])  # int16 version 0, int32 coordinator epoch
    assert record.headers == []
    assert EndTransactionMarker.deserialize(record) == EndTransactionMarker(control_type, 9)


def test_leader_change_message_bytes_follow_the_flexible_v0_schema() -> None:
    message = LeaderChangeMessage(leader_id=1, voters=[Voter(1), Voter(2)], granting_voters=[Voter(1)])
    assert message.serialize() == bytes.fromhex(
        "0000"          # Version int16 0
        "00000001"      # LeaderId
        "03"            # Voters: compact array of 2 (length + 1)
        "00000001" "00"  # VoterId 1, no tagged fields
        "00000002" "00"  # VoterId 2
        "02"            # GrantingVoters: 1
        "00000001" "00"
        "00")           # no tagged fields
    assert LeaderChangeMessage.deserialize(message.serialize()) == message


def test_leader_change_message_v1_carries_directory_ids() -> None:
    directory = uuid.UUID("0123456789abcdef0123456789abcdef")
    message = LeaderChangeMessage(leader_id=3, voters=[Voter(3, directory)], granting_voters=[], version=1)
    encoded = message.serialize()
    assert directory.bytes in encoded
    assert LeaderChangeMessage.deserialize(encoded) == message


def test_leader_change_batch() -> None:
    message = LeaderChangeMessage(leader_id=2, voters=[Voter(1), Voter(2), Voter(3)], granting_voters=[Voter(2)])
    batch = RecordBatch(build_leader_change_batch(base_offset=0, timestamp=5, partition_leader_epoch=4,
                                                  message=message))
    batch.validate()
    assert batch.is_control and not batch.is_transactional and not batch.has_producer_id
    [record] = batch
    assert control_record_type(record.key) == ControlRecordType.LEADER_CHANGE
    assert LeaderChangeMessage.from_record(record) == message
    with pytest.raises(ValueError):
        build_leader_change_batch(base_offset=0, timestamp=5, partition_leader_epoch=-1, message=message)


def test_unknown_control_type_is_unknown_not_an_error() -> None:
    assert control_record_type(bytes([0, 0, 0, 99])) == ControlRecordType.UNKNOWN


@pytest.mark.parametrize("key, value", [(b"\x00", b"\x00" * 6), (b"\x00\x00\x00\x01", b"\x00\x00"),
                                        (b"\xff\xff\x00\x01", b"\x00" * 6), (b"\x00\x00\x00\x02", b"\x00" * 6)])
def test_malformed_markers_are_corrupt(key: bytes, value: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        EndTransactionMarker.deserialize(Record(0, 0, key, value, []))


@pytest.mark.parametrize("value", [b"", b"\x00\x00\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x01\x7f",
                                   b"\x00\x09" + b"\x00" * 10])
def test_truncated_or_unknown_leader_change_is_corrupt(value: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        LeaderChangeMessage.deserialize(value)
