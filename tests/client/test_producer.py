"""The Producer against a real kfk broker: offsets, partitioning, callbacks, acks, codecs, idempotence, timeouts."""

from __future__ import annotations

import threading
import time

import pytest

from kfk.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from kfk.client.producer import partition_for_key
from kfk.errors import KafkaTimeoutError, RecordTooLargeError
from kfk.protocol.messages.fetch import FetchRequest
from kfk.records import RecordBatch, iter_batches
from tests.integration.wire import connect, request

pytestmark = pytest.mark.integration


def create(bootstrap: str, topic: str, partitions: int = 1, configs: dict | None = None) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.create_topics([NewTopic(topic, partitions, 1, configs or {})]) == {topic: None}


def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 10.0) -> list:
    with Consumer({"bootstrap.servers": bootstrap}) as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        consumer.seek_to_beginning()
        records: list = []
        deadline = time.monotonic() + timeout
        while len(records) < expected and time.monotonic() < deadline:
            records.extend(consumer.poll(0.5))
        return records


def test_offsets_are_consecutive_in_send_order(bootstrap: str, topic_name: str) -> None:
    create(bootstrap, topic_name)
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "batch.size": 200}) as producer:
        futures = [producer.send(topic_name, f"value-{n}".encode()) for n in range(300)]
        offsets = [future.result(10).offset for future in futures]
    assert offsets == list(range(300))
    assert [record.value for record in consume_all(bootstrap, topic_name, 1, 300)] == \
        [f"value-{n}".encode() for n in range(300)]


def test_keyed_records_go_to_the_murmur2_partition(bootstrap: str, topic_name: str) -> None:
    create(bootstrap, topic_name, 6)
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        results = {key: producer.send(topic_name, b"v", key=key).result(10).partition
                   for key in (f"key-{n}".encode() for n in range(100))}
    assert results == {key: partition_for_key(key, 6) for key in results}


def test_keyless_records_stick_to_one_partition_until_a_batch_is_full(bootstrap: str, topic_name: str) -> None:
    create(bootstrap, topic_name, 4)
    with Producer({"bootstrap.servers": bootstrap, "batch.size": 1000}) as producer:
        partitions = [producer.send(topic_name, b"x" * 90).result(10).partition for _ in range(40)]
    runs = [partitions[0]]
    for partition in partitions[1:]:
        if partition != runs[-1]:
            runs.append(partition)
    assert 3 <= len(runs) <= 6, partitions  # about 10 records of ~100 bytes per 1000-byte sticky stretch
    assert all(a != b for a, b in zip(runs, runs[1:]))


def test_callbacks_run_once_per_record_in_order(bootstrap: str, topic_name: str) -> None:
    create(bootstrap, topic_name)
    seen: list[int] = []
    done = threading.Event()
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for n in range(50):
            producer.send(topic_name, b"v", callback=lambda metadata, error: (seen.append(metadata.offset),
                                                                              len(seen) == 50 and done.set()))
        producer.flush()
    assert done.is_set() and seen == list(range(50))


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_every_acks_setting_delivers(bootstrap: str, topic_name: str, acks: str) -> None:
    create(bootstrap, topic_name)
    with Producer({"bootstrap.servers": bootstrap, "acks": acks}) as producer:
        metadata = [producer.send(topic_name, f"{n}".encode()) for n in range(100)]
        producer.flush()
        offsets = [future.result(5).offset for future in metadata]
    assert offsets == ([-1] * 100 if acks == "0" else list(range(100)))
    assert len(consume_all(bootstrap, topic_name, 1, 100)) == 100


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_round_trips_keys_values_and_headers(bootstrap: str, topic_name: str, codec: str) -> None:
    create(bootstrap, topic_name)
    with Producer({"bootstrap.servers": bootstrap, "compression.type": codec}) as producer:
        for n in range(200):
            producer.send(topic_name, f"value {n} ".encode() * 5, key=f"k{n}".encode(),
                          headers=[("n", str(n).encode()), ("empty", None)])
    records = consume_all(bootstrap, topic_name, 1, 200)
    assert [(r.key, r.value, r.headers) for r in records] == [
        (f"k{n}".encode(), f"value {n} ".encode() * 5, [("n", str(n).encode()), ("empty", None)]) for n in range(200)]


def _raw_batches(bootstrap: str, topic: str) -> list[RecordBatch]:
    with connect(bootstrap) as sock:
        response = request(sock, FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=10**6, isolation_level=0,
            topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=10**6)])]), 12)
    records = bytes(response.responses[0].partitions[0].records)
    return list(iter_batches(records))


def test_the_idempotent_producer_numbers_its_batches(bootstrap: str, topic_name: str) -> None:
    create(bootstrap, topic_name)
    with Producer({"bootstrap.servers": bootstrap, "batch.size": 500, "linger.ms": 50}) as producer:
        assert producer.idempotent
        for _ in range(60):
            producer.send(topic_name, b"x" * 40)
    batches = _raw_batches(bootstrap, topic_name)
    assert len(batches) > 3
    assert len({batch.producer_id for batch in batches}) == 1 and batches[0].producer_id >= 0
    sequence = 0
    for batch in batches:
        assert batch.base_sequence == sequence
        sequence += batch.records_count


