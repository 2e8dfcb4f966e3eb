"""LogValidator: what the leader's log does to records before appending them (Log.append_as_leader runs it under
the log's lock, so the offsets it assigns from the log end are the ones written).

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
InvalidTimestampError and RecordTooLargeError for the topic limits; keyless records and out-of-range timestamps
raise a RecordValidationError kind that lists every such record of the batch (Produce's record_errors).
"""

from __future__ import annotations

from collections.abc import Iterable

from kfk.config import INT64_MAX, LogConfig
from kfk.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaError,
    RecordTooLargeError,
)
from kfk.records.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    MAX_TIMESTAMP_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RecordBatch,
    iter_batches,
    set_base_offset_and_leader_epoch,
    set_log_append_time,
    stamp_produced_batch,
)
from kfk.records.builder import MemoryRecordsBuilder
from kfk.records.legacy import LegacyRecordBatch
from kfk.records.record import (
    MAGIC_OFFSET,
    MAGIC_VALUE_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_ID,
    NO_TIMESTAMP,
    CompressionType,
    Record,
    TimestampType,
)
from kfk.common.structs import TopicPartition
from kfk.storage.producer_state import AppendOrigin

__all__ = ["InvalidRecordsError", "InvalidTimestampsError", "LogAppendInfo", "LogValidator", "RecordValidationError",
           "append_needs_record_work"]

#: The codec of a batch by its attributes' id (validated_header has checked the id is one of these).
_COMPRESSION_TYPES = {codec.value: codec for codec in CompressionType}

#: compression.type's values: None keeps the producer's codec.
_TOPIC_COMPRESSION = {
    "producer": None,
    "uncompressed": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}


class RecordValidationError(KafkaError):
    """Records a client may not send, and which ones (index in their batch, why): Produce v8+ answers them in
    record_errors (Kafka's RecordValidationException). Raised as the more specific kinds below."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.record_errors: list[tuple[int, str]] = []


class InvalidRecordsError(RecordValidationError, InvalidRecordError):
    """Keyless records in a compacted topic."""


class InvalidTimestampsError(RecordValidationError, InvalidTimestampError):
    """CreateTime timestamps outside message.timestamp.before/after.max.ms."""


class LogAppendInfo:
    """What an append did (Kafka's LogAppendInfo): where the records went, their max timestamp, and how they were
    validated. The leader's validator builds it and the log completes it (log_start_offset; for a retried idempotent
    batch a new one with ``duplicate`` and the offsets it got the first time, nothing having been written). A follower
    append builds it from the batch headers.

    ``shallow_offset_of_max_timestamp`` is the last offset of the batch holding the max timestamp (what the time
    index records), or the last offset overall for LogAppendTime. ``batches`` are views of ``validated_records``, so
    that the log appending them need not walk the buffer again. A slotted class: one is built per produced partition,
    and a dataclass costs several times as much to build.
    """

    __slots__ = ("first_offset", "last_offset", "max_timestamp", "shallow_offset_of_max_timestamp", "records_count",
                 "validated_records", "log_append_time", "source_compression", "target_compression", "re_encoded",
                 "batches", "has_producer_ids", "last_leader_epoch", "log_start_offset", "duplicate")

    def __init__(self, first_offset: int, last_offset: int, max_timestamp: int = NO_TIMESTAMP,
                 shallow_offset_of_max_timestamp: int = -1, records_count: int = 0,
                 validated_records: bytes | bytearray | memoryview = b"", log_append_time: int = NO_TIMESTAMP,
                 source_compression: CompressionType = CompressionType.NONE,
                 target_compression: CompressionType = CompressionType.NONE, re_encoded: bool = False,
                 batches: list[RecordBatch] | None = None, has_producer_ids: bool = False,
                 last_leader_epoch: int = NO_PARTITION_LEADER_EPOCH, log_start_offset: int = 0,
                 duplicate: bool = False) -> None:
        self.first_offset = first_offset
        self.last_offset = last_offset
        self.max_timestamp = max_timestamp
        self.shallow_offset_of_max_timestamp = shallow_offset_of_max_timestamp
        self.records_count = records_count
        self.validated_records = validated_records
        self.log_append_time = log_append_time
        self.source_compression = source_compression
        self.target_compression = target_compression
        self.re_encoded = re_encoded
        self.batches = batches
        self.has_producer_ids = has_producer_ids
        self.last_leader_epoch = last_leader_epoch
        self.log_start_offset = log_start_offset
        self.duplicate = duplicate

    @property
    def valid_bytes(self) -> int:
        return len(self.validated_records)

    def __repr__(self) -> str:
        return (f"LogAppendInfo(first_offset={self.first_offset}, last_offset={self.last_offset}, "
                f"max_timestamp={self.max_timestamp}, records_count={self.records_count}, "
                f"valid_bytes={self.valid_bytes}, duplicate={self.duplicate})")


def append_needs_record_work(config: LogConfig, records: bytes | bytearray | memoryview) -> bool:
    """Will validating these records take more than a header pass? Legacy message sets are converted, a batch whose
    codec is not the topic's is re-encoded, and compacted topics or a bounded past make every record be decoded:
    milliseconds per MiB of CPU, partly outside the GIL (the codecs), so the broker does that in an executor. Reads
    two bytes of the first batch, no more. The future bound (message.timestamp.after.max.ms, bounded by default)
    is checked on each batch's max_timestamp; only a batch beyond it is decoded, to name its records."""
    if config.compact or config.message_timestamp_before_max_ms != INT64_MAX:
        return True
    if len(records) <= MAGIC_OFFSET:
        return False
    if records[MAGIC_OFFSET] != MAGIC_VALUE_V2:
        return True
    target = _TOPIC_COMPRESSION[config.compression_type]
    if target is None or len(records) < RECORD_BATCH_OVERHEAD:
        return False  # the producer's codec is kept, or the batch is malformed (validation says so, quickly)
    return records[ATTRIBUTES_OFFSET + 1] & COMPRESSION_CODEC_MASK != target.value


