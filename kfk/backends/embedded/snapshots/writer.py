"""Writing a snapshot as Kafka's RecordsSnapshotWriter does: a v2 log of batches, offsets from 0, every batch
stamped with the snapshot's epoch, uncompressed:

    control batch  SnapshotHeader(version 0, lastContainedLogTimestamp)
                   [KRaftVersion(kRaftVersion), KRaftVoters(voters)]   only with kraft.version 1 (KIP-853)
    data batches   the metadata records, framed as in the log (record_serde), key null, at most
                   MAX_BATCH_SIZE_BYTES each
    control batch  SnapshotFooter(version 0)

The footer is the proof the snapshot is complete: a reader refuses a file without it.
"""

from __future__ import annotations

from typing import Iterable

from kfk.backends.embedded.metadata_log import MAX_BATCH_SIZE_BYTES
from kfk.backends.embedded.record_serde import metadata_version_after, serialize_record
from kfk.backends.embedded.snapshots.snapshot_file import SnapshotId, snapshot_path
from kfk.backends.embedded.voters_record import KRaftVersionRecord, VotersRecord
from kfk.controller.features import MINIMUM_METADATA_VERSION
from kfk.protocol.message import Message
from kfk.protocol.messages import data_class
from kfk.records import ControlRecordType, MemoryRecordsBuilder
from kfk.records.control import control_record_key
from kfk.storage.checkpoint import atomic_write

SnapshotHeaderRecord = data_class("SnapshotHeaderRecord")
SnapshotFooterRecord = data_class("SnapshotFooterRecord")


def snapshot_bytes(records: Iterable[Message], *, epoch: int, last_contained_log_timestamp: int, now_ms: int,
                   voters: Message | None = None, max_batch_bytes: int = MAX_BATCH_SIZE_BYTES) -> bytearray:
    """The bytes of a snapshot file. `voters` (a VotersRecord) makes it a kraft.version 1 snapshot: the header
    batch then carries KRaftVersion 1 and the voter set, as Kafka's `format --standalone` and its controllers
    write them in a dynamic quorum; without it the voters are static (controller.quorum.voters)."""
    header = [(ControlRecordType.SNAPSHOT_HEADER,
               SnapshotHeaderRecord(version=0, last_contained_log_timestamp=last_contained_log_timestamp))]
    if voters is not None:
        header += [(ControlRecordType.KRAFT_VERSION, KRaftVersionRecord(version=0, k_raft_version=1)),
                   (ControlRecordType.KRAFT_VOTERS, voters)]
    out = _control_batch(0, epoch, now_ms, header)
    offset = len(header)
    builder = MemoryRecordsBuilder(base_offset=offset, partition_leader_epoch=epoch, write_limit=max_batch_bytes)
    level = MINIMUM_METADATA_VERSION.level  # until the snapshot's own metadata.version record, which comes first
    for record in records:
        level = metadata_version_after(record, level)
        value = serialize_record(record, level)
        if not builder.has_room_for(now_ms, None, value):
            out += builder.close()
            builder = MemoryRecordsBuilder(base_offset=offset, partition_leader_epoch=epoch,
                                           write_limit=max_batch_bytes)
        builder.append(now_ms, None, value)
        offset += 1
    out += builder.close()
    out += _control_batch(offset, epoch, now_ms, [(ControlRecordType.SNAPSHOT_FOOTER, SnapshotFooterRecord(version=0))])
    return out


def write_snapshot(directory: str, snapshot_id: SnapshotId, records: Iterable[Message], *,
                   last_contained_log_timestamp: int, now_ms: int, voters: Message | None = None) -> str:
    """Write the snapshot `snapshot_id` of `records` into `directory` (temporary file, fsync, rename, fsync of the
    folder: a crash leaves either the whole snapshot or none); returns its path."""
    path = snapshot_path(directory, snapshot_id)
    atomic_write(path, snapshot_bytes(records, epoch=snapshot_id.epoch, now_ms=now_ms, voters=voters,
                                      last_contained_log_timestamp=last_contained_log_timestamp))
    return path


def _control_batch(base_offset: int, epoch: int, now_ms: int,
                   records: list[tuple[ControlRecordType, Message]]) -> bytearray:
    builder = MemoryRecordsBuilder(base_offset=base_offset, partition_leader_epoch=epoch, is_control_batch=True)
    for record_type, message in records:
        builder.append(now_ms, control_record_key(record_type), message.encode(0))
    return builder.close()
