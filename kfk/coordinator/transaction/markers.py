"""TransactionMarkerManager: the COMMIT/ABORT markers of prepared transactions, until every partition has them
(Kafka's TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler, without the network).

Once PrepareCommit/PrepareAbort is durable, each partition of the transaction needs a control batch from its
leader. `add` queues them; `take_requests` groups every partition ready to send by its current leader into one
WriteTxnMarkersRequest per broker (one marker entry per transaction); the owner sends each with the broker's
`send_markers(broker_id, request)` and hands the answer (or None: the send failed) to `complete`. A partition is
done when its leader answers NONE; a leader that moved, a replica set short of the min ISR, a timeout or a failed
send put it back to wait `retry_backoff_ms` and look its leader up again. When the last partition is done the
transaction's `on_complete(now_ms)` runs (the coordinator then writes CompleteCommit/CompleteAbort).

A partition whose topic no longer exists gets no marker (there is nothing left to make readable). A leader that
answers INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED has seen a newer coordinator or producer epoch:
this coordinator is stale, so it stops sending this transaction's markers and never completes it (the newer
coordinator does).
"""

from __future__ import annotations

import dataclasses
import logging
from collections import defaultdict
from collections.abc import Callable

from kfk.common.structs import TopicPartition
from kfk.coordinator.timer import CoordinatorTimer
from kfk.errors import ErrorCode
from kfk.protocol.messages.write_txn_markers import (
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)

log = logging.getLogger("kfk.coordinator.transaction")

#: A partition's current leader: a broker id, NO_LEADER while it has none, None if the partition does not exist.
LeaderLookup = Callable[[str, int], int | None]
NO_LEADER = -1

#: Errors after which the partition's marker is tried again (with its leader looked up again).
_RETRIABLE = frozenset({
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
})
#: This coordinator (or the epoch it writes with) is stale: stop.
_FENCED = frozenset({ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED})


@dataclasses.dataclass(slots=True, eq=False)
class PendingMarkers:
    """One prepared transaction's markers still to write."""

    transactional_id: str
    txn_partition: int
    producer_id: int
    producer_epoch: int
    committed: bool
    coordinator_epoch: int
    on_complete: Callable[[int], None]
    #: Not yet acknowledged.
    remaining: set[TopicPartition]
    #: Sent, answer awaited.
    in_flight: set[TopicPartition] = dataclasses.field(default_factory=set)
    #: Waiting out the retry backoff.
    backing_off: set[TopicPartition] = dataclasses.field(default_factory=set)
    abandoned: bool = False

    @property
    def ready(self) -> set[TopicPartition]:
        return self.remaining - self.in_flight - self.backing_off


@dataclasses.dataclass(slots=True, eq=False)
class MarkerRequest:
    """One WriteTxnMarkersRequest for `broker_id` and which pending partitions it carries."""

    broker_id: int
    request: WriteTxnMarkersRequest
    entries: list[tuple[PendingMarkers, TopicPartition]]


