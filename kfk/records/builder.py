"""MemoryRecordsBuilder: builds one v2 record batch (our producer's batches, and the broker's re-encodes).

Records are encoded as they are appended, so ``close()`` only joins them, compresses once, writes the 61-byte header
and the CRC32C. The first appended timestamp becomes baseTimestamp (or the delete horizon, if one is given) and the
other records store their distance from it, as Kafka's builder does.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from crc32c import crc32c

from kfk.common.constants import INT32_MAX, INT64_MAX, INT64_MIN
from kfk.common.varint import ZIGZAG_CACHE, ZIGZAG_CACHE_HIGH, ZIGZAG_CACHE_LOW, size_of_varint
from kfk.records._varint import encode_varint, encode_varlong
from kfk.records.accelerator import accelerator
from kfk.records.batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    HEADER,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
)
from kfk.records.compression import compress
from kfk.records.record import (
    LOG_OVERHEAD,
    MAGIC_VALUE_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    CompressionType,
    Header,
    Record,
    TimestampType,
)

__all__ = ["MemoryRecordsBuilder", "build_empty_batch", "batch_attributes", "record_size", "encode_record_python",
           "encode_values_python"]

_NULL_LENGTH = encode_varint(-1)
_UINT32 = struct.Struct(">I")


def batch_attributes(compression_type: CompressionType, timestamp_type: TimestampType, is_transactional: bool,
                     is_control: bool, has_delete_horizon: bool = False) -> int:
    attributes = int(compression_type)
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    if has_delete_horizon:
        attributes |= DELETE_HORIZON_FLAG_MASK
    return attributes


def encode_record_python(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                         headers: Sequence[Header], cached: list[bytes] = ZIGZAG_CACHE, low: int = ZIGZAG_CACHE_LOW,
                         high: int = ZIGZAG_CACHE_HIGH) -> bytes:
    """One record with its length prefix (the reference implementation of encode_record: see
    kfk.records.accelerator). The hot path of the producer: small varints come from a table and the record is
    joined once, with its length computed from the parts rather than by encoding twice."""
    timestamp_part = (cached[timestamp_delta - low] if low <= timestamp_delta < high
                      else encode_varlong(timestamp_delta))
    offset_part = cached[offset_delta - low] if offset_delta < high else encode_varint(offset_delta)
    if key is None:
        key_length, key = _NULL_LENGTH, b""
    else:
        size = len(key)
        key_length = cached[size - low] if size < high else encode_varint(size)
    if value is None:
        value_length, value = _NULL_LENGTH, b""
    else:
        size = len(value)
        value_length = cached[size - low] if size < high else encode_varint(size)
    headers_part = _encode_headers(headers) if headers else b"\x00"
    body_size = (1 + len(timestamp_part) + len(offset_part) + len(key_length) + len(key) + len(value_length)
                 + len(value) + len(headers_part))
    return b"".join((cached[body_size - low] if body_size < high else encode_varint(body_size), b"\x00",
                     timestamp_part, offset_part, key_length, key, value_length, value, headers_part))


def encode_values_python(parts: list[bytes], values: Sequence[bytes | None], keys: Sequence[bytes | None] | None,
                         start: int, end: int, offset_delta: int, timestamp_delta: int, room: int,
                         must_take_one: bool, cached: list[bytes] = ZIGZAG_CACHE, low: int = ZIGZAG_CACHE_LOW,
                         high: int = ZIGZAG_CACHE_HIGH) -> tuple[int, int]:
    """Encode the records of ``values[start:end]`` (``keys[i]`` as each one's key, or null keys), headerless at
    offset deltas from ``offset_delta`` and all at ``timestamp_delta``, onto ``parts`` while their sizes add up to
    at most ``room`` bytes (with ``must_take_one``, the first is taken whatever its size); returns (records taken,
    bytes added). The reference implementation of encode_values (kfk.records.accelerator).

    What does not change from record to record is encoded once (the attributes and timestamp delta; the null key
    and value length of equal-sized values), and each record's pieces go onto ``parts`` without being joined first.
    """
    prefix = b"\x00" + (cached[timestamp_delta - low] if low <= timestamp_delta < high
                        else encode_varlong(timestamp_delta))
    extend = parts.extend
    added = 0
    last_size = -1
    middle = b""
    fixed = 0
    index = start
    while index < end:
        value = values[index]
        key = keys[index] if keys is not None else None
        if key is None and value is not None:
            size = len(value)
            if size != last_size:
                last_size = size
                middle = b"\x01" + (cached[size - low] if size < high else encode_varint(size))
                fixed = len(prefix) + len(middle) + size + 1
            offset_part = cached[offset_delta - low] if offset_delta < high else encode_varint(offset_delta)
            body = fixed + len(offset_part)
            length_part = cached[body - low] if body < high else encode_varint(body)
            record_size = len(length_part) + body
            if added + record_size > room and not (must_take_one and index == start):
                break
            extend((length_part, prefix, offset_part, middle, value, b"\x00"))
        else:
            record = encode_record_python(offset_delta, timestamp_delta, key, value, ())
            record_size = len(record)
            if added + record_size > room and not (must_take_one and index == start):
                break
            parts.append(record)
        added += record_size
        offset_delta += 1
        index += 1
    return index - start, added


def _encode_headers(headers: Sequence[Header]) -> bytes:
    parts = [encode_varint(len(headers))]
    for header_key, header_value in headers:
        encoded_key = header_key.encode("utf-8", "surrogateescape")
        parts.append(encode_varint(len(encoded_key)))
        parts.append(encoded_key)
        if header_value is None:
            parts.append(_NULL_LENGTH)
        else:
            parts.append(encode_varint(len(header_value)))
            parts.append(header_value)
    return b"".join(parts)


if accelerator is not None:
    encode_record = accelerator.encode_record
    encode_values = accelerator.encode_values
else:
    encode_record = encode_record_python
    encode_values = encode_values_python


def record_size(offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None,
                headers: Sequence[Header] = ()) -> int:
    """The exact encoded size of one v2 record, length prefix included, without encoding it."""
    size = 1 + size_of_varint(timestamp_delta) + size_of_varint(offset_delta)
    size += 1 if key is None else size_of_varint(len(key)) + len(key)
    size += 1 if value is None else size_of_varint(len(value)) + len(value)
    size += size_of_varint(len(headers))
    for header_key, header_value in headers:
        key_length = len(header_key.encode("utf-8", "surrogateescape"))
        size += size_of_varint(key_length) + key_length
        size += 1 if header_value is None else size_of_varint(len(header_value)) + len(header_value)
    return size_of_varint(size) + size


class MemoryRecordsBuilder:
    """Append records, then ``close()`` for the bytes of one v2 batch (b"" if nothing was appended)."""

    def __init__(self, *, compression_type: CompressionType = CompressionType.NONE,
                 timestamp_type: TimestampType = TimestampType.CREATE_TIME, base_offset: int = 0,
                 log_append_time: int = NO_TIMESTAMP, producer_id: int = NO_PRODUCER_ID,
                 producer_epoch: int = NO_PRODUCER_EPOCH, base_sequence: int = NO_SEQUENCE,
                 is_transactional: bool = False, is_control_batch: bool = False,
                 partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH, delete_horizon_ms: int = NO_TIMESTAMP,
                 compression_level: int | None = None, write_limit: int | None = None) -> None:
        if timestamp_type == TimestampType.NO_TIMESTAMP_TYPE:
            raise ValueError("A magic 2 batch needs CreateTime or LogAppendTime")
        if timestamp_type == TimestampType.LOG_APPEND_TIME and log_append_time == NO_TIMESTAMP:
            raise ValueError("LogAppendTime needs a log_append_time")
        if is_transactional and producer_id == NO_PRODUCER_ID:
            raise ValueError("Cannot write a transactional batch without a valid producer id")
        if not INT64_MIN <= base_offset <= INT64_MAX:
            raise ValueError(f"Base offset {base_offset} does not fit in an int64")
        # The enum's own call costs more than the rest of this constructor: the producer makes a builder per batch.
        self.compression_type = (compression_type if isinstance(compression_type, CompressionType)
                                 else CompressionType(compression_type))
        self.timestamp_type = timestamp_type
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        self.is_control_batch = is_control_batch
        self.partition_leader_epoch = partition_leader_epoch
        self.delete_horizon_ms = delete_horizon_ms
        self.compression_level = compression_level
        self.write_limit = write_limit
        self._parts: list[bytes] = []
        """The encoded records, as pieces joined once at close()."""
        self._count = 0
        self._uncompressed_size = 0
        self._base_timestamp: int | None = None if delete_horizon_ms == NO_TIMESTAMP else delete_horizon_ms
        self._max_timestamp = NO_TIMESTAMP
        self._next_offset_delta = 0
        self._max_offset_delta = min(INT32_MAX, INT64_MAX - base_offset)
        self._closed: bytearray | None = None

    # --- appending ---------------------------------------------------------------------------------------------------

    @property
    def num_records(self) -> int:
        return self._count

    @property
    def last_offset(self) -> int | None:
        return self.base_offset + self._next_offset_delta - 1 if self._count else None

    @property
    def next_offset(self) -> int:
        return self.base_offset + self._next_offset_delta

    def append(self, timestamp: int, key: bytes | None, value: bytes | None,
               headers: Sequence[Header] = ()) -> int:
        """Append at the next offset; returns that offset."""
        offset_delta = self._next_offset_delta
        self._append(offset_delta, timestamp, key, value, headers)
        return self.base_offset + offset_delta

    def append_with_offset(self, offset: int, timestamp: int, key: bytes | None, value: bytes | None,
                           headers: Sequence[Header] = ()) -> None:
        offset_delta = offset - self.base_offset
        if offset_delta < self._next_offset_delta:
            raise ValueError(f"Illegal offset {offset} following previous offset {self.next_offset - 1} "
                             "(offsets must increase monotonically from the base offset)")
        self._append(offset_delta, timestamp, key, value, headers)

    def _append(self, offset_delta: int, timestamp: int, key: bytes | None, value: bytes | None,
                headers: Sequence[Header]) -> None:
        if self._closed is not None:
            raise ValueError("Cannot append to a closed MemoryRecordsBuilder")
        if offset_delta > self._max_offset_delta:
            raise ValueError(f"Offset delta {offset_delta} from base offset {self.base_offset} does not fit")
        if timestamp < 0 and timestamp != NO_TIMESTAMP:
            raise ValueError(f"Invalid negative timestamp {timestamp}")
        base_timestamp = self._base_timestamp
        if base_timestamp is None:
            base_timestamp = self._base_timestamp = timestamp
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        record = encode_record(offset_delta, timestamp - base_timestamp, key, value, headers)
        self._parts.append(record)
        self._count += 1
        self._uncompressed_size += len(record)
        self._next_offset_delta = offset_delta + 1

    def append_values(self, timestamp: int, values: Sequence[bytes | None], start: int = 0,
                      keys: Sequence[bytes | None] | None = None) -> int:
        """Append ``values[start:]`` (with ``keys[i]`` as each one's key, or null keys) at the next offsets, all at
        ``timestamp`` and without headers, while they fit ``write_limit`` (the first record of the batch always
        fits); returns how many were appended.

        The producer's produce_batch path: one call per batch instead of one per record (encode_values).
        """
        if self._closed is not None:
            raise ValueError("Cannot append to a closed MemoryRecordsBuilder")
        if timestamp < 0 and timestamp != NO_TIMESTAMP:
            raise ValueError(f"Invalid negative timestamp {timestamp}")
        offset_delta = self._next_offset_delta
        end = min(len(values), start + self._max_offset_delta - offset_delta + 1)
        if end <= start:
            return 0
        if self._base_timestamp is None:
            self._base_timestamp = timestamp
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        room = INT64_MAX if self.write_limit is None else self.write_limit - self.estimated_size_in_bytes()
        count, added = encode_values(self._parts, values, keys, start, end, offset_delta,
                                     timestamp - self._base_timestamp, room, not self._count)
        self._count += count
        self._uncompressed_size += added
        self._next_offset_delta = offset_delta + count
        return count

    def extend(self, records: Iterable[Record]) -> None:
        """Append decoded records, keeping their offsets (re-encoding a batch)."""
        for record in records:
            self.append_with_offset(record.offset, record.timestamp, record.key, record.value, record.headers)

    def estimated_size_in_bytes(self) -> int:
        """The batch size if nothing compresses: an upper bound that is exact for uncompressed batches."""
        return RECORD_BATCH_OVERHEAD + self._uncompressed_size

    def has_room_for(self, timestamp: int, key: bytes | None, value: bytes | None,
                     headers: Sequence[Header] = ()) -> bool:
        """False once appending at the next offset would pass ``write_limit`` (uncompressed bytes: compression only
        makes the batch smaller); the first record always fits, as in Kafka's producer."""
        if self._closed is not None:
            return False
        if self.write_limit is None or self._base_timestamp is None or not self._count:
            return True
        size = record_size(self._next_offset_delta, timestamp - self._base_timestamp, key, value, headers)
        return self.estimated_size_in_bytes() + size <= self.write_limit

    # --- closing -----------------------------------------------------------------------------------------------------

    def close(self) -> bytearray:
        """Finish the batch and return it (empty if nothing was appended); later calls return the same object.

        A bytearray, so that whoever owns it next (the broker validating a re-encoded batch, a test) can edit the
        header in place without another copy.
        """
        if self._closed is None:
            self._closed = self._build() if self._count else bytearray()
        return self._closed

    def _build(self) -> bytearray:
        if self.compression_type == CompressionType.NONE:
            records = self._parts
            records_size = self._uncompressed_size
        else:
            records = [compress(self.compression_type, b"".join(self._parts), level=self.compression_level)]
            records_size = len(records[0])
        max_timestamp = (self.log_append_time if self.timestamp_type == TimestampType.LOG_APPEND_TIME
                         else self._max_timestamp)
        attributes = batch_attributes(self.compression_type, self.timestamp_type, self.is_transactional,
                                      self.is_control_batch, self.delete_horizon_ms != NO_TIMESTAMP)
        assert self._base_timestamp is not None
        header = HEADER.pack(
            self.base_offset, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + records_size, self.partition_leader_epoch,
            MAGIC_VALUE_V2, 0, attributes, self._next_offset_delta - 1, self._base_timestamp,
            max_timestamp, self.producer_id, self.producer_epoch, self.base_sequence, self._count)
        # One allocation for the whole batch (large fresh allocations are what cost here), CRC'd in place.
        batch = bytearray().join((header, *records))
        _UINT32.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]))
        return batch


