"""Magic 0/1 specifics (relative offsets, wrapper timestamps, nesting) and v0/v1 <-> v2 conversion."""

from __future__ import annotations

import struct
import zlib

import pytest

from kfk.errors import CorruptRecordError, UnsupportedCompressionTypeError
from kfk.records import (
    CompressionType,
    ControlRecordType,
    EndTransactionMarker,
    LegacyRecordBatch,
    LegacyRecordsBuilder,
    MemoryRecordsBuilder,
    RecordBatch,
    TimestampType,
    build_end_transaction_marker_batch,
    down_convert,
    iter_batches,
    up_convert,
)
from kfk.records.legacy import encode_legacy_message


def test_v0_message_layout_from_the_spec() -> None:
    body = bytes([0, 0]) + struct.pack(">i", 1) + b"k" + struct.pack(">i", 2) + b"vv"  # magic, attributes, key, value
    expected = struct.pack(">qiI", 42, 4 + len(body), zlib.crc32(body)) + body
    builder = LegacyRecordsBuilder(0, base_offset=42)
    builder.append(123, b"k", b"vv")  # magic 0 has no timestamp: dropped
    assert builder.close() == expected
    [entry] = list(iter_batches(expected))
    entry.validate()
    assert (entry.magic, entry.offset, entry.timestamp, entry.timestamp_type) == (
        0, 42, -1, TimestampType.NO_TIMESTAMP_TYPE)


def test_v1_message_layout_from_the_spec() -> None:
    body = bytes([1, 0x08]) + struct.pack(">q", 777) + b"\xff\xff\xff\xff" + struct.pack(">i", 1) + b"v"
    expected = struct.pack(">qiI", 3, 4 + len(body), zlib.crc32(body)) + body
    builder = LegacyRecordsBuilder(1, base_offset=3, timestamp_type=TimestampType.LOG_APPEND_TIME,
                                   log_append_time=777)
    builder.append(5, None, b"v")
    assert builder.close() == expected
    [record] = list(LegacyRecordBatch(expected))
    assert (record.offset, record.timestamp, record.key, record.value) == (3, 777, None, b"v")


def test_v1_wrapper_resolves_relative_inner_offsets_and_takes_max_timestamp() -> None:
    builder = LegacyRecordsBuilder(1, compression_type=CompressionType.GZIP, base_offset=100)
    for offset, timestamp in [(100, 50), (101, 70), (105, 60)]:
        builder.append_with_offset(offset, timestamp, b"k", b"v%d" % offset)
    [wrapper] = list(iter_batches(builder.close()))
    wrapper.validate()
    assert (wrapper.last_offset, wrapper.base_offset, wrapper.records_count) == (105, 100, 3)
    assert wrapper.max_timestamp == 70 and wrapper.timestamp_type == TimestampType.CREATE_TIME
    assert [(record.offset, record.timestamp) for record in wrapper] == [(100, 50), (101, 70), (105, 60)]


def test_v1_log_append_time_wrapper_imposes_its_timestamp() -> None:
    inner = b"".join(encode_legacy_message(1, index, 10 + index, None, b"x", 0) for index in range(3))
    value = zlib.compressobj(6, zlib.DEFLATED, 31)
    compressed = value.compress(inner) + value.flush()
    wrapper = encode_legacy_message(1, 9, 999, None, compressed, CompressionType.GZIP | 0x08)
    assert [(record.offset, record.timestamp) for record in LegacyRecordBatch(wrapper)] == [
        (7, 999), (8, 999), (9, 999)]


def test_nested_compression_is_corrupt() -> None:
    inner = LegacyRecordsBuilder(1, compression_type=CompressionType.GZIP)
    inner.append(1, None, b"x")
    outer = encode_legacy_message(1, 0, 1, None, _gzip(inner.close()), CompressionType.GZIP)
    with pytest.raises(CorruptRecordError, match="cannot contain compressed"):
        list(LegacyRecordBatch(outer))


def test_inner_message_with_bad_crc_is_corrupt() -> None:
    inner = bytearray(encode_legacy_message(1, 0, 1, None, b"payload", 0))
    inner[-1] ^= 0xFF
    outer = encode_legacy_message(1, 0, 1, None, _gzip(bytes(inner)), CompressionType.GZIP)
    with pytest.raises(CorruptRecordError, match="crc"):
        list(LegacyRecordBatch(outer))


