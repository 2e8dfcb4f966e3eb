#!/usr/bin/env python3
"""Wire codec benchmark: `kfk --help` start-up, size of the generated codec, and encode/decode time of three large
messages, next to kafka-python's codec on the same messages (same process, same machine, same run).

    python bench/bench_protocol.py            # full run (about a minute)
    python bench/bench_protocol.py --quick    # fewer repetitions, for a smoke test

Times are medians over timeit repeats, in microseconds per operation. "ratio" is kafka-python's time divided by
kfk's: above 1 means kfk is faster.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
import timeit
import uuid
import warnings
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kfk.protocol.messages.fetch import FetchResponse  # noqa: E402
from kfk.protocol.messages.metadata import MetadataResponse  # noqa: E402
from kfk.protocol.messages.produce import ProduceRequest  # noqa: E402

with warnings.catch_warnings():  # kafka-python loads its schemas with a deprecated importlib call
    warnings.simplefilter("ignore", DeprecationWarning)
    try:
        from kafka.protocol.consumer.fetch import FetchResponse as KpFetchResponse
        from kafka.protocol.metadata.metadata import MetadataResponse as KpMetadataResponse
        from kafka.protocol.producer.produce import ProduceRequest as KpProduceRequest
    except ImportError:  # kafka-python is a test dependency; the kfk columns do not need it
        KpFetchResponse = KpMetadataResponse = KpProduceRequest = None

KIB = 1024
MIB = 1024 * KIB


def median_us(function: Callable[[], Any], repeat: int, min_time: float) -> float:
    """Median time of one call in µs: timeit's autorange picks a loop count that runs >= min_time per repeat."""
    timer = timeit.Timer(function)
    number = 1
    while timer.timeit(number) < min_time:
        number *= 2
    return statistics.median(timer.repeat(repeat=repeat, number=number)) / number * 1e6


def help_wall_time(runs: int) -> tuple[float, float, str]:
    """Median and min wall time of `kfk --help` in a fresh process."""
    command = [shutil.which("kfk")] if shutil.which("kfk") else [sys.executable, "-m", "kfk"]
    subprocess.run(command + ["--help"], capture_output=True, check=True)  # warm the OS file cache
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command + ["--help"], capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times), " ".join(Path(command[0]).name if i == 0 else c
                                                          for i, c in enumerate(command))


def generated_code_size() -> tuple[int, int, int]:
    files = sorted((ROOT / "kfk" / "protocol" / "messages").glob("*.py"))
    lines = sum(len(path.read_text(encoding="utf-8").splitlines()) for path in files)
    size = sum(path.stat().st_size for path in files)
    return len(files), lines, size


# -- the three messages, built once for kfk and once for kafka-python ------------------------------------------


def produce_request() -> tuple[ProduceRequest, Any, int]:
    records = bytes(range(256)) * (MIB // 256)
    kfk = ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=30000,
        topic_data=[ProduceRequest.TopicProduceData(
            name="bench-topic", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)])],
    )
    kp = None
    if KpProduceRequest is not None:
        kp = KpProduceRequest(
            version=9, transactional_id=None, acks=-1, timeout_ms=30000,
            topic_data=[KpProduceRequest.TopicProduceData(
                version=9, name="bench-topic",
                partition_data=[KpProduceRequest.TopicProduceData.PartitionProduceData(
                    version=9, index=0, records=records)])],
        )
    return kfk, kp, 9


def fetch_response() -> tuple[FetchResponse, Any, int]:
    records = [bytes([n]) * (100 * KIB) for n in range(10)]
    kfk = FetchResponse(
        throttle_time_ms=0, error_code=0, session_id=12345,
        responses=[FetchResponse.FetchableTopicResponse(topic="bench-topic", partitions=[
            FetchResponse.PartitionData(partition_index=n, high_watermark=1000 + n, last_stable_offset=1000 + n,
                                        log_start_offset=0, aborted_transactions=None, records=records[n])
            for n in range(10)
        ])],
    )
    kp = None
    if KpFetchResponse is not None:
        partition = KpFetchResponse.FetchableTopicResponse.PartitionData
        kp = KpFetchResponse(
            version=12, throttle_time_ms=0, error_code=0, session_id=12345,
            responses=[KpFetchResponse.FetchableTopicResponse(version=12, topic="bench-topic", partitions=[
                partition(version=12, partition_index=n, error_code=0, high_watermark=1000 + n,
                          last_stable_offset=1000 + n, log_start_offset=0, aborted_transactions=None,
                          preferred_read_replica=-1, records=records[n])
                for n in range(10)
            ])],
        )
    return kfk, kp, 12


