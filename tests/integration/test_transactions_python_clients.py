"""Transactions with kafka-python's and aiokafka's transactional producers against one kfk broker: committed and
aborted transactions as read_committed and read_uncommitted consumers of the same library see them, offsets sent
to a transaction, and fencing of a producer whose transactional id was taken over."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTopicPartition
from aiokafka.errors import ProducerFenced as AioProducerFenced
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError as KafkaPythonError
from kafka.structs import OffsetAndMetadata

pytestmark = pytest.mark.integration

BROKER_OVERRIDES = {"transaction.state.log.num.partitions": "5", "offsets.topic.num.partitions": "5"}


@pytest.fixture
def bootstrap(kfk_broker_factory) -> str:
    return kfk_broker_factory(BROKER_OVERRIDES).bootstrap_servers


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic(name, partitions, 1)])
    admin.close()


def kafka_python_read(bootstrap: str, topic: str, partitions: int, isolation_level: str,
                      expected: int) -> list[tuple[int, bytes]]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation_level,
                             enable_auto_commit=False, auto_offset_reset="earliest", consumer_timeout_ms=1500)
    consumer.assign([KafkaTopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    records: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        before = len(records)
        for message in consumer:
            records.append((message.partition, message.value))
        if len(records) >= expected and len(records) == before:
            break
    consumer.close()
    return records


def test_kafka_python_transactions_commit_and_abort(bootstrap: str) -> None:
    create_topic(bootstrap, "kp-txn", 3)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-producer")
    producer.init_transactions()
    committed, everything = [], []
    for transaction in range(6):
        commit = transaction % 2 == 0
        producer.begin_transaction()
        for i in range(10):
            value = f"{transaction}-{i}".encode()
            producer.send("kp-txn", value, partition=i % 3)
            everything.append((i % 3, value))
            if commit:
                committed.append((i % 3, value))
        producer.flush()
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    producer.close()

    seen = kafka_python_read(bootstrap, "kp-txn", 3, "read_committed", len(committed))
    for partition in range(3):
        assert [v for p, v in seen if p == partition] == [v for p, v in committed if p == partition]
    assert len(seen) == 30
    assert sorted(kafka_python_read(bootstrap, "kp-txn", 3, "read_uncommitted", len(everything))) == sorted(everything)


def test_kafka_python_send_offsets_to_transaction(bootstrap: str) -> None:
    create_topic(bootstrap, "kp-offsets", 1)
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-offsets-producer")
    producer.init_transactions()
    producer.begin_transaction()
    producer.send("kp-offsets", b"out", partition=0)
    producer.send_offsets_to_transaction({KafkaTopicPartition("kp-offsets", 0): OffsetAndMetadata(42, "", -1)},
                                         "kp-group")
    producer.commit_transaction()
    producer.begin_transaction()
    producer.send_offsets_to_transaction({KafkaTopicPartition("kp-offsets", 0): OffsetAndMetadata(99, "", -1)},
                                         "kp-group")
    producer.abort_transaction()  # the aborted offset never becomes the group's
    producer.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    offsets = admin.list_group_offsets("kp-group")["kp-group"]  # kafka-python 3 renamed list_consumer_group_offsets
    admin.close()
    assert offsets[KafkaTopicPartition("kp-offsets", 0)].offset == 42


def test_kafka_python_fenced_producer_cannot_commit(bootstrap: str) -> None:
    create_topic(bootstrap, "kp-fence", 1)
    old = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-fenced")
    old.init_transactions()
    old.begin_transaction()
    old.send("kp-fence", b"old", partition=0)
    old.flush()
    new = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-fenced")
    new.init_transactions()
    with pytest.raises(KafkaPythonError):
        old.commit_transaction()
    new.begin_transaction()
    new.send("kp-fence", b"new", partition=0)
    new.commit_transaction()
    new.close()
    old.close(timeout=1)
    assert [v for _, v in kafka_python_read(bootstrap, "kp-fence", 1, "read_committed", 1)] == [b"new"]


async def aiokafka_read(bootstrap: str, topic: str, partitions: int, isolation_level: str,
                        expected: int) -> list[tuple[int, bytes]]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation_level,
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([AioTopicPartition(topic, p) for p in range(partitions)])
        await consumer.seek_to_beginning()
        records: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + 20
        quiet_until = None
        while time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=200)
            for tp, messages in batches.items():
                records.extend((tp.partition, m.value) for m in messages)
            if len(records) >= expected:
                quiet_until = quiet_until or time.monotonic() + 1.0
                if time.monotonic() >= quiet_until:
                    break
        return records
    finally:
        await consumer.stop()


def test_aiokafka_transactions_commit_abort_and_fencing(bootstrap: str) -> None:
    create_topic(bootstrap, "aio-txn", 2)

    async def scenario() -> tuple[list, list, list, list]:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-producer")
        await producer.start()
        committed, everything = [], []
        try:
            for transaction in range(4):
                commit = transaction % 2 == 0
                await producer.begin_transaction()
                for i in range(10):
                    value = f"{transaction}-{i}".encode()
                    await producer.send_and_wait("aio-txn", value, partition=i % 2)
                    everything.append((i % 2, value))
                    if commit:
                        committed.append((i % 2, value))
                if commit:
                    await producer.commit_transaction()
                else:
                    await producer.abort_transaction()
            # A second producer with the same id fences the first.
            successor = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id="aio-producer")
            await successor.start()
            try:
                with pytest.raises(AioProducerFenced):
                    async with producer.transaction():
                        await producer.send_and_wait("aio-txn", b"zombie", partition=0)
            finally:
                await successor.stop()
        finally:
            await producer.stop()
        read_committed = await aiokafka_read(bootstrap, "aio-txn", 2, "read_committed", len(committed))
        read_uncommitted = await aiokafka_read(bootstrap, "aio-txn", 2, "read_uncommitted", len(everything))
        return committed, everything, read_committed, read_uncommitted

    committed, everything, read_committed, read_uncommitted = asyncio.run(scenario())
    for partition in range(2):
        assert [v for p, v in read_committed if p == partition] == [v for p, v in committed if p == partition]
    assert len(read_committed) == len(committed) == 20
    assert sorted(read_uncommitted) == sorted(everything)
