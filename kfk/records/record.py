"""What every record format shares: the log-entry framing constants, the enums and the decoded Record.

Every entry in a Kafka log or message set, whatever its format, starts with the same 12 bytes (LOG_OVERHEAD): an
int64 offset and an int32 size/length that counts the bytes after it. The byte at MAGIC_OFFSET (16) then says which
format follows: 0 and 1 are the legacy message formats, 2 is the record batch. That shared prefix is what lets a
log file or a fetch response be walked without knowing its format in advance.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple, Union

__all__ = [
    "LOG_OVERHEAD",
    "MAGIC_OFFSET",
    "MAGIC_VALUE_V0",
    "MAGIC_VALUE_V1",
    "MAGIC_VALUE_V2",
    "CURRENT_MAGIC_VALUE",
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_TIMESTAMP",
    "DEFAULT_MAX_DECOMPRESSED_BYTES",
    "CompressionType",
    "TimestampType",
    "Buffer",
    "Header",
    "Record",
]

LOG_OVERHEAD = 12
"""int64 offset + int32 size/batchLength, in front of every batch and every legacy message."""
MAGIC_OFFSET = 16
"""The magic byte sits here in all three formats (after offset, size, and v2's partitionLeaderEpoch or v0/v1's crc)."""

MAGIC_VALUE_V0 = 0
MAGIC_VALUE_V1 = 1
MAGIC_VALUE_V2 = 2
CURRENT_MAGIC_VALUE = MAGIC_VALUE_V2

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

DEFAULT_MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024
"""Ceiling on what one compressed batch may inflate to. Kafka has no such limit, but a few hundred bytes of zstd can
claim gigabytes; past this size the batch is treated as corrupt rather than allowed to exhaust memory."""


class CompressionType(IntEnum):
    """The codec id in the low three attribute bits (same ids in all formats; ZSTD needs magic 2)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class TimestampType(IntEnum):
    """Attribute bit 3: who set the timestamp. Magic 0 has no timestamps at all."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


Buffer = Union[bytes, bytearray, memoryview]
"""What the views read from: request bytes, a bytearray being edited, a memoryview slice (an mmap works too: it
supports the same indexing and buffer protocol)."""

Header = tuple[str, "bytes | None"]


class Record(NamedTuple):
    """One decoded record, in any format. ``headers`` is empty for magic 0/1, ``attributes`` is the per-record
    attributes byte (unused in magic 2, the codec and timestamp type of a magic 0/1 message)."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[Header]
    attributes: int = 0
