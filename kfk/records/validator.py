"""LogValidator: what the leader does to a partition's records from a Produce request before appending them.

Kafka's idea (storage's LogValidator), kept header-level wherever Kafka's format allows it:

- v2 batches whose codec the topic keeps (compression.type=producer, or the same codec) are checked by header and
  CRC32C only, and get their offsets, partition leader epoch and (LogAppendTime) max timestamp rewritten in place.
  No record is decoded unless a topic setting needs to look at records: a compacted topic (every record needs a
  key) or a finite message.timestamp.before/after.max.ms (every CreateTime timestamp is checked).
- v2 batches whose codec differs from the topic's are decoded and rebuilt with the topic's codec.
- magic 0/1 message sets (old clients) are converted to one v2 batch, compressed like the source (or as the topic
  says).

Offsets come out consecutive from ``next_offset``. Errors: CorruptRecordError for bytes that are not a well-formed
batch (Kafka's CORRUPT_MESSAGE), InvalidRecordError for well-formed batches a client may not send (INVALID_RECORD),
InvalidTimestampError and RecordTooLargeError for the topic limits.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum
from typing import NamedTuple

from kfk.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError, RecordTooLargeError
from kfk.records.batch import (
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    RecordBatch,
    iter_batches,
    set_base_offset_and_leader_epoch,
    set_log_append_time,
)
from kfk.records.builder import MemoryRecordsBuilder
from kfk.records.legacy import LegacyRecordBatch
from kfk.records.record import (
    MAGIC_VALUE_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    CompressionType,
    Record,
    TimestampType,
)

__all__ = ["AppendOrigin", "LogAppendInfo", "LogValidator"]

#: The codec of a batch by its attributes' id (validated_header has checked the id is one of these).
_COMPRESSION_TYPES = {codec.value: codec for codec in CompressionType}


class AppendOrigin(Enum):
    """Who is appending: clients may not write control batches; the coordinators write transaction markers."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


class LogAppendInfo(NamedTuple):
    """The outcome of validating one partition's records (Kafka's LogAppendInfo, the fields our log needs).

    ``offset_of_max_timestamp`` is the last offset of the batch holding the max timestamp (Kafka's "shallow"
    offset, what the time index records), or the last offset overall for LogAppendTime. A named tuple, not a frozen
    dataclass: one is built per produced partition, and a frozen dataclass costs five times as much to build.
    """

    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    records_count: int
    validated_records: bytes | bytearray | memoryview
    log_append_time: int
    source_compression: CompressionType
    target_compression: CompressionType
    re_encoded: bool
    batches: list[RecordBatch] | None = None
    """Views of the batches in ``validated_records`` when they were edited in place (None when rebuilt), so that
    the log appending them need not walk the buffer again."""

    @property
    def valid_bytes(self) -> int:
        return len(self.validated_records)


