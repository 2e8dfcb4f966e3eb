"""The consumer protocol's __consumer_offsets records, in Kafka's formats (GroupCoordinatorRecordHelpers'
newConsumerGroup*Record): the key is the record type (int16) and the key schema at that version, the value its
version (int16, 0 for all of them) and the value schema; a null value is a tombstone.

    type 3  ConsumerGroupMetadata              group epoch
    type 4  ConsumerGroupPartitionMetadata     the subscribed topics (id, name, partition count) at that epoch
    type 5  ConsumerGroupMemberMetadata        a member's subscription, client and timeouts
    type 6  ConsumerGroupTargetAssignmentMetadata  the target assignment epoch
    type 7  ConsumerGroupTargetAssignmentMember    a member's target assignment
    type 8  ConsumerGroupCurrentMemberAssignment   a member's epochs, state and current assignment

Type 16 (ConsumerGroupRegularExpression, Kafka's cache of a regex's resolution) is not written: kfk resolves a
member's regular expression against the metadata image when it needs it; a Kafka-written one is skipped on load.

Each record decodes to a ConsumerGroupRecord that ConsumerGroupManager.replay applies.
"""

from __future__ import annotations

import dataclasses
import uuid
import enum
import struct
from typing import Any

from kfk.coordinator.group.consumer_group import (
    Assignment,
    ConsumerGroupMember,
    MemberState,
    TopicMetadata,
    normalized,
)
from kfk.errors import CorruptRecordError
from kfk.protocol.group_records.consumer_group_current_member_assignment_key import (
    ConsumerGroupCurrentMemberAssignmentKey,
)
from kfk.protocol.group_records.consumer_group_current_member_assignment_value import (
    ConsumerGroupCurrentMemberAssignmentValue,
)
from kfk.protocol.group_records.consumer_group_member_metadata_key import ConsumerGroupMemberMetadataKey
from kfk.protocol.group_records.consumer_group_member_metadata_value import ConsumerGroupMemberMetadataValue
from kfk.protocol.group_records.consumer_group_metadata_key import ConsumerGroupMetadataKey
from kfk.protocol.group_records.consumer_group_metadata_value import ConsumerGroupMetadataValue
from kfk.protocol.group_records.consumer_group_partition_metadata_key import ConsumerGroupPartitionMetadataKey
from kfk.protocol.group_records.consumer_group_partition_metadata_value import ConsumerGroupPartitionMetadataValue
from kfk.protocol.group_records.consumer_group_target_assignment_member_key import (
    ConsumerGroupTargetAssignmentMemberKey,
)
from kfk.protocol.group_records.consumer_group_target_assignment_member_value import (
    ConsumerGroupTargetAssignmentMemberValue,
)
from kfk.protocol.group_records.consumer_group_target_assignment_metadata_key import (
    ConsumerGroupTargetAssignmentMetadataKey,
)
from kfk.protocol.group_records.consumer_group_target_assignment_metadata_value import (
    ConsumerGroupTargetAssignmentMetadataValue,
)
from kfk.protocol.message import Buffer

_INT16 = struct.Struct(">h")
#: Every key schema has the one version 0; the int16 before it is the record type (the schema's apiKey).
KEY_VERSION = 0
VALUE_VERSION = 0

Record = tuple[bytes, bytes | None]


class RecordType(enum.IntEnum):
    GROUP_METADATA = 3
    PARTITION_METADATA = 4
    MEMBER_METADATA = 5
    TARGET_ASSIGNMENT_METADATA = 6
    TARGET_ASSIGNMENT_MEMBER = 7
    CURRENT_MEMBER_ASSIGNMENT = 8


