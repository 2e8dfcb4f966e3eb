"""Record batch v2: byte layout, header view, validation, in-place header edits and walking entries."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from kfk.errors import CorruptRecordError
from kfk.records import (
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    CompressionType,
    LegacyRecordBatch,
    LegacyRecordsBuilder,
    MemoryRecordsBuilder,
    RecordBatch,
    TimestampType,
    build_empty_batch,
    complete_entries_length,
    iter_batches,
    set_base_offset,
    set_last_offset,
    set_log_append_time,
    set_max_timestamp,
    set_partition_leader_epoch,
)


def hand_built_batch() -> bytes:
    """One record (key b"k", value b"v", header ("h", b"x")) at offset 7, built field by field from the spec."""
    record_body = bytes([
        0x00,        # attributes
        0x00,        # timestampDelta 0
        0x00,        # offsetDelta 0
        0x02, *b"k",  # key length 1 (zig-zag 2), key
        0x02, *b"v",  # value length 1, value
        0x02,        # 1 header
        0x02, *b"h",  # header key length 1, key
        0x02, *b"x",  # header value length 1, value
    ])
    record = bytes([len(record_body) * 2]) + record_body  # zig-zag length
    after_crc = struct.pack(">hiqqqhii", 0, 0, 1_000, 1_000, 4_242, 3, 17, 1) + record
    #                       attributes, lastOffsetDelta, baseTimestamp, maxTimestamp, producerId, epoch, seq, count
    crc = crc32c(after_crc)
    batch_length = 4 + 1 + 4 + len(after_crc)  # partitionLeaderEpoch, magic, crc, rest
    return struct.pack(">qiibI", 7, batch_length, 5, 2, crc) + after_crc


def build(count: int = 3, **kwargs) -> bytes:
    builder = MemoryRecordsBuilder(**kwargs)
    for index in range(count):
        builder.append(1_000 + index, b"key-%d" % index, b"value-%d" % index, [("h", b"%d" % index)])
    return builder.close()


def test_header_fields_are_read_from_the_spec_layout() -> None:
    batch = RecordBatch(hand_built_batch())
    assert RECORD_BATCH_OVERHEAD == 61 and LOG_OVERHEAD == 12 and MAGIC_OFFSET == 16
    assert (batch.base_offset, batch.partition_leader_epoch, batch.magic) == (7, 5, 2)
    assert batch.size_in_bytes == len(hand_built_batch())
    assert (batch.base_timestamp, batch.max_timestamp) == (1_000, 1_000)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.last_sequence) == (4_242, 3, 17, 17)
    assert (batch.records_count, batch.last_offset, batch.next_offset) == (1, 7, 8)
    assert batch.compression_type == CompressionType.NONE and batch.timestamp_type == TimestampType.CREATE_TIME
    assert not (batch.is_transactional or batch.is_control or batch.has_delete_horizon)
    batch.validate()
    [record] = batch
    assert (record.offset, record.timestamp, record.key, record.value, record.headers) == (
        7, 1_000, b"k", b"v", [("h", b"x")])


def test_builder_writes_the_hand_built_bytes_exactly() -> None:
    builder = MemoryRecordsBuilder(base_offset=7, partition_leader_epoch=5, producer_id=4_242, producer_epoch=3,
                                   base_sequence=17)
    builder.append(1_000, b"k", b"v", [("h", b"x")])
    assert builder.close() == hand_built_batch()


@pytest.mark.parametrize(("flags", "expected"), [
    (dict(compression_type=CompressionType.LZ4), 0x03),
    (dict(timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=5), 0x08),
    (dict(is_transactional=True, producer_id=1, producer_epoch=0, base_sequence=0), 0x10),
    (dict(is_control_batch=True), 0x20),
    (dict(delete_horizon_ms=99), 0x40),
])
def test_attribute_bits(flags: dict, expected: int) -> None:
    batch = RecordBatch(build(1, **flags))
    assert batch.attributes == expected
    batch.validate()


def test_delete_horizon_is_the_base_timestamp() -> None:
    batch = RecordBatch(build(2, delete_horizon_ms=5_000))
    assert batch.has_delete_horizon and batch.delete_horizon_ms == 5_000 == batch.base_timestamp
    assert [record.timestamp for record in batch] == [1_000, 1_001]


def test_log_append_time_overrides_record_timestamps() -> None:
    batch = RecordBatch(build(3, timestamp_type=TimestampType.LOG_APPEND_TIME, log_append_time=9_999))
    assert batch.max_timestamp == 9_999
    assert [record.timestamp for record in batch] == [9_999] * 3


def test_last_sequence_wraps_past_int32_max() -> None:
    batch = RecordBatch(build(3, producer_id=1, producer_epoch=0, base_sequence=2**31 - 2))
    assert batch.last_sequence == 0
    assert RecordBatch(build(3)).last_sequence == NO_SEQUENCE


def test_view_over_memoryview_and_offset_position_copies_nothing() -> None:
    data = b"\x00" * 10 + build(2)
    batch = RecordBatch(memoryview(data), 10)
    assert batch.position == 10 and batch.records_count == 2
    assert batch.as_memoryview().obj is data
    batch.validate()


def test_validate_rejects_a_flipped_crc_byte() -> None:
    data = bytearray(build())
    data[-1] ^= 0x01
    batch = RecordBatch(data)
    with pytest.raises(CorruptRecordError, match="crc"):
        batch.validate()
    assert not batch.is_valid()


@pytest.mark.parametrize("field_offset, value, fmt, message", [
    (8, 10, ">i", "batchLength"),                # below the 49-byte minimum
    (8, 10_000, ">i", "truncated"),              # longer than the buffer
    (16, 1, ">b", "magic"),
])
def test_validate_rejects_bad_framing(field_offset: int, value: int, fmt: str, message: str) -> None:
    data = bytearray(build())
    struct.pack_into(fmt, data, field_offset, value)
    with pytest.raises(CorruptRecordError, match=message):
        RecordBatch(data).validate()


def _with_field(data: bytes, field_offset: int, fmt: str, value: int) -> bytearray:
    """Overwrite a CRC-covered field and fix the CRC, so only the field's meaning is wrong."""
    edited = bytearray(data)
    struct.pack_into(fmt, edited, field_offset, value)
    struct.pack_into(">I", edited, 17, crc32c(memoryview(edited)[21:]))
    return edited