class LogValidator:
    """Validates and assigns offsets for one partition, configured like the topic (``for_config``).

    ``origin`` says who appends: clients may not write control batches and must count their records right; the
    coordinators (transaction markers) and the metadata log's leader may write control batches. Replication never
    comes here: a follower keeps its leader's offsets (Log.append_as_follower). ``target_compression`` None means
    compression.type=producer. ``timestamp_before_max_ms`` /
    ``timestamp_after_max_ms`` None mean unbounded (Kafka's Long.MAX_VALUE default).
    """

    def __init__(self, *, timestamp_type: TimestampType = TimestampType.CREATE_TIME,
                 target_compression: CompressionType | None = None, compression_level: int | None = None,
                 compacted_topic: bool = False, timestamp_before_max_ms: int | None = None,
                 timestamp_after_max_ms: int | None = None, max_message_bytes: int | None = None,
                 origin: AppendOrigin = AppendOrigin.CLIENT, topic_partition: TopicPartition | None = None) -> None:
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
        self.topic_partition = topic_partition  # for record errors' messages
        create_time = timestamp_type == TimestampType.CREATE_TIME
        # Whether a non-control batch's records must be decoded: keys (compaction) or the past bound to check. The
        # future bound needs only the batch header: no record of a batch is newer than its max_timestamp.
        self._records_needed = compacted_topic or (timestamp_before_max_ms is not None and create_time)
        self._future_bound = timestamp_after_max_ms if create_time else None
        # The common produce -- one CreateTime batch whose records need no look -- is checked and stamped in one step
        # (stamp_produced_batch, in C with the accelerator); what it refuses takes the general path.
        self._stamp_in_one_step = create_time and not self._records_needed

    @classmethod
    def for_config(cls, config: LogConfig, origin: AppendOrigin = AppendOrigin.CLIENT,
                   topic_partition: TopicPartition | None = None) -> LogValidator:
        """The validator of a log configured like ``config`` (compression.type and its levels, message.timestamp.*,
        max.message.bytes, cleanup.policy)."""
        target = _TOPIC_COMPRESSION[config.compression_type]
        level = {
            CompressionType.GZIP: config.compression_gzip_level if config.compression_gzip_level != -1 else None,
            CompressionType.LZ4: config.compression_lz4_level,
            CompressionType.ZSTD: config.compression_zstd_level,
        }.get(target) if target is not None else None
        return cls(
            timestamp_type=TimestampType.LOG_APPEND_TIME if config.message_timestamp_type == "LogAppendTime"
            else TimestampType.CREATE_TIME,
            target_compression=target,
            compression_level=level,
            compacted_topic=config.compact,
            timestamp_before_max_ms=None if config.message_timestamp_before_max_ms == INT64_MAX
            else config.message_timestamp_before_max_ms,
            timestamp_after_max_ms=None if config.message_timestamp_after_max_ms == INT64_MAX
            else config.message_timestamp_after_max_ms,
            max_message_bytes=config.max_message_bytes,
            origin=origin,
            topic_partition=topic_partition,
        )

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
        if self._stamp_in_one_step and (self.max_message_bytes is None or len(buffer) <= self.max_message_bytes):
            info = self._stamp_one_batch(buffer, next_offset, now_ms, partition_leader_epoch)
            if info is not None:
                return info
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

    def _stamp_one_batch(self, buffer: bytearray | memoryview, next_offset: int, now_ms: int,
                         partition_leader_epoch: int) -> LogAppendInfo | None:
        """_validate_v2's result for one batch that keeps its codec, is within the future bound and that
        stamp_produced_batch accepts; None otherwise (the buffer untouched), and the general path follows."""
        # Left to the general path before anything is stamped: a batch it re-encodes (leaving the producer's buffer
        # as it came) and one beyond the future bound (it names the records, by the producer's offsets).
        target = self.target_compression
        if len(buffer) < RECORD_BATCH_OVERHEAD or (
                target is not None and buffer[ATTRIBUTES_OFFSET + 1] & COMPRESSION_CODEC_MASK != target.value) or (
                self._future_bound is not None and
                int.from_bytes(buffer[MAX_TIMESTAMP_OFFSET:MAX_TIMESTAMP_OFFSET + 8], "big", signed=True) - now_ms
                > self._future_bound):
            return None
        stamped = stamp_produced_batch(buffer, next_offset, partition_leader_epoch)
        if stamped is None:
            return None
        attributes, last_offset_delta, max_timestamp, producer_id, records_count = stamped
        source_compression = _COMPRESSION_TYPES[attributes & COMPRESSION_CODEC_MASK]
        last_offset = next_offset + last_offset_delta
        if max_timestamp <= NO_TIMESTAMP:
            max_timestamp, offset_of_max_timestamp = NO_TIMESTAMP, -1
        else:
            offset_of_max_timestamp = last_offset
        return LogAppendInfo(next_offset, last_offset, max_timestamp, offset_of_max_timestamp, records_count, buffer,
                             NO_TIMESTAMP, source_compression, source_compression, False, [RecordBatch(buffer)],
                             producer_id > NO_PRODUCER_ID, partition_leader_epoch)

    def _validate_v2(self, buffer: bytearray | memoryview, batches: list[RecordBatch], next_offset: int,
                     now_ms: int, partition_leader_epoch: int) -> LogAppendInfo:
        log_append = self.timestamp_type == TimestampType.LOG_APPEND_TIME
        first_offset = next_offset
        max_timestamp = NO_TIMESTAMP
        offset_of_max_timestamp = -1
        records_count = 0
        has_producer_ids = False
        re_encoded_parts: list[bytes] | None = None
        source_compression = CompressionType.NONE  # set from each batch's attributes below
        for index, batch in enumerate(batches):
            (_, _, _, _, _, attributes, last_offset_delta, _, header_max_timestamp, producer_id, _, base_sequence,
             header_records_count) = batch.validated_header()
            is_control = bool(attributes & CONTROL_FLAG_MASK)
            has_producer_ids = has_producer_ids or producer_id > NO_PRODUCER_ID
            self._validate_batch_header(is_control, header_records_count, last_offset_delta, producer_id,
                                        base_sequence)
            source_compression = _COMPRESSION_TYPES[attributes & COMPRESSION_CODEC_MASK]
            target = self._target_for(source_compression)
            decoded: list[Record] | None = None
            beyond_future_bound = self._future_bound is not None and \
                header_max_timestamp - now_ms > self._future_bound
            if not is_control and (self._records_needed or beyond_future_bound or target != source_compression):
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
        if re_encoded_parts is None:
            validated: bytes | bytearray | memoryview = buffer
        else:  # rebuilt: the views are taken of the new buffer (one more header pass, beside re-compressing)
            validated = b"".join(re_encoded_parts)
            batches = list(iter_batches(validated))  # type: ignore[arg-type]
        return LogAppendInfo(first_offset, next_offset - 1, max_timestamp, offset_of_max_timestamp, records_count,
                             validated, now_ms if log_append else NO_TIMESTAMP, source_compression,
                             self._target_for(source_compression), re_encoded_parts is not None, batches,
                             has_producer_ids, partition_leader_epoch)

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
        """Keys (compacted topic) and CreateTime bounds, every record: the error raised is the first record's, and
        it lists all of them by their index in the batch (Produce v8+ answers them in record_errors)."""
        if is_control:
            return
        check_timestamps = self.timestamp_type == TimestampType.CREATE_TIME
        before = self.timestamp_before_max_ms
        after = self.timestamp_after_max_ms
        first: RecordValidationError | None = None
        record_errors: list[tuple[int, str]] = []
        for index, record in enumerate(records):
            if self.compacted_topic and record.key is None:
                first = first or InvalidRecordsError("Compacted topic cannot accept message without key")
                record_errors.append((index, "Compacted topic cannot accept message without key in topic "
                                             f"partition {self.topic_partition}."))
            elif check_timestamps and record.timestamp != NO_TIMESTAMP:
                if before is not None and now_ms - record.timestamp > before:
                    first = first or InvalidTimestampsError(
                        f"Timestamp {record.timestamp} of message with offset {record.offset} is out of range: "
                        f"more than message.timestamp.before.max.ms={before} before {now_ms}")
                elif after is not None and record.timestamp - now_ms > after:
                    first = first or InvalidTimestampsError(
                        f"Timestamp {record.timestamp} of message with offset {record.offset} is out of range: "
                        f"more than message.timestamp.after.max.ms={after} after {now_ms}")
                else:
                    continue
                record_errors.append((index, f"Timestamp {record.timestamp} of message with offset "
                                             f"{record.offset} is out of range."))
        if first is not None:
            first.record_errors = record_errors
            raise first

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
                             builder.log_append_time, source_compression, target, True, [batch], False,
                             partition_leader_epoch)


def _append_all(builder: MemoryRecordsBuilder, records: list[Record], next_offset: int) -> None:
    """Re-encode ``records`` at consecutive offsets; a timestamp the format cannot hold is an invalid record."""
    for index, record in enumerate(records):
        try:
            builder.append_with_offset(next_offset + index, record.timestamp, record.key, record.value,
                                       record.headers)
        except ValueError as error:
            raise InvalidRecordError(f"Record at offset {record.offset} cannot be re-encoded: {error}") from error
