"""Real clients produce to and consume from a kfk broker over real sockets: confluent-kafka (librdkafka 2.16) with
every codec and acks setting, idempotence, kafka-python with negotiated and old API versions (legacy message sets),
aiokafka, and kcat (librdkafka 2.0.2). Consumers are plain assign() consumers without a group (group APIs come
later): auto commit off, explicit start offsets."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections import defaultdict

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(15)


def produce_all(bootstrap: str, topic: str, messages: list[tuple[int, bytes, bytes, list]], **config) -> None:
    """Produce (partition, key, value, headers) tuples and wait for every delivery report."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **config})
    errors: list = []

    def delivered(error, _message) -> None:
        if error is not None:
            errors.append(error)

    for partition, key, value, headers in messages:
        producer.produce(topic, value, key=key, partition=partition, headers=headers, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert errors == []


def consume_all(bootstrap: str, topic: str, partitions: int, count: int, start: int = 0,
                timeout: float = 30.0, **config) -> dict[int, list]:
    """Read `count` records from `start` in every partition with an assign() consumer: per partition, in order,
    (offset, key, value, headers). `config` adds consumer settings (isolation.level...)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kfk-tests", "enable.auto.commit": False,
                         "enable.partition.eof": False, **config})
    consumer.assign([ConfluentTopicPartition(topic, partition, start) for partition in range(partitions)])
    received: dict[int, list] = defaultdict(list)
    total = 0
    deadline = time.monotonic() + timeout
    try:
        while total < count and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                if message.error() is not None:
                    raise KafkaException(message.error())
                received[message.partition()].append(
                    (message.offset(), message.key(), message.value(), message.headers() or []))
                total += 1
    finally:
        consumer.close()
    assert total == count, f"consumed {total} of {count}"
    return received


def messages_for(partitions: int, count: int, tag: str) -> list[tuple[int, bytes, bytes, list]]:
    return [(index % partitions, f"key-{index}".encode(), f"{tag}-value-{index}-".encode() * 3,
             [("index", str(index).encode()), ("tag", tag.encode())]) for index in range(count)]


def expected_by_partition(messages: list[tuple[int, bytes, bytes, list]]) -> dict[int, list]:
    by_partition: dict[int, list] = defaultdict(list)
    for partition, key, value, headers in messages:
        by_partition[partition].append((len(by_partition[partition]), key, value, headers))
    return by_partition


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_round_trip_with_every_codec_and_acks(kfk_broker: str, codec: str) -> None:
    for acks in ("0", "1", "all"):
        topic = f"roundtrip-{codec}-{acks}"
        create_topic(kfk_broker, topic, partitions=3)
        messages = messages_for(3, 10_000, f"{codec}{acks}")
        produce_all(kfk_broker, topic, messages, **{"acks": acks, "compression.type": codec})
        received = consume_all(kfk_broker, topic, 3, len(messages))
        assert dict(received) == expected_by_partition(messages), f"acks={acks}"


def test_confluent_kafka_idempotent_producer(kfk_broker: str) -> None:
    create_topic(kfk_broker, "idempotent", partitions=2)
    messages = messages_for(2, 5_000, "idem")
    produce_all(kfk_broker, "idempotent", messages, **{"enable.idempotence": True, "acks": "all",
                                                       "max.in.flight.requests.per.connection": 5})
    received = consume_all(kfk_broker, "idempotent", 2, len(messages))
    assert dict(received) == expected_by_partition(messages)


def test_kafka_python_round_trip_with_negotiated_versions(kfk_broker: str) -> None:
    kafka = pytest.importorskip("kafka")
    create_topic(kfk_broker, "kafka-python", partitions=2)
    producer = kafka.KafkaProducer(bootstrap_servers=kfk_broker, acks="all", compression_type="gzip",
                                   linger_ms=5)
    futures = [producer.send("kafka-python", key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % 2,
                             headers=[("h", b"x")]) for i in range(500)]
    producer.flush(30)
    assert [future.get(10).offset for future in futures[:4]] == [0, 0, 1, 1]
    producer.close()
    consumer = kafka.KafkaConsumer(bootstrap_servers=kfk_broker, enable_auto_commit=False,
                                   consumer_timeout_ms=10_000, group_id=None)
    partitions = [kafka.TopicPartition("kafka-python", p) for p in (0, 1)]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    received = defaultdict(list)
    for message in consumer:
        received[message.partition].append((message.offset, message.key, message.value, message.headers))
        if sum(len(v) for v in received.values()) == 500:
            break
    consumer.close()
    for partition in (0, 1):
        assert received[partition] == [(n, f"k{i}".encode(), f"v{i}".encode(), [("h", b"x")])
                                       for n, i in enumerate(range(partition, 500, 2))]


@pytest.mark.parametrize("api_version", [(0, 10, 1), (0, 9)], ids=["0.10.1-magic1", "0.9-magic0"])
def test_kafka_python_with_an_old_api_version_uses_legacy_message_sets(kfk_broker: str, api_version) -> None:
    kafka = pytest.importorskip("kafka")
    topic = "legacy-" + "-".join(map(str, api_version))
    create_topic(kfk_broker, topic)
    producer = kafka.KafkaProducer(bootstrap_servers=kfk_broker, api_version=api_version, acks=1,
                                   compression_type="gzip", linger_ms=5)
    for index in range(200):
        producer.send(topic, key=f"k{index}".encode(), value=f"v{index}".encode())
    producer.flush(30)
    producer.close()
    consumer = kafka.KafkaConsumer(bootstrap_servers=kfk_broker, api_version=api_version, enable_auto_commit=False,
                                   consumer_timeout_ms=10_000, group_id=None)
    partition = kafka.TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek(partition, 0)
    received = []
    for message in consumer:
        received.append((message.offset, message.key, message.value))
        if len(received) == 200:
            break
    consumer.close()
    assert received == [(i, f"k{i}".encode(), f"v{i}".encode()) for i in range(200)]
    # What the old producer sent is stored as v2 batches: a current client reads the same records.
    modern = consume_all(kfk_broker, topic, 1, 200)
    assert [(offset, key, value) for offset, key, value, _ in modern[0]] == received


def test_aiokafka_round_trip(kfk_broker: str) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    create_topic(kfk_broker, "aiokafka")

    async def scenario() -> list:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=kfk_broker, acks="all", compression_type="lz4")
        await producer.start()
        try:
            for index in range(300):
                await producer.send("aiokafka", key=f"k{index}".encode(), value=f"v{index}".encode(),
                                    headers=[("n", str(index).encode())])
            await producer.flush()
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=kfk_broker, enable_auto_commit=False)
        await consumer.start()
        try:
            partition = aiokafka.TopicPartition("aiokafka", 0)
            consumer.assign([partition])
            consumer.seek(partition, 0)
            received = []
            while len(received) < 300:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 15)
                for messages in batch.values():
                    received += [(m.offset, m.key, m.value, list(m.headers)) for m in messages]
            return received
        finally:
            await consumer.stop()

    assert asyncio.run(scenario()) == [(i, f"k{i}".encode(), f"v{i}".encode(), [("n", str(i).encode())])
                                       for i in range(300)]


def test_kcat_produces_and_consumes(kfk_broker: str) -> None:
    create_topic(kfk_broker, "kcat")
    lines = [f"key{i}:value {i}" for i in range(100)]
    subprocess.run(["kcat", "-b", kfk_broker, "-P", "-t", "kcat", "-p", "0", "-K", ":", "-z", "snappy"],
                   input="\n".join(lines) + "\n", text=True, check=True, timeout=30, capture_output=True)
    result = subprocess.run(["kcat", "-b", kfk_broker, "-C", "-t", "kcat", "-p", "0", "-o", "beginning", "-e",
                             "-f", "%o %k %s\n"], text=True, check=True, timeout=30, capture_output=True)
    assert result.stdout.splitlines() == [f"{i} key{i} value {i}" for i in range(100)]


def test_kcat_with_a_0_9_fallback_speaks_legacy_versions(kfk_broker: str) -> None:
    """librdkafka told the broker is 0.9 (no ApiVersions): Produce v1 with magic 0 message sets, Fetch v1 (answered
    down-converted to magic 0) and ListOffsets v0."""
    create_topic(kfk_broker, "kcat-legacy")
    legacy = ["-X", "api.version.request=false", "-X", "broker.version.fallback=0.9.0"]
    lines = [f"key{i}:old {i}" for i in range(50)]
    subprocess.run(["kcat", "-b", kfk_broker, *legacy, "-P", "-t", "kcat-legacy", "-p", "0", "-K", ":"],
                   input="\n".join(lines) + "\n", text=True, check=True, timeout=30, capture_output=True)
    result = subprocess.run(["kcat", "-b", kfk_broker, *legacy, "-C", "-t", "kcat-legacy", "-p", "0", "-o",
                             "beginning", "-e", "-f", "%o %k %s\n"], text=True, check=True, timeout=30,
                            capture_output=True)
    assert result.stdout.splitlines() == [f"{i} key{i} old {i}" for i in range(50)]
    assert [value for _, _, value, _ in consume_all(kfk_broker, "kcat-legacy", 1, 50)[0]] == \
        [f"old {i}".encode() for i in range(50)]
