"""OffsetIndex and TimeIndex: the sparse, fixed-width, memory-mapped indexes beside each segment's .log file.

Formats (Kafka's, big-endian, no header, no checksum — a crash is repaired by rebuilding from the log):
- `.index`: 8-byte entries, a 4-byte offset relative to the segment's base offset and the 4-byte file position in
  the .log of the batch (append) that holds it. Entry offsets are the LAST offset of that append, so the largest
  entry <= a target offset gives a position from which a forward scan of batch headers reaches the target.
- `.timeindex`: 12-byte entries, an 8-byte timestamp and a 4-byte relative offset: the segment's max timestamp so
  far reached this value in the batch whose last offset is this one. Timestamps and offsets both strictly increase
  from entry to entry, so the largest entry <= a target timestamp bounds where a search by time may start.

An index of the active segment is pre-allocated to `segment.index.bytes` (rounded down to whole entries) and mapped
whole; the number of valid entries is kept in memory. When the segment rolls, or on close, the file is trimmed to
its valid entries, so the size of a closed index file tells how many entries it holds. A file opened after a crash
may still carry pre-allocated zeros: recovery rebuilds those, and `sanity_check` catches the structurally broken.

Indexes are opened lazily (Kafka's LazyIndex): a log with thousands of inactive segments only maps the ones read.
Not thread-safe: the Log that owns the segment serialises writers.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from collections.abc import Iterator
from typing import NamedTuple

from kfk.common.constants import INT32_MAX
from kfk.errors import KafkaStorageError

NO_TIMESTAMP = -1
_PAGE_SIZE = mmap.PAGESIZE


class CorruptIndexError(KafkaStorageError):
    """An index file failed its sanity check; the segment's indexes must be rebuilt from the log."""


class IndexOffsetOverflowError(KafkaStorageError):
    """An offset is too far from the segment's base offset to be stored as a 4-byte relative offset."""


class InvalidOffsetError(KafkaStorageError):
    """An index append that would break the ordering of entries (a bug in the caller, never bad input)."""


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


