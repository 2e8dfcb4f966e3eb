"""Eligible leader replicas (KIP-966) on real brokers: three kfk brokers on a KRaft controller, a topic whose
min.insync.replicas is its replication factor, so each replica the ISR loses stays eligible to lead. The brokers go
down one by one, one of them killed -9; the killed one, restarted first, is not eligible (an unclean shutdown) and
the partition waits, leaderless (its last leader kept as last known ELR), for an eligible one, which leads with
every acknowledged record. What the brokers
answer is read with Apache Kafka's kafka-topics.sh (DescribeTopicPartitions: its Elr and LastKnownElr columns)."""

from __future__ import annotations

import re

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.testing.apache_kafka import run_kafka_tool
from tests.cluster.helpers import wait_until

pytestmark = [pytest.mark.integration]

TOPIC = "elr"
RECORDS = 200
OVERRIDES = {
    "broker.session.timeout.ms": "3000",
    "offsets.topic.replication.factor": "1",
    "replica.lag.time.max.ms": "2000",
}
ROW = re.compile(r"Partition: 0\tLeader: (\S+)\tReplicas: (\S*)\tIsr: (\S*)\tElr: (\S*)\tLastKnownElr: (\S*)")


@pytest.fixture
def kfk_metadata_mode() -> str:
    return "kraft"


def described(bootstrap: str) -> tuple[str, str, str, str] | None:
    """(leader, isr, elr, last known elr) of partition 0, as kafka-topics.sh --describe prints them (the lists
    sorted: the ISR is in the order replicas joined it)."""
    result = run_kafka_tool("topics", ["--bootstrap-server", bootstrap, "--describe", "--topic", TOPIC])
    match = ROW.search(result.stdout)
    if match is None:
        return None
    return match[1], *(",".join(sorted(text.split(",") if text else [])) for text in (match[3], match[4], match[5]))


def ids(*broker_ids: int) -> str:
    return ",".join(map(str, sorted(broker_ids)))


def test_an_eligible_replica_leads_after_every_broker_went_down_and_an_unclean_one_does_not(
        kfk_cluster_factory) -> None:
    cluster = kfk_cluster_factory(size=3, overrides=OVERRIDES)
    bootstrap = cluster.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3, config={"min.insync.replicas": "3"})])[TOPIC].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for index in range(RECORDS):
        producer.produce(TOPIC, str(index).encode())
    assert producer.flush(30) == 0
    leader_text, _, _, _ = wait_until(lambda: described(bootstrap), what="the topic described")
    leader = int(leader_text)
    clean, unclean = sorted(broker for broker in (1, 2, 3) if broker != leader)

    assert cluster.stop(clean) == 0  # a clean shutdown: it leaves the ISR and stays eligible
    assert wait_until(lambda: described(cluster.broker(leader).bootstrap_servers) == (
        str(leader), ids(leader, unclean), str(clean), ""), what="the stopped follower in the ELR")
    cluster.kill(unclean)  # fenced once its session ends: eligible too, as far as the controller knows
    assert wait_until(lambda: described(cluster.broker(leader).bootstrap_servers) == (
        str(leader), str(leader), ids(clean, unclean), ""), timeout=30, what="the killed follower in the ELR")
    assert cluster.stop(leader) == 0  # the last ISR member: the ISR empties and the partition has no leader

    cluster.start([unclean])  # it has no clean-shutdown marker: no longer eligible
    survivor = cluster.broker(unclean).bootstrap_servers
    assert wait_until(lambda: described(survivor) == ("none", "", ids(clean, leader), str(leader)),
                      timeout=30, what="the unclean replica out of the ELR and nobody leading")

    cluster.start([clean])  # eligible: it leads, alone in the ISR, and has every acknowledged record
    assert wait_until(lambda: (described(survivor) or ("",))[0] == str(clean), timeout=30, what="a new leader")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "elr-check", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    values: list[int] = []
    try:
        wait_until(lambda: values.extend(int(message.value()) for message in consumer.consume(100, 1)
                                         if message.error() is None) or len(values) >= RECORDS,
                   timeout=30, what="every acknowledged record")
    finally:
        consumer.close()
    assert sorted(values) == list(range(RECORDS))

    cluster.start([leader])  # back to the full ISR: nobody needs to be eligible any more
    assert wait_until(lambda: described(survivor) == (str(clean), ids(1, 2, 3), "", ""), timeout=30,
                      what="the full ISR and an empty ELR")