class LogValidator:
    """Validates and assigns offsets for one partition, configured like the topic.

    ``target_compression`` None means compression.type=producer. ``timestamp_before_max_ms`` /
    ``timestamp_after_max_ms`` None mean unbounded (Kafka's Long.MAX_VALUE default).
    """

    def __init__(self, *, timestamp_type: TimestampType = TimestampType.CREATE_TIME,
                 target_compression: CompressionType | None = None, compression_level: int | None = None,
                 compacted_topic: bool = False, timestamp_before_max_ms: int | None = None,
                 timestamp_after_max_ms: int | None = None, max_message_bytes: int | None = None,
                 origin: AppendOrigin = AppendOrigin.CLIENT) -> None:
        if timestamp_type == TimestampType.NO_TIMESTAMP_TYPE:
            raise ValueError("message.timestamp.type is CreateTime or LogAppendTime")
        self.timestamp_type = timestamp_type
        self.target_compression = target_compression
        self.compression_level = compression_level
        self.compacted_topic = compacted_topic
        self.timestamp_before_max_ms = timestamp_before_max_ms
        self.timestamp_after_max_ms = timestamp_after_max_ms
        self.max_message_bytes = max_message_bytes
        self.origin = origin
        bounded = timestamp_before_max_ms is not None or timestamp_after_max_ms is not None
        # Whether a non-control batch's records must be decoded: keys (compaction) or CreateTime bounds to check.
        self._records_needed = compacted_topic or (bounded and timestamp_type == TimestampType.CREATE_TIME)

    def validate_and_assign_offsets(self, records: bytes | bytearray | memoryview, next_offset: int, now_ms: int,
                                    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH) -> LogAppendInfo:
        """Validate ``records`` (one partition's records field) and assign offsets from ``next_offset``.

        A writable buffer (bytearray, or a memoryview of one) is edited in place and returned as
        ``validated_records``; read-only bytes are copied once first.
        """
        buffer: bytearray | memoryview
        if isinstance(records, bytearray) or (isinstance(records, memoryview) and not records.readonly):
            buffer = records
        else:
            buffer = bytearray(records)
        entries = list(iter_batches(buffer))
        consumed = entries[-1].position + entries[-1].size_in_bytes if entries else 0
        if consumed != len(buffer):
            raise CorruptRecordError(f"Records end with {len(buffer) - consumed} bytes of an incomplete batch")
        log_append_time = now_ms if self.timestamp_type == TimestampType.LOG_APPEND_TIME else NO_TIMESTAMP
        if not entries:
            return LogAppendInfo(next_offset, next_offset - 1, NO_TIMESTAMP, -1, 0, buffer, log_append_time,
                                 CompressionType.NONE, self.target_compression or CompressionType.NONE, False)
        magic = entries[0].magic
        max_message_bytes = self.max_message_bytes
        for entry in entries:
            if entry.magic != magic:
                raise InvalidRecordError(f"Batch magic {entry.magic} is not the same as the first batch's "
                                         f"magic {magic}")
            if max_message_bytes is not None and entry.size_in_bytes > max_message_bytes:
                raise RecordTooLargeError(f"The record batch of {entry.size_in_bytes} bytes is larger than "
                                          f"max.message.bytes {max_message_bytes}")
        if magic == MAGIC_VALUE_V2:
            return self._validate_v2(buffer, entries, next_offset, now_ms, partition_leader_epoch)  # type: ignore
        return self._convert_legacy(entries, next_offset, now_ms, partition_leader_epoch)  # type: ignore[arg-type]

    # --- magic 2 ---------------------------------------------------------------------------------------------------

    def _validate_v2(self, buffer: bytearray | memoryview, batches: list[RecordBatch], next_offset: int,
                     now_ms: int, partition_leader_epoch: int) -> LogAppendInfo:
        log_append = self.timestamp_type == TimestampType.LOG_APPEND_TIME
        first_offset = next_offset
        max_timestamp = NO_TIMESTAMP
        offset_of_max_timestamp = -1
        records_count = 0
        re_encoded_parts: list[bytes] | None = None
        source_compression = CompressionType.NONE  # set from each batch's attributes below
        for index, batch in enumerate(batches):
            (_, _, _, _, _, attributes, last_offset_delta, _, header_max_timestamp, producer_id, _, base_sequence,
             header_records_count) = batch.validated_header()
            is_control = bool(attributes & CONTROL_FLAG_MASK)
            self._validate_batch_header(is_control, header_records_count, last_offset_delta, producer_id,
                                        base_sequence)
            source_compression = _COMPRESSION_TYPES[attributes & COMPRESSION_CODEC_MASK]
            target = self._target_for(source_compression)
            decoded: list[Record] | None = None
            if not is_control and (self._records_needed or target != source_compression):
                decoded = list(batch.records())
                self._validate_records(decoded, batch.is_control, now_ms)
            if decoded is not None and target != source_compression:
                if re_encoded_parts is None:
                    re_encoded_parts = [bytes(earlier.as_memoryview()) for earlier in batches[:index]]
                rebuilt = self._rebuild(batch, decoded, target, next_offset, now_ms, partition_leader_epoch)
                re_encoded_parts.append(rebuilt)
                count = len(decoded)
                last_offset = next_offset + count - 1
                batch_max_timestamp = now_ms if log_append else RecordBatch(rebuilt).max_timestamp
            else:
                set_base_offset_and_leader_epoch(buffer, batch.position, next_offset, partition_leader_epoch)
                if log_append:
                    set_log_append_time(buffer, batch.position, now_ms)
                count = header_records_count
                last_offset = next_offset + last_offset_delta
                batch_max_timestamp = now_ms if log_append else header_max_timestamp
                if re_encoded_parts is not None:
                    re_encoded_parts.append(bytes(batch.as_memoryview()))
            if batch_max_timestamp > max_timestamp or (log_append and count):
                max_timestamp = batch_max_timestamp
                offset_of_max_timestamp = last_offset
            records_count += count
            next_offset = last_offset + 1
        validated: bytes | bytearray | memoryview = buffer if re_encoded_parts is None else b"".join(re_encoded_parts)
        return LogAppendInfo(first_offset, next_offset - 1, max_timestamp, offset_of_max_timestamp, records_count,
                             validated, now_ms if log_append else NO_TIMESTAMP, source_compression,
                             self._target_for(source_compression), re_encoded_parts is not None,
                             batches if re_encoded_parts is None else None)

    def _validate_batch_header(self, is_control: bool, records_count: int, last_offset_delta: int,
                               producer_id: int, base_sequence: int) -> None:
        if is_control:
            if self.origin == AppendOrigin.CLIENT:
                raise InvalidRecordError("Clients are not allowed to write control records")
            return
        if self.origin == AppendOrigin.CLIENT:
            if records_count <= 0:
                raise InvalidRecordError(f"Invalid reported count for record batch: {records_count}")
            if last_offset_delta + 1 != records_count:
                raise InvalidRecordError(f"Inconsistent batch offset range [0, {last_offset_delta}] and "
                                         f"count of records {records_count}")
        if producer_id > NO_PRODUCER_ID and base_sequence < 0:
            raise InvalidRecordError(f"Invalid sequence number {base_sequence} in record batch with "
                                     f"producerId {producer_id}")

    def _target_for(self, source_compression: CompressionType) -> CompressionType:
        return source_compression if self.target_compression is None else self.target_compression

    def _validate_records(self, records: Iterable[Record], is_control: bool, now_ms: int) -> None:
        if is_control:
            return
        check_timestamps = self.timestamp_type == TimestampType.CREATE_TIME
        before = self.timestamp_before_max_ms
        after = self.timestamp_after_max_ms
        for record in records:
            if self.compacted_topic and record.key is None:
                raise InvalidRecordError("Compacted topic cannot accept message without key")
            if check_timestamps and record.timestamp != NO_TIMESTAMP:
                if before is not None and now_ms - record.timestamp > before:
                    raise InvalidTimestampError(
                        f"Timestamp {record.timestamp} of message with offset {record.offset} is out of range: "
                        f"more than message.timestamp.before.max.ms={before} before {now_ms}")
                if after is not None and record.timestamp - now_ms > after:
                    raise InvalidTimestampError(
                        f"Timestamp {record.timestamp} of message with offset {record.offset} is out of range: "
                        f"more than message.timestamp.after.max.ms={after} after {now_ms}")

    def _rebuild(self, batch: RecordBatch, records: list[Record], target: CompressionType, next_offset: int,
                 now_ms: int, partition_leader_epoch: int) -> bytes:
        builder = self._builder(target, next_offset, now_ms, partition_leader_epoch,
                                producer_id=batch.producer_id, producer_epoch=batch.producer_epoch,
                                base_sequence=batch.base_sequence, is_transactional=batch.is_transactional)
        _append_all(builder, records, next_offset)
        return self._closed(builder)

    def _builder(self, target: CompressionType, next_offset: int, now_ms: int, partition_leader_epoch: int,
                 **producer_fields: int | bool) -> MemoryRecordsBuilder:
        log_append = self.timestamp_type == TimestampType.LOG_APPEND_TIME
        return MemoryRecordsBuilder(compression_type=target, timestamp_type=self.timestamp_type,
                                    base_offset=next_offset, log_append_time=now_ms if log_append else NO_TIMESTAMP,
                                    partition_leader_epoch=partition_leader_epoch,
                                    compression_level=self.compression_level, **producer_fields)  # type: ignore

    def _closed(self, builder: MemoryRecordsBuilder) -> bytes:
        rebuilt = builder.close()
        if self.max_message_bytes is not None and len(rebuilt) > self.max_message_bytes:
            raise RecordTooLargeError(f"The record batch is {len(rebuilt)} bytes after re-compression, larger "
                                      f"than max.message.bytes {self.max_message_bytes}")
        return rebuilt

    # --- magic 0/1 -------------------------------------------------------------------------------------------------

    def _convert_legacy(self, entries: list[LegacyRecordBatch], next_offset: int, now_ms: int,
                        partition_leader_epoch: int) -> LogAppendInfo:
        records: list[Record] = []
        source_compression = CompressionType.NONE
        for entry in entries:
            entry.validate()
            if entry.is_compressed:
                source_compression = entry.compression_type
            records.extend(entry.records())
        self._validate_records(records, False, now_ms)
        target = self._target_for(source_compression)
        builder = self._builder(target, next_offset, now_ms, partition_leader_epoch)
        _append_all(builder, records, next_offset)
        rebuilt = self._closed(builder)
        batch = RecordBatch(rebuilt)
        max_timestamp = batch.max_timestamp
        return LogAppendInfo(next_offset, batch.last_offset, max_timestamp,
                             batch.last_offset if max_timestamp != NO_TIMESTAMP else -1, len(records), rebuilt,
                             builder.log_append_time, source_compression, target, True)


def _append_all(builder: MemoryRecordsBuilder, records: list[Record], next_offset: int) -> None:
    """Re-encode ``records`` at consecutive offsets; a timestamp the format cannot hold is an invalid record."""
    for index, record in enumerate(records):
        try:
            builder.append_with_offset(next_offset + index, record.timestamp, record.key, record.value,
                                       record.headers)
        except ValueError as error:
            raise InvalidRecordError(f"Record at offset {record.offset} cannot be re-encoded: {error}") from error
