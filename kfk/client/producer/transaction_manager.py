"""The producer's idempotence and transaction state (Java's TransactionManager), sans I/O: the sender does the
network, this class decides what to send, and what an answer means.

Idempotence. With enable.idempotence the producer gets a producer id and epoch from InitProducerId, and numbers the
records of every partition from 0: a batch carries the sequence of its first record (base_sequence). The broker keeps
the last five batches' sequences per producer and partition, so a retried batch is recognised (acknowledged again,
not appended twice) and a gap is refused (OUT_OF_ORDER_SEQUENCE_NUMBER). The client side of that contract:
- sequences are assigned when a batch is first drained and never change on retry;
- at most max.in.flight.requests.per.connection (<= 5) batches of a partition are unacknowledged at once;
- a retried batch goes back in sequence order, so the broker sees sequences in order again;
- when a batch fails for good after sequences were spent (or the broker forgot the producer: UNKNOWN_PRODUCER_ID),
  the sequence numbering is broken; an idempotent producer then asks for a new producer id and restarts every
  partition at sequence 0, so later batches are accepted.

Transactions (transactional.id). The transactional id names the producer across restarts: InitProducerId with it,
sent to the transaction coordinator (FindCoordinator key_type 1), fences every older producer of the same id (its
epoch is now stale) and has the coordinator finish the transaction that one left open. Then, per transaction:
begin_transaction() (local only); each partition's first batch waits until AddPartitionsToTxn registered the
partition with the coordinator; send_offsets_to_transaction is AddOffsetsToTxn (to the transaction coordinator,
which adds the group's __consumer_offsets partition) followed by TxnOffsetCommit (to the group coordinator); EndTxn
commits or aborts once every batch is answered, and the coordinator writes the markers.
Transaction version 2 (KIP-890 part 2), when the cluster finalizes ``transaction.version`` >= 2: no
AddPartitionsToTxn (a transactional Produce adds its partition), and EndTxn v5 answers a new epoch (bumped at every
end, so a late write of an ended transaction is fenced); the sequences restart at 0 with it. The version is read when
no transaction is open, so it never changes in the middle of one.

States, as Java's: UNINITIALIZED -> INITIALIZING -> READY -> IN_TRANSACTION -> COMMITTING_TRANSACTION or
ABORTING_TRANSACTION -> READY; ABORTABLE_ERROR (the transaction failed: abort_transaction() is the way out) and
FATAL_ERROR (the producer is done: close it). Errors are sorted the same way:
- retriable: COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR (find the coordinator again, resend),
  COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS (the previous transaction's markers are still being written:
  resend after a short backoff), a lost connection or timeout;
- abortable (the error gets ``txn_requires_abort = True``): a record that could not be written, TOPIC/GROUP
  authorization, a consumer generation that moved on (TxnOffsetCommit), UNKNOWN_PRODUCER_ID, TRANSACTION_ABORTABLE;
- fatal (``fatal = True``): PRODUCER_FENCED, INVALID_PRODUCER_EPOCH (except for a batch of an older epoch, which is
  just failed), TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_TXN_STATE, UNSUPPORTED_VERSION and anything unknown.
The application thread calls the public methods, the network thread the rest; one lock guards the state.
"""

from __future__ import annotations

import enum
import heapq
import itertools
import threading
from collections.abc import Callable, Iterable, Mapping

from kfk.client.network_client import monotonic_ms
from kfk.client.offsets import COORDINATOR_TYPE_GROUP, COORDINATOR_TYPE_TRANSACTION
from kfk.client.response_errors import response_error
from kfk.client.structs import ConsumerGroupMetadata
from kfk.common.structs import OffsetAndMetadata, TopicPartition
from kfk.errors import (
    ErrorCode,
    GroupAuthorizationError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
)
from kfk.protocol.message import Message
from kfk.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from kfk.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from kfk.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from kfk.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kfk.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from kfk.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from kfk.records.batch import increment_sequence

__all__ = [
    "TransactionManager",
    "TransactionState",
    "TransactionalRequestResult",
    "TxnRequest",
    "TransactionAbortedError",
    "TRANSACTION_VERSION_FEATURE",
]

