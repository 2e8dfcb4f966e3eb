"""Metadata records framed as KRaft frames them: frame version, record type, record version, body."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfk.backends.embedded.record_serde import deserialize_record, serialize_record
from kfk.errors import CorruptRecordError
from kfk.protocol.metadata_records import RECORD_TYPES, schema_class

TopicRecord = schema_class("TopicRecord")
RegisterBrokerRecord = schema_class("RegisterBrokerRecord")
ConfigRecord = schema_class("ConfigRecord")


def test_a_topic_record_is_framed_byte_for_byte() -> None:
    record = TopicRecord(name="ab", topic_id=uuid.UUID(int=1))
    # frame version 1, record type 2 (TopicRecord), version 0; compact string "ab"; uuid; no tagged fields
    expected = b"\x01\x02\x00" + b"\x03ab" + (1).to_bytes(16, "big") + b"\x00"
    assert serialize_record(record) == expected
    assert deserialize_record(expected) == record


def test_registrations_are_written_at_version_1_of_metadata_version_3_3_iv3() -> None:
    record = RegisterBrokerRecord(broker_id=1, incarnation_id=uuid.uuid4(), broker_epoch=5, rack=None,
                                  in_controlled_shutdown=True)
    framed = serialize_record(record)
    assert framed[:3] == b"\x01\x00\x01"
    assert deserialize_record(framed).in_controlled_shutdown


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_any_version_the_frame_names_is_read(version: int) -> None:
    record = RegisterBrokerRecord(broker_id=3, incarnation_id=uuid.UUID(int=9), broker_epoch=7, rack="r1",
                                  fenced=False)
    framed = b"\x01\x00" + bytes([version]) + record.encode(version)
    decoded = deserialize_record(framed)
    assert (decoded.broker_id, decoded.broker_epoch, decoded.rack, decoded.fenced) == (3, 7, "r1", False)


def test_every_record_type_round_trips_at_its_default_value() -> None:
    for record_type, name in RECORD_TYPES.items():
        cls = schema_class(name)
        record = cls()
        if hasattr(record, "rack"):
            record.rack = None
        decoded = deserialize_record(serialize_record(record))
        assert type(decoded) is cls and decoded == record, name


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"", "Malformed"),
        (b"\x00\x02\x00\x00", "frame version 0"),
        (b"\x01\x63\x00\x00", "Unknown metadata record type 99"),
        (b"\x01\x02\x05\x00", "Unsupported version 5 of TopicRecord"),
        (b"\x01\x02\x00\x05ab", "Malformed"),
        (serialize_record(ConfigRecord(name="x", value="y")) + b"\x00", "unread bytes"),
    ],
    ids=["empty", "frame-version", "unknown-type", "unknown-version", "truncated", "trailing"],
)
def test_bad_frames_are_corrupt_records(value: bytes, message: str) -> None:
    with pytest.raises(CorruptRecordError, match=message):
        deserialize_record(value)


@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_fail_as_corrupt(value: bytes) -> None:
    try:
        deserialize_record(value)
    except CorruptRecordError:
        pass


@given(st.sampled_from(list(RECORD_TYPES.values())), st.binary(max_size=40))
def test_mutated_bodies_decode_or_fail_as_corrupt(name: str, tail: bytes) -> None:
    framed = serialize_record(schema_class(name)(**({"rack": None} if name == "RegisterBrokerRecord" else {})))
    try:
        deserialize_record(framed[:3] + tail)
    except CorruptRecordError:
        pass