def metadata_response() -> tuple[MetadataResponse, Any, int]:
    brokers = [(node, f"broker-{node}.example.com", 9092, f"rack-{node % 3}") for node in range(3)]
    topics = [(f"topic-{t:03d}", uuid.UUID(int=t + 1)) for t in range(100)]

    def replicas(p: int) -> list[int]:
        return [p % 3, (p + 1) % 3, (p + 2) % 3]

    kfk = MetadataResponse(
        throttle_time_ms=0, cluster_id="bench-cluster", controller_id=0,
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=n, host=h, port=port, rack=r)
                 for n, h, port, r in brokers],
        topics=[MetadataResponse.MetadataResponseTopic(
            error_code=0, name=name, topic_id=topic_id, is_internal=False,
            partitions=[MetadataResponse.MetadataResponsePartition(
                error_code=0, partition_index=p, leader_id=p % 3, leader_epoch=5, replica_nodes=replicas(p),
                isr_nodes=replicas(p), offline_replicas=[]) for p in range(10)],
            topic_authorized_operations=-(2**31)) for name, topic_id in topics],
    )
    kp = None
    if KpMetadataResponse is not None:
        topic_cls = KpMetadataResponse.MetadataResponseTopic
        partition_cls = topic_cls.MetadataResponsePartition
        kp = KpMetadataResponse(
            version=12, throttle_time_ms=0, cluster_id="bench-cluster", controller_id=0,
            brokers=[KpMetadataResponse.MetadataResponseBroker(version=12, node_id=n, host=h, port=port, rack=r)
                     for n, h, port, r in brokers],
            topics=[topic_cls(
                version=12, error_code=0, name=name, topic_id=topic_id, is_internal=False,
                partitions=[partition_cls(
                    version=12, error_code=0, partition_index=p, leader_id=p % 3, leader_epoch=5,
                    replica_nodes=replicas(p), isr_nodes=replicas(p), offline_replicas=[]) for p in range(10)],
                authorized_operations=None) for name, topic_id in topics],
        )
    return kfk, kp, 12


def bench_message(label: str, build: Callable, repeat: int, min_time: float) -> list[tuple]:
    kfk, kp, version = build()
    cls = type(kfk)
    wire = kfk.encode(version)
    view = memoryview(wire)
    assert cls.decode(wire, version) == kfk
    rows = []
    kp_wire = None
    if kp is not None:
        kp_wire = bytes(kp.encode(version=version))
        assert kp_wire == wire, f"{label}: kafka-python and kfk encode different bytes"
        kp_cls = type(kp)
    encode_us = median_us(lambda: kfk.encode(version), repeat, min_time)
    encode_into_us = median_us(lambda: kfk.encode_into([], version), repeat, min_time)
    decode_us = median_us(lambda: cls.decode(wire, version), repeat, min_time)
    decode_view_us = median_us(lambda: cls.decode(view, version), repeat, min_time)
    kp_encode_us = kp_decode_us = None
    if kp is not None:
        kp_encode_us = median_us(lambda: kp.encode(version=version), repeat, min_time)
        kp_decode_us = median_us(lambda: kp_cls.decode(kp_wire, version=version), repeat, min_time)
    size = f"{len(wire) / KIB:,.0f} KiB"
    rows.append((label, size, "encode -> bytes", encode_us, kp_encode_us))
    rows.append((label, size, "encode_into (chunks, no join)", encode_into_us, kp_encode_us))
    rows.append((label, size, "decode (bytes)", decode_us, kp_decode_us))
    rows.append((label, size, "decode (memoryview, zero-copy records)", decode_view_us, kp_decode_us))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (smoke test)")
    args = parser.parse_args()
    repeat, min_time, help_runs = (3, 0.02, 3) if args.quick else (7, 0.2, 15)

    median, best, command = help_wall_time(help_runs)
    files, lines, size = generated_code_size()
    print(f"`{command} --help` wall time: median {median * 1000:.0f} ms, min {best * 1000:.0f} ms "
          f"over {help_runs} runs (target < 300 ms)")
    print(f"generated codec kfk/protocol/messages: {files} files, {lines:,} lines, {size / 1024:,.0f} KiB")
    print()

    rows = []
    rows += bench_message("ProduceRequest v9, 1 x 1 MiB", produce_request, repeat, min_time)
    rows += bench_message("FetchResponse v12, 10 x 100 KiB", fetch_response, repeat, min_time)
    rows += bench_message("MetadataResponse v12, 100 x 10", metadata_response, repeat, min_time)

    header = ("message", "wire", "operation", "kfk µs/op", "kafka-python µs/op", "ratio")
    table = [header]
    for label, wire_size, operation, ours, theirs in rows:
        table.append((
            label, wire_size, operation, f"{ours:,.1f}",
            "-" if theirs is None else f"{theirs:,.1f}",
            "-" if theirs is None else f"{theirs / ours:,.1f}x",
        ))
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for index, row in enumerate(table):
        print("  ".join(cell.ljust(w) if i < 3 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))))
        if index == 0:
            print("  ".join("-" * w for w in widths))
    print(f"\nPython {sys.version.split()[0]}; medians of {repeat} timeit repeats of >= {min_time} s each.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
