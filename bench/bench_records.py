"""Record-format throughput: kfk.records against kafka-python's kafka.record, on this machine, in one run.

    python bench/bench_records.py [--seconds 0.5]
    KFK_NO_ACCELERATOR=1 python bench/bench_records.py   # the pure-Python codec, without the C accelerator

Prints one table, headed by which record codec ran. MB/s counts the batch bytes (or the uncompressed bytes, for codecs) per second of wall time,
best of a few timed rounds. Figures are for comparing changes and implementations, not absolute promises.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable

from crc32c import crc32c
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kfk.client.structs import ConsumerRecord
from kfk.records import CompressionType, MemoryRecordsBuilder, RecordBatch, compress, decompress
from kfk.records.accelerator import accelerator
from kfk.storage.log_validator import LogValidator

MIB = 1024 * 1024
RECORD_COUNT = 1_000
RECORD_SIZE = 1_024
SMALL_RECORD_SIZE = 100


def best_seconds(operation: Callable[[], object], budget: float) -> float:
    """Best time of one call over repeated rounds within ``budget`` seconds (at least 3 rounds)."""
    best = float("inf")
    rounds = 0
    deadline = time.perf_counter() + budget
    while rounds < 3 or time.perf_counter() < deadline:
        start = time.perf_counter()
        operation()
        best = min(best, time.perf_counter() - start)
        rounds += 1
    return best


def json_like(size: int, seed: int = 7) -> bytes:
    rng = random.Random(seed)
    words = ["kafka", "partition", "offset", "broker", "topic", "leader", "replica", "segment", "consumer"]
    lines = []
    total = 0
    while total < size:
        line = json.dumps({"id": rng.randrange(10**9), "ts": 1_700_000_000_000 + rng.randrange(10**6),
                           "user": f"user-{rng.randrange(10_000)}", "event": rng.choice(words),
                           "tags": rng.sample(words, 3), "score": round(rng.random() * 100, 3)}).encode()
        lines.append(line)
        total += len(line) + 1
    return (b"\n".join(lines))[:size]


def values() -> list[bytes]:
    data = json_like(RECORD_COUNT * RECORD_SIZE, seed=11)
    return [data[index * RECORD_SIZE:(index + 1) * RECORD_SIZE] for index in range(RECORD_COUNT)]


def build_kfk(record_values: list[bytes]) -> bytes:
    builder = MemoryRecordsBuilder()
    for index, value in enumerate(record_values):
        builder.append(1_700_000_000_000 + index, b"key-%d" % index, value)
    return builder.close()


def build_kafka_python(record_values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    for index, value in enumerate(record_values):
        builder.append(index, 1_700_000_000_000 + index, b"key-%d" % index, value, [])
    return bytes(builder.build())


def decode_kfk(data: bytes) -> int:
    return sum(1 for _ in RecordBatch(data))


def decode_kafka_python(data: bytes) -> int:
    return sum(1 for _ in MemoryRecords(data).next_batch())


def build_values_kfk(record_values: list[bytes]) -> bytes:
    """The producer's produce_batch path: keyless values appended in one call."""
    builder = MemoryRecordsBuilder()
    builder.append_values(1_700_000_000_000, record_values)
    return builder.close()