def test_legacy_validate_catches_crc_codec_and_length_faults() -> None:
    good = encode_legacy_message(1, 0, 1, b"k", b"v", 0)
    flipped = bytearray(good)
    flipped[-1] ^= 1
    assert not LegacyRecordBatch(flipped).is_valid()
    zstd_attribute = _recrc(bytearray(good), 17, CompressionType.ZSTD)
    with pytest.raises(CorruptRecordError, match="not valid for magic"):
        LegacyRecordBatch(zstd_attribute).validate()
    long_key = _recrc(bytearray(good), 26, 0, fmt=">i", value=1_000)
    with pytest.raises(CorruptRecordError, match="key length"):
        LegacyRecordBatch(long_key).validate()


def test_legacy_builder_refuses_zstd() -> None:
    with pytest.raises(UnsupportedCompressionTypeError):
        LegacyRecordsBuilder(1, compression_type=CompressionType.ZSTD)


def _gzip(data: bytes) -> bytes:
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)
    return compressor.compress(data) + compressor.flush()


def _recrc(data: bytearray, offset: int, byte: int, fmt: str = ">b", value: int | None = None) -> bytearray:
    struct.pack_into(fmt, data, offset, byte if value is None else value)
    struct.pack_into(">I", data, 12, zlib.crc32(memoryview(data)[16:]))
    return data


# --- conversion ---------------------------------------------------------------------------------------------------

def _v2(codec: CompressionType, base_offset: int, count: int, **kwargs) -> bytes:
    builder = MemoryRecordsBuilder(compression_type=codec, base_offset=base_offset, **kwargs)
    for index in range(count):
        builder.append(1_000 + index, b"k%d" % index, b"v%d" % index, [("dropped", b"header")])
    return builder.close()


@pytest.mark.parametrize("to_magic", [0, 1])
def test_down_convert_keeps_offsets_and_codec_drops_headers_and_control_batches(to_magic: int) -> None:
    marker = build_end_transaction_marker_batch(base_offset=6, timestamp=5, partition_leader_epoch=0,
                                                producer_id=1, producer_epoch=0,
                                                marker=EndTransactionMarker(ControlRecordType.COMMIT, 0))
    data = _v2(CompressionType.LZ4, 0, 3) + _v2(CompressionType.NONE, 3, 3) + marker
    entries = list(iter_batches(down_convert(data, to_magic, first_offset=4)))
    assert {entry.magic for entry in entries} == {to_magic}
    assert entries[0].compression_type == CompressionType.LZ4 and entries[0].last_offset == 2
    records = [record for entry in entries for record in entry]
    # compressed batches are kept whole; uncompressed records before first_offset are dropped
    assert [record.offset for record in records] == [0, 1, 2, 4, 5]
    assert {tuple(record.headers) for record in records} == {()}
    expected_timestamps = [1_000, 1_001, 1_002, 1_001, 1_002] if to_magic == 1 else [-1] * 5
    assert [record.timestamp for record in records] == expected_timestamps


def test_down_convert_log_append_time_batch() -> None:
    data = _v2(CompressionType.GZIP, 10, 2, timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=5_555)
    [wrapper] = list(iter_batches(down_convert(data, 1)))
    assert wrapper.timestamp_type == TimestampType.LOG_APPEND_TIME and wrapper.timestamp == 5_555
    assert [record.timestamp for record in wrapper] == [5_555, 5_555]


def test_down_convert_refuses_zstd_for_old_fetchers() -> None:
    with pytest.raises(UnsupportedCompressionTypeError):
        down_convert(_v2(CompressionType.ZSTD, 0, 1), 1)


def test_down_convert_passes_legacy_entries_through() -> None:
    legacy = LegacyRecordsBuilder(0)
    legacy.append(0, b"k", b"v")
    assert down_convert(legacy.close(), 1) == legacy.close()


def test_up_convert_groups_plain_messages_and_keeps_wrappers_as_batches() -> None:
    plain = LegacyRecordsBuilder(1, base_offset=0)
    for index in range(3):
        plain.append(100 + index, b"k", b"p%d" % index)
    wrapped = LegacyRecordsBuilder(1, compression_type=CompressionType.SNAPPY, base_offset=3)
    for index in range(2):
        wrapped.append(200 + index, None, b"w%d" % index)
    batches = list(iter_batches(up_convert(plain.close() + wrapped.close() + _v2(CompressionType.NONE, 5, 1))))
    assert all(isinstance(batch, RecordBatch) for batch in batches)
    assert [(batch.base_offset, batch.last_offset, batch.compression_type) for batch in batches] == [
        (0, 2, CompressionType.NONE), (3, 4, CompressionType.SNAPPY), (5, 5, CompressionType.NONE)]
    records = [record for batch in batches for record in batch]
    assert [(record.offset, record.timestamp, record.value) for record in records] == [
        (0, 100, b"p0"), (1, 101, b"p1"), (2, 102, b"p2"), (3, 200, b"w0"), (4, 201, b"w1"), (5, 1_000, b"v0")]
