"""Metadata records framed as KRaft frames them: frame version, record type, record version, body."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfk.backends.embedded.record_serde import deserialize_record, serialize_record
from kfk.common.features import metadata_version_from_string
from kfk.controller.features import LATEST_METADATA_VERSION
from kfk.errors import CorruptRecordError
from kfk.protocol.metadata_records import RECORD_TYPES, schema_class

TopicRecord = schema_class("TopicRecord")
RegisterBrokerRecord = schema_class("RegisterBrokerRecord")
LATEST = LATEST_METADATA_VERSION.level
ConfigRecord = schema_class("ConfigRecord")


def test_a_topic_record_is_framed_byte_for_byte() -> None:
    record = TopicRecord(name="ab", topic_id=uuid.UUID(int=1))
    # frame version 1, record type 2 (TopicRecord), version 0; compact string "ab"; uuid; no tagged fields
    expected = b"\x01\x02\x00" + b"\x03ab" + (1).to_bytes(16, "big") + b"\x00"
    assert serialize_record(record, LATEST) == expected
    assert deserialize_record(expected) == record


@pytest.mark.parametrize(("metadata_version", "register_broker", "partition"), [
    ("3.3-IV3", 1, 0), ("3.4-IV0", 2, 0), ("3.7-IV1", 2, 0), ("3.7-IV2", 3, 1), ("4.0-IV0", 3, 1),
    ("4.0-IV1", 3, 2), ("4.3-IV0", 4, 2), ("4.4-IV2", 4, 2)])
def test_registrations_and_partitions_are_written_at_the_versions_of_the_metadata_version(
        metadata_version: str, register_broker: int, partition: int) -> None:
    """Kafka 4.4's MetadataVersion: registerBrokerRecordVersion, partitionRecordVersion and
    partitionChangeRecordVersion."""
    level = metadata_version_from_string(metadata_version).level
    record = RegisterBrokerRecord(broker_id=1, incarnation_id=uuid.uuid4(), broker_epoch=5, rack=None,
                                  in_controlled_shutdown=True)
    framed = serialize_record(record, level)
    assert framed[:3] == bytes([1, 0, register_broker])
    assert deserialize_record(framed).in_controlled_shutdown
    for name, record_type in (("PartitionRecord", 3), ("PartitionChangeRecord", 5)):
        assert serialize_record(schema_class(name)(), level)[:3] == bytes([1, record_type, partition])


@pytest.mark.parametrize(("change", "version"), [
    ({"fenced": 1}, 0), ({"fenced": -1}, 0), ({"in_controlled_shutdown": 1}, 1),
    ({"log_dirs": [uuid.UUID(int=5)]}, 2), ({"cordoned_log_dirs": []}, 3)])
def test_a_broker_registration_change_takes_the_lowest_version_that_holds_it(change: dict, version: int) -> None:
    framed = serialize_record(schema_class("BrokerRegistrationChangeRecord")(broker_id=1, broker_epoch=3, **change),
                              LATEST)
    assert framed[:3] == bytes([1, 17, version])
    assert all(getattr(deserialize_record(framed), name) == value for name, value in change.items())


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
        decoded = deserialize_record(serialize_record(record, LATEST))
        assert type(decoded) is cls and decoded == record, name


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (b"", "Malformed"),
        (b"\x00\x02\x00\x00", "frame version 0"),
        (b"\x01\x63\x00\x00", "Unknown metadata record type 99"),
        (b"\x01\x02\x05\x00", "Unsupported version 5 of TopicRecord"),
        (b"\x01\x02\x00\x05ab", "Malformed"),
        (serialize_record(ConfigRecord(name="x", value="y"), LATEST) + b"\x00", "unread bytes"),
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
    framed = serialize_record(schema_class(name)(**({"rack": None} if name == "RegisterBrokerRecord" else {})),
                              LATEST)
    try:
        deserialize_record(framed[:3] + tail)
    except CorruptRecordError:
        pass
