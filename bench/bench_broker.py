"""Broker benchmarks: the append path in process, real clients against a broker subprocess, and start-up time.

    python bench/bench_broker.py [--megabytes 200] [--startup-gib 1] [--skip-startup]

Figures (printed as tables):
- append path: ReplicaManager.append_records of one 64 KiB / 256 KiB / 1 MiB batch, on the event loop versus in the
  default executor, for a plain append (kept on the loop) and one the topic's codec (lz4) makes re-encode (sent to
  the executor), in ms per append and MB/s: the measurements behind the broker's choice.
- clients: confluent-kafka (librdkafka) producing `--megabytes` of 1 KiB records (acks=1, compression none and lz4,
  1 and 8 partitions) to a `kfk server start` subprocess, then a plain assign() consumer reading them back; MB/s of
  record values and records/s, measured from the first send to the last delivery report (produce) and from assign
  to the last record (consume). The confluent-kafka consumer is bound by Python's per-record work; the kcat column
  reads the same data with librdkafka alone, which is closer to what the broker's zero-copy fetch path sustains.
- start-up: seconds from process start to the ready line, on an empty data dir and on one holding `--startup-gib`
  GiB of log, after a clean stop and after kill -9 (recovery from the last recovery point).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.common.structs import TopicPartition
from kfk.config import BrokerConfig
from kfk.metadata.cache import MetadataCache
from kfk.protocol.metadata_records import schema_class
from kfk.records import MemoryRecordsBuilder
from kfk.replication.replica_manager import ReplicaManager
from kfk.storage.log_manager import LogManager
from kfk.testing.broker import BrokerProcess, start_broker

MIB = 1024 * 1024
RECORD_SIZE = 1024
BROKER_OVERRIDES = {"offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
                    "transaction.state.log.min.isr": "1"}


# -- append path, in process ------------------------------------------------------------------------------------------


def build_batch(size: int) -> bytes:
    builder = MemoryRecordsBuilder(partition_leader_epoch=0)
    payload = os.urandom(RECORD_SIZE // 2) * 2
    while builder.estimated_size_in_bytes() + RECORD_SIZE + 16 <= size:
        builder.append(1_700_000_000_000, None, payload)
    return bytes(builder.close())


class _Placed(ReplicaManager):
    """A replica manager whose appends all run in one place, to compare the two."""

    in_executor = False

    def _append_off_loop(self, log, records) -> bool:
        return self.in_executor


def append_path(sizes: list[int], rounds: int = 5) -> list[tuple[str, str, str, float, float]]:
    rows = []
    for codec in ("producer", "lz4"):
        for size in sizes if codec == "producer" else sizes[-1:]:
            batch = build_batch(size)
            count = max(20, 32 * MIB // size) if codec == "producer" else 20
            for label, in_executor in (("event loop", False), ("executor", True)):
                best = float("inf")
                for _ in range(rounds):
                    root = tempfile.mkdtemp(prefix="kfk-bench-append-")
                    try:
                        best = min(best, asyncio.run(_appends(root, batch, count, in_executor, codec)))
                    finally:
                        shutil.rmtree(root, ignore_errors=True)
                rows.append((f"{size // 1024} KiB", "as sent" if codec == "producer" else "re-encoded to lz4",
                             label, best * 1000, size / best / 1e6))
    return rows


async def _appends(root: str, batch: bytes, count: int, in_executor: bool, codec: str) -> float:
    config = BrokerConfig({"process.roles": "broker", "node.id": "1", "log.dirs": root})
    log_manager = LogManager(config.log_dir_list, config.log_config())
    log_manager.startup(0)
    manager = _Placed(1, config, log_manager, lambda: int(time.time() * 1000))
    manager.in_executor = in_executor
    cache = MetadataCache()
    cache.subscribe(manager.on_metadata_update)
    topic_id = uuid.uuid4()
    cache.handle_commit([schema_class("TopicRecord")(name="bench", topic_id=topic_id),
                         schema_class("PartitionRecord")(partition_id=0, topic_id=topic_id, replicas=[1], isr=[1],
                                                         leader=1, leader_epoch=0, partition_epoch=0),
                         schema_class("ConfigRecord")(resource_type=2, resource_name="bench",
                                                      name="compression.type", value=codec)], 3)
    topic_partition = TopicPartition("bench", 0)
    start = time.perf_counter()
    for _ in range(count):
        await manager.append_records(1000, 1, {topic_partition: batch})
    elapsed = (time.perf_counter() - start) / count
    await manager.shutdown()
    log_manager.shutdown()
    return elapsed


# -- real clients against a broker subprocess ---------------------------------------------------------------------


# `security`: more client settings (security.protocol, ssl.*) for the TLS figures of bench_tls.py.


def create_topic(bootstrap: str, name: str, partitions: int, security: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **(security or {})})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def produce(bootstrap: str, topic: str, count: int, compression: str, security: dict[str, str] | None = None) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "compression.type": compression,
                         "linger.ms": 5, "queue.buffering.max.messages": 1_000_000,
                         "queue.buffering.max.kbytes": 1_048_576, **(security or {})})
    value = os.urandom(RECORD_SIZE // 4) * 4
    failures = []

    def delivered(error, message) -> None:
        if error is not None:
            failures.append(error)

    start = time.perf_counter()
    for index in range(count):
        while True:
            try:
                producer.produce(topic, value, key=str(index).encode(), on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
        if index % 10_000 == 0:
            producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"{len(failures)} deliveries failed, first: {failures[0]}")
    return elapsed


def consume(bootstrap: str, topic: str, partitions: int, count: int, security: dict[str, str] | None = None) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False,
                         "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760, **(security or {})})
    start = time.perf_counter()
    consumer.assign([ConfluentTopicPartition(topic, partition, 0) for partition in range(partitions)])
    received = 0
    deadline = time.monotonic() + 300
    while received < count and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None:
                received += 1
    elapsed = time.perf_counter() - start
    consumer.close()
    if received < count:
        raise RuntimeError(f"consumed {received} of {count}")
    return elapsed


def consume_with_kcat(bootstrap: str, topic: str, megabytes: float, security: dict[str, str] | None = None) -> float:
    """MB/s of the same read by kcat (librdkafka in C, no Python per record): what the broker's fetch path
    sustains when the consumer is not the bottleneck (kcat's start-up included)."""
    start = time.perf_counter()
    subprocess.run(["kcat", "-b", bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%o\\n",
                    "-X", "fetch.max.bytes=52428800", "-X", "max.partition.fetch.bytes=10485760",
                    *(argument for key, value in (security or {}).items() for argument in ("-X", f"{key}={value}"))],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, timeout=300)
    return megabytes / (time.perf_counter() - start)


def clients(megabytes: int) -> list[tuple[str, int, str, float, float, float, float, float | None]]:
    rows = []
    count = megabytes * MIB // RECORD_SIZE
    root = Path(tempfile.mkdtemp(prefix="kfk-bench-clients-"))
    broker = start_broker(root, BROKER_OVERRIDES)
    try:
        for partitions in (1, 8):
            for compression in ("none", "lz4"):
                topic = f"bench-{partitions}-{compression}"
                create_topic(broker.bootstrap_servers, topic, partitions)
                produce_s = produce(broker.bootstrap_servers, topic, count, compression)
                consume_s = consume(broker.bootstrap_servers, topic, partitions, count)
                volume = count * RECORD_SIZE / 1e6
                kcat = consume_with_kcat(broker.bootstrap_servers, topic, volume) \
                    if shutil.which("kcat") else None
                rows.append(("acks=1", partitions, compression, volume / produce_s, count / produce_s,
                             volume / consume_s, count / consume_s, kcat))
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    return rows


# -- start-up -------------------------------------------------------------------------------------------------------


def timed_start(broker: BrokerProcess) -> float:
    start = time.perf_counter()
    broker.start(timeout=600)
    return time.perf_counter() - start


def startup(gibibytes: float) -> list[tuple[str, float]]:
    """Empty dir; then `gibibytes` produced and the broker killed before any checkpoint, so the restart recovers
    (re-scans) the whole log; then a clean stop and a start that trusts the clean-shutdown marker."""
    rows = []
    root = Path(tempfile.mkdtemp(prefix="kfk-bench-startup-"))
    broker = BrokerProcess(log_dir=root / "data", overrides=dict(BROKER_OVERRIDES), log_path=root / "broker.log")
    try:
        rows.append(("empty data dir (formats it)", timed_start(broker)))
        broker.stop()
        rows.append(("empty data dir, formatted", timed_start(broker)))
        count = int(gibibytes * 1024 * MIB // RECORD_SIZE)
        create_topic(broker.bootstrap_servers, "startup", 1)
        produce(broker.bootstrap_servers, "startup", count, "none")
        broker.kill()
        size = sum(f.stat().st_size for f in (root / "data").rglob("*.log"))
        rows.append((f"{size / 2**30:.2f} GiB log, after kill -9 (recovery)", timed_start(broker)))
        broker.stop()
        rows.append((f"{size / 2**30:.2f} GiB log, after a clean stop", timed_start(broker)))
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=200, help="MB of 1 KiB records per client run")
    parser.add_argument("--startup-gib", type=float, default=1.0, help="GiB of log for the start-up figure")
    parser.add_argument("--skip-startup", action="store_true")
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs\n")

    print("append path (ReplicaManager.append_records, one batch of 1 KiB records, best of 5)")
    print(f"{'batch':>8} {'records':>18} {'where':>11} {'ms/append':>10} {'MB/s':>8}")
    for size, kind, where, ms, rate in append_path([64 * 1024, 256 * 1024, MIB]):
        print(f"{size:>8} {kind:>18} {where:>11} {ms:>10.3f} {rate:>8.0f}")

    print(f"\nconfluent-kafka {__import__('confluent_kafka').libversion()[0]} against a kfk broker subprocess, "
          f"{args.megabytes} MB of 1 KiB records")
    print(f"{'acks':>6} {'parts':>5} {'codec':>6} {'produce MB/s':>13} {'records/s':>10} {'consume MB/s':>13} "
          f"{'records/s':>10} {'kcat MB/s':>10}")
    for acks, partitions, codec, p_mb, p_rec, c_mb, c_rec, kcat in clients(args.megabytes):
        kcat_text = "-" if kcat is None else f"{kcat:.1f}"
        print(f"{acks:>6} {partitions:>5} {codec:>6} {p_mb:>13.1f} {p_rec:>10.0f} {c_mb:>13.1f} {c_rec:>10.0f} "
              f"{kcat_text:>10}")

    if not args.skip_startup:
        print("\nbroker start-up (process start to ready line)")
        for label, seconds in startup(args.startup_gib):
            print(f"{label:>40} {seconds:8.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
