"""What the kfk.streams tests share: Apache Kafka Streams 4.4.0 (the oracle) compiled with the Java topologies of
tests/streams/java, one kfk broker per module, and reading a topic to the end."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from kfk.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from kfk.testing.apache_kafka import MavenUnavailable, cache_dir, compile_java, maven_jars
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES

KAFKA_STREAMS_VERSION = "4.4.0"
JAVA_SOURCES = Path(__file__).parent / "java"


@pytest.fixture(scope="session")
def streams_oracle() -> tuple[str, Path]:
    """Kafka Streams' classpath (kafka-streams from Maven Central, resolved once into the kfk cache) and the
    compiled StreamsOracle (compiled once per source change)."""
    try:
        jars = maven_jars(cache_dir() / "kafka-streams" / KAFKA_STREAMS_VERSION,
                          [("org.apache.kafka", "kafka-streams", KAFKA_STREAMS_VERSION),
                           ("org.slf4j", "slf4j-simple", "1.7.36")], f"Kafka Streams {KAFKA_STREAMS_VERSION}")
    except MavenUnavailable as error:  # CI always has Java and Maven: a failure, not a skip (as kfk.testing's)
        pytest.fail(f"Kafka Streams {KAFKA_STREAMS_VERSION} could not be resolved: {error}")
    classpath = ":".join(map(str, jars))
    return classpath, compile_java(JAVA_SOURCES, classpath)


@pytest.fixture(scope="module")
def streams_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("kfk-streams"), dict(TEST_OVERRIDES))
    yield broker
    code = broker.stop()
    assert code == 0, f"kfk broker exited with {code}:\n{broker.output()[-4000:]}"


def unique_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_input(bootstrap: str, topic: str, partitions: int, records: list[tuple[str, str | None]],
                 timestamps: list[int] | None = None) -> None:
    """The input topic, with `records` (key, value; None: a tombstone) in that order, at `timestamps` (default
    1000, 1001, ...)."""
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.create_topics([NewTopic(topic, partitions, 1)])[topic] is None
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for index, (key, value) in enumerate(records):
            timestamp = timestamps[index] if timestamps is not None else 1000 + index
            producer.send(topic, None if value is None else value.encode(), key.encode(), timestamp_ms=timestamp)


def read_topic(bootstrap: str, topic: str, count: int, timeout: float = 60) -> list:
    """The first `count` committed records of `topic` (read_committed, every partition), failing after `timeout`."""
    records: list = []
    with Consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed"}) as consumer:
        partitions = consumer.partitions_for(topic)
        consumer.assign([TopicPartition(topic, partition) for partition in partitions])
        consumer.seek_to_beginning(*[TopicPartition(topic, partition) for partition in partitions])
        deadline = time.monotonic() + timeout
        while len(records) < count and time.monotonic() < deadline:
            records.extend(consumer.poll(0.5))
    assert len(records) >= count, f"{topic}: {len(records)} records, expected {count}: {records}"
    return records


def read_to_end(bootstrap: str, topic: str, timeout: float = 60) -> list:
    """Every committed record of `topic` up to its current end (transaction markers take offsets too, so the
    positions, not a count, tell when the end is reached)."""
    records: list = []
    with Consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed"}) as consumer:
        partitions = [TopicPartition(topic, partition) for partition in consumer.partitions_for(topic)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        deadline = time.monotonic() + timeout
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            assert time.monotonic() < deadline, f"{topic}: not read to {ends} in {timeout} s"
            records.extend(consumer.poll(0.2))
    return records