@pytest.mark.parametrize("field_offset, fmt, value", [
    (57, ">i", 4),           # more records than the offset range 0..2 allows
    (57, ">i", -1),          # negative count
    (23, ">i", -1),          # negative lastOffsetDelta
    (43, ">q", -7),          # producer id below the -1 sentinel
    (53, ">i", -2),          # base sequence below the -1 sentinel
    (21, ">h", 0x0007),      # codec id 7
])
def test_validate_rejects_impossible_header_values(field_offset: int, fmt: str, value: int) -> None:
    with pytest.raises(CorruptRecordError):
        RecordBatch(_with_field(build(), field_offset, fmt, value)).validate()


def test_uncompressed_record_count_must_fit_the_payload() -> None:
    data = _with_field(build(3), 23, ">i", 1_000_000)   # a wide offset range...
    data = _with_field(data, 57, ">i", 1_000_000)       # ...and a count the payload cannot hold
    with pytest.raises(CorruptRecordError, match="declares"):
        RecordBatch(data).validate()


def test_record_count_disagreeing_with_payload_fails_iteration() -> None:
    fewer = _with_field(build(3), 57, ">i", 2)
    with pytest.raises(CorruptRecordError, match="left after"):
        list(RecordBatch(fewer))
    more = _with_field(build(3, compression_type=CompressionType.GZIP), 57, ">i", 3)
    more = _with_field(more, 23, ">i", 5)
    more = _with_field(more, 57, ">i", 5)
    with pytest.raises(CorruptRecordError):
        list(RecordBatch(more))


def test_compacted_batch_may_hold_fewer_records_than_its_offset_range() -> None:
    builder = MemoryRecordsBuilder(base_offset=100)
    builder.append_with_offset(100, 1, b"a", b"1")
    builder.append_with_offset(105, 2, b"b", b"2")
    batch = RecordBatch(builder.close())
    batch.validate()
    assert (batch.records_count, batch.last_offset_delta, batch.last_offset) == (2, 5, 105)
    assert [record.offset for record in batch] == [100, 105]


