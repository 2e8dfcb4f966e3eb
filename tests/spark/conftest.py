"""Fixtures of the Spark tests: one local SparkSession for the whole test session (local[2], started once: a JVM
takes seconds), topics filled by confluent-kafka with delivery reports kept as the expected rows, and a fake Java
that tells whether anything tried to start the JVM."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest


class Produced(NamedTuple):
    partition: int
    offset: int
    key: bytes
    value: bytes
    headers: tuple[tuple[str, bytes], ...]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The session has Spark's own Kafka source too (spark.read.format("kafka")), to compare kfk's with."""
    pytest.importorskip("pyspark")
    from kfk.spark.environment import check_java, create_session
    from kfk.testing.apache_kafka import MavenUnavailable
    from kfk.testing.spark_kafka import spark_kafka_connector

    check_java()
    try:
        connector = spark_kafka_connector()
    except MavenUnavailable as error:
        pytest.fail(f"Spark's Kafka connector could not be resolved: {error}")
    session = create_session("local[2]", "kfk tests", {
        "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
        "spark.driver.memory": "1g", "spark.sql.streaming.stopTimeout": "30s", "spark.jars": connector.spark_jars})
    yield session
    session.stop()


def create_topic(bootstrap: str, topic: str, partitions: int = 3) -> None:
    from kfk.client import Admin, NewTopic

    with Admin({"bootstrap.servers": bootstrap}) as admin:
        outcome = admin.create_topics([NewTopic(topic, partitions, 1)])
        assert outcome[topic] is None, outcome


def produce_json(bootstrap: str, topic: str, first_id: int, count: int,
                 codecs: tuple[str, ...] = ("lz4", "zstd")) -> list[Produced]:
    """``count`` JSON records with keys and headers, an equal share compressed with each codec (one producer per
    codec, so each batch is of one codec); returns what the broker acknowledged, offsets included."""
    import confluent_kafka

    produced: list[Produced] = []
    share = count // len(codecs)
    for index, codec in enumerate(codecs):
        low = first_id + index * share
        high = first_id + count if index == len(codecs) - 1 else low + share
        producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                                             "linger.ms": 20, "enable.idempotence": True})

        def delivered(error: Any, message: Any) -> None:
            assert error is None, error
            # Delivery reports carry no headers: they are rebuilt from the key, as they were written.
            number = message.key()[len(b"key-"):]
            produced.append(Produced(message.partition(), message.offset(), message.key(), message.value(),
                                     (("source", b"test"), ("n", number))))

        for number in range(low, high):
            value = json.dumps({"id": number, "name": f"user-{number}", "score": number % 97 / 4}).encode()
            producer.produce(topic, value, key=f"key-{number}".encode(),
                             headers=[("source", b"test"), ("n", str(number).encode())], on_delivery=delivered)
            if number % 2000 == 0:
                producer.poll(0)
        assert producer.flush(30) == 0
    assert len(produced) == count
    return produced


@pytest.fixture
def fake_java(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """JAVA_HOME pointing at a `java` that only leaves a mark: if a command touches Java, the mark shows it."""
    home = tmp_path / "fake-jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    marker = tmp_path / "java-was-run"
    java.write_text(f'#!/bin/sh\ntouch {marker}\necho \'openjdk version "11.0.2" 2019-01-15\' >&2\n')
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("JAVA_HOME", str(home))
    return marker

