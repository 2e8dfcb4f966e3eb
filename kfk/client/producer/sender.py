"""Sender: the producer's task on the network thread that turns ready batches into Produce requests.

Each round: make sure an idempotent producer has a producer id; ask the accumulator which brokers have a ready
batch; drop brokers that are not connected yet (a connect starts in the background) or already have
max.in.flight.requests.per.connection unanswered requests; drain one batch per partition for the rest and send one
ProduceRequest per broker, again and again while batches are ready and requests fit; expire queued batches older
than delivery.timeout.ms; then sleep until woken (a new or full batch from send(), a response, a connection, a
metadata update, flush or close) or until the next batch's linger.ms or retry backoff ends. Responses are handled
in a callback the connection calls as it reads them, rather than a task (or a future's done callback) per request:
at thousands of requests a second, the task and timer per request were the network thread's largest cost.

Responses are handled per partition: success completes the batch's futures with its base offset (and the
broker's log append time for LogAppendTime topics); a retriable error (NOT_LEADER_OR_FOLLOWER, a timeout, a lost
connection...) puts the batch back at the head of its queue after retry.backoff.ms, with a metadata refresh when the
error says the leader moved, until retries or delivery.timeout.ms run out; anything else fails the batch.
With acks=0 the broker sends nothing back, so batches complete (offset -1) as soon as they are written.

A transactional producer's sender also sends the TransactionManager's requests, one at a time, as a task beside the
produce requests (finding the transaction or group coordinator first when it is not known): a batch of a partition
not yet in the transaction stays queued until AddPartitionsToTxn answers (TV1), EndTxn waits until every batch is
answered, and once the transaction failed or is being aborted the queued batches fail unsent.

A fatal error (no producer id can be had; a transactional producer fenced or refused) fails the accumulator
(RecordAccumulator.fail): the queued batches fail with it, and so does every record appended after.
"""

from __future__ import annotations

import asyncio
import functools
import logging

from kfk.client.event_loop import resolve_waiter
from kfk.client.network_client import ExponentialBackoff, NetworkClient, monotonic_ms
from kfk.client.producer.accumulator import ProducerBatch, RecordAccumulator
from kfk.client.offsets import find_coordinator
from kfk.common.constants import INT32_MAX
from kfk.common.structs import TopicPartition
from kfk.client.response_errors import response_error
from kfk.client.producer.transaction_manager import (
    TRANSACTION_VERSION_FEATURE,
    TransactionAbortedError,
    TransactionManager,
    TxnRequest,
)
from kfk.errors import (
    DuplicateSequenceError,
    ErrorCode,
    InvalidProducerEpochError,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    OutOfOrderSequenceError,
    ProtocolError,
    UnknownProducerIdError,
    UnsupportedVersionError,
    error_for_code,
)
from kfk.protocol.message import Message
from kfk.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kfk.protocol.messages.produce import ProduceRequest, ProduceResponse
from kfk.protocol.produce_fast import SinglePartitionProduceResponse
from kfk.protocol.single_partition_produce import SingleProduceRequest

__all__ = ["Sender"]

log = logging.getLogger("kfk.client.producer")

_MAX_IDLE_WAIT_MS = 1000  # wake at least this often to expire batches and refresh old metadata
_METADATA_ERRORS = frozenset({
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_ENOUGH_REPLICAS,
})


