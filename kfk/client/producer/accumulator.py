"""RecordAccumulator: per-partition queues of open batches, filled by send() and drained by the sender.

send() appends a record to the last batch of its partition's queue (a new batch when that one is full), in the
caller's thread, under one lock shared with the sender. A batch is *ready* to send when it is full, when it has
waited linger.ms, when flush() or close() is in progress, or when it is not the last in its queue; the sender then
*drains* at most one batch per partition per request (so one slow partition does not starve the others), up to
max.request.size per broker, exactly as Kafka's RecordAccumulator does.

buffer.memory bounds the bytes of all batches not yet acknowledged (each new batch reserves max(batch.size, its
first record)); when it is used up, send() blocks up to max.block.ms for acknowledgements to free space, then fails
with KafkaTimeoutError. That back-pressure is what stops a fast producer from filling memory when the broker is slow.

Once the producer failed for good (fail(): no producer id can be had, the producer was fenced...), the queued
batches are handed back for failing and every later append returns a future already failed with that error (its
callback run at once), under the same lock: a record appended while the sender was failing the queue is never left
behind unanswered.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable, Sequence

from kfk.client.cluster import ClusterMetadata
from kfk.client.network_client import monotonic_ms
from kfk.client.producer.future import Callback, FutureRecordMetadata, ProduceRequestResult, RecordRun, RunCallback
from kfk.common.constants import NO_NODE
from kfk.common.structs import TopicPartition
from kfk.errors import KafkaTimeoutError, RecordTooLargeError
from kfk.records import RECORD_BATCH_OVERHEAD, CompressionType, MemoryRecordsBuilder
from kfk.records.builder import record_size

__all__ = ["ProducerBatch", "RecordAccumulator", "ReadyCheckResult"]

# An upper bound of a record's framing beyond its key and value bytes (length, attributes, timestamp delta, offset
# delta, key and value lengths, header count): only records that might not fit pay for the exact size computation.
RECORD_FRAMING_BOUND = 5 + 1 + 10 + 5 + 5 + 5 + 5
# Blocked appends are woken once this many batches (batch.size each) of buffer.memory are free (see _wake_when_free).
_BATCHES_PER_WAKE = 4


class ProducerBatch:
    """One batch of one partition: the builder while open, its bytes once drained, and its outcome."""

    __slots__ = ("topic_partition", "builder", "result", "created_ms", "attempts", "retry_at_ms",
                 "records", "record_count", "reserved_bytes", "base_sequence", "producer_epoch", "is_full", "in_retry",
                 "_size_estimate", "_limit", "_future_type")

    def __init__(self, topic_partition: TopicPartition, compression_type: CompressionType, batch_size: int,
                 compression_level: int | None, now_ms: float, reserved_bytes: int,
                 future_type: type[FutureRecordMetadata] = FutureRecordMetadata) -> None:
        self.topic_partition = topic_partition
        self.builder = MemoryRecordsBuilder(compression_type=compression_type, write_limit=batch_size,
                                            compression_level=compression_level)
        self.result = ProduceRequestResult(topic_partition)
        self.created_ms = now_ms
        self.attempts = 0
        self.retry_at_ms = 0.0
        self.records: bytes | bytearray | None = None
        self.record_count = 0
        self.reserved_bytes = reserved_bytes
        self.base_sequence = -1
        self.producer_epoch = -1
        self.is_full = False
        self.in_retry = False
        self._size_estimate = RECORD_BATCH_OVERHEAD
        self._limit = batch_size
        self._future_type = future_type

    def __repr__(self) -> str:
        return (f"ProducerBatch({self.topic_partition}, records={self.record_count}, attempts={self.attempts}, "
                f"base_sequence={self.base_sequence})")

    def try_append(self, timestamp: int, key: bytes | None, value: bytes | None,
                   headers: Sequence[tuple[str, bytes | None]], key_size: int, value_size: int,
                   callback: Callback | None = None) -> FutureRecordMetadata | None:
        """Append if the batch has room (the first record always fits); None if it is full. The callback is
        registered here, under the accumulator's lock, while the batch cannot be completing: no lock of its own."""
        if self.is_full:
            return None
        builder = self.builder
        if self.record_count and (self._size_estimate + key_size + value_size + RECORD_FRAMING_BOUND
                                  > self._limit or headers):
            if not builder.has_room_for(timestamp, key, value, headers):
                self.is_full = True
                return None
        relative_offset = self.record_count
        builder.append(timestamp, key, value, headers)
        self.record_count = relative_offset + 1
        self._size_estimate = builder.estimated_size_in_bytes()
        if self._size_estimate >= self._limit:
            self.is_full = True
        future = self._future_type(self.result, relative_offset, timestamp, key_size, value_size)
        if callback is not None:
            self.result.add_callback_while_open(FutureRecordMetadata._run_callback, future, callback)
        return future

    def try_append_values(self, timestamp: int, keys: Sequence[bytes | None] | None,
                          values: Sequence[bytes | None], start: int, callback: RunCallback | None) -> int:
        """Append as many of ``values[start:]`` as fit (at least one into an empty batch); how many were taken.
        The batch is full afterwards unless all of them fit."""
        if self.is_full:
            return 0
        relative_offset = self.record_count
        builder = self.builder
        count = builder.append_values(timestamp, values, start, keys)
        if count < len(values) - start:
            self.is_full = True
        if not count:
            return 0
        self.record_count = relative_offset + count
        self._size_estimate = builder.estimated_size_in_bytes()
        if self._size_estimate >= self._limit:
            self.is_full = True
        if callback is not None:
            first_key, first_value = keys[start] if keys is not None else None, values[start]
            first = FutureRecordMetadata(self.result, relative_offset, timestamp,
                                         len(first_key) if first_key is not None else -1,
                                         len(first_value) if first_value is not None else -1)
            self.result.add_callback_while_open(RecordRun._run_callback, RecordRun(first, count), callback)
        return count

    @property
    def estimated_size(self) -> int:
        return self._size_estimate

    def close(self) -> bytes | bytearray:
        """Seal the batch (with the producer id and sequence set by the sender) and return its bytes."""
        if self.records is None:
            self.records = self.builder.close()
            self.builder = None  # type: ignore[assignment]  # frees the per-record buffers
        return self.records

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int,
                           is_transactional: bool) -> None:
        builder = self.builder
        builder.producer_id = producer_id
        builder.producer_epoch = producer_epoch
        builder.base_sequence = base_sequence
        builder.is_transactional = is_transactional
        self.base_sequence = base_sequence
        self.producer_epoch = producer_epoch

    def complete(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        self.result.complete(base_offset, log_append_time, error)


class ReadyCheckResult:
    __slots__ = ("ready_nodes", "next_ready_check_delay_ms", "unknown_leader_topics")

    def __init__(self) -> None:
        self.ready_nodes: set[int] = set()
        self.next_ready_check_delay_ms = float("inf")
        self.unknown_leader_topics: set[str] = set()


class RecordAccumulator:
    def __init__(self, *, batch_size: int, buffer_memory: int, linger_ms: int, compression_type: CompressionType,
                 compression_level: int | None, delivery_timeout_ms: int,
                 future_type: type[FutureRecordMetadata] = FutureRecordMetadata) -> None:
        self.batch_size = batch_size
        self.buffer_memory = buffer_memory
        self.linger_ms = linger_ms
        self.compression_type = compression_type
        self.compression_level = compression_level
        self.delivery_timeout_ms = delivery_timeout_ms
        self.future_type = future_type
        """What append() returns per record: the sync producer's FutureRecordMetadata, or the asyncio producer's
        subclass of it (one object per record either way)."""
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._lock = threading.Lock()
        self._memory_freed = threading.Condition(self._lock)
        self._used_memory = 0
        self._blocked_appends = 0
        """Appends waiting (on _memory_freed) for buffer.memory: deallocate notifies only when there are any."""
        self._wake_when_free = min(buffer_memory // 2, _BATCHES_PER_WAKE * batch_size)
        """How many bytes must be free before deallocate wakes blocked appends: a producer that outruns the broker
        blocks on buffer.memory, and waking it for every freed batch handed the GIL from the network thread to the
        caller and back once per request; waking it for a few batches' room at a time hands it over a few times
        less (and the burst of appends it then makes is still shorter than the requests in flight). At most half of
        buffer.memory, so that a small buffer does not wait for its last batch to be answered."""
        self._incomplete: set[ProducerBatch] = set()
        self._flushes_in_progress = 0
        self._closed = False
        self.fatal_error: BaseException | None = None
        """Set once by fail(): the error every record appended from then on fails with."""
        self._drain_start = 0
        self.changes = 0
        """Bumped (under the lock) whenever a batch is created or fills up: the sender compares it before sleeping."""
        self.on_memory_freed: Callable[[], None] | None = None
        """Called (on the sender's thread) when a batch gives its memory back: the asyncio producer, whose sends
        cannot block the loop the sender runs on, awaits this instead of waiting on the condition."""

    # --- the caller's side -------------------------------------------------------------------------------------------

    def append(self, topic_partition: TopicPartition, timestamp: int, key: bytes | None, value: bytes | None,
               headers: Sequence[tuple[str, bytes | None]], max_block_ms: float, callback: Callback | None = None
               ) -> tuple[FutureRecordMetadata, bool]:
        """Append a record; returns its future and whether the sender should be woken (a new or full batch)."""
        key_size = len(key) if key is not None else -1
        value_size = len(value) if value is not None else -1
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot send after the producer is closed")
            if self.fatal_error is None:
                queue = self._queues.get(topic_partition)
                if queue is None:
                    queue = self._queues[topic_partition] = deque()
                if queue:
                    last = queue[-1]
                    future = last.try_append(timestamp, key, value, headers, key_size, value_size, callback)
                    if future is not None:
                        if last.is_full:
                            self.changes += 1
                        return future, last.is_full
                size = max(self.batch_size, RECORD_BATCH_OVERHEAD + record_size(0, 0, key, value, headers))
                if self._reserve(size, max_block_ms):
                    batch = ProducerBatch(topic_partition, self.compression_type, self.batch_size,
                                          self.compression_level, monotonic_ms(), size, self.future_type)
                    future = batch.try_append(timestamp, key, value, headers, key_size, value_size, callback)
                    assert future is not None
                    queue.append(batch)
                    self._incomplete.add(batch)
                    self.changes += 1
                    return future, True
            error = self.fatal_error
        future = self.future_type(_failed_result(topic_partition, error), 0, timestamp, key_size, value_size)
        if callback is not None:
            future.add_callback(callback)
        return future, False

    def append_values(self, topic_partition: TopicPartition, timestamp: int, keys: Sequence[bytes | None] | None,
                      values: Sequence[bytes | None], max_block_ms: float, callback: RunCallback | None = None
                      ) -> bool:
        """Append records without headers, all at ``timestamp``, filling the partition's open batch and then new
        ones (produce_batch); ``callback`` runs once per batch they land in. Whether the sender should be woken."""
        wake = False
        index, end = 0, len(values)
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot send after the producer is closed")
            queue = self._queues.get(topic_partition)
            if queue is None:
                queue = self._queues[topic_partition] = deque()
            while index < end and self.fatal_error is None:
                if queue and not queue[-1].is_full:
                    last = queue[-1]
                    index += last.try_append_values(timestamp, keys, values, index, callback)
                    if last.is_full:
                        self.changes += 1
                        wake = True
                    continue
                key = keys[index] if keys is not None else None
                size = max(self.batch_size, RECORD_BATCH_OVERHEAD + record_size(0, 0, key, values[index]))
                if not self._reserve(size, max_block_ms):
                    break
                batch = ProducerBatch(topic_partition, self.compression_type, self.batch_size,
                                      self.compression_level, monotonic_ms(), size, self.future_type)
                queue.append(batch)
                self._incomplete.add(batch)
                self.changes += 1
                wake = True
                index += batch.try_append_values(timestamp, keys, values, index, callback)
            error = self.fatal_error
        if index < end and callback is not None:  # the producer failed for good: the rest fail at once
            first = self.future_type(_failed_result(topic_partition, error), 0, timestamp, -1, -1)
            RecordRun(first, end - index)._run_callback(callback)
        return wake

    def _reserve(self, size: int, max_block_ms: float) -> bool:
        """Take ``size`` bytes of buffer.memory, waiting (lock held by the caller) up to max_block_ms; False (nothing
        taken) if the producer failed for good meanwhile."""
        if size > self.buffer_memory:
            raise RecordTooLargeError(f"the record is {size} bytes when serialized, larger than the total memory "
                                      f"buffer (buffer.memory={self.buffer_memory})")
        deadline = monotonic_ms() + max_block_ms
        while self._used_memory + size > self.buffer_memory:
            if self.fatal_error is not None:
                return False
            remaining = deadline - monotonic_ms()
            if remaining <= 0 or self._closed:
                raise KafkaTimeoutError(f"failed to allocate {size} bytes of buffer.memory within max.block.ms "
                                        f"({max_block_ms:.0f} ms): {self._used_memory} of {self.buffer_memory} "
                                        "bytes are waiting to be acknowledged")
            self._blocked_appends += 1
            try:
                self._memory_freed.wait(remaining / 1000)
            finally:
                self._blocked_appends -= 1
        self._used_memory += size
        return True

    # --- the sender's side -------------------------------------------------------------------------------------------

    def ready(self, cluster: ClusterMetadata, now_ms: float) -> ReadyCheckResult:
        """Which brokers have at least one sendable batch, and when to look again if none is ready yet."""
        result = ReadyCheckResult()
        linger = self.linger_ms
        with self._lock:
            flushing = self._flushes_in_progress > 0 or self._closed
            for topic_partition, queue in self._queues.items():
                if not queue:
                    continue
                leader = cluster.leader_for(topic_partition)
                if leader == NO_NODE:
                    result.unknown_leader_topics.add(topic_partition.topic)
                    continue
                if leader in result.ready_nodes:
                    continue
                batch = queue[0]
                if batch.in_retry and batch.retry_at_ms > now_ms:
                    result.next_ready_check_delay_ms = min(result.next_ready_check_delay_ms,
                                                           batch.retry_at_ms - now_ms)
                    continue
                if self._head_ready(queue, flushing, now_ms):
                    result.ready_nodes.add(leader)
                else:
                    result.next_ready_check_delay_ms = min(result.next_ready_check_delay_ms,
                                                           linger - (now_ms - batch.created_ms))
        return result

    def _head_ready(self, queue: deque[ProducerBatch], flushing: bool, now_ms: float) -> bool:
        """Whether the first batch of a partition's queue may go now (its retry backoff, if any, is over): full,
        followed by another, flushed or closed, retried, or older than linger.ms. Lock held by the caller."""
        batch = queue[0]
        return (batch.is_full or len(queue) > 1 or flushing or batch.in_retry
                or now_ms - batch.created_ms >= self.linger_ms)

    def only_partition(self) -> TopicPartition | None:
        """The one partition this producer has ever queued batches for, or None when it has used several (or none):
        the sender's one-partition produce cycle needs no fairness among partitions."""
        queues = self._queues
        return next(iter(queues)) if len(queues) == 1 else None

    def drain_next(self, topic_partition: TopicPartition, now_ms: float,
                   can_send: Callable[[ProducerBatch], bool]) -> ProducerBatch | None:
        """The partition's first batch, taken off its queue, if it may go now as ready() and drain() would judge
        it (ready, not in a retry backoff, let through by ``can_send``); else None. The sender's one-partition
        produce cycle: one batch per request, as drain() takes when the broker leads one partition."""
        with self._lock:
            queue = self._queues.get(topic_partition)
            if not queue:
                return None
            batch = queue[0]
            if batch.in_retry and batch.retry_at_ms > now_ms:
                return None
            if not self._head_ready(queue, self._flushes_in_progress > 0 or self._closed, now_ms) \
                    or not can_send(batch):
                return None
            queue.popleft()
            batch.is_full = True
            return batch

    def drain(self, cluster: ClusterMetadata, nodes: Iterable[int], max_request_size: int, now_ms: float,
              can_send: Callable[[ProducerBatch], bool]) -> dict[int, list[ProducerBatch]]:
        """Take at most one batch per partition for each node, up to max_request_size bytes per node.
        ``can_send(batch)`` lets the sender hold a partition back (idempotence ordering)."""
        nodes = set(nodes)
        drained: dict[int, list[ProducerBatch]] = {node: [] for node in nodes}
        sizes = dict.fromkeys(nodes, 0)
        with self._lock:
            partitions = list(self._queues)
            if not partitions:
                return {}
            start = self._drain_start % len(partitions)
            self._drain_start += 1
            for topic_partition in partitions[start:] + partitions[:start]:  # rotate for fairness
                queue = self._queues[topic_partition]
                if not queue:
                    continue
                node = cluster.leader_for(topic_partition)
                if node not in nodes:
                    continue
                batch = queue[0]
                if batch.in_retry and batch.retry_at_ms > now_ms:
                    continue
                if sizes[node] and sizes[node] + batch.estimated_size > max_request_size:
                    continue
                if not can_send(batch):
                    continue
                queue.popleft()
                batch.is_full = True
                sizes[node] += batch.estimated_size
                drained[node].append(batch)
        return {node: batches for node, batches in drained.items() if batches}

    def reenqueue(self, batch: ProducerBatch, now_ms: float, backoff_ms: float) -> None:
        """Put a batch back at the head of its queue for a retry, in sequence order among other retries."""
        batch.attempts += 1
        batch.in_retry = True
        batch.retry_at_ms = now_ms + backoff_ms
        with self._lock:
            queue = self._queues.setdefault(batch.topic_partition, deque())
            if batch.base_sequence >= 0:
                index = 0
                while (index < len(queue) and queue[index].in_retry
                       and 0 <= queue[index].base_sequence < batch.base_sequence):
                    index += 1
                queue.insert(index, batch)
            else:
                queue.appendleft(batch)

    def expired_batches(self, now_ms: float) -> list[ProducerBatch]:
        """Remove and return queued batches older than delivery.timeout.ms."""
        expired: list[ProducerBatch] = []
        with self._lock:
            for queue in self._queues.values():
                while queue and now_ms - queue[0].created_ms >= self.delivery_timeout_ms:
                    expired.append(queue.popleft())
        return expired

    def deallocate(self, batch: ProducerBatch) -> None:
        """A batch is complete: give its memory back and wake blocked senders."""
        with self._lock:
            self._incomplete.discard(batch)
            self._used_memory -= batch.reserved_bytes
            batch.reserved_bytes = 0
            if self._blocked_appends and self.buffer_memory - self._used_memory >= self._wake_when_free:
                self._memory_freed.notify_all()
        if self.on_memory_freed is not None:
            self.on_memory_freed()

    def has_undrained(self) -> bool:
        with self._lock:
            return any(self._queues.values())

    def has_incomplete(self) -> bool:
        """Batches not yet acknowledged or failed: a transaction cannot end before they are."""
        with self._lock:
            return bool(self._incomplete)

    def incomplete_batches(self) -> list[ProducerBatch]:
        with self._lock:
            return list(self._incomplete)

    def abort_undrained(self) -> list[ProducerBatch]:
        """Remove every queued batch (close with a timeout, an aborted transaction) and return them for failing."""
        with self._lock:
            return self._take_undrained()

    def fail(self, error: BaseException) -> list[ProducerBatch]:
        """The producer failed for good: remove every queued batch and return them for failing with ``error``; from
        now on every append fails at once with the first such error (appends waiting for memory too)."""
        with self._lock:
            if self.fatal_error is None:
                self.fatal_error = error
                self._memory_freed.notify_all()
            return self._take_undrained()

    def _take_undrained(self) -> list[ProducerBatch]:
        batches = [batch for queue in self._queues.values() for batch in queue]
        for queue in self._queues.values():
            queue.clear()
        return batches

    def begin_flush(self) -> None:
        with self._lock:
            self._flushes_in_progress += 1

    def end_flush(self) -> None:
        with self._lock:
            self._flushes_in_progress -= 1

    def close(self) -> None:
        """No more appends; everything queued becomes ready at once."""
        with self._lock:
            self._closed = True
            self._memory_freed.notify_all()


def _failed_result(topic_partition: TopicPartition, error: BaseException | None) -> ProduceRequestResult:
    """The outcome of a record refused because the producer failed for good."""
    assert error is not None
    result = ProduceRequestResult(topic_partition)
    result.complete(-1, -1, error)
    return result
