"""LogSegment: one `.log` file of batches plus its offset index, time index and transaction index.

The .log holds batches exactly as the broker received (and validated) them, back to back. Appends write at the end
with `os.pwrite` on an unbuffered descriptor; reads return a FileRegion for sendfile. Finding a batch by offset is a
binary search in the sparse offset index followed by a short forward scan of batch headers (never of records).

Index entries are added every `index.interval.bytes` of appended data, with Kafka's semantics: the offset is the
last offset of the append, the position that of its first batch; the time index gets the segment's max timestamp so
far and the last offset of the batch that holds it. A segment is not thread-safe: its Log serialises writers.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

from kfk.errors import CorruptRecordError, KafkaStorageError
from kfk.records import LOG_OVERHEAD, MAGIC_VALUE_V2, RECORD_BATCH_OVERHEAD, iter_batches
from kfk.storage.fetch_data_info import FetchDataInfo, FileRegion, LogOffsetMetadata, TimestampAndOffset
from kfk.storage.file_records import MIN_ENTRY_SIZE, Batch, FileRecords, LogOffsetPosition, entry_header
from kfk.storage.index import NO_TIMESTAMP, CorruptIndexError, OffsetIndex, TimeIndex, TimestampOffset
from kfk.storage.leader_epoch import LeaderEpochFileCache
from kfk.storage.log_files import log_file, offset_index_file, time_index_file, transaction_index_file
from kfk.storage.producer_state import AppendOrigin, CompletedTxn, ProducerStateManager
from kfk.storage.transaction_index import AbortedTxn, TransactionIndex, TxnIndexSearchResult

logger = logging.getLogger(__name__)

_RECOVERY_CHUNK_BYTES = 8 * 1024 * 1024


class LogSegmentOffsetOverflowError(KafkaStorageError):
    """A batch's offsets cannot be stored relative to this segment's base offset: it belongs in a new segment."""


class LogSegment:
    """A segment: the .log file plus its (lazily opened) indexes."""

    def __init__(self, log: FileRecords, offset_index_path: str, time_index_path: str,
                 txn_index: TransactionIndex, base_offset: int, index_interval_bytes: int, max_index_size: int,
                 roll_jitter_ms: int, created_ms: int) -> None:
        self.log = log
        self.offset_index_path = offset_index_path
        self.time_index_path = time_index_path
        self.txn_index = txn_index
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.roll_jitter_ms = roll_jitter_ms
        self.created_ms = created_ms
        self.bytes_since_last_index_entry = 0
        self.rolling_based_timestamp: int | None = None
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        self._max_timestamp_and_offset: TimestampOffset | None = None

    @classmethod
    def open(cls, directory: str, base_offset: int, *, index_interval_bytes: int, max_index_size: int,
             created_ms: int, roll_jitter_ms: int = 0, file_already_exists: bool = False,
             init_file_size: int = 0, preallocate: bool = False, file_suffix: str = "") -> LogSegment:
        log = FileRecords.open(log_file(directory, base_offset, file_suffix), file_already_exists,
                               init_file_size, preallocate)
        segment = cls(
            log,
            offset_index_file(directory, base_offset, file_suffix),
            time_index_file(directory, base_offset, file_suffix),
            TransactionIndex(base_offset, transaction_index_file(directory, base_offset, file_suffix)),
            base_offset, index_interval_bytes, max_index_size, roll_jitter_ms, created_ms,
        )
        if not file_already_exists:
            segment._open_indexes()  # a new segment's indexes are new too: nothing to check
        return segment

    def __repr__(self) -> str:
        return f"LogSegment(base_offset={self.base_offset}, size={self.size}, path={self.log.path})"

    # -- indexes (lazy) --------------------------------------------------------------------------------------------

    @property
    def offset_index(self) -> OffsetIndex:
        if self._offset_index is None:
            self._load_indexes()
        assert self._offset_index is not None
        return self._offset_index

    @property
    def time_index(self) -> TimeIndex:
        if self._time_index is None:
            self._load_indexes()
        assert self._time_index is not None
        return self._time_index

    @property
    def indexes_loaded(self) -> bool:
        return self._offset_index is not None

    def _open_indexes(self) -> None:
        if self._offset_index is None:
            self._offset_index = OffsetIndex(self.offset_index_path, self.base_offset, self.max_index_size)
        if self._time_index is None:
            self._time_index = TimeIndex(self.time_index_path, self.base_offset, self.max_index_size)

    def _load_indexes(self) -> None:
        """Open both indexes; if either is missing (for a non-empty segment) or fails its checks, rebuild both
        from the log, as Kafka does when it finds a corrupted index file."""
        missing = [path for path in (self.offset_index_path, self.time_index_path) if not os.path.exists(path)]
        self._open_indexes()
        if missing and self.log.size > 0:
            logger.warning("Could not find index file(s) %s corresponding to log file %s, rebuilding index files",
                           ", ".join(missing), self.log.path)
            self.rebuild_indexes()
            return
        try:
            self.sanity_check_indexes()
        except CorruptIndexError as exc:
            logger.warning("Found a corrupted index file corresponding to log file %s due to %s, rebuilding index "
                           "files...", self.log.path, exc)
            self.rebuild_indexes()

    def sanity_check_indexes(self) -> None:
        """Kafka's structural checks, then a cross-check of the last entries against the log itself, which
        catches zeroed and garbled indexes that are structurally plausible."""
        offset_index = self.offset_index
        time_index = self.time_index
        offset_index.sanity_check()
        time_index.sanity_check()
        self.txn_index.sanity_check()
        if offset_index.entries:
            last = offset_index.entry(offset_index.entries - 1)
            if last.position >= self.log.size:
                raise CorruptIndexError(f"Index {offset_index.path} points to position {last.position} past the end "
                                        f"of the log ({self.log.size} bytes)")
            try:
                header = entry_header(self.log.read(last.position, RECORD_BATCH_OVERHEAD))
            except CorruptRecordError as exc:
                raise CorruptIndexError(f"Index {offset_index.path} points to an invalid entry: {exc}") from None
            if header.magic == MAGIC_VALUE_V2 and not self.base_offset <= header.base_offset <= last.offset:
                raise CorruptIndexError(
                    f"Index {offset_index.path} maps offset {last.offset} to position {last.position}, where a batch "
                    f"starting at offset {header.base_offset} is"
                )
        if time_index.entries:
            last_time = time_index.last_entry
            found = self.log.search_for_offset_with_size(last_time.offset, offset_index.lookup(last_time.offset).position)
            if found is None:
                raise CorruptIndexError(f"Time index {time_index.path} refers to offset {last_time.offset} past the "
                                        f"end of the log")
            header = entry_header(self.log.read(found.position, RECORD_BATCH_OVERHEAD))
            if header.last_offset != last_time.offset or header.max_timestamp != last_time.timestamp:
                raise CorruptIndexError(
                    f"Time index {time_index.path} says max timestamp {last_time.timestamp} at offset "
                    f"{last_time.offset}, the log has {header.max_timestamp} at {header.last_offset}"
                )

    def rebuild_indexes(self) -> None:
        """Rebuild the offset and time indexes from the batch headers (no truncation, no CRC checks)."""
        self._open_indexes()
        self._reset_indexes()
        valid_bytes = last_index_entry = 0
        try:
            for position, batch in self.log.batch_headers():
                last_index_entry = self._index_batch(batch, position, last_index_entry)
                valid_bytes = position + batch.size_in_bytes
        except CorruptRecordError as exc:
            logger.warning("Stopped rebuilding the indexes of %s at byte %d: %s", self.log.path, valid_bytes, exc)
        self.offset_index.trim_to_valid_size()
        self.time_index.maybe_append(*self._read_max_timestamp_and_offset_so_far(), skip_full_check=True)
        self.time_index.trim_to_valid_size()

    def _reset_indexes(self) -> None:
        self.offset_index.reset()
        self.time_index.reset()
        self._max_timestamp_and_offset = TimestampOffset(NO_TIMESTAMP, self.base_offset)

    def _index_batch(self, batch: Batch, position: int, last_index_entry: int) -> int:
        """Recovery's index step for one batch (Kafka's LogSegment.recover loop body); returns the position of
        the last index entry."""
        if batch.max_timestamp > self.max_timestamp_so_far:
            self._max_timestamp_and_offset = TimestampOffset(batch.max_timestamp, batch.last_offset)
        if position - last_index_entry > self.index_interval_bytes:
            self.offset_index.append(batch.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
            return position
        return last_index_entry

    def restore_index_interval_count(self) -> None:
        """After a restart, count the bytes since the last index entry from the files (Kafka restarts the count
        at 0), so that a reopened active segment gets the same sparse entries as a rebuild would give it."""
        index = self.offset_index
        last_position = index.entry(index.entries - 1).position if index.entries else 0
        self.bytes_since_last_index_entry = self.size - last_position

    def resize_indexes(self, size: int) -> None:
        self.offset_index.resize(size)
        self.time_index.resize(size)

    # -- timestamps ----------------------------------------------------------------------------------------------

    def _read_max_timestamp_and_offset_so_far(self) -> TimestampOffset:
        if self._max_timestamp_and_offset is None:
            self._max_timestamp_and_offset = self.time_index.last_entry
        return self._max_timestamp_and_offset

    @property
    def max_timestamp_so_far(self) -> int:
        return self._read_max_timestamp_and_offset_so_far().timestamp

    @property
    def offset_of_max_timestamp_so_far(self) -> int:
        return self._read_max_timestamp_and_offset_so_far().offset

    @property
    def largest_timestamp(self) -> int:
        """What retention.ms compares with: the max record timestamp, or the file's mtime without timestamps."""
        if self.max_timestamp_so_far >= 0:
            return self.max_timestamp_so_far
        return self.log.last_modified_ms()

    def _load_first_batch_timestamp(self) -> None:
        if self.rolling_based_timestamp is None:
            for _, batch in self.log.batch_headers():
                self.rolling_based_timestamp = batch.max_timestamp
                break

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Time since the segment began: by the first batch's timestamp if it has one, else by the clock."""
        self._load_first_batch_timestamp()
        if self.rolling_based_timestamp is not None and self.rolling_based_timestamp >= 0:
            return message_timestamp - self.rolling_based_timestamp
        return now_ms - self.created_ms

    def first_batch_timestamp(self) -> int | None:
        self._load_first_batch_timestamp()
        if self.rolling_based_timestamp is not None and self.rolling_based_timestamp >= 0:
            return self.rolling_based_timestamp
        return None

    # -- size and rolling ------------------------------------------------------------------------------------------

    @property
    def size(self) -> int:
        return self.log.size

    def can_convert_to_relative_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= 2**31 - 1

    def should_roll(self, *, max_segment_bytes: int, max_segment_ms: int, messages_size: int,
                    max_timestamp_in_messages: int, max_offset_in_messages: int, now_ms: int) -> bool:
        size = self.log.size
        return (size > max_segment_bytes - messages_size
                or (size > 0 and self.time_waited_for_roll(now_ms, max_timestamp_in_messages)
                    > max_segment_ms - self.roll_jitter_ms)
                or self.offset_index.is_full()
                or self.time_index.is_full()
                or not self.can_convert_to_relative_offset(max_offset_in_messages))

    # -- append and read -----------------------------------------------------------------------------------------

    def append(self, largest_offset: int, largest_timestamp: int, shallow_offset_of_max_timestamp: int,
               records: bytes | bytearray | memoryview) -> None:
        """Append already-validated batches whose last offset is `largest_offset`."""
        size = len(records)
        if size == 0:
            return
        physical_position = self.log.size
        if physical_position == 0:
            self.rolling_based_timestamp = largest_timestamp
        if not self.can_convert_to_relative_offset(largest_offset):
            raise LogSegmentOffsetOverflowError(
                f"Detected offset overflow at offset {largest_offset} in segment {self}"
            )
        self.log.append(records)
        if largest_timestamp > self.max_timestamp_so_far:
            self._max_timestamp_and_offset = TimestampOffset(largest_timestamp, shallow_offset_of_max_timestamp)
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(largest_offset, physical_position)
            self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += size

    def translate_offset(self, offset: int, starting_position: int = 0) -> LogOffsetPosition | None:
        """Position and size of the first batch holding an offset >= `offset`: index lookup, then a header scan."""
        mapping = self.offset_index.lookup(offset)
        return self.log.search_for_offset_with_size(offset, max(mapping.position, starting_position))

    def read(self, start_offset: int, max_size: int, max_position: int | None = None,
             min_one_message: bool = False) -> FetchDataInfo | None:
        """A region starting at the batch holding `start_offset`, at most `max_size` bytes (or the whole first
        batch with `min_one_message`) and not past `max_position`; None if the offset is beyond this segment."""
        if max_size < 0:
            raise ValueError(f"Invalid max size {max_size} for log read from segment {self.log.path}")
        max_position = self.size if max_position is None else max_position
        start = self.translate_offset(start_offset)
        if start is None:
            return None
        offset_metadata = LogOffsetMetadata(start_offset, self.base_offset, start.position)
        adjusted_max_size = max(max_size, start.size) if min_one_message else max_size
        if adjusted_max_size == 0:
            return FetchDataInfo(offset_metadata)
        fetch_size = max(0, min(max_position - start.position, adjusted_max_size))
        return FetchDataInfo(offset_metadata, FileRegion(self.log, start.position, fetch_size),
                             first_entry_incomplete=adjusted_max_size < start.size)

    def fetch_upper_bound_offset(self, start_position: int, fetch_size: int) -> int | None:
        entry = self.offset_index.fetch_upper_bound_offset(start_position, fetch_size)
        return None if entry is None else entry.offset

    def find_offset_by_timestamp(self, timestamp: int, starting_offset: int) -> TimestampAndOffset | None:
        """The first record with timestamp >= `timestamp` and offset >= `starting_offset` in this segment."""
        timestamp_offset = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(timestamp_offset.offset, starting_offset)).position
        return self.log.search_for_timestamp(timestamp, position, starting_offset)

    def read_next_offset(self) -> int:
        """The offset after the last batch (reads headers from the last index entry on)."""
        start = self.offset_index.lookup(self.offset_index.last_offset).position
        next_offset = self.base_offset
        for _, batch in self.log.batch_headers(start):
            next_offset = batch.next_offset
        return next_offset

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> TxnIndexSearchResult:
        return self.txn_index.collect_aborted_txns(fetch_offset, upper_bound_offset)

    def update_txn_index(self, completed_txn: CompletedTxn, last_stable_offset: int) -> None:
        if completed_txn.is_aborted:
            self.txn_index.append(AbortedTxn(completed_txn.producer_id, completed_txn.first_offset,
                                             completed_txn.last_offset, last_stable_offset))

    # -- recovery and truncation ---------------------------------------------------------------------------------

    def recover(self, producer_state: ProducerStateManager,
                leader_epoch_cache: LeaderEpochFileCache | None = None) -> int:
        """Re-scan every batch: check CRCs, rebuild all three indexes, replay producer state and leader epochs,
        and cut the log at the first invalid or torn batch. Returns the number of bytes cut."""
        self._open_indexes()
        self._reset_indexes()
        self.txn_index.reset()
        valid_bytes = last_index_entry = 0
        try:
            for position, batch in self._iter_full_batches():
                batch.validate()
                if not self.can_convert_to_relative_offset(batch.last_offset):
                    raise LogSegmentOffsetOverflowError(
                        f"Detected offset overflow at offset {batch.last_offset} in segment {self}")
                last_index_entry = self._index_batch(batch, position, last_index_entry)
                valid_bytes = position + batch.size_in_bytes
                if batch.magic >= MAGIC_VALUE_V2:
                    epoch = batch.partition_leader_epoch
                    if leader_epoch_cache is not None and epoch >= 0:
                        latest = leader_epoch_cache.latest_epoch
                        if latest is None or epoch > latest:
                            leader_epoch_cache.assign(epoch, batch.base_offset)
                    self._update_producer_state(producer_state, batch)
        except CorruptRecordError as exc:
            logger.warning("Found invalid messages in log segment %s at byte offset %d: %s", self.log.path,
                           valid_bytes, exc)
        truncated = self.log.size - valid_bytes
        if truncated > 0:
            logger.warning("Truncated %d invalid bytes at the end of segment %s during recovery", truncated,
                           self.log.path)
        self.log.truncate_to(valid_bytes)
        self.offset_index.trim_to_valid_size()
        self.time_index.maybe_append(*self._read_max_timestamp_and_offset_so_far(), skip_full_check=True)
        self.time_index.trim_to_valid_size()
        return truncated

    def _iter_full_batches(self) -> Iterator[tuple[int, Batch]]:
        """(position, whole batch) for each complete entry, reading the file in large chunks; stops at a torn
        tail, raises CorruptRecordError for an impossible length or magic."""
        position, end = 0, self.log.size
        while end - position >= LOG_OVERHEAD:
            chunk = self.log.read(position, _RECOVERY_CHUNK_BYTES)
            consumed = 0
            for batch in iter_batches(chunk):
                yield position + batch.position, batch
                consumed = batch.position + batch.size_in_bytes
            if consumed == 0:
                header = entry_header(self.log.read(position, RECORD_BATCH_OVERHEAD))
                size = header.size_in_bytes
                if size < MIN_ENTRY_SIZE:
                    raise CorruptRecordError(f"Entry at position {position} has impossible size {size}")
                if position + size > end:
                    return  # torn tail
                chunk = self.log.read(position, size)
                for batch in iter_batches(chunk):
                    yield position + batch.position, batch
                    consumed = batch.position + batch.size_in_bytes
                if consumed == 0:
                    return
            position += consumed

    def _update_producer_state(self, producer_state: ProducerStateManager, batch: Batch) -> None:
        if batch.has_producer_id:
            append_info = producer_state.prepare_update(batch.producer_id, AppendOrigin.REPLICATION)
            completed = append_info.append(batch)
            producer_state.update(append_info)
            if completed is not None:
                self.update_txn_index(completed, producer_state.last_stable_offset(completed))
                producer_state.complete_txn(completed)
        producer_state.update_map_end_offset(batch.last_offset + 1)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch with offsets >= `offset` (a batch straddling it goes too); returns bytes cut."""
        mapping = self.translate_offset(offset)
        offset_index, time_index = self.offset_index, self.time_index
        offset_index.truncate_to(offset)
        time_index.truncate_to(offset)
        self.txn_index.truncate_to(offset)
        offset_index.resize(self.max_index_size)
        time_index.resize(self.max_index_size)
        truncated = 0 if mapping is None else self.log.truncate_to(mapping.position)
        if self.log.size == 0:
            self.rolling_based_timestamp = None
        self.bytes_since_last_index_entry = 0
        last = time_index.last_entry
        after = self.log.largest_timestamp_after(offset_index.lookup(last.offset).position)
        self._max_timestamp_and_offset = after if after.timestamp > last.timestamp else last
        return truncated

    # -- lifecycle -------------------------------------------------------------------------------------------------

    def on_become_inactive_segment(self) -> None:
        """Roll: record the max timestamp in the time index and trim indexes and preallocated log space."""
        self.time_index.maybe_append(self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far,
                                     skip_full_check=True)
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()
        self.log.trim()

    def flush(self) -> None:
        self.log.flush()
        if self._offset_index is not None:
            self._offset_index.flush()
        if self._time_index is not None:
            self._time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        if self._time_index is not None and self._max_timestamp_and_offset is not None:
            self._time_index.maybe_append(*self._max_timestamp_and_offset, skip_full_check=True)
        if self._offset_index is not None:
            self._offset_index.close_and_trim()
        if self._time_index is not None:
            self._time_index.close_and_trim()
        self.log.close()
        self.txn_index.close()

    def close_handlers(self) -> None:
        if self._offset_index is not None:
            self._offset_index.close()
        if self._time_index is not None:
            self._time_index.close()
        self.log.close_handlers()
        self.txn_index.close()

    def change_file_suffixes(self, old_suffix: str, new_suffix: str) -> None:
        def replaced(path: str) -> str:
            if not path.endswith(old_suffix):
                raise KafkaStorageError(f"Expected {path} to end with suffix {old_suffix!r}")
            return path[: len(path) - len(old_suffix)] + new_suffix if old_suffix else path + new_suffix

        self.log.rename_to(replaced(self.log.path))
        for attribute in ("offset_index_path", "time_index_path"):
            old_path = getattr(self, attribute)
            new_path = replaced(old_path)
            if os.path.exists(old_path):
                os.replace(old_path, new_path)
            setattr(self, attribute, new_path)
        if self._offset_index is not None:
            self._offset_index.path = self.offset_index_path
        if self._time_index is not None:
            self._time_index.path = self.time_index_path
        self.txn_index.rename_to(replaced(self.txn_index.path))

    def update_parent_dir(self, directory: str) -> None:
        """The partition folder was renamed: point every path (and open index) at the new folder."""
        def moved(path: str) -> str:
            return os.path.join(directory, os.path.basename(path))

        self.log.path = moved(self.log.path)
        self.offset_index_path = moved(self.offset_index_path)
        self.time_index_path = moved(self.time_index_path)
        if self._offset_index is not None:
            self._offset_index.path = self.offset_index_path
        if self._time_index is not None:
            self._time_index.path = self.time_index_path
        self.txn_index.path = moved(self.txn_index.path)

    def move_to(self, directory: str) -> int:
        """The segment's files were copied into `directory` (a replica moving to another log dir): use the copies
        from now on. Returns the old `.log` descriptor, for the caller to close once no fetch can send from it."""
        old_fd = self.log.reopen_at(os.path.join(directory, os.path.basename(self.log.path)))
        self.txn_index.close()  # reopened at its new path by the next append or read
        self.update_parent_dir(directory)
        for index in (self._offset_index, self._time_index):
            if index is not None:
                index.move_to(index.path)
        return old_fd

    def has_suffix(self, suffix: str) -> bool:
        return all(path.endswith(suffix) for path in
                   (self.log.path, self.offset_index_path, self.time_index_path, self.txn_index.path))

    def delete_if_exists(self) -> None:
        """Close and remove all four files (the indexes may be absent)."""
        if self._offset_index is not None:
            self._offset_index.close()
        if self._time_index is not None:
            self._time_index.close()
        self.log.delete_if_exists()
        for path in (self.offset_index_path, self.time_index_path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self.txn_index.delete_if_exists()
