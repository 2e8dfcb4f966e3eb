"""Record batch v2 (magic 2): a zero-copy view, iteration over concatenated entries, and in-place header edits.

Layout of one batch (all integers big-endian; Kafka's DefaultRecordBatch)::

    offset  field                 type    notes
     0      baseOffset            int64   assigned by the broker; not covered by the CRC
     8      batchLength           int32   bytes after this field
    12      partitionLeaderEpoch  int32   set by the leader; not covered by the CRC
    16      magic                 int8    2
    17      crc                   uint32  CRC32C of every byte from attributes to the end of the batch
    21      attributes            int16   bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control,
                                          6 hasDeleteHorizonMs
    23      lastOffsetDelta       int32
    27      baseTimestamp         int64   the delete horizon when hasDeleteHorizonMs is set
    35      maxTimestamp          int64   the log append time for LogAppendTime batches
    43      producerId            int64
    51      producerEpoch         int16
    53      baseSequence          int32
    57      recordsCount          int32
    61      records               the record list, compressed as a whole when the codec bits say so

Each record is: varint length, int8 attributes, varlong timestampDelta, varint offsetDelta, varint key length +
key (-1 = null), varint value length + value (-1 = null), varint header count, then per header varint key length +
UTF-8 key and varint value length + value (-1 = null).

baseOffset and partitionLeaderEpoch sit before the CRC'd range so that a broker can assign offsets and stamp the
leader epoch without touching the CRC: the produce hot path is header-only. Only LogAppendTime (maxTimestamp and the
timestamp-type bit) forces a CRC recomputation.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from crc32c import crc32c

from kfk.common.constants import INT32_MAX
from kfk.errors import CorruptRecordError
from kfk.records._varint import read_unsigned_varint, read_unsigned_varlong
from kfk.records.accelerator import accelerator
from kfk.records.compression import decompress
from kfk.records.legacy import LEGACY_RECORD_OVERHEAD, LegacyRecordBatch
from kfk.records.record import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    LOG_OVERHEAD,
    Buffer,
    MAGIC_OFFSET,
    MAGIC_VALUE_V0,
    MAGIC_VALUE_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    CompressionType,
    Record,
    TimestampType,
)

__all__ = [
    "LOG_OVERHEAD",
    "RECORD_BATCH_OVERHEAD",
    "MAGIC_OFFSET",
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_TIMESTAMP",
    "CompressionType",
    "TimestampType",
    "Record",
    "RecordBatch",
    "LegacyRecordBatch",
    "iter_batches",
    "entry_at",
    "complete_entries_length",
    "set_base_offset",
    "set_last_offset",
    "set_base_offset_and_leader_epoch",
    "set_partition_leader_epoch",
    "set_max_timestamp",
    "set_log_append_time",
]

RECORD_BATCH_OVERHEAD = 61

BASE_OFFSET_OFFSET = 0
LENGTH_OFFSET = 8
PARTITION_LEADER_EPOCH_OFFSET = 12
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
BASE_TIMESTAMP_OFFSET = 27
MAX_TIMESTAMP_OFFSET = 35
PRODUCER_ID_OFFSET = 43
PRODUCER_EPOCH_OFFSET = 51
BASE_SEQUENCE_OFFSET = 53
RECORDS_COUNT_OFFSET = 57
RECORDS_OFFSET = RECORD_BATCH_OVERHEAD

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
"""The smallest legal batchLength: a header with no records."""
MIN_RECORD_SIZE = 7
"""length, attributes, timestampDelta, offsetDelta, key length, value length, header count: one byte each at least."""

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT64 = struct.Struct(">q")
HEADER = struct.Struct(">qiibIhiqqqhii")
"""The 61-byte batch header, field for field."""

_CODEC_IDS = frozenset(codec.value for codec in CompressionType)


def _attribute_flags(buffer: Buffer, position: int) -> int:
    return _INT16.unpack_from(buffer, position + ATTRIBUTES_OFFSET)[0]


class RecordBatch:
    """A read-only view of one v2 batch at ``position`` in a bytes/bytearray/memoryview/mmap.

    Creating the view copies nothing and checks only that the 61-byte header is present; every property reads the
    buffer when asked, so it reflects in-place edits made with the ``set_*`` functions. ``validate()`` checks the
    rest; iterating decompresses (if needed) and decodes records lazily.
    """

    __slots__ = ("_buffer", "_position")

    def __init__(self, buffer: Buffer, position: int = 0) -> None:
        if position < 0 or len(buffer) - position < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"Record batch at position {position} is truncated: fewer than {RECORD_BATCH_OVERHEAD} header bytes")
        self._buffer = buffer
        self._position = position

    def __repr__(self) -> str:
        return (f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
                f"records_count={self.records_count}, compression_type={self.compression_type.name}, "
                f"size_in_bytes={self.size_in_bytes}, position={self._position})")

    # --- where it is -----------------------------------------------------------------------------------------

    @property
    def position(self) -> int:
        """Where the batch starts in the buffer (its baseOffset field)."""
        return self._position

    @property
    def buffer(self) -> Buffer:
        return self._buffer

    def as_memoryview(self) -> memoryview:
        """The batch's bytes (header included) without copying them."""
        return memoryview(self._buffer)[self._position:self._position + self.size_in_bytes]

    # --- header fields ------------------------------------------------------------------------------------------

    @property
    def base_offset(self) -> int:
        return _INT64.unpack_from(self._buffer, self._position)[0]

    @property
    def batch_length(self) -> int:
        return _INT32.unpack_from(self._buffer, self._position + LENGTH_OFFSET)[0]

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def partition_leader_epoch(self) -> int:
        return _INT32.unpack_from(self._buffer, self._position + PARTITION_LEADER_EPOCH_OFFSET)[0]

    @property
    def magic(self) -> int:
        return self._buffer[self._position + MAGIC_OFFSET]

    @property
    def crc(self) -> int:
        return _UINT32.unpack_from(self._buffer, self._position + CRC_OFFSET)[0]

    @property
    def attributes(self) -> int:
        return _attribute_flags(self._buffer, self._position)

    @property
    def compression_type(self) -> CompressionType:
        codec = self.attributes & COMPRESSION_CODEC_MASK
        try:
            return CompressionType(codec)
        except ValueError:
            raise CorruptRecordError(f"Unknown compression type id {codec} in record batch attributes") from None

    @property
    def timestamp_type(self) -> TimestampType:
        if self.attributes & TIMESTAMP_TYPE_MASK:
            return TimestampType.LOG_APPEND_TIME
        return TimestampType.CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> int:
        """The time after which the cleaner may drop tombstones and abort markers (KIP-534), or NO_TIMESTAMP."""
        return self.base_timestamp if self.has_delete_horizon else NO_TIMESTAMP

    @property
    def last_offset_delta(self) -> int:
        return _INT32.unpack_from(self._buffer, self._position + LAST_OFFSET_DELTA_OFFSET)[0]

    @property
    def base_timestamp(self) -> int:
        return _INT64.unpack_from(self._buffer, self._position + BASE_TIMESTAMP_OFFSET)[0]

    @property
    def max_timestamp(self) -> int:
        return _INT64.unpack_from(self._buffer, self._position + MAX_TIMESTAMP_OFFSET)[0]

    @property
    def producer_id(self) -> int:
        return _INT64.unpack_from(self._buffer, self._position + PRODUCER_ID_OFFSET)[0]

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def producer_epoch(self) -> int:
        return _INT16.unpack_from(self._buffer, self._position + PRODUCER_EPOCH_OFFSET)[0]

    @property
    def base_sequence(self) -> int:
        return _INT32.unpack_from(self._buffer, self._position + BASE_SEQUENCE_OFFSET)[0]

    @property
    def last_sequence(self) -> int:
        """base_sequence + last_offset_delta, wrapping past INT32_MAX to 0 as producer sequences do."""
        base_sequence = self.base_sequence
        if base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(base_sequence, self.last_offset_delta)

    @property
    def records_count(self) -> int:
        return _INT32.unpack_from(self._buffer, self._position + RECORDS_COUNT_OFFSET)[0]

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    # --- integrity -------------------------------------------------------------------------------------------------

    def compute_crc(self) -> int:
        """CRC32C of attributes..end, as it should be stored in the crc field."""
        end = self._position + self._checked_size()
        return crc32c(memoryview(self._buffer)[self._position + ATTRIBUTES_OFFSET:end])

    def _checked_size(self) -> int:
        batch_length = self.batch_length
        if batch_length < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"Record batch at position {self._position} has batchLength {batch_length}, "
                                     f"less than the minimum {MIN_BATCH_LENGTH}")
        size = batch_length + LOG_OVERHEAD
        available = len(self._buffer) - self._position
        if size > available:
            raise CorruptRecordError(f"Record batch at position {self._position} is truncated: it declares "
                                     f"{size} bytes but only {available} are present")
        return size

    def validate(self) -> None:
        """Check everything the header can tell without decompressing; raise CorruptRecordError on the first fault.

        Checks length, magic, CRC32C, the codec id, recordsCount against lastOffsetDelta (a compacted batch may hold
        fewer records than its offset range, never more) and the producer fields' sentinels. Uncompressed batches
        are also checked to be big enough for their records count.
        """
        self.validated_header()

    def header(self) -> tuple:
        """The header fields unpacked in one read, unchecked (HEADER's order, as validated_header returns them):
        for code that reads several fields of a batch it has already validated."""
        return HEADER.unpack_from(self._buffer, self._position)

    def validated_header(self) -> tuple:
        """validate(), returning the header fields unpacked once (HEADER's order: base_offset, batch_length,
        partition_leader_epoch, magic, crc, attributes, last_offset_delta, base_timestamp, max_timestamp,
        producer_id, producer_epoch, base_sequence, records_count): the produce path reads several of them per
        batch, and one unpack costs what one property does."""
        size = self._checked_size()
        position = self._position
        header = HEADER.unpack_from(self._buffer, position)
        (_, _, _, magic, stored_crc, attributes, last_offset_delta, _, _, producer_id, producer_epoch,
         base_sequence, records_count) = header
        if magic != MAGIC_VALUE_V2:
            raise CorruptRecordError(f"Record batch at position {position} has magic {magic}, expected 2")
        computed_crc = crc32c(memoryview(self._buffer)[position + ATTRIBUTES_OFFSET:position + size])
        if stored_crc != computed_crc:
            raise CorruptRecordError(f"Record batch at position {position} is corrupt: stored crc "
                                     f"{stored_crc:#010x} != computed crc {computed_crc:#010x}")
        codec = attributes & COMPRESSION_CODEC_MASK
        if codec not in _CODEC_IDS:
            raise CorruptRecordError(f"Unknown compression type id {codec} in record batch attributes")
        if records_count < 0 or last_offset_delta < 0 or records_count > last_offset_delta + 1:
            raise CorruptRecordError(f"Record batch at position {position} holds {records_count} records "
                                     f"for an offset range of {last_offset_delta + 1}")
        if codec == CompressionType.NONE and records_count * MIN_RECORD_SIZE > size - RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(f"Record batch at position {position} declares {records_count} records "
                                     f"but holds only {size - RECORD_BATCH_OVERHEAD} bytes of them")
        if producer_id < NO_PRODUCER_ID or producer_epoch < NO_PRODUCER_EPOCH or base_sequence < NO_SEQUENCE:
            raise CorruptRecordError(f"Record batch at position {position} has a negative producer id, "
                                     "epoch or base sequence other than the -1 sentinel")
        if attributes & TRANSACTIONAL_FLAG_MASK and producer_id == NO_PRODUCER_ID:
            raise CorruptRecordError(f"Transactional record batch at position {position} has no producer id")
        return header

    def is_valid(self) -> bool:
        try:
            self.validate()
        except CorruptRecordError:
            return False
        return True

    # --- records ---------------------------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Record]:
        return self.records()

    def records(self, *, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES,
                labels: tuple[Any, Any, Any, Any] | None = None, record_type: type[tuple] = Record) -> Iterator[Any]:
        """Decode the records (decompressing the payload first if the batch is compressed); with ``labels`` and
        ``record_type``, each record is built as decode_records_python says.

        Does not check the CRC (call ``validate()`` for that), but never reads past the batch and raises
        CorruptRecordError if the payload disagrees with the header's record count or sizes.
        """
        size = self._checked_size()
        position, buffer = self._position, self._buffer
        # One read of the header for every field used below: this runs once per batch a consumer reads.
        (base_offset, _, _, _, _, attributes, _, base_timestamp, max_timestamp, _, _, _,
         records_count) = HEADER.unpack_from(buffer, position)
        start = position + RECORDS_OFFSET
        end = position + size
        if attributes & COMPRESSION_CODEC_MASK:
            data = decompress(self.compression_type, memoryview(buffer)[start:end], max_size=max_decompressed_bytes)
            start, end = 0, len(data)
        elif isinstance(buffer, bytes) or decode_records is not decode_records_python:
            # No copy of the payload: keys and values are sliced out of bytes, and the C decoder copies them all out
            # before it returns (a fetched frame or a mapped file is read in place).
            data = buffer
        else:
            data = bytes(memoryview(buffer)[start:end])  # mutable or mapped: take a private copy first
            start, end = 0, len(data)
        if records_count < 0 or records_count * MIN_RECORD_SIZE > end - start:
            raise CorruptRecordError(f"Record batch declares {records_count} records but its payload holds only "
                                     f"{end - start} bytes")
        log_append_time = max_timestamp if attributes & TIMESTAMP_TYPE_MASK else None
        return decode_records(data, records_count, base_offset, base_timestamp, log_append_time,
                              start, end, record_type=record_type, labels=labels)