def test_empty_batch_keeps_producer_state_and_offset_range() -> None:
    batch = RecordBatch(build_empty_batch(base_offset=10, last_offset=14, producer_id=3, producer_epoch=1,
                                          base_sequence=20, timestamp=77))
    batch.validate()
    assert (batch.records_count, batch.base_offset, batch.last_offset, batch.last_sequence) == (0, 10, 14, 24)
    assert list(batch) == []


def test_builder_with_nothing_appended_builds_nothing() -> None:
    assert MemoryRecordsBuilder().close() == b""


def test_builder_rejects_offsets_that_do_not_increase() -> None:
    builder = MemoryRecordsBuilder(base_offset=5)
    builder.append_with_offset(6, 0, None, b"x")
    with pytest.raises(ValueError, match="monotonically"):
        builder.append_with_offset(6, 0, None, b"y")
    with pytest.raises(ValueError):
        MemoryRecordsBuilder(base_offset=5).append_with_offset(4, 0, None, b"x")


def test_has_room_for_respects_the_write_limit_after_the_first_record() -> None:
    builder = MemoryRecordsBuilder(write_limit=200)
    assert builder.has_room_for(0, None, b"x" * 1_000)  # the first record always fits
    builder.append(0, None, b"x" * 100)
    assert builder.has_room_for(0, None, b"x" * 10)
    assert not builder.has_room_for(0, None, b"x" * 100)


# --- in-place header edits ----------------------------------------------------------------------------------------

def test_base_offset_and_leader_epoch_edits_keep_the_crc_valid() -> None:
    data = bytearray(b"\xaa" * 5 + build(3))
    crc_before = RecordBatch(data, 5).crc
    set_base_offset(data, 5, 1_000)
    set_partition_leader_epoch(data, 5, 42)
    batch = RecordBatch(data, 5)
    assert (batch.base_offset, batch.last_offset, batch.partition_leader_epoch, batch.crc) == (1_000, 1_002, 42,
                                                                                               crc_before)
    batch.validate()
    assert [record.offset for record in batch] == [1_000, 1_001, 1_002]
    assert data[:5] == b"\xaa" * 5


def test_set_last_offset_moves_the_base_offset() -> None:
    data = bytearray(build(3))
    set_last_offset(data, 0, 50)
    assert (RecordBatch(data).base_offset, RecordBatch(data).last_offset) == (48, 50)


def test_set_log_append_time_rewrites_crc_and_timestamps() -> None:
    data = bytearray(build(3))
    set_log_append_time(data, 0, 123_456)
    batch = RecordBatch(data)
    batch.validate()
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME and batch.max_timestamp == 123_456
    assert [record.timestamp for record in batch] == [123_456] * 3
    set_max_timestamp(data, 0, TimestampType.CREATE_TIME, 1_002)
    batch.validate()
    assert bytes(data) == build(3)


def test_header_edits_refuse_a_non_v2_entry() -> None:
    legacy = LegacyRecordsBuilder(1)
    legacy.append(0, None, b"x" * 60)
    with pytest.raises(CorruptRecordError):
        set_base_offset(bytearray(legacy.close()), 0, 3)


# --- walking entries ----------------------------------------------------------------------------------------------

def test_iter_batches_walks_mixed_formats_and_stops_at_a_torn_tail() -> None:
    legacy = LegacyRecordsBuilder(1, base_offset=3)
    legacy.append(5, b"k", b"v")
    entries_bytes = build(3) + legacy.close() + build(2, base_offset=4)
    torn = entries_bytes + build(2, base_offset=6)[:-7]
    entries = list(iter_batches(torn))
    assert [type(entry) for entry in entries] == [RecordBatch, LegacyRecordBatch, RecordBatch]
    assert [entry.base_offset for entry in entries] == [0, 3, 4]
    assert entries[1].position == len(build(3))
    assert complete_entries_length(torn) == len(entries_bytes)
    assert complete_entries_length(torn, entries[1].position) == len(entries_bytes) - entries[1].position
    for cut in range(LOG_OVERHEAD):  # a tail too short even for offset + size
        assert len(list(iter_batches(entries_bytes + b"\x00" * cut))) == 3


