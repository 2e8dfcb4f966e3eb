"""Consumer group benchmarks against a `kfk server start` subprocess.

    python bench/bench_groups.py [--repeat 3] [--commits 2000]

Figures (printed as tables, medians over --repeat runs):
- rebalance latency after a graceful leave: a group of 3 and of 20 confluent-kafka consumers (2 partitions each),
  stable and consuming a steady stream (one record per partition every 10 ms); one member closes (LeaveGroup).
  "reassigned" is the time from close() until the remaining members own every partition again; "consuming" until
  each partition the leaver owned has delivered a record to its new owner. Clients learn of a rebalance from their
  next heartbeat, so heartbeat.interval.ms (100 here) bounds part of it; group.initial.rebalance.delay.ms only
  applies to empty groups and does not.
- commit throughput with one client: synchronous OffsetCommits (one partition each, the next sent when the previous
  is answered, i.e. committed to __consumer_offsets) with confluent-kafka and with kafka-python, and asynchronous
  ones with confluent-kafka (fire and forget, then wait for the last), in commits/s.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.testing.broker import start_broker

BROKER_OVERRIDES = {"offsets.topic.replication.factor": "1", "group.initial.rebalance.delay.ms": "0"}
HEARTBEAT_INTERVAL_MS = 100


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


class SteadyProducer(threading.Thread):
    """One record per partition every `interval_s`, until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, interval_s: float = 0.01) -> None:
        super().__init__(daemon=True)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
        self.topic, self.partitions, self.interval_s = topic, partitions, interval_s
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            for partition in range(self.partitions):
                self.producer.produce(self.topic, b"x", partition=partition)
            self.producer.poll(0)
            time.sleep(self.interval_s)
        self.producer.flush(10)


def rebalance_latency(bootstrap: str, members: int, run: int) -> tuple[float, float]:
    topic, group = f"rebalance-{members}-{run}", f"bench-{members}-{run}"
    partitions = members * 2
    create_topic(bootstrap, topic, partitions)
    producer = SteadyProducer(bootstrap, topic, partitions)
    producer.start()
    consumers = [Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "latest",
                           "heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS, "session.timeout.ms": 10000,
                           "enable.auto.commit": False}) for _ in range(members)]
    for consumer in consumers:
        consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 60
        while not all(len(c.assignment()) == 2 for c in consumers):
            assert time.monotonic() < deadline, "the group did not stabilize"
            for c in consumers:
                c.poll(0.001)
        leaver, rest = consumers[0], consumers[1:]
        moved = {tp.partition for tp in leaver.assignment()}
        started = time.monotonic()
        leaver.close()
        reassigned_at = None
        consumed: dict[int, float] = {}
        while len(consumed) < len(moved):
            assert time.monotonic() - started < 60, "the group did not recover"
            for c in rest:
                message = c.poll(0.001)
                if message is not None and message.error() is None and message.partition() in moved:
                    consumed.setdefault(message.partition(), time.monotonic())
            if reassigned_at is None and sum(len(c.assignment()) for c in rest) == partitions:
                reassigned_at = time.monotonic()
        return (reassigned_at or max(consumed.values())) - started, max(consumed.values()) - started
    finally:
        producer.stopped.set()
        producer.join()
        for c in consumers[1:]:
            c.close()


def confluent_commits(bootstrap: str, count: int, asynchronous: bool) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"commits-{asynchronous}",
                         "enable.auto.commit": False})
    consumer.commit(offsets=[ConfluentTopicPartition("commits", 0, 0)], asynchronous=False)  # coordinator found
    started = time.perf_counter()
    for i in range(count):
        consumer.commit(offsets=[ConfluentTopicPartition("commits", 0, i + 1)], asynchronous=asynchronous)
    if asynchronous:
        while consumer.committed([ConfluentTopicPartition("commits", 0)], timeout=10)[0].offset != count:
            consumer.poll(0.001)
    elapsed = time.perf_counter() - started
    consumer.close()
    return count / elapsed


def kafka_python_commits(bootstrap: str, count: int) -> float:
    from kafka import KafkaConsumer
    from kafka.structs import OffsetAndMetadata, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id="commits-kafka-python",
                             enable_auto_commit=False)
    partition = TopicPartition("commits", 0)
    consumer.assign([partition])
    consumer.commit({partition: OffsetAndMetadata(0, "", -1)})
    started = time.perf_counter()
    for i in range(count):
        consumer.commit({partition: OffsetAndMetadata(i + 1, "", -1)})
    elapsed = time.perf_counter() - started
    consumer.close()
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--commits", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        broker = start_broker(Path(directory), BROKER_OVERRIDES)
        try:
            bootstrap = broker.bootstrap_servers
            print(f"rebalance latency after a graceful leave (heartbeat.interval.ms={HEARTBEAT_INTERVAL_MS}), "
                  f"median of {args.repeat}")
            print(f"{'members':>8} {'partitions':>11} {'reassigned ms':>14} {'consuming ms':>13}")
            for members in (3, 20):
                runs = [rebalance_latency(bootstrap, members, run) for run in range(args.repeat)]
                print(f"{members:>8} {members * 2:>11} {statistics.median(r[0] for r in runs) * 1000:>14.0f} "
                      f"{statistics.median(r[1] for r in runs) * 1000:>13.0f}")
            create_topic(bootstrap, "commits", 1)
            print(f"\ncommit throughput, one client, {args.commits} commits, median of {args.repeat}")
            print(f"{'client':<32} {'commits/s':>10}")
            rows = [
                ("confluent-kafka, synchronous", lambda: confluent_commits(bootstrap, args.commits, False)),
                ("confluent-kafka, asynchronous", lambda: confluent_commits(bootstrap, args.commits, True)),
                ("kafka-python, synchronous", lambda: kafka_python_commits(bootstrap, args.commits)),
            ]
            for name, measure in rows:
                print(f"{name:<32} {statistics.median(measure() for _ in range(args.repeat)):>10.0f}")
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
