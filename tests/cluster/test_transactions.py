"""Transactions on three brokers and a real ZooKeeper, each broker a separate process: the transaction
coordinator's broker killed with kill -9 in the middle of a transaction (the new leader of its __transaction_state
partition loads the state and the producer commits there), then a partition leader killed (the markers are retried
until the new leader takes them). After each failover the read_committed view holds every committed record exactly
once and nothing of an aborted transaction. And kfk's producer on transaction version 2 across brokers."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition

from kfk.client import Admin, ConsumerGroupMetadata
from kfk.client import Producer as KfkProducer
from kfk.client import TopicPartition as KfkTopicPartition
from kfk.protocol.messages.find_coordinator import FindCoordinatorRequest
from tests.cluster.helpers import create_topic, partitions, wait_until
from tests.integration.wire import connect, request

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper]

OVERRIDES = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"}
TRANSACTION_KEY_TYPE = 1


def transaction_coordinator(bootstrap: str, transactional_id: str) -> int:
    """The broker id FindCoordinator names for the transactional id (asked of any live broker)."""
    for address in bootstrap.split(","):
        try:
            sock = connect(address, timeout=5)
        except OSError:
            continue
        try:
            response = request(sock, FindCoordinatorRequest(key_type=TRANSACTION_KEY_TYPE,
                                                            coordinator_keys=[transactional_id]), 4)
        finally:
            sock.close()
        (coordinator,) = response.coordinators
        if coordinator.error_code == 0:
            return coordinator.node_id
    return -1


def read_committed(bootstrap: str, topic: str, partition_count: int, expected: int,
                   timeout: float = 30.0) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    consumer.assign([ConfluentTopicPartition(topic, index, 0) for index in range(partition_count)])
    values: list[bytes] = []
    deadline = time.monotonic() + timeout
    quiet_until = None
    while time.monotonic() < deadline:
        for message in consumer.consume(num_messages=1000, timeout=0.2):
            if message.error() is None:
                values.append(message.value())
        if len(values) >= expected:
            quiet_until = quiet_until or time.monotonic() + 1.5
            if time.monotonic() >= quiet_until:
                break
    consumer.close()
    return values


def run_transaction(producer: Producer, topic: str, label: str, partition_count: int, before_commit=None) -> bool:
    """One transaction of 30 records; `before_commit` runs once they are flushed. True if it committed; an
    abortable failure aborts it (its records must then never be read)."""
    producer.begin_transaction()
    for i in range(30):
        producer.produce(topic, f"{label}-{i}".encode(), partition=i % partition_count)
    producer.flush(30)
    if before_commit is not None:
        before_commit()
    try:
        producer.commit_transaction(60)
        return True
    except KafkaException as raised:
        error = raised.args[0]
        if error.fatal() or not error.txn_requires_abort():
            raise
        producer.abort_transaction(60)
        return False


def test_transactions_survive_the_coordinator_and_a_partition_leader_being_killed(kfk_cluster_factory) -> None:
    cluster = kfk_cluster_factory(3, OVERRIDES)
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "cluster-txn", partitions=3, replication_factor=3)
    wait_until(lambda: all(len(isr) == 3 for _, _, isr in partitions(bootstrap, "cluster-txn").values()),
               what="every ISR full")
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "cluster-producer",
                         "transaction.timeout.ms": 60000, "linger.ms": 5, "topic.metadata.refresh.interval.ms": 500})
    producer.init_transactions(60)
    committed: list[bytes] = []
    assert run_transaction(producer, "cluster-txn", "warm-up", 3)
    committed += [f"warm-up-{i}".encode() for i in range(30)]

    # 1. The coordinator's broker dies after the records are written and before the commit.
    coordinator = wait_until(lambda: (found := transaction_coordinator(bootstrap, "cluster-producer")) >= 0 and found,
                             what="the transaction coordinator")
    if run_transaction(producer, "cluster-txn", "coordinator-killed", 3, lambda: cluster.kill(coordinator)):
        committed += [f"coordinator-killed-{i}".encode() for i in range(30)]
    survivors = ",".join(b.bootstrap_servers for i, b in cluster.brokers.items() if i != coordinator)
    new_coordinator = transaction_coordinator(survivors, "cluster-producer")
    assert new_coordinator not in (coordinator, -1)
    cluster.start([coordinator])
    wait_until(lambda: all(len(isr) == 3 for _, _, isr in partitions(bootstrap, "cluster-txn").values()),
               timeout=30, what="the restarted broker back in every ISR")

    # 2. A leader of a partition in the transaction (not the coordinator) dies before the commit: the markers wait
    #    for the new leader.
    leaders = {leader for leader, _, _ in partitions(bootstrap, "cluster-txn").values()}
    coordinator = transaction_coordinator(bootstrap, "cluster-producer")
    victim = next(iter(sorted(leaders - {coordinator}) or sorted(leaders)))
    if run_transaction(producer, "cluster-txn", "leader-killed", 3, lambda: cluster.kill(victim)):
        committed += [f"leader-killed-{i}".encode() for i in range(30)]
    assert run_transaction(producer, "cluster-txn", "after", 3)
    committed += [f"after-{i}".encode() for i in range(30)]
    cluster.start([victim])

    values = read_committed(bootstrap, "cluster-txn", 3, len(committed))
    assert sorted(values) == sorted(committed)  # exactly once: no loss, no duplicate, nothing aborted


def test_kfk_producer_on_transaction_version_2_across_brokers(kfk_cluster_factory) -> None:
    """kfk's producer runs TV2 (the brokers finalize transaction.version 2): partition leaders other than the
    coordinator add its partitions with AddPartitionsToTxn v5 (verify_only false) over the inter-broker channel,
    the group's offsets partition is added by TxnOffsetCommit v5, and every EndTxn v5 bumps the epoch."""
    cluster = kfk_cluster_factory(3, OVERRIDES)
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "tv2-txn", partitions=3, replication_factor=3)
    wait_until(lambda: all(len(isr) == 3 for _, _, isr in partitions(bootstrap, "tv2-txn").values()),
               what="every ISR full")
    assert len({leader for leader, _, _ in partitions(bootstrap, "tv2-txn").values()}) > 1  # remote adds happen
    group = ConsumerGroupMetadata("tv2-cluster-group")
    source = KfkTopicPartition("tv2-txn", 0)
    with KfkProducer({"bootstrap.servers": bootstrap, "transactional.id": "tv2-cluster-producer",
                      "linger.ms": 5}) as producer, Admin({"bootstrap.servers": bootstrap}) as admin:
        producer.init_transactions(60)
        initial = admin.describe_transactions(["tv2-cluster-producer"])["tv2-cluster-producer"]
        for round_ in range(2):
            producer.begin_transaction()
            for i in range(30):
                producer.send("tv2-txn", f"tv2-{round_}-{i}".encode(), partition=i % 3)
            producer.send_offsets_to_transaction({source: 10 * (round_ + 1)}, group, 60)
            producer.commit_transaction(60)
        after = admin.describe_transactions(["tv2-cluster-producer"])["tv2-cluster-producer"]
        assert (after.producer_id, after.producer_epoch) == (initial.producer_id, initial.producer_epoch + 2)
    values = read_committed(bootstrap, "tv2-txn", 3, 60)
    assert sorted(values) == sorted(f"tv2-{r}-{i}".encode() for r in range(2) for i in range(30))
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tv2-cluster-group"})
    try:
        (committed,) = consumer.committed([ConfluentTopicPartition("tv2-txn", 0)], timeout=15)
    finally:
        consumer.close()
    assert committed.offset == 20
