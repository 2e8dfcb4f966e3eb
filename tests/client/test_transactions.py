"""Transactions end to end: kfk's transactional Producer and read_committed Consumer against a real kfk broker, with
confluent-kafka (librdkafka) on the other side of each direction as the reference client.

Covers commit, abort, an open transaction holding read_committed consumers at the last stable offset,
send_offsets_to_transaction with a consumer group, fencing of a producer by a newer one with the same
transactional.id, and read_committed versus read_uncommitted consumers. The broker finalizes transaction.version 2,
so kfk's producer runs KIP-890 part 2: every end of a transaction bumps its epoch.
"""

from __future__ import annotations

import time
import uuid

import pytest

from kfk.client import Admin, Consumer, NewTopic, OffsetAndMetadata, Producer, TopicPartition
from kfk.client.producer.transaction_manager import TransactionAbortedError
from kfk.errors import InvalidTxnStateError, KafkaError, ProducerFencedError

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.integration


def create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.create_topics([NewTopic(topic, partitions, 1, {})]) == {topic: None}


def transactional_producer(bootstrap: str, transactional_id: str | None = None) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                         "transactional.id": transactional_id or f"txn-{uuid.uuid4().hex[:8]}"})
    producer.init_transactions(30)
    return producer


def read_all(bootstrap: str, topic: str, partitions: int, isolation_level: str, *, expected: int | None = None,
             timeout: float = 10.0) -> list[bytes]:
    """Every value kfk's consumer returns from the start of ``topic`` (waiting for ``expected`` values, else for the
    whole timeout: hidden records show up as missing ones)."""
    with Consumer({"bootstrap.servers": bootstrap, "isolation.level": isolation_level}) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        values: list[bytes] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (expected is None or len(values) < expected):
            values.extend(record.value for record in consumer.poll(0.5))
        return sorted(values)


