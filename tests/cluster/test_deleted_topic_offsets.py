"""A deleted topic takes its committed offsets with it, in every group, on kfk (ZooKeeper and KRaft) as on Apache
Kafka: the group coordinator writes offset tombstones to __consumer_offsets when the topic goes, so a topic created
again under the same name is read by the group from its reset policy (not from the old topic's offsets), a restart
(the coordinator reloading __consumer_offsets) does not bring them back, and `consumer-groups --describe` describes
the group instead of failing on the topic that is gone (as after kafka-streams-application-reset deletes an
application's internal topics).

Each test runs one single-node cluster: a kfk broker on ZooKeeper, a combined KRaft node, and Apache Kafka 4.0."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from kafka.admin import KafkaAdminClient

from kfk.testing.apache_kafka import run_kafka_tool
from kfk.testing.plugin import TEST_OVERRIDES
from tests.cluster.helpers import admin, wait_until

pytestmark = [pytest.mark.integration]

TOPIC = "recreated"
GROUP = "recreated-group"
#: What the group commits on the first topic: Apache Kafka's measured case.
COMMITTED = {0: 500, 1: 700}
RECORDS = 2000


@dataclass
class SingleNode:
    bootstrap_servers: str
    #: Stop the node cleanly and start it again on the same data (its coordinators reload their topics).
    restart: Callable[[], None]


@pytest.fixture(params=[pytest.param("zookeeper", marks=pytest.mark.zookeeper), "kraft", "apache-kafka"])
def node(request: pytest.FixtureRequest) -> SingleNode:
    if request.param == "apache-kafka":
        kafka = request.getfixturevalue("apache_kafka_factory")()

        def restart_kafka() -> None:
            kafka.stop()
            kafka.start()

        return SingleNode(kafka.bootstrap_server, restart_kafka)
    cluster = request.getfixturevalue("kfk_cluster_factory")(
        size=1, combined=True, overrides={**TEST_OVERRIDES, "default.replication.factor": "1"})

    def restart_kfk() -> None:
        cluster.stop(1)
        cluster.start([1])

    return SingleNode(cluster.broker(1).bootstrap_servers, restart_kfk)


@pytest.fixture
def kfk_metadata_mode(request: pytest.FixtureRequest) -> str:
    """The kfk cluster's backend is the `node` parameter (the fixture is only asked for on kfk's two)."""
    return request.node.callspec.params["node"]


def create_topic(bootstrap: str) -> None:
    """Two partitions, retried while the deleted topic of the same name is still being removed."""
    client = admin(bootstrap)  # held: a client that is collected fails its pending futures

    def created() -> bool:
        (future,) = client.create_topics([NewTopic(TOPIC, 2, 1)], operation_timeout=10).values()
        future.result(15)
        return True

    wait_until(created, timeout=30, what=f"topic {TOPIC} created")


def delete_topic(bootstrap: str) -> None:
    client = admin(bootstrap)
    (future,) = client.delete_topics([TOPIC], operation_timeout=10).values()
    future.result(15)


def committed_offsets(bootstrap: str) -> dict[tuple[str, int], int]:
    """The group's committed offsets, as OffsetFetch (all topics) answers kafka-python; raises while the coordinator
    loads. (confluent-kafka 2.16's list_consumer_group_offsets crashes the process when Apache Kafka has just
    restarted.)"""
    client = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
    try:
        offsets = client.list_group_offsets(GROUP)[GROUP]
    finally:
        client.close()
    return {(tp.topic, tp.partition): offset.offset for tp, offset in offsets.items()}


def commit_as_a_group_member(bootstrap: str) -> None:
    """A subscribed consumer (a classic group with its protocol) commits COMMITTED, then leaves."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + 30
        while len(consumer.assignment()) < len(COMMITTED) and time.monotonic() < deadline:
            consumer.poll(0.2)
        assert len(consumer.assignment()) == len(COMMITTED)
        consumer.commit(offsets=[TopicPartition(TOPIC, partition, offset)
                                 for partition, offset in COMMITTED.items()], asynchronous=False)
    finally:
        consumer.close()


def wait_until_offsets_gone(bootstrap: str) -> None:
    """The deletion reaches the coordinator as metadata after DeleteTopics answers; its tombstones follow."""
    wait_until(lambda: not any(topic == TOPIC for topic, _ in committed_offsets(bootstrap)), timeout=30,
               what=f"group {GROUP}'s offsets of the deleted topic {TOPIC} gone")


def produce(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for index in range(RECORDS):
        producer.produce(TOPIC, f"value-{index}".encode(), partition=index % 2)
    assert producer.flush(30) == 0


def consume_as_the_group(bootstrap: str, timeout: float = 30.0) -> list[bytes]:
    """What a consumer of the group reads of the topic (stopping at RECORDS, or at `timeout`)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 10000})
    values: list[bytes] = []
    try:
        consumer.subscribe([TOPIC])
        deadline = time.monotonic() + timeout
        while len(values) < RECORDS and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=500, timeout=0.5):
                if message.error() is None:
                    values.append(message.value())
    finally:
        consumer.close()
    return values


def test_a_group_reads_a_topic_created_again_from_the_start_not_from_the_deleted_topics_offsets(
        node: SingleNode) -> None:
    bootstrap = node.bootstrap_servers
    create_topic(bootstrap)
    commit_as_a_group_member(bootstrap)
    assert committed_offsets(bootstrap) == {(TOPIC, partition): offset for partition, offset in COMMITTED.items()}
    delete_topic(bootstrap)
    wait_until_offsets_gone(bootstrap)

    # The tombstones are in __consumer_offsets: a reload of the group does not find the old offsets.
    node.restart()  # on the same port
    (offsets,) = wait_until(lambda: [committed_offsets(bootstrap)], timeout=60, what=f"group {GROUP} loaded")
    assert offsets == {}

    create_topic(bootstrap)
    produce(bootstrap)
    values = consume_as_the_group(bootstrap)
    assert len(values) == RECORDS  # kfk kept the old offsets: 800, the first 500 and 700 of the partitions skipped
    assert sorted(values) == sorted(f"value-{index}".encode() for index in range(RECORDS))


def test_consumer_groups_describe_a_group_whose_topic_was_deleted(node: SingleNode) -> None:
    bootstrap = node.bootstrap_servers
    create_topic(bootstrap)
    commit_as_a_group_member(bootstrap)
    delete_topic(bootstrap)

    def described() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kfk", "consumer-groups", "--bootstrap-server", bootstrap,
                               "--describe", "--group", GROUP], capture_output=True, text=True, timeout=60)

    # The deletion reaches the coordinator after DeleteTopics answers: describe until it no longer fails.
    deadline = time.monotonic() + 30
    result = described()
    while result.returncode != 0 and time.monotonic() < deadline:
        time.sleep(0.5)
        result = described()
    assert result.returncode == 0, result.stdout + result.stderr  # before: UNKNOWN_TOPIC_OR_PARTITION
    no_members = f"\nConsumer group '{GROUP}' has no active members.\n"  # kafka-consumer-groups.sh's words
    assert (result.stdout, result.stderr) == ("", no_members)

    # Kafka's own tool, against kfk as against Apache Kafka: no offsets to show, the group has no members.
    kafka_tool = run_kafka_tool("consumer-groups", ["--bootstrap-server", bootstrap, "--describe", "--group", GROUP])
    assert (kafka_tool.returncode, kafka_tool.stdout, kafka_tool.stderr) == (0, "", no_members)
