"""kfk.client.aio against a real broker, with confluent-kafka (librdkafka) on the other side: what AIOProducer
writes confluent-kafka reads, what confluent-kafka writes AIOConsumer reads (as a group member and by assignment),
AIOAdmin's calls, and AIOProducer's transactions as a read_committed librdkafka consumer sees them."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka import TopicPartition as ConfluentTopicPartition

from kfk.client import NewTopic, RecordMetadata, TopicPartition
from kfk.client.aio import AIOAdmin, AIOConsumer, AIOProducer
from kfk.errors import KafkaError

pytestmark = pytest.mark.integration


async def create(bootstrap: str, topic: str, partitions: int) -> None:
    async with AIOAdmin({"bootstrap.servers": bootstrap}) as admin:
        assert await admin.create_topics([NewTopic(topic, partitions, 1)]) == {topic: None}


def confluent_read(bootstrap: str, topic: str, partitions: int, count: int, **settings: object) -> list:
    consumer = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                                  "enable.auto.commit": False, **settings})
    consumer.assign([ConfluentTopicPartition(topic, p, 0) for p in range(partitions)])
    records = []
    deadline = time.monotonic() + 20
    try:
        while len(records) < count and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=1000, timeout=0.5):
                assert message.error() is None, message.error()
                records.append((message.partition(), message.offset(), message.key(), message.value(),
                                message.headers()))
    finally:
        consumer.close()
    return records


def test_aio_producer_to_confluent_consumer(bootstrap: str, topic_name: str) -> None:
    async def produce() -> tuple[RecordMetadata, list, list]:
        await create(bootstrap, topic_name, 2)
        async with AIOProducer({"bootstrap.servers": bootstrap, "linger.ms": 5}) as producer:
            first = await producer.send_and_wait(topic_name, b"first", key=b"k", partition=0,
                                                 headers=[("h", b"1")])
            futures = [await producer.send(topic_name, f"value-{n}".encode(), partition=n % 2) for n in range(500)]
            runs: list = []
            await producer.send_batch(topic_name, [b"batched"] * 300, partition=1,
                                      callback=lambda metadata, count, error: runs.append((metadata, count, error)))
            await producer.flush()
            assert all(future.done() for future in futures)
            return first, [await future for future in futures], runs

    first, metadata, runs = asyncio.run(produce())
    assert (first.partition, first.offset, first.serialized_key_size) == (0, 0, 1)
    assert [m.offset for m in metadata if m.partition == 0] == list(range(1, 251))
    assert [m.offset for m in metadata if m.partition == 1] == list(range(250))
    assert sum(count for _, count, _ in runs) == 300 and all(error is None for _, _, error in runs)
    assert runs[0][0].offset == 250 and runs[0][0].partition == 1

    records = confluent_read(bootstrap, topic_name, 2, 801)
    assert len(records) == 801
    assert (0, 0, b"k", b"first", [("h", b"1")]) in records
    partition_one = sorted((offset, value) for partition, offset, _, value, _ in records if partition == 1)
    assert partition_one == ([(n, f"value-{2 * n + 1}".encode()) for n in range(250)]
                             + [(250 + n, b"batched") for n in range(300)])


def test_confluent_producer_to_aio_consumer_group(bootstrap: str, topic_name: str) -> None:
    count = 1500
    asyncio.run(create(bootstrap, topic_name, 3))
    producer = ConfluentProducer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for n in range(count):
        producer.produce(topic_name, f"value-{n}".encode(), key=f"key-{n % 50}".encode(),
                         headers=[("n", str(n).encode())])
    assert producer.flush(20) == 0

    async def consume() -> tuple[list, set, dict]:
        async with AIOConsumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic_name}",
                                "auto.offset.reset": "earliest", "enable.auto.commit": False},
                               topics=[topic_name]) as consumer:
            records = []
            deadline = time.monotonic() + 30
            while len(records) < count - 10 and time.monotonic() < deadline:
                for batch in (await consumer.getmany(timeout_ms=500, max_records=count - 10 - len(records))).values():
                    records.extend(batch)
            async for record in consumer:  # the last ten through async iteration
                records.append(record)
                if len(records) == count:
                    break
            await consumer.commit()
            committed = {p: await consumer.committed(TopicPartition(topic_name, p)) for p in range(3)}
            return records, consumer.assignment(), committed

    records, assignment, committed = asyncio.run(consume())
    assert assignment == {TopicPartition(topic_name, p) for p in range(3)}
    assert sorted(int(record.value[6:]) for record in records) == list(range(count))
    for record in records:
        assert record.headers == [("n", record.value[6:])]
        assert record.key == f"key-{int(record.value[6:]) % 50}".encode()
    ends = {}
    for record in records:
        ends[record.partition] = max(ends.get(record.partition, 0), record.offset + 1)
    assert committed == ends


def test_aio_consumer_assign_seek_and_offsets(bootstrap: str, topic_name: str) -> None:
    asyncio.run(create(bootstrap, topic_name, 1))
    producer = ConfluentProducer({"bootstrap.servers": bootstrap})
    for n in range(100):
        producer.produce(topic_name, str(n).encode(), partition=0)
    assert producer.flush(20) == 0
    tp = TopicPartition(topic_name, 0)

    async def consume() -> tuple[list[int], int, dict, dict, int]:
        async with AIOConsumer({"bootstrap.servers": bootstrap}) as consumer:
            consumer.assign([tp])
            consumer.seek(tp, 90)
            values = []
            deadline = time.monotonic() + 20
            while len(values) < 10 and time.monotonic() < deadline:
                values.extend(int(record.value) for record in (await consumer.getmany(timeout_ms=500)).get(tp, []))
            position = await consumer.position(tp)
            return (values, position, await consumer.beginning_offsets([tp]), await consumer.end_offsets([tp]),
                    consumer.highwater(tp))

    values, position, beginning, end, highwater = asyncio.run(consume())
    assert values == list(range(90, 100))
    assert position == 100
    assert beginning == {tp: 0} and end == {tp: 100} and highwater == 100


def test_aio_admin_calls(bootstrap: str, topic_name: str) -> None:
    async def run() -> tuple:
        async with AIOAdmin({"bootstrap.servers": bootstrap}) as admin:
            created = await admin.create_topics([NewTopic(topic_name, 4, 1)])
            listed = await admin.list_topics()
            described = await admin.describe_topics([topic_name])
            cluster = await admin.describe_cluster()
            deleted = await admin.delete_topics([topic_name])
            return created, listed, described, cluster, deleted

    created, listed, described, cluster, deleted = asyncio.run(run())
    assert created == {topic_name: None}
    assert topic_name in listed
    assert [p.partition for p in described[topic_name].partitions] == [0, 1, 2, 3]
    assert len(cluster.brokers) == 1
    assert deleted == {topic_name: None}


def test_aio_producer_transactions_seen_by_confluent_read_committed(bootstrap: str, topic_name: str) -> None:
    async def produce() -> None:
        await create(bootstrap, topic_name, 1)
        async with AIOProducer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{topic_name}"}) as producer:
            await producer.init_transactions()
            producer.begin_transaction()
            for n in range(10):
                await producer.send(topic_name, f"aborted-{n}".encode())
            await producer.abort_transaction()
            producer.begin_transaction()
            for n in range(10):
                await producer.send(topic_name, f"committed-{n}".encode())
            await producer.commit_transaction()

    asyncio.run(produce())
    records = confluent_read(bootstrap, topic_name, 1, 10, **{"isolation.level": "read_committed"})
    assert [value for _, _, _, value, _ in records] == [f"committed-{n}".encode() for n in range(10)]


def test_aio_producer_send_to_a_partition_the_topic_lacks(bootstrap: str, topic_name: str) -> None:
    async def produce() -> None:
        await create(bootstrap, topic_name, 1)
        async with AIOProducer({"bootstrap.servers": bootstrap, "max.block.ms": 2000}) as producer:
            await producer.send(topic_name, b"x", partition=7)

    with pytest.raises(KafkaError, match="partition 7 of topic"):
        asyncio.run(produce())


def test_aio_producer_waits_for_buffer_memory_without_blocking_the_loop(bootstrap: str, topic_name: str) -> None:
    """buffer.memory far below what is sent: send() awaits acknowledgements to free it (the loop keeps running: a
    ticker task advances meanwhile) and every record still lands, in order."""
    count = 3000

    async def produce() -> tuple[list[RecordMetadata], int, int]:
        await create(bootstrap, topic_name, 1)
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0)

        config = {"bootstrap.servers": bootstrap, "batch.size": 1024, "buffer.memory": 4096, "linger.ms": 1}
        async with AIOProducer(config) as producer:
            await producer.partitions_for(topic_name)
            ticking = asyncio.ensure_future(ticker())
            futures = [await producer.send(topic_name, b"%06d" % n + b"x" * 200) for n in range(count)]
            stop.set()
            await ticking
            waited = producer._core.accumulator.changes  # batches made: each of them reserved 1,024 bytes
            return [await future for future in futures], ticks, waited

    metadata, ticks, batches = asyncio.run(produce())
    assert [m.offset for m in metadata] == list(range(count))
    assert batches * 1024 > 4 * 4096 and ticks > batches / 4  # far more memory than the buffer; the loop ran
    values = [value for _, _, _, value, _ in confluent_read(bootstrap, topic_name, 1, count)]
    assert values == [b"%06d" % n + b"x" * 200 for n in range(count)]


def test_aio_record_futures_deliver_each_records_error(bootstrap: str, topic_name: str) -> None:
    """A batch the broker refuses (larger than the topic's max.message.bytes) fails its own records' futures: await,
    result() and exception() give the error, done callbacks run (one raising does not stop the others or the
    sender), and the records of the other partition succeed."""
    async def produce() -> tuple:
        async with AIOAdmin({"bootstrap.servers": bootstrap}) as admin:
            created = await admin.create_topics([NewTopic(topic_name, 2, 1, configs={"max.message.bytes": "2000"})])
            assert created == {topic_name: None}
        async with AIOProducer({"bootstrap.servers": bootstrap, "linger.ms": 50}) as producer:
            big = await producer.send(topic_name, b"b" * 3000, partition=0)
            small = await producer.send(topic_name, b"small", partition=1)
            with pytest.raises(asyncio.InvalidStateError):
                big.result()
            with pytest.raises(asyncio.InvalidStateError):  # get() too: never a wait that would stall the loop
                big.get()
            seen: list = []

            def failing(_future: object) -> None:
                raise RuntimeError("a callback that raises")

            big.add_done_callback(failing)
            big.add_done_callback(lambda future: seen.append(("big", future.exception())))
            small.add_done_callback(lambda future: seen.append(("small", future.exception())))
            with pytest.raises(KafkaError) as raised:
                await big
            small_metadata = await small
            late: list = []
            big.add_done_callback(late.append)  # already done: runs at once
            return big, raised.value, small_metadata, seen, late

    big, error, small_metadata, seen, late = asyncio.run(produce())
    assert "RecordTooLarge" in type(error).__name__ or "too large" in str(error).lower(), error
    assert big.done() and big.exception() is error
    with pytest.raises(type(error)):
        big.result()
    assert seen == [("big", error), ("small", None)] and late == [big]
    assert (small_metadata.partition, small_metadata.offset, small_metadata.serialized_value_size) == (1, 0, 5)


def test_aio_producer_idempotent_sends_keep_order_across_partitions(bootstrap: str, topic_name: str) -> None:
    """The default producer is idempotent (acks=all): records sent with no await between them, across partitions
    and many batches, get consecutive offsets per partition in send order."""
    count = 4000

    async def produce() -> list[RecordMetadata]:
        await create(bootstrap, topic_name, 3)
        async with AIOProducer({"bootstrap.servers": bootstrap, "batch.size": 2048}) as producer:
            assert producer._core.idempotent
            futures = [await producer.send(topic_name, b"v%d" % n, key=b"k%d" % (n % 7)) for n in range(count)]
            await producer.flush()
            return [future.result() for future in futures]

    metadata = asyncio.run(produce())
    by_partition: dict[int, list[int]] = {}
    for m in metadata:
        by_partition.setdefault(m.partition, []).append(m.offset)
    assert sum(map(len, by_partition.values())) == count and len(by_partition) > 1
    assert all(offsets == list(range(len(offsets))) for offsets in by_partition.values())