def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def test_committed_records_are_read_under_read_committed(kfk_broker: str) -> None:
    topic = topic_name()
    create(kfk_broker, topic, 2)
    with transactional_producer(kfk_broker) as producer:
        producer.begin_transaction()
        futures = [producer.send(topic, f"v{n}".encode(), partition=n % 2) for n in range(10)]
        producer.commit_transaction(30)
        assert all(future.done() and future.exception(0) is None for future in futures)
    assert read_all(kfk_broker, topic, 2, "read_committed", expected=10) == sorted(f"v{n}".encode()
                                                                                  for n in range(10))
    with Consumer({"bootstrap.servers": kfk_broker}) as consumer:
        ends = consumer.end_offsets([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    assert ends == {TopicPartition(topic, 0): 6, TopicPartition(topic, 1): 6}  # five records and a COMMIT marker


def test_kfk_producer_runs_transaction_version_2(kfk_broker: str) -> None:
    """kfk's producer follows the finalized transaction.version 2: no AddPartitionsToTxn/AddOffsetsToTxn (the
    coordinator learns the partitions from Produce v12 and TxnOffsetCommit v5), and each EndTxn v5 bumps the
    epoch, which the producer continues with."""
    topic = topic_name()
    create(kfk_broker, topic, 1)
    transactional_id = f"txn-{uuid.uuid4().hex[:8]}"
    with Admin({"bootstrap.servers": kfk_broker}) as admin, \
            transactional_producer(kfk_broker, transactional_id) as producer:
        def described():
            description = admin.describe_transactions([transactional_id])[transactional_id]
            assert not isinstance(description, Exception)
            return description

        initial = described()
        for n in range(2):
            producer.begin_transaction()
            producer.send(topic, f"tv2-{n}".encode(), partition=0)
            producer.flush(15)
            ongoing = described()
            assert ongoing.state == "Ongoing" and ongoing.topic_partitions == {TopicPartition(topic, 0)}
            producer.commit_transaction(30)
        after = described()
        assert (after.producer_id, after.producer_epoch) == (initial.producer_id, initial.producer_epoch + 2)
        # The bumped epoch is the producer's own: a third transaction at it commits.
        producer.begin_transaction()
        producer.send(topic, b"tv2-2", partition=0)
        producer.commit_transaction(30)
    assert read_all(kfk_broker, topic, 1, "read_committed", expected=3) == [b"tv2-0", b"tv2-1", b"tv2-2"]


def test_aborted_records_are_hidden_from_read_committed_only(kfk_broker: str) -> None:
    topic = topic_name()
    create(kfk_broker, topic)
    with transactional_producer(kfk_broker) as producer:
        producer.begin_transaction()
        for n in range(5):
            producer.send(topic, f"aborted-{n}".encode())
        producer.flush(30)  # written to the log, then aborted
        producer.abort_transaction(30)
        producer.begin_transaction()
        for n in range(3):
            producer.send(topic, f"committed-{n}".encode())
        producer.commit_transaction(30)
    committed = [f"committed-{n}".encode() for n in range(3)]
    assert read_all(kfk_broker, topic, 1, "read_committed", timeout=5) == committed
    assert read_all(kfk_broker, topic, 1, "read_uncommitted", expected=8) == \
        sorted(committed + [f"aborted-{n}".encode() for n in range(5)])


def test_records_not_sent_before_abort_fail_with_transaction_aborted(kfk_broker: str) -> None:
    topic = topic_name()
    create(kfk_broker, topic)
    with Producer({"bootstrap.servers": kfk_broker, "transactional.id": f"txn-{topic}",
                   "linger.ms": 60_000, "batch.size": 1_000_000}) as producer:
        producer.init_transactions(30)
        producer.begin_transaction()
        future = producer.send(topic, b"never sent")  # lingers in the accumulator
        producer.abort_transaction(30)
        assert isinstance(future.exception(10), TransactionAbortedError)
        with pytest.raises(InvalidTxnStateError):
            producer.send(topic, b"outside a transaction")


def test_an_open_transaction_holds_read_committed_consumers_at_the_last_stable_offset(kfk_broker: str) -> None:
    topic = topic_name()
    create(kfk_broker, topic)
    tp = TopicPartition(topic, 0)
    with transactional_producer(kfk_broker) as producer:
        producer.begin_transaction()
        for n in range(4):
            producer.send(topic, f"open-{n}".encode())
        producer.flush(30)
        with Consumer({"bootstrap.servers": kfk_broker, "isolation.level": "read_committed"}) as committed, \
                Consumer({"bootstrap.servers": kfk_broker, "isolation.level": "read_uncommitted"}) as uncommitted:
            assert committed.end_offsets([tp]) == {tp: 0}  # the last stable offset
            assert uncommitted.end_offsets([tp]) == {tp: 4}  # the high watermark
        assert read_all(kfk_broker, topic, 1, "read_committed", timeout=3) == []
        producer.commit_transaction(30)
    assert read_all(kfk_broker, topic, 1, "read_committed", expected=4) == [f"open-{n}".encode() for n in range(4)]


def test_send_offsets_to_transaction_commits_the_group_offsets_with_the_transaction(kfk_broker: str) -> None:
    source, sink = topic_name(), topic_name()
    create(kfk_broker, source)
    create(kfk_broker, sink)
    with Producer({"bootstrap.servers": kfk_broker}) as plain:
        for n in range(10):
            plain.send(source, f"in-{n}".encode())
    group = f"g-{source}"
    tp = TopicPartition(source, 0)
    with Consumer({"bootstrap.servers": kfk_broker, "group.id": group, "enable.auto.commit": False,
                   "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
                   "heartbeat.interval.ms": 500}) as consumer, transactional_producer(kfk_broker) as producer:
        consumer.subscribe([source])
        records: list = []
        deadline = time.monotonic() + 20
        while len(records) < 10 and time.monotonic() < deadline:
            records.extend(consumer.poll(0.5))
        assert len(records) == 10
        metadata = consumer.group_metadata()
        assert metadata.group_id == group and metadata.generation_id >= 1 and metadata.member_id

        producer.begin_transaction()
        producer.send(sink, b"out-aborted")
        producer.send_offsets_to_transaction({tp: 5}, metadata, 30)
        producer.abort_transaction(30)
        assert consumer.committed([tp]) == {tp: None}

        producer.begin_transaction()
        for record in records:
            producer.send(sink, record.value.replace(b"in-", b"out-"))
        producer.send_offsets_to_transaction({tp: OffsetAndMetadata(records[-1].offset + 1)}, metadata, 30)
        producer.commit_transaction(30)
        assert consumer.committed([tp])[tp].offset == 10
    assert read_all(kfk_broker, sink, 1, "read_committed", expected=10) == sorted(f"out-{n}".encode()
                                                                                 for n in range(10))


def test_a_new_producer_with_the_same_transactional_id_fences_the_old_one(kfk_broker: str) -> None:
    topic = topic_name()
    create(kfk_broker, topic)
    transactional_id = f"txn-{topic}"
    with transactional_producer(kfk_broker, transactional_id) as old:
        old.begin_transaction()
        old.send(topic, b"zombie")
        old.flush(30)
        with transactional_producer(kfk_broker, transactional_id) as new:  # aborts the zombie's transaction
            new.begin_transaction()
            new.send(topic, b"fresh")
            new.commit_transaction(30)
            with pytest.raises(KafkaError):  # the broker refuses the stale epoch (INVALID_PRODUCER_EPOCH)
                old.send(topic, b"more zombie").result(10)
            with pytest.raises(ProducerFencedError) as raised:
                old.commit_transaction(30)
            assert raised.value.fatal and not raised.value.txn_requires_abort
            with pytest.raises(ProducerFencedError):
                old.begin_transaction()
    assert read_all(kfk_broker, topic, 1, "read_committed", timeout=5) == [b"fresh"]


def test_confluent_read_committed_consumer_reads_what_kfk_committed(kfk_broker: str) -> None:
    topic = topic_name()
    create(kfk_broker, topic)
    with transactional_producer(kfk_broker) as producer:
        producer.begin_transaction()
        producer.send(topic, b"aborted")
        producer.flush(30)
        producer.abort_transaction(30)
        producer.begin_transaction()
        producer.send(topic, b"committed")
        producer.commit_transaction(30)

    def confluent_values(isolation_level: str, expected: int) -> list[bytes]:
        consumer = confluent_kafka.Consumer({"bootstrap.servers": kfk_broker, "group.id": f"g-{uuid.uuid4().hex}",
                                             "auto.offset.reset": "earliest", "isolation.level": isolation_level,
                                             "enable.auto.commit": False})
        try:
            consumer.subscribe([topic])
            values: list[bytes] = []
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and len(values) < expected:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None:
                    values.append(message.value())
            time.sleep(1)  # anything that should stay hidden would have arrived by now
            while (message := consumer.poll(0.5)) is not None:
                if message.error() is None:
                    values.append(message.value())
            return sorted(values)
        finally:
            consumer.close()

    assert confluent_values("read_committed", 1) == [b"committed"]
    assert confluent_values("read_uncommitted", 2) == [b"aborted", b"committed"]


def test_kfk_read_committed_consumer_reads_what_confluent_committed(kfk_broker: str) -> None:
    topic = topic_name()
    create(kfk_broker, topic)
    producer = confluent_kafka.Producer({"bootstrap.servers": kfk_broker, "transactional.id": f"txn-{topic}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"aborted")
    producer.flush(30)
    producer.abort_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"committed")
    producer.commit_transaction(30)
    assert read_all(kfk_broker, topic, 1, "read_committed", timeout=5) == [b"committed"]
    assert read_all(kfk_broker, topic, 1, "read_uncommitted", expected=2) == [b"aborted", b"committed"]
