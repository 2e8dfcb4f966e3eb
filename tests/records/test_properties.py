"""Hypothesis round trips: v2, v0 and v1, every codec, and the conversions between them."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kfk.records import (
    CompressionType,
    LegacyRecordsBuilder,
    MemoryRecordsBuilder,
    RecordBatch,
    TimestampType,
    down_convert,
    iter_batches,
    up_convert,
)
from kfk.records._varint import encode_varlong, read_varint, read_varlong
from kfk.storage.log_validator import LogValidator

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

payloads = st.one_of(st.none(), st.binary(max_size=300))
timestamps = st.integers(min_value=0, max_value=2**50)
header_keys = st.text(max_size=12)
headers = st.lists(st.tuples(header_keys, payloads), max_size=3)
v2_records = st.lists(st.tuples(timestamps, payloads, payloads, headers), min_size=1, max_size=20)
legacy_records = st.lists(st.tuples(timestamps, payloads, payloads), min_size=1, max_size=20)
v2_codecs = st.sampled_from(list(CompressionType))
legacy_codecs = st.sampled_from([CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY,
                                 CompressionType.LZ4])
offset_gaps = st.lists(st.integers(min_value=1, max_value=1_000), min_size=20, max_size=20)


@SETTINGS
@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_varlong_round_trip(value: int) -> None:
    encoded = encode_varlong(value)
    assert read_varlong(encoded, 0) == (value, len(encoded))
    if -(2**31) <= value < 2**31:
        assert read_varint(encoded, 0) == (value, len(encoded))


@SETTINGS
@given(v2_records, v2_codecs, st.integers(min_value=0, max_value=2**40), offset_gaps,
       st.sampled_from([-1, 0, 2**40]), st.booleans())
def test_v2_round_trip(records: list, codec: CompressionType, base_offset: int, gaps: list[int], producer_id: int,
                       log_append: bool) -> None:
    builder = MemoryRecordsBuilder(
        compression_type=codec, base_offset=base_offset, producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1, base_sequence=2**31 - 5 if producer_id >= 0 else -1,
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
        log_append_time=1_234 if log_append else -1)
    offsets = [base_offset] + [base_offset + sum(gaps[1:index + 1]) for index in range(1, len(records))]
    for offset, (timestamp, key, value, record_headers) in zip(offsets, records):
        builder.append_with_offset(offset, timestamp, key, value, record_headers)
    [batch] = list(iter_batches(builder.close()))
    batch.validate()
    assert (batch.base_offset, batch.last_offset, batch.records_count) == (base_offset, offsets[-1], len(records))
    assert batch.max_timestamp == (1_234 if log_append else max(record[0] for record in records))
    decoded = list(batch)
    assert [record.offset for record in decoded] == offsets
    assert [(record.key, record.value, record.headers) for record in decoded] == [
        (key, value, record_headers) for _, key, value, record_headers in records]
    assert [record.timestamp for record in decoded] == (
        [1_234] * len(records) if log_append else [record[0] for record in records])


@SETTINGS
@given(legacy_records, legacy_codecs, st.sampled_from([0, 1]), st.integers(min_value=0, max_value=2**40))
def test_legacy_round_trip(records: list, codec: CompressionType, magic: int, base_offset: int) -> None:
    builder = LegacyRecordsBuilder(magic, compression_type=codec, base_offset=base_offset)
    for timestamp, key, value in records:
        builder.append(timestamp, key, value)
    entries = list(iter_batches(builder.close()))
    for entry in entries:
        entry.validate()
    decoded = [record for entry in entries for record in entry]
    assert [(record.offset, record.timestamp, record.key, record.value) for record in decoded] == [
        (base_offset + index, timestamp if magic == 1 else -1, key, value)
        for index, (timestamp, key, value) in enumerate(records)]
    assert entries[-1].last_offset == base_offset + len(records) - 1
    assert entries[0].base_offset == base_offset


@SETTINGS
@given(v2_records, legacy_codecs, st.sampled_from([0, 1]))
def test_down_then_up_conversion_keeps_offsets_keys_values(records: list, codec: CompressionType,
                                                           magic: int) -> None:
    builder = MemoryRecordsBuilder(compression_type=codec, base_offset=1_000)
    for timestamp, key, value, record_headers in records:
        builder.append(timestamp, key, value, record_headers)
    legacy = down_convert(builder.close(), magic)
    assert {entry.magic for entry in iter_batches(legacy)} == {magic}
    restored = list(iter_batches(up_convert(legacy)))
    assert all(isinstance(batch, RecordBatch) for batch in restored)
    decoded = [record for batch in restored for record in batch]
    assert [(record.offset, record.key, record.value, record.headers) for record in decoded] == [
        (1_000 + index, key, value, []) for index, (_, key, value, _) in enumerate(records)]
    assert [record.timestamp for record in decoded] == [
        timestamp if magic == 1 else -1 for timestamp, *_ in records]


@SETTINGS
@given(v2_records, v2_codecs, st.one_of(st.none(), v2_codecs), st.integers(min_value=0, max_value=2**40))
def test_validator_keeps_every_record(records: list, codec: CompressionType, target: CompressionType | None,
                                      next_offset: int) -> None:
    builder = MemoryRecordsBuilder(compression_type=codec)
    for timestamp, key, value, record_headers in records:
        builder.append(timestamp, key, value, record_headers)
    info = LogValidator(target_compression=target).validate_and_assign_offsets(builder.close(), next_offset, 5)
    [batch] = list(iter_batches(info.validated_records))
    batch.validate()
    assert batch.compression_type == (codec if target is None else target)
    assert [(record.offset, record.timestamp, record.key, record.value, record.headers) for record in batch] == [
        (next_offset + index, *record) for index, record in enumerate(records)]
