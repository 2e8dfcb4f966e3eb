"""Legacy message sets, magic 0 and 1: a view with the same read properties as RecordBatch, and a builder.

Layout of one entry (Kafka's LegacyRecord; integers big-endian)::

    offset   int64    v0/v1 uncompressed: the message's offset. Compressed wrapper: the offset of its last inner message
    size     int32    bytes after this field
    crc      uint32   CRC32 (zlib's) of magic..end
    magic    int8     0 or 1
    attributes int8   bits 0-2 codec (no zstd), bit 3 timestamp type (magic 1 only)
    timestamp int64   magic 1 only
    key      int32 length + bytes (-1 = null)
    value    int32 length + bytes (-1 = null)

A compressed message (a "wrapper") carries, as its compressed value, a message set of inner messages. For magic 1
the inner offsets are relative (0..n-1, KIP-31) and the wrapper's offset is the absolute offset of the last one, so
inner offset i is wrapper_offset - last_inner_offset + i; magic 0 inner messages carry absolute offsets. A magic 1
wrapper with LogAppendTime imposes its own timestamp on every inner message.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator

from kfk.errors import CorruptRecordError, UnsupportedCompressionTypeError
from kfk.records.compression import compress, decompress
from kfk.records.record import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    LOG_OVERHEAD,
    Buffer,
    MAGIC_OFFSET,
    MAGIC_VALUE_V0,
    MAGIC_VALUE_V1,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    CompressionType,
    Record,
    TimestampType,
)

__all__ = ["LEGACY_RECORD_OVERHEAD", "LegacyRecordBatch", "LegacyRecordsBuilder"]

LEGACY_RECORD_OVERHEAD = {MAGIC_VALUE_V0: 14, MAGIC_VALUE_V1: 22}
"""Minimum size field per magic: crc, magic, attributes, [timestamp], key length, value length."""

CRC_OFFSET = 12
ATTRIBUTES_OFFSET = 17
TIMESTAMP_OFFSET = 18
_KEY_OFFSET = {MAGIC_VALUE_V0: 18, MAGIC_VALUE_V1: 26}

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT64 = struct.Struct(">q")


class LegacyRecordBatch:
    """A read-only view of one magic 0/1 entry (a plain message or a compressed wrapper) at ``position``.

    Offers RecordBatch's read properties so code walking a log can treat all formats alike: a plain message is a
    batch of one record; a wrapper's last_offset is its own offset, while base_offset and records_count need the
    inner messages and are computed (once, lazily) by decompressing.
    """

    __slots__ = ("_buffer", "_position", "_inner")

    def __init__(self, buffer: Buffer, position: int = 0) -> None:
        if position < 0 or len(buffer) - position < LOG_OVERHEAD + LEGACY_RECORD_OVERHEAD[MAGIC_VALUE_V0]:
            raise CorruptRecordError(f"Message at position {position} is truncated")
        self._buffer = buffer
        self._position = position
        self._inner: list[Record] | None = None

    def __repr__(self) -> str:
        return (f"LegacyRecordBatch(magic={self.magic}, last_offset={self.last_offset}, "
                f"compression_type={self.compression_type.name}, size_in_bytes={self.size_in_bytes}, "
                f"position={self._position})")

    @property
    def position(self) -> int:
        return self._position

    @property
    def buffer(self) -> Buffer:
        return self._buffer

    def as_memoryview(self) -> memoryview:
        return memoryview(self._buffer)[self._position:self._position + self.size_in_bytes]

    # --- the wrapper/message header ----------------------------------------------------------------------------

    @property
    def offset(self) -> int:
        """The stored offset: the message's own, or a wrapper's last inner offset."""
        return _INT64.unpack_from(self._buffer, self._position)[0]

    @property
    def batch_length(self) -> int:
        return _INT32.unpack_from(self._buffer, self._position + 8)[0]

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def magic(self) -> int:
        return self._buffer[self._position + MAGIC_OFFSET]

    @property
    def crc(self) -> int:
        return _UINT32.unpack_from(self._buffer, self._position + CRC_OFFSET)[0]

    @property
    def attributes(self) -> int:
        return self._buffer[self._position + ATTRIBUTES_OFFSET]

    @property
    def compression_type(self) -> CompressionType:
        codec = self.attributes & COMPRESSION_CODEC_MASK
        if codec > CompressionType.LZ4:
            raise CorruptRecordError(f"Compression type id {codec} is not valid for magic {self.magic}")
        return CompressionType(codec)

    @property
    def is_compressed(self) -> bool:
        return self.attributes & COMPRESSION_CODEC_MASK != CompressionType.NONE

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == MAGIC_VALUE_V0:
            return TimestampType.NO_TIMESTAMP_TYPE
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def timestamp(self) -> int:
        """The message's (or wrapper's) own timestamp; NO_TIMESTAMP for magic 0."""
        if self.magic == MAGIC_VALUE_V0:
            return NO_TIMESTAMP
        return _INT64.unpack_from(self._buffer, self._position + TIMESTAMP_OFFSET)[0]

    # --- RecordBatch's read properties ----------------------------------------------------------------------------

    partition_leader_epoch = NO_PARTITION_LEADER_EPOCH
    is_transactional = False
    is_control = False
    has_delete_horizon = False
    delete_horizon_ms = NO_TIMESTAMP
    producer_id = NO_PRODUCER_ID
    has_producer_id = False
    producer_epoch = NO_PRODUCER_EPOCH
    base_sequence = NO_SEQUENCE
    last_sequence = NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def next_offset(self) -> int:
        return self.offset + 1

    @property
    def base_offset(self) -> int:
        if not self.is_compressed:
            return self.offset
        inner = self._inner_records()
        return inner[0].offset if inner else self.offset

    @property
    def last_offset_delta(self) -> int:
        return self.last_offset - self.base_offset

    @property
    def records_count(self) -> int:
        return len(self._inner_records()) if self.is_compressed else 1

    @property
    def base_timestamp(self) -> int:
        return self.timestamp

    @property
    def max_timestamp(self) -> int:
        """Kafka takes a legacy entry's max timestamp to be the (wrapper) message's timestamp."""
        return self.timestamp

    # --- integrity ---------------------------------------------------------------------------------------------------

    def _checked_size(self) -> int:
        size = self.batch_length
        magic = self.magic
        if magic not in LEGACY_RECORD_OVERHEAD:
            raise CorruptRecordError(f"Message at position {self._position} has magic {magic}, expected 0 or 1")
        if size < LEGACY_RECORD_OVERHEAD[magic]:
            raise CorruptRecordError(f"Message at position {self._position} has size {size}, less than the "
                                     f"minimum {LEGACY_RECORD_OVERHEAD[magic]} for magic {magic}")
        available = len(self._buffer) - self._position
        if size + LOG_OVERHEAD > available:
            raise CorruptRecordError(f"Message at position {self._position} is truncated: it declares "
                                     f"{size + LOG_OVERHEAD} bytes but only {available} are present")
        return size + LOG_OVERHEAD

    def compute_crc(self) -> int:
        end = self._position + self._checked_size()
        return zlib.crc32(memoryview(self._buffer)[self._position + MAGIC_OFFSET:end])

    def validate(self) -> None:
        """Check size, magic, CRC32, codec id and that the key and value lengths add up to the size."""
        size = self._checked_size()
        stored_crc = self.crc
        computed_crc = self.compute_crc()
        if stored_crc != computed_crc:
            raise CorruptRecordError(f"Message at position {self._position} is corrupt: stored crc "
                                     f"{stored_crc:#010x} != computed crc {computed_crc:#010x}")
        self.compression_type  # noqa: B018 - raises on an invalid codec id
        _parse_key_value(self._buffer, self._position, self._position + size, self.magic)

    def is_valid(self) -> bool:
        try:
            self.validate()
        except CorruptRecordError:
            return False
        return True

    # --- records -----------------------------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Record]:
        return self.records()

    def records(self, *, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> Iterator[Record]:
        """The message itself, or a wrapper's inner messages with absolute offsets and effective timestamps."""
        if self.is_compressed:
            return iter(self._inner_records(max_decompressed_bytes))
        end = self._position + self._checked_size()
        key, value = _parse_key_value(self._buffer, self._position, end, self.magic)
        return iter((Record(self.offset, self.timestamp, key, value, [], self.attributes),))

    def _inner_records(self, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> list[Record]:
        if self._inner is None:
            self._inner = self._decode_inner(max_decompressed_bytes)
        return self._inner

    def _decode_inner(self, max_decompressed_bytes: int) -> list[Record]:
        wrapper_magic = self.magic
        end = self._position + self._checked_size()
        _, value = _parse_key_value(self._buffer, self._position, end, wrapper_magic)
        if value is None:
            raise CorruptRecordError(f"Compressed message at position {self._position} has a null value")
        data = decompress(self.compression_type, value, magic=wrapper_magic, max_size=max_decompressed_bytes)
        inner: list[Record] = []
        position = 0
        data_end = len(data)
        while position < data_end:
            if data_end - position < LOG_OVERHEAD + LEGACY_RECORD_OVERHEAD[MAGIC_VALUE_V0]:
                raise CorruptRecordError("Compressed message set ends inside an inner message")
            message = LegacyRecordBatch(data, position)
            message.validate()
            if message.magic > wrapper_magic:
                raise CorruptRecordError(f"Inner message magic {message.magic} is newer than its wrapper's "
                                         f"magic {wrapper_magic}")
            if message.is_compressed:
                raise CorruptRecordError("Compressed message set cannot contain compressed messages")
            inner.extend(message.records())
            position += message.size_in_bytes
        if not inner:
            raise CorruptRecordError(f"Compressed message at position {self._position} holds no messages")
        if wrapper_magic == MAGIC_VALUE_V0:
            return inner
        base = self.offset - inner[-1].offset
        resolved = [base + record.offset for record in inner]
        if min(resolved) < _INT64_MIN or max(resolved) > _INT64_MAX:
            raise CorruptRecordError(f"Compressed message at position {self._position} resolves inner offsets "
                                     "outside the int64 range")
        log_append_time = self.timestamp if self.attributes & TIMESTAMP_TYPE_MASK else None
        return [record._replace(offset=offset,
                                timestamp=record.timestamp if log_append_time is None else log_append_time)
                for offset, record in zip(resolved, inner)]


def _parse_key_value(buffer: Buffer, position: int, end: int, magic: int) -> tuple[bytes | None, bytes | None]:
    cursor = position + _KEY_OFFSET[magic]
    fields: list[bytes | None] = []
    for name in ("key", "value"):
        if end - cursor < 4:
            raise CorruptRecordError(f"Message at position {position} ends inside its {name} length")
        (length,) = _INT32.unpack_from(buffer, cursor)
        cursor += 4
        if length == -1:
            fields.append(None)
            continue
        if length < 0 or length > end - cursor:
            raise CorruptRecordError(f"Message at position {position} has an impossible {name} length {length}")
        fields.append(bytes(buffer[cursor:cursor + length]))
        cursor += length
    if cursor != end:
        raise CorruptRecordError(f"Message at position {position} has {end - cursor} bytes after its value")
    return fields[0], fields[1]


def encode_legacy_message(magic: int, offset: int, timestamp: int, key: bytes | None, value: bytes | None,
                          attributes: int) -> bytes:
    """One complete legacy log entry: offset, size, crc, magic, attributes, [timestamp], key, value."""
    key_part = b"\xff\xff\xff\xff" if key is None else _INT32.pack(len(key)) + bytes(key)
    value_part = b"\xff\xff\xff\xff" if value is None else _INT32.pack(len(value)) + bytes(value)
    if magic == MAGIC_VALUE_V0:
        body = bytes((MAGIC_VALUE_V0, attributes)) + key_part + value_part
    elif magic == MAGIC_VALUE_V1:
        body = bytes((MAGIC_VALUE_V1, attributes)) + _INT64.pack(timestamp) + key_part + value_part
    else:
        raise ValueError(f"Legacy messages have magic 0 or 1, not {magic}")
    return _INT64.pack(offset) + _INT32.pack(len(body) + 4) + _UINT32.pack(zlib.crc32(body)) + body


class LegacyRecordsBuilder:
    """Builds a magic 0/1 message set: plain messages, or one compressed wrapper holding them all.

    Used for down-conversion (a Fetch from a client that predates magic 2) and by tests. Offsets are absolute;
    the builder writes inner offsets relative for magic 1 and absolute for magic 0, as Kafka does. With
    LogAppendTime (magic 1), every message and the wrapper carry ``log_append_time``.
    """

    def __init__(self, magic: int, *, compression_type: CompressionType = CompressionType.NONE,
                 timestamp_type: TimestampType = TimestampType.CREATE_TIME, base_offset: int = 0,
                 log_append_time: int = NO_TIMESTAMP, compression_level: int | None = None) -> None:
        if magic not in LEGACY_RECORD_OVERHEAD:
            raise ValueError(f"Legacy messages have magic 0 or 1, not {magic}")
        if compression_type == CompressionType.ZSTD:
            raise UnsupportedCompressionTypeError("zstd needs record batch magic 2")
        if magic == MAGIC_VALUE_V0:
            timestamp_type = TimestampType.NO_TIMESTAMP_TYPE
        self.magic = magic
        self.compression_type = CompressionType(compression_type)
        self.timestamp_type = timestamp_type
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.compression_level = compression_level
        self._messages: list[tuple[int, int, bytes | None, bytes | None]] = []
        self._last_offset: int | None = None

    @property
    def num_records(self) -> int:
        return len(self._messages)

    def append(self, timestamp: int, key: bytes | None, value: bytes | None) -> int:
        """Append at the next offset; returns that offset."""
        offset = self.base_offset if self._last_offset is None else self._last_offset + 1
        self.append_with_offset(offset, timestamp, key, value)
        return offset

    def append_with_offset(self, offset: int, timestamp: int, key: bytes | None, value: bytes | None) -> None:
        if self._last_offset is not None and offset <= self._last_offset:
            raise ValueError(f"Illegal offset {offset} following previous offset {self._last_offset} "
                             "(offsets must increase monotonically)")
        if offset < self.base_offset:
            raise ValueError(f"Offset {offset} is below the base offset {self.base_offset}")
        if self.magic == MAGIC_VALUE_V0:
            timestamp = NO_TIMESTAMP
        elif self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            timestamp = self.log_append_time
        self._messages.append((offset, timestamp, key, value))
        self._last_offset = offset

    def extend(self, records: Iterable[Record]) -> None:
        for record in records:
            self.append_with_offset(record.offset, record.timestamp, record.key, record.value)

    def close(self) -> bytes:
        """The message set bytes (empty if nothing was appended)."""
        if not self._messages:
            return b""
        magic = self.magic
        timestamp_bit = TIMESTAMP_TYPE_MASK if self.timestamp_type == TimestampType.LOG_APPEND_TIME else 0
        if self.compression_type == CompressionType.NONE:
            return b"".join(encode_legacy_message(magic, offset, timestamp, key, value, timestamp_bit)
                            for offset, timestamp, key, value in self._messages)
        first_offset = self._messages[0][0]
        inner = b"".join(
            encode_legacy_message(magic, offset - first_offset if magic == MAGIC_VALUE_V1 else offset,
                                  timestamp, key, value, timestamp_bit)
            for offset, timestamp, key, value in self._messages)
        compressed = compress(self.compression_type, inner, level=self.compression_level, magic=magic)
        if self.timestamp_type == TimestampType.LOG_APPEND_TIME:
            wrapper_timestamp = self.log_append_time
        else:
            wrapper_timestamp = max(timestamp for _, timestamp, _, _ in self._messages)
        return encode_legacy_message(magic, self._messages[-1][0], wrapper_timestamp, None, compressed,
                                     self.compression_type | timestamp_bit)
