"""Real client batches: the records fields of Produce requests that librdkafka, kafka-python, aiokafka and kcat sent.

The frames are copies of ../shared/golden Produce requests (see tests/data/records/produce/index.json for which
client, format and codec each holds). Each partition's records are read by kfk, cross-checked against
kafka-python's reader, and put through the broker's LogValidator as a leader would.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecords

from kfk.records import (
    CompressionType,
    RecordBatch,
    TimestampType,
    complete_entries_length,
    iter_batches,
)
from kfk.storage.log_validator import LogValidator
from tests.records.produce_frames import produce_records

DATA = Path(__file__).parent.parent / "data" / "records" / "produce"
INDEX = json.loads((DATA / "index.json").read_text())
CODECS = {"none": CompressionType.NONE, "gzip": CompressionType.GZIP, "snappy": CompressionType.SNAPPY,
          "lz4": CompressionType.LZ4, "zstd": CompressionType.ZSTD}


def partitions(row: dict) -> list[bytes]:
    found = [records for _, _, records in produce_records((DATA / row["file"]).read_bytes())]
    assert found, f"{row['file']} holds no partition"
    return found


def kafka_python_view(records: bytes) -> list[tuple]:
    reader = MemoryRecords(records)
    decoded = []
    while (batch := reader.next_batch()) is not None:
        assert batch.validate_crc()
        for record in batch:
            decoded.append((record.key, record.value, list(record.headers or []),
                            -1 if record.timestamp is None else record.timestamp))
    return decoded


@pytest.mark.parametrize("row", INDEX, ids=[row["file"] for row in INDEX])
def test_kfk_reads_real_client_batches(row: dict) -> None:
    for records in partitions(row):
        assert complete_entries_length(records) == len(records)
        entries = list(iter_batches(records))
        assert entries
        for entry in entries:
            entry.validate()
            assert entry.magic == row["magic"]
            assert entry.compression_type == CODECS[row["codec"]]
        if row["magic"] == 2:
            [batch] = entries  # Produce v3+ carries exactly one batch per partition
            assert batch.records_count == row["records"] == len(list(batch))
            assert batch.has_producer_id == row["producer_id"]
            assert batch.is_transactional == row["transactional"]
            assert [record.offset for record in batch] == list(range(row["records"]))
        decoded = [(record.key, record.value, record.headers, record.timestamp)
                   for entry in entries for record in entry]
        assert decoded == kafka_python_view(records)
        assert any(value for _, value, _, _ in decoded)


@pytest.mark.parametrize("row", INDEX, ids=[row["file"] for row in INDEX])
def test_log_validator_accepts_real_client_batches(row: dict) -> None:
    for records in partitions(row):
        expected = [(record.key, record.value, record.headers)
                    for entry in iter_batches(records) for record in entry]
        info = LogValidator().validate_and_assign_offsets(records, 1_000, now_ms=1_800_000_000_000,
                                                          partition_leader_epoch=3)
        assert (info.first_offset, info.last_offset, info.records_count) == (1_000, 999 + len(expected),
                                                                             len(expected))
        assert info.re_encoded == (row["magic"] < 2)
        batches = list(iter_batches(info.validated_records))
        for batch in batches:
            assert isinstance(batch, RecordBatch)
            batch.validate()
            assert batch.partition_leader_epoch == 3
            assert batch.compression_type == CODECS[row["codec"]]
        stored = [record for batch in batches for record in batch]
        assert [record.offset for record in stored] == list(range(1_000, 1_000 + len(expected)))
        assert [(record.key, record.value, record.headers) for record in stored] == expected


@pytest.mark.parametrize("row", [row for row in INDEX if row["magic"] == 2][:6], ids=lambda row: row["file"])
def test_log_append_time_rewrites_real_batches_in_place(row: dict) -> None:
    for records in partitions(row):
        buffer = bytearray(records)
        info = LogValidator(timestamp_type=TimestampType.LOG_APPEND_TIME).validate_and_assign_offsets(
            buffer, 50, now_ms=1_234)
        assert info.validated_records is buffer and not info.re_encoded
        batch = RecordBatch(buffer)
        batch.validate()
        assert (batch.base_offset, batch.max_timestamp, info.max_timestamp) == (50, 1_234, 1_234)
        assert {record.timestamp for record in batch} == {1_234}
