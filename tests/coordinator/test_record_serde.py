"""__consumer_offsets records: Kafka's framing and versions, byte for byte; Java's hash for the partition."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfk.coordinator.group.consumer_group_records import ConsumerGroupRecord, group_epoch_record
from kfk.coordinator.group.record_serde import (
    CommittedOffset,
    GroupMetadataRecord,
    OffsetCommitRecord,
    deserialize_record,
    group_metadata_key,
    offset_commit_key,
    offset_commit_value,
)
from kfk.coordinator.partitioning import java_string_hashcode, partition_for
from kfk.errors import CorruptRecordError
from kfk.protocol.group_records.group_metadata_value import GroupMetadataValue


def java_hash_reference(text: str) -> int:
    """Java's definition, written independently: over UTF-16 code units, wrapping at 32 bits."""
    units = struct.unpack(f">{len(text.encode('utf-16-be')) // 2}H", text.encode("utf-16-be"))
    value = 0
    for unit in units:
        value = (value * 31 + unit) % 2**32
    return value - 2**32 if value >= 2**31 else value


@pytest.mark.parametrize("text, expected", [
    ("", 0),
    ("a", 97),
    ("hello", 99162322),
    ("polygenelubricants", -2**31),  # Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0
    ("\U0001F600", 1772899),  # a surrogate pair counts as two code units
])
def test_java_string_hashcode(text: str, expected: int) -> None:
    assert java_string_hashcode(text) == expected


def test_partition_for_min_value_and_negative_hashes() -> None:
    assert partition_for("polygenelubricants", 50) == 0
    negative = next(s for s in (f"group-{i}" for i in range(1000)) if java_string_hashcode(s) < 0)
    assert partition_for(negative, 50) == abs(java_string_hashcode(negative)) % 50


@given(st.text(max_size=40))
def test_hashcode_matches_reference(text: str) -> None:
    assert java_string_hashcode(text) == java_hash_reference(text)


def test_offset_commit_key_layout() -> None:
    # int16 record type 1, then group, topic (int16-length strings) and partition int32.
    assert offset_commit_key("g", "tp", 3) == b"\x00\x01" + b"\x00\x01g" + b"\x00\x02tp" + b"\x00\x00\x00\x03"


def test_offset_commit_value_v3_without_expiry() -> None:
    value = offset_commit_value(CommittedOffset(42, 7, "meta", 1234))
    expected = (b"\x00\x03" + struct.pack(">q", 42) + struct.pack(">i", 7) + b"\x00\x04meta"
                + struct.pack(">q", 1234))
    assert value == expected


def test_offset_commit_value_v1_with_expiry() -> None:
    value = offset_commit_value(CommittedOffset(42, 7, "", 1000, 5000))
    expected = b"\x00\x01" + struct.pack(">q", 42) + b"\x00\x00" + struct.pack(">qq", 1000, 5000)
    assert value == expected


def test_group_metadata_key_layout() -> None:
    assert group_metadata_key("grp") == b"\x00\x02\x00\x03grp"


def test_round_trips_and_tombstones() -> None:
    offset = CommittedOffset(9, 2, "m", 77)
    assert deserialize_record(offset_commit_key("g", "t", 1), offset_commit_value(offset)) == \
        OffsetCommitRecord("g", "t", 1, offset)
    assert deserialize_record(offset_commit_key("g", "t", 1), None) == OffsetCommitRecord("g", "t", 1, None)
    value = GroupMetadataValue(protocol_type="consumer", generation=3, protocol="range", leader="m1",
                               current_state_timestamp=55, members=[GroupMetadataValue.MemberMetadata(
                                   member_id="m1", group_instance_id="i1", client_id="c", client_host="/h",
                                   rebalance_timeout=300, session_timeout=100, subscription=b"s",
                                   assignment=b"a")])
    encoded = b"\x00\x03" + value.encode(3)
    record = deserialize_record(group_metadata_key("g"), encoded)
    assert isinstance(record, GroupMetadataRecord) and record.value == value
    assert deserialize_record(group_metadata_key("g"), None) == GroupMetadataRecord("g", None)


def test_reads_older_value_versions() -> None:
    old = b"\x00\x00" + struct.pack(">q", 5) + b"\x00\x00" + struct.pack(">q", 9)
    record = deserialize_record(offset_commit_key("g", "t", 0), old)
    assert record.value == CommittedOffset(5, -1, "", 9, -1)


def test_consumer_group_records_decode_and_others_are_skipped() -> None:
    # ConsumerGroupMetadataKey (record type 3): the KIP-848 group's epoch, a flexible value v0.
    record = deserialize_record(*group_epoch_record("g", 7))
    assert isinstance(record, ConsumerGroupRecord) and (record.group_id, record.value.epoch) == ("g", 7)
    assert deserialize_record(b"\x00\x03\x00\x01g", None).value is None  # the group's tombstone
    # ConsumerGroupRegularExpressionKey (type 16), Kafka's cache of a regex's topics: not kept by kfk.
    assert deserialize_record(b"\x00\x10\x00\x01g\x00\x01r", None) is None


@pytest.mark.parametrize("key, value", [
    (None, b""),
    (b"\x00", None),
    (b"\x00\x01\x00\x05ab", None),
    (b"\xff\xff", None),
    (b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x00", b"\x00\x09" + b"\x00" * 20),
    (b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x00", b"\x00\x03\x00"),
])
def test_malformed_records_raise_corrupt_record(key, value) -> None:
    with pytest.raises(CorruptRecordError):
        deserialize_record(key, value)