#: Record type -> (key schema, value schema).
_SCHEMAS: dict[RecordType, tuple[Any, Any]] = {
    RecordType.GROUP_METADATA: (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
    RecordType.PARTITION_METADATA: (ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue),
    RecordType.MEMBER_METADATA: (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue),
    RecordType.TARGET_ASSIGNMENT_METADATA: (ConsumerGroupTargetAssignmentMetadataKey,
                                            ConsumerGroupTargetAssignmentMetadataValue),
    RecordType.TARGET_ASSIGNMENT_MEMBER: (ConsumerGroupTargetAssignmentMemberKey,
                                          ConsumerGroupTargetAssignmentMemberValue),
    RecordType.CURRENT_MEMBER_ASSIGNMENT: (ConsumerGroupCurrentMemberAssignmentKey,
                                           ConsumerGroupCurrentMemberAssignmentValue),
}
_GROUP_KEYED = (RecordType.GROUP_METADATA, RecordType.PARTITION_METADATA, RecordType.TARGET_ASSIGNMENT_METADATA)


@dataclasses.dataclass(frozen=True, slots=True)
class ConsumerGroupRecord:
    """A decoded record: `value` is None for a tombstone, else the value schema's message."""

    record_type: RecordType
    group_id: str
    member_id: str | None
    value: Any


def _key(record_type: RecordType, group_id: str, member_id: str | None = None) -> bytes:
    key_schema = _SCHEMAS[record_type][0]
    key = key_schema(group_id=group_id) if member_id is None else key_schema(group_id=group_id, member_id=member_id)
    return _INT16.pack(record_type) + key.encode(KEY_VERSION)


def _value(message: Any) -> bytes:
    return _INT16.pack(VALUE_VERSION) + message.encode(VALUE_VERSION)


# -- writers ---------------------------------------------------------------------------------------------------------

def group_epoch_record(group_id: str, epoch: int) -> Record:
    return _key(RecordType.GROUP_METADATA, group_id), _value(ConsumerGroupMetadataValue(epoch=epoch))


def partition_metadata_record(group_id: str, metadata: dict[str, TopicMetadata]) -> Record:
    topics = [ConsumerGroupPartitionMetadataValue.TopicMetadata(topic_id=topic.topic_id, topic_name=topic.name,
                                                                num_partitions=topic.num_partitions)
              for topic in sorted(metadata.values(), key=lambda t: t.name)]
    return _key(RecordType.PARTITION_METADATA, group_id), _value(ConsumerGroupPartitionMetadataValue(topics=topics))


def member_metadata_record(group_id: str, member: ConsumerGroupMember) -> Record:
    value = ConsumerGroupMemberMetadataValue(
        instance_id=member.instance_id, rack_id=member.rack_id, client_id=member.client_id,
        client_host=member.client_host, subscribed_topic_names=list(member.subscribed_topic_names),
        subscribed_topic_regex=member.subscribed_topic_regex or "", rebalance_timeout_ms=member.rebalance_timeout_ms,
        server_assignor=member.server_assignor, classic_member_metadata=None)  # Kafka 4.4's values for "none"
    if member.classic_protocols is not None:
        value.classic_member_metadata = ConsumerGroupMemberMetadataValue.ClassicMemberMetadata(
            session_timeout_ms=member.classic_session_timeout_ms,
            supported_protocols=[ConsumerGroupMemberMetadataValue.ClassicProtocol(name=name, metadata=metadata)
                                 for name, metadata in member.classic_protocols])
    return _key(RecordType.MEMBER_METADATA, group_id, member.member_id), _value(value)


def target_assignment_epoch_record(group_id: str, epoch: int) -> Record:
    return (_key(RecordType.TARGET_ASSIGNMENT_METADATA, group_id),
            _value(ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=epoch)))


