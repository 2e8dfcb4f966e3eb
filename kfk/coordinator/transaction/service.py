"""TransactionCoordinatorService: the asyncio shell around the TransactionCoordinator state machine.

It owns nothing but plumbing:
- requests: each call runs the state machine on the event loop and awaits the answer it hands back (at once, or
  after a write commits); every method returns what the handler puts in its response;
- writes: one queue and worker per __transaction_state partition (kfk.coordinator.runtime.CoordinatorWriter);
- markers: each WriteTxnMarkers request the state machine hands out goes to `send_markers(broker_id, request)`,
  the broker's inter-broker channel (the local broker's own partitions included: the broker decides how); the
  answer, or None if the send failed, goes back to the state machine;
- time: one asyncio timer (kfk.coordinator.runtime.DeadlineTimer) armed at the next deadline; it calls `poll(now_ms)`;
- leadership: a MetadataCache listener. A __transaction_state partition this broker now leads is loaded at its
  leader epoch (the coordinator epoch the markers carry); one it lost is unloaded. The latest image also answers
  the marker manager's "who leads this partition now".
- producer ids: `generate_producer_id()` is asynchronous (a new block may need the controller) while the state
  machine is not, so one id is fetched ahead of every call that may use one and kept until it is used.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from kfk.common.features import METADATA_VERSION_FEATURE_NAME, TRANSACTION_VERSION_FEATURE_NAME
from kfk.common.internal_topics import TRANSACTION_STATE_TOPIC_NAME
from kfk.common.structs import TopicPartition
from kfk.coordinator.runtime import (
    AppendFunction,
    CoordinatorWriter,
    DeadlineTimer,
    LoadedEntry,
    LoadedRecord,
    LogLookup,
    call,
    load_partition,
    wait_while_loading,
)
from kfk.coordinator.transaction.config import TransactionCoordinatorConfig
from kfk.coordinator.transaction.coordinator import (
    ProducerIdResult,
    TransactionCoordinator,
)
from kfk.coordinator.transaction.markers import NO_LEADER, MarkerRequest
from kfk.errors import CoordinatorNotAvailableError, ErrorCode, KafkaError
from kfk.metadata.image import MetadataImage
from kfk.protocol.messages.describe_transactions import DescribeTransactionsResponse
from kfk.protocol.messages.list_transactions import ListTransactionsResponse
from kfk.protocol.messages.write_txn_markers import (
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

log = logging.getLogger("kfk.coordinator.transaction")

SendMarkers = Callable[[int, WriteTxnMarkersRequest], Awaitable[WriteTxnMarkersResponse]]


class TransactionCoordinatorService:
    def __init__(self, config: TransactionCoordinatorConfig, node_id: int, append: AppendFunction,
                 log_of: LogLookup, now_ms: Callable[[], int], generate_producer_id: Callable[[], Awaitable[int]],
                 send_markers: SendMarkers) -> None:
        self.config = config
        self.node_id = node_id
        self.coordinator = TransactionCoordinator(config, self._take_producer_id, self._partition_leader)
        self._log_of = log_of
        self._now_ms = now_ms
        self._generate_producer_id = generate_producer_id
        self._send_markers = send_markers
        self._producer_ids: list[int] = []
        self._image: MetadataImage | None = None
        self._writer: CoordinatorWriter = CoordinatorWriter(
            TRANSACTION_STATE_TOPIC_NAME, append, now_ms, self.coordinator.complete_write, self._after)
        self._loads: dict[int, asyncio.Task] = {}
        self._sends: set[asyncio.Task] = set()
        self._timer = DeadlineTimer(now_ms, self._on_timer)

    # -- plumbing ----------------------------------------------------------------------------------------------------

    def _after(self) -> None:
        """After any call into the state machine: queue its writes, send its markers, re-arm the timer."""
        for write in self.coordinator.take_writes():
            self._writer.submit(write)
        for sent in self.coordinator.take_marker_requests(self._now_ms()):
            task = asyncio.get_running_loop().create_task(self._send(sent))
            self._sends.add(task)
            task.add_done_callback(self._sends.discard)
        self._timer.arm(self.coordinator.next_deadline_ms())

    async def _send(self, sent: MarkerRequest) -> None:
        response: WriteTxnMarkersResponse | None = None
        try:
            response = await self._send_markers(sent.broker_id, sent.request)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - any failure to deliver means: look the leader up, try again
            log.info("WriteTxnMarkers to broker %d failed: %s", sent.broker_id, error)
        self.coordinator.complete_markers(sent, response, self._now_ms())
        self._after()

    def _on_timer(self) -> None:
        try:
            self.coordinator.poll(self._now_ms())
        except Exception:  # noqa: BLE001 - a bug in one timeout must not stop every other one
            log.exception("Transaction coordinator timer failed")
        self._after()

    async def _call(self, operation: Callable[[Callable[[Any], None]], None], *,
                    needs_producer_id: bool = False) -> Any:
        if needs_producer_id:
            await self._reserve_producer_id()
        return await call(operation, self._after)

    async def _reserve_producer_id(self) -> None:
        if self._producer_ids:
            return
        try:
            self._producer_ids.append(await self._generate_producer_id())
        except KafkaError as error:
            log.warning("No producer id for the transaction coordinator: %s", error)

    def _take_producer_id(self) -> int:
        if not self._producer_ids:
            raise CoordinatorNotAvailableError("No producer id available")
        return self._producer_ids.pop()

    def _partition_leader(self, topic: str, partition: int) -> int | None:
        if self._image is None:
            return NO_LEADER
        topic_image = self._image.topic(topic)
        registration = None if topic_image is None else topic_image.partitions.get(partition)
        return None if registration is None else registration.leader

    def stop(self) -> None:
        """Stop timers, loads, writers and marker sends; requests still waiting get no answer."""
        self._timer.stop()
        self._writer.stop()
        for task in list(self._loads.values()) + list(self._sends):
            task.cancel()

    # -- leadership --------------------------------------------------------------------------------------------------

    def on_metadata_update(self, previous: MetadataImage, current: MetadataImage) -> None:
        """MetadataCache listener: load the __transaction_state partitions this broker now leads (again, at a new
        leader epoch), unload the others; the records follow the finalized transaction.version."""
        self._image = current
        if METADATA_VERSION_FEATURE_NAME in current.features:  # an image with its features (not a bare test image)
            level = current.feature_level(TRANSACTION_VERSION_FEATURE_NAME)
            self.coordinator.state.transaction_version_level = level
        led = self._led_partitions(current)
        held = self.coordinator.state.partitions
        for partition in sorted(held):
            if led.get(partition) != self.coordinator.state.coordinator_epoch(partition):
                log.debug("Unloading %s-%d", TRANSACTION_STATE_TOPIC_NAME, partition)
                task = self._loads.pop(partition, None)
                if task is not None:
                    task.cancel()
                self.coordinator.unload(partition)
        for partition, leader_epoch in sorted(led.items()):
            if partition in self.coordinator.state.partitions:
                continue
            self.coordinator.begin_loading(partition, leader_epoch)
            log.debug("Loading %s-%d at coordinator epoch %d", TRANSACTION_STATE_TOPIC_NAME, partition, leader_epoch)
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                continue
            self._loads[partition] = loop.create_task(self._load(partition))
        try:
            self._after()
        except RuntimeError:
            pass  # no running loop (a listener called at subscription time outside the loop)

    def _led_partitions(self, image: MetadataImage) -> dict[int, int]:
        """The partitions of __transaction_state this broker leads, with their leader epochs."""
        topic = image.topic(TRANSACTION_STATE_TOPIC_NAME)
        if topic is None:
            return {}
        return {index: registration.leader_epoch for index, registration in topic.partitions.items()
                if registration.leader == self.node_id}

    async def _load(self, partition: int) -> None:
        count = await load_partition(TRANSACTION_STATE_TOPIC_NAME, partition, self._log_of,
                                     lambda entry: self._replay(partition, entry))
        self._loads.pop(partition, None)
        self.coordinator.complete_loading(partition, self._now_ms())
        log.debug("Loaded %s-%d: %d records", TRANSACTION_STATE_TOPIC_NAME, partition, count)
        self._after()

    def _replay(self, partition: int, entry: LoadedEntry) -> None:
        """A loading partition's records rebuild the transactions' state; markers never reach this topic."""
        if isinstance(entry, LoadedRecord):
            self.coordinator.replay(partition, entry.key, entry.value)

    async def wait_until_loaded(self, transactional_id: str, timeout_ms: int) -> None:
        """Return once the id's partition is loaded (or is not this broker's, or `timeout_ms` passed)."""
        await wait_while_loading(lambda: self.coordinator.state.coordinator_error(transactional_id), self._now_ms, timeout_ms)

    # -- requests ----------------------------------------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str | None, transaction_timeout_ms: int, producer_id: int,
                               producer_epoch: int) -> ProducerIdResult:
        return await self._call(lambda respond: self.coordinator.init_producer_id(
            transactional_id, transaction_timeout_ms, producer_id, producer_epoch, self._now_ms(), respond),
            needs_producer_id=True)

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition], client_transaction_version: int) -> ErrorCode:
        return await self._call(lambda respond: self.coordinator.add_partitions(
            transactional_id, producer_id, producer_epoch, partitions, client_transaction_version, self._now_ms(),
            respond))

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        return self.coordinator.verify_partitions(transactional_id, producer_id, producer_epoch, partitions)

    async def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          group_id: str) -> ErrorCode:
        return await self._call(lambda respond: self.coordinator.add_offsets(
            transactional_id, producer_id, producer_epoch, group_id, self._now_ms(), respond))

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                      client_transaction_version: int) -> ProducerIdResult:
        return await self._call(lambda respond: self.coordinator.end_txn(
            transactional_id, producer_id, producer_epoch, committed, client_transaction_version, self._now_ms(),
            respond), needs_producer_id=True)

    def describe(self, transactional_ids: Iterable[str]) -> list[DescribeTransactionsResponse.TransactionState]:
        return [self.coordinator.describe(transactional_id) for transactional_id in transactional_ids]

    def list_transactions(self, state_filters: list[str], producer_id_filters: list[int],
                          duration_filter_ms: int = -1) -> ListTransactionsResponse:
        return self.coordinator.list_transactions(state_filters, producer_id_filters, duration_filter_ms,
                                                  self._now_ms())