def test_a_non_idempotent_producer_sends_no_producer_id(bootstrap: str, topic_name: str) -> None:
    create(bootstrap, topic_name)
    with Producer({"bootstrap.servers": bootstrap, "acks": "1"}) as producer:
        producer.send(topic_name, b"x").result(10)
    assert [batch.producer_id for batch in _raw_batches(bootstrap, topic_name)] == [-1]


def test_a_record_over_max_request_size_fails_in_send(bootstrap: str, topic_name: str) -> None:
    with Producer({"bootstrap.servers": bootstrap, "max.request.size": 1000}) as producer:
        with pytest.raises(RecordTooLargeError, match="max.request.size"):
            producer.send(topic_name, b"x" * 2000)


def test_a_batch_the_topic_refuses_fails_its_futures(bootstrap: str, topic_name: str) -> None:
    create(bootstrap, topic_name, configs={"max.message.bytes": "2000"})
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        future = producer.send(topic_name, b"x" * 5000)
        with pytest.raises(RecordTooLargeError):
            future.result(10)
        assert producer.send(topic_name, b"small").result(10).offset >= 0


def test_metadata_for_a_topic_that_never_appears_times_out_after_max_block_ms(kfk_broker_factory) -> None:
    broker = kfk_broker_factory({"auto.create.topics.enable": "false"})
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "max.block.ms": 500}) as producer:
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="not present in metadata after 500 ms"):
            producer.send("no-such-topic", b"x")
        assert time.monotonic() - start < 2


def test_records_expire_after_delivery_timeout_when_the_broker_is_gone(kfk_broker_factory) -> None:
    broker = kfk_broker_factory()
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "delivery.timeout.ms": 1500,
                   "request.timeout.ms": 500, "linger.ms": 0}) as producer:
        producer.send("t", b"first").result(10)
        broker.stop()
        future = producer.send("t", b"lost")
        with pytest.raises(KafkaTimeoutError):
            future.result(5)


def test_close_sends_what_is_queued(bootstrap: str, topic_name: str) -> None:
    create(bootstrap, topic_name)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1000})
    futures = [producer.send(topic_name, b"v") for _ in range(10)]
    producer.close()
    assert [future.result(0).offset for future in futures] == list(range(10))
    with pytest.raises(RuntimeError):
        producer.send(topic_name, b"late")


@pytest.mark.parametrize("max_in_flight", [1, 5])
def test_a_sender_with_every_request_slot_taken_is_woken_by_the_answers(bootstrap: str, topic_name: str,
                                                                          max_in_flight: int) -> None:
    """Small batches sent faster than they are answered keep every max.in.flight slot taken: the sender then sleeps
    without asking send() to wake it, and each answer must wake it for the next batch (a missed wake-up would leave
    the records queued until flush times out)."""
    create(bootstrap, topic_name)
    config = {"bootstrap.servers": bootstrap, "linger.ms": 0, "batch.size": 256, "acks": "1",
              "max.in.flight.requests.per.connection": max_in_flight}
    with Producer(config) as producer:
        futures = [producer.send(topic_name, b"%05d" % n + b"v" * 100) for n in range(1500)]
        producer.flush(30)
        assert producer._sender._saturated() is False  # everything answered: no slot is taken any more
        offsets = [future.result(0).offset for future in futures]
    assert offsets == list(range(1500))


@pytest.mark.parametrize("acks", ["1", "all"])
def test_a_one_partition_producer_sends_the_next_batch_from_each_answer(bootstrap: str, topic_name: str,
                                                                        acks: str) -> None:
    """The one-partition produce cycle: each answer sends the next full batches itself (no round of the sender's
    loop), keeping send order, offsets and (idempotent) sequences; the last, partial batch goes after linger.ms."""
    create(bootstrap, topic_name)
    config = {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1024, "acks": acks,
              "max.in.flight.requests.per.connection": 2}
    with Producer(config) as producer:
        sender = producer._sender
        drain_next, cycled = producer._accumulator.drain_next, []

        def spy(*args):
            batch = drain_next(*args)
            if batch is not None:
                cycled.append(batch)
            return batch

        producer._accumulator.drain_next = spy
        delivered: list[int] = []
        futures = [producer.send(topic_name, b"%05d" % n + b"v" * 95, callback=lambda metadata, error:
                                 delivered.append(metadata.offset)) for n in range(2000)]
        assert futures[-1].result(10).offset == 1999  # no flush: the last batch lingers, then goes
        assert sender._saturated() is False
    assert [future.result(0).offset for future in futures] == list(range(2000)) == delivered
    assert len(cycled) > 50  # most of the ~220 batches went from an answer
    assert [record.value[:5] for record in consume_all(bootstrap, topic_name, 1, 2000)] == \
        [b"%05d" % n for n in range(2000)]
    batches = _raw_batches(bootstrap, topic_name)
    if acks == "all":
        sequence = 0
        for batch in batches:
            assert batch.base_sequence == sequence
            sequence += batch.records_count
    else:
        assert {batch.producer_id for batch in batches} == {-1}