def target_assignment_record(group_id: str, member_id: str, assignment: Assignment) -> Record:
    partitions = [ConsumerGroupTargetAssignmentMemberValue.TopicPartition(topic_id=topic_id,
                                                                         partitions=sorted(indexes))
                  for topic_id, indexes in sorted(assignment.items(), key=lambda item: str(item[0]))]
    return (_key(RecordType.TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
            _value(ConsumerGroupTargetAssignmentMemberValue(topic_partitions=partitions)))


def _current_partitions(member: ConsumerGroupMember, assignment: Assignment) -> list:
    """The partitions with the epoch the member was given each at (AssignmentEpochs, the same length)."""
    entries = []
    for topic_id, indexes in sorted(assignment.items(), key=lambda item: str(item[0])):
        partitions = sorted(indexes)
        entries.append(ConsumerGroupCurrentMemberAssignmentValue.TopicPartitions(
            topic_id=topic_id, partitions=partitions,
            assignment_epochs=[member.assignment_epoch(topic_id, partition) for partition in partitions]))
    return entries


def current_assignment_record(group_id: str, member: ConsumerGroupMember) -> Record:
    value = ConsumerGroupCurrentMemberAssignmentValue(
        member_epoch=member.member_epoch, previous_member_epoch=member.previous_member_epoch,
        state=int(member.state), assigned_partitions=_current_partitions(member, member.assigned_partitions),
        partitions_pending_revocation=_current_partitions(member, member.partitions_pending_revocation))
    return _key(RecordType.CURRENT_MEMBER_ASSIGNMENT, group_id, member.member_id), _value(value)


def tombstone(record_type: RecordType, group_id: str, member_id: str | None = None) -> Record:
    return _key(record_type, group_id, member_id), None


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    """What removes a member, in Kafka's order: its current assignment, its target, then its subscription."""
    return [tombstone(RecordType.CURRENT_MEMBER_ASSIGNMENT, group_id, member_id),
            tombstone(RecordType.TARGET_ASSIGNMENT_MEMBER, group_id, member_id),
            tombstone(RecordType.MEMBER_METADATA, group_id, member_id)]


def group_tombstones(group_id: str, member_ids: list[str]) -> list[Record]:
    """What deletes the group: every member's records, then the target epoch, the partition metadata and the group
    epoch."""
    records = [record for member_id in member_ids for record in member_tombstones(group_id, member_id)]
    return records + [tombstone(RecordType.TARGET_ASSIGNMENT_METADATA, group_id),
                      tombstone(RecordType.PARTITION_METADATA, group_id),
                      tombstone(RecordType.GROUP_METADATA, group_id)]


# -- readers ---------------------------------------------------------------------------------------------------------

def is_consumer_group_record_type(record_type: int) -> bool:
    return record_type in RecordType._value2member_map_


def decode(record_type: int, key: Buffer, value: Buffer | None) -> ConsumerGroupRecord:
    kind = RecordType(record_type)
    key_schema, value_schema = _SCHEMAS[kind]
    decoded_key = key_schema.decode(key, KEY_VERSION, 2)
    decoded_value = None
    if value is not None:
        if len(value) < 2:
            raise CorruptRecordError(f"{value_schema.__name__} of {len(value)} bytes has no version")
        version = _INT16.unpack_from(value, 0)[0]
        if not value_schema.LOWEST_VERSION <= version <= value_schema.HIGHEST_VERSION:
            raise CorruptRecordError(f"Unknown {value_schema.__name__} version {version}")
        decoded_value = value_schema.decode(value, version, 2)
    member_id = None if kind in _GROUP_KEYED else decoded_key.member_id
    return ConsumerGroupRecord(kind, decoded_key.group_id, member_id, decoded_value)


def assignment_of(topic_partitions: list) -> Assignment:
    return normalized({entry.topic_id: set(entry.partitions) for entry in topic_partitions})


def assignment_epochs_of(*topic_partition_lists: list) -> dict[tuple[uuid.UUID, int], int]:
    """The AssignmentEpochs of current-assignment entries by partition; an entry without them (written before
    KIP-1251) leaves its partitions at the member's epoch."""
    return {(entry.topic_id, partition): epoch for entries in topic_partition_lists for entry in entries
            if entry.assignment_epochs and len(entry.assignment_epochs) == len(entry.partitions)
            for partition, epoch in zip(entry.partitions, entry.assignment_epochs)}


def classic_protocols_of(value: ConsumerGroupMemberMetadataValue) -> tuple[tuple[str, bytes], ...] | None:
    """The classic member's protocols a MemberMetadata value carries; None for a member of the consumer protocol
    (the field is absent, or empty: a classic member always has a protocol)."""
    classic = value.classic_member_metadata
    if classic is None or not classic.supported_protocols:
        return None
    return tuple((protocol.name, bytes(protocol.metadata)) for protocol in classic.supported_protocols)


def member_state_of(value: int) -> MemberState:
    try:
        return MemberState(value)
    except ValueError:
        return MemberState.UNKNOWN
