"""FileRecords: a segment's `.log` file, and walks over the batch headers in it (Kafka's FileRecords).

The file is written with `os.pwrite` on an unbuffered descriptor at the logical end (a preallocated file is longer
than its data), fsynced by `flush`, and read with `os.pread`. Walking the log by offset or timestamp reads batch
headers only — a header-only view from kfk.records picked by the magic byte — so finding a position never decodes
records; only the single batch that answers a search by timestamp is read whole.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import NamedTuple

from kfk.errors import CorruptRecordError, KafkaStorageError
from kfk.records import (
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_VALUE_V0,
    MAGIC_VALUE_V1,
    MAGIC_VALUE_V2,
    RECORD_BATCH_OVERHEAD,
    LegacyRecordBatch,
    RecordBatch,
    iter_batches,
)
from kfk.storage.fetch_data_info import TimestampAndOffset
from kfk.storage.index import NO_TIMESTAMP, TimestampOffset

Batch = RecordBatch | LegacyRecordBatch

_SCAN_CHUNK_BYTES = 16 * 1024
MIN_ENTRY_SIZE = LOG_OVERHEAD + 14  # the smallest legacy v0 message


class LogOffsetPosition(NamedTuple):
    """Where a batch is: its last offset, its position in the .log and its size."""

    offset: int
    position: int
    size: int


def entry_header(buffer: bytes) -> Batch:
    """A header-only view of the entry at the start of `buffer` (v2 batch or legacy message), chosen by magic."""
    if len(buffer) <= MAGIC_OFFSET:
        raise CorruptRecordError(f"Log entry header is truncated ({len(buffer)} bytes)")
    magic = buffer[MAGIC_OFFSET]
    if magic == MAGIC_VALUE_V2:
        return RecordBatch(buffer)
    if magic in (MAGIC_VALUE_V0, MAGIC_VALUE_V1):
        return LegacyRecordBatch(buffer)
    raise CorruptRecordError(f"Log entry has unknown magic {magic}")


class FileRecords:
    """The `.log` file: an unbuffered descriptor and the logical size (a preallocated file is longer)."""

    def __init__(self, path: str, fd: int, size: int) -> None:
        self.path = path
        self._fd = fd
        self.size = size
        self.dirty = False

    @classmethod
    def open(cls, path: str, file_already_exists: bool = False, init_file_size: int = 0,
             preallocate: bool = False) -> FileRecords:
        flags = os.O_RDWR | os.O_CREAT
        fd = os.open(path, flags, 0o644)
        try:
            if file_already_exists:
                size = os.fstat(fd).st_size
            else:
                size = 0
                if preallocate and init_file_size > 0:
                    os.ftruncate(fd, init_file_size)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd, size)

    def fileno(self) -> int:
        if self._fd < 0:
            raise KafkaStorageError(f"Log file {self.path} is closed")
        return self._fd

    @property
    def closed(self) -> bool:
        return self._fd < 0

    def append(self, data: bytes | bytearray | memoryview) -> int:
        view = memoryview(data)
        written_total = 0
        while written_total < len(view):
            written = os.pwrite(self._fd, view[written_total:], self.size + written_total)
            if written <= 0:
                raise KafkaStorageError(f"Short write to {self.path}")
            written_total += written
        self.size += written_total
        self.dirty = True
        return written_total

    def read(self, position: int, length: int) -> bytes:
        """Up to `length` bytes from `position`, never past the logical end."""
        length = max(0, min(length, self.size - position))
        if length == 0:
            return b""
        data = os.pread(self._fd, length, position)
        while len(data) < length:
            more = os.pread(self._fd, length - len(data), position + len(data))
            if not more:
                break
            data += more
        return data

    def flush(self) -> None:
        if self.dirty and self._fd >= 0:
            os.fsync(self._fd)
            self.dirty = False

    def truncate_to(self, target_size: int) -> int:
        """Cut the file to `target_size` bytes; returns how many were removed."""
        if target_size < 0 or target_size > self.size:
            raise KafkaStorageError(
                f"Attempt to truncate log segment {self.path} to {target_size} bytes failed, size of this log "
                f"segment is {self.size} bytes."
            )
        removed = self.size - target_size
        if removed or os.fstat(self._fd).st_size != target_size:
            os.ftruncate(self._fd, target_size)
            self.dirty = True
        self.size = target_size
        return removed

    def trim(self) -> None:
        """Drop preallocated space beyond the data."""
        if os.fstat(self._fd).st_size > self.size:
            os.ftruncate(self._fd, self.size)

    def close(self) -> None:
        if self._fd >= 0:
            self.flush()
            self.trim()
            os.close(self._fd)
            self._fd = -1

    def close_handlers(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename_to(self, new_path: str) -> None:
        os.replace(self.path, new_path)
        self.path = new_path

    def reopen_at(self, path: str) -> int:
        """Read and write the copy of this file at `path` from now on (its replica moved to another log dir).
        Returns the old descriptor: a fetch already sending from it may still be, so the caller closes it later."""
        fd = os.open(path, os.O_RDWR)
        old_fd, self._fd, self.path = self._fd, fd, path
        return old_fd

    def delete_if_exists(self) -> bool:
        self.close_handlers()
        try:
            os.unlink(self.path)
            return True
        except FileNotFoundError:
            return False

    def last_modified_ms(self) -> int:
        return int(os.stat(self.path).st_mtime * 1000)

    # -- walking headers -----------------------------------------------------------------------------------------

    def batch_headers(self, start: int = 0, end: int | None = None) -> Iterator[tuple[int, Batch]]:
        """(position, header-only view) of each complete entry in [start, end), reading headers only. Stops at
        a torn trailing entry; raises CorruptRecordError for an impossible length or magic."""
        end = self.size if end is None else min(end, self.size)
        position = start
        chunk = b""
        chunk_start = start
        while end - position >= LOG_OVERHEAD:
            offset_in_chunk = position - chunk_start
            if offset_in_chunk + RECORD_BATCH_OVERHEAD > len(chunk) and chunk_start + len(chunk) < end:
                chunk = self.read(position, min(_SCAN_CHUNK_BYTES, end - position))
                chunk_start, offset_in_chunk = position, 0
            header = chunk[offset_in_chunk:offset_in_chunk + RECORD_BATCH_OVERHEAD]
            try:
                batch = entry_header(header)
            except CorruptRecordError:
                if position + len(header) >= end:
                    return  # a header cut short by the end of the file: a torn tail
                raise
            size = batch.size_in_bytes
            if size < MIN_ENTRY_SIZE:
                raise CorruptRecordError(f"Entry at position {position} of {self.path} has impossible size {size}")
            if position + size > end:
                return
            yield position, batch
            position += size

    def read_batch(self, position: int, size: int) -> Batch:
        """The whole entry at `position` (its records can then be decoded)."""
        data = self.read(position, size)
        for batch in iter_batches(data):
            return batch
        raise CorruptRecordError(f"Incomplete entry at position {position} of {self.path}")

    def search_for_offset_with_size(self, target_offset: int, starting_position: int) -> LogOffsetPosition | None:
        """The first batch at or after `starting_position` whose last offset is >= target_offset."""
        for position, batch in self.batch_headers(starting_position):
            last_offset = batch.last_offset
            if last_offset >= target_offset:
                return LogOffsetPosition(last_offset, position, batch.size_in_bytes)
        return None

    def search_for_timestamp(self, target_timestamp: int, starting_position: int,
                             starting_offset: int) -> TimestampAndOffset | None:
        """The first record with timestamp >= target and offset >= starting_offset (decoding only the batch that
        holds it)."""
        for position, header in self.batch_headers(starting_position):
            if header.max_timestamp < target_timestamp or header.last_offset < starting_offset:
                continue
            batch = self.read_batch(position, header.size_in_bytes)
            for record in batch.records():
                if record.timestamp >= target_timestamp and record.offset >= starting_offset:
                    epoch = batch.partition_leader_epoch
                    return TimestampAndOffset(record.timestamp, record.offset, epoch if epoch >= 0 else None)
        return None

    def largest_timestamp_after(self, starting_position: int) -> TimestampOffset:
        max_timestamp, offset_of_max = NO_TIMESTAMP, -1
        for _, batch in self.batch_headers(starting_position):
            if batch.max_timestamp > max_timestamp:
                max_timestamp, offset_of_max = batch.max_timestamp, batch.last_offset
        return TimestampOffset(max_timestamp, offset_of_max)
