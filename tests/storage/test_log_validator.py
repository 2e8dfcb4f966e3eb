"""LogValidator: what a leader does to Produce records before they reach the log."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kfk.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError, KafkaError, RecordTooLargeError
from kfk.records import (
    CompressionType,
    ControlRecordType,
    EndTransactionMarker,
    LegacyRecordsBuilder,
    MemoryRecordsBuilder,
    RecordBatch,
    TimestampType,
    build_end_transaction_marker_batch,
    iter_batches,
)
from kfk.config import LogConfig
from kfk.storage.log_validator import LogAppendInfo, LogValidator, append_needs_record_work
from kfk.storage.producer_state import AppendOrigin
from tests.records.test_stamp_produced_batch import damaged, produced_batches

NOW = 1_700_000_000_000


def batch(count: int = 3, timestamps: list[int] | None = None, codec: CompressionType = CompressionType.NONE,
          keys: bool = True, **kwargs) -> bytes:
    builder = MemoryRecordsBuilder(compression_type=codec, **kwargs)
    for index in range(count):
        timestamp = timestamps[index] if timestamps else NOW - 10 + index
        builder.append(timestamp, b"k%d" % index if keys else None, b"value-%d" % index, [("h", b"x")])
    return builder.close()


def test_uncompressed_batch_is_validated_and_assigned_in_place() -> None:
    buffer = bytearray(batch(3))
    crc = RecordBatch(buffer).crc
    info = LogValidator().validate_and_assign_offsets(buffer, 100, NOW, partition_leader_epoch=8)
    assert info.validated_records is buffer and not info.re_encoded
    assert (info.first_offset, info.last_offset, info.records_count) == (100, 102, 3)
    assert (info.max_timestamp, info.shallow_offset_of_max_timestamp) == (NOW - 8, 102)
    assert info.log_append_time == -1
    stored = RecordBatch(buffer)
    stored.validate()
    assert (stored.base_offset, stored.partition_leader_epoch, stored.crc) == (100, 8, crc)  # no CRC rewrite


def test_offsets_run_on_across_batches_and_the_max_timestamp_batch_is_found() -> None:
    records = (batch(2, [NOW - 5, NOW - 1]) + batch(3, [NOW - 9, NOW - 20, NOW - 30])
               + batch(1, [NOW - 2], codec=CompressionType.GZIP))
    info = LogValidator().validate_and_assign_offsets(records, 10, NOW)
    assert (info.first_offset, info.last_offset, info.records_count) == (10, 15, 6)
    assert (info.max_timestamp, info.shallow_offset_of_max_timestamp) == (NOW - 1, 11)
    assert [(entry.base_offset, entry.last_offset) for entry in iter_batches(info.validated_records)] == [
        (10, 11), (12, 14), (15, 15)]


def test_read_only_input_is_copied_once() -> None:
    records = bytes(batch(2))
    info = LogValidator().validate_and_assign_offsets(records, 7, NOW)
    assert isinstance(info.validated_records, bytearray) and RecordBatch(records).base_offset == 0
    assert RecordBatch(info.validated_records).base_offset == 7


@pytest.mark.parametrize("codec", list(CompressionType))
def test_log_append_time_stamps_the_header_and_recomputes_crc(codec: CompressionType) -> None:
    buffer = bytearray(batch(3, codec=codec))
    info = LogValidator(timestamp_type=TimestampType.LOG_APPEND_TIME).validate_and_assign_offsets(buffer, 0, NOW)
    stored = RecordBatch(buffer)
    stored.validate()
    assert stored.timestamp_type == TimestampType.LOG_APPEND_TIME and stored.max_timestamp == NOW
    assert (info.max_timestamp, info.shallow_offset_of_max_timestamp, info.log_append_time) == (NOW, 2, NOW)
    assert {record.timestamp for record in stored} == {NOW}


@pytest.mark.parametrize("source", list(CompressionType))
@pytest.mark.parametrize("target", [CompressionType.NONE, CompressionType.ZSTD, CompressionType.SNAPPY])
def test_differing_topic_compression_re_encodes(source: CompressionType, target: CompressionType) -> None:
    records = batch(4, codec=source, producer_id=55, producer_epoch=2, base_sequence=9)
    info = LogValidator(target_compression=target).validate_and_assign_offsets(records, 500, NOW, 3)
    assert info.re_encoded == (source != target)
    assert (info.source_compression, info.target_compression) == (source, target)
    stored = RecordBatch(info.validated_records)
    stored.validate()
    assert stored.compression_type == target and stored.partition_leader_epoch == 3
    assert (stored.producer_id, stored.producer_epoch, stored.base_sequence) == (55, 2, 9)
    assert [(record.offset, record.key, record.value, record.headers) for record in stored] == [
        (500 + index, b"k%d" % index, b"value-%d" % index, [("h", b"x")]) for index in range(4)]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP, CompressionType.LZ4])
def test_legacy_produce_becomes_one_v2_batch(magic: int, codec: CompressionType) -> None:
    builder = LegacyRecordsBuilder(magic, compression_type=codec)
    for index in range(4):
        builder.append(NOW - index, b"k%d" % index, b"legacy-%d" % index)
    info = LogValidator().validate_and_assign_offsets(builder.close(), 30, NOW, 2)
    [stored] = list(iter_batches(info.validated_records))
    assert isinstance(stored, RecordBatch) and info.re_encoded
    stored.validate()
    assert stored.compression_type == codec and (stored.base_offset, stored.last_offset) == (30, 33)
    expected_timestamps = [NOW - index for index in range(4)] if magic == 1 else [-1] * 4
    assert [(record.offset, record.timestamp, record.value) for record in stored] == [
        (30 + index, expected_timestamps[index], b"legacy-%d" % index) for index in range(4)]
    assert info.max_timestamp == (NOW if magic == 1 else -1)


def test_legacy_produce_with_topic_compression() -> None:
    builder = LegacyRecordsBuilder(1)
    builder.append(NOW, b"k", b"v")
    info = LogValidator(target_compression=CompressionType.ZSTD).validate_and_assign_offsets(builder.close(), 0, NOW)
    assert RecordBatch(info.validated_records).compression_type == CompressionType.ZSTD


def test_control_batches_only_from_the_coordinator() -> None:
    marker = build_end_transaction_marker_batch(base_offset=0, timestamp=NOW, partition_leader_epoch=0,
                                                producer_id=4, producer_epoch=1,
                                                marker=EndTransactionMarker(ControlRecordType.ABORT, 2))
    with pytest.raises(InvalidRecordError, match="control"):
        LogValidator().validate_and_assign_offsets(marker, 0, NOW)
    info = LogValidator(origin=AppendOrigin.COORDINATOR, target_compression=CompressionType.GZIP,
                        compacted_topic=True).validate_and_assign_offsets(marker, 77, NOW)
    stored = RecordBatch(info.validated_records)
    assert stored.base_offset == 77 and stored.is_control and stored.compression_type == CompressionType.NONE


def _edited(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    edited = bytearray(data)
    struct.pack_into(fmt, edited, offset, value)
    struct.pack_into(">I", edited, 17, crc32c(memoryview(edited)[21:]))
    return bytes(edited)


def test_client_batch_count_must_match_its_offset_range() -> None:
    with pytest.raises(InvalidRecordError, match="Inconsistent"):
        LogValidator().validate_and_assign_offsets(_edited(batch(3), 23, ">i", 5), 0, NOW)


def test_producer_id_needs_a_sequence() -> None:
    records = _edited(batch(1, producer_id=3, producer_epoch=0, base_sequence=0), 53, ">i", -1)
    with pytest.raises(InvalidRecordError, match="sequence"):
        LogValidator().validate_and_assign_offsets(records, 0, NOW)


def test_corrupt_and_truncated_input() -> None:
    flipped = bytearray(batch(3))
    flipped[-2] ^= 0x10
    with pytest.raises(CorruptRecordError, match="crc"):
        LogValidator().validate_and_assign_offsets(flipped, 0, NOW)
    with pytest.raises(CorruptRecordError, match="incomplete"):
        LogValidator().validate_and_assign_offsets(batch(3)[:-1], 0, NOW)
    with pytest.raises(CorruptRecordError):
        LogValidator().validate_and_assign_offsets(b"\x00" * 30, 0, NOW)


def test_mixed_magic_is_invalid() -> None:
    legacy = LegacyRecordsBuilder(1)
    legacy.append(NOW, b"k", b"v")
    with pytest.raises(InvalidRecordError, match="magic"):
        LogValidator().validate_and_assign_offsets(batch(1) + legacy.close(), 0, NOW)


def test_compacted_topic_needs_keys() -> None:
    validator = LogValidator(compacted_topic=True)
    validator.validate_and_assign_offsets(batch(2), 0, NOW)
    for codec in (CompressionType.NONE, CompressionType.LZ4):
        with pytest.raises(InvalidRecordError, match="without key"):
            validator.validate_and_assign_offsets(batch(2, keys=False, codec=codec), 0, NOW)


def test_timestamp_bounds() -> None:
    validator = LogValidator(timestamp_before_max_ms=1_000, timestamp_after_max_ms=500)
    validator.validate_and_assign_offsets(batch(2, [NOW - 1_000, NOW + 500]), 0, NOW)
    with pytest.raises(InvalidTimestampError, match="before"):
        validator.validate_and_assign_offsets(batch(2, [NOW, NOW - 1_001]), 0, NOW)
    with pytest.raises(InvalidTimestampError, match="after"):
        validator.validate_and_assign_offsets(batch(1, [NOW + 501], codec=CompressionType.GZIP), 0, NOW)
    LogValidator(timestamp_type=TimestampType.LOG_APPEND_TIME, timestamp_before_max_ms=1).validate_and_assign_offsets(
        batch(1, [0]), 0, NOW)  # LogAppendTime topics ignore producer timestamps


def test_future_timestamps_are_bounded_by_default_without_decoding_records() -> None:
    """Kafka 4.0's message.timestamp.after.max.ms default is an hour (Kafka's own describe shows 3600000; the
    Java tools' comparison found kfk unbounded). The bound is checked on the batch header, so the default config
    keeps appends on the header-only path."""
    config = LogConfig()
    assert config.message_timestamp_after_max_ms == 3_600_000
    validator = LogValidator.for_config(config)
    within = batch(2, [NOW, NOW + 3_600_000])
    assert not append_needs_record_work(config, within)
    assert validator.validate_and_assign_offsets(within, 0, NOW).records_count == 2
    for codec in (CompressionType.NONE, CompressionType.ZSTD):
        with pytest.raises(InvalidTimestampError, match="after") as raised:
            validator.validate_and_assign_offsets(batch(3, [NOW, NOW + 3_600_001, NOW], codec=codec), 0, NOW)
        assert [index for index, _ in raised.value.record_errors] == [1]


def test_max_message_bytes() -> None:
    records = batch(3)
    LogValidator(max_message_bytes=len(records)).validate_and_assign_offsets(records, 0, NOW)
    with pytest.raises(RecordTooLargeError):
        LogValidator(max_message_bytes=len(records) - 1).validate_and_assign_offsets(records, 0, NOW)


def test_empty_records_append_nothing() -> None:
    info = LogValidator().validate_and_assign_offsets(b"", 9, NOW)
    assert (info.records_count, info.first_offset, info.last_offset, info.valid_bytes) == (0, 9, 8, 0)


def test_record_errors_list_every_invalid_record_of_the_batch() -> None:
    """The error raised is the first record's; it lists each offending record by index, as Produce v8 answers."""
    builder = MemoryRecordsBuilder()
    for index, key in enumerate([b"k", None, b"k", None]):
        builder.append(NOW + index, key, b"v")
    with pytest.raises(InvalidRecordError) as keyless:
        LogValidator(compacted_topic=True).validate_and_assign_offsets(builder.close(), 0, NOW)
    assert [index for index, _ in keyless.value.record_errors] == [1, 3]
    assert str(keyless.value) == "Compacted topic cannot accept message without key"
    late = batch(3, timestamps=[NOW, NOW - 10_000, NOW - 20_000])
    with pytest.raises(InvalidTimestampError) as stale:
        LogValidator(timestamp_before_max_ms=5_000).validate_and_assign_offsets(late, 0, NOW)
    assert [index for index, _ in stale.value.record_errors] == [1, 2]
    assert "offset 1 is out of range" in str(stale.value)


