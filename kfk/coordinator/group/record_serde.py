"""__consumer_offsets records as Kafka writes them (GroupCoordinatorRecordSerde / GroupCoordinatorRecordHelpers).

Every record of the topic has a key and a value, each opening with a big-endian int16:
- key: the record type (the schemas' apiKey), then the key schema's fields at version 0. 0 and 1 are offset commits
  (Kafka writes 1; 0 is LegacyOffsetCommitKey, the same layout), 2 is GroupMetadataKey; 3 to 8 are the consumer
  protocol's (KIP-848: kfk.coordinator.group.consumer_group_records); the others (share groups, streams groups,
  regular expressions) are skipped on load;
- value: the value schema's version, then its fields at that version. A null value is a tombstone (the key's offset
  or group is deleted, and compaction eventually drops both records).

Versions written are Kafka 3.x/4.x's: OffsetCommitValue v1 when the commit carries an expire timestamp (OffsetCommit
v2-v4 with a retention time), else v3 (leader epoch, no expire timestamp); GroupMetadataValue v3 (current state
timestamp and group instance ids). Any version 0-4 of either is read.

The coordinator of a group is the leader of partition `partition_for(group_id, offsets.topic.num.partitions)`
(kfk.coordinator.partitioning, shared with the transaction coordinator).
"""

from __future__ import annotations

import dataclasses
import struct

from kfk.common.constants import UNKNOWN_LEADER_EPOCH
from kfk.coordinator.group.consumer_group_records import (
    ConsumerGroupRecord,
    decode,
    is_consumer_group_record_type,
)
from kfk.errors import CorruptRecordError, KafkaError
from kfk.protocol.group_records.group_metadata_key import GroupMetadataKey
from kfk.protocol.group_records.group_metadata_value import GroupMetadataValue
from kfk.protocol.group_records.offset_commit_key import OffsetCommitKey
from kfk.protocol.group_records.offset_commit_value import OffsetCommitValue
from kfk.protocol.message import Buffer

#: Key record types (the int16 prefix of a key); every key schema has the one version 0.
OFFSET_COMMIT_KEY_TYPE = 1
GROUP_METADATA_KEY_TYPE = 2
_OFFSET_COMMIT_KEY_TYPES = (0, 1)
_KEY_VERSION = 0

#: Value versions Kafka writes.
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

#: OffsetCommitValue.expire_timestamp when absent (an absent leader_epoch is UNKNOWN_LEADER_EPOCH).
NO_EXPIRE_TIMESTAMP = -1

_INT16 = struct.Struct(">h")


@dataclasses.dataclass(frozen=True, slots=True)
class CommittedOffset:
    """A committed offset as the coordinator stores it in __consumer_offsets (Kafka's group-coordinator
    OffsetAndMetadata; renamed here so that the client's OffsetAndMetadata in kfk.common stays the only type of that
    name). `expire_timestamp_ms` is -1 unless the commit asked for its own retention (OffsetCommit v2-v4)."""

    committed_offset: int
    leader_epoch: int = UNKNOWN_LEADER_EPOCH
    metadata: str = ""
    commit_timestamp_ms: int = 0
    expire_timestamp_ms: int = NO_EXPIRE_TIMESTAMP


def offset_commit_key(group_id: str, topic: str, partition: int) -> bytes:
    key = OffsetCommitKey(group=group_id, topic=topic, partition=partition)
    return _INT16.pack(OFFSET_COMMIT_KEY_TYPE) + key.encode(_KEY_VERSION)


def offset_commit_value(offset: CommittedOffset) -> bytes:
    if offset.expire_timestamp_ms != NO_EXPIRE_TIMESTAMP:
        version = OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY
    else:
        version = OFFSET_COMMIT_VALUE_VERSION
    value = OffsetCommitValue(
        offset=offset.committed_offset,
        leader_epoch=offset.leader_epoch if version >= 3 else UNKNOWN_LEADER_EPOCH,
        metadata=offset.metadata,
        commit_timestamp=offset.commit_timestamp_ms,
        expire_timestamp=offset.expire_timestamp_ms if version == 1 else NO_EXPIRE_TIMESTAMP,
    )
    return _INT16.pack(version) + value.encode(version)


def group_metadata_key(group_id: str) -> bytes:
    return _INT16.pack(GROUP_METADATA_KEY_TYPE) + GroupMetadataKey(group=group_id).encode(_KEY_VERSION)


def group_metadata_value(value: GroupMetadataValue) -> bytes:
    return _INT16.pack(GROUP_METADATA_VALUE_VERSION) + value.encode(GROUP_METADATA_VALUE_VERSION)


@dataclasses.dataclass(frozen=True, slots=True)
class OffsetCommitRecord:
    """A decoded offset commit (value None: tombstone)."""

    group_id: str
    topic: str
    partition: int
    value: CommittedOffset | None


@dataclasses.dataclass(frozen=True, slots=True)
class GroupMetadataRecord:
    """A decoded group metadata record (value None: tombstone)."""

    group_id: str
    value: GroupMetadataValue | None


def _read_version(buffer: Buffer, what: str) -> int:
    if len(buffer) < 2:
        raise CorruptRecordError(f"__consumer_offsets {what} of {len(buffer)} bytes has no version")
    return _INT16.unpack_from(buffer, 0)[0]


def deserialize_record(key: Buffer | None, value: Buffer | None
                       ) -> OffsetCommitRecord | GroupMetadataRecord | ConsumerGroupRecord | None:
    """One record of __consumer_offsets decoded; None for record types the group coordinator does not hold
    (share and streams groups, regular expressions). CorruptRecordError for anything malformed."""
    if key is None:
        raise CorruptRecordError("__consumer_offsets record without a key")
    record_type = _read_version(key, "key")
    try:
        if record_type in _OFFSET_COMMIT_KEY_TYPES:
            commit_key = OffsetCommitKey.decode(key, _KEY_VERSION, 2)
            offset = None
            if value is not None:
                version = _read_version(value, "value")
                if not OffsetCommitValue.LOWEST_VERSION <= version <= OffsetCommitValue.HIGHEST_VERSION:
                    raise CorruptRecordError(f"Unknown OffsetCommitValue version {version}")
                decoded = OffsetCommitValue.decode(value, version, 2)
                offset = CommittedOffset(decoded.offset, decoded.leader_epoch, decoded.metadata,
                                           decoded.commit_timestamp, decoded.expire_timestamp)
            return OffsetCommitRecord(commit_key.group, commit_key.topic, commit_key.partition, offset)
        if record_type == GROUP_METADATA_KEY_TYPE:
            group_key = GroupMetadataKey.decode(key, _KEY_VERSION, 2)
            metadata = None
            if value is not None:
                version = _read_version(value, "value")
                if not GroupMetadataValue.LOWEST_VERSION <= version <= GroupMetadataValue.HIGHEST_VERSION:
                    raise CorruptRecordError(f"Unknown GroupMetadataValue version {version}")
                metadata = GroupMetadataValue.decode(value, version, 2)
            return GroupMetadataRecord(group_key.group, metadata)
        if is_consumer_group_record_type(record_type):
            return decode(record_type, key, value)
    except CorruptRecordError:
        raise
    except KafkaError as error:
        raise CorruptRecordError(f"Malformed __consumer_offsets record (type {record_type}): {error}") from error
    if record_type < 0:
        raise CorruptRecordError(f"Unknown __consumer_offsets record type {record_type}")
    return None
