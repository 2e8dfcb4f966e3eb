"""AIOProducer: the producer for asyncio code, in the shape aiokafka's AIOKafkaProducer has.

    producer = AIOProducer({"bootstrap.servers": "localhost:9092"})
    await producer.start()
    try:
        future = await producer.send("events", b"value", key=b"key")   # queued; the future resolves on the ack
        metadata = await future                                        # RecordMetadata
        metadata = await producer.send_and_wait("events", b"more")
        await producer.flush()
    finally:
        await producer.stop()

It is the synchronous Producer's core (kfk.client.producer.core: the accumulator, the sender, idempotence and
transactions) run on the caller's own event loop instead of a network thread: send() appends in the caller's task
and the sender task runs beside it, so nothing crosses threads. What the sync producer waits for by blocking (a
topic's metadata, buffer.memory, flush, the transaction calls), this one awaits.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Generator, Mapping, Sequence
from typing import Any

from kfk.client.config import PRODUCER_CONFIG_DEF, ClientConfig
from kfk.client.event_loop import resolve_waiter
from kfk.client.network_client import monotonic_ms
from kfk.client.producer.core import ProducerCore, Serializer
from kfk.client.producer.future import FutureRecordMetadata, RunCallback
from kfk.client.producer.transaction_manager import TransactionalRequestResult
from kfk.client.structs import ConsumerGroupMetadata, RecordMetadata
from kfk.common.structs import OffsetAndMetadata, TopicPartition
from kfk.errors import KafkaError, KafkaTimeoutError

__all__ = ["AIOProducer", "RecordFuture"]


class RecordFuture(FutureRecordMetadata):
    """What ``await send()`` returns: await it for the record's RecordMetadata (or its error). ``done()``,
    ``result()``, ``exception()`` and ``add_done_callback(fn(future))`` as an asyncio future has them; callbacks run
    on the loop when the record's batch is answered.

    The accumulator makes it in place of the sync producer's FutureRecordMetadata, over the same per-batch result:
    one small object per record and nothing per record when the batch completes but the callbacks asked for; an
    asyncio future is made only when a record is awaited before its batch is answered.
    """

    __slots__ = ()

    def result(self) -> RecordMetadata:  # type: ignore[override]  # asyncio's: never waits
        result = self._result
        if not result.done:
            raise asyncio.InvalidStateError("the record is not acknowledged yet")
        if result.error is not None:
            raise result.error
        return self._metadata()

    def exception(self) -> BaseException | None:  # type: ignore[override]
        if not self._result.done:
            raise asyncio.InvalidStateError("the record is not acknowledged yet")
        return self._result.error

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        if not self._result.done:
            waiter = asyncio.get_running_loop().create_future()
            if self._result.add_done_listener(functools.partial(resolve_waiter, waiter)):
                yield from waiter
        return self.result()

    get = result  # never the sync future's blocking get(timeout): it would stall the loop that answers the batch


class AIOProducer:
    """An asyncio Kafka producer. ``config`` takes Kafka's property names; keyword arguments the same in
    snake_case. Create it anywhere, then ``await start()`` on the loop that will use it."""

    def __init__(self, config: Mapping[str, Any] | None = None, *, key_serializer: Serializer | None = None,
                 value_serializer: Serializer | None = None, **overrides: Any) -> None:
        self.config = ClientConfig(PRODUCER_CONFIG_DEF, "producer", config, **overrides)
        self._core = ProducerCore(self.config, key_serializer, value_serializer, RecordFuture)
        self.transactional_id = self._core.transactional_id
        self._sender_task: asyncio.Task | None = None
        self._memory_freed: asyncio.Event | None = None

    async def __aenter__(self) -> AIOProducer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start the sender on the running loop and fetch the cluster's metadata (fails when no broker answers
        within max.block.ms)."""
        if self._sender_task is not None:
            return
        core = self._core
        self._memory_freed = asyncio.Event()
        core.accumulator.on_memory_freed = self._memory_freed.set
        self._sender_task = asyncio.get_running_loop().create_task(core.sender.run())
        try:
            await core.network.refresh_metadata([], timeout_ms=core.max_block_ms)
        except BaseException:
            await self.stop()
            raise

    # --- sending -----------------------------------------------------------------------------------------------------

    async def send(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
                   timestamp_ms: int | None = None, headers: Any = None) -> RecordFuture:
        """Queue one record (waiting for the topic's metadata or for buffer.memory if needed, at most
        max.block.ms); returns its future, which resolves once the broker acknowledged it.

        The record is appended in the caller's task, as the sync producer's send() appends in the caller's thread:
        no event-loop turn per record, only when a batch was started or filled (the sender's turn)."""
        core = self._core
        if self._sender_task is None:
            raise RuntimeError("the producer is not started: await start() first")
        core.check_open()
        deadline = None
        if core.needs_metadata(topic, partition):
            deadline = monotonic_ms() + core.max_block_ms
            await self._wait_on_metadata(topic, partition, deadline)
        while True:
            try:
                record, wake = core.append(topic, value, key, partition, timestamp_ms, headers, None, 0)
                break
            except KafkaTimeoutError:  # buffer.memory is used up: wait for a batch to be answered
                if deadline is None:
                    deadline = monotonic_ms() + core.max_block_ms
                await self._wait_for_memory(deadline)
        if wake:
            if core.sender.sleeping:
                core.sender.wakeup()
            # A batch was started or filled: give the sender its turn now. A send() that never suspends would
            # otherwise fill buffer.memory before the first request left, and then go at the pace of its
            # acknowledgements, batch by batch.
            await asyncio.sleep(0)
        return record  # type: ignore[return-value]  # the accumulator makes RecordFutures for this producer

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
                            timestamp_ms: int | None = None, headers: Any = None) -> RecordMetadata:
        """Send one record and wait for its acknowledgement."""
        future = await self.send(topic, value, key, partition, timestamp_ms, headers)
        return await future

    async def send_batch(self, topic: str, values: Sequence[Any], *, keys: Sequence[Any] | None = None,
                         partition: int | None = None, timestamp_ms: int | None = None,
                         callback: RunCallback | None = None) -> None:
        """Producer.produce_batch for asyncio: many records without headers at one timestamp, with
        ``callback(metadata, count, error)`` once per batch they land in. Waits for metadata like send(); when
        buffer.memory is used up it does not wait but raises KafkaTimeoutError (part of the values may then be
        queued): flush() first to make room for a batch larger than what is left of buffer.memory."""
        core = self._require_started()
        core.check_open()
        if core.needs_metadata(topic, partition):
            await self._wait_on_metadata(topic, partition, monotonic_ms() + core.max_block_ms)
        if core.append_values(topic, values, keys, partition, timestamp_ms, callback, 0):
            if core.sender.sleeping:
                core.sender.wakeup()
            await asyncio.sleep(0)  # the sender's turn, as in send()

    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partitions, fetching its metadata if needed (waits at most max.block.ms)."""
        core = self._require_started()
        if core.needs_metadata(topic, None):
            await self._wait_on_metadata(topic, None, monotonic_ms() + core.max_block_ms)
        return sorted(core.network.cluster.topics[topic].partitions)

    async def _wait_on_metadata(self, topic: str, partition: int | None, deadline: float) -> None:
        core = self._core
        network = core.network
        network.add_topics([topic])
        attempts = 0
        last_error: KafkaError | None = None
        while monotonic_ms() < deadline:
            try:
                cluster = await network.refresh_metadata(timeout_ms=max(deadline - monotonic_ms(), 1))
            except KafkaTimeoutError:
                break
            except KafkaError as error:
                if not error.retriable:
                    raise
                last_error = error
                cluster = network.cluster
            if core.metadata_ready(cluster, topic, partition):
                return
            attempts += 1
            await asyncio.sleep(min(network.retry_backoff.backoff_ms(attempts), max(deadline - monotonic_ms(), 0))
                                / 1000)
        reason = f" ({last_error})" if last_error is not None else ""
        raise KafkaTimeoutError(f"topic {topic} not present in metadata after {core.max_block_ms:.0f} ms{reason}")

    async def _wait_for_memory(self, deadline: float) -> None:
        assert self._memory_freed is not None
        self._memory_freed.clear()
        remaining = deadline - monotonic_ms()
        if remaining <= 0:
            raise KafkaTimeoutError(f"no buffer.memory was freed within max.block.ms ({self._core.max_block_ms} ms)")
        try:
            await asyncio.wait_for(self._memory_freed.wait(), remaining / 1000)
        except asyncio.TimeoutError:
            raise KafkaTimeoutError(f"no buffer.memory was freed within max.block.ms "
                                    f"({self._core.max_block_ms} ms)") from None

    # --- flush and stop ----------------------------------------------------------------------------------------------

    async def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until each of those records succeeded or failed."""
        core = self._require_started()
        accumulator = core.accumulator
        accumulator.begin_flush()
        try:
            core.sender.wakeup()
            loop = asyncio.get_running_loop()
            waiters = []
            for batch in accumulator.incomplete_batches():
                waiter = loop.create_future()
                if batch.result.add_done_listener(functools.partial(resolve_waiter, waiter)):
                    waiters.append(waiter)
            if waiters:
                try:
                    await asyncio.wait_for(asyncio.gather(*waiters), timeout)
                except asyncio.TimeoutError:
                    raise KafkaTimeoutError(f"flush did not complete within {timeout}s") from None
        finally:
            accumulator.end_flush()

    async def stop(self, timeout: float | None = None) -> None:
        """Send what is queued (waiting up to ``timeout`` seconds; forever if None), then close the connections.
        Records still unsent after the timeout fail."""
        core = self._core
        if core.closed:
            return
        core.closed = True
        core.accumulator.close()
        task = self._sender_task
        if task is not None:
            core.sender.initiate_close(timeout == 0)
            try:
                await asyncio.wait_for(asyncio.shield(task), timeout)
            except asyncio.TimeoutError:
                core.sender.initiate_close(True)
                await asyncio.wait({task}, timeout=5)
            except Exception:  # noqa: BLE001 - the sender's failure was each record's already
                pass
        await core.network.close()

    close = stop

    def _require_started(self) -> ProducerCore:
        if self._sender_task is None:
            raise RuntimeError("the producer is not started: await start() first")
        return self._core

    # --- transactions ------------------------------------------------------------------------------------------------

    async def init_transactions(self, timeout: float | None = None) -> None:
        """Register the transactional.id with its coordinator (see Producer.init_transactions)."""
        await self._wait(self._require_started().transactions().initialize_transactions(), timeout)

    def begin_transaction(self) -> None:
        self._require_started().transactions().begin_transaction()

    async def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
                                          group_metadata: ConsumerGroupMetadata,
                                          timeout: float | None = None) -> None:
        if not isinstance(group_metadata, ConsumerGroupMetadata):
            raise TypeError("group_metadata must be the consumer's group_metadata()")
        normalized = {TopicPartition(*tp): value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
                      for tp, value in offsets.items()}
        manager = self._require_started().transactions()
        await self._wait(manager.send_offsets_to_transaction(normalized, group_metadata), timeout)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, then commit; a failed record's error is raised with ``txn_requires_abort`` set."""
        manager = self._require_started().transactions()
        manager.check_can_commit()
        await self.flush(timeout)
        await self._wait(manager.begin_commit(), timeout)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        await self._wait(self._require_started().transactions().begin_abort(), timeout)

    async def _wait(self, result: TransactionalRequestResult, timeout: float | None) -> None:
        self._core.sender.wakeup()
        if not result.done:
            waiter = asyncio.get_running_loop().create_future()
            result.add_done_callback(functools.partial(resolve_waiter, waiter))
            try:
                await asyncio.wait_for(waiter, self._core.max_block_ms / 1000 if timeout is None else timeout)
            except asyncio.TimeoutError:
                pass  # result.wait(0) says what timed out
        result.wait(0)
