"""Log compaction (`cleanup.policy=compact`): keep the latest record of every key, never renumber offsets.

Which log is cleaned, from which first dirty offset, and when, is the LogCleanerManager's business
(cleaner_manager.py, with the `cleaner-offset-checkpoint` files); the broker's threads that run it are in
cleaner_threads.py. This module is the work of one cleaning.

Cleaning (Kafka's Cleaner):
1. An offset map of key -> latest offset is built over the dirty part (control batches and aborted transactions
   do not count).
2. All segments from the log start to there are rewritten in groups (at most segment.bytes per group): a record
   stays if it is the latest for its key and either has a value or is a tombstone still within its delete horizon.
   The first time a batch keeps a tombstone (or a marker of a transaction with no data left), it gets a delete
   horizon of now + delete.retention.ms, stored in the batch (KIP-534); it is dropped by a cleaning after that time.
   Records of aborted transactions go; a transaction marker stays while data of its transaction remains. The last
   batch of each active producer stays, emptied if need be, so idempotence state survives (Kafka's RETAIN_EMPTY).
   Batches that lose nothing are copied byte for byte; others are re-encoded with their original offsets.
3. Each group is written as `.cleaned` files, renamed `.swap`, the old segments are renamed `.deleted`, and the
   swap is renamed into place — the loader finishes or undoes a crash at any of these steps.
"""

from __future__ import annotations

import collections
import dataclasses
import heapq
import logging
import os
from collections.abc import Iterator

from kfk.common.constants import INT32_MAX
from kfk.records import (
    MAGIC_VALUE_V2,
    NO_TIMESTAMP,
    LegacyRecordBatch,
    LegacyRecordsBuilder,
    MemoryRecordsBuilder,
    Record,
    RecordBatch,
    TimestampType,
    build_empty_batch,
    iter_batches,
)
from kfk.records.control import ControlRecordType
from kfk.storage.checkpoint import fsync_directory
from kfk.storage.cleaner_manager import (
    UNLIMITED_IO_BYTES_PER_SECOND,
    LogCleanerManager,
    LogCleaningAbortedError,
    LogToClean,
    Throttler,
    cleanable_offsets,
)
from kfk.storage.log import Log
from kfk.storage.log_files import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
)
from kfk.storage.log_loader import open_segment
from kfk.storage.producer_state import parse_end_transaction_marker
from kfk.storage.segment import LogSegment
from kfk.storage.transaction_index import AbortedTxn, TransactionIndex

logger = logging.getLogger(__name__)

_STATS_KEPT = 100  # the last cleanings' stats, for logs and tests


@dataclasses.dataclass
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_retained: int = 0
    invalid_records: int = 0
    segments_cleaned: int = 0
    end_offset: int = 0
    # The earliest delete horizon among the kept batches that still hold tombstones or markers (None: no such
    # batch): when it passes, a cleaning is due even if nothing is dirty.
    earliest_delete_horizon_ms: int | None = None

    def kept_delete_horizon(self, delete_horizon_ms: int) -> None:
        if self.earliest_delete_horizon_ms is None or delete_horizon_ms < self.earliest_delete_horizon_ms:
            self.earliest_delete_horizon_ms = delete_horizon_ms


class _SegmentsChangedError(Exception):
    """Retention removed a segment that was being cleaned: the cleaning stops (the next one starts over)."""