def round_down_to_multiple(number: int, factor: int) -> int:
    return factor * (number // factor)


class AbstractIndex:
    """What both indexes share: the mapped file, entry count, resize/trim, truncation and binary search."""

    entry_size: int = 0
    _entry: struct.Struct

    def __init__(self, path: str, base_offset: int, max_index_size: int = -1, writable: bool = True) -> None:
        self.path = path
        self.base_offset = base_offset
        self.writable = writable
        self._mmap: mmap.mmap | None = None
        self._closed = False
        self.length = 0
        self.entries = 0
        newly_created = not os.path.exists(path)
        if newly_created:
            if not writable:
                raise FileNotFoundError(path)
            if max_index_size < self.entry_size:
                raise ValueError(f"Invalid max index size: {max_index_size}")
        with self._open_file(create=newly_created) as fd:
            if newly_created:
                os.ftruncate(fd, round_down_to_multiple(max_index_size, self.entry_size))
            self.length = os.fstat(fd).st_size
        # A new file is all pre-allocated space; an existing one is taken as full of entries (a trimmed file is
        # exact; an untrimmed one after a crash is what recovery or the sanity check sorts out).
        self.entries = 0 if newly_created else self.length // self.entry_size
        self.max_index_size = max_index_size if max_index_size >= self.entry_size else self.length

    # -- mapping -------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _open_file(self, create: bool = False) -> Iterator[int]:
        """A descriptor for the few calls that need one (map, resize, a write into a fresh page), closed right
        after: a mapping stays valid without it."""
        flags = (os.O_RDWR | (os.O_CREAT if create else 0)) if self.writable else os.O_RDONLY
        fd = os.open(self.path, flags, 0o644)
        try:
            yield fd
        finally:
            os.close(fd)

    def _mapping(self) -> mmap.mmap:
        """The file's mapping, made on first use (only called with entries, so the file is not empty). Python's
        mmap keeps a duplicate descriptor of the file it maps, so an index that is never read or written — an
        idle partition's — costs no descriptor at all."""
        if self._mmap is None:
            if self._closed:
                raise KafkaStorageError(f"Index {self.path} is closed")
            with self._open_file() as fd:
                access = mmap.ACCESS_WRITE if self.writable else mmap.ACCESS_READ
                self._mmap = mmap.mmap(fd, self.length, access=access)
        return self._mmap

    def _unmap(self) -> None:
        if self._mmap is not None:
            self._mmap.close()
            self._mmap = None

    def move_to(self, path: str) -> None:
        """The file was copied to `path` (its replica moved to another log dir): map that one at the next use."""
        self._unmap()
        self.path = path

    @property
    def max_entries(self) -> int:
        return self.length // self.entry_size

    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.entry_size

    def ignore_preallocated_tail(self) -> None:
        """Count only the entries written so far, for a reader of a file that still has its pre-allocated zeros
        (a live broker's active segment, read by dump-log): the entries end with the last non-zero byte, as
        Kafka's tool trims the index before checking it. A trimmed (closed) index is unchanged."""
        if self.entries:
            written = len(self._mapping()[: self.size_in_bytes].rstrip(b"\0"))
            self.entries = -(-written // self.entry_size)

    def resize(self, new_size: int) -> bool:
        """Set the file length to `new_size` rounded down to whole entries (never below the valid entries);
        returns whether the length changed. Used to pre-allocate again when a segment becomes active."""
        rounded = max(round_down_to_multiple(new_size, self.entry_size), self.size_in_bytes)
        if rounded == self.length:
            return False
        self._unmap()
        with self._open_file() as fd:
            os.ftruncate(fd, rounded)
        self.length = rounded
        return True

    def _write_entry(self, first: int, second: int) -> None:
        """Write the next entry: with pwrite when it reaches into a page no entry has touched, else through the
        mapping. A store into a page of the pre-allocated file that is still a hole takes the filesystem's
        page_mkwrite path (1.7 ms median on ext4 here, 3-17 ms seen with 1,000 partitions: seconds of the event
        loop), which a write() does not; once a write has filled the page, a store costs 3 µs the first time and
        nothing after, where a pwrite is a system call per entry, one per produce request. The mapping and the file
        share one page cache, so reads see both."""
        size = self.entry_size
        position = self.entries * size
        if (position + size - 1) // _PAGE_SIZE != (position - 1) // _PAGE_SIZE:
            with self._open_file() as fd:
                os.pwrite(fd, self._entry.pack(first, second), position)
        else:
            self._entry.pack_into(self._mapping(), position, first, second)

    def trim_to_valid_size(self) -> None:
        """Shrink the file to its valid entries (done on roll and close so the size tells the entry count)."""
        self.resize(self.size_in_bytes)

    def flush(self) -> None:
        if self._mmap is not None and self.writable:
            self._mmap.flush()

    def close(self) -> None:
        self._unmap()
        self._closed = True

    def close_and_trim(self) -> None:
        if self.writable and not self._closed:
            self.trim_to_valid_size()
        self.close()

    def reset(self) -> None:
        """Drop every entry and pre-allocate again (recovery rebuilds from here)."""
        self.entries = 0
        self.resize(self.max_index_size)

    def rename_to(self, new_path: str) -> None:
        os.replace(self.path, new_path)
        self.path = new_path

    def delete_if_exists(self) -> bool:
        self.close()
        try:
            os.unlink(self.path)
            return True
        except FileNotFoundError:
            return False

    # -- entries -------------------------------------------------------------------------------------------------

    def _read_entry(self, slot: int) -> tuple[int, int]:
        return self._entry.unpack_from(self._mapping(), slot * self.entry_size)

    def _largest_lower_bound_slot(self, target: int, key_index: int) -> int:
        """The slot of the largest entry whose key (field `key_index` of the entry) is <= target, or -1."""
        if self.entries == 0:
            return -1
        mm = self._mapping()
        unpack_from = self._entry.unpack_from
        size = self.entry_size
        if unpack_from(mm, 0)[key_index] > target:
            return -1
        low, high = 0, self.entries - 1
        while low < high:
            middle = (low + high + 1) // 2
            if unpack_from(mm, middle * size)[key_index] <= target:
                low = middle
            else:
                high = middle - 1
        return low

    def _smallest_upper_bound_slot(self, target: int, key_index: int) -> int:
        """The slot of the smallest entry whose key is >= target, or -1."""
        if self.entries == 0:
            return -1
        mm = self._mapping()
        unpack_from = self._entry.unpack_from
        size = self.entry_size
        if unpack_from(mm, (self.entries - 1) * size)[key_index] < target:
            return -1
        low, high = 0, self.entries - 1
        while low < high:
            middle = (low + high) // 2
            if unpack_from(mm, middle * size)[key_index] >= target:
                high = middle
            else:
                low = middle + 1
        return low

    def _relative_offset(self, offset: int) -> int:
        relative = offset - self.base_offset
        if relative < 0 or relative > INT32_MAX:
            raise IndexOffsetOverflowError(
                f"Integer overflow for offset: {offset} ({os.path.basename(self.path)} has base offset "
                f"{self.base_offset})"
            )
        return relative

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= INT32_MAX

    def _check_entries_file_length(self) -> None:
        if self.length % self.entry_size != 0:
            raise CorruptIndexError(
                f"Index file {self.path} is corrupt, found {self.length} bytes which is neither positive nor a "
                f"multiple of {self.entry_size}."
            )

    def __enter__(self) -> AbstractIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class OffsetIndex(AbstractIndex):
    """`.index`: relative offset (int32) -> position in the .log (int32)."""

    entry_size = 8
    _entry = struct.Struct(">ii")

    def entry(self, slot: int) -> OffsetPosition:
        if not 0 <= slot < self.entries:
            raise IndexError(f"slot {slot} out of range for {self.entries} entries in {self.path}")
        relative, position = self._read_entry(slot)
        return OffsetPosition(self.base_offset + relative, position)

    @property
    def last_offset(self) -> int:
        """The offset of the last entry, or the base offset when the index is empty."""
        if self.entries == 0:
            return self.base_offset
        return self.base_offset + self._read_entry(self.entries - 1)[0]

    def lookup(self, target_offset: int) -> OffsetPosition:
        """The largest entry with offset <= target, or (base_offset, 0): where a forward scan must start."""
        slot = self._largest_lower_bound_slot(target_offset - self.base_offset, 0)
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(slot)

    def fetch_upper_bound_offset(self, fetch_position: int, fetch_size: int) -> OffsetPosition | None:
        """The first entry at or beyond `fetch_position + fetch_size` (a bound for a fetch of that size)."""
        slot = self._smallest_upper_bound_slot(fetch_position + fetch_size, 1)
        return None if slot < 0 else self.entry(slot)

    def append(self, offset: int, position: int) -> None:
        if self.is_full():
            raise InvalidOffsetError(f"Attempt to append to a full index {self.path} (size = {self.entries}).")
        if self.entries > 0 and offset <= self.last_offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to position {self.entries} no larger than the last offset "
                f"appended ({self.last_offset}) to {self.path}."
            )
        self._write_entry(self._relative_offset(offset), position)
        self.entries += 1

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= `offset`."""
        slot = self._largest_lower_bound_slot(offset - self.base_offset, 0)
        if slot < 0:
            self.entries = 0
        elif self.entry(slot).offset == offset:
            self.entries = slot
        else:
            self.entries = slot + 1

    def sanity_check(self) -> None:
        """Kafka's checks (whole entries, last offset >= base offset) plus strictly increasing offsets and
        non-decreasing positions, which catch zeroed and garbled files that Kafka's checks let through."""
        self._check_entries_file_length()
        if self.entries == 0:
            return
        if self.last_offset < self.base_offset:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self.path}) has non-zero size but the last offset is "
                f"{self.last_offset} which is less than the base offset {self.base_offset}."
            )
        previous_offset, previous_position = -1, -1
        for relative, position in self._entry.iter_unpack(self._mapping()[: self.size_in_bytes]):
            if relative <= previous_offset or position < previous_position or relative < 0 or position < 0:
                raise CorruptIndexError(
                    f"Corrupt index found, index file ({self.path}) has entries out of order: relative offset "
                    f"{relative} at position {position} after {previous_offset} at {previous_position}."
                )
            previous_offset, previous_position = relative, position


