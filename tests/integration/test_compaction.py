"""Compaction in a running broker, with confluent-kafka: a compacted topic ends with the latest value of each live key
and, after delete.retention.ms, no tombstones; a consumer reading while the cleaner works never sees a key go back to
an older value; __consumer_offsets stops growing under a consumer that commits all the time."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration

RECORDS = 200_000
KEYS = 1_000
TOMBSTONE_RATE = 0.05
DELETE_RETENTION_MS = 4_000
SEGMENT_MS = 1_000
CLEANER = {"log.cleaner.backoff.ms": "100"}


def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out waiting for {what}")


def read_pass(bootstrap: str, topic: str) -> list[tuple[int, bytes, int, bytes | None]]:
    """One read of the whole partition from its start: (offset, key, seq header, value) per record, checking on the
    way that no key's sequence number goes backwards."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{random.random()}",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([ConfluentTopicPartition(topic, 0, OFFSET_BEGINNING)])
    records: list[tuple[int, bytes, int, bytes | None]] = []
    last_seq: dict[bytes, int] = {}
    try:
        while True:
            message = consumer.poll(10)
            assert message is not None, "the read stalled"
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    return records
                raise AssertionError(message.error())
            seq = int(dict(message.headers())["seq"])
            key = message.key()
            assert seq > last_seq.get(key, -1), f"key {key!r} went back from seq {last_seq[key]} to {seq}"
            last_seq[key] = seq
            records.append((message.offset(), key, seq, message.value()))
    finally:
        consumer.close()


def test_a_compacted_topic_keeps_the_latest_value_per_key_and_drops_tombstones(kfk_broker_factory) -> None:
    broker = kfk_broker_factory(CLEANER)
    bootstrap = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("compacted", 1, 1, config={
        "cleanup.policy": "compact", "segment.bytes": str(1024 * 1024), "segment.ms": str(SEGMENT_MS),
        "delete.retention.ms": str(DELETE_RETENTION_MS), "file.delete.delay.ms": "1000",
    })])["compacted"].result(15)

    # A reader goes over the partition again and again while it is written and cleaned.
    stop = threading.Event()
    passes: list[int] = []
    failures: list[BaseException] = []

    def reader() -> None:
        while not stop.is_set():
            try:
                passes.append(len(read_pass(bootstrap, "compacted")))
            except BaseException as error:  # reported by the test thread
                failures.append(error)
                return

    def view() -> dict[bytes, bytes | None] | None:
        """Key -> value of the whole partition, or None while some key still has more than one record."""
        records = read_pass(bootstrap, "compacted")
        if len({key for _, key, _, _ in records}) != len(records):
            return None
        return {key: value for _, key, _, value in records if key != b"roll"}

    reading = threading.Thread(target=reader, daemon=True)
    reading.start()
    try:
        rng = random.Random(16)
        latest: dict[bytes, bytes | None] = {}
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.num.messages": 500})
        for seq in range(RECORDS):
            key = f"key-{rng.randrange(KEYS):04d}".encode()
            value = None if rng.random() < TOMBSTONE_RATE else f"value-{seq}".encode()
            latest[key] = value
            while True:
                try:
                    producer.produce("compacted", value, key=key, partition=0, headers={"seq": str(seq)})
                    break
                except BufferError:
                    producer.poll(0.05)
            producer.poll(0)
        assert producer.flush(60) == 0
        # The cleaner never touches the active segment: once segment.ms has passed, one more record rolls it.
        time.sleep(SEGMENT_MS / 1000 + 0.2)
        producer.produce("compacted", b"roll", key=b"roll", partition=0, headers={"seq": str(RECORDS)})
        assert producer.flush(15) == 0
        live = {key: value for key, value in latest.items() if value is not None}
        tombstoned = {key for key, value in latest.items() if value is None}
        assert tombstoned, "the workload deletes some keys"

        # First: exactly one record per key, the latest (tombstones still there, within delete.retention.ms).
        wait_until(lambda: view() == latest, 120, "one record per key")
        # Then, delete.retention.ms after the cleaning that kept them, the tombstones go.
        wait_until(lambda: view() == live, 60 + DELETE_RETENTION_MS / 1000, "the tombstones to go")
    finally:
        stop.set()
        reading.join(60)
    assert not failures, failures[0]
    assert len(passes) >= 2, "the reader read the partition while it was cleaned"
    assert not tombstoned & set(view() or {})


def offsets_partition_size(log_dir: str) -> int:
    """The size on disk of __consumer_offsets-0: its live segments (not those waiting for deletion)."""
    directory = os.path.join(log_dir, "__consumer_offsets-0")
    if not os.path.isdir(directory):
        return 0
    return sum(os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory)
               if name.endswith(".log"))


def test_consumer_offsets_shrinks_under_a_consumer_committing_every_100_ms(kfk_broker_factory) -> None:
    broker = kfk_broker_factory({**CLEANER, "offsets.topic.num.partitions": "1",
                                 "offsets.topic.segment.bytes": "4096"})
    bootstrap = broker.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("input", 1, 1)])["input"].result(15)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "committer", "enable.auto.commit": False})
    consumer.assign([ConfluentTopicPartition("input", 0, 0)])
    sizes: list[int] = []
    try:
        for commit in range(300):  # 30 s of commits, one offset each time
            consumer.commit(offsets=[ConfluentTopicPartition("input", 0, commit)], asynchronous=False)
            sizes.append(offsets_partition_size(str(broker.log_dir)))
            time.sleep(0.1)
        committed = consumer.committed([ConfluentTopicPartition("input", 0)], timeout=10)[0].offset
    finally:
        consumer.close()
    peak = max(sizes)
    peak_at = sizes.index(peak)
    print(f"__consumer_offsets-0: peak {peak} bytes after {peak_at} commits, {sizes[-1]} bytes after {len(sizes)}")
    # 300 commits of ~150 bytes each would be about 45 KB uncompacted; compaction keeps it bounded and it shrinks.
    assert min(sizes[peak_at:]) < peak
    assert sizes[-1] < 300 * 100 / 2
    assert committed == 299