class _CleanedTransactionMetadata:
    """Which transactions' batches and markers may go (Kafka's CleanedTransactionMetadata): aborted data always;
    an ABORT marker once no data of its transaction remains; a COMMIT marker when no data of its transaction was
    seen in this pass. Retained ABORT markers are re-indexed in the cleaned segment's transaction index."""

    def __init__(self) -> None:
        self.ongoing_committed: set[int] = set()
        self.ongoing_aborted: dict[int, tuple[AbortedTxn, list[int]]] = {}
        self._aborted_heap: list[tuple[int, int, AbortedTxn]] = []
        self._counter = 0
        self.cleaned_index: TransactionIndex | None = None

    def add_aborted_transactions(self, aborted: list[AbortedTxn]) -> None:
        for txn in aborted:
            heapq.heappush(self._aborted_heap, (txn.first_offset, self._counter, txn))
            self._counter += 1

    def _consume_aborted_up_to(self, offset: int) -> None:
        while self._aborted_heap and self._aborted_heap[0][0] <= offset:
            _, _, txn = heapq.heappop(self._aborted_heap)
            self.ongoing_aborted.setdefault(txn.producer_id, (txn, []))

    def on_control_batch_read(self, batch: RecordBatch, records: list[Record]) -> bool:
        self._consume_aborted_up_to(batch.last_offset)
        if not records:
            return True  # an emptied control batch: already cleaned
        marker = parse_end_transaction_marker(records[0])
        if marker is None:
            return False
        producer_id = batch.producer_id
        if marker.control_type == ControlRecordType.ABORT:
            entry = self.ongoing_aborted.pop(producer_id, None)
            if entry is not None and entry[1]:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(entry[0])
                return False
            return True
        if marker.control_type == ControlRecordType.COMMIT:
            if producer_id in self.ongoing_committed:
                self.ongoing_committed.discard(producer_id)
                return False
            return True
        return False

    def on_batch_read(self, batch: RecordBatch | LegacyRecordBatch) -> bool:
        """True if the batch belongs to an aborted transaction (its records can all go)."""
        self._consume_aborted_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        entry = self.ongoing_aborted.get(batch.producer_id)
        if entry is not None:
            entry[1].append(batch.last_offset)
            return True
        self.ongoing_committed.add(batch.producer_id)
        return False