def increment_sequence(sequence: int, increment: int) -> int:
    """Producer sequences wrap from INT32_MAX to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decode_records_python(data: Buffer, records_count: int, base_offset: int, base_timestamp: int,
                          log_append_time: int | None, start: int = 0, end: int | None = None, *,
                          record_type: type[tuple] = Record,
                          labels: tuple[Any, Any, Any, Any] | None = None) -> Iterator[Any]:
    """Decode ``records_count`` v2 records from ``data[start:end]`` (the uncompressed record list): the reference
    implementation of decode_records (kfk.records.accelerator).

    Each record is a ``record_type`` (a NamedTuple) holding (offset, timestamp, key, value, headers, attributes), or
    with ``labels`` (a, b, c, d) holding (a, b, offset, timestamp, c, key, value, headers, d): the shape of a
    consumer's record (topic, partition, ..., timestamp type, ..., leader epoch), built here in one step rather than
    from a Record afterwards, which costs a second tuple per record consumed.

    One- and two-byte varints (every length, delta and count below 8 KiB) are decoded inline, the rest by
    read_unsigned_varint: the repetition is deliberate, this loop runs once per record consumed. A record
    whose fields do not add up to its declared length, or bytes left over after the last record, raise
    CorruptRecordError.
    """
    new = tuple.__new__
    if labels is not None:
        first_label, second_label, third_label, fourth_label = labels
    if end is None:
        end = len(data)
    if not 0 <= start <= end <= len(data):
        raise ValueError(f"Record payload bounds {start}..{end} are outside the {len(data)}-byte buffer")
    position = start
    try:
        for _ in range(records_count):
            raw = data[position]
            if raw < 0x80:
                position += 1
            elif (second := data[position + 1]) < 0x80:
                raw = (raw & 0x7F) | (second << 7)
                position += 2
            else:
                raw, position = read_unsigned_varint(data, position)
            length = (raw >> 1) ^ -(raw & 1)
            record_end = position + length
            if length < MIN_RECORD_SIZE - 1 or record_end > end:
                raise CorruptRecordError(f"Record length {length} is impossible at payload position {position}")
            attributes = data[position]
            position += 1

            raw = data[position]
            if raw < 0x80:
                position += 1
            elif (second := data[position + 1]) < 0x80:
                raw = (raw & 0x7F) | (second << 7)
                position += 2
            else:
                raw, position = read_unsigned_varlong(data, position)
            timestamp_delta = (raw >> 1) ^ -(raw & 1)

            raw = data[position]
            if raw < 0x80:
                position += 1
            elif (second := data[position + 1]) < 0x80:
                raw = (raw & 0x7F) | (second << 7)
                position += 2
            else:
                raw, position = read_unsigned_varint(data, position)
            offset_delta = (raw >> 1) ^ -(raw & 1)

            raw = data[position]
            if raw < 0x80:
                position += 1
            elif (second := data[position + 1]) < 0x80:
                raw = (raw & 0x7F) | (second << 7)
                position += 2
            else:
                raw, position = read_unsigned_varint(data, position)
            key_length = (raw >> 1) ^ -(raw & 1)
            if key_length >= 0:
                if key_length > record_end - position:
                    raise CorruptRecordError(f"Record key length {key_length} exceeds its record")
                key = data[position:position + key_length]
                position += key_length
            elif key_length == -1:
                key = None
            else:
                raise CorruptRecordError(f"Record key length {key_length} is negative")

            raw = data[position]
            if raw < 0x80:
                position += 1
            elif (second := data[position + 1]) < 0x80:
                raw = (raw & 0x7F) | (second << 7)
                position += 2
            else:
                raw, position = read_unsigned_varint(data, position)
            value_length = (raw >> 1) ^ -(raw & 1)
            if value_length >= 0:
                if value_length > record_end - position:
                    raise CorruptRecordError(f"Record value length {value_length} exceeds its record")
                value = data[position:position + value_length]
                position += value_length
            elif value_length == -1:
                value = None
            else:
                raise CorruptRecordError(f"Record value length {value_length} is negative")

            raw = data[position]
            if raw < 0x80:
                position += 1
            elif (second := data[position + 1]) < 0x80:
                raw = (raw & 0x7F) | (second << 7)
                position += 2
            else:
                raw, position = read_unsigned_varint(data, position)
            header_count = (raw >> 1) ^ -(raw & 1)
            headers = []
            if header_count:
                if header_count < 0 or header_count > record_end - position:
                    raise CorruptRecordError(f"Record header count {header_count} is impossible")
                position = _decode_headers(data, position, record_end, header_count, headers)

            if position != record_end:
                raise CorruptRecordError(f"Record declares {length} bytes but its fields take "
                                         f"{length + position - record_end}")
            if labels is None:
                yield new(record_type, (
                    base_offset + offset_delta,
                    log_append_time if log_append_time is not None else base_timestamp + timestamp_delta,
                    key, value, headers, attributes))
            else:
                yield new(record_type, (
                    first_label, second_label, base_offset + offset_delta,
                    log_append_time if log_append_time is not None else base_timestamp + timestamp_delta,
                    third_label, key, value, headers, fourth_label))
    except IndexError:
        raise CorruptRecordError("Record payload ends inside a record") from None
    if position != end:
        raise CorruptRecordError(f"{end - position} bytes are left after the last of {records_count} records")


decode_records = accelerator.decode_records if accelerator is not None else decode_records_python
"""decode_records_python's signature and results; the C accelerator's version decodes the whole batch before
returning its first record (so a corrupt record raises before any of its batch is seen)."""


def _decode_headers(data: Buffer, position: int, record_end: int, header_count: int, headers: list) -> int:
    for _ in range(header_count):
        raw, position = read_unsigned_varint(data, position)
        key_length = (raw >> 1) ^ -(raw & 1)
        if key_length < 0 or position + key_length > record_end:
            raise CorruptRecordError(f"Record header key length {key_length} is impossible")
        header_key = data[position:position + key_length].decode("utf-8", "surrogateescape")
        position += key_length
        raw, position = read_unsigned_varint(data, position)
        value_length = (raw >> 1) ^ -(raw & 1)
        if value_length >= 0:
            if position + value_length > record_end:
                raise CorruptRecordError(f"Record header value length {value_length} exceeds the payload")
            header_value = data[position:position + value_length]
            position += value_length
        elif value_length == -1:
            header_value = None
        else:
            raise CorruptRecordError(f"Record header value length {value_length} is negative")
        headers.append((header_key, header_value))
    return position


# --- walking concatenated entries -----------------------------------------------------------------------------------

def _entry_at(buffer: Buffer, position: int, available: int) -> RecordBatch | LegacyRecordBatch | None:
    """The entry at ``position``, None if it is incomplete, CorruptRecordError if its length or magic is impossible."""
    if available < LOG_OVERHEAD:
        return None
    size = _INT32.unpack_from(buffer, position + LENGTH_OFFSET)[0]
    if size < LEGACY_RECORD_OVERHEAD[MAGIC_VALUE_V0]:
        raise CorruptRecordError(f"Entry at position {position} has size {size}, less than the minimum record "
                                 f"overhead {LEGACY_RECORD_OVERHEAD[MAGIC_VALUE_V0]}")
    if size + LOG_OVERHEAD > available:
        return None
    magic = buffer[position + MAGIC_OFFSET]
    if magic == MAGIC_VALUE_V2:
        if size < MIN_BATCH_LENGTH:
            raise CorruptRecordError(f"Record batch at position {position} has batchLength {size}, less than the "
                                     f"minimum {MIN_BATCH_LENGTH}")
        return RecordBatch(buffer, position)
    if magic in LEGACY_RECORD_OVERHEAD:
        if size < LEGACY_RECORD_OVERHEAD[magic]:
            raise CorruptRecordError(f"Message at position {position} has size {size}, less than the minimum "
                                     f"{LEGACY_RECORD_OVERHEAD[magic]} for magic {magic}")
        return LegacyRecordBatch(buffer, position)
    raise CorruptRecordError(f"Entry at position {position} has unknown magic {magic}")


def entry_at(buffer: Buffer, position: int = 0) -> RecordBatch | LegacyRecordBatch | None:
    """The entry that starts at ``position`` (what ``iter_batches`` yields first), None if it is incomplete: for
    callers that look at one entry without walking the rest."""
    return _entry_at(buffer, position, len(buffer) - position)


def iter_batches(buffer: Buffer, position: int = 0) -> Iterator[RecordBatch | LegacyRecordBatch]:
    """Walk the batches/legacy messages concatenated in ``buffer`` from ``position``, without copying.

    Stops quietly at an incomplete trailing entry (normal at the end of a fetch response or a torn log tail; see
    ``complete_entries_length``) and raises CorruptRecordError for an impossible length or an unknown magic.
    Entries are not CRC-checked here: call ``validate()`` on the ones that need it.
    """
    end = len(buffer)
    while True:
        entry = _entry_at(buffer, position, end - position)
        if entry is None:
            return
        yield entry
        position += _INT32.unpack_from(buffer, position + LENGTH_OFFSET)[0] + LOG_OVERHEAD


def complete_entries_length(buffer: Buffer, position: int = 0) -> int:
    """How many bytes from ``position`` are complete entries: everything after is a torn or partial tail.

    Checks framing only (lengths and magic, as ``iter_batches`` does), not CRCs.
    """
    start = position
    end = len(buffer)
    while (entry := _entry_at(buffer, position, end - position)) is not None:
        position += entry.size_in_bytes
    return position - start


# --- in-place header edits ------------------------------------------------------------------------------------------

def _require_v2(buffer: Buffer, position: int) -> None:
    if len(buffer) - position < RECORD_BATCH_OVERHEAD or buffer[position + MAGIC_OFFSET] != MAGIC_VALUE_V2:
        raise CorruptRecordError(f"No magic 2 record batch header at position {position}")


def set_base_offset(buffer: bytearray | memoryview, position: int, base_offset: int) -> None:
    """Rewrite baseOffset in place (outside the CRC: no recomputation)."""
    _require_v2(buffer, position)
    _INT64.pack_into(buffer, position + BASE_OFFSET_OFFSET, base_offset)


def stamp_produced_batch_python(buffer: bytearray | memoryview, base_offset: int,
                                epoch: int) -> tuple[int, int, int, int, int] | None:
    """The produce path's common case in one step: when ``buffer`` is exactly one client data batch of magic 2 that
    passes every check ``RecordBatch.validated_header`` makes (CRC32C included) and those a leader makes of a
    client's batch (not a control batch, recordsCount = lastOffsetDelta + 1 > 0, a base sequence with a producer
    id), stamp it with ``base_offset`` and ``epoch`` in place (set_base_offset_and_leader_epoch) and return
    (attributes, last_offset_delta, max_timestamp, producer_id, records_count). Anything else returns None with the
    buffer untouched, and the caller takes the general path, which names the fault.

    The reference of the C accelerator's stamp_produced_batch (kfk.records.accelerator); tests compare the two."""
    size = len(buffer)
    if size < RECORD_BATCH_OVERHEAD or _INT32.unpack_from(buffer, LENGTH_OFFSET)[0] + LOG_OVERHEAD != size:
        return None
    try:
        header = RecordBatch(buffer).validated_header()
    except CorruptRecordError:
        return None
    (_, _, _, _, _, attributes, last_offset_delta, _, max_timestamp, producer_id, _, base_sequence,
     records_count) = header
    if attributes & CONTROL_FLAG_MASK or records_count <= 0 or last_offset_delta + 1 != records_count or (
            producer_id > NO_PRODUCER_ID and base_sequence < 0):
        return None
    _INT64.pack_into(buffer, BASE_OFFSET_OFFSET, base_offset)
    _INT32.pack_into(buffer, PARTITION_LEADER_EPOCH_OFFSET, epoch)
    return attributes, last_offset_delta, max_timestamp, producer_id, records_count


