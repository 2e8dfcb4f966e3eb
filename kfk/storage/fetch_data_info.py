"""What a read of the log returns: where the data is on disk, not the data (Kafka's FetchDataInfo).

Fetch is zero-copy (DESIGN.md decision 3): `Log.read` answers with a FileRegion — the segment file, a position and a
length — and the network layer hands that to `os.sendfile`. Nothing on that path reads record bytes into Python.
`FileRegion.read_bytes()` exists for the paths that must look inside (tests, down-conversion, metadata log reads).
"""

from __future__ import annotations

import dataclasses
import enum
import os
from typing import TYPE_CHECKING, NamedTuple, Protocol

from kfk.common.constants import UNKNOWN_OFFSET
from kfk.errors import KafkaStorageError

if TYPE_CHECKING:
    from kfk.storage.transaction_index import AbortedTxn



class FetchIsolation(enum.Enum):
    """How far a read may go: the log end (replicas), the high watermark (READ_UNCOMMITTED consumers) or the last
    stable offset (READ_COMMITTED consumers)."""

    LOG_END = "log_end"
    HIGH_WATERMARK = "high_watermark"
    TXN_COMMITTED = "txn_committed"


@dataclasses.dataclass(frozen=True)
class LogOffsetMetadata:
    """An offset plus, when known, the segment holding it and the byte position of its batch in that segment."""

    message_offset: int
    segment_base_offset: int = UNKNOWN_OFFSET
    relative_position_in_segment: int = UNKNOWN_OFFSET

    @property
    def message_offset_only(self) -> bool:
        return self.segment_base_offset == UNKNOWN_OFFSET and self.relative_position_in_segment == UNKNOWN_OFFSET


class LogOffsetSnapshot(NamedTuple):
    """A log's offsets read together under its lock (Kafka's LogOffsetSnapshot): what a fetch or ListOffsets answer
    reports, consistent with each other."""

    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    last_stable_offset: int


class TimestampAndOffset(NamedTuple):
    """ListOffsets' answer: a timestamp, the offset found for it and the leader epoch of that offset (or None)."""

    timestamp: int
    offset: int
    leader_epoch: int | None


class SupportsFileno(Protocol):
    """Anything with a fileno(): a segment's FileRecords."""

    def fileno(self) -> int: ...


class FileRegion:
    """`length` bytes of an open segment file from `position`: what `os.sendfile` needs. Holds the file object,
    not a bare descriptor, so a closed segment is detected instead of a reused descriptor being read."""

    __slots__ = ("file", "position", "length")

    def __init__(self, file: SupportsFileno | None, position: int, length: int) -> None:
        self.file = file
        self.position = position
        self.length = length

    def __repr__(self) -> str:
        return f"FileRegion(file={self.file!r}, position={self.position}, length={self.length})"

    def __len__(self) -> int:
        # The wire codec writes a records field as its length then the value: a region is sent with sendfile.
        return self.length

    def fileno(self) -> int:
        if self.file is None:
            raise KafkaStorageError("empty file region has no file")
        return self.file.fileno()

    def read_bytes(self) -> bytes:
        """Copy the region into memory, for the readers that look inside it (TLS connections stream regions in
        chunks instead: kfk.server.network)."""
        if self.length == 0 or self.file is None:
            return b""
        fd = self.file.fileno()
        chunks = []
        position, remaining = self.position, self.length
        while remaining > 0:
            chunk = os.pread(fd, remaining, position)
            if not chunk:
                break
            chunks.append(chunk)
            position += len(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)


EMPTY_REGION = FileRegion(None, 0, 0)


@dataclasses.dataclass(frozen=True)
class FetchDataInfo:
    """A read's result: the offset metadata of the first batch returned, the region holding the batches (it may
    end inside a batch: clients drop a partial trailing batch), whether even the first batch did not fit, and for
    READ_COMMITTED reads the aborted transactions that overlap the region."""

    fetch_offset_metadata: LogOffsetMetadata
    records: FileRegion = EMPTY_REGION
    first_entry_incomplete: bool = False
    aborted_transactions: list[AbortedTxn] | None = None
