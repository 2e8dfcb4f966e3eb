"""kafka-python's record implementation (kafka.record) as an independent oracle, in both directions."""

from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kfk.records import (
    CompressionType,
    LegacyRecordBatch,
    LegacyRecordsBuilder,
    MemoryRecordsBuilder,
    RecordBatch,
    iter_batches,
)

LARGE = bytes(range(256)) * 2_000  # 512 KB, several compression blocks
RECORDS = [
    # timestamp, key, value, headers
    (1_700_000_000_000, b"key-0", b"value-0", [("trace", b"abc"), ("empty", b""), ("null", None)]),
    (1_700_000_000_005, None, b"value with a null key", []),
    (1_699_999_999_000, b"tombstone", None, [("why", b"deleted")]),  # earlier than the first: negative delta
    (1_700_000_000_010, b"", b"", [("\u00fcnicode-\u20ac", b"\xff\x00")]),
    (1_700_000_000_020, b"large", LARGE, []),
]
V2_CODECS = list(CompressionType)
LEGACY_CODECS = [CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4]


def kafka_python_v2_batch(codec: CompressionType, producer_id: int = -1, base_sequence: int = -1) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=int(codec), is_transactional=False,
                                        producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                        base_sequence=base_sequence, batch_size=1 << 30)
    for index, (timestamp, key, value, headers) in enumerate(RECORDS):
        builder.append(index, timestamp, key, value, headers)
    return bytes(builder.build())


def kafka_python_legacy_set(magic: int, codec: CompressionType) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=int(codec), batch_size=1 << 30)
    for index, (timestamp, key, value, _) in enumerate(RECORDS):
        builder.append(index, timestamp, key, value)
    return bytes(builder.build())


@pytest.mark.parametrize("codec", V2_CODECS, ids=lambda codec: codec.name)
def test_kfk_decodes_kafka_python_v2_batches(codec: CompressionType) -> None:
    data = kafka_python_v2_batch(codec, producer_id=77, base_sequence=5)
    [batch] = list(iter_batches(data))
    assert isinstance(batch, RecordBatch)
    batch.validate()
    assert batch.compression_type == codec
    assert (batch.producer_id, batch.base_sequence, batch.last_sequence) == (77, 5, 5 + len(RECORDS) - 1)
    assert batch.max_timestamp == max(timestamp for timestamp, *_ in RECORDS)
    decoded = [(record.offset, record.timestamp, record.key, record.value, record.headers) for record in batch]
    assert decoded == [(index, *record) for index, record in enumerate(RECORDS)]


@pytest.mark.parametrize("codec", V2_CODECS, ids=lambda codec: codec.name)
def test_kafka_python_decodes_kfk_v2_batches(codec: CompressionType) -> None:
    builder = MemoryRecordsBuilder(compression_type=codec, base_offset=1_000, producer_id=9, producer_epoch=2,
                                   base_sequence=40)
    for timestamp, key, value, headers in RECORDS:
        builder.append(timestamp, key, value, headers)
    batch = MemoryRecords(builder.close()).next_batch()
    assert batch.validate_crc()
    assert (batch.base_offset, batch.compression_type, batch.producer_id, batch.base_sequence) == (1_000, codec, 9, 40)
    decoded = [(record.offset, record.timestamp, record.key, record.value, record.headers) for record in batch]
    assert decoded == [(1_000 + index, *record) for index, record in enumerate(RECORDS)]


def test_uncompressed_v2_bytes_match_kafka_python_exactly() -> None:
    builder = MemoryRecordsBuilder(partition_leader_epoch=0)  # kafka-python writes 0 here; Java's producer -1
    for timestamp, key, value, headers in RECORDS:
        builder.append(timestamp, key, value, headers)
    assert builder.close() == kafka_python_v2_batch(CompressionType.NONE)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda codec: codec.name)
def test_kfk_decodes_kafka_python_legacy_message_sets(magic: int, codec: CompressionType) -> None:
    entries = list(iter_batches(kafka_python_legacy_set(magic, codec)))
    assert all(isinstance(entry, LegacyRecordBatch) and entry.magic == magic for entry in entries)
    assert len(entries) == (len(RECORDS) if codec == CompressionType.NONE else 1)
    for entry in entries:
        entry.validate()
    decoded = [(record.offset, record.timestamp, record.key, record.value)
               for entry in entries for record in entry]
    # A producer's magic 1 wrapper says offset 0 (the broker assigns the real one) over relative inner offsets
    # 0..4, so the inner offsets resolve to 0-4..0, as Kafka's deep iterator would make them.
    first = -(len(RECORDS) - 1) if magic == 1 and codec != CompressionType.NONE else 0
    expected_timestamp = (lambda timestamp: timestamp) if magic == 1 else (lambda timestamp: -1)
    assert decoded == [(first + index, expected_timestamp(timestamp), key, value)
                       for index, (timestamp, key, value, _) in enumerate(RECORDS)]
    if codec != CompressionType.NONE:
        # last_offset is the wrapper's own offset, 0 as kafka-python wrote it
        assert (entries[0].base_offset, entries[0].last_offset, entries[0].records_count) == (first, 0, 5)


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda codec: codec.name)
def test_kafka_python_decodes_kfk_legacy_message_sets(magic: int, codec: CompressionType) -> None:
    builder = LegacyRecordsBuilder(magic, compression_type=codec, base_offset=500)
    for timestamp, key, value, _ in RECORDS:
        builder.append(timestamp, key, value)
    records = MemoryRecords(builder.close())
    decoded = []
    while (batch := records.next_batch()) is not None:
        assert batch.validate_crc()
        decoded.extend((record.offset, record.timestamp, record.key, record.value) for record in batch)
    assert decoded == [(500 + index, timestamp if magic == 1 else None, key, value)
                       for index, (timestamp, key, value, _) in enumerate(RECORDS)]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", LEGACY_CODECS, ids=lambda codec: codec.name)
def test_uncompressed_and_wrapper_headers_match_kafka_python(magic: int, codec: CompressionType) -> None:
    """Uncompressed sets are byte-identical; compressed wrappers differ only inside the compressed value."""
    ours = LegacyRecordsBuilder(magic, compression_type=codec)
    for timestamp, key, value, _ in RECORDS:
        ours.append(timestamp, key, value)
    ours_bytes, theirs_bytes = ours.close(), kafka_python_legacy_set(magic, codec)
    if codec == CompressionType.NONE:
        assert ours_bytes == theirs_bytes
    else:
        ours_entry, theirs_entry = next(iter_batches(ours_bytes)), next(iter_batches(theirs_bytes))
        assert ours_bytes[16:18] == theirs_bytes[16:18]  # magic, attributes (the codec)
        # kafka-python's producer leaves the wrapper's offset and timestamp at 0 for the broker to fill in; Kafka's
        # builder writes the last inner offset and (magic 1) the max timestamp, and so do we.
        assert ours_entry.last_offset == len(RECORDS) - 1
        assert ours_entry.timestamp == (max(timestamp for timestamp, *_ in RECORDS) if magic == 1 else -1)
        assert [record[1:] for record in ours_entry] == [record[1:] for record in theirs_entry]