@pytest.mark.parametrize("size, magic, message", [
    (-1, 2, "minimum record overhead"),
    (13, 2, "minimum record overhead"),
    (40, 2, "batchLength"),
    (20, 1, "minimum 22"),
    (60, 3, "unknown magic"),
])
def test_iter_batches_raises_on_impossible_length_or_magic(size: int, magic: int, message: str) -> None:
    entry = bytearray(struct.pack(">qi", 0, size) + b"\x00" * 80)
    entry[MAGIC_OFFSET] = magic
    with pytest.raises(CorruptRecordError, match=message):
        list(iter_batches(bytes(entry)))


def test_record_batch_view_refuses_a_buffer_shorter_than_the_header() -> None:
    with pytest.raises(CorruptRecordError, match="truncated"):
        RecordBatch(build(1)[:60])


def test_sentinels() -> None:
    batch = RecordBatch(build(1))
    assert (batch.producer_id, batch.base_sequence, batch.partition_leader_epoch) == (
        NO_PRODUCER_ID, NO_SEQUENCE, NO_PARTITION_LEADER_EPOCH)
    assert NO_TIMESTAMP == -1


def test_views_read_a_memory_mapped_log_file(tmp_path) -> None:
    import mmap

    entries = build(3) + build(2, base_offset=3, compression_type=CompressionType.ZSTD)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(entries + build(1, base_offset=5)[:20])  # a torn tail, as after a crash
    with path.open("rb") as log_file, mmap.mmap(log_file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        batches = list(iter_batches(mapped))
        for batch in batches:
            batch.validate()
        assert [record.offset for batch in batches for record in batch] == [0, 1, 2, 3, 4]
        assert complete_entries_length(mapped) == len(entries)
        del batches


def test_closed_builder_hands_over_a_writable_batch() -> None:
    builder = MemoryRecordsBuilder()
    builder.append(1, None, b"x")
    data = builder.close()
    assert isinstance(data, bytearray) and builder.close() is data
    set_base_offset(data, 0, 9)
    assert RecordBatch(data).base_offset == 9
    with pytest.raises(ValueError, match="closed"):
        builder.append(2, None, b"y")


# --- append_values: the producer's batched path -------------------------------------------------------------------

@pytest.mark.parametrize("write_limit", [None, 16384, 100])
def test_append_values_builds_the_bytes_append_builds(write_limit: int | None) -> None:
    """Same batch, byte for byte, as one append() per record while has_room_for() says yes; keys, null values,
    large varints (a 20,000-byte value, offset deltas past 63) included."""
    values = [bytes([n % 251]) * 100 for n in range(300)] + [b"", b"12345", b"z" * 20_000, None, b"last"]
    keys: list[bytes | None] = [None] * len(values)
    keys[3], keys[-1] = b"key", b"k2"
    one_by_one = MemoryRecordsBuilder(write_limit=write_limit)
    appended = 0
    while appended < len(values) and (appended == 0 or one_by_one.has_room_for(1000, keys[appended],
                                                                                 values[appended])):
        one_by_one.append(1000, keys[appended], values[appended])
        appended += 1
    batched = MemoryRecordsBuilder(write_limit=write_limit)
    assert batched.append_values(1000, values, 0, keys) == appended
    assert batched.num_records == appended
    assert batched.close() == one_by_one.close()


def test_append_values_continues_a_batch_at_its_next_offset_and_timestamp_delta() -> None:
    builder = MemoryRecordsBuilder(write_limit=1 << 20)
    builder.append(5000, b"k", b"first")
    assert builder.append_values(5007, [b"a", b"b"], 0) == 2
    assert builder.append_values(5003, [b"skip", b"c"], 1) == 1
    records = list(RecordBatch(bytes(builder.close())))
    assert [(r.offset, r.timestamp, r.key, r.value) for r in records] == [
        (0, 5000, b"k", b"first"), (1, 5007, None, b"a"), (2, 5007, None, b"b"), (3, 5003, None, b"c")]


def test_records_with_labels_are_made_in_the_consumer_shape() -> None:
    builder = MemoryRecordsBuilder(base_offset=40)
    builder.append(1000, b"k", b"v", [("h", b"1")])
    builder.append(1002, None, None)
    batch = RecordBatch(bytes(builder.close()))
    made = list(batch.records(labels=("topic", 3, 0, 7), record_type=tuple))
    assert made == [("topic", 3, 40, 1000, 0, b"k", b"v", [("h", b"1")], 7),
                    ("topic", 3, 41, 1002, 0, None, None, [], 7)]