def build_empty_batch(*, base_offset: int, last_offset: int, producer_id: int, producer_epoch: int,
                      base_sequence: int, timestamp: int = NO_TIMESTAMP,
                      timestamp_type: TimestampType = TimestampType.CREATE_TIME, is_transactional: bool = False,
                      is_control: bool = False, partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> bytes:
    """A batch header with no records: what the log cleaner keeps when it removes every record of a batch whose
    producer state must survive (Kafka's DefaultRecordBatch.writeEmptyHeader)."""
    if not 0 <= last_offset - base_offset <= INT32_MAX:
        raise ValueError(f"Empty batch offsets {base_offset}..{last_offset} are out of order or too far apart")
    if timestamp_type == TimestampType.NO_TIMESTAMP_TYPE:
        raise ValueError("A magic 2 batch needs CreateTime or LogAppendTime")
    attributes = batch_attributes(CompressionType.NONE, timestamp_type, is_transactional, is_control)
    header = bytearray(HEADER.pack(
        base_offset, RECORD_BATCH_OVERHEAD - LOG_OVERHEAD, partition_leader_epoch, MAGIC_VALUE_V2, 0, attributes,
        last_offset - base_offset, timestamp, timestamp, producer_id, producer_epoch, base_sequence, 0))
    header[CRC_OFFSET:CRC_OFFSET + 4] = crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]).to_bytes(4, "big")
    return bytes(header)