TRANSACTION_VERSION_FEATURE = "transaction.version"
ADD_PARTITIONS_TO_TXN_HIGHEST_VERSION = 3
"""v4+ batches several transactional ids and is for brokers only (KIP-890 part 1)."""
END_TXN_TV1_HIGHEST_VERSION = 4
END_TXN_TV2_VERSION = 5
CONCURRENT_TRANSACTIONS_BACKOFF_MS = 20
"""CONCURRENT_TRANSACTIONS means the markers of the previous transaction are still being written: a matter of
milliseconds, so the request is resent sooner than retry.backoff.ms (Java's client does the same)."""

# Where a pending request goes, in the order the sender takes them (Java's priorities).
_PRIORITY_INIT_PRODUCER_ID = 1
_PRIORITY_ADD_PARTITIONS_OR_OFFSETS = 2
_PRIORITY_END_TXN = 3

_COORDINATOR_ERRORS = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})
_RESEND_ERRORS = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS,
                            ErrorCode.REQUEST_TIMED_OUT, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                            ErrorCode.UNSTABLE_OFFSET_COMMIT})
_FENCED_ERRORS = frozenset({ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})
_ABORTABLE_ERRORS = frozenset({
    ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.GROUP_AUTHORIZATION_FAILED, ErrorCode.UNKNOWN_PRODUCER_ID,
    ErrorCode.INVALID_PRODUCER_ID_MAPPING, ErrorCode.TRANSACTION_ABORTABLE, ErrorCode.UNKNOWN_MEMBER_ID,
    ErrorCode.ILLEGAL_GENERATION, ErrorCode.FENCED_INSTANCE_ID, ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.OFFSET_METADATA_TOO_LARGE,
})


class TransactionAbortedError(KafkaError):
    """The record's batch was never sent because its transaction was aborted (Java's TransactionAbortedException;
    no wire code)."""


class TransactionState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


_State = TransactionState
_ALLOWED_SOURCES: dict[TransactionState, frozenset[TransactionState]] = {
    # INITIALIZING from ABORTING: the epoch bump that follows an abort after broken sequences (KIP-360).
    _State.INITIALIZING: frozenset({_State.UNINITIALIZED, _State.ABORTING_TRANSACTION}),
    _State.READY: frozenset({_State.INITIALIZING, _State.COMMITTING_TRANSACTION, _State.ABORTING_TRANSACTION}),
    _State.IN_TRANSACTION: frozenset({_State.READY}),
    _State.COMMITTING_TRANSACTION: frozenset({_State.IN_TRANSACTION}),
    _State.ABORTING_TRANSACTION: frozenset({_State.IN_TRANSACTION, _State.ABORTABLE_ERROR}),
    _State.ABORTABLE_ERROR: frozenset({_State.IN_TRANSACTION, _State.COMMITTING_TRANSACTION,
                                       _State.ABORTABLE_ERROR, _State.INITIALIZING}),
    _State.FATAL_ERROR: frozenset(TransactionState),
}


class TransactionalRequestResult:
    """What init_transactions / send_offsets_to_transaction / commit / abort wait on. A call that timed out can be
    made again: it waits on the same result instead of sending the request twice (as in Java)."""

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self.error: KafkaError | None = None
        self.retry_cause: KafkaError | None = None
        """Why the request is being retried, if it is: said in the timeout error (e.g. no coordinator found)."""
        self._event = threading.Event()
        self._callbacks: list[Callable[[], None]] = []

    @property
    def done(self) -> bool:
        return self._event.is_set()

    def complete(self, error: KafkaError | None = None) -> None:
        if not self._event.is_set():
            self.error = error
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
            for callback in callbacks:
                callback()

    def add_done_callback(self, callback: Callable[[], None]) -> None:
        """``callback()`` once done (at once if it is): how the asyncio producer awaits, on the loop that also
        completes the result, so no lock is needed."""
        if self._event.is_set():
            callback()
        else:
            self._callbacks.append(callback)

    def wait(self, timeout: float | None) -> None:
        """Block until done; raise the request's error, or KafkaTimeoutError after ``timeout`` seconds."""
        if not self._event.wait(timeout):
            cause = f" (retrying after: {self.retry_cause})" if self.retry_cause is not None else ""
            raise KafkaTimeoutError(f"{self.operation} did not complete within {timeout}s{cause}; it may be called "
                                    "again")
        if self.error is not None:
            raise self.error