class LogCleaner:
    """Compacts logs with cleanup.policy containing `compact` (Kafka's Cleaner): the work of one cleaning, safe
    beside appends and reads. Under the log's lock it takes a snapshot (the inactive segments up to the first
    uncleanable offset, the producers' last batches); without it, it reads those segments (no append touches a
    segment once rolled) and writes the cleaned ones; under the lock again it swaps each group in, after checking
    that retention or truncation did not change it meanwhile. Between batches it asks the manager whether the
    cleaning was aborted (truncation or deletion waits for that) and lets the throttler slow it down."""

    def __init__(self, manager: LogCleanerManager | None = None, throttler: Throttler | None = None) -> None:
        self.manager = manager or LogCleanerManager()
        self.throttler = throttler or Throttler(UNLIMITED_IO_BYTES_PER_SECOND)
        self.stats: collections.deque[CleanerStats] = collections.deque(maxlen=_STATS_KEPT)

    def clean_filthiest_log(self, logs: list[Log], now_ms: int) -> CleanerStats | None:
        """One cleaner pass: the dirtiest log, cleaned; None if none needed it (or its cleaning was aborted)."""
        to_clean = self.manager.grab_filthiest_compacted_log(logs, now_ms)
        if to_clean is None:
            return None
        return self.clean_log(to_clean, now_ms)

    def clean(self, log: Log, now_ms: int) -> CleanerStats | None:
        """Compact `log` up to its first uncleanable offset, whatever its dirty ratio (None if its cleaning is
        paused or already running). With nothing dirty, this still drops the tombstones and markers whose delete
        horizon has passed."""
        if not self.manager.start_cleaning(log.topic_partition):
            return None
        try:
            with log.lock:
                to_clean = cleanable_offsets(log, self.manager.checkpointed_offset(log), now_ms)
        except BaseException:
            self.manager.done_cleaning(log.topic_partition, os.path.dirname(log.dir), None)
            raise
        return self.clean_log(to_clean, now_ms)

    def clean_log(self, to_clean: LogToClean, now_ms: int) -> CleanerStats | None:
        """Clean a log the manager marked IN_PROGRESS, and report to it (None when the cleaning was aborted)."""
        log = to_clean.log
        topic_partition = log.topic_partition
        log_dir = os.path.dirname(log.dir)
        end_offset: int | None = None
        delete_horizon_ms: int | None = None
        try:
            stats = self._clean(to_clean, now_ms)
            end_offset = stats.end_offset
            delete_horizon_ms = stats.earliest_delete_horizon_ms
            return stats
        except LogCleaningAbortedError:
            logger.info("Cleaning of %s was aborted", topic_partition)
            return None
        except _SegmentsChangedError as error:
            logger.info("Cleaning of %s stopped: %s", topic_partition, error)
            return None
        finally:
            self.manager.done_cleaning(topic_partition, log_dir, end_offset, delete_horizon_ms)

    def _clean(self, to_clean: LogToClean, now_ms: int) -> CleanerStats:
        log = to_clean.log
        stats = CleanerStats()
        end_offset = to_clean.first_uncleanable_offset
        with log.lock:
            if log.closed:
                raise _SegmentsChangedError("the log was closed")
            active = log.active_segment
            segments = [segment for segment in log.segments
                        if segment.base_offset < end_offset and segment is not active]
            dirty_segments = [segment for segment in log.segments.values_from(to_clean.first_dirty_offset, end_offset)
                              if segment is not active]
            clean_segments = [segment for segment in segments if segment.base_offset < to_clean.first_dirty_offset]
            legacy_delete_horizon_ms = 0
            if clean_segments:
                legacy_delete_horizon_ms = clean_segments[-1].log.last_modified_ms() - log.config.delete_retention_ms
            last_records_of_active_producers = {
                producer_id: (entry.last_data_offset if entry.last_data_offset >= 0 else None, entry.producer_epoch)
                for producer_id, entry in log.producer_state.producers.items()
            }
        offset_map = self._build_offset_map(log, dirty_segments, to_clean.first_dirty_offset, end_offset)
        txn_metadata = _CleanedTransactionMetadata()
        for group in self._group_segments_by_size(segments, log.config.segment_size, end_offset):
            self._clean_segments(log, group, offset_map, end_offset - 1, now_ms, stats, txn_metadata,
                                 legacy_delete_horizon_ms, last_records_of_active_producers)
        stats.end_offset = end_offset
        self.stats.append(stats)
        return stats

    def _check_aborted_and_throttle(self, log: Log, io_bytes: int) -> None:
        self.manager.check_cleaning_aborted(log.topic_partition)
        self.throttler.maybe_throttle(io_bytes)

    def _build_offset_map(self, log: Log, segments: list[LogSegment], start: int, end: int) -> dict[bytes, int]:
        offset_map: dict[bytes, int] = {}
        txn_metadata = _CleanedTransactionMetadata()
        txn_metadata.add_aborted_transactions(log.collect_aborted_transactions(start, end))
        for segment in segments:
            for batch in _iter_segment_batches(segment):
                if batch.base_offset >= end:
                    break
                self._check_aborted_and_throttle(log, batch.size_in_bytes)
                if batch.is_control:
                    txn_metadata.on_control_batch_read(batch, list(batch.records()))
                    continue
                if txn_metadata.on_batch_read(batch):
                    continue
                for record in batch.records():
                    if start <= record.offset < end and record.key is not None:
                        offset_map[record.key] = record.offset
        return offset_map

    @staticmethod
    def _group_segments_by_size(segments: list[LogSegment], max_size: int, end_offset: int) -> list[list[LogSegment]]:
        groups: list[list[LogSegment]] = []
        index = 0
        while index < len(segments):
            group = [segments[index]]
            size = segments[index].size
            index += 1
            while index < len(segments):
                candidate = segments[index]
                following = segments[index + 1].base_offset if index + 1 < len(segments) else end_offset
                if size + candidate.size > max_size or following - 1 - group[0].base_offset > INT32_MAX:
                    break
                group.append(candidate)
                size += candidate.size
                index += 1
            groups.append(group)
        return groups

    def _clean_segments(self, log: Log, group: list[LogSegment], offset_map: dict[bytes, int], map_latest_offset: int,
                        now_ms: int, stats: CleanerStats, txn_metadata: _CleanedTransactionMetadata,
                        legacy_delete_horizon_ms: int,
                        last_records_of_active_producers: dict[int, tuple[int | None, int]]) -> None:
        config = log.config
        base_offset = group[0].base_offset
        for suffix in (CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX):
            _remove_segment_files(log.dir, base_offset, suffix)
        cleaned = open_segment(log.dir, base_offset, config, now_ms, exists=False, suffix=CLEANED_FILE_SUFFIX)
        txn_metadata.cleaned_index = cleaned.txn_index
        try:
            for position, segment in enumerate(group):
                upper_bound = (group[position + 1].base_offset if position + 1 < len(group)
                               else segment.read_next_offset())
                txn_metadata.add_aborted_transactions(log.collect_aborted_transactions(segment.base_offset,
                                                                                        upper_bound))
                retain_legacy_deletes = segment.log.last_modified_ms() > legacy_delete_horizon_ms
                for batch in _iter_segment_batches(segment):
                    self._check_aborted_and_throttle(log, batch.size_in_bytes)
                    output = self._filter_batch(batch, offset_map, map_latest_offset, now_ms,
                                                config.delete_retention_ms, txn_metadata,
                                                last_records_of_active_producers, retain_legacy_deletes, stats)
                    stats.bytes_read += batch.size_in_bytes
                    if output:
                        out_batch = next(iter_batches(output))
                        out_last = out_batch.last_offset
                        cleaned.append(out_last, out_batch.max_timestamp, out_last, output)
                        stats.bytes_written += len(output)
            cleaned.on_become_inactive_segment()
            cleaned.flush()
            os.utime(cleaned.log.path, ns=(os.stat(group[-1].log.path).st_atime_ns,
                                           os.stat(group[-1].log.path).st_mtime_ns))
            with log.lock:
                self.manager.check_cleaning_aborted(log.topic_partition)
                self._replace_segments(log, cleaned, group, now_ms)
            stats.segments_cleaned += len(group)
        except BaseException:
            cleaned.delete_if_exists()
            raise

    @staticmethod
    def _filter_batch(batch: RecordBatch | LegacyRecordBatch, offset_map: dict[bytes, int], map_latest_offset: int,
                      now_ms: int, delete_retention_ms: int, txn_metadata: _CleanedTransactionMetadata,
                      last_records_of_active_producers: dict[int, tuple[int | None, int]],
                      retain_legacy_deletes: bool, stats: CleanerStats) -> bytes:
        """The bytes that replace `batch` in the cleaned segment (b"" to drop it)."""
        records = list(batch.records())
        stats.records_read += len(records)
        is_v2 = batch.magic >= MAGIC_VALUE_V2
        if is_v2 and batch.is_control:
            can_discard = txn_metadata.on_control_batch_read(batch, records)
            discard_records = can_discard and batch.has_delete_horizon and batch.delete_horizon_ms <= now_ms
        else:
            can_discard = txn_metadata.on_batch_read(batch)
            discard_records = can_discard
        contains_marker_for_empty_txn = can_discard and batch.is_control
        retain_empty = False
        if is_v2 and batch.has_producer_id:
            last = last_records_of_active_producers.get(batch.producer_id)
            if last is not None:
                last_data_offset, producer_epoch = last
                if last_data_offset is not None:
                    retain_empty = batch.last_offset == last_data_offset
                else:
                    retain_empty = batch.is_control and batch.producer_epoch == producer_epoch

        retained: list[Record] = []
        contains_tombstones = False
        for record in records:
            if discard_records:
                keep = False
            elif batch.is_control:
                keep = True
            elif record.offset > map_latest_offset:
                keep = True
            elif record.key is None:
                stats.invalid_records += 1
                keep = False
            else:
                latest = record.offset >= offset_map.get(record.key, -1)
                if record.value is not None:
                    keep = latest
                elif is_v2:
                    keep = latest and (not batch.has_delete_horizon or now_ms < batch.delete_horizon_ms)
                else:
                    keep = latest and retain_legacy_deletes
            if keep:
                retained.append(record)
                if record.value is None:
                    contains_tombstones = True
        stats.records_retained += len(retained)

        needs_delete_horizon = (is_v2 and not batch.has_delete_horizon
                                and (contains_tombstones or contains_marker_for_empty_txn))
        if retained and (contains_tombstones or contains_marker_for_empty_txn):
            if needs_delete_horizon:
                stats.kept_delete_horizon(now_ms + delete_retention_ms)
            elif batch.has_delete_horizon and batch.delete_horizon_ms > now_ms:
                stats.kept_delete_horizon(batch.delete_horizon_ms)
        if retained and len(retained) == len(records) and not needs_delete_horizon:
            return bytes(batch.as_memoryview())
        if not retained:
            if retain_empty and is_v2:
                return build_empty_batch(
                    base_offset=batch.base_offset, last_offset=batch.last_offset, producer_id=batch.producer_id,
                    producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
                    timestamp=batch.max_timestamp, timestamp_type=batch.timestamp_type,
                    is_transactional=batch.is_transactional, is_control=batch.is_control,
                    partition_leader_epoch=batch.partition_leader_epoch,
                )
            return b""
        if not is_v2:
            legacy = LegacyRecordsBuilder(batch.magic, compression_type=batch.compression_type,
                                          timestamp_type=batch.timestamp_type, base_offset=retained[0].offset,
                                          log_append_time=batch.max_timestamp)
            legacy.extend(retained)
            return legacy.close()
        if needs_delete_horizon:
            delete_horizon_ms = now_ms + delete_retention_ms
        else:
            delete_horizon_ms = batch.delete_horizon_ms
        log_append_time = (batch.max_timestamp if batch.timestamp_type == TimestampType.LOG_APPEND_TIME
                           else NO_TIMESTAMP)
        builder = MemoryRecordsBuilder(
            compression_type=batch.compression_type, timestamp_type=batch.timestamp_type,
            base_offset=batch.base_offset, log_append_time=log_append_time, producer_id=batch.producer_id,
            producer_epoch=batch.producer_epoch, base_sequence=batch.base_sequence,
            is_transactional=batch.is_transactional, is_control_batch=batch.is_control,
            partition_leader_epoch=batch.partition_leader_epoch, delete_horizon_ms=delete_horizon_ms,
        )
        builder.extend(retained)
        return builder.close()

    @staticmethod
    def _replace_segments(log: Log, cleaned: LogSegment, old_segments: list[LogSegment], now_ms: int) -> None:
        """Swap the cleaned segment in for the old ones, crash-safely (see the module docstring)."""
        for segment in old_segments:
            if log.closed or log.segments.get(segment.base_offset) is not segment:
                raise _SegmentsChangedError(f"segment {segment} was removed while it was being cleaned")
        cleaned.change_file_suffixes(CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)
        fsync_directory(log.dir)
        for segment in old_segments:
            log.segments.remove(segment.base_offset)
            segment.change_file_suffixes("", DELETED_FILE_SUFFIX)
        delay = log.config.file_delete_delay_ms

        def delete_old() -> None:
            for segment in old_segments:
                segment.delete_if_exists()

        if delay > 0:
            log.deletion_queue.schedule(now_ms + delay, delete_old)
        else:
            delete_old()
        cleaned.change_file_suffixes(SWAP_FILE_SUFFIX, "")
        log.segments.add(cleaned)
        log.on_segments_replaced()
        fsync_directory(log.dir)


def _iter_segment_batches(segment: LogSegment) -> Iterator[RecordBatch | LegacyRecordBatch]:
    """Whole batches of a segment, read one at a time (compaction decodes records; it is not a hot path)."""
    for position, header in segment.log.batch_headers():
        yield segment.log.read_batch(position, header.size_in_bytes)


def _remove_segment_files(directory: str, base_offset: int, suffix: str) -> None:
    prefix = f"{base_offset:020d}"
    for name in (".log", ".index", ".timeindex", ".txnindex"):
        try:
            os.unlink(os.path.join(directory, prefix + name + suffix))
        except FileNotFoundError:
            pass
