"""Transactions with confluent-kafka (librdkafka 2.16) against one kfk broker: committed and aborted transactions
interleaved over three partitions as read_committed and read_uncommitted consumers see them, zombie fencing, the
coordinator aborting a transaction that outlives transaction.timeout.ms, and consume-transform-produce with
send_offsets_to_transaction through a process killed with SIGKILL at random points."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration

#: Few __transaction_state partitions keep the first FindCoordinator quick; the abort scan runs often so the
#: timeout test does not wait the default minute.
BROKER_OVERRIDES = {
    "transaction.state.log.num.partitions": "5",
    "offsets.topic.num.partitions": "5",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    "group.min.session.timeout.ms": "500",
}


@pytest.fixture
def bootstrap(kfk_broker_factory) -> str:
    return kfk_broker_factory(BROKER_OVERRIDES).bootstrap_servers


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def transactional_producer(bootstrap: str, transactional_id: str, **config) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, "linger.ms": 5,
                         **config})
    producer.init_transactions(30)
    return producer


def read_all(bootstrap: str, topic: str, partitions: int, isolation_level: str, expected: int,
             timeout: float = 20.0) -> list[tuple[int, bytes]]:
    """Every record of the topic as (partition, value), in partition order, read until `expected` arrived and then
    a little longer (so that an extra record would be seen)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{random.random()}",
                         "isolation.level": isolation_level, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.assign([ConfluentTopicPartition(topic, p, 0) for p in range(partitions)])
    records: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + timeout
    quiet_until = None
    while time.monotonic() < deadline:
        for message in consumer.consume(num_messages=1000, timeout=0.1):
            if message.error() is None:
                records.append((message.partition(), message.value()))
        if len(records) >= expected:
            quiet_until = quiet_until or time.monotonic() + 1.0
            if time.monotonic() >= quiet_until:
                break
    consumer.close()
    return records


def test_committed_and_aborted_transactions_as_each_isolation_level_sees_them(bootstrap: str) -> None:
    create_topic(bootstrap, "txn-mixed", 3)
    producer = transactional_producer(bootstrap, "mixed")
    committed: list[tuple[int, bytes]] = []
    everything: list[tuple[int, bytes]] = []
    for transaction in range(20):
        commit = transaction % 2 == 0
        producer.begin_transaction()
        for i in range(30):
            value = f"{transaction}-{i}-{'commit' if commit else 'abort'}".encode()
            producer.produce("txn-mixed", value, partition=i % 3)
            everything.append((i % 3, value))
            if commit:
                committed.append((i % 3, value))
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)  # the aborted records really reach the log before the abort
            producer.abort_transaction(30)
    producer.flush(10)

    seen = read_all(bootstrap, "txn-mixed", 3, "read_committed", len(committed))
    for partition in range(3):
        assert [v for p, v in seen if p == partition] == [v for p, v in committed if p == partition]
    assert len(seen) == len(committed) == 300

    uncommitted = read_all(bootstrap, "txn-mixed", 3, "read_uncommitted", len(everything))
    assert sorted(uncommitted) == sorted(everything)


def test_an_open_transaction_holds_read_committed_consumers_at_the_last_stable_offset(bootstrap: str) -> None:
    create_topic(bootstrap, "txn-open", 1)
    producer = transactional_producer(bootstrap, "holder")
    producer.begin_transaction()
    producer.produce("txn-open", b"pending", partition=0)
    producer.flush(10)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce("txn-open", b"after", partition=0)
    assert plain.flush(10) == 0
    # The non-transactional record sits after the open transaction: read_committed sees nothing yet.
    assert read_all(bootstrap, "txn-open", 1, "read_committed", 1, timeout=3) == []
    producer.commit_transaction(30)
    assert [v for _, v in read_all(bootstrap, "txn-open", 1, "read_committed", 2)] == [b"pending", b"after"]


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(bootstrap: str) -> None:
    create_topic(bootstrap, "txn-zombie", 1)
    zombie = transactional_producer(bootstrap, "same-id")
    zombie.begin_transaction()
    zombie.produce("txn-zombie", b"zombie", partition=0)
    zombie.flush(10)
    successor = transactional_producer(bootstrap, "same-id")  # aborts the zombie's open transaction
    successor.begin_transaction()
    successor.produce("txn-zombie", b"successor", partition=0)
    successor.commit_transaction(30)

    with pytest.raises(KafkaException) as raised:
        zombie.produce("txn-zombie", b"late", partition=0)
        zombie.commit_transaction(10)
    error = raised.value.args[0]
    assert error.code() == KafkaError._FENCED or error.fatal(), error
    assert [v for _, v in read_all(bootstrap, "txn-zombie", 1, "read_committed", 1)] == [b"successor"]


