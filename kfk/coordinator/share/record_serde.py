"""__share_group_state records as Kafka writes them (the share coordinator's CoordinatorRecords).

- key: int16 record type (0 ShareSnapshot, 1 ShareUpdate), then ShareSnapshotKey/ShareUpdateKey v0 (group id, topic
  id, partition);
- value: int16 version (0), then ShareSnapshotValue/ShareUpdateValue v0; a null value is a tombstone (the share
  partition's state deleted).
A snapshot is a share partition's whole state; an update carries the batches that changed (and the start offset, -1
when unchanged) and is combined with the snapshot before it. After share.coordinator.snapshot.update.records.per.
snapshot updates the coordinator writes a snapshot again, so a load replays a bounded tail per share partition.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid

from kfk.common.uuids import uuid_to_base64
from kfk.coordinator.share.state_batches import ShareGroupOffset, StateBatch
from kfk.errors import CorruptRecordError, KafkaError
from kfk.protocol.message import Buffer
from kfk.protocol.share_records.share_snapshot_key import ShareSnapshotKey
from kfk.protocol.share_records.share_snapshot_value import ShareSnapshotValue
from kfk.protocol.share_records.share_update_key import ShareUpdateKey
from kfk.protocol.share_records.share_update_value import ShareUpdateValue

#: The keys' record types (Kafka's CoordinatorRecordType.SHARE_SNAPSHOT and SHARE_UPDATE).
SHARE_SNAPSHOT_RECORD_TYPE = 0
SHARE_UPDATE_RECORD_TYPE = 1

_INT16 = struct.Struct(">h")

#: A share partition of a group: Kafka's SharePartitionKey (its coordinator key is "group:topicId:partition").
SharePartitionKey = tuple[str, uuid.UUID, int]


def coordinator_key(key: SharePartitionKey) -> str:
    """The string FindCoordinator (key type 2) takes and the partition of __share_group_state is hashed from:
    "group:topic id (base64):partition", as Kafka's SharePartitionKey.asCoordinatorKey."""
    group_id, topic_id, partition = key
    return f"{group_id}:{uuid_to_base64(topic_id)}:{partition}"


def snapshot_key(key: SharePartitionKey) -> bytes:
    group_id, topic_id, partition = key
    return _INT16.pack(SHARE_SNAPSHOT_RECORD_TYPE) + ShareSnapshotKey(
        group_id=group_id, topic_id=topic_id, partition=partition).encode(0)


def update_key(key: SharePartitionKey) -> bytes:
    group_id, topic_id, partition = key
    return _INT16.pack(SHARE_UPDATE_RECORD_TYPE) + ShareUpdateKey(
        group_id=group_id, topic_id=topic_id, partition=partition).encode(0)


def snapshot_value(offset: ShareGroupOffset) -> bytes:
    return _INT16.pack(0) + ShareSnapshotValue(
        snapshot_epoch=offset.snapshot_epoch, state_epoch=offset.state_epoch, leader_epoch=offset.leader_epoch,
        start_offset=offset.start_offset, delivery_complete_count=offset.delivery_complete_count,
        create_timestamp=offset.create_timestamp, write_timestamp=offset.write_timestamp,
        state_batches=[ShareSnapshotValue.StateBatch(first_offset=batch.first_offset, last_offset=batch.last_offset,
                                                     delivery_state=batch.delivery_state,
                                                     delivery_count=batch.delivery_count)
                       for batch in offset.state_batches]).encode(0)


@dataclasses.dataclass(frozen=True, slots=True)
class ShareUpdate:
    """A ShareUpdateValue: the batches that changed; start offset and leader epoch -1 when unchanged."""

    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: list[StateBatch]
    delivery_complete_count: int = -1


def update_value(update: ShareUpdate) -> bytes:
    return _INT16.pack(0) + ShareUpdateValue(
        snapshot_epoch=update.snapshot_epoch, leader_epoch=update.leader_epoch, start_offset=update.start_offset,
        delivery_complete_count=update.delivery_complete_count,
        state_batches=[ShareUpdateValue.StateBatch(first_offset=batch.first_offset, last_offset=batch.last_offset,
                                                   delivery_state=batch.delivery_state,
                                                   delivery_count=batch.delivery_count)
                       for batch in update.state_batches]).encode(0)


@dataclasses.dataclass(frozen=True, slots=True)
class ShareStateRecord:
    """A decoded record: its share partition and a snapshot, an update, or None (a tombstone)."""

    key: SharePartitionKey
    is_snapshot: bool
    value: ShareGroupOffset | ShareUpdate | None


def _batches(batches) -> list[StateBatch]:
    return [StateBatch(batch.first_offset, batch.last_offset, batch.delivery_state, batch.delivery_count)
            for batch in batches]


def deserialize_record(key: Buffer | None, value: Buffer | None) -> ShareStateRecord | None:
    """One record of __share_group_state; None for a record type this version does not know (skipped, as Kafka
    does). CorruptRecordError for anything malformed."""
    if key is None or len(key) < 2:
        raise CorruptRecordError("__share_group_state record without a key")
    (record_type,) = _INT16.unpack_from(key, 0)
    if record_type not in (SHARE_SNAPSHOT_RECORD_TYPE, SHARE_UPDATE_RECORD_TYPE):
        return None
    is_snapshot = record_type == SHARE_SNAPSHOT_RECORD_TYPE
    try:
        decoded_key = (ShareSnapshotKey if is_snapshot else ShareUpdateKey).decode(key, 0, 2)
        share_key = (decoded_key.group_id, decoded_key.topic_id, decoded_key.partition)
        if value is None:
            return ShareStateRecord(share_key, is_snapshot, None)
        if is_snapshot:
            snapshot = ShareSnapshotValue.decode(value, 0, 2)
            return ShareStateRecord(share_key, True, ShareGroupOffset(
                snapshot_epoch=snapshot.snapshot_epoch, state_epoch=snapshot.state_epoch,
                leader_epoch=snapshot.leader_epoch, start_offset=snapshot.start_offset,
                state_batches=_batches(snapshot.state_batches), create_timestamp=snapshot.create_timestamp,
                write_timestamp=snapshot.write_timestamp, delivery_complete_count=snapshot.delivery_complete_count))
        update = ShareUpdateValue.decode(value, 0, 2)
        return ShareStateRecord(share_key, False, ShareUpdate(
            snapshot_epoch=update.snapshot_epoch, leader_epoch=update.leader_epoch, start_offset=update.start_offset,
            state_batches=_batches(update.state_batches), delivery_complete_count=update.delivery_complete_count))
    except (KafkaError, ValueError, struct.error) as error:
        raise CorruptRecordError(f"Malformed __share_group_state record: {error}") from error