stamp_produced_batch = accelerator.stamp_produced_batch if accelerator is not None else stamp_produced_batch_python
"""stamp_produced_batch_python's signature and results, in C when the accelerator is in use."""


def set_last_offset(buffer: bytearray | memoryview, position: int, last_offset: int) -> None:
    """Rewrite baseOffset so that the batch's last offset becomes ``last_offset`` (Kafka's setLastOffset)."""
    _require_v2(buffer, position)
    last_offset_delta = _INT32.unpack_from(buffer, position + LAST_OFFSET_DELTA_OFFSET)[0]
    _INT64.pack_into(buffer, position + BASE_OFFSET_OFFSET, last_offset - last_offset_delta)


def set_base_offset_and_leader_epoch(buffer: bytearray | memoryview, position: int, base_offset: int,
                                     epoch: int) -> None:
    """The leader's stamp on a produced batch: its offsets and its leader epoch, in place (both outside the CRC)."""
    _require_v2(buffer, position)
    _INT64.pack_into(buffer, position + BASE_OFFSET_OFFSET, base_offset)
    _INT32.pack_into(buffer, position + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_partition_leader_epoch(buffer: bytearray | memoryview, position: int, epoch: int) -> None:
    """Stamp the leader epoch in place (outside the CRC: no recomputation)."""
    _require_v2(buffer, position)
    _INT32.pack_into(buffer, position + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp(buffer: bytearray | memoryview, position: int, timestamp_type: TimestampType,
                      max_timestamp: int) -> None:
    """Set maxTimestamp and the timestamp-type bit, recomputing the CRC only if either changed."""
    _require_v2(buffer, position)
    attributes = _attribute_flags(buffer, position)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        new_attributes = attributes | TIMESTAMP_TYPE_MASK
    elif timestamp_type == TimestampType.CREATE_TIME:
        new_attributes = attributes & ~TIMESTAMP_TYPE_MASK
    else:
        raise ValueError(f"A magic 2 batch cannot have timestamp type {timestamp_type!r}")
    if (new_attributes == attributes
            and _INT64.unpack_from(buffer, position + MAX_TIMESTAMP_OFFSET)[0] == max_timestamp):
        return
    size = _INT32.unpack_from(buffer, position + LENGTH_OFFSET)[0] + LOG_OVERHEAD
    if size < RECORD_BATCH_OVERHEAD or size > len(buffer) - position:
        raise CorruptRecordError(f"Record batch at position {position} is truncated or has an impossible length")
    _INT16.pack_into(buffer, position + ATTRIBUTES_OFFSET, new_attributes)
    _INT64.pack_into(buffer, position + MAX_TIMESTAMP_OFFSET, max_timestamp)
    crc = crc32c(memoryview(buffer)[position + ATTRIBUTES_OFFSET:position + size])
    _UINT32.pack_into(buffer, position + CRC_OFFSET, crc)


def set_log_append_time(buffer: bytearray | memoryview, position: int, timestamp: int) -> None:
    """Mark the batch LogAppendTime with ``timestamp`` as its max timestamp, and recompute the CRC."""
    set_max_timestamp(buffer, position, TimestampType.LOG_APPEND_TIME, timestamp)
