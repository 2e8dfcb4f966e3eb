"""Three brokers on ZooKeeper whose one listener, and so their inter-broker listener, is SSL with client certificates
required: the replica fetchers, the controller channel and the transaction markers connect over TLS with the
brokers' own certificate, a topic stays fully in sync under acks=all, a transaction over partitions led by all three
brokers commits, and the topic fails over when its leader is killed."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.cluster.helpers import wait_until
from tests.security.cluster_checks import fail_over_and_read_back, partition_zero, produce_acks_all

from .conftest import Certificates

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper]


def _client(certificates: Certificates, bootstrap: str) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SSL", "ssl.ca.location": str(certificates.ca),
            "ssl.certificate.location": str(certificates.client.certificate),
            "ssl.key.location": str(certificates.client.key)}




def test_an_ssl_inter_broker_listener_replicates_and_fails_over(kfk_cluster_factory, certificates) -> None:
    cluster = kfk_cluster_factory(3, {"listener.security.protocol.map": "SSL:SSL", "min.insync.replicas": "2",
                                      **certificates.broker_overrides("required")}, listener_name="SSL")
    config = _client(certificates, cluster.bootstrap_servers)
    admin = AdminClient(config)
    topic = f"tls-replicated-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    first = [f"before-{index}".encode() for index in range(200)]
    produce_acks_all(config, topic, first)
    # acks=all with min.insync.replicas=2 succeeded and the ISR holds all three: the followers fetch over TLS, with
    # the brokers' certificate as client certificate (the listener requires one; there is no other listener).
    wait_until(lambda: len(partition_zero(admin, topic).isrs) == 3, 20, what="three in-sync replicas")
    _transaction_across_brokers(admin, config)
    fail_over_and_read_back(cluster, admin, topic, first, lambda bootstrap: _client(certificates, bootstrap))


def _transaction_across_brokers(admin: AdminClient, config: dict[str, str]) -> None:
    """A transaction over partitions led by all three brokers: its coordinator reaches the other leaders (partition
    verification, WriteTxnMarkers) over TLS, and a read_committed consumer sees the committed records."""
    topic = f"tls-txn-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(30)
    wait_until(lambda: len({p.leader for p in admin.list_topics(topic, timeout=5).topics[topic].partitions.values()})
               == 3, 20, what="three partition leaders")
    producer = Producer({**config, "transactional.id": f"tls-{uuid.uuid4().hex[:6]}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for index in range(30):
        producer.produce(topic, f"txn-{index}".encode(), partition=index % 3)
    producer.commit_transaction(30)
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:6]}", "isolation.level": "read_committed",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, 0) for partition in range(3)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < 30 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    assert sorted(values) == sorted(f"txn-{index}".encode() for index in range(30))
