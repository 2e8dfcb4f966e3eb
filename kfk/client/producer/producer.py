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
enable.idempotence=true with a conflicting setting is a configuration error, as in Java).

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
from collections.abc import Callable, Mapping
from typing import Any

from kfk.client.config import PRODUCER_CONFIG_DEF, ClientConfig
from kfk.client.event_loop import ClientLoop
from kfk.client.network_client import ExponentialBackoff, NetworkClient, monotonic_ms
from kfk.client.producer.accumulator import RECORD_FRAMING_BOUND, RecordAccumulator
from kfk.client.producer.future import Callback, FutureRecordMetadata
from kfk.client.producer.partitioner import BuiltInPartitioner, partition_for_key
from kfk.client.producer.sender import Sender
from kfk.client.producer.transaction_manager import TransactionalRequestResult, TransactionManager
from kfk.client.structs import ConsumerGroupMetadata
from kfk.common.clock import system_time_ms
from kfk.common.structs import OffsetAndMetadata, TopicPartition
from kfk.errors import (
    ErrorCode,
    InvalidConfigurationError,
    InvalidTxnStateError,
    KafkaError,
    KafkaTimeoutError,
    RecordTooLargeError,
    error_for_code,
)
from kfk.records import RECORD_BATCH_OVERHEAD, CompressionType
from kfk.records.builder import record_size

__all__ = ["Producer"]

log = logging.getLogger("kfk.client.producer")

Serializer = Callable[[Any], "bytes | None"]

_NO_HEADERS: list = []
_ACKS = {"all": -1, "-1": -1, "0": 0, "1": 1}
_COMPRESSION = {"none": CompressionType.NONE, "gzip": CompressionType.GZIP, "snappy": CompressionType.SNAPPY,
                "lz4": CompressionType.LZ4, "zstd": CompressionType.ZSTD}
# Topic errors after which waiting for metadata is pointless.
_FATAL_TOPIC_ERRORS = frozenset({ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.INVALID_TOPIC_EXCEPTION})