class TimeIndex(AbstractIndex):
    """`.timeindex`: timestamp (int64) -> relative offset (int32) of the batch that reached that max timestamp."""

    entry_size = 12
    _entry = struct.Struct(">qi")

    def __init__(self, path: str, base_offset: int, max_index_size: int = -1, writable: bool = True) -> None:
        super().__init__(path, base_offset, max_index_size, writable)
        self._last_entry = self._read_last_entry()

    def _read_last_entry(self) -> TimestampOffset:
        if self.entries == 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(self.entries - 1)

    def entry(self, slot: int) -> TimestampOffset:
        if not 0 <= slot < self.entries:
            raise IndexError(f"slot {slot} out of range for {self.entries} entries in {self.path}")
        timestamp, relative = self._read_entry(slot)
        return TimestampOffset(timestamp, self.base_offset + relative)

    @property
    def last_entry(self) -> TimestampOffset:
        """The last entry, or (-1, base_offset) when empty: the segment's largest timestamp once it is closed."""
        return self._last_entry

    def is_full(self) -> bool:
        # One slot is kept for the entry appended when the segment rolls (Kafka's TimeIndex does the same).
        return self.entries >= self.max_entries - 1

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """The largest entry with timestamp <= target, or (-1, base_offset)."""
        slot = self._largest_lower_bound_slot(target_timestamp, 0)
        if slot < 0:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(slot)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append (timestamp, offset) if the timestamp is a new maximum."""
        if not skip_full_check and self.is_full():
            raise InvalidOffsetError(f"Attempt to append to a full time index (size = {self.entries}).")
        if self.entries > 0 and offset < self._last_entry.offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to slot {self.entries} no larger than the last offset "
                f"appended ({self._last_entry.offset}) to {self.path}."
            )
        if self.entries > 0 and timestamp < self._last_entry.timestamp:
            raise InvalidOffsetError(
                f"Attempt to append a timestamp ({timestamp}) to slot {self.entries} no larger than the last "
                f"timestamp appended ({self._last_entry.timestamp}) to {self.path}."
            )
        if timestamp > self._last_entry.timestamp:
            if self.entries >= self.max_entries:  # only with skip_full_check, the reserved slot is used up
                self.resize(self.length + self.entry_size)
            self._write_entry(timestamp, self._relative_offset(offset))
            self.entries += 1
            self._last_entry = TimestampOffset(timestamp, offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry with offset >= `offset`."""
        slot = self._largest_lower_bound_slot(offset - self.base_offset, 1)
        if slot < 0:
            self.entries = 0
        elif self.entry(slot).offset == offset:
            self.entries = slot
        else:
            self.entries = slot + 1
        self._last_entry = self._read_last_entry()

    def reset(self) -> None:
        super().reset()
        self._last_entry = self._read_last_entry()

    def ignore_preallocated_tail(self) -> None:
        super().ignore_preallocated_tail()
        self._last_entry = self._read_last_entry()

    def check_last_entry(self, last: TimestampOffset) -> None:
        """Kafka's checks of the last entry of a non-empty time index: not before the first timestamp, not below
        the base offset."""
        first_timestamp = self.entry(0).timestamp
        if last.timestamp < first_timestamp:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has non-zero size but the last timestamp "
                f"is {last.timestamp} which is less than the first timestamp {first_timestamp}"
            )
        if last.offset < self.base_offset:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has non-zero size but the last offset is "
                f"{last.offset} which is less than the first offset {self.base_offset}"
            )

    def sanity_check(self) -> None:
        """Kafka's checks plus strictly increasing timestamps and offsets."""
        self._check_entries_file_length()
        if self.entries == 0:
            return
        self.check_last_entry(self._last_entry)
        previous_timestamp, previous_offset = NO_TIMESTAMP, -1
        for timestamp, relative in self._entry.iter_unpack(self._mapping()[: self.size_in_bytes]):
            if timestamp <= previous_timestamp or relative <= previous_offset or relative < 0:
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({self.path}) has entries out of order: timestamp "
                    f"{timestamp} at relative offset {relative} after {previous_timestamp} at {previous_offset}."
                )
            previous_timestamp, previous_offset = timestamp, relative
