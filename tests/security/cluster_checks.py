"""What the secured-cluster tests check the same way over TLS and over SASL: acks=all produces, partition 0 read back,
the partition's state as Metadata reports it, and a failover (kill -9 of the leader, then every record read back through the survivors)."""

from __future__ import annotations

import time
import uuid
from typing import Callable

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kfk.testing.cluster import KfkCluster
from tests.cluster.helpers import wait_until


def partition_zero(admin: AdminClient, topic: str):
    return admin.list_topics(topic, timeout=5).topics[topic].partitions[0]


def produce_acks_all(config: dict[str, str], topic: str, values: list[bytes]) -> None:
    producer = Producer({**config, "acks": "all", "enable.idempotence": True, "message.timeout.ms": 30000})
    failures: list = []
    for value in values:
        producer.produce(topic, value, on_delivery=lambda error, message: error and failures.append(error))
    assert producer.flush(40) == 0
    assert not failures, failures


def read_partition_zero(config: dict[str, str], topic: str, count: int, timeout: float = 30.0) -> list[bytes]:
    """The values of partition 0 from its start (up to `count` of them, or what came within `timeout`), read by a
    confluent-kafka consumer with `config` (its security settings)."""
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def fail_over_and_read_back(cluster: KfkCluster, admin: AdminClient, topic: str, first: list[bytes],
                            client_config: Callable[[str], dict[str, str]]) -> None:
    """Kill the leader of partition 0: another replica leads, 200 more records go in through the survivors (clients
    configured by `client_config(bootstrap)`), all of `first` and those are read back, and the two survivors stay in
    sync with each other (they still replicate over the secured listener)."""
    leader = partition_zero(admin, topic).leader
    cluster.kill(leader)
    new_leader = wait_until(lambda: (partition := partition_zero(admin, topic)).leader not in (-1, leader)
                            and partition.leader, 30, what="a new leader")
    survivors = ",".join(broker.bootstrap_servers for broker_id, broker in cluster.brokers.items()
                         if broker_id != leader)
    config = client_config(survivors)
    second = [f"after-{index}".encode() for index in range(200)]
    produce_acks_all(config, topic, second)
    assert read_partition_zero(config, topic, len(first) + len(second)) == first + second
    assert new_leader != leader
    wait_until(lambda: sorted(partition_zero(admin, topic).isrs) == sorted(set(cluster.brokers) - {leader}), 20,
               what="the survivors in sync")
