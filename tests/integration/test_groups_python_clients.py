"""Consumer groups with the Python clients: kafka-python's KafkaConsumer (group, auto commit) and KafkaAdminClient
(list and describe groups, group offsets), and an aiokafka group round trip, against a kfk broker."""

from __future__ import annotations

import asyncio
import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import NewTopic
from kafka.errors import CoordinatorLoadInProgressError
from kafka.structs import TopicPartition

pytestmark = pytest.mark.integration


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def produce(bootstrap: str, topic: str, count: int) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(count):
        producer.send(topic, key=str(i).encode(), value=str(i).encode(), partition=i % 2)
    producer.flush(10)
    producer.close()


def list_groups_when_loaded(admin: KafkaAdminClient, **filters) -> list:
    """ListGroups answers COORDINATOR_LOAD_IN_PROGRESS while any __consumer_offsets partition still loads (as
    Kafka's does); right after the topic's creation that can last a moment."""
    deadline = time.monotonic() + 10
    while True:
        try:
            return admin.list_groups(**filters)
        except CoordinatorLoadInProgressError:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_kafka_python_group_with_auto_commit_and_admin_views(kfk_broker: str) -> None:
    create_topic(kfk_broker, "kp", 2)
    produce(kfk_broker, "kp", 40)
    consumer = KafkaConsumer("kp", bootstrap_servers=kfk_broker, group_id="kp-group",
                             auto_offset_reset="earliest", enable_auto_commit=True, auto_commit_interval_ms=100,
                             client_id="kp-client")
    values = []
    deadline = time.monotonic() + 20
    while len(values) < 40 and time.monotonic() < deadline:
        # A long poll: kafka-python 3.0.12 loses the assignment when a poll times out while its JoinGroup/SyncGroup
        # is in flight (the background task completes, need_rejoin() turns False, and _on_join_complete never runs,
        # so the consumer sits in the group with no partitions). Its first rebalance must fit in one poll.
        for records in consumer.poll(timeout_ms=5000).values():
            values.extend(int(r.value) for r in records)
    assert sorted(values) == list(range(40))
    admin = KafkaAdminClient(bootstrap_servers=kfk_broker)
    try:
        # Listed and described (members, assignment, state, protocol) while the consumer is in the group.
        listed = list_groups_when_loaded(admin)
        assert {"group_id": "kp-group", "protocol_type": "consumer", "group_state": "Stable",
                "group_type": "classic"} in listed
        description = admin.describe_groups(["kp-group"])["kp-group"]
        assert description["group_state"] == "Stable" and description["protocol_type"] == "consumer"
        assert description["protocol_data"] == "range" and description["error"] is None
        (member,) = description["members"]
        assert member["client_id"] == "kp-client" and member["member_metadata"]["topics"] == ["kp"]
        assert member["member_assignment"]["assigned_partitions"] == [{"topic": "kp", "partitions": [0, 1]}]
        # Auto commit stored the positions.
        deadline = time.monotonic() + 10
        while True:
            consumer.poll(timeout_ms=100)
            offsets = admin.list_group_offsets("kp-group")["kp-group"]
            if {tp: o.offset for tp, o in offsets.items()} == {TopicPartition("kp", 0): 20,
                                                               TopicPartition("kp", 1): 20}:
                break
            assert time.monotonic() < deadline, offsets
        consumer.close()
        after = admin.describe_groups(["kp-group"])["kp-group"]
        assert after["group_state"] == "Empty" and after["members"] == []
        assert list_groups_when_loaded(admin, states_filter=["Stable"]) == []
    finally:
        admin.close()


def test_aiokafka_group_round_trip(kfk_broker: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition as AioTopicPartition

    create_topic(kfk_broker, "aio", 1)

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=kfk_broker)
        await producer.start()
        try:
            for i in range(10):
                await producer.send_and_wait("aio", str(i).encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer("aio", bootstrap_servers=kfk_broker, group_id="aio-group",
                                    auto_offset_reset="earliest", enable_auto_commit=False)
        await consumer.start()
        try:
            values = []
            while len(values) < 10:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 15)
                for records in batch.values():
                    values.extend(int(r.value) for r in records)
            assert values == list(range(10))
            await consumer.commit()
            assert await consumer.committed(AioTopicPartition("aio", 0)) == 10
        finally:
            await consumer.stop()
        # A new member of the group starts where the group committed.
        again = AIOKafkaConsumer("aio", bootstrap_servers=kfk_broker, group_id="aio-group",
                                 auto_offset_reset="earliest")
        await again.start()
        try:
            assert await again.committed(AioTopicPartition("aio", 0)) == 10
        finally:
            await again.stop()

    asyncio.run(run())
