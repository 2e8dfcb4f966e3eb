"""Reading a snapshot back, checking it is whole: every batch's CRC, a SnapshotHeader first, a SnapshotFooter last,
nothing after it, every metadata record decodable. Kafka's own snapshots read the same way (Apache Kafka writes
KRaftVersion and KRaftVoters records into the header batch, and records kfk's image does not model, such as
RegisterControllerRecord: they are returned like the others)."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

from kfk.backends.embedded.record_serde import deserialize_record
from kfk.backends.embedded.snapshots.snapshot_file import SnapshotId, list_snapshots, snapshot_path
from kfk.backends.embedded.snapshots.writer import KRaftVersionRecord, SnapshotHeaderRecord, VotersRecord
from kfk.errors import CorruptRecordError, KafkaError
from kfk.protocol.message import Message
from kfk.records import MAGIC_VALUE_V2, ControlRecordType, control_record_type, iter_batches
from kfk.storage.log_files import snapshot_id_from_file_name

log = logging.getLogger("kfk.backends.embedded.snapshots")


@dataclass
class Snapshot:
    """A snapshot read whole: its id, header, the KIP-853 voter set if it has one, and its metadata records."""

    snapshot_id: SnapshotId
    last_contained_log_timestamp: int
    records: list[Message] = field(default_factory=list)
    kraft_version: int = 0
    voters: Message | None = None  # a VotersRecord


def read_snapshot(path: str, snapshot_id: SnapshotId | None = None) -> Snapshot:
    """Read and check the snapshot at `path`; CorruptRecordError when it is not a whole snapshot."""
    with open(path, "rb") as file:
        data = file.read()
    if snapshot_id is None:  # from the name; the bootstrap snapshot (bootstrap.checkpoint) is 0-0
        found = snapshot_id_from_file_name(os.path.basename(path))
        snapshot_id = SnapshotId(0, 0) if found is None else SnapshotId(*found)
    snapshot: Snapshot | None = None
    footer_seen = False
    position = 0
    try:
        for batch in iter_batches(data):
            position = batch.position + batch.size_in_bytes
            if footer_seen:
                raise CorruptRecordError(f"a batch after the SnapshotFooter at position {batch.position}")
            if batch.magic != MAGIC_VALUE_V2:
                raise CorruptRecordError(f"magic {batch.magic} batch at position {batch.position}")
            batch.validate()
            if batch.is_control:
                for record in batch.records():
                    kind = control_record_type(record.key)
                    if snapshot is None:
                        if kind != ControlRecordType.SNAPSHOT_HEADER:
                            raise CorruptRecordError(f"the first record is {kind.name}, not a SnapshotHeader")
                        header = SnapshotHeaderRecord.decode(record.value, 0)
                        snapshot = Snapshot(snapshot_id, header.last_contained_log_timestamp)
                    elif kind == ControlRecordType.KRAFT_VERSION:
                        snapshot.kraft_version = KRaftVersionRecord.decode(record.value, 0).k_raft_version
                    elif kind == ControlRecordType.KRAFT_VOTERS:
                        snapshot.voters = VotersRecord.decode(record.value, 0)
                    elif kind == ControlRecordType.SNAPSHOT_FOOTER:
                        footer_seen = True
            else:
                if snapshot is None:
                    raise CorruptRecordError("records before the SnapshotHeader")
                for record in batch.records():
                    if record.value is None:
                        raise CorruptRecordError(f"a record with a null value at offset {record.offset}")
                    snapshot.records.append(deserialize_record(record.value))
    except CorruptRecordError:
        raise
    except (KafkaError, IndexError, ValueError) as error:
        raise CorruptRecordError(f"{path}: {error}") from error
    if snapshot is None or not footer_seen:
        raise CorruptRecordError(f"{path} has no SnapshotFooter: the snapshot is incomplete")
    if position != len(data):
        raise CorruptRecordError(f"{path} has {len(data) - position} bytes after its SnapshotFooter")
    return snapshot


def latest_valid_snapshot(directory: str) -> Snapshot | None:
    """The newest snapshot in `directory` that reads whole; newer ones that do not are skipped with a warning
    (and left in place for inspection: a newer valid snapshot will replace them)."""
    for snapshot_id in reversed(list_snapshots(directory)):
        path = snapshot_path(directory, snapshot_id)
        try:
            return read_snapshot(path, snapshot_id)
        except (CorruptRecordError, OSError) as error:
            log.warning("skipping the snapshot %s, which does not read: %s", path, error)
    return None


def read_snapshot_chunk(path: str, position: int, max_bytes: int) -> bytes:
    """Up to `max_bytes` of the snapshot file from `position` (FetchSnapshot sends a snapshot in such chunks)."""
    with open(path, "rb") as file:
        file.seek(position)
        return file.read(max_bytes)