class Sender:
    def __init__(self, network: NetworkClient, accumulator: RecordAccumulator, *, acks: int, retries: int,
                 request_timeout_ms: int, delivery_timeout_ms: int, max_in_flight: int, max_request_size: int,
                 retry_backoff: ExponentialBackoff, transaction_manager: TransactionManager | None,
                 idempotence_explicit: bool) -> None:
        self.network = network
        self.accumulator = accumulator
        self.acks = acks
        self.retries = retries
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.max_in_flight = max_in_flight
        self.max_request_size = max_request_size
        self.retry_backoff = retry_backoff
        self.transaction_manager = transaction_manager
        self.idempotence_explicit = idempotence_explicit
        self.running = True
        self.sleeping = False
        self.force_close = False
        self._woken = False
        self._waiter: asyncio.Future | None = None
        """The future a sleeping sender awaits: resolved by wakeup() or by its timer (no task per sleep, as
        asyncio.wait_for on an Event would make: the sender sleeps thousands of times a second)."""
        self._in_flight: dict[int, int] = {}
        self._connecting: set[int] = set()
        self._tasks: set[asyncio.Task] = set()
        self._metadata_task: asyncio.Task | None = None
        self._init_attempts = 0
        self._txn_task: asyncio.Task | None = None

    # --- control, from any thread through the loop -------------------------------------------------------------------

    def wakeup(self) -> None:
        """Call on the loop thread (the producer uses loop.call_soon_threadsafe(sender.wakeup))."""
        self._woken = True
        if self._waiter is not None:
            resolve_waiter(self._waiter)

    def initiate_close(self, force: bool) -> None:
        self.running = False
        self.force_close = self.force_close or force
        self.wakeup()

    # --- the loop ----------------------------------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            while self.running:
                await self._run_once()
            # Graceful close: send what is queued and wait for the answers, unless told to stop now.
            while not self.force_close and (self.accumulator.has_undrained() or any(self._in_flight.values())):
                await self._run_once()
        finally:
            for task in list(self._tasks):
                task.cancel()
            error = self.accumulator.fatal_error or KafkaError("the producer was closed before the record was sent")
            for batch in self.accumulator.abort_undrained():
                self._fail(batch, error)
            for batch in self.accumulator.incomplete_batches():
                self._fail(batch, error)

    async def _run_once(self) -> None:
        self._woken = False
        changes = self.accumulator.changes
        manager = self.transaction_manager
        txn_delay = None
        if manager is not None and manager.is_transactional:
            txn_delay = self._run_transaction_manager(manager)
        elif manager is not None and not manager.has_producer_id:
            if not await self._init_producer_id():
                return
        now = monotonic_ms()
        cluster = self.network.cluster
        sent_any = False
        while True:  # one request per broker and round; keep going while batches are ready and requests fit
            ready = self.accumulator.ready(cluster, now)
            if ready.unknown_leader_topics:
                self.network.add_topics(ready.unknown_leader_topics)
                self.network.request_metadata_update()
            sendable = set()
            for node in ready.ready_nodes:
                if self._in_flight.get(node, 0) >= self.max_in_flight:
                    continue
                if self.network.connection_if_ready(node) is None:
                    self._connect_in_background(node)
                    continue
                sendable.add(node)
            drained = self.accumulator.drain(cluster, sendable, self.max_request_size, now, self._can_send) \
                if sendable else {}
            if not drained:
                break
            for node, batches in drained.items():
                self._send_produce_request(node, batches)
            sent_any = True
            if self._saturated():
                break
        if self.network.metadata_needs_refresh():
            self._refresh_metadata_in_background()
        for batch in self.accumulator.expired_batches(now):
            self._fail(batch, KafkaTimeoutError(
                f"expiring {batch.record_count} record(s) for {batch.topic_partition}: "
                f"{now - batch.created_ms:.0f} ms has passed since batch creation (delivery.timeout.ms)"))
        saturated = self._saturated()
        if sent_any and not saturated:
            await asyncio.sleep(0)  # let responses and appends in; then look again
            return
        delay = min(ready.next_ready_check_delay_ms, _MAX_IDLE_WAIT_MS,
                    txn_delay if txn_delay is not None else _MAX_IDLE_WAIT_MS)
        # Announce the sleep, then look once more: send() wakes a sleeping sender only, so a batch that filled
        # up after this round started is either seen here or followed by a wake-up. A sender with every broker's
        # max.in.flight.requests.per.connection used up does not announce it: no batch can go before an answer,
        # and each answer wakes it, so the sends meanwhile need not wake it for nothing (a syscall and a turn of
        # the loop per batch, on the thread that sets the pace). Nor does it look again after sending the request
        # that took the last slot: nothing can go before an answer (at 1 KiB records the producer runs saturated,
        # and that second look was a round of ready(), drain() and expiry per request).
        self.sleeping = not saturated
        try:
            if not saturated and self.accumulator.changes != changes:
                return
            await self._sleep(max(delay, 0) / 1000)
        finally:
            self.sleeping = False

    async def _sleep(self, seconds: float) -> None:
        """Until wakeup() (or one that came since this round started) or ``seconds`` pass."""
        if self._woken:
            return
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        timer = loop.call_later(seconds, resolve_waiter, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._waiter = None

    def _saturated(self) -> bool:
        """Whether every broker has max.in.flight.requests.per.connection requests unanswered."""
        brokers = self.network.cluster.brokers
        in_flight = self._in_flight
        return bool(brokers) and all(in_flight.get(node, 0) >= self.max_in_flight for node in brokers)

    def _can_send(self, batch: ProducerBatch) -> bool:
        manager = self.transaction_manager
        return manager is None or manager.can_send(batch.topic_partition, batch.base_sequence >= 0)

    def _track(self, coroutine) -> asyncio.Task:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _connect_in_background(self, node: int) -> None:
        if node in self._connecting:
            return
        self._connecting.add(node)

        async def connect() -> None:
            try:
                await self.network.connect(node)
            except KafkaError as error:
                log.debug("cannot connect to broker %d: %s", node, error)
                self.network.request_metadata_update()
            finally:
                self._connecting.discard(node)
                self.wakeup()

        self._track(connect())

    def _refresh_metadata_in_background(self) -> None:
        if self._metadata_task is not None and not self._metadata_task.done():
            return

        async def refresh() -> None:
            try:
                await self.network.refresh_metadata()
            except KafkaError as error:
                log.debug("metadata refresh failed: %s", error)
                await asyncio.sleep(self.retry_backoff.initial_ms / 1000)
            finally:
                self.wakeup()

        self._metadata_task = self._track(refresh())

    # --- transactions ------------------------------------------------------------------------------------------------

    def _run_transaction_manager(self, manager: TransactionManager) -> float | None:
        """Fail queued batches of a failed or aborting transaction, and start the next transactional request
        unless one is in flight. Returns how long until a request held back by its backoff may go."""
        if manager.has_fatal_error or manager.has_abortable_error or manager.is_aborting:
            error = manager.last_error or TransactionAbortedError("the transaction was aborted before this record "
                                                                  "was sent")
            # A fatal error fails the records sent from now on too; an aborted transaction only the queued ones.
            for batch in (self.accumulator.fail(error) if manager.has_fatal_error
                          else self.accumulator.abort_undrained()):
                if batch.base_sequence >= 0:
                    manager.handle_failed_batch(error, batch.producer_epoch, sequenced=True)
                self._fail(batch, error)
        if self._txn_task is not None and not self._txn_task.done():
            return None
        manager.update_transaction_version(self.network.finalized_feature_level(TRANSACTION_VERSION_FEATURE))
        request = manager.next_request(self.accumulator.has_incomplete())
        if request is None:
            return manager.retry_delay_ms()
        self._txn_task = self._track(self._send_transactional_request(manager, request))
        return None

    async def _send_transactional_request(self, manager: TransactionManager, request: TxnRequest) -> None:
        try:
            node = manager.coordinator(request.coordinator_type, request.coordinator_key)
            if node is None or not self.network.knows_node(node):
                node = await find_coordinator(self.network, request.coordinator_key,
                                              key_type=request.coordinator_type, timeout_ms=self.request_timeout_ms)
                manager.set_coordinator(request.coordinator_type, request.coordinator_key, node)
            response = await self.network.send(node, request.message, version=request.version,
                                               highest=request.highest)
        except KafkaError as error:
            log.debug("%r failed: %s", request, error)
            manager.request_failed(request, error)
        except Exception as error:  # noqa: BLE001 - a bug must fail the caller's wait, not hang it
            log.exception("%r failed", request)
            manager.request_failed(request, KafkaError(f"{request!r} failed: {error!r}"))
        else:
            manager.handle_response(request, response)
        finally:
            self.wakeup()

    # --- idempotence -------------------------------------------------------------------------------------------------

    async def _init_producer_id(self) -> bool:
        manager = self.transaction_manager
        assert manager is not None
        request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=INT32_MAX)
        try:
            response = await self.network.send_to_any(request, timeout_ms=self.request_timeout_ms)
            assert isinstance(response, InitProducerIdResponse)
            if response.error_code != ErrorCode.NONE:
                raise response_error(response.error_code, "InitProducerId of the idempotent producer")
        except UnsupportedVersionError as error:
            if self.idempotence_explicit:
                self._fatal(KafkaError(f"enable.idempotence=true but the broker cannot give a producer id: {error}"))
            else:
                log.warning("the broker does not support InitProducerId; idempotence is disabled")
                self.transaction_manager = None
            return True
        except KafkaError as error:
            if not error.retriable:
                self._fatal(error)
                return False
            self._init_attempts += 1
            await asyncio.sleep(self.retry_backoff.backoff_ms(self._init_attempts) / 1000)
            return False
        self._init_attempts = 0
        manager.set_producer_id_and_epoch(response.producer_id, response.producer_epoch)
        log.debug("producer id %d, epoch %d", response.producer_id, response.producer_epoch)
        return True

    def _fatal(self, error: KafkaError) -> None:
        """An error that makes every queued and every later record fail (no producer id can be had)."""
        log.debug("the producer failed for good: %s", error)
        for batch in self.accumulator.fail(error):
            self._fail(batch, error)
        self.running = False
        self.force_close = True

    # --- produce requests --------------------------------------------------------------------------------------------

    def _send_produce_request(self, node: int, batches: list[ProducerBatch]) -> None:
        manager = self.transaction_manager
        for batch in batches:
            if batch.records is None:
                if manager is not None:
                    sequence = manager.next_sequence(batch.topic_partition, batch.record_count)
                    batch.set_producer_state(manager.producer_id, manager.producer_epoch, sequence,
                                             manager.is_transactional)
                batch.close()
            if manager is not None:
                manager.batch_sent(batch.topic_partition)
        transactional_id = manager.transactional_id if manager is not None else None
        request: ProduceRequest | SingleProduceRequest
        if len(batches) == 1:  # the common request (one partition per broker): no message objects to build
            topic, partition = batches[0].topic_partition
            request = SingleProduceRequest(transactional_id, self.acks, self.request_timeout_ms, topic, partition,
                                           batches[0].records)  # type: ignore[arg-type]
        else:
            topics: dict[str, list[ProduceRequest.PartitionProduceData]] = {}
            for batch in batches:
                topics.setdefault(batch.topic_partition.topic, []).append(
                    ProduceRequest.PartitionProduceData(index=batch.topic_partition.partition, records=batch.records))
            request = ProduceRequest(
                transactional_id=transactional_id, acks=self.acks, timeout_ms=self.request_timeout_ms,
                topic_data=[ProduceRequest.TopicProduceData(name=name, partition_data=partitions)
                            for name, partitions in topics.items()])
        self._in_flight[node] = self._in_flight.get(node, 0) + 1
        if self.acks == 0:
            self._track(self._produce_without_response(node, batches, request))
            return
        connection = self.network.connection_if_ready(node)
        if connection is None:
            self._request_failed(node, batches, None, NetworkError(f"the connection to broker {node} closed"))
            return
        connection.send_request_then(request, functools.partial(self._handle_response, node, batches, connection))

    def _send_next(self, node: int, topic_partition: TopicPartition) -> bool:
        """The one-partition produce cycle: straight from a successful response, send the partition's next ready
        batches while requests to ``node`` fit, without a round of the loop (ready(), drain(), a sleep and a
        wake-up per request were most of the network thread's work per request). True when that left every request
        slot of ``node`` in use: the next response, not a round, is what can send more, so the sender sleeps on.
        Only for a producer that writes one partition and has no transaction to keep in step (a transactional
        producer's rounds add partitions, end transactions and fail what an abort leaves queued)."""
        manager = self.transaction_manager
        if self.force_close or (manager is not None and (manager.is_transactional or not manager.has_producer_id)) \
                or self.accumulator.only_partition() != topic_partition \
                or self.network.cluster.leader_for(topic_partition) != node \
                or self.network.connection_if_ready(node) is None:
            return False
        in_flight, now = self._in_flight, monotonic_ms()
        while in_flight[node] < self.max_in_flight:
            batch = self.accumulator.drain_next(topic_partition, now, self._can_send)
            if batch is None:
                return False
            self._send_produce_request(node, [batch])
        return True

    def _request_failed(self, node: int, batches: list[ProducerBatch], connection, error: KafkaError) -> None:
        self._in_flight[node] -= 1
        self.wakeup()
        if connection is not None and isinstance(error, (NetworkError, KafkaTimeoutError)):
            self.network.connection_failed(node, connection)
        for batch in batches:
            self._retry_or_fail(batch, error)

    async def _produce_without_response(self, node: int, batches: list[ProducerBatch],
                                        request: ProduceRequest | SingleProduceRequest) -> None:
        """acks=0: the broker answers nothing, so the batches are done once written (waiting for the socket when
        its buffer is full: the only back-pressure there is)."""
        try:
            await self.network.send_no_response(node, request)
        except KafkaError as error:
            self._in_flight[node] -= 1
            self.wakeup()
            for batch in batches:
                self._retry_or_fail(batch, error)
            return
        self._in_flight[node] -= 1
        self.wakeup()
        for batch in batches:
            self._complete(batch, -1, -1)

    def _handle_response(self, node: int, batches: list[ProducerBatch], connection, response: Message | None,
                         error: KafkaError | None) -> None:
        """Called by the connection as the response is read, or with the error that stops it (a callback straight
        from the receive path, not a future's or a task's: this runs thousands of times a second)."""
        if error is not None:
            self._request_failed(node, batches, connection, error)
            return
        self._in_flight[node] -= 1
        if response.__class__ is SinglePartitionProduceResponse:  # read by the one-partition request itself
            self._handle_partition_response(batches[0], response)
            if response.error_code != ErrorCode.NONE or not self._send_next(node, batches[0].topic_partition):
                self.wakeup()
            return
        self.wakeup()
        assert isinstance(response, ProduceResponse)
        results = {(topic.name, partition.index): partition
                   for topic in response.responses for partition in topic.partition_responses}
        for batch in batches:
            partition = results.get(batch.topic_partition)
            if partition is None:
                self._retry_or_fail(batch, ProtocolError(f"the produce response has no result for "
                                                         f"{batch.topic_partition}"))
            else:
                self._handle_partition_response(batch, partition)

    def _handle_partition_response(self, batch: ProducerBatch,
                                   partition: ProduceResponse.PartitionProduceResponse | SinglePartitionProduceResponse
                                   ) -> None:
        if partition.error_code == ErrorCode.NONE:
            self._complete(batch, partition.base_offset, partition.log_append_time_ms)
        elif partition.error_code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
            self._complete(batch, -1, -1)  # already written by an earlier attempt; its offset is unknown
        else:
            error = error_for_code(partition.error_code)(partition.error_message or None)
            if partition.error_code in _METADATA_ERRORS:
                self.network.request_metadata_update()
            self._retry_or_fail(batch, error)

    def _complete(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        manager = self.transaction_manager
        if manager is not None and batch.base_sequence >= 0:
            manager.batch_done(batch.topic_partition)
            manager.acknowledged(batch.topic_partition, batch.base_sequence + batch.record_count - 1)
        self.accumulator.deallocate(batch)
        batch.complete(base_offset, log_append_time, None)

    def _retry_or_fail(self, batch: ProducerBatch, error: KafkaError) -> None:
        manager = self.transaction_manager
        if manager is not None and batch.base_sequence >= 0:
            manager.batch_done(batch.topic_partition)
        now = monotonic_ms()
        within_time = now - batch.created_ms < self.delivery_timeout_ms
        retriable = error.retriable
        if isinstance(error, OutOfOrderSequenceError) and manager is not None:
            # An earlier batch of this partition failed and is being retried: this one follows it again.
            retriable = not manager.is_next_expected(batch.topic_partition, batch.base_sequence)
        if retriable and within_time and batch.attempts < self.retries and not self.force_close:
            if isinstance(error, (NetworkError, KafkaTimeoutError)):
                self.network.request_metadata_update()
            self.accumulator.reenqueue(batch, now, self.retry_backoff.backoff_ms(batch.attempts + 1))
            return
        if manager is not None and manager.is_transactional:
            manager.handle_failed_batch(error, batch.producer_epoch, sequenced=batch.base_sequence >= 0)
        elif manager is not None and batch.base_sequence >= 0 and not isinstance(error, DuplicateSequenceError):
            if isinstance(error, (OutOfOrderSequenceError, UnknownProducerIdError, InvalidProducerEpochError)) or \
                    error.retriable:
                manager.request_reset()  # the sequence of this partition now has a hole
        self._fail(batch, error)

    def _fail(self, batch: ProducerBatch, error: BaseException) -> None:
        self.accumulator.deallocate(batch)
        batch.complete(-1, -1, error)

