"""kfk's client with the real clients: kfk Producer -> confluent-kafka (librdkafka) and kafka-python consumers and
the reverse, librdkafka's murmur2_random choosing the same partitions as kfk, and a mixed consumer group."""

from __future__ import annotations

import random
import time

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonTopicPartition

from kfk.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from kfk.client.producer import partition_for_key

pytestmark = pytest.mark.integration

COUNT = 2000


def create(bootstrap: str, topic: str, partitions: int) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.create_topics([NewTopic(topic, partitions, 1)]) == {topic: None}


def expected_records(count: int = COUNT) -> list[tuple[bytes, bytes, list]]:
    return [(f"key-{n % 97}".encode(), f"value-{n}".encode() * (1 + n % 5), [("n", str(n).encode())])
            for n in range(count)]


def produce_with_kfk(bootstrap: str, topic: str, codec: str = "lz4") -> None:
    with Producer({"bootstrap.servers": bootstrap, "compression.type": codec}) as producer:
        for key, value, headers in expected_records():
            producer.send(topic, value, key=key, headers=headers)


def by_partition(records: list[tuple[int, bytes, bytes, list]]) -> dict[int, list[tuple[bytes, bytes, list]]]:
    result: dict[int, list] = {}
    for partition, key, value, headers in records:
        result.setdefault(partition, []).append((key, value, headers))
    return result


def expected_by_partition(partitions: int) -> dict[int, list]:
    return by_partition([(partition_for_key(key, partitions), key, value, headers)
                         for key, value, headers in expected_records()])


def test_kfk_producer_to_confluent_consumer(bootstrap: str, topic_name: str) -> None:
    create(bootstrap, topic_name, 3)
    produce_with_kfk(bootstrap, topic_name, "zstd")
    consumer = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic_name}",
                                  "enable.auto.commit": False})
    consumer.assign([ConfluentTopicPartition(topic_name, p, 0) for p in range(3)])
    records = []
    deadline = time.monotonic() + 20
    while len(records) < COUNT and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        assert message.error() is None, message.error()
        records.append((message.partition(), message.key(), message.value(),
                        [(k, v) for k, v in (message.headers() or [])]))
    consumer.close()
    assert by_partition(records) == expected_by_partition(3)


def test_kfk_producer_to_kafka_python_consumer(bootstrap: str, topic_name: str) -> None:
    create(bootstrap, topic_name, 3)
    produce_with_kfk(bootstrap, topic_name, "gzip")
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10_000)
    consumer.assign([KafkaPythonTopicPartition(topic_name, p) for p in range(3)])
    consumer.seek_to_beginning()
    records = []
    for message in consumer:
        records.append((message.partition, message.key, message.value, list(message.headers)))
        if len(records) == COUNT:
            break
    consumer.close()
    assert by_partition(records) == expected_by_partition(3)


def consume_with_kfk(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, bytes, bytes, list]]:
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        records = []
        deadline = time.monotonic() + 20
        while len(records) < COUNT and time.monotonic() < deadline:
            records.extend((r.partition, r.key, r.value, r.headers) for r in consumer.poll(0.5))
        return records


def test_confluent_producer_to_kfk_consumer(bootstrap: str, topic_name: str) -> None:
    create(bootstrap, topic_name, 3)
    producer = ConfluentProducer({"bootstrap.servers": bootstrap, "compression.type": "snappy",
                                  "partitioner": "murmur2_random", "enable.idempotence": True})
    for key, value, headers in expected_records():
        producer.produce(topic_name, value, key, headers=headers)
    assert producer.flush(20) == 0
    assert by_partition(consume_with_kfk(bootstrap, topic_name, 3)) == expected_by_partition(3)


def test_kafka_python_producer_to_kfk_consumer(bootstrap: str, topic_name: str) -> None:
    create(bootstrap, topic_name, 3)
    producer = KafkaProducer(bootstrap_servers=bootstrap, compression_type="lz4")
    for key, value, headers in expected_records():
        producer.send(topic_name, value, key=key, headers=headers)
    producer.flush(20)
    producer.close()
    assert by_partition(consume_with_kfk(bootstrap, topic_name, 3)) == expected_by_partition(3)


def test_librdkafka_murmur2_random_picks_kfks_partition_for_10000_random_keys(bootstrap: str,
                                                                              topic_name: str) -> None:
    partitions = 7
    create(bootstrap, topic_name, partitions)
    rng = random.Random(11)
    keys = [rng.randbytes(rng.randint(1, 40)) for _ in range(10_000)]
    chosen: dict[bytes, int] = {}

    def delivered(error, message) -> None:
        assert error is None, error
        chosen[message.key()] = message.partition()

    producer = ConfluentProducer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                                  "linger.ms": 20, "acks": 1})
    for key in keys:
        producer.produce(topic_name, b"", key, on_delivery=delivered)
        producer.poll(0)
    assert producer.flush(30) == 0
    assert len(chosen) == len(set(keys))
    assert chosen == {key: partition_for_key(key, partitions) for key in chosen}


def test_a_group_of_kfk_and_confluent_consumers_shares_the_partitions(bootstrap: str, topic_name: str) -> None:
    create(bootstrap, topic_name, 4)
    produce_with_kfk(bootstrap, topic_name)
    group = f"g-{topic_name}"
    ours = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "partition.assignment.strategy": "range", "heartbeat.interval.ms": 200})
    theirs = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                                "partition.assignment.strategy": "range", "heartbeat.interval.ms": 200})
    ours.subscribe([topic_name])
    theirs.subscribe([topic_name])
    seen: dict[tuple[int, int], str] = {}
    deadline = time.monotonic() + 20
    try:
        while len(seen) < COUNT and time.monotonic() < deadline:
            for record in ours.poll(0.1):
                seen[(record.partition, record.offset)] = "kfk"
            for message in theirs.consume(500, 0.1):
                if message.error() is None:
                    seen[(message.partition(), message.offset())] = "confluent"
        ours_now = ours.assignment()
        theirs_now = {TopicPartition(tp.topic, tp.partition) for tp in theirs.assignment()}
    finally:
        ours.close()
        theirs.close()
    assert len(seen) == COUNT
    if ours_now and theirs_now:  # both members were in the group at the end: a clean split
        assert ours_now.isdisjoint(theirs_now) and len(ours_now | theirs_now) == 4
