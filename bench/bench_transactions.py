"""Transaction benchmarks against a `kfk server start` subprocess, with confluent-kafka (librdkafka).

    python bench/bench_transactions.py [--megabytes 100] [--repeat 3]

Figures (medians over --repeat runs, each run on a fresh topic of the same broker):
- produce MB/s of 1 KiB records: idempotent (enable.idempotence, acks=all) next to transactional with 100 records
  per transaction and with 10,000 records per transaction (begin, produce, commit_transaction; the commit waits for
  the markers), and the transactional/idempotent ratios;
- commit latency: commit_transaction() of a 100-record transaction, p50 and p99 over every commit of the 100-record
  runs (it includes the flush of that transaction's last records, as an application sees it);
- consume MB/s of the 100-records-per-transaction topic with read_committed next to read_uncommitted (the
  read_committed consumer gets the aborted-transaction lists and skips the control batches).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.testing.broker import start_broker

RECORD = b"x" * 1024
PARTITIONS = 4
BROKER_OVERRIDES = {"transaction.state.log.num.partitions": "5", "offsets.topic.num.partitions": "5"}


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result arrives
    admin.create_topics([NewTopic(name, PARTITIONS, 1)])[name].result(30)


def produce_idempotent(bootstrap: str, topic: str, count: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    started = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, RECORD, partition=i % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0
    return time.perf_counter() - started


def produce_transactional(bootstrap: str, topic: str, count: int, per_transaction: int,
                          commit_latencies: list[float]) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-{topic}", "linger.ms": 5})
    producer.init_transactions(30)
    started = time.perf_counter()
    for first in range(0, count, per_transaction):
        producer.begin_transaction()
        for i in range(first, min(first + per_transaction, count)):
            while True:
                try:
                    producer.produce(topic, RECORD, partition=i % PARTITIONS)
                    break
                except BufferError:
                    producer.poll(0.01)
        committing = time.perf_counter()
        producer.commit_transaction(120)
        commit_latencies.append(time.perf_counter() - committing)
    return time.perf_counter() - started


def consume(bootstrap: str, topic: str, count: int, isolation_level: str) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.monotonic_ns()}",
                         "isolation.level": isolation_level, "enable.auto.commit": False,
                         "fetch.max.bytes": 50 * 1024 * 1024})
    consumer.assign([ConfluentTopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    seen = 0
    started = time.perf_counter()
    while seen < count:
        for message in consumer.consume(num_messages=10000, timeout=1.0):
            if message.error() is None:
                seen += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=100, help="MB produced per run")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    count = args.megabytes * 1024
    megabytes = count * len(RECORD) / 1e6
    figures: dict[str, list[float]] = {name: [] for name in (
        "idempotent", "txn 100", "txn 10000", "read_committed", "read_uncommitted")}
    commit_latencies: list[float] = []
    with tempfile.TemporaryDirectory() as directory:
        broker = start_broker(Path(directory), BROKER_OVERRIDES)
        try:
            bootstrap = broker.bootstrap_servers
            for run in range(args.repeat):
                for name, produce in (
                        ("idempotent", lambda topic: produce_idempotent(bootstrap, topic, count)),
                        ("txn 100", lambda topic: produce_transactional(bootstrap, topic, count, 100,
                                                                        commit_latencies)),
                        ("txn 10000", lambda topic: produce_transactional(bootstrap, topic, count, 10_000, []))):
                    topic = f"{name.replace(' ', '-')}-{run}"
                    create_topic(bootstrap, topic)
                    figures[name].append(megabytes / produce(topic))
                for isolation_level in ("read_committed", "read_uncommitted"):
                    elapsed = consume(bootstrap, f"txn-100-{run}", count, isolation_level)
                    figures[isolation_level].append(megabytes / elapsed)
        finally:
            broker.stop()
    medians = {name: statistics.median(values) for name, values in figures.items()}
    print(f"{'figure':<34}{'MB/s (median)':>14}   runs")
    for name, values in figures.items():
        label = {"idempotent": "produce idempotent", "txn 100": "produce transactional, 100/txn",
                 "txn 10000": "produce transactional, 10,000/txn", "read_committed": "consume read_committed",
                 "read_uncommitted": "consume read_uncommitted"}[name]
        print(f"{label:<34}{medians[name]:>14.1f}   {', '.join(f'{v:.1f}' for v in values)}")
    print(f"transactional/idempotent: 100/txn {medians['txn 100'] / medians['idempotent']:.2f}, "
          f"10,000/txn {medians['txn 10000'] / medians['idempotent']:.2f}; read_committed/read_uncommitted "
          f"{medians['read_committed'] / medians['read_uncommitted']:.2f}")
    print(f"commit_transaction latency (100 records/txn, {len(commit_latencies)} commits): "
          f"p50 {percentile(commit_latencies, 0.5) * 1000:.1f} ms, p99 {percentile(commit_latencies, 0.99) * 1000:.1f} ms")


if __name__ == "__main__":
    main()
