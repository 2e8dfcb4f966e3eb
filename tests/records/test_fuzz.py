"""Mutated batches never crash the readers: every failure is a kfk error (CorruptRecordError and kin).

Mutations run twice: as they come (the CRC catches most), and with the CRC recomputed afterwards so the damage
reaches the record parser, the codecs and the inner messages of legacy wrappers. Seeded, so a failure reproduces.
"""

from __future__ import annotations

import random
import struct
import time
import zlib
from pathlib import Path

import pytest
from crc32c import crc32c

from kfk.errors import KafkaError
from kfk.records import (
    CompressionType,
    ControlRecordType,
    EndTransactionMarker,
    LeaderChangeMessage,
    LegacyRecordsBuilder,
    MemoryRecordsBuilder,
    RecordBatch,
    build_end_transaction_marker_batch,
    complete_entries_length,
    down_convert,
    iter_batches,
    up_convert,
)
from kfk.storage.log_validator import LogValidator
from tests.records.produce_frames import produce_records

pytestmark = pytest.mark.slow

TIME_BUDGET_SECONDS = 12.0
GOLDEN = Path(__file__).parent.parent / "data" / "records" / "produce"


def corpus() -> list[bytes]:
    samples = []
    for codec in CompressionType:
        builder = MemoryRecordsBuilder(compression_type=codec, base_offset=3, producer_id=7, producer_epoch=1,
                                       base_sequence=0)
        for index in range(6):
            builder.append(1_000 + index, b"key-%d" % index if index % 3 else None, b"value " * index,
                           [("h%d" % index, b"x" if index % 2 else None)])
        samples.append(builder.close())
    for magic in (0, 1):
        for codec in (CompressionType.NONE, CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4):
            legacy = LegacyRecordsBuilder(magic, compression_type=codec, base_offset=10)
            for index in range(4):
                legacy.append(2_000 + index, b"k", b"legacy value %d" % index)
            samples.append(legacy.close())
    samples.append(build_end_transaction_marker_batch(
        base_offset=0, timestamp=1, partition_leader_epoch=0, producer_id=1, producer_epoch=0,
        marker=EndTransactionMarker(ControlRecordType.COMMIT, 3)))
    for path in sorted(GOLDEN.glob("*.bin"))[::4]:
        samples.extend(records for _, _, records in produce_records(path.read_bytes()))
    return samples


def mutate(data: bytes, rng: random.Random) -> bytearray:
    mutated = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        if choice < 0.45 and mutated:
            mutated[rng.randrange(len(mutated))] = rng.randrange(256)
        elif choice < 0.6 and mutated:
            position = rng.randrange(len(mutated))
            struct_value = rng.choice([0, 1, -1, 0x7F, 0x7FFFFFFF, -0x80000000, rng.randrange(-2**31, 2**31)])
            chunk = struct.pack(">i", struct_value)
            mutated[position:position + 4] = chunk[:max(0, len(mutated) - position)]
        elif choice < 0.75:
            del mutated[rng.randrange(len(mutated) + 1):]
        elif choice < 0.9:
            position = rng.randrange(len(mutated) + 1)
            mutated[position:position] = rng.randbytes(rng.randint(1, 16))
        elif mutated:
            start = rng.randrange(len(mutated))
            del mutated[start:start + rng.randint(1, 16)]
    return mutated


def fix_checksums(data: bytearray) -> None:
    """Recompute the CRC of the entry at the front so the mutation gets past it."""
    if len(data) < 26:
        return
    size = struct.unpack_from(">i", data, 8)[0]
    end = min(len(data), 12 + max(size, 0))
    if data[16] == 2 and end >= 21:
        struct.pack_into(">I", data, 17, crc32c(memoryview(data)[21:end]))
    elif data[16] in (0, 1):
        struct.pack_into(">I", data, 12, zlib.crc32(memoryview(data)[16:end]))


def exercise(data: bytes | bytearray) -> None:
    try:
        complete_entries_length(data)
        for entry in iter_batches(data):
            entry.is_valid()
            for record in entry.records(max_decompressed_bytes=8 * 1024 * 1024):
                if entry.is_control and record.key is not None and record.key[2:4] == b"\x00\x02":
                    LeaderChangeMessage.from_record(record)
            (entry.base_offset, entry.last_offset, entry.records_count, entry.max_timestamp)
        if data and data[16:17] == b"\x02":
            RecordBatch(data).validate()
    except KafkaError:
        pass
    for operation in (lambda: LogValidator().validate_and_assign_offsets(bytearray(data), 0, 1),
                      lambda: LogValidator(target_compression=CompressionType.GZIP,
                                           compacted_topic=True).validate_and_assign_offsets(bytes(data), 0, 1),
                      lambda: down_convert(data, 1),
                      lambda: up_convert(data)):
        try:
            operation()
        except KafkaError:
            pass


def test_mutated_batches_raise_only_kfk_errors() -> None:
    rng = random.Random(20_240_611)
    samples = corpus()
    deadline = time.monotonic() + TIME_BUDGET_SECONDS
    rounds = 0
    while time.monotonic() < deadline:
        sample = rng.choice(samples)
        mutated = mutate(sample, rng)
        exercise(mutated)
        fix_checksums(mutated)
        exercise(mutated)
        exercise(bytes(mutated))  # bytes take the zero-copy decoding path
        rounds += 1
    assert rounds > 1_000