def to_bytes(value: Any) -> bytes | None:
    """The default serializer: bytes-like values as they are, str as UTF-8, None as null."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"cannot send a {type(value).__name__}: pass bytes or str, or give the producer a serializer")


class Producer:
    """A Kafka producer. ``config`` takes Kafka's property names; keyword arguments the same in snake_case."""

    def __init__(self, config: Mapping[str, Any] | None = None, *, key_serializer: Serializer | None = None,
                 value_serializer: Serializer | None = None, **overrides: Any) -> None:
        self.config = config = ClientConfig(PRODUCER_CONFIG_DEF, "producer", config, **overrides)
        self.transactional_id: str | None = config.transactional_id
        self.acks = _ACKS[config.acks]
        idempotence_explicit = config.enable_idempotence is not None
        conflicts = []
        if self.acks != -1:
            conflicts.append("acks must be all")
        if config.max_in_flight_requests_per_connection > 5:
            conflicts.append("max.in.flight.requests.per.connection must be at most 5")
        if config.retries == 0:
            conflicts.append("retries must be greater than 0")
        if self.transactional_id is not None:
            if config.enable_idempotence is False:
                raise InvalidConfigurationError("transactional.id needs enable.idempotence=true")
            if conflicts:
                raise InvalidConfigurationError(f"transactional.id needs idempotence: {'; '.join(conflicts)}")
            idempotence_explicit = True
        if config.enable_idempotence and conflicts:
            raise InvalidConfigurationError(f"enable.idempotence=true needs: {'; '.join(conflicts)}")
        self.idempotent = self.transactional_id is not None or (
            config.enable_idempotence if idempotence_explicit else not conflicts)
        self._key_serializer = key_serializer or to_bytes
        self._value_serializer = value_serializer or to_bytes
        self._max_block_ms = config.max_block_ms
        self._max_request_size = config.max_request_size
        compression_type = _COMPRESSION[config.compression_type]
        level = {CompressionType.GZIP: config.compression_gzip_level, CompressionType.LZ4: config.compression_lz4_level,
                 CompressionType.ZSTD: config.compression_zstd_level}.get(compression_type)
        if compression_type == CompressionType.GZIP and level == -1:
            level = None
        self._loop = ClientLoop(f"kfk-producer-network-thread | {config.client_id}")
        self._network = NetworkClient(config, allow_auto_topic_creation=True)
        self._accumulator = RecordAccumulator(
            batch_size=config.batch_size, buffer_memory=config.buffer_memory, linger_ms=config.linger_ms,
            compression_type=compression_type, compression_level=level,
            delivery_timeout_ms=config.delivery_timeout_ms)
        self._transaction_manager = TransactionManager(
            config.max_in_flight_requests_per_connection, transactional_id=self.transactional_id,
            transaction_timeout_ms=config.transaction_timeout_ms, retry_backoff_ms=config.retry_backoff_ms,
        ) if self.idempotent else None
        self._sender = Sender(
            self._network, self._accumulator, acks=self.acks, retries=config.retries,
            request_timeout_ms=config.request_timeout_ms, delivery_timeout_ms=config.delivery_timeout_ms,
            max_in_flight=config.max_in_flight_requests_per_connection, max_request_size=config.max_request_size,
            retry_backoff=ExponentialBackoff(config.retry_backoff_ms, config.retry_backoff_max_ms),
            transaction_manager=self._transaction_manager,
            idempotence_explicit=idempotence_explicit)
        self._partitioner = BuiltInPartitioner(config.batch_size)
        self._ignore_keys = config.partitioner_ignore_keys
        self._sender_done = self._loop.submit(self._sender.run())
        self._wakeup = self._sender.wakeup
        self._call_soon = self._loop.loop.call_soon_threadsafe
        self._closed = False

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- sending -----------------------------------------------------------------------------------------------------

    def send(self, topic: str, value: Any = None, key: Any = None, *, partition: int | None = None,
             timestamp_ms: int | None = None, headers: Any = None,
             callback: Callback | None = None) -> FutureRecordMetadata:
        """Queue one record; returns its future. ``callback(metadata, error)`` runs on completion."""
        if self._closed:
            raise RuntimeError("cannot send after the producer is closed")
        if self._sender.fatal_error is not None:
            raise self._sender.fatal_error
        if self.transactional_id is not None:  # fail before waiting for metadata; maybe_add_partition checks again
            self._transaction_manager.fail_if_not_ready_for_send()  # type: ignore[union-attr]
        max_block_ms = self._max_block_ms
        cluster = self._network.cluster
        topic_metadata = cluster.topics.get(topic)
        if topic_metadata is None or not topic_metadata.partitions or (
                partition is not None and partition not in topic_metadata.partitions):
            start = monotonic_ms()
            cluster = self._wait_on_metadata(topic, partition, max_block_ms)
            topic_metadata = cluster.topics[topic]
            max_block_ms -= monotonic_ms() - start
        key_bytes = self._key_serializer(key)
        value_bytes = self._value_serializer(value)
        record_headers = _headers(headers) if headers else _NO_HEADERS
        if timestamp_ms is None:
            timestamp_ms = system_time_ms()
        # A cheap upper bound first; the exact size only for records near max.request.size.
        size = (RECORD_BATCH_OVERHEAD + RECORD_FRAMING_BOUND + (len(key_bytes) if key_bytes is not None else 0)
                + (len(value_bytes) if value_bytes is not None else 0))
        if record_headers or size > self._max_request_size:
            size = RECORD_BATCH_OVERHEAD + record_size(0, 0, key_bytes, value_bytes, record_headers)
            if size > self._max_request_size:
                raise RecordTooLargeError(f"the record is {size} bytes when serialized, larger than "
                                          f"max.request.size ({self._max_request_size})")
        num_partitions = len(topic_metadata.partitions)
        sticky = partition is None and (key_bytes is None or self._ignore_keys)
        if partition is None:
            if sticky:
                partition = self._partitioner.partition(topic, cluster.available_partitions_for(topic),
                                                        num_partitions)
            else:
                partition = partition_for_key(key_bytes, num_partitions)
        topic_partition = TopicPartition(topic, partition)
        if self.transactional_id is not None:
            self._transaction_manager.maybe_add_partition(topic_partition)  # type: ignore[union-attr]
        future, wake = self._accumulator.append(topic_partition, timestamp_ms, key_bytes,
                                                value_bytes, record_headers, max_block_ms, callback)
        if sticky:
            self._partitioner.record_appended(topic, partition, size - RECORD_BATCH_OVERHEAD,
                                              cluster.available_partitions_for(topic), num_partitions)
        if wake and self._sender.sleeping:
            # Only a sleeping sender needs waking: a busy one finds the batch on its next round anyway, and each
            # wake-up costs a syscall that hands the GIL to the network thread in the middle of a send loop.
            self._call_soon(self._wakeup)
        return future

    produce = send

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
            metadata = cluster.topics.get(topic)
            if metadata is not None:
                if metadata.error_code in _FATAL_TOPIC_ERRORS:
                    raise error_for_code(metadata.error_code)(f"cannot produce to topic {topic!r}")
                if metadata.error_code == ErrorCode.NONE and metadata.partitions:
                    if partition is None or partition in metadata.partitions:
                        return cluster
                    if partition >= len(metadata.partitions):
                        raise KafkaError(f"partition {partition} of topic {topic} with partition count "
                                         f"{len(metadata.partitions)} is not present in metadata")
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
        manager = self._transaction_manager
        if manager is None or self.transactional_id is None:
            raise InvalidTxnStateError("transactions need a transactional.id in the producer's configuration")
        return manager

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
        if self._closed:
            return
        self._closed = True
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


def _headers(headers: Any) -> list[tuple[str, bytes | None]]:
    if not headers:
        return []
    items = headers.items() if isinstance(headers, Mapping) else headers
    result = []
    for name, value in items:
        if not isinstance(name, str):
            raise TypeError(f"header keys are str, not {type(name).__name__}")
        result.append((name, to_bytes(value)))
    return result