# --- the one-step stamp of the common produce (stamp_produced_batch) against the general path --------------------------

def _validated(validator: LogValidator, payload: bytes, one_step: bool) -> tuple:
    """What validating a copy of `payload` gives with the one-step stamp on or off: the LogAppendInfo's fields and
    the buffer after, or the error's type and message."""
    validator._stamp_in_one_step = one_step and validator._stamp_in_one_step
    buffer = bytearray(payload)
    try:
        info = validator.validate_and_assign_offsets(buffer, 1000, NOW, partition_leader_epoch=4)
    except (KafkaError, CorruptRecordError) as error:
        return ("error", type(error), str(error), bytes(buffer) if one_step else None)
    fields = {name: getattr(info, name) for name in LogAppendInfo.__slots__ if name != "batches"}
    fields["validated_records"] = bytes(info.validated_records)
    fields["batches"] = [(batch.position, bytes(batch.as_memoryview())) for batch in info.batches or []]
    return ("ok", fields, bytes(buffer))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(produced_batches(), st.data(), st.sampled_from([None, *CompressionType]), st.sampled_from([None, 100, 10**6]),
       st.sampled_from([None, 0, 3_600_000]), st.sampled_from(list(AppendOrigin)), st.booleans())
def test_the_one_step_stamp_gives_the_general_path_s_result(
        payload: bytes, data: st.DataObject, target: CompressionType | None, max_message_bytes: int | None,
        future_bound: int | None, origin: AppendOrigin, damage: bool) -> None:
    if damage:
        payload = damaged(data, payload)
    settings_ = {"target_compression": target, "max_message_bytes": max_message_bytes,
                 "timestamp_after_max_ms": future_bound, "origin": origin}
    one_step, general = (_validated(LogValidator(**settings_), payload, one_step) for one_step in (True, False))
    if general[0] == "error":  # the same refusal; the buffer may hold the stamp the one-step check wrote first
        assert one_step[:3] == general[:3]
    else:
        assert one_step == general
