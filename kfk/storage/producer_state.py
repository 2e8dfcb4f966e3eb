"""ProducerStateManager: idempotence and transactions state per producer id, and its `.snapshot` files.

For each producer id the partition keeps the producer epoch, the coordinator epoch of its last transaction marker,
the metadata of its last 5 batches (to answer a retried batch with the offsets it already got instead of appending it
twice) and the first offset of its open transaction. The open transactions give the first unstable offset, which
bounds the last stable offset (LSO) that READ_COMMITTED consumers may read up to.

State is rebuilt on startup from the newest snapshot and a replay of batch headers after it. A snapshot is written
when a segment rolls (named by the new segment's base offset) and on clean shutdown (named by the log end offset).
Snapshot layout (Kafka's, big-endian): version int16 (1), crc uint32 (CRC32C of everything after it), then an int32
count of entries, each: producer_id int64, epoch int16, last_sequence int32, last_offset int64, offset_delta int32,
timestamp int64, coordinator_epoch int32, current_txn_first_offset int64 (-1: no open transaction) — 46 bytes.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import os
import struct
from collections import deque
from typing import NamedTuple, Protocol

from crc32c import crc32c

from kfk.common.constants import INT32_MAX
from kfk.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaStorageError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from kfk.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, NO_TIMESTAMP, Record
from kfk.records.control import ControlRecordType, EndTransactionMarker, control_record_type
from kfk.storage.checkpoint import atomic_write
from kfk.storage.log_files import (
    DELETED_FILE_SUFFIX,
    PRODUCER_SNAPSHOT_FILE_SUFFIX,
    offset_from_file_name,
    producer_snapshot_file,
)

logger = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
PRODUCER_SNAPSHOT_VERSION = 1
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms

_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_OFFSET = 2
_ENTRIES_OFFSET = 6

# Control records (Kafka's ControlRecordType / EndTransactionMarker): key = version int16 + type int16,
# value of a COMMIT/ABORT marker = version int16 + coordinator_epoch int32.


class CorruptSnapshotError(KafkaStorageError):
    """A producer snapshot that fails its CRC or layout: it is deleted and an older one (or a replay) is used."""


class AppendOrigin(enum.Enum):
    """Who appends (Kafka's AppendOrigin): a client's produce (fully checked), a follower copying its leader
    (trusted), a coordinator writing its own records or transaction markers, or the metadata log's leader."""

    CLIENT = "client"
    REPLICATION = "replication"
    COORDINATOR = "coordinator"
    RAFT_LEADER = "raft_leader"


class BatchHeader(Protocol):
    """The header fields of a batch this module reads (kfk.records' RecordBatch and LegacyRecordBatch have them)."""

    producer_id: int
    producer_epoch: int
    base_sequence: int
    last_sequence: int
    is_transactional: bool
    is_control: bool

    @property
    def base_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...

    @property
    def max_timestamp(self) -> int: ...

    def records(self) -> object: ...


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def in_sequence(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == INT32_MAX)


class BatchMetadata(NamedTuple):
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_sequence(self) -> int:
        return decrement_sequence(self.last_sequence, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


@dataclasses.dataclass
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    current_txn_first_offset: int | None = None
    batch_metadata: deque[BatchMetadata] = dataclasses.field(default_factory=deque)

    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_sequence(self) -> int:
        return self.batch_metadata[0].first_sequence if self.batch_metadata else NO_SEQUENCE

    @property
    def last_sequence(self) -> int:
        return self.batch_metadata[-1].last_sequence if self.batch_metadata else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def maybe_update_producer_epoch(self, producer_epoch: int) -> bool:
        if self.producer_epoch != producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = producer_epoch
            return True
        return False

    def add_batch_metadata(self, batch: BatchMetadata) -> None:
        if len(self.batch_metadata) == NUM_BATCHES_TO_RETAIN:
            self.batch_metadata.popleft()
        self.batch_metadata.append(batch)

    def add_batch(self, producer_epoch: int, last_sequence: int, last_offset: int, offset_delta: int,
                  timestamp: int) -> None:
        self.maybe_update_producer_epoch(producer_epoch)
        self.add_batch_metadata(BatchMetadata(last_sequence, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp

    def update(self, next_entry: ProducerStateEntry) -> None:
        self.maybe_update_producer_epoch(next_entry.producer_epoch)
        for batch in next_entry.batch_metadata:
            self.add_batch_metadata(batch)
        self.coordinator_epoch = next_entry.coordinator_epoch
        self.current_txn_first_offset = next_entry.current_txn_first_offset
        self.last_timestamp = next_entry.last_timestamp

    def find_duplicate_batch(self, batch: BatchHeader) -> BatchMetadata | None:
        """The earlier append of this very batch (same epoch, same sequence range), if it is among the last 5."""
        if batch.producer_epoch != self.producer_epoch:
            return None
        for metadata in self.batch_metadata:
            if metadata.first_sequence == batch.base_sequence and metadata.last_sequence == batch.last_sequence:
                return metadata
        return None


class CompletedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclasses.dataclass
class TxnMetadata:
    producer_id: int
    first_offset: int
    last_offset: int | None = None


def parse_end_transaction_marker(record: Record) -> EndTransactionMarker | None:
    """The COMMIT/ABORT marker a control record holds; None for other control records (leader change, ...)."""
    if control_record_type(record.key) not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
        return None
    return EndTransactionMarker.deserialize(record)


class ProducerAppendInfo:
    """The checks and updates of one producer's batches within one append (Kafka's ProducerAppendInfo)."""

    def __init__(self, topic_partition: str, producer_id: int, current_entry: ProducerStateEntry,
                 origin: AppendOrigin) -> None:
        self.topic_partition = topic_partition
        self.producer_id = producer_id
        self.current_entry = current_entry
        self.origin = origin
        self.updated_entry = ProducerStateEntry(
            producer_id, current_entry.producer_epoch, current_entry.coordinator_epoch,
            current_entry.last_timestamp, current_entry.current_txn_first_offset,
        )
        self.started_transactions: list[TxnMetadata] = []

    def _check_producer_epoch(self, producer_epoch: int, offset: int) -> None:
        current = self.updated_entry.producer_epoch
        if producer_epoch < current:
            message = (f"Epoch of producer {self.producer_id} at offset {offset} in {self.topic_partition} is "
                       f"{producer_epoch}, which is smaller than the last seen epoch {current}")
            if self.origin is AppendOrigin.REPLICATION:
                logger.warning(message)
            else:
                raise InvalidProducerEpochError(message)

    def _check_sequence(self, producer_epoch: int, append_first_sequence: int, offset: int) -> None:
        if producer_epoch != self.updated_entry.producer_epoch:
            if append_first_sequence != 0 and self.updated_entry.producer_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for new epoch of producer {self.producer_id} at offset {offset} in "
                    f"partition {self.topic_partition}: {producer_epoch} (request epoch), {append_first_sequence} "
                    f"(seq. number), {self.updated_entry.producer_epoch} (current producer epoch)"
                )
            return
        if not self.updated_entry.is_empty():
            current_last_sequence = self.updated_entry.last_sequence
        elif producer_epoch == self.current_entry.producer_epoch:
            current_last_sequence = self.current_entry.last_sequence
        else:
            current_last_sequence = NO_SEQUENCE
        # With no known epoch (the producer's records were all deleted) any sequence is accepted.
        if not (self.current_entry.producer_epoch == NO_PRODUCER_EPOCH
                or in_sequence(current_last_sequence, append_first_sequence)):
            raise OutOfOrderSequenceError(
                f"Out of order sequence number for producer {self.producer_id} at offset {offset} in partition "
                f"{self.topic_partition}: {append_first_sequence} (incoming seq. number), {current_last_sequence} "
                f"(current end sequence number)"
            )

    def append(self, batch: BatchHeader) -> CompletedTxn | None:
        """Check and record one batch; returns the transaction a COMMIT/ABORT marker completes."""
        if batch.is_control:
            records = list(batch.records())
            if not records:
                raise KafkaStorageError(
                    f"Record batch for producer {self.producer_id} is a control batch with no records"
                )
            marker = parse_end_transaction_marker(records[0])
            if marker is None:
                return None
            return self.append_end_txn_marker(marker.control_type == ControlRecordType.ABORT, marker.coordinator_epoch,
                                              batch.producer_epoch, batch.base_offset, batch.max_timestamp)
        self.append_data_batch(batch.producer_epoch, batch.base_sequence, batch.last_sequence, batch.max_timestamp,
                               batch.base_offset, batch.last_offset, batch.is_transactional)
        return None

    def append_data_batch(self, producer_epoch: int, first_sequence: int, last_sequence: int, last_timestamp: int,
                          first_offset: int, last_offset: int, is_transactional: bool) -> None:
        self._check_producer_epoch(producer_epoch, first_offset)
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(producer_epoch, first_sequence, first_offset)
        self.updated_entry.add_batch(producer_epoch, last_sequence, last_offset, last_offset - first_offset,
                                     last_timestamp)
        current_txn_first_offset = self.updated_entry.current_txn_first_offset
        if current_txn_first_offset is not None and not is_transactional:
            raise InvalidTxnStateError(
                f"Expected transactional write from producer {self.producer_id} at offset {first_offset} in "
                f"partition {self.topic_partition}"
            )
        if current_txn_first_offset is None and is_transactional:
            self.updated_entry.current_txn_first_offset = first_offset
            self.started_transactions.append(TxnMetadata(self.producer_id, first_offset))

    def append_end_txn_marker(self, is_abort: bool, coordinator_epoch: int, producer_epoch: int, offset: int,
                              timestamp: int) -> CompletedTxn | None:
        self._check_producer_epoch(producer_epoch, offset)
        if self.updated_entry.coordinator_epoch > coordinator_epoch:
            message = (f"Invalid coordinator epoch for producerId {self.producer_id} at offset {offset} in "
                       f"partition {self.topic_partition}: {coordinator_epoch} (zombie), "
                       f"{self.updated_entry.coordinator_epoch} (current)")
            if self.origin is AppendOrigin.REPLICATION:
                logger.info(message)
            else:
                raise TransactionCoordinatorFencedError(message)
        self.updated_entry.maybe_update_producer_epoch(producer_epoch)
        first_offset = self.updated_entry.current_txn_first_offset
        completed = None if first_offset is None else CompletedTxn(self.producer_id, first_offset, offset, is_abort)
        self.updated_entry.coordinator_epoch = coordinator_epoch
        self.updated_entry.current_txn_first_offset = None
        self.updated_entry.last_timestamp = timestamp
        return completed


class ProducerStateManager:
    """The producer table of one partition, with its snapshots in the partition's folder."""

    def __init__(self, topic_partition: str, log_dir: str,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> None:
        self.topic_partition = topic_partition
        self.log_dir = log_dir
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing_txns: dict[int, TxnMetadata] = {}  # by first offset
        self.unreplicated_txns: dict[int, TxnMetadata] = {}  # completed, marker above the high watermark
        self.last_map_offset = 0
        self.last_snap_offset = 0
        self.snapshots: dict[int, str] = self._list_snapshots()

    # -- snapshots on disk ---------------------------------------------------------------------------------------

    def _list_snapshots(self) -> dict[int, str]:
        snapshots: dict[int, str] = {}
        try:
            names = os.listdir(self.log_dir)
        except FileNotFoundError:
            return snapshots
        for name in names:
            if name.endswith(PRODUCER_SNAPSHOT_FILE_SUFFIX):
                try:
                    snapshots[offset_from_file_name(name)] = os.path.join(self.log_dir, name)
                except ValueError:
                    continue
        return snapshots

    def update_parent_dir(self, directory: str) -> None:
        self.log_dir = directory
        self.snapshots = {offset: os.path.join(directory, os.path.basename(path))
                          for offset, path in self.snapshots.items()}

    def latest_snapshot_offset(self) -> int | None:
        return max(self.snapshots) if self.snapshots else None

    def oldest_snapshot_offset(self) -> int | None:
        return min(self.snapshots) if self.snapshots else None

    def _remove_snapshot(self, offset: int) -> None:
        path = self.snapshots.pop(offset, None)
        if path is not None:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass

    def remove_and_mark_snapshot_for_deletion(self, offset: int) -> str | None:
        """Rename a snapshot to `.deleted` (it goes with a deleted segment); returns the new path."""
        path = self.snapshots.pop(offset, None)
        if path is None:
            return None
        try:
            os.replace(path, path + DELETED_FILE_SUFFIX)
        except FileNotFoundError:
            return None
        return path + DELETED_FILE_SUFFIX

    def delete_snapshots_before(self, offset: int) -> None:
        for snapshot_offset in [key for key in self.snapshots if key < offset]:
            self._remove_snapshot(snapshot_offset)

    def remove_stray_snapshots(self, segment_base_offsets: list[int]) -> None:
        """Delete snapshots that match no segment, except the newest stray one if it is past every segment
        (the snapshot written at the log end offset on clean shutdown)."""
        self.snapshots = self._list_snapshots()
        bases = set(segment_base_offsets)
        max_base = max(bases) if bases else None
        strays = sorted(offset for offset in self.snapshots if offset not in bases)
        keep = strays[-1] if strays and (max_base is None or strays[-1] > max_base) else None
        for offset in strays:
            if offset != keep:
                self._remove_snapshot(offset)

    @staticmethod
    def read_snapshot(path: str) -> list[ProducerStateEntry]:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise CorruptSnapshotError(f"Cannot read snapshot {path}: {exc}") from exc
        if len(data) < _SNAPSHOT_HEADER.size:
            raise CorruptSnapshotError(f"Snapshot {path} is truncated ({len(data)} bytes)")
        version, stored_crc, count = _SNAPSHOT_HEADER.unpack_from(data)
        if version != PRODUCER_SNAPSHOT_VERSION:
            raise CorruptSnapshotError(f"Snapshot contained an unknown file version {version}")
        computed_crc = crc32c(memoryview(data)[_ENTRIES_OFFSET:])
        if stored_crc != computed_crc:
            raise CorruptSnapshotError(
                f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {stored_crc}. Computed crc: {computed_crc}"
            )
        if count < 0 or len(data) != _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size:
            raise CorruptSnapshotError(f"Snapshot {path} declares {count} entries but holds {len(data)} bytes")
        entries = []
        for fields in _SNAPSHOT_ENTRY.iter_unpack(memoryview(data)[_SNAPSHOT_HEADER.size:]):
            (producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp, coordinator_epoch,
             current_txn_first_offset) = fields
            entry = ProducerStateEntry(producer_id, epoch, coordinator_epoch, timestamp,
                                       current_txn_first_offset if current_txn_first_offset >= 0 else None)
            if last_offset >= 0:
                entry.batch_metadata.append(BatchMetadata(last_sequence, last_offset, offset_delta, timestamp))
            entries.append(entry)
        return entries

    @staticmethod
    def write_snapshot(path: str, entries: list[ProducerStateEntry], sync: bool = True) -> None:
        body = b"".join(
            _SNAPSHOT_ENTRY.pack(
                entry.producer_id, entry.producer_epoch, entry.last_sequence, entry.last_data_offset,
                entry.last_offset_delta, entry.last_timestamp, entry.coordinator_epoch,
                -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset,
            )
            for entry in entries
        )
        counted = struct.pack(">i", len(entries)) + body
        data = struct.pack(">hI", PRODUCER_SNAPSHOT_VERSION, crc32c(counted)) + counted
        atomic_write(path, data, sync)

    def take_snapshot(self, sync: bool = True) -> str | None:
        """Write a snapshot at the map end offset unless one already covers it."""
        if self.last_map_offset <= self.last_snap_offset:
            return None
        path = producer_snapshot_file(self.log_dir, self.last_map_offset)
        self.write_snapshot(path, list(self.producers.values()), sync)
        self.snapshots[self.last_map_offset] = path
        self.last_snap_offset = self.last_map_offset
        return path

    # -- loading -------------------------------------------------------------------------------------------------

    def _is_expired(self, now_ms: int, entry: ProducerStateEntry) -> bool:
        return (entry.current_txn_first_offset is None
                and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms)

    def _load_producer_entry(self, entry: ProducerStateEntry) -> None:
        self.producers[entry.producer_id] = entry
        if entry.current_txn_first_offset is not None:
            self.ongoing_txns[entry.current_txn_first_offset] = TxnMetadata(entry.producer_id,
                                                                            entry.current_txn_first_offset)

    def _load_from_snapshot(self, log_start_offset: int, now_ms: int) -> None:
        while self.snapshots:
            offset = max(self.snapshots)
            try:
                entries = self.read_snapshot(self.snapshots[offset])
            except CorruptSnapshotError as exc:
                logger.warning("Failed to load producer snapshot from '%s': %s", self.snapshots[offset], exc)
                self._remove_snapshot(offset)
                continue
            for entry in entries:
                if not self._is_expired(now_ms, entry):
                    self._load_producer_entry(entry)
            self.last_snap_offset = self.last_map_offset = offset
            return
        self.last_snap_offset = self.last_map_offset = log_start_offset

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> None:
        """Drop snapshots outside (log_start_offset, log_end_offset] and, unless the state already ends at
        log_end_offset, reload from the newest remaining snapshot (the caller then replays the log after it)."""
        for offset in [key for key in self.snapshots if key > log_end_offset or key <= log_start_offset]:
            self._remove_snapshot(offset)
        if log_end_offset != self.last_map_offset:
            self.producers.clear()
            self.ongoing_txns.clear()
            self.unreplicated_txns.clear()
            self._load_from_snapshot(log_start_offset, now_ms)
        else:
            self.on_log_start_offset_incremented(log_start_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.producers.clear()
        self.ongoing_txns.clear()
        self.unreplicated_txns.clear()
        for snapshot_offset in list(self.snapshots):
            self._remove_snapshot(snapshot_offset)
        self.last_snap_offset = 0
        self.last_map_offset = offset

    # -- appends -------------------------------------------------------------------------------------------------

    def prepare_update(self, producer_id: int, origin: AppendOrigin) -> ProducerAppendInfo:
        current = self.producers.get(producer_id) or ProducerStateEntry(producer_id)
        return ProducerAppendInfo(self.topic_partition, producer_id, current, origin)

    def update(self, append_info: ProducerAppendInfo) -> None:
        if append_info.producer_id == NO_PRODUCER_ID:
            raise ValueError(f"Invalid producer id {append_info.producer_id} passed to update")
        current = self.producers.get(append_info.producer_id)
        if current is not None:
            current.update(append_info.updated_entry)
        else:
            self.producers[append_info.producer_id] = append_info.updated_entry
        for txn in append_info.started_transactions:
            self.ongoing_txns[txn.first_offset] = txn

    def update_map_end_offset(self, last_offset: int) -> None:
        self.last_map_offset = last_offset

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def last_stable_offset(self, completed_txn: CompletedTxn) -> int:
        """The LSO once this transaction completes: the first offset of the oldest other open transaction, or
        just past the marker."""
        for first_offset in sorted(self.ongoing_txns):
            if self.ongoing_txns[first_offset].producer_id != completed_txn.producer_id:
                return first_offset
        return completed_txn.last_offset + 1

    def complete_txn(self, completed_txn: CompletedTxn) -> None:
        txn = self.ongoing_txns.pop(completed_txn.first_offset, None)
        if txn is None:
            raise ValueError(
                f"Attempted to complete transaction {completed_txn} on partition {self.topic_partition} which was "
                f"not started"
            )
        txn.last_offset = completed_txn.last_offset
        self.unreplicated_txns[completed_txn.first_offset] = txn

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest transaction that is open, or decided but not yet replicated."""
        candidates = list(self.ongoing_txns) + list(self.unreplicated_txns)
        return min(candidates) if candidates else None

    def first_undecided_offset(self) -> int | None:
        return min(self.ongoing_txns) if self.ongoing_txns else None

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        self._remove_unreplicated_transactions(high_watermark)

    def _remove_unreplicated_transactions(self, offset: int) -> None:
        if not self.unreplicated_txns:
            return
        for first_offset in [key for key, txn in self.unreplicated_txns.items()
                             if txn.last_offset is not None and txn.last_offset < offset]:
            del self.unreplicated_txns[first_offset]

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        self._remove_unreplicated_transactions(log_start_offset)
        if self.last_map_offset < log_start_offset:
            self.last_map_offset = log_start_offset
        latest = self.latest_snapshot_offset()
        self.last_snap_offset = latest if latest is not None else log_start_offset

    def remove_expired_producers(self, now_ms: int) -> None:
        for producer_id in [key for key, entry in self.producers.items() if self._is_expired(now_ms, entry)]:
            del self.producers[producer_id]