def decode_consumer_records(data: bytes) -> int:
    """The consumer's path: records made in the consumer's shape straight from the batch."""
    return len(list(RecordBatch(data).records(labels=("topic", 0, 0, 0), record_type=ConsumerRecord)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="time budget per measurement")
    budget = parser.parse_args().seconds

    rows: list[tuple[str, str, str]] = []
    print("record codec:", "the C accelerator (kfk.records._accel)" if accelerator is not None
          else "pure Python (no kfk.records._accel, or KFK_NO_ACCELERATOR set)")
    record_values = values()
    batch = bytes(build_kfk(record_values))  # as a fetch response or a log read hands it over
    assert decode_kfk(batch) == decode_kafka_python(batch) == RECORD_COUNT
    batch_mb = len(batch) / MIB

    # 1. The broker's produce hot path on a 1 MiB uncompressed batch.
    buffer = bytearray(batch)
    validator = LogValidator()
    seconds = best_seconds(lambda: validator.validate_and_assign_offsets(buffer, 1_000, 1_700_000_000_000, 5),
                           budget)
    crc_seconds = best_seconds(lambda: crc32c(memoryview(batch)[21:]), budget)
    rows.append(("validate + assign offsets, 1 MiB batch of 1 KiB records",
                 f"{batch_mb / seconds:,.0f} MB/s", f"{seconds * 1e6:,.0f} us/batch"))
    rows.append(("  CRC32C alone over the same batch", f"{batch_mb / crc_seconds:,.0f} MB/s",
                 f"{crc_seconds / seconds:.0%} of the validation time"))
    compacted = LogValidator(compacted_topic=True)
    seconds = best_seconds(lambda: compacted.validate_and_assign_offsets(buffer, 1_000, 1_700_000_000_000, 5),
                           budget)
    rows.append(("  the same, compacted topic (every record decoded for its key)", f"{batch_mb / seconds:,.0f} MB/s",
                 f"{seconds * 1e6:,.0f} us/batch"))

    # 2/3. Building and decoding 1,000 x 1 KiB records, against kafka-python.
    build_ours = best_seconds(lambda: build_kfk(record_values), budget)
    build_theirs = best_seconds(lambda: build_kafka_python(record_values), budget)
    rows.append(("build 1,000 x 1 KiB records (kfk)", f"{batch_mb / build_ours:,.0f} MB/s",
                 f"{RECORD_COUNT / build_ours:,.0f} records/s"))
    rows.append(("build 1,000 x 1 KiB records (kafka-python)", f"{batch_mb / build_theirs:,.0f} MB/s",
                 f"kfk is {build_theirs / build_ours:.1f}x kafka-python"))
    decode_ours = best_seconds(lambda: decode_kfk(batch), budget)
    decode_theirs = best_seconds(lambda: decode_kafka_python(batch), budget)
    rows.append(("decode 1,000 x 1 KiB records (kfk)", f"{batch_mb / decode_ours:,.0f} MB/s",
                 f"{RECORD_COUNT / decode_ours:,.0f} records/s"))
    rows.append(("decode 1,000 x 1 KiB records (kafka-python)", f"{batch_mb / decode_theirs:,.0f} MB/s",
                 f"kfk is {decode_theirs / decode_ours:.1f}x kafka-python"))

    # 3b. The clients' small-record paths: 1,000 x 100 B, produce_batch's append and the consumer's decode.
    small_values = [value[:SMALL_RECORD_SIZE] for value in record_values]
    small_batch = bytes(build_values_kfk(small_values))
    assert decode_consumer_records(small_batch) == decode_kafka_python(small_batch) == RECORD_COUNT
    small_mb = len(small_batch) / MIB
    build_small = best_seconds(lambda: build_values_kfk(small_values), budget)
    rows.append(("append_values 1,000 x 100 B records (kfk, produce_batch)", f"{small_mb / build_small:,.0f} MB/s",
                 f"{RECORD_COUNT / build_small:,.0f} records/s"))
    decode_small = best_seconds(lambda: decode_consumer_records(small_batch), budget)
    decode_small_theirs = best_seconds(lambda: decode_kafka_python(small_batch), budget)
    rows.append(("decode 1,000 x 100 B records (kfk, as ConsumerRecords)", f"{small_mb / decode_small:,.0f} MB/s",
                 f"{RECORD_COUNT / decode_small:,.0f} records/s"))
    rows.append(("decode 1,000 x 100 B records (kafka-python)", f"{small_mb / decode_small_theirs:,.0f} MB/s",
                 f"kfk is {decode_small_theirs / decode_small:.1f}x kafka-python"))

    # 4. Codecs on 1 MiB of JSON-like data.
    data = json_like(MIB)
    for codec in (CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4, CompressionType.ZSTD):
        compressed = compress(codec, data)
        assert decompress(codec, compressed) == data
        compress_seconds = best_seconds(lambda: compress(codec, data), budget)
        decompress_seconds = best_seconds(lambda: decompress(codec, compressed), budget)
        rows.append((f"{codec.name.lower()} compress / decompress, 1 MiB JSON-like",
                     f"{1 / compress_seconds:,.0f} / {1 / decompress_seconds:,.0f} MB/s",
                     f"ratio {len(data) / len(compressed):.1f}x"))

    width = max(len(name) for name, _, _ in rows)
    print(f"{'measurement':<{width}}  {'throughput':>22}  note")
    print("-" * (width + 60))
    for name, throughput, note in rows:
        print(f"{name:<{width}}  {throughput:>22}  {note}")


if __name__ == "__main__":
    main()