class TransactionMarkerManager:
    def __init__(self, timer: CoordinatorTimer, partition_leader: LeaderLookup, retry_backoff_ms: int) -> None:
        self._timer = timer
        self._partition_leader = partition_leader
        self._retry_backoff_ms = retry_backoff_ms
        self._pending: dict[str, PendingMarkers] = {}

    def pending(self, transactional_id: str) -> PendingMarkers | None:
        return self._pending.get(transactional_id)

    def add(self, transactional_id: str, txn_partition: int, producer_id: int, producer_epoch: int,
            committed: bool, coordinator_epoch: int, partitions: set[TopicPartition],
            on_complete: Callable[[int], None], now_ms: int) -> None:
        """Queue the markers of a prepared transaction (replacing any left from an earlier term)."""
        previous = self._pending.pop(transactional_id, None)
        if previous is not None:
            previous.abandoned = True
        pending = PendingMarkers(transactional_id, txn_partition, producer_id, producer_epoch, committed,
                                 coordinator_epoch, on_complete, set(partitions))
        self._pending[transactional_id] = pending
        self._maybe_complete(pending, now_ms)

    def remove_for_txn_partition(self, txn_partition: int) -> None:
        """The __transaction_state partition was unloaded: its transactions are another coordinator's now."""
        for pending in [p for p in self._pending.values() if p.txn_partition == txn_partition]:
            self._abandon(pending)

    def take_requests(self, now_ms: int) -> list[MarkerRequest]:
        """Every ready partition, grouped by leader into one request per broker."""
        by_broker: dict[int, list[tuple[PendingMarkers, TopicPartition]]] = defaultdict(list)
        for pending in list(self._pending.values()):
            for topic_partition in sorted(pending.ready):
                leader = self._partition_leader(topic_partition.topic, topic_partition.partition)
                if leader is None:
                    log.info("Skipping the marker of %s for %s: the partition no longer exists",
                             pending.transactional_id, topic_partition)
                    pending.remaining.discard(topic_partition)
                elif leader == NO_LEADER:
                    self._back_off(pending, topic_partition, now_ms)
                else:
                    pending.in_flight.add(topic_partition)
                    by_broker[leader].append((pending, topic_partition))
        for pending in [p for p in self._pending.values() if not p.remaining]:
            self._maybe_complete(pending, now_ms)  # its last partitions were of deleted topics
        requests = []
        for broker_id, entries in sorted(by_broker.items()):
            by_transaction: dict[PendingMarkers, dict[str, list[int]]] = {}
            for pending, topic_partition in entries:
                by_transaction.setdefault(pending, defaultdict(list))[topic_partition.topic].append(
                    topic_partition.partition)
            markers = [WriteTxnMarkersRequest.WritableTxnMarker(
                producer_id=pending.producer_id, producer_epoch=pending.producer_epoch,
                transaction_result=pending.committed, coordinator_epoch=pending.coordinator_epoch,
                topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=topic, partition_indexes=indexes)
                        for topic, indexes in topics.items()])
                for pending, topics in by_transaction.items()]
            requests.append(MarkerRequest(broker_id, WriteTxnMarkersRequest(markers=markers), entries))
        return requests

    def complete(self, sent: MarkerRequest, response: WriteTxnMarkersResponse | None, now_ms: int) -> None:
        """The answer to a request from `take_requests` (None: it could not be sent or answered)."""
        errors: dict[tuple[int, str, int], ErrorCode] = {}
        if response is not None:
            for marker in response.markers:
                for topic in marker.topics:
                    for result in topic.partitions:
                        errors[(marker.producer_id, topic.name, result.partition_index)] = \
                            ErrorCode(result.error_code)
        touched: dict[int, PendingMarkers] = {}
        for pending, topic_partition in sent.entries:
            pending.in_flight.discard(topic_partition)
            if pending.abandoned:
                continue
            error = errors.get((pending.producer_id, topic_partition.topic, topic_partition.partition),
                               ErrorCode.NETWORK_EXCEPTION)
            if error == ErrorCode.NONE:
                pending.remaining.discard(topic_partition)
            elif error in _FENCED:
                log.info("Stopping the markers of %s: %s answered %s", pending.transactional_id, topic_partition,
                         error.name)
                self._abandon(pending)
                continue
            elif error == ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT:
                log.warning("%s is in a message format without markers: skipping it", topic_partition)
                pending.remaining.discard(topic_partition)
            else:
                if error not in _RETRIABLE:
                    log.error("Marker of %s for %s failed with %s: retrying", pending.transactional_id,
                              topic_partition, error.name)
                self._back_off(pending, topic_partition, now_ms)
            touched[id(pending)] = pending
        for pending in touched.values():
            self._maybe_complete(pending, now_ms)

    def _forget(self, pending: PendingMarkers) -> None:
        if self._pending.get(pending.transactional_id) is pending:
            del self._pending[pending.transactional_id]
        self._timer.cancel(_retry_key(pending.transactional_id))

    def _abandon(self, pending: PendingMarkers) -> None:
        pending.abandoned = True
        self._forget(pending)

    def _back_off(self, pending: PendingMarkers, topic_partition: TopicPartition, now_ms: int) -> None:
        pending.backing_off.add(topic_partition)
        key = _retry_key(pending.transactional_id)
        if not self._timer.is_scheduled(key):
            self._timer.schedule(key, now_ms + self._retry_backoff_ms, lambda at_ms: pending.backing_off.clear())

    def _maybe_complete(self, pending: PendingMarkers, now_ms: int) -> None:
        if pending.remaining or self._pending.get(pending.transactional_id) is not pending:
            return
        self._forget(pending)
        pending.on_complete(now_ms)


def _retry_key(transactional_id: str) -> tuple[str, str]:
    return ("marker-retry", transactional_id)
