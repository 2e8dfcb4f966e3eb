"""Share groups (KIP-932) against a classic consumer group: records/s consumed from ONE partition by 1, 4 and 8
members of a share group and by the one consumer of a classic group, on kfk and on Apache Kafka in the same run.

    python bench/bench_share.py [--records 20000] [--record-bytes 100] [--members 1,4,8] [--repeat 1]
                                [--brokers kfk,kafka]

The point of share groups: a partition's records spread over many members (a classic group gives a partition to
one consumer only). Every member is kfk's own client in a process of its own (kfk.client.ShareConsumer, implicit
acknowledgement: each record accepted at the member's next poll; kfk.client.Consumer for the classic group), so the
same client code reads from both brokers. Each figure is a new group reading the same --records records from
offset 0 (a share group's start offset set with AlterShareGroupOffsets before any member joins; the classic
consumer with auto.offset.reset=earliest). The time runs from the moment every member is ready to the moment the
group's count reached --records: share members have joined by then (their assignment received, heartbeats being
what a share group's join is), the classic consumer joins in its first poll (JoinGroup and SyncGroup, no initial
rebalance delay: a few round trips, counted). Process start-up is left out. Apache Kafka runs as kfk.testing
starts it (share groups on, the share coordinator's state topic with one replica), with kafka-run-class.sh's JVM
options and a 1 GB heap.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from kfk.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from kfk.client.share_consumer import ShareConsumer
from kfk.testing.apache_kafka import KAFKA_JVM_OPTIONS, ApacheKafka
from kfk.testing.broker import start_broker

#: One broker: the internal topics with one replica (the share coordinator's state topic too), no rebalance delay.
BROKER_SETTINGS = {"offsets.topic.replication.factor": "1", "share.coordinator.state.topic.replication.factor": "1",
                   "share.coordinator.state.topic.min.isr": "1", "group.initial.rebalance.delay.ms": "0"}
CLASSIC = "classic group, 1 consumer"


@contextmanager
def kfk_broker() -> Iterator[str]:
    broker = start_broker(tempfile.mkdtemp(prefix="bench-share-kfk-"), dict(BROKER_SETTINGS))
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


@contextmanager
def kafka_broker() -> Iterator[str]:
    node = ApacheKafka(tempfile.mkdtemp(prefix="bench-share-kafka-"), config=dict(BROKER_SETTINGS),
                       jvm_options=KAFKA_JVM_OPTIONS).start()
    try:
        yield node.bootstrap_server
    finally:
        node.stop()


BROKERS: dict[str, Callable] = {"kfk": kfk_broker, "kafka": kafka_broker}


def share_group_from_offset_zero(bootstrap: str, group: str, topic: str, timeout: float = 60.0) -> None:
    """Create the share group with its start offset at 0 (retried while Apache Kafka's share coordinator, created
    with the first share group, is not ready yet)."""
    deadline = time.monotonic() + timeout
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        while True:
            try:
                error = admin.alter_share_group_offsets(group, {TopicPartition(topic, 0): 0})[TopicPartition(topic, 0)]
            except Exception as raised:  # noqa: BLE001 (the coordinator loading: any error is retried until timeout)
                error = raised
            if error is None:
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"share group {group} could not be set to offset 0: {error}")
            time.sleep(0.2)


def prepare(bootstrap: str, records: int, record_bytes: int) -> str:
    """A one-partition topic holding `records` records of `record_bytes` bytes."""
    topic = f"bench-share-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    value = os.urandom(record_bytes)
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        for _ in range(records):
            producer.send(topic, value)
        producer.flush()
    return topic


def member(bootstrap: str, topic: str, group: str, share: bool, total: int, consumed: Any, joined: Any) -> None:
    """One member (in a process of its own): poll until the group has consumed `total` records."""
    config = {"bootstrap.servers": bootstrap, "group.id": group}
    consumer: Any = (ShareConsumer(config) if share
                     else Consumer({**config, "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 120
        while share and not consumer.assignment():  # the assignment arrives with a heartbeat's answer
            if time.monotonic() > deadline:
                raise RuntimeError("no assignment after 120 s")
            time.sleep(0.05)
        joined.wait()
        while consumed.value < total:
            records = consumer.poll(0.5)
            if records:
                with consumed.get_lock():
                    consumed.value += len(records)
    finally:
        consumer.close()


def rate(bootstrap: str, topic: str, members: int, share: bool, total: int) -> float:
    """Records/s the group's `members` members (or the classic group's one consumer) read."""
    context = multiprocessing.get_context("spawn")  # no client threads of this process carried into the members
    group = f"bench-share-{'share' if share else 'classic'}-{uuid.uuid4().hex[:8]}"
    if share:
        share_group_from_offset_zero(bootstrap, group, topic)
    consumed = context.Value("q", 0)
    joined = context.Barrier(members + 1)
    processes = [context.Process(target=member, args=(bootstrap, topic, group, share, total, consumed, joined))
                 for _ in range(members)]
    for process in processes:
        process.start()
    joined.wait(timeout=300)
    started = time.monotonic()
    while consumed.value < total:
        if not any(process.is_alive() for process in processes):
            raise RuntimeError(f"the members ended after {consumed.value} of {total} records")
        time.sleep(0.005)
    elapsed = time.monotonic() - started
    for process in processes:
        process.join(60)
    return total / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--members", default="1,4,8", help="share group sizes, comma-separated")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--brokers", default="kfk,kafka")
    args = parser.parse_args()
    brokers = [name.strip() for name in args.brokers.split(",") if name.strip()]
    sizes = [int(size) for size in args.members.split(",")]
    rows = [CLASSIC] + [f"share group, {size} consumer{'s' if size > 1 else ''}" for size in sizes]
    figures: dict[tuple[str, str], list[float]] = {}
    for broker in brokers:
        with BROKERS[broker]() as bootstrap:
            topic = prepare(bootstrap, args.records, args.record_bytes)
            rate(bootstrap, topic, 1, True, 1)  # untimed: Apache Kafka's share coordinator state topic created
            for _ in range(args.repeat):
                figures.setdefault((broker, CLASSIC), []).append(rate(bootstrap, topic, 1, False, args.records))
                for size, row in zip(sizes, rows[1:]):
                    figures.setdefault((broker, row), []).append(rate(bootstrap, topic, size, True, args.records))
    print(f"\nRecords/s consumed from one partition ({args.records:,} records of {args.record_bytes} B, kfk's "
          f"client, one process per member; median of {args.repeat}; load average {os.getloadavg()[0]:.1f}):")
    ratio = brokers[:2] == ["kfk", "kafka"]
    print(f"{'':<28}" + "".join(f"{broker:>10}" for broker in brokers) + (f"{'kfk/kafka':>11}" if ratio else ""))
    for row in rows:
        medians = [statistics.median(figures[(broker, row)]) for broker in brokers]
        print(f"{row:<28}" + "".join(f"{median:>10,.0f}" for median in medians)
              + (f"{medians[0] / medians[1]:>11.2f}" if ratio else ""))


if __name__ == "__main__":
    main()
