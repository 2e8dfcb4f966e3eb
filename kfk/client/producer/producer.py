"""Producer: the public, thread-safe, synchronous producer API (Java's KafkaProducer).

    with Producer({"bootstrap.servers": "localhost:9092"}) as producer:
        future = producer.send("events", b"value", key=b"key")
        metadata = future.result(10)          # RecordMetadata(topic, partition, offset, ...)
        producer.send("events", b"more", callback=lambda metadata, error: ...)
        producer.flush()

send() serializes, picks the partition (explicit; murmur2 of the key; or the sticky partition for keyless records),
appends to the partition's open batch and returns at once; the sender on the network thread does the rest. It blocks
only to fetch metadata for a topic it has not seen, or when buffer.memory is used up, each at most max.block.ms.

Idempotence is on by default, as in Kafka 3+: unless enable.idempotence is set, it is enabled when acks=all,
retries > 0 and max.in.flight.requests.per.connection <= 5, and silently off otherwise (an explicit
enable.idempotence=true with a conflicting setting is a configuration error, as in Java). An idempotent producer
that cannot get a producer id (InitProducerId refused, e.g. CLUSTER_AUTHORIZATION_FAILED for a principal with
neither IDEMPOTENT_WRITE on the cluster nor WRITE on a topic) has failed for good: every queued record fails with
that error, so flush() returns, and so does every record sent after, at once (its future is done and its callback
has run when send() returns); close it.

Transactions (transactional.id, which implies idempotence and acks=all), as the Java producer and librdkafka:

    producer = Producer({"bootstrap.servers": ..., "transactional.id": "billing-1"})
    producer.init_transactions()                  # once: fences older producers of "billing-1"
    producer.begin_transaction()
    producer.send("out", b"...")
    producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
    producer.commit_transaction()                 # or abort_transaction()

An error raised by these calls (or by a record's future) tells what is left to do: ``error.txn_requires_abort``
means the transaction failed and abort_transaction() is next, ``error.fatal`` that the producer is unusable (it was
fenced by a newer one with the same transactional.id) and must be closed; a KafkaTimeoutError means the call may be
made again. close() does not end an open transaction: the coordinator aborts it after transaction.timeout.ms, or
as soon as a new producer with the same transactional.id calls init_transactions().
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any

from kfk.client.config import PRODUCER_CONFIG_DEF, ClientConfig
from kfk.client.event_loop import ClientLoop
from kfk.client.network_client import monotonic_ms
from kfk.client.producer.core import ProducerCore, Serializer
from kfk.client.producer.future import Callback, FutureRecordMetadata, RunCallback
from kfk.client.producer.transaction_manager import TransactionalRequestResult, TransactionManager
from kfk.client.structs import ConsumerGroupMetadata
from kfk.common.structs import OffsetAndMetadata, TopicPartition
from kfk.errors import KafkaError, KafkaTimeoutError

__all__ = ["Producer"]

log = logging.getLogger("kfk.client.producer")


class Producer:
    """A Kafka producer. ``config`` takes Kafka's property names; keyword arguments the same in snake_case."""

    def __init__(self, config: Mapping[str, Any] | None = None, *, key_serializer: Serializer | None = None,
                 value_serializer: Serializer | None = None, **overrides: Any) -> None:
        self.config = config = ClientConfig(PRODUCER_CONFIG_DEF, "producer", config, **overrides)
        self._core = core = ProducerCore(config, key_serializer, value_serializer)
        self.transactional_id = core.transactional_id
        self.acks = core.acks
        self.idempotent = core.idempotent
        self._max_block_ms = config.max_block_ms
        self._network = core.network
        self._accumulator = core.accumulator
        self._transaction_manager = core.transaction_manager
        self._sender = core.sender
        self._loop = ClientLoop(f"kfk-producer-network-thread | {config.client_id}")
        self._sender_done = self._loop.submit(self._sender.run())
        self._wakeup = self._sender.wakeup
        self._call_soon = self._loop.loop.call_soon_threadsafe

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- sending -----------------------------------------------------------------------------------------------------

    def send(self, topic: str, value: Any = None, key: Any = None, *, partition: int | None = None,
             timestamp_ms: int | None = None, headers: Any = None,
             callback: Callback | None = None) -> FutureRecordMetadata:
        """Queue one record; returns its future. ``callback(metadata, error)`` runs on completion."""
        core = self._core
        core.check_open()
        max_block_ms = self._max_block_ms
        if core.needs_metadata(topic, partition):
            start = monotonic_ms()
            self._wait_on_metadata(topic, partition, max_block_ms)
            max_block_ms -= monotonic_ms() - start
        future, wake = core.append(topic, value, key, partition, timestamp_ms, headers, callback, max_block_ms)
        if wake and self._sender.sleeping:
            # Only a sleeping sender needs waking: a busy one finds the batch on its next round anyway, and each
            # wake-up costs a syscall that hands the GIL to the network thread in the middle of a send loop.
            self._call_soon(self._wakeup)
        return future

    produce = send

    def produce_batch(self, topic: str, values: Sequence[Any], *, keys: Sequence[Any] | None = None,
                      partition: int | None = None, timestamp_ms: int | None = None,
                      callback: RunCallback | None = None) -> None:
        """Queue many records at once: ``values`` (with ``keys``, aligned, or null keys), no headers, all with one
        timestamp (now by default). The fast path for many small records: one call appends whole runs of them to
        a batch, encoding what the records share once, and ``callback(metadata, count, error)`` runs once per run
        of records that landed in one batch (``metadata`` is the run's first record's; the others follow at the
        next offsets). Keyless records go to one partition (the sticky one), keyed ones by their key's hash."""
        core = self._core
        core.check_open()
        max_block_ms = self._max_block_ms
        if core.needs_metadata(topic, partition):
            start = monotonic_ms()
            self._wait_on_metadata(topic, partition, max_block_ms)
            max_block_ms -= monotonic_ms() - start
        if core.append_values(topic, values, keys, partition, timestamp_ms, callback, max_block_ms) \
                and self._sender.sleeping:
            self._call_soon(self._wakeup)

    def _wait_on_metadata(self, topic: str, partition: int | None, max_wait_ms: float):
        """Block until the topic (and the partition, if given) is in the metadata, at most max.block.ms."""
        deadline = monotonic_ms() + max_wait_ms
        attempts = 0
        last_error: KafkaError | None = None
        while True:
            remaining = deadline - monotonic_ms()
            if remaining <= 0:
                break
            try:
                cluster = self._loop.run(self._refresh_topic(topic), remaining / 1000)
            except KafkaTimeoutError:
                break
            except KafkaError as error:
                if not error.retriable:
                    raise
                last_error = error
                cluster = self._network.cluster
            if self._core.metadata_ready(cluster, topic, partition):
                return cluster
            attempts += 1
            pause = min(self._network.retry_backoff.backoff_ms(attempts), max(deadline - monotonic_ms(), 0))
            time.sleep(pause / 1000)
        reason = f" ({last_error})" if last_error is not None else ""
        raise KafkaTimeoutError(f"topic {topic} not present in metadata after {max_wait_ms:.0f} ms{reason}")

    async def _refresh_topic(self, topic: str):
        self._network.add_topics([topic])
        return await self._network.refresh_metadata()

    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partitions, fetching its metadata if needed (waits at most max.block.ms)."""
        cluster = self._network.cluster
        metadata = cluster.topics.get(topic)
        if metadata is None or not metadata.partitions:
            cluster = self._wait_on_metadata(topic, None, self._max_block_ms)
        return sorted(cluster.topics[topic].partitions)

    # --- transactions ------------------------------------------------------------------------------------------------

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register the transactional.id with its coordinator: fences every older producer of the id and finishes
        (aborts or completes) the transaction one of them left open. Once per producer, before any transaction;
        ``timeout`` in seconds (default max.block.ms)."""
        self._wait(self._transactions().initialize_transactions(), timeout)

    def begin_transaction(self) -> None:
        """Start a transaction: every record sent until commit or abort belongs to it. No request is sent."""
        self._transactions().begin_transaction()

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, OffsetAndMetadata | int],
                                    group_metadata: ConsumerGroupMetadata, timeout: float | None = None) -> None:
        """Commit the consumer group's ``offsets`` (the next offset to read, per partition) as part of the
        transaction: they become visible if and only if it commits (consume-transform-produce, exactly once).
        ``group_metadata`` is the consumer's Consumer.group_metadata(), which lets the group coordinator refuse a
        member that a rebalance has replaced."""
        if not isinstance(group_metadata, ConsumerGroupMetadata):
            raise TypeError("group_metadata must be the consumer's group_metadata()")
        normalized = {TopicPartition(*tp): value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
                      for tp, value in offsets.items()}
        self._wait(self._transactions().send_offsets_to_transaction(normalized, group_metadata), timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send everything queued, wait for it, then commit. If a record of the transaction failed, raises its
        error (with ``txn_requires_abort``): abort_transaction() is then the way on."""
        manager = self._transactions()
        deadline = monotonic_ms() + (self._max_block_ms if timeout is None else timeout * 1000)
        manager.check_can_commit()
        self.flush(max(deadline - monotonic_ms(), 0) / 1000)
        self._wait(manager.begin_commit(), max(deadline - monotonic_ms(), 0) / 1000)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort: records not sent yet fail with TransactionAbortedError, the ones already written are never
        returned to read_committed consumers, and offsets sent to the transaction are not committed."""
        self._wait(self._transactions().begin_abort(), timeout)

    def _transactions(self) -> TransactionManager:
        return self._core.transactions()

    def _wait(self, result: TransactionalRequestResult, timeout: float | None) -> None:
        self._call_soon(self._wakeup)
        result.wait(self._max_block_ms / 1000 if timeout is None else timeout)

    # --- flush and close ---------------------------------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now and wait until each of those records succeeded or failed."""
        deadline = None if timeout is None else monotonic_ms() + timeout * 1000
        self._accumulator.begin_flush()
        try:
            self._call_soon(self._wakeup)
            for batch in self._accumulator.incomplete_batches():
                remaining = None if deadline is None else max(deadline - monotonic_ms(), 0) / 1000
                if not batch.result.wait(remaining):
                    raise KafkaTimeoutError(f"flush did not complete within {timeout}s")
        finally:
            self._accumulator.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Send what is queued (waiting up to ``timeout`` seconds; forever if None), then stop. Records still
        unsent after the timeout fail."""
        if self._core.closed:
            return
        self._core.closed = True
        self._accumulator.close()
        self._call_soon(self._sender.initiate_close, timeout == 0)
        try:
            self._sender_done.result(timeout)
        except Exception:
            self._call_soon(self._sender.initiate_close, True)
            try:
                self._sender_done.result(5)
            except Exception:  # noqa: BLE001 - closing regardless
                pass
        try:
            self._loop.run(self._network.close(), 5)
        except Exception:  # noqa: BLE001 - the loop goes away next anyway
            pass
        self._loop.close()

