"""The batch APIs against a real broker: Producer.produce_batch (runs of records per batch, one callback per run,
keyed records by murmur2, keyless to one partition, idempotent and acks=0) and Consumer.consume(num_messages)."""

from __future__ import annotations

import threading
import time

import pytest

from kfk.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from kfk.client.producer import partition_for_key
from kfk.errors import RecordTooLargeError

pytestmark = pytest.mark.integration


def create(bootstrap: str, topic: str, partitions: int = 1) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.create_topics([NewTopic(topic, partitions, 1)]) == {topic: None}


def consume(bootstrap: str, topic: str, partitions: int, expected: int) -> list:
    with Consumer({"bootstrap.servers": bootstrap}) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        records: list = []
        deadline = time.monotonic() + 15
        while len(records) < expected and time.monotonic() < deadline:
            records.extend(consumer.consume(num_messages=expected - len(records), timeout=0.5))
        return records


@pytest.mark.parametrize("settings", [{}, {"acks": "1", "enable.idempotence": False}],
                         ids=["idempotent", "acks=1"])
def test_produce_batch_runs_and_offsets(bootstrap: str, topic_name: str, settings: dict) -> None:
    create(bootstrap, topic_name)
    runs: list = []
    lock = threading.Lock()

    def delivered(metadata, count, error) -> None:
        with lock:
            runs.append((metadata, count, error))

    values = [f"value-{n}".encode() * 10 for n in range(3000)]
    with Producer({"bootstrap.servers": bootstrap, "batch.size": 16384, "linger.ms": 5, **settings}) as producer:
        producer.send(topic_name, b"single")
        producer.produce_batch(topic_name, values[:1000], callback=delivered, timestamp_ms=1_700_000_000_000)
        producer.produce_batch(topic_name, values[1000:], callback=delivered)
        producer.flush()
    assert all(error is None for _, _, error in runs)
    assert len(runs) > 2  # 3000 records of ~80 bytes fill many 16 KiB batches: one callback per batch
    assert sum(count for _, count, _ in runs) == 3000
    offsets = sorted((metadata.offset, count) for metadata, count, _ in runs)
    assert offsets[0][0] == 1
    for (offset, count), (next_offset, _) in zip(offsets, offsets[1:]):
        assert offset + count == next_offset  # the runs tile the offsets, no gap, no overlap
    records = consume(bootstrap, topic_name, 1, 3001)
    assert [record.value for record in records] == [b"single", *values]
    assert {record.timestamp for record in records[1:1001]} == {1_700_000_000_000}


def test_produce_batch_keyed_records_go_to_their_key_partition(bootstrap: str, topic_name: str) -> None:
    create(bootstrap, topic_name, 4)
    keys = [f"key-{n % 37}".encode() for n in range(400)]
    values = [f"v{n}".encode() for n in range(400)]
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.produce_batch(topic_name, values, keys=keys)
        producer.flush()
    records = consume(bootstrap, topic_name, 4, 400)
    assert len(records) == 400
    for record in records:
        assert record.partition == partition_for_key(record.key, 4)
    by_key: dict[bytes, list[int]] = {}
    for record in sorted(records, key=lambda record: (record.partition, record.offset)):
        by_key.setdefault(record.key, []).append(int(record.value[1:]))
    assert all(numbers == sorted(numbers) for numbers in by_key.values())  # send order kept per key


def test_produce_batch_refuses_a_record_over_max_request_size(bootstrap: str, topic_name: str) -> None:
    create(bootstrap, topic_name)
    with Producer({"bootstrap.servers": bootstrap, "max.request.size": 2048}) as producer:
        with pytest.raises(RecordTooLargeError):
            producer.produce_batch(topic_name, [b"small", b"x" * 4096])


def test_consume_returns_at_most_num_messages(bootstrap: str, topic_name: str) -> None:
    create(bootstrap, topic_name)
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.produce_batch(topic_name, [str(n).encode() for n in range(50)])
        producer.flush()
    with Consumer({"bootstrap.servers": bootstrap}) as consumer:
        consumer.assign([TopicPartition(topic_name, 0)])
        consumer.seek_to_beginning()
        first: list = []
        deadline = time.monotonic() + 15
        while not first and time.monotonic() < deadline:
            first = consumer.consume(num_messages=20, timeout=0.5)
        assert 0 < len(first) <= 20
        rest: list = []
        while len(first) + len(rest) < 50 and time.monotonic() < deadline:
            rest.extend(consumer.consume(num_messages=100, timeout=0.5))
        assert [int(record.value) for record in first + rest] == list(range(50))
        assert consumer.consume(num_messages=10, timeout=0.2) == []
        with pytest.raises(ValueError):
            consumer.consume(num_messages=0)