def test_the_coordinator_aborts_a_transaction_past_its_timeout(bootstrap: str) -> None:
    create_topic(bootstrap, "txn-timeout", 1)
    producer = transactional_producer(bootstrap, "forgetful", **{"transaction.timeout.ms": 1500})
    producer.begin_transaction()
    producer.produce("txn-timeout", b"never-committed", partition=0)
    producer.flush(10)
    plain = Producer({"bootstrap.servers": bootstrap})
    plain.produce("txn-timeout", b"visible", partition=0)
    assert plain.flush(10) == 0
    started = time.monotonic()
    # Once the coordinator aborted the transaction the stable offset moves past the abort marker.
    seen = read_all(bootstrap, "txn-timeout", 1, "read_committed", 1, timeout=20)
    assert [v for _, v in seen] == [b"visible"]
    assert time.monotonic() - started < 15
    with pytest.raises(KafkaException):
        producer.commit_transaction(10)


TRANSFORMER = r"""
import sys
from confluent_kafka import Consumer, Producer, TopicPartition
bootstrap, batch = sys.argv[1], int(sys.argv[2])
consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos", "enable.auto.commit": False,
                     "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                     "session.timeout.ms": 1000, "heartbeat.interval.ms": 200})
producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "eos-transformer", "linger.ms": 5})
producer.init_transactions(30)
consumer.subscribe(["eos-in"])
while True:
    messages = [m for m in consumer.consume(num_messages=batch, timeout=0.5) if m.error() is None]
    if not messages:
        continue
    producer.begin_transaction()
    for m in messages:
        producer.produce("eos-out", m.value().upper(), key=m.key(), partition=m.partition())
    positions = consumer.position(consumer.assignment())
    producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
    producer.commit_transaction(30)
    print("committed", len(messages), flush=True)
"""


def test_consume_transform_produce_exactly_once_through_sigkills(bootstrap: str) -> None:
    total = 10_000
    create_topic(bootstrap, "eos-in", 2)
    create_topic(bootstrap, "eos-out", 2)
    source = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(total):
        source.produce("eos-in", f"record-{i}".encode(), key=str(i).encode(), partition=i % 2)
    assert source.flush(30) == 0

    rng = random.Random(15)
    kills = 0
    deadline = time.monotonic() + 120
    out: list[tuple[int, bytes]] = []
    while time.monotonic() < deadline:
        process = subprocess.Popen([sys.executable, "-c", TRANSFORMER, bootstrap, str(rng.randint(50, 400))],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            if kills < 4:
                # Let it commit a few transactions, then kill it at a random moment.
                for _ in range(rng.randint(1, 4)):
                    if not process.stdout.readline():
                        break
                time.sleep(rng.random() * 0.3)
                process.send_signal(signal.SIGKILL)
                process.wait(10)
                kills += 1
                continue
            out = read_all(bootstrap, "eos-out", 2, "read_committed", total, timeout=60)
            break
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)
    assert kills == 4
    values = sorted(v for _, v in out)
    assert values == sorted(f"RECORD-{i}".encode() for i in range(total))  # each exactly once
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "eos"})
    committed = consumer.committed([ConfluentTopicPartition("eos-in", p) for p in range(2)], timeout=15)
    consumer.close()
    assert {tp.partition: tp.offset for tp in committed} == {0: total // 2, 1: total // 2}


def test_a_broker_killed_mid_transaction_completes_or_aborts_it_consistently(kfk_broker_factory) -> None:
    broker = kfk_broker_factory(BROKER_OVERRIDES)
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "txn-crash", 2)
    producer = transactional_producer(bootstrap, "crash-producer", **{"transaction.timeout.ms": 60000})
    producer.begin_transaction()
    for i in range(30):
        producer.produce("txn-crash", f"before-{i}".encode(), partition=i % 2)
    producer.flush(10)
    broker.kill()
    broker.start()
    expected: list[bytes] = []
    try:
        producer.commit_transaction(60)
        expected += [f"before-{i}".encode() for i in range(30)]
    except KafkaException as raised:
        assert raised.args[0].txn_requires_abort(), raised
        producer.abort_transaction(60)
    producer.begin_transaction()
    for i in range(30):
        producer.produce("txn-crash", f"after-{i}".encode(), partition=i % 2)
    producer.commit_transaction(60)
    expected += [f"after-{i}".encode() for i in range(30)]
    # The restarted broker kept the transaction state and the markers: the view is whole, with no duplicates.
    seen = [v for _, v in read_all(bootstrap, "txn-crash", 2, "read_committed", len(expected))]
    assert sorted(seen) == sorted(expected)
