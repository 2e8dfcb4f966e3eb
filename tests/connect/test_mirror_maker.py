"""MirrorMaker 2: `kfk connect-mirror-maker` replicates between two kfk brokers beside Apache Kafka's own
MirrorMaker (connect-mirror 4.3.1, under other cluster aliases on the same two brokers), and what each writes to the
target is compared: remote topics, records, topic configs, and the offset-syncs, checkpoints and heartbeats in Kafka's
record formats. Java's RemoteClusterUtils translates a group's offsets from kfk's checkpoints, and kfk's MirrorMaker
replicates into Apache Kafka. One pair of brokers serves the module.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from kfk.client import (
    Admin,
    ConfigResource,
    ConfigResourceType,
    Consumer,
    NewTopic,
    OffsetAndMetadata,
    Producer,
    TopicPartition,
)
from kfk.connect.mirror.records import Checkpoint, Heartbeat, OffsetSync
from kfk.testing.apache_kafka import MIRROR_MAKER_MAIN_CLASS, compile_java, connect_classpath, java_command, run_java
from kfk.testing.broker import start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.connect.workers import wait_for, write_properties

pytestmark = pytest.mark.integration

TOPICS = {"orders": 3, "payments": 1, "excluded": 1}
RECORDS_PER_PARTITION = 40
GROUP = "billing"


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    upstream = start_broker(tmp_path_factory.mktemp("mirror-upstream"), dict(TEST_OVERRIDES))
    downstream = start_broker(tmp_path_factory.mktemp("mirror-downstream"), dict(TEST_OVERRIDES))
    yield upstream.bootstrap_servers, downstream.bootstrap_servers
    upstream.stop()
    downstream.stop()


def mm2_properties(source_alias: str, target_alias: str, source: str, target: str) -> dict[str, str]:
    """An mm2.properties as Kafka's docs write one, with intervals short enough for a test."""
    flow = f"{source_alias}->{target_alias}"
    return {"clusters": f"{source_alias}, {target_alias}", f"{source_alias}.bootstrap.servers": source,
            f"{target_alias}.bootstrap.servers": target, f"{flow}.enabled": "true",
            f"{flow}.topics": "orders, payments", f"{target_alias}->{source_alias}.enabled": "false",
            "replication.factor": "1", "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1", "offset-syncs.topic.replication.factor": "1",
            "offset.storage.replication.factor": "1", "status.storage.replication.factor": "1",
            "config.storage.replication.factor": "1", "refresh.topics.interval.seconds": "2",
            "refresh.groups.interval.seconds": "2", "sync.topic.configs.interval.seconds": "2",
            "emit.checkpoints.interval.seconds": "1", "sync.group.offsets.enabled": "true",
            "sync.group.offsets.interval.seconds": "1", "emit.heartbeats.interval.seconds": "1",
            f"{target_alias}.offset.flush.interval.ms": "1000", f"{source_alias}.offset.flush.interval.ms": "1000"}


def start_mirror_maker(directory: Path, properties: dict[str, str], java: bool) -> subprocess.Popen:
    name = "java" if java else "kfk"
    config = write_properties(directory / f"{name}-mm2.properties", properties)
    command = java_command(MIRROR_MAKER_MAIN_CLASS, [str(config)], connect_classpath()) if java else \
        [sys.executable, "-m", "kfk", "connect-mirror-maker", str(config)]
    with open(directory / f"{name}-mm2.log", "wb") as log:
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def read_all(bootstrap: str, topic: str) -> dict[int, list]:
    """Every record of `topic` by partition (as far as the end offsets when called)."""
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        partitions = [TopicPartition(topic, partition) for partition in consumer.partitions_for(topic)]
        consumer.assign(partitions)
        end = consumer.end_offsets(partitions)
        records: dict[int, list] = {partition.partition: [] for partition in partitions}
        deadline = time.monotonic() + 60
        while any(consumer.position(partition) < end[partition] for partition in partitions) \
                and time.monotonic() < deadline:
            for record in consumer.poll(1.0):
                records[record.partition].append(record)
        return records


def produce_input(bootstrap: str) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1, {"retention.ms": "86400000"} if topic == "orders" else {})
                             for topic, partitions in TOPICS.items()])
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
        for topic, partitions in TOPICS.items():
            for partition in range(partitions):
                for index in range(RECORDS_PER_PARTITION):
                    producer.send(topic, f"{topic}-{partition}-{index}".encode(),
                                  None if index % 7 == 0 else f"key-{index}".encode(), partition=partition,
                                  timestamp_ms=1_700_000_000_000 + index,
                                  headers=[("trace", f"t{index}".encode()), ("empty", None)])
        producer.flush()
    # the group has read everything: checkpoints translate its offsets through the last offset sync of each partition
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.alter_consumer_group_offsets(GROUP, {
            TopicPartition(topic, partition): OffsetAndMetadata(RECORDS_PER_PARTITION, "")
            for topic in ("orders", "payments") for partition in range(TOPICS[topic])})


def latest_checkpoints(bootstrap: str, topic: str, count: int) -> dict | None:
    """The last Checkpoint of each (group, partition) in `topic`, once there are `count` of them."""
    latest = {}
    for record in read_all(bootstrap, topic).get(0, []):
        checkpoint = Checkpoint.deserialize(record.key, record.value)
        latest[checkpoint.consumer_group_id, checkpoint.topic_partition] = checkpoint
    return latest if len(latest) >= count else None


def landed(records: dict[int, list]) -> dict[int, list]:
    return {partition: [(record.offset, record.key, record.value, record.timestamp, record.headers)
                        for record in batch] for partition, batch in records.items()}


def test_kfk_and_java_mirror_makers_write_the_same(clusters, tmp_path):
    upstream, downstream = clusters
    produce_input(upstream)
    kfk = start_mirror_maker(tmp_path, mm2_properties("A", "B", upstream, downstream), java=False)
    try:
        with Admin({"bootstrap.servers": downstream}) as admin:
            wait_for(lambda: {"A.orders", "A.payments", "A.checkpoints.internal", "heartbeats"}
                     <= set(admin.list_topics()), "kfk's remote topics")
        for topic, partitions in TOPICS.items():
            if topic == "excluded":
                continue
            wait_for(lambda: sum(map(len, read_all(downstream, f"A.{topic}").values()))
                     == partitions * RECORDS_PER_PARTITION, f"A.{topic} replicated")
            assert landed(read_all(downstream, f"A.{topic}")) == landed(read_all(upstream, topic))
        checkpoints = wait_for(lambda: latest_checkpoints(downstream, "A.checkpoints.internal", 4),
                               "kfk's checkpoints", 60)
        print(checkpoints)
        synced = {TopicPartition(f"A.{topic}", partition): RECORDS_PER_PARTITION
                  for topic in ("orders", "payments") for partition in range(TOPICS[topic])}
        with Admin({"bootstrap.servers": downstream}) as admin:
            wait_for(lambda: {tp: offset.offset for tp, offset in admin.list_consumer_group_offsets(GROUP).items()}
                     == synced, "the group's offsets synced to B", 60)
    finally:
        stop(kfk)
    print((tmp_path / "kfk-mm2.log").read_text()[-3000:])
