"""Fetch and offsets over real sockets: long polls woken by appends, consumers at the end, ListOffsets semantics as
confluent-kafka asks them, DeleteRecords, DescribeLogDirs."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import OFFSET_END, Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from kfk.errors import ErrorCode
from kfk.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from kfk.protocol.messages.fetch import FetchRequest
from kfk.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from tests.integration.test_clients import consume_all, create_topic, produce_all
from tests.integration.wire import connect, request

pytestmark = pytest.mark.integration


def fetch_request(topic: str, offset: int, max_wait_ms: int) -> FetchRequest:
    return FetchRequest(max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, topics=[FetchRequest.FetchTopic(
        topic=topic, partitions=[FetchRequest.FetchPartition(partition=0, fetch_offset=offset,
                                                             partition_max_bytes=1 << 20)])])


def test_a_long_poll_answers_as_soon_as_a_record_arrives(kfk_broker: str) -> None:
    create_topic(kfk_broker, "long-poll")
    producer = Producer({"bootstrap.servers": kfk_broker, "linger.ms": 0})

    def produce_later() -> None:
        time.sleep(0.3)
        producer.produce("long-poll", b"wake up")
        producer.flush(10)

    with connect(kfk_broker) as sock:
        start = time.monotonic()
        empty = request(sock, fetch_request("long-poll", 0, 200), 12)
        assert 0.15 < time.monotonic() - start < 2  # nothing arrived: answered at max_wait_ms
        assert empty.responses[0].partitions[0].records in (b"", None)
        thread = threading.Thread(target=produce_later)
        thread.start()
        start = time.monotonic()
        response = request(sock, fetch_request("long-poll", 0, 10_000), 12, 2)
        waited = time.monotonic() - start
        thread.join()
    partition = response.responses[0].partitions[0]
    assert partition.high_watermark == 1 and b"wake up" in bytes(partition.records)
    assert waited < 3  # woken by the append, long before max_wait_ms


def test_a_consumer_at_the_end_sees_only_new_records(kfk_broker: str) -> None:
    create_topic(kfk_broker, "tail")
    produce_all(kfk_broker, "tail", [(0, None, b"old", [])] * 5)
    consumer = Consumer({"bootstrap.servers": kfk_broker, "group.id": "tail", "enable.auto.commit": False})
    consumer.assign([ConfluentTopicPartition("tail", 0, OFFSET_END)])
    try:
        assert consumer.consume(10, 1.0) == []
        produce_all(kfk_broker, "tail", [(0, None, b"new", [])])
        received = []
        deadline = time.monotonic() + 10
        while not received and time.monotonic() < deadline:
            received = [m for m in consumer.consume(10, 0.5) if m.error() is None]
    finally:
        consumer.close()
    assert [(m.offset(), m.value()) for m in received] == [(5, b"new")]


def test_list_offsets_earliest_latest_and_by_timestamp(kfk_broker: str) -> None:
    create_topic(kfk_broker, "offsets")
    base = int(time.time() * 1000) - 60_000
    producer = Producer({"bootstrap.servers": kfk_broker, "linger.ms": 0})
    for index in range(10):
        producer.produce("offsets", f"v{index}".encode(), timestamp=base + index * 1000)
        producer.flush(10)  # one batch per record: lookups land inside the log, not on batch starts only
    consumer = Consumer({"bootstrap.servers": kfk_broker, "group.id": "offsets", "enable.auto.commit": False})
    try:
        assert consumer.get_watermark_offsets(ConfluentTopicPartition("offsets", 0), timeout=10) == (0, 10)
        lookups = [ConfluentTopicPartition("offsets", 0, timestamp)
                   for timestamp in (base + 3500, base, base + 9000, base + 10_000)]
        found = []
        for lookup in lookups:
            [answer] = consumer.offsets_for_times([lookup], timeout=10)
            found.append(answer.offset)
        assert found == [4, 0, 9, -1]  # the first offset at or after the time; past the end: -1 (OFFSET_END)
        admin = AdminClient({"bootstrap.servers": kfk_broker})
        [(partition, future)] = admin.delete_records([ConfluentTopicPartition("offsets", 0, 6)]).items()
        assert future.result(10).low_watermark == 6
        assert consumer.get_watermark_offsets(ConfluentTopicPartition("offsets", 0), timeout=10) == (6, 10)
    finally:
        consumer.close()
    received = consume_all(kfk_broker, "offsets", 1, 4, start=-2)  # OFFSET_BEGINNING
    assert [offset for offset, *_ in received[0]] == [6, 7, 8, 9]


def test_describe_log_dirs_lists_the_partitions(kfk_broker: str) -> None:
    create_topic(kfk_broker, "dirs", partitions=2)
    produce_all(kfk_broker, "dirs", [(1, None, b"x" * 100, [])] * 3)
    with connect(kfk_broker) as sock:
        response = request(sock, DescribeLogDirsRequest(topics=None), 4)
    [result] = response.results
    assert result.error_code == ErrorCode.NONE and result.total_bytes >= result.usable_bytes > 0
    sizes = {p.partition_index: p.partition_size for t in result.topics if t.name == "dirs" for p in t.partitions}
    assert sizes[0] == 0 and sizes[1] > 300


def test_admin_list_offsets_and_offset_for_leader_epoch(kfk_broker: str) -> None:
    """AdminClient.list_offsets (ListOffsets v7+, MAX_TIMESTAMP included) and OffsetForLeaderEpoch over the wire."""
    create_topic(kfk_broker, "admin-offsets")
    base = int(time.time() * 1000) - 60_000
    producer = Producer({"bootstrap.servers": kfk_broker, "linger.ms": 50})
    for index, delta in enumerate([0, 5_000, 2_000, 1_000]):  # the largest timestamp is the second record's
        producer.produce("admin-offsets", f"v{index}".encode(), timestamp=base + delta)
    producer.flush(10)  # one batch of four: LATEST must be its end (4), not its start
    admin = AdminClient({"bootstrap.servers": kfk_broker})
    partition = ConfluentTopicPartition("admin-offsets", 0)
    answers = {}
    for name, spec in (("earliest", OffsetSpec.earliest()), ("latest", OffsetSpec.latest()),
                       ("max", OffsetSpec.max_timestamp()), ("at", OffsetSpec.for_timestamp(base + 1_500)),
                       ("future", OffsetSpec.for_timestamp(base + 120_000))):
        [(_, future)] = admin.list_offsets({partition: spec}).items()
        result = future.result(10)
        answers[name] = (result.offset, result.timestamp)
    assert answers["earliest"][0] == 0 and answers["latest"][0] == 4
    assert answers["max"] == (1, base + 5_000)
    assert answers["at"] == (1, base + 5_000)  # the first record at or after the time, in offset order
    assert answers["future"][0] == -1
    with connect(kfk_broker) as sock:
        request_ = OffsetForLeaderEpochRequest(replica_id=-1, topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
            topic="admin-offsets", partitions=[OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=0, leader_epoch=0)])])
        response = request(sock, request_, 4)
    epoch_end = response.topics[0].partitions[0]
    assert (epoch_end.error_code, epoch_end.leader_epoch, epoch_end.end_offset) == (ErrorCode.NONE, 0, 4)
