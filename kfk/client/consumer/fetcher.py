"""Fetcher: keeps fetches in flight on the network thread and turns their records into ConsumerRecords in poll().

Network side (the client's event loop): for every assigned, unpaused partition that has a position, at most one
buffered fetch (the next fetch then starts where that one's data ends) and no fetch in flight to its leader, send
one Fetch request per leader (in a fetch session), holding min_bytes / max_wait_ms / max_bytes /
max.partition.fetch.bytes from the config. Each partition's answer
becomes a CompletedFetch in a queue; errors that a metadata refresh fixes (the leader moved) trigger one and the
partition is fetched again later. So the next fetch is already in flight while the application works through the
last one (one fetch further ahead than Java's consumer goes, as librdkafka prefetches). A fetch to a connected broker
is written at once and its answer handled in a callback on the response's future, not a task: the callback sends
the next fetch in the same turn of the loop, so that nothing but the broker's round trip stands between two fetches.
A response's records stay where the connection received them (slices of its frame); the network thread only walks
their batch headers (to know where the next fetch starts).

Caller side (poll): take CompletedFetches off the queue and decode them lazily, up to max.poll.records: validate each
batch's CRC (check.crcs), skip records before the position (a compressed batch starts before it), skip control
batches, and under read_committed skip batches of aborted transactions (the response lists each aborted producer
with the first offset of its transaction; the abort marker ends it). The position then moves past what was
returned. Decoding here rather than on the loop keeps the network thread free for heartbeats and the next fetches.
A CompletedFetch whose fetch offset is no longer the partition's position (the user seeked, or a rebalance moved
the partition) is dropped.

Fetch versions: v4+ (record batches, isolation level, last stable offset); v13+ name topics by id, used when the
metadata knows every fetched topic's id, else the request stays at v12.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from kfk.client.consumer.subscription_state import OffsetResetStrategy, SubscriptionState
from kfk.client.connection import BrokerConnection
from kfk.client.network_client import NetworkClient, monotonic_ms
from kfk.client.offsets import READ_COMMITTED
from kfk.client.response_errors import response_error
from kfk.client.structs import ConsumerRecord
from kfk.common.constants import NO_NODE
from kfk.common.structs import TopicPartition
from kfk.errors import (
    CorruptRecordError,
    ErrorCode,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from kfk.protocol.fetch_session import FINAL_EPOCH, FetchSessionBuilder
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.fetch import FetchRequest, FetchResponse
from kfk.records import ControlRecordType, control_record_type, iter_batches
from kfk.records.batch import CONTROL_FLAG_MASK, TIMESTAMP_TYPE_MASK, TRANSACTIONAL_FLAG_MASK, RecordBatch
from kfk.records.record import Buffer

__all__ = ["Fetcher", "CompletedFetch"]

log = logging.getLogger("kfk.client.consumer")

CONSUMER_REPLICA_ID = -1
FETCH_LOWEST_VERSION = 4
FETCH_TOPIC_NAMES_HIGHEST_VERSION = 12
#: Fetch sessions (KIP-227) exist from Fetch v7: an incremental fetch names only partitions whose position moved.
FIRST_SESSION_VERSION = 7
ZERO_UUID = uuid.UUID(int=0)

_REFRESH_METADATA_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.UNKNOWN_TOPIC_ID, ErrorCode.INCONSISTENT_TOPIC_ID, ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.LEADER_NOT_AVAILABLE,
})

Deserializer = Callable[[bytes | None], Any]


class CompletedFetch:
    """One partition's part of a fetch response, consumed incrementally by poll(): decoded one batch at a time into a
    list of ConsumerRecords (one pass over the batch, no per-record generator step), which take() hands out in
    slices. ``records`` is a slice of the response's frame as the connection received it (no copy on the network
    thread): the frame lives until the CompletedFetch is dropped."""

    __slots__ = ("topic_partition", "fetch_offset", "error_code", "high_watermark", "last_stable_offset",
                 "log_start_offset", "records", "aborted_transactions", "next_fetch_offset", "last_epoch",
                 "_batches", "_pending", "_pending_next_offset", "_pending_epoch", "consumed_all", "end_offset")

    def __init__(self, topic_partition: TopicPartition, fetch_offset: int, error_code: int, high_watermark: int,
                 last_stable_offset: int, log_start_offset: int, records: Buffer,
                 aborted_transactions: list[tuple[int, int]] | None) -> None:
        self.topic_partition = topic_partition
        self.fetch_offset = fetch_offset
        self.error_code = error_code
        self.high_watermark = high_watermark
        self.last_stable_offset = last_stable_offset
        self.log_start_offset = log_start_offset
        self.records = records
        self.aborted_transactions = aborted_transactions
        self.next_fetch_offset = fetch_offset
        self.last_epoch = -1
        self._batches: Iterator[tuple[list[ConsumerRecord], int, int]] | None = None
        self._pending: list[ConsumerRecord] = []
        """The decoded records of the current batch not returned yet."""
        self._pending_next_offset = fetch_offset
        self._pending_epoch = -1
        self.consumed_all = False
        self.end_offset = -1
        """The offset after the last complete batch (-1: none, or not an answer with records)."""
        if error_code == ErrorCode.NONE:
            for batch in iter_batches(records):
                self.end_offset = batch.next_offset

    def take(self, max_records: int, check_crcs: bool, read_committed: bool, key_deserializer: Deserializer | None,
             value_deserializer: Deserializer | None) -> list[ConsumerRecord]:
        """Up to ``max_records`` records; next_fetch_offset and last_epoch then say where the next one starts."""
        if self._batches is None:
            self._batches = self._decoded_batches(check_crcs, read_committed, key_deserializer, value_deserializer)
        taken: list[ConsumerRecord] = []
        while True:
            pending = self._pending
            if pending:
                room = max_records - len(taken)
                if len(pending) > room:
                    taken += pending[:room]
                    self._pending = pending[room:]
                    self.next_fetch_offset = taken[-1].offset + 1
                    self.last_epoch = self._pending_epoch
                    return taken
                if taken:
                    taken += pending
                else:
                    taken = pending
                self._pending = []
            self.next_fetch_offset = self._pending_next_offset
            self.last_epoch = self._pending_epoch
            if len(taken) >= max_records:
                return taken
            for records, next_offset, epoch in self._batches:
                self._pending, self._pending_next_offset, self._pending_epoch = records, next_offset, epoch
                break
            else:
                self.consumed_all = True
                return taken

    def _decoded_batches(self, check_crcs: bool, read_committed: bool, key_deserializer: Deserializer | None,
                         value_deserializer: Deserializer | None
                         ) -> Iterator[tuple[list[ConsumerRecord], int, int]]:
        """Per batch: its records at or after the fetch offset (none for a control batch or one of an aborted
        transaction), the offset after the batch, and its leader epoch. A v2 batch's header is read once (with its
        CRC check) and its fields taken from that: this loop runs once per fetched batch."""
        topic, partition = self.topic_partition
        aborted_by_producer: dict[int, int] = {}
        pending_aborts = sorted(self.aborted_transactions or [], key=lambda entry: entry[1])
        progressed = False
        position = self.fetch_offset
        new = tuple.__new__
        for batch in iter_batches(self.records):
            try:
                if batch.__class__ is RecordBatch:
                    header = batch.validated_header() if check_crcs else batch.header()
                elif check_crcs:
                    batch.validate()
            except CorruptRecordError as error:
                raise CorruptRecordError(f"record batch of {self.topic_partition} at offset "
                                         f"{batch.base_offset} is invalid: {error}") from None
            progressed = True
            if batch.__class__ is not RecordBatch:  # a legacy message (set): no epoch, control or transaction
                next_offset, epoch = batch.next_offset, -1
                if next_offset <= position:
                    continue
                timestamp_type = int(batch.timestamp_type)
                records = [new(ConsumerRecord, (topic, partition, offset, timestamp, timestamp_type, key, value,
                                                headers, epoch))
                           for offset, timestamp, key, value, headers, _ in batch]
            else:
                (base_offset, _, epoch, _, _, attributes, last_offset_delta, _, _, producer_id, _, _,
                 _) = header
                next_offset = base_offset + last_offset_delta + 1
                skip = attributes & CONTROL_FLAG_MASK
                if read_committed:
                    # Even for a batch before the position: an abort marker read there still closes its
                    # transaction, or a later transaction of the same producer would be dropped.
                    while pending_aborts and pending_aborts[0][1] < next_offset:
                        aborted_producer_id, first_offset = pending_aborts.pop(0)
                        aborted_by_producer[aborted_producer_id] = first_offset
                    if skip:
                        if producer_id in aborted_by_producer and _is_abort_marker(batch):
                            aborted_by_producer.pop(producer_id, None)
                    elif attributes & TRANSACTIONAL_FLAG_MASK and producer_id in aborted_by_producer:
                        skip = True
                if next_offset <= position:
                    continue  # all of it was returned already
                if skip:  # a control batch, or a batch of an aborted transaction
                    position = next_offset
                    yield [], next_offset, epoch
                    continue
                records = list(batch.records(labels=(topic, partition, 1 if attributes & TIMESTAMP_TYPE_MASK else 0,
                                                     epoch), record_type=ConsumerRecord))
            if records and records[0].offset < position:  # a compressed batch may start before the position
                records = [record for record in records if record.offset >= position]
            if key_deserializer is not None or value_deserializer is not None:
                records = [record._replace(
                    key=key_deserializer(record.key) if key_deserializer is not None else record.key,
                    value=value_deserializer(record.value) if value_deserializer is not None else record.value)
                    for record in records]
            position = next_offset
            yield records, next_offset, epoch
        if not progressed and self.records:
            raise RecordTooLargeError(
                f"there are some messages at [Partition={self.topic_partition}, Offset={self.fetch_offset}] whose "
                f"size is larger than the fetch size and hence cannot be returned; increase "
                "max.partition.fetch.bytes or fetch.max.bytes")


def _is_abort_marker(batch: RecordBatch) -> bool:
    """A control batch holding an ABORT marker (a control batch has exactly one record)."""
    return any(control_record_type(record.key) == ControlRecordType.ABORT for record in batch)


class Fetcher:
    def __init__(self, network: NetworkClient, subscriptions: SubscriptionState, *, fetch_min_bytes: int,
                 fetch_max_bytes: int, fetch_max_wait_ms: int, max_partition_fetch_bytes: int, isolation_level: int,
                 check_crcs: bool, client_rack: str, request_timeout_ms: int, retry_backoff_ms: float,
                 key_deserializer: Deserializer | None = None, value_deserializer: Deserializer | None = None) -> None:
        self.network = network
        self.subscriptions = subscriptions
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.isolation_level = isolation_level
        self.check_crcs = check_crcs
        self.client_rack = client_rack
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.key_deserializer = key_deserializer
        self.value_deserializer = value_deserializer
        self._completed: deque[CompletedFetch] = deque()
        self._buffered: dict[TopicPartition, list[int]] = {}
        """Per partition with fetched data not consumed yet, where each of its (at most two) buffered fetches ends:
        one more fetch is sent from the end of the first while poll() works through it, so that the broker's and
        the network's time overlaps the decoding instead of following it."""
        self._next_in_line: CompletedFetch | None = None
        self._data_ready = threading.Condition()
        self._in_flight_nodes: set[int] = set()
        self._sessions: dict[int, FetchSessionBuilder] = {}  # one incremental fetch session per broker
        self._node_backoff_until: dict[int, float] = {}
        self._wakeup: asyncio.Event | None = None
        self._running = True
        self._metadata_task: asyncio.Task | None = None
        self._tasks: set[asyncio.Task] = set()
        self.fatal_error: BaseException | None = None
        self.on_data: Callable[[], None] | None = None
        """Called on the loop thread when fetched data (or a fatal error) arrives: the asyncio consumer's wake-up,
        whose caller cannot wait on the condition."""

    # --- network side ------------------------------------------------------------------------------------------------

    def wakeup(self) -> None:
        """On the loop thread."""
        if self._wakeup is not None:
            self._wakeup.set()

    def send_now(self) -> None:
        """On the loop thread, for a caller that holds the loop (the asyncio consumer about to hand out records):
        start the fetches that can go now instead of waiting for the fetch task's turn."""
        if self._running and self._wakeup is not None and self._wakeup.is_set():
            self._send_fetches()

    def stop(self) -> None:
        self._running = False
        self.wakeup()

    async def run(self) -> None:
        self._wakeup = asyncio.Event()
        try:
            while self._running:
                self._wakeup.clear()
                delay = self._send_fetches()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), delay / 1000)
                except asyncio.TimeoutError:
                    pass
        finally:
            for task in list(self._tasks):
                task.cancel()

    def _send_fetches(self) -> float:
        """Send what can be sent; the time until it is worth looking again (ms)."""
        cluster = self.network.cluster
        now = monotonic_ms()
        wait_ms = 1000.0
        with self._data_ready:
            buffered = {tp: (len(ends), ends[-1]) for tp, ends in self._buffered.items()}
        requests: dict[int, list[tuple[TopicPartition, int, int]]] = {}
        missing_leader = False
        for tp, position, epoch in self.subscriptions.fetchable_partitions():
            if tp in buffered:
                count, end = buffered[tp]
                if count > 1 or end < position:
                    continue
                position = end  # prefetch what follows the buffered data
            leader = cluster.leader_for(tp)
            if leader == NO_NODE:
                missing_leader = True
                continue
            if leader in self._in_flight_nodes:
                continue
            backoff_until = self._node_backoff_until.get(leader, 0)
            if backoff_until > now:
                wait_ms = min(wait_ms, backoff_until - now)
                continue
            requests.setdefault(leader, []).append((tp, position, epoch))
        if missing_leader:
            self.network.add_topics({tp.topic for tp in self.subscriptions.assigned_partitions()})
            self.network.request_metadata_update()
            wait_ms = min(wait_ms, self.retry_backoff_ms)
        if missing_leader or self.network.metadata_needs_refresh():
            self._refresh_metadata()
        for node, partitions in requests.items():
            self._in_flight_nodes.add(node)
            connection = self.network.connection_if_ready(node)
            if connection is not None:
                self._send_fetch(node, connection, partitions)
            else:
                task = asyncio.ensure_future(self._connect_and_fetch(node, partitions))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
        return wait_ms

    def _refresh_metadata(self) -> None:
        if self._metadata_task is not None and not self._metadata_task.done():
            return

        async def refresh() -> None:
            try:
                await self.network.refresh_metadata()
            except KafkaError as error:
                log.debug("metadata refresh failed: %s", error)
                await asyncio.sleep(self.retry_backoff_ms / 1000)
            self.wakeup()

        self._metadata_task = asyncio.ensure_future(refresh())

    async def _connect_and_fetch(self, node: int, partitions: list[tuple[TopicPartition, int, int]]) -> None:
        try:
            connection = await self.network.connect(node)
        except KafkaError as error:
            self._fetch_not_sent(node, error)
            return
        self._send_fetch(node, connection, partitions)

    def _fetch_not_sent(self, node: int, error: KafkaError, connection: BrokerConnection | None = None) -> None:
        """A fetch that could not be sent: a network error or timeout (on `connection`, if it was open) backs off
        and retries; any other error is the consumer's to raise."""
        if isinstance(error, (NetworkError, KafkaTimeoutError)):
            if connection is not None:
                self.network.connection_failed(node, connection)
            self._fetch_failed(node, error)
        else:
            self._in_flight_nodes.discard(node)
            self._fail(error)

    def _send_fetch(self, node: int, connection: BrokerConnection,
                    partitions: list[tuple[TopicPartition, int, int]]) -> None:
        """Write the fetch now and handle its answer in a callback (no task): the answer's callback sends the next
        fetch at once, in the same turn of the loop, so the round trip to the broker is all the next fetch waits."""
        cluster = self.network.cluster
        try:
            topic_ids = {tp.topic: cluster.topic_id(tp.topic) for tp, _, _ in partitions}
            highest = None if all(topic_id != ZERO_UUID for topic_id in topic_ids.values()) \
                else FETCH_TOPIC_NAMES_HIGHEST_VERSION
            version = connection.version(ApiKey.FETCH, highest, FETCH_LOWEST_VERSION)
            wanted: dict[tuple[str, int], FetchRequest.FetchPartition] = {}
            for tp, position, epoch in partitions:
                metadata = cluster.partition(tp)
                wanted[(tp.topic, tp.partition)] = FetchRequest.FetchPartition(
                    partition=tp.partition, fetch_offset=position,
                    current_leader_epoch=metadata.leader_epoch if metadata is not None and version >= 9 else -1,
                    last_fetched_epoch=-1, log_start_offset=-1,
                    partition_max_bytes=self.max_partition_fetch_bytes)
            session = self._sessions.setdefault(node, FetchSessionBuilder())
            if version < FIRST_SESSION_VERSION:
                session.reset()
            fetch = session.build(wanted, topic_ids if version >= 13 else None)
            request = FetchRequest(
                replica_id=CONSUMER_REPLICA_ID, max_wait_ms=self.fetch_max_wait_ms,
                min_bytes=self.fetch_min_bytes, max_bytes=self.fetch_max_bytes, isolation_level=self.isolation_level,
                session_id=fetch.session_id if version >= FIRST_SESSION_VERSION else 0,
                session_epoch=fetch.session_epoch if version >= FIRST_SESSION_VERSION else FINAL_EPOCH,
                topics=fetch.topics, forgotten_topics_data=fetch.forgotten_topics_data,
                rack_id=self.client_rack if version >= 11 else "")
            future = connection.send_request(request, version,
                                             timeout_ms=self.request_timeout_ms + self.fetch_max_wait_ms)
        except KafkaError as error:
            self._fetch_not_sent(node, error, connection)
            return
        assert future is not None
        future.add_done_callback(lambda done: self._fetch_answered(node, connection, partitions, done))

    def _fetch_answered(self, node: int, connection: BrokerConnection,
                        partitions: list[tuple[TopicPartition, int, int]], future: asyncio.Future) -> None:
        self._in_flight_nodes.discard(node)
        error = NetworkError(f"the fetch from broker {node} was cancelled") if future.cancelled() \
            else future.exception()
        if isinstance(error, (NetworkError, KafkaTimeoutError)):
            self.network.connection_failed(node, connection)
            self._fetch_failed(node, error)
            return
        if error is not None:
            self._fail(error)
            return
        response = future.result()
        assert isinstance(response, FetchResponse)
        if not self._sessions[node].handle_response(response):
            log.debug("fetch session with broker %d: %s; the next fetch is full", node,
                      ErrorCode(response.error_code).name)
        elif response.error_code != ErrorCode.NONE:
            self._sessions[node].reset()
            self._node_backoff_until[node] = monotonic_ms() + self.retry_backoff_ms
            log.warning("fetch from broker %d failed: %s", node, ErrorCode(response.error_code).name)
        else:
            try:
                self._handle_response(node, response, {tp: position for tp, position, _ in partitions})
            except KafkaError as error:  # records whose batch framing is impossible: poll() raises it
                self._fail(error)
                return
        if self._running:
            self._send_fetches()  # the next fetch now; the fetch task still looks again (timers, backoff)
        self.wakeup()

    def _fetch_failed(self, node: int, error: KafkaError) -> None:
        """A fetch that never got its answer: the broker may or may not have seen it, so the next fetch is full."""
        self._in_flight_nodes.discard(node)
        self._sessions.pop(node, None)
        log.debug("fetch from broker %d failed: %s", node, error)
        self._node_backoff_until[node] = monotonic_ms() + self.retry_backoff_ms
        self.network.request_metadata_update()
        self.wakeup()

    def _handle_response(self, node: int, response: FetchResponse, positions: dict[TopicPartition, int]) -> None:
        cluster = self.network.cluster
        completed: list[CompletedFetch] = []
        refresh = False
        for topic in response.responses:
            name = topic.topic or cluster.topic_name(topic.topic_id)
            if name is None:
                refresh = True
                continue
            for partition in topic.partitions:
                tp = TopicPartition(name, partition.partition_index)
                fetch_offset = positions.get(tp)
                if fetch_offset is None:
                    continue
                code = partition.error_code
                if code == ErrorCode.NONE:
                    self.subscriptions.update_log_offsets(tp, partition.high_watermark, partition.last_stable_offset,
                                                          partition.log_start_offset)
                    records = partition.records
                    if not records:
                        continue
                    aborted = None
                    if self.isolation_level == READ_COMMITTED and partition.aborted_transactions:
                        aborted = [(entry.producer_id, entry.first_offset)
                                   for entry in partition.aborted_transactions]
                    completed.append(CompletedFetch(tp, fetch_offset, code, partition.high_watermark,
                                                    partition.last_stable_offset, partition.log_start_offset,
                                                    records, aborted))
                elif code in _REFRESH_METADATA_ERRORS:
                    refresh = True
                else:
                    completed.append(CompletedFetch(tp, fetch_offset, code, -1, -1, -1, b"", None))
        if refresh:
            self.network.request_metadata_update()
            self._node_backoff_until[node] = monotonic_ms() + self.retry_backoff_ms
            self._refresh_metadata()
        if completed:
            with self._data_ready:
                for fetch in completed:
                    self._buffered.setdefault(fetch.topic_partition, []).append(fetch.end_offset)
                    self._completed.append(fetch)
                self._data_ready.notify_all()
            if self.on_data is not None:
                self.on_data()

    def _fail(self, error: BaseException) -> None:
        with self._data_ready:
            self.fatal_error = error
            self._data_ready.notify_all()
        if self.on_data is not None:
            self.on_data()

    # --- caller side -------------------------------------------------------------------------------------------------

    def wait_for_data(self, timeout_s: float) -> bool:
        with self._data_ready:
            if self._completed or self.fatal_error is not None:
                return True
            return self._data_ready.wait(timeout_s)

    def notify(self) -> None:
        """Wake a caller blocked in wait_for_data (consumer.wakeup(), rebalance needed)."""
        with self._data_ready:
            self._data_ready.notify_all()

    def fetched_records(self, max_records: int) -> tuple[dict[TopicPartition, list[ConsumerRecord]], bool]:
        """Up to ``max_records`` records; also whether a partition was fully drained (so the network thread
        should look for new fetches to send)."""
        if self.fatal_error is not None:
            error, self.fatal_error = self.fatal_error, None
            raise error
        result: dict[TopicPartition, list[ConsumerRecord]] = {}
        remaining = max_records
        drained_any = False
        subscriptions = self.subscriptions
        while remaining > 0:
            fetch = self._next_in_line
            if fetch is None:
                with self._data_ready:
                    if not self._completed:
                        break
                    fetch = self._completed.popleft()
                if not self._initialize(fetch):
                    self._release(fetch)
                    drained_any = True
                    continue
                self._next_in_line = fetch
            tp = fetch.topic_partition
            position = subscriptions.position(tp)
            if position is None or position != fetch.next_fetch_offset or \
                    subscriptions.state(tp) is None or subscriptions.state(tp).paused:
                self._next_in_line = None
                self._release(fetch)
                drained_any = True
                continue
            try:
                records = fetch.take(remaining, self.check_crcs, self.isolation_level == READ_COMMITTED,
                                     self.key_deserializer, self.value_deserializer)
            except KafkaError:
                self._next_in_line = None
                self._release(fetch)
                raise
            subscriptions.advance(tp, fetch.next_fetch_offset, fetch.last_epoch, position)
            if records:
                result.setdefault(tp, []).extend(records)
                remaining -= len(records)
            if fetch.consumed_all:
                self._next_in_line = None
                self._release(fetch)
                drained_any = True
        return result, drained_any

    def _initialize(self, fetch: CompletedFetch) -> bool:
        """Check an error fetch; False when it holds nothing to return."""
        if fetch.error_code == ErrorCode.NONE:
            return True
        tp = fetch.topic_partition
        if fetch.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if self.subscriptions.position(tp) != fetch.fetch_offset:
                return False  # the position moved on since; the answer is stale
            if self.subscriptions.default_reset_strategy == OffsetResetStrategy.NONE:
                raise OffsetOutOfRangeError(f"fetch position {fetch.fetch_offset} is out of range for partition "
                                            f"{tp}, and auto.offset.reset is none")
            log.info("fetch position %d is out of range for %s, resetting offset", fetch.fetch_offset, tp)
            self.subscriptions.request_offset_reset(tp)
            return False
        raise response_error(fetch.error_code, f"fetch from {tp}")

    def _release(self, fetch: CompletedFetch) -> None:
        with self._data_ready:
            ends = self._buffered.get(fetch.topic_partition)
            if ends:
                ends.pop(0)
                if not ends:
                    del self._buffered[fetch.topic_partition]

    def clear_buffered(self, keep: set[TopicPartition] | None = None) -> None:
        """Drop buffered data (all, or of partitions not in ``keep``): after seek or a rebalance."""
        with self._data_ready:
            if keep is None:
                self._completed.clear()
                self._buffered.clear()
                self._next_in_line = None
                return
            kept = deque(fetch for fetch in self._completed if fetch.topic_partition in keep)
            self._completed = kept
            if self._next_in_line is not None and self._next_in_line.topic_partition not in keep:
                self._next_in_line = None
            self._buffered = {}
            for fetch in ([self._next_in_line] if self._next_in_line is not None else []) + list(kept):
                self._buffered.setdefault(fetch.topic_partition, []).append(fetch.end_offset)
