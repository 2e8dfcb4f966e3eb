"""AIOConsumer: the consumer for asyncio code, in the shape aiokafka's AIOKafkaConsumer has.

    consumer = AIOConsumer({"bootstrap.servers": "localhost:9092", "group.id": "billing"}, topics=["payments"])
    await consumer.start()
    try:
        async for record in consumer:                      # or: await consumer.getmany(timeout_ms=1000)
            handle(record)
            await consumer.commit()
    finally:
        await consumer.stop()

It is the synchronous Consumer (its fetcher, group coordinator, positions and offsets) with its network side on the
caller's event loop instead of a network thread (kfk.client.event_loop.CallerLoop): fetches run as tasks beside the
caller's, and getmany() hands out what they brought without leaving the loop. What the sync consumer does by
blocking (joining the group, looking up committed offsets and positions, synchronous commits, leaving the group) is
done from a worker thread (asyncio.to_thread) while the loop does the network work; rebalance listeners therefore
run in that thread. Pattern subscriptions are not offered here (their metadata lookup blocks in subscribe()).
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any, Callable

from kfk.client.consumer.consumer import Consumer, ConsumerRecords
from kfk.client.consumer.coordinator import ConsumerRebalanceListener
from kfk.client.event_loop import CallerLoop
from kfk.client.structs import ConsumerGroupMetadata, ConsumerRecord, OffsetAndTimestamp
from kfk.common.structs import OffsetAndMetadata, TopicPartition

__all__ = ["AIOConsumer"]

Deserializer = Callable[[bytes | None], Any]


class AIOConsumer:
    """An asyncio Kafka consumer. ``config`` takes Kafka's property names; keyword arguments the same in
    snake_case; ``topics`` are subscribed to at start()."""

    def __init__(self, config: Mapping[str, Any] | None = None, *, topics: Iterable[str] = (),
                 key_deserializer: Deserializer | None = None, value_deserializer: Deserializer | None = None,
                 **overrides: Any) -> None:
        self._config = config
        self._overrides = overrides
        self._deserializers = (key_deserializer, value_deserializer)
        self._topics = list(topics)
        self._consumer: Consumer | None = None
        self._data: asyncio.Event | None = None
        self._buffer: deque[ConsumerRecord] = deque()

    async def __aenter__(self) -> AIOConsumer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start the network side on the running loop (and subscribe to the ``topics`` given)."""
        if self._consumer is not None:
            return
        key_deserializer, value_deserializer = self._deserializers
        consumer = Consumer(self._config, key_deserializer=key_deserializer, value_deserializer=value_deserializer,
                            network_loop=CallerLoop(asyncio.get_running_loop()), **self._overrides)
        self._data = asyncio.Event()
        consumer._fetcher.on_data = self._data.set
        self._consumer = consumer
        if self._topics:
            self.subscribe(self._topics)

    async def stop(self) -> None:
        """Commit (with auto-commit), leave the group and close the connections."""
        consumer = self._consumer
        if consumer is None:
            return
        await asyncio.to_thread(consumer.close)

    close = stop

    @property
    def _started(self) -> Consumer:
        if self._consumer is None:
            raise RuntimeError("the consumer is not started: await start() first")
        return self._consumer

    # --- what to consume ---------------------------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str], listener: ConsumerRebalanceListener | None = None) -> None:
        """Join the group for ``topics`` (the join itself happens in the next getmany/getone)."""
        if isinstance(topics, (str, re.Pattern)):
            raise TypeError("the asyncio consumer subscribes to a list of topics; pattern subscriptions are the "
                            "sync Consumer's")
        self._started.subscribe(list(topics), listener)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        self._buffer.clear()
        self._started.assign(partitions)

    async def unsubscribe(self) -> None:
        self._buffer.clear()
        await asyncio.to_thread(self._started.unsubscribe)

    def assignment(self) -> set[TopicPartition]:
        return self._started.assignment()

    def subscription(self) -> set[str]:
        return self._started.subscription()

    # --- reading -----------------------------------------------------------------------------------------------------

    async def getmany(self, timeout_ms: float = 0, max_records: int | None = None
                      ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records by partition, waiting up to ``timeout_ms`` for some (at most ``max_records``, default
        max.poll.records)."""
        records = await self._poll(timeout_ms, max_records)
        return records.by_partition()

    async def getone(self) -> ConsumerRecord:
        """The next record, waiting as long as it takes."""
        buffer = self._buffer
        while not buffer:
            records = await self._poll(1000, None)
            buffer.extend(records)
        return buffer.popleft()

    def __aiter__(self) -> AIOConsumer:
        return self

    async def __anext__(self) -> ConsumerRecord:
        return await self.getone()

    async def _poll(self, timeout_ms: float, max_records: int | None) -> ConsumerRecords:
        consumer = self._started
        data = self._data
        assert data is not None
        if self._buffer:  # records getone() holds come first, in order
            taken = [self._buffer.popleft() for _ in range(min(len(self._buffer), max_records or len(self._buffer)))]
            by_partition: dict[TopicPartition, list[ConsumerRecord]] = {}
            for record in taken:
                by_partition.setdefault(TopicPartition(record.topic, record.partition), []).append(record)
            return ConsumerRecords(by_partition)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        while True:
            data.clear()
            records = consumer.poll_buffered(max_records)
            if records is None:  # group work or a position lookup, which wait: off the loop
                records = await asyncio.to_thread(consumer.poll, max(deadline - loop.time(), 0), max_records)
            if records:
                # The next fetch goes out before the caller works through these records, so that the broker's
                # time overlaps theirs (the loop is the only thread here): started now, written in one loop turn.
                consumer._fetcher.send_now()
                await asyncio.sleep(0)
                return records
            remaining = deadline - loop.time()
            if remaining <= 0:
                return records
            # Until a fetch brings data; at most a heartbeat interval (the coordinator's under group.protocol=consumer),
            # to keep up with the group.
            interval_ms = (consumer._coordinator.heartbeat_interval_ms if consumer._coordinator is not None
                           else consumer.config.heartbeat_interval_ms)
            try:
                await asyncio.wait_for(data.wait(), min(remaining, interval_ms / 1000))
            except asyncio.TimeoutError:
                pass

    # --- positions ---------------------------------------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self._buffer.clear()
        self._started.seek(partition, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._buffer.clear()
        self._started.seek_to_beginning(*partitions)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        self._buffer.clear()
        self._started.seek_to_end(*partitions)

    async def position(self, partition: TopicPartition) -> int:
        return await asyncio.to_thread(self._started.position, partition)

    def highwater(self, partition: TopicPartition) -> int | None:
        return self._started.highwater(partition)

    def pause(self, *partitions: TopicPartition) -> None:
        self._started.pause(*partitions)

    def resume(self, *partitions: TopicPartition) -> None:
        self._started.resume(*partitions)

    def paused(self) -> set[TopicPartition]:
        return self._started.paused()

    # --- offsets -----------------------------------------------------------------------------------------------------

    async def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int] | None = None) -> None:
        """Commit ``offsets`` (default: the positions of every assigned partition) and wait for the answer."""
        await asyncio.to_thread(self._started.commit_sync, offsets)

    async def committed(self, partition: TopicPartition) -> int | None:
        """The partition's committed offset, or None."""
        found = await asyncio.to_thread(self._started.committed, [partition])
        offset = found.get(TopicPartition(*partition))
        return offset.offset if offset is not None else None

    def group_metadata(self) -> ConsumerGroupMetadata:
        return self._started.group_metadata()

    async def beginning_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await asyncio.to_thread(self._started.beginning_offsets, list(partitions))

    async def end_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return await asyncio.to_thread(self._started.end_offsets, list(partitions))

    async def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]
                                ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        return await asyncio.to_thread(self._started.offsets_for_times, dict(timestamps))

    async def partitions_for_topic(self, topic: str) -> set[int]:
        return set(await asyncio.to_thread(self._started.partitions_for, topic))

    async def topics(self) -> set[str]:
        return set(await asyncio.to_thread(self._started.list_topics))
