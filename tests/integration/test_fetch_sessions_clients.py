"""Incremental fetch sessions with a real client that asks for them: kafka-python's consumer (it opens a session with
a full fetch at epoch 0, then names only changed partitions). Every record of 100 partitions arrives exactly once,
through incremental fetches, including records produced while it consumes; with the broker's session cache off
(max.incremental.fetch.session.cache.slots=0) the same consumer works sessionless."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, TopicPartition

PARTITIONS = 100


def produce(bootstrap: str, topic: str, start: int, count: int) -> set[tuple[int, bytes]]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    sent = set()
    for index in range(start, start + count):
        value = f"record-{index}".encode()
        producer.produce(topic, value=value, partition=index % PARTITIONS)
        sent.add((index % PARTITIONS, value))
    assert producer.flush(30) == 0
    return sent


def consume(consumer: KafkaConsumer, expected: int, timeout: float = 30.0) -> list[tuple[int, int, bytes]]:
    found: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + timeout
    while len(found) < expected and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            found += [(record.partition, record.offset, record.value) for record in records]
    return found


def session_metadata(consumer: KafkaConsumer):
    """kafka-python's view of its session with the (one) broker: (session_id, next epoch)."""
    [handler] = consumer._fetcher._session_handlers.values()
    return handler.next_metadata.session_id, handler.next_metadata.epoch


@pytest.mark.parametrize("slots", [None, "0"])
def test_kafka_python_consumes_through_an_incremental_session(kfk_broker_factory, slots) -> None:
    broker = kfk_broker_factory({"max.incremental.fetch.session.cache.slots": slots} if slots else None)
    bootstrap = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("sessions", PARTITIONS, 1)])["sessions"].result(30)
    sent = produce(bootstrap, "sessions", 0, 1_000)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
    try:
        consumer.assign([TopicPartition("sessions", index) for index in range(PARTITIONS)])
        consumer.seek_to_beginning()
        first = consume(consumer, 1_000)
        more = produce(bootstrap, "sessions", 1_000, 500)
        second = consume(consumer, 500)
        received = first + second
        assert len(received) == 1_500 and len(set(received)) == 1_500  # nothing twice
        assert {(partition, value) for partition, _, value in received} == sent | more
        for partition in range(PARTITIONS):
            offsets = sorted(offset for p, offset, _ in received if p == partition)
            assert offsets == list(range(15))
        session_id, epoch = session_metadata(consumer)
        if slots == "0":
            assert session_id == 0  # the broker answered every fetch without a session
        else:
            assert session_id != 0 and epoch > 2  # one session, many incremental fetches
    finally:
        consumer.close()
