"""Converting between record formats: down to magic 0/1 for old fetchers, up to magic 2 from old producers.

Down-conversion follows Kafka's RecordsUtil.downConvert: entries already at or below the target magic pass through
unchanged, control batches are dropped (old clients know nothing of transactions), headers are lost, each v2 batch
becomes one wrapper message (compressed like the batch) or one plain message per record, keeping offsets. Records
before ``first_offset`` in an uncompressed batch are dropped, so a fetch from the middle of a batch starts where it
was asked to. A zstd batch cannot be expressed in magic 0/1: UnsupportedCompressionTypeError, which the fetch
handler answers with UNSUPPORTED_COMPRESSION_TYPE as Kafka does.

Up-conversion turns magic 0/1 entries into v2 batches, keeping offsets and codecs: each compressed wrapper becomes
one batch, and each run of plain messages becomes one uncompressed batch.
"""

from __future__ import annotations

from kfk.common.constants import INT32_MAX
from kfk.errors import CorruptRecordError, UnsupportedCompressionTypeError
from kfk.records.batch import RecordBatch, iter_batches
from kfk.records.builder import MemoryRecordsBuilder
from kfk.records.legacy import LegacyRecordBatch, LegacyRecordsBuilder
from kfk.records.record import (
    MAGIC_VALUE_V0,
    MAGIC_VALUE_V2,
    Buffer,
    NO_TIMESTAMP,
    CompressionType,
    Record,
    TimestampType,
)

__all__ = ["down_convert", "up_convert"]



def down_convert(buffer: Buffer, to_magic: int, first_offset: int = 0) -> bytes:
    """Rewrite the entries in ``buffer`` as magic ``to_magic`` (0 or 1) message sets."""
    if to_magic not in (0, 1):
        raise ValueError(f"Down-conversion targets magic 0 or 1, not {to_magic}")
    parts: list[bytes] = []
    for entry in iter_batches(buffer):
        if entry.is_control:
            continue
        if entry.magic <= to_magic:
            parts.append(bytes(entry.as_memoryview()))
            continue
        compression_type = entry.compression_type
        if compression_type == CompressionType.ZSTD:
            raise UnsupportedCompressionTypeError(
                "A zstd-compressed batch cannot be down-converted to magic < 2 for an old fetcher")
        if compression_type == CompressionType.NONE:
            records = [record for record in entry.records() if record.offset >= first_offset]
        else:
            records = list(entry.records())
        if not records:
            continue
        timestamp_type = entry.timestamp_type
        builder = LegacyRecordsBuilder(
            to_magic, compression_type=compression_type,
            timestamp_type=timestamp_type if to_magic > MAGIC_VALUE_V0 else TimestampType.NO_TIMESTAMP_TYPE,
            base_offset=records[0].offset,
            log_append_time=entry.max_timestamp if timestamp_type == TimestampType.LOG_APPEND_TIME else NO_TIMESTAMP)
        _extend(builder, records)
        parts.append(builder.close())
    return b"".join(parts)


def up_convert(buffer: Buffer) -> bytes:
    """Rewrite the magic 0/1 entries in ``buffer`` as v2 batches, keeping offsets; v2 batches pass through."""
    parts: list[bytes] = []
    plain_run: list[tuple[LegacyRecordBatch, Record]] = []

    def flush_plain_run() -> None:
        if plain_run:
            parts.append(_v2_batch(plain_run[0][0], [record for _, record in plain_run], CompressionType.NONE))
            plain_run.clear()

    for entry in iter_batches(buffer):
        if entry.magic == MAGIC_VALUE_V2:
            flush_plain_run()
            parts.append(bytes(entry.as_memoryview()))
        elif entry.is_compressed:
            flush_plain_run()
            parts.append(_v2_batch(entry, list(entry.records()), entry.compression_type))
        else:
            if plain_run and (plain_run[0][0].timestamp_type != entry.timestamp_type
                              or entry.offset - plain_run[0][1].offset > INT32_MAX):
                flush_plain_run()
            plain_run.extend((entry, record) for record in entry.records())
    flush_plain_run()
    return b"".join(parts)


def _v2_batch(first_entry: LegacyRecordBatch | RecordBatch, records: list[Record],
              compression_type: CompressionType) -> bytes:
    log_append = first_entry.timestamp_type == TimestampType.LOG_APPEND_TIME
    builder = MemoryRecordsBuilder(
        compression_type=compression_type,
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
        base_offset=records[0].offset,
        log_append_time=max(record.timestamp for record in records) if log_append else NO_TIMESTAMP)
    _extend(builder, records)
    return builder.close()


def _extend(builder: MemoryRecordsBuilder | LegacyRecordsBuilder, records: list[Record]) -> None:
    """Offsets that go backwards or timestamps below -1 cannot be re-encoded: the source is corrupt."""
    try:
        builder.extend(records)
    except ValueError as error:
        raise CorruptRecordError(f"Cannot convert records: {error}") from error