class TxnRequest:
    """One request of the transactional protocol: what to send, to which coordinator (type and key), at which
    version (``version`` forced, else the highest both sides know up to ``highest``), and the reader of its answer."""

    __slots__ = ("priority", "message", "coordinator_type", "coordinator_key", "version", "highest", "result",
                 "handler", "retry_at_ms")

    def __init__(self, priority: int, message: Message, coordinator_type: int, coordinator_key: str,
                 result: TransactionalRequestResult, handler: Callable[[TxnRequest, Message], None], *,
                 version: int | None = None, highest: int | None = None) -> None:
        self.priority = priority
        self.message = message
        self.coordinator_type = coordinator_type
        self.coordinator_key = coordinator_key
        self.version = version
        self.highest = highest
        self.result = result
        self.handler = handler
        self.retry_at_ms = 0.0

    @property
    def is_end_txn(self) -> bool:
        return isinstance(self.message, EndTxnRequest)

    def __repr__(self) -> str:
        return f"TxnRequest({type(self.message).__name__} to coordinator type {self.coordinator_type})"


class TransactionManager:
    def __init__(self, max_in_flight: int, *, transactional_id: str | None = None,
                 transaction_timeout_ms: int = 60_000, retry_backoff_ms: float = 100) -> None:
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.max_in_flight = max_in_flight
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._next_sequence: dict[TopicPartition, int] = {}
        self._last_acked_sequence: dict[TopicPartition, int] = {}
        self._in_flight: dict[TopicPartition, int] = {}
        self.needs_reset = True
        # Transactions: everything below is guarded by _lock (the application thread and the network thread).
        self._lock = threading.RLock()
        self.state = TransactionState.UNINITIALIZED
        self.last_error: KafkaError | None = None
        self.transaction_version = 1
        self.partitions_in_transaction: set[TopicPartition] = set()
        self._pending_partitions: set[TopicPartition] = set()
        self._transaction_started = False
        self._epoch_bump_required = False
        self._pending: list[tuple[int, int, TxnRequest]] = []
        self._order = itertools.count()
        self._coordinators: dict[tuple[int, str], int] = {}
        self._init_result: TransactionalRequestResult | None = None
        self._end_result: TransactionalRequestResult | None = None

    # --- idempotence -------------------------------------------------------------------------------------------------

    @property
    def is_transactional(self) -> bool:
        return self.transactional_id is not None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID and not self.needs_reset

    def set_producer_id_and_epoch(self, producer_id: int, producer_epoch: int) -> None:
        """A new producer id or epoch: every partition's sequence starts again at 0."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self._next_sequence.clear()
        self._last_acked_sequence.clear()
        self.needs_reset = False

    def request_reset(self) -> None:
        """Sequences are broken: an idempotent producer gets a new producer id before sending more."""
        self.needs_reset = True

    def can_send(self, topic_partition: TopicPartition, is_retry: bool) -> bool:
        """Room for another unacknowledged batch of this partition (retries always go, they already count); a
        transactional batch also waits until its partition is part of the transaction."""
        if self.is_transactional and not self.is_partition_added(topic_partition):
            return False
        return is_retry or self._in_flight.get(topic_partition, 0) < self.max_in_flight

    def next_sequence(self, topic_partition: TopicPartition, record_count: int) -> int:
        """Assign the base sequence of a new batch and advance the partition's counter."""
        sequence = self._next_sequence.get(topic_partition, 0)
        self._next_sequence[topic_partition] = increment_sequence(sequence, record_count)
        return sequence

    def batch_sent(self, topic_partition: TopicPartition) -> None:
        self._in_flight[topic_partition] = self._in_flight.get(topic_partition, 0) + 1
        if self.is_transactional and self.transaction_version >= 2:
            with self._lock:
                self._transaction_started = True  # the Produce itself adds the partition (TV2)

    def batch_done(self, topic_partition: TopicPartition) -> None:
        count = self._in_flight.get(topic_partition, 0) - 1
        if count > 0:
            self._in_flight[topic_partition] = count
        else:
            self._in_flight.pop(topic_partition, None)

    def acknowledged(self, topic_partition: TopicPartition, last_sequence: int) -> None:
        previous = self._last_acked_sequence.get(topic_partition, -1)
        if last_sequence > previous:
            self._last_acked_sequence[topic_partition] = last_sequence

    def is_next_expected(self, topic_partition: TopicPartition, base_sequence: int) -> bool:
        """True when ``base_sequence`` directly follows the last acknowledged one: an OUT_OF_ORDER_SEQUENCE_NUMBER
        for such a batch is real (the broker lost state), not the echo of an earlier batch's failure."""
        return base_sequence == self._last_acked_sequence.get(topic_partition, -1) + 1

    # --- the application's calls -------------------------------------------------------------------------------------

    def initialize_transactions(self) -> TransactionalRequestResult:
        """init_transactions(): fence older producers of this transactional id and get a producer id and epoch."""
        with self._lock:
            self._require_transactional()
            if self._init_result is not None and not self._init_result.done:
                return self._init_result  # an earlier call timed out; wait for the same request
            self._fail_if_fatal()
            if self.state != TransactionState.UNINITIALIZED:
                raise InvalidTxnStateError(f"init_transactions() was already called (state {self.state.name})")
            self._transition(TransactionState.INITIALIZING)
            self.set_producer_id_and_epoch(NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            self._init_result = TransactionalRequestResult("init_transactions")
            self._enqueue(self._init_producer_id_request(self._init_result))
            return self._init_result

    def begin_transaction(self) -> None:
        """begin_transaction(): purely local (the coordinator hears of the transaction with its first partition or
        offsets); the transaction version stays what the cluster finalized up to now until the transaction ends."""
        with self._lock:
            self._require_transactional()
            self._fail_if_fatal()
            if self.state != TransactionState.READY:
                raise InvalidTxnStateError(f"begin_transaction() needs a ready producer (state {self.state.name}: "
                                           "call init_transactions() first, or end the open transaction)")
            self._transition(TransactionState.IN_TRANSACTION)

    def maybe_add_partition(self, topic_partition: TopicPartition) -> None:
        """send(): check that a transaction is open and note a partition it has not written to yet."""
        with self._lock:
            self.fail_if_not_ready_for_send()
            if not self.is_transactional:
                return
            if topic_partition not in self.partitions_in_transaction:
                self._pending_partitions.add(topic_partition)

    def fail_if_not_ready_for_send(self) -> None:
        with self._lock:
            if self.state in (TransactionState.ABORTABLE_ERROR, TransactionState.FATAL_ERROR):
                assert self.last_error is not None
                raise self.last_error
            if self.is_transactional and self.state != TransactionState.IN_TRANSACTION:
                raise InvalidTxnStateError(f"send() is only possible inside a transaction (state "
                                           f"{self.state.name}: call begin_transaction() first)")

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                                    group_metadata: ConsumerGroupMetadata) -> TransactionalRequestResult:
        """AddOffsetsToTxn, then (on success) TxnOffsetCommit to the group coordinator."""
        with self._lock:
            self._require_transactional()
            self.fail_if_not_ready_for_send()
            result = TransactionalRequestResult("send_offsets_to_transaction")
            request = AddOffsetsToTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                             producer_epoch=self.producer_epoch, group_id=group_metadata.group_id)

            def added(txn_request: TxnRequest, response: Message) -> None:
                assert isinstance(response, AddOffsetsToTxnResponse)
                code = response.error_code
                if code == ErrorCode.NONE:
                    self._transaction_started = True
                    self._enqueue(self._txn_offset_commit_request(dict(offsets), group_metadata, result))
                else:
                    self._handle_error(txn_request, code, f"AddOffsetsToTxn for group {group_metadata.group_id!r}",
                                       abortable_context=True)

            self._enqueue(TxnRequest(_PRIORITY_ADD_PARTITIONS_OR_OFFSETS, request, COORDINATOR_TYPE_TRANSACTION,
                                     self.transactional_id, result, added))
            return result

    def check_can_commit(self) -> None:
        """Raise what commit_transaction() would: before the producer flushes the transaction's records."""
        with self._lock:
            self._require_transactional()
            self._fail_if_fatal()
            if self.state == TransactionState.ABORTABLE_ERROR:
                assert self.last_error is not None
                raise self.last_error
            if self.state == TransactionState.COMMITTING_TRANSACTION and self._end_result is not None \
                    and not self._end_result.done:
                return  # an earlier commit_transaction() timed out: this call waits for the same EndTxn
            if self.state != TransactionState.IN_TRANSACTION:
                raise InvalidTxnStateError(f"commit_transaction() needs an open transaction (state "
                                           f"{self.state.name})")

    def begin_commit(self) -> TransactionalRequestResult:
        with self._lock:
            self.check_can_commit()
            if self.state == TransactionState.COMMITTING_TRANSACTION:
                assert self._end_result is not None
                return self._end_result
            self._transition(TransactionState.COMMITTING_TRANSACTION)
            return self._begin_end(committed=True)

    def begin_abort(self) -> TransactionalRequestResult:
        with self._lock:
            self._require_transactional()
            self._fail_if_fatal()
            if self._end_result is not None and not self._end_result.done:
                if self.state in (TransactionState.ABORTING_TRANSACTION, TransactionState.INITIALIZING):
                    return self._end_result
            if self.state not in (TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR):
                raise InvalidTxnStateError(f"abort_transaction() needs an open or failed transaction (state "
                                           f"{self.state.name})")
            self._transition(TransactionState.ABORTING_TRANSACTION)
            # Batches of partitions not added yet are aborted unsent: no AddPartitionsToTxn for them.
            self._pending_partitions.clear()
            return self._begin_end(committed=False)

    def _begin_end(self, committed: bool) -> TransactionalRequestResult:
        """Queue EndTxn: it goes once every batch is answered and every earlier request of the transaction is done
        (next_request), or completes without a request when nothing of the transaction reached the coordinator."""
        result = self._end_result = TransactionalRequestResult(
            "commit_transaction" if committed else "abort_transaction")
        tv2 = self.transaction_version >= 2
        request = EndTxnRequest(transactional_id=self.transactional_id, producer_id=self.producer_id,
                                producer_epoch=self.producer_epoch, committed=committed)
        self._enqueue(TxnRequest(_PRIORITY_END_TXN, request, COORDINATOR_TYPE_TRANSACTION, self.transactional_id,
                                 result, self._handle_end_txn, version=END_TXN_TV2_VERSION if tv2 else None,
                                 highest=None if tv2 else END_TXN_TV1_HIGHEST_VERSION))
        return result

    # --- the network thread's calls ----------------------------------------------------------------------------------

    @property
    def is_aborting(self) -> bool:
        return self.state == TransactionState.ABORTING_TRANSACTION

    @property
    def has_fatal_error(self) -> bool:
        return self.state == TransactionState.FATAL_ERROR

    @property
    def has_abortable_error(self) -> bool:
        return self.state == TransactionState.ABORTABLE_ERROR

    def update_transaction_version(self, level: int) -> None:
        """The cluster's finalized transaction.version, taken only while no transaction is open."""
        with self._lock:
            if self.state in (TransactionState.UNINITIALIZED, TransactionState.INITIALIZING, TransactionState.READY):
                self.transaction_version = level

    def is_partition_added(self, topic_partition: TopicPartition) -> bool:
        if self.transaction_version >= 2:
            return True
        with self._lock:
            return topic_partition in self.partitions_in_transaction

    def next_request(self, has_incomplete_batches: bool, now_ms: float | None = None) -> TxnRequest | None:
        """The request to send now, if any: the sender sends one at a time and reports its answer, so requests
        go in priority order (InitProducerId, AddPartitionsToTxn / AddOffsetsToTxn / TxnOffsetCommit, EndTxn)."""
        now = monotonic_ms() if now_ms is None else now_ms
        with self._lock:
            if self._pending_partitions and self.transaction_version < 2 and self.state in (
                    TransactionState.IN_TRANSACTION, TransactionState.COMMITTING_TRANSACTION):
                self._enqueue(self._add_partitions_request(self._pending_partitions))
                self._pending_partitions = set()
            while self._pending:
                request = self._pending[0][2]
                failed = self.state in (TransactionState.ABORTABLE_ERROR, TransactionState.FATAL_ERROR)
                if failed and not self._goes_despite_error(request):
                    heapq.heappop(self._pending)  # the transaction failed: its commit or offsets cannot go
                    assert self.last_error is not None
                    request.result.complete(self.last_error)
                    continue
                if request.is_end_txn:
                    if has_incomplete_batches:
                        return None  # EndTxn waits until every batch of the transaction is answered
                    if not self._transaction_started:
                        heapq.heappop(self._pending)  # nothing reached the coordinator: nothing to end there
                        self._complete_transaction(request.result)
                        continue
                if request.retry_at_ms > now:
                    return None
                heapq.heappop(self._pending)
                return request
            return None

    @staticmethod
    def _goes_despite_error(request: TxnRequest) -> bool:
        """An abort's EndTxn and the epoch bump's InitProducerId are what an abortable error leads to."""
        message = request.message
        return isinstance(message, InitProducerIdRequest) or (isinstance(message, EndTxnRequest)
                                                              and not message.committed)

    def retry_delay_ms(self, now_ms: float | None = None) -> float | None:
        """How long until the first pending request may go (None: none is pending)."""
        now = monotonic_ms() if now_ms is None else now_ms
        with self._lock:
            if not self._pending:
                return None
            return max(self._pending[0][2].retry_at_ms - now, 0.0)

    def coordinator(self, coordinator_type: int, key: str) -> int | None:
        return self._coordinators.get((coordinator_type, key))

    def set_coordinator(self, coordinator_type: int, key: str, node_id: int) -> None:
        self._coordinators[(coordinator_type, key)] = node_id

    def handle_response(self, request: TxnRequest, response: Message) -> None:
        with self._lock:
            if self.state == TransactionState.FATAL_ERROR:
                assert self.last_error is not None
                request.result.complete(self.last_error)  # an answer that arrived after the producer was done
                return
            request.handler(request, response)

    def request_failed(self, request: TxnRequest, error: KafkaError) -> None:
        """The request got no answer (a lost connection, a timeout) or its coordinator could not be found."""
        with self._lock:
            if error.retriable:
                self._coordinators.pop((request.coordinator_type, request.coordinator_key), None)
                request.result.retry_cause = error
                self._reenqueue(request, self.retry_backoff_ms)
            elif isinstance(error, GroupAuthorizationError):
                self._abortable_error(error)
                request.result.complete(error)
            else:
                self._fatal_error(error)

    def handle_failed_batch(self, error: KafkaError, batch_epoch: int, sequenced: bool) -> None:
        """A batch of the transaction failed for good: the transaction cannot commit (or the producer is fenced).
        ``sequenced``: the batch had spent sequence numbers, so the partition's numbering now has a hole."""
        with self._lock:
            if sequenced and self.transaction_version < 2:
                self._epoch_bump_required = True  # bump the epoch after the abort, restarting sequences (KIP-360)
            if isinstance(error, TransactionAbortedError) or error is self.last_error \
                    or self.state == TransactionState.FATAL_ERROR:
                return  # nothing new: the abort, or the error that failed the transaction already
            if isinstance(error, (ProducerFencedError, InvalidProducerEpochError)):
                if batch_epoch < self.producer_epoch or self.state == TransactionState.ABORTING_TRANSACTION:
                    return  # a batch of an ended epoch or of the transaction being aborted: nothing new
                self._fatal_error(ProducerFencedError(f"the producer was fenced: {error}"))
                return
            if error.error_code in (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED):
                self._fatal_error(error)
                return
            if self.state in (TransactionState.IN_TRANSACTION, TransactionState.COMMITTING_TRANSACTION,
                              TransactionState.ABORTABLE_ERROR):
                self._abortable_error(error)

    # --- request building --------------------------------------------------------------------------------------------

    def _init_producer_id_request(self, result: TransactionalRequestResult) -> TxnRequest:
        """InitProducerId with the transactional id; with the current id and epoch when bumping the epoch after an
        abort (KIP-360), so the coordinator knows this is the same producer, not a new one fencing it."""
        request = InitProducerIdRequest(transactional_id=self.transactional_id,
                                        transaction_timeout_ms=self.transaction_timeout_ms,
                                        producer_id=self.producer_id, producer_epoch=self.producer_epoch)
        return TxnRequest(_PRIORITY_INIT_PRODUCER_ID, request, COORDINATOR_TYPE_TRANSACTION, self.transactional_id,
                          result, self._handle_init_producer_id)

    def _add_partitions_request(self, partitions: Iterable[TopicPartition]) -> TxnRequest:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.transactional_id, v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.producer_epoch,
            v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=name,
                                                                                   partitions=sorted(indexes))
                                 for name, indexes in sorted(by_topic.items())])
        return TxnRequest(_PRIORITY_ADD_PARTITIONS_OR_OFFSETS, request, COORDINATOR_TYPE_TRANSACTION,
                          self.transactional_id, TransactionalRequestResult("AddPartitionsToTxn"),
                          self._handle_add_partitions, highest=ADD_PARTITIONS_TO_TXN_HIGHEST_VERSION)

    def _txn_offset_commit_request(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                                   group_metadata: ConsumerGroupMetadata,
                                   result: TransactionalRequestResult) -> TxnRequest:
        by_topic: dict[str, list[TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition]] = {}
        for tp, offset in sorted(offsets.items()):
            by_topic.setdefault(tp.topic, []).append(TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                partition_index=tp.partition, committed_offset=offset.offset,
                committed_leader_epoch=offset.leader_epoch, committed_metadata=offset.metadata))
        request = TxnOffsetCommitRequest(
            transactional_id=self.transactional_id, group_id=group_metadata.group_id, producer_id=self.producer_id,
            producer_epoch=self.producer_epoch, generation_id_or_member_epoch=group_metadata.generation_id,
            member_id=group_metadata.member_id, group_instance_id=group_metadata.group_instance_id,
            topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=name, partitions=partitions)
                    for name, partitions in by_topic.items()])

        def committed(txn_request: TxnRequest, response: Message) -> None:
            assert isinstance(response, TxnOffsetCommitResponse)
            failed: dict[TopicPartition, int] = {}
            for topic in response.topics:
                for partition in topic.partitions:
                    if partition.error_code != ErrorCode.NONE:
                        failed[TopicPartition(topic.name, partition.partition_index)] = partition.error_code
            if not failed:
                result.complete()
                return
            final = [code for code in failed.values() if code not in _COORDINATOR_ERRORS | _RESEND_ERRORS]
            if not final:
                retry = self._txn_offset_commit_request({tp: offsets[tp] for tp in failed if tp in offsets},
                                                        group_metadata, result)
                if any(code in _COORDINATOR_ERRORS for code in failed.values()):
                    self._coordinators.pop((COORDINATOR_TYPE_GROUP, group_metadata.group_id), None)
                self._reenqueue(retry, self.retry_backoff_ms)
                return
            self._handle_error(txn_request, final[0], f"TxnOffsetCommit for group {group_metadata.group_id!r}",
                               abortable_context=True)

        return TxnRequest(_PRIORITY_ADD_PARTITIONS_OR_OFFSETS, request, COORDINATOR_TYPE_GROUP,
                          group_metadata.group_id, result, committed)

    # --- response handling -------------------------------------------------------------------------------------------

    def _handle_init_producer_id(self, request: TxnRequest, response: Message) -> None:
        assert isinstance(response, InitProducerIdResponse)
        if response.error_code != ErrorCode.NONE:
            self._handle_error(request, response.error_code, "InitProducerId")
            return
        self.set_producer_id_and_epoch(response.producer_id, response.producer_epoch)
        self._epoch_bump_required = False
        self._transition(TransactionState.READY)
        request.result.complete()

    def _handle_add_partitions(self, request: TxnRequest, response: Message) -> None:
        assert isinstance(response, AddPartitionsToTxnResponse) and isinstance(request.message,
                                                                                 AddPartitionsToTxnRequest)
        asked = {TopicPartition(topic.name, partition) for topic in request.message.v3_and_below_topics
                 for partition in topic.partitions}
        errors: dict[TopicPartition, int] = {}
        if response.error_code != ErrorCode.NONE:
            errors = dict.fromkeys(asked, response.error_code)
        for topic in response.results_by_topic_v3_and_below:
            for partition in topic.results_by_partition:
                if partition.partition_error_code != ErrorCode.NONE:
                    errors[TopicPartition(topic.name, partition.partition_index)] = partition.partition_error_code
        real = {tp: code for tp, code in errors.items() if code != ErrorCode.OPERATION_NOT_ATTEMPTED}
        if not real:
            if errors:  # only OPERATION_NOT_ATTEMPTED: should not happen; ask again
                self._reenqueue(request, self.retry_backoff_ms)
                return
            self.partitions_in_transaction |= asked
            self._transaction_started = True
            request.result.complete()
            return
        code = next(iter(real.values()))
        self._handle_error(request, code, f"AddPartitionsToTxn for {', '.join(sorted(map(str, real)))}",
                           abortable_context=True)

    def _handle_end_txn(self, request: TxnRequest, response: Message) -> None:
        assert isinstance(response, EndTxnResponse)
        if response.error_code != ErrorCode.NONE:
            # A commit that cannot complete can still be aborted; an abort that cannot complete leaves nothing.
            self._handle_error(request, response.error_code, "EndTxn",
                               abortable_context=self.state == TransactionState.COMMITTING_TRANSACTION)
            return
        if self.transaction_version >= 2 and response.producer_id >= 0:
            self.set_producer_id_and_epoch(response.producer_id, response.producer_epoch)  # the epoch bump (TV2)
        self._complete_transaction(request.result)

    def _complete_transaction(self, result: TransactionalRequestResult) -> None:
        self.partitions_in_transaction.clear()
        self._pending_partitions.clear()
        self._transaction_started = False
        self.last_error = None
        if self._epoch_bump_required and self.transaction_version < 2 and self.is_aborting:
            # The aborted transaction broke the sequences: bump the epoch before the next one (KIP-360). The
            # abort completes with it.
            self._transition(TransactionState.INITIALIZING)
            self._enqueue(self._init_producer_id_request(result))
            return
        self._epoch_bump_required = False
        self._transition(TransactionState.READY)
        result.complete()

    def _handle_error(self, request: TxnRequest, code: int, context: str, abortable_context: bool = False) -> None:
        """Sort an error code into retry, abortable or fatal (see the module docstring)."""
        if code in _COORDINATOR_ERRORS:
            self._coordinators.pop((request.coordinator_type, request.coordinator_key), None)
            self._reenqueue(request, self.retry_backoff_ms)
            return
        if code == ErrorCode.CONCURRENT_TRANSACTIONS:
            self._reenqueue(request, CONCURRENT_TRANSACTIONS_BACKOFF_MS)
            return
        if code in _RESEND_ERRORS:
            self._reenqueue(request, self.retry_backoff_ms)
            return
        error = response_error(code, f"{context} of transactional id {self.transactional_id!r}")
        if code in _FENCED_ERRORS:
            error = ProducerFencedError(f"{error} (another producer with the same transactional.id has been "
                                        "started, or the transaction timed out)")
            self._fatal_error(error)
            return
        if abortable_context and code in _ABORTABLE_ERRORS:
            self._abortable_error(error)
            request.result.complete(error)
            return
        self._fatal_error(error)

    def _abortable_error(self, error: KafkaError) -> None:
        if self.state == TransactionState.FATAL_ERROR:
            return
        error.txn_requires_abort = True
        if self.state == TransactionState.ABORTING_TRANSACTION:
            return  # already on the way out
        self.last_error = error
        self._transition(TransactionState.ABORTABLE_ERROR)

    def _fatal_error(self, error: KafkaError) -> None:
        error.fatal = True
        self.last_error = error
        self._transition(TransactionState.FATAL_ERROR)
        for _, _, pending in self._pending:
            pending.result.complete(error)
        self._pending.clear()
        for result in (self._init_result, self._end_result):
            if result is not None:
                result.complete(error)

    # --- helpers -----------------------------------------------------------------------------------------------------

    def _transition(self, target: TransactionState) -> None:
        if self.state not in _ALLOWED_SOURCES[target]:
            raise InvalidTxnStateError(f"transactional id {self.transactional_id!r}: invalid transition from "
                                       f"{self.state.name} to {target.name}")
        self.state = target

    def _enqueue(self, request: TxnRequest) -> None:
        heapq.heappush(self._pending, (request.priority, next(self._order), request))

    def _reenqueue(self, request: TxnRequest, backoff_ms: float) -> None:
        request.retry_at_ms = monotonic_ms() + backoff_ms
        self._enqueue(request)

    def _require_transactional(self) -> None:
        if not self.is_transactional:
            raise InvalidTxnStateError("transactions need a transactional.id in the producer's configuration")

    def _fail_if_fatal(self) -> None:
        if self.state == TransactionState.FATAL_ERROR:
            assert self.last_error is not None
            raise self.last_error
