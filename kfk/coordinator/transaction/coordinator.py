"""TransactionCoordinator: the transaction coordinator's whole state machine over every __transaction_state
partition this broker leads (Kafka's TransactionCoordinator, without the I/O).

Time in, deadlines out (DESIGN.md decision 9): every call takes `now_ms`; the periodic jobs (abort transactions past
their timeout, expire idle transactional ids) and the retries live in one CoordinatorTimer the owner drives with
`poll(now_ms)` at `next_deadline_ms()`. What must be durable goes out as TransactionWrites (`take_writes`,
`complete_write`); markers go out as MarkerRequests (`take_marker_requests`, `complete_markers`). Answers go out
through the `respond` callables passed in, once the write they depend on is committed. A test drives all of it with
a manual clock and real logs; kfk.coordinator.transaction.service drives it with asyncio and the broker.

The life of a transaction:
  InitProducerId  -> Empty (epoch bumped, or a new producer id once the epochs are used up); an Ongoing
                     transaction of an earlier producer instance is first aborted with a fenced epoch and the
                     client is told CONCURRENT_TRANSACTIONS (it retries once the abort completed)
  AddPartitions / AddOffsets -> Ongoing (the partitions are recorded before the producer writes to them)
  EndTxn          -> PrepareCommit / PrepareAbort, answered once durable; markers go to every partition
  markers written -> CompleteCommit / CompleteAbort
A transaction open longer than its timeout is aborted the same way as a fenced one; an id idle for
transactional.id.expiration.ms is removed with a tombstone.

Producer ids come from `generate_producer_id()` (the broker's block of ids; it may raise a KafkaError). Every call
uses at most one.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable

from kfk.common.internal_topics import GROUP_METADATA_TOPIC_NAME
from kfk.common.structs import TopicPartition
from kfk.coordinator.partitioning import partition_for
from kfk.coordinator.timer import CoordinatorTimer
from kfk.coordinator.transaction.config import TransactionCoordinatorConfig
from kfk.coordinator.transaction.markers import (
    LeaderLookup,
    MarkerRequest,
    TransactionMarkerManager,
)
from kfk.coordinator.transaction.metadata import (
    MAX_PRODUCER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    TRANSACTION_VERSION_EPOCH_BUMP,
    IllegalTransitionError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from kfk.coordinator.transaction.state_manager import (
    CoordinatorWrite,
    TransactionStateManager,
)
from kfk.errors import ErrorCode, KafkaError
from kfk.protocol.messages.describe_transactions import DescribeTransactionsResponse
from kfk.protocol.messages.list_transactions import ListTransactionsResponse
from kfk.protocol.messages.write_txn_markers import WriteTxnMarkersResponse

log = logging.getLogger("kfk.coordinator.transaction")

_T = TransactionState
_ABORT_TIMED_OUT_KEY = ("abort-timed-out-transactions",)
_EXPIRE_IDS_KEY = ("expire-transactional-ids",)


@dataclasses.dataclass(frozen=True, slots=True)
class ProducerIdResult:
    """InitProducerId's answer, and EndTxn's (v5+ gives the producer id and epoch to use next)."""

    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


ProducerIdResponder = Callable[[ProducerIdResult], None]
ErrorResponder = Callable[[ErrorCode], None]


class TransactionCoordinator:
    def __init__(self, config: TransactionCoordinatorConfig, generate_producer_id: Callable[[], int],
                 partition_leader: LeaderLookup) -> None:
        self.config = config
        self.timer = CoordinatorTimer()
        self.state = TransactionStateManager(config)
        self.markers = TransactionMarkerManager(self.timer, partition_leader, config.retry_backoff_ms)
        self._generate_producer_id = generate_producer_id

    # -- ownership ---------------------------------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return self.state.partition_for(transactional_id)

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        self.markers.remove_for_txn_partition(partition)
        self.state.begin_loading(partition, coordinator_epoch)

    def replay(self, partition: int, key: bytes | memoryview | None, value: bytes | memoryview | None) -> None:
        self.state.replay(partition, key, value)

    def complete_loading(self, partition: int, now_ms: int) -> None:
        """Serve the partition; a transaction it left prepared gets its markers (again) and is completed."""
        coordinator_epoch = self.state.coordinator_epoch(partition)
        for metadata in self.state.complete_loading(partition):
            assert coordinator_epoch is not None
            log.info("Completing %s of %s after loading %d", metadata.state.state_name, metadata.transactional_id,
                     partition)
            self._send_markers(metadata, coordinator_epoch, now_ms)
        if not self.timer.is_scheduled(_ABORT_TIMED_OUT_KEY):
            self.timer.schedule(_ABORT_TIMED_OUT_KEY, now_ms + self.config.abort_timed_out_transactions_interval_ms,
                                self._abort_timed_out_transactions)
        if not self.timer.is_scheduled(_EXPIRE_IDS_KEY):
            self.timer.schedule(_EXPIRE_IDS_KEY, now_ms + self.config.remove_expired_transactional_ids_interval_ms,
                                self._expire_transactional_ids)

    def unload(self, partition: int) -> None:
        """This broker no longer leads the partition: its ids and unsent markers are the next coordinator's."""
        self.markers.remove_for_txn_partition(partition)
        self.state.unload(partition)

    # -- writes, markers and time ------------------------------------------------------------------------------------

    def take_writes(self) -> list[CoordinatorWrite]:
        return self.state.take_writes()

    def complete_write(self, write: CoordinatorWrite, error: ErrorCode, now_ms: int) -> None:
        write.on_complete(error, now_ms)

    def take_marker_requests(self, now_ms: int) -> list[MarkerRequest]:
        return self.markers.take_requests(now_ms)

    def complete_markers(self, sent: MarkerRequest, response: WriteTxnMarkersResponse | None, now_ms: int) -> None:
        self.markers.complete(sent, response, now_ms)

    def poll(self, now_ms: int) -> int | None:
        """Run what is due at `now_ms`; returns the next deadline (None: nothing scheduled)."""
        self.timer.poll(now_ms)
        return self.timer.next_deadline_ms()

    def next_deadline_ms(self) -> int | None:
        return self.timer.next_deadline_ms()

    def _new_producer_id(self) -> int | ErrorCode:
        try:
            return self._generate_producer_id()
        except KafkaError as error:
            return error.error_code

    # -- InitProducerId ----------------------------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str | None, txn_timeout_ms: int, producer_id: int,
                         producer_epoch: int, now_ms: int, respond: ProducerIdResponder) -> None:
        """InitProducerId. `producer_id`/`producer_epoch` (-1/-1 if absent) are a KIP-360 client's current ones."""
        if transactional_id is None:
            # An idempotent producer: a fresh id at epoch 0, nothing to remember.
            new_id = self._new_producer_id()
            respond(ProducerIdResult(new_id) if isinstance(new_id, ErrorCode)
                    else ProducerIdResult(ErrorCode.NONE, new_id, 0))
            return
        if not transactional_id:
            respond(ProducerIdResult(ErrorCode.INVALID_REQUEST))
            return
        if not self.state.validate_transaction_timeout_ms(txn_timeout_ms):
            respond(ProducerIdResult(ErrorCode.INVALID_TRANSACTION_TIMEOUT))
            return
        error, metadata = self.state.get(transactional_id)
        if error != ErrorCode.NONE:
            respond(ProducerIdResult(error))
            return
        if metadata is None:
            new_id = self._new_producer_id()
            if isinstance(new_id, ErrorCode):
                respond(ProducerIdResult(new_id))
                return
            metadata = self.state.put_if_absent(TransactionMetadata(
                transactional_id=transactional_id, producer_id=new_id, txn_timeout_ms=txn_timeout_ms,
                state=_T.EMPTY, txn_last_update_timestamp=now_ms))
        expected = None if producer_id == NO_PRODUCER_ID else (producer_id, producer_epoch)
        if metadata.pending_transition_in_progress:
            respond(ProducerIdResult(ErrorCode.CONCURRENT_TRANSACTIONS))
            return
        if expected is not None and not _is_valid_producer_id(metadata, *expected):
            respond(ProducerIdResult(ErrorCode.PRODUCER_FENCED))
            return
        if metadata.state in (_T.PREPARE_COMMIT, _T.PREPARE_ABORT):
            respond(ProducerIdResult(ErrorCode.CONCURRENT_TRANSACTIONS))
            return
        if metadata.state is _T.ONGOING:
            # The producer of the open transaction is fenced and its transaction aborted; this client retries
            # (CONCURRENT_TRANSACTIONS) and then gets the next epoch.
            self._fence_and_abort(metadata, now_ms, lambda error: respond(ProducerIdResult(
                ErrorCode.CONCURRENT_TRANSACTIONS if error == ErrorCode.NONE else error)))
            return
        if metadata.state not in (_T.EMPTY, _T.COMPLETE_COMMIT, _T.COMPLETE_ABORT):
            raise IllegalTransitionError(f"{transactional_id} found in {metadata.state.state_name}")
        if metadata.is_producer_epoch_exhausted and (expected is None or expected[1] == metadata.producer_epoch):
            new_id = self._new_producer_id()
            if isinstance(new_id, ErrorCode):
                respond(ProducerIdResult(new_id))
                return
            transit = metadata.prepare_producer_id_rotation(new_id, txn_timeout_ms, now_ms, expected is not None)
        else:
            prepared = metadata.prepare_increment_producer_epoch(
                txn_timeout_ms, None if expected is None else expected[1], now_ms)
            if prepared is None:
                respond(ProducerIdResult(ErrorCode.PRODUCER_FENCED))
                return
            transit = prepared

        def on_written(error: ErrorCode, at_ms: int) -> None:
            if error != ErrorCode.NONE:
                respond(ProducerIdResult(error))
                return
            log.info("Initialized %s with producer id %d epoch %d", transactional_id, transit.producer_id,
                     transit.producer_epoch)
            respond(ProducerIdResult(ErrorCode.NONE, transit.producer_id, transit.producer_epoch))

        self.state.append_transaction_to_log(metadata, transit, on_written)

    def _fence_and_abort(self, metadata: TransactionMetadata, now_ms: int, on_done: ErrorResponder) -> None:
        """Abort an ongoing transaction under a bumped epoch its producer never had (PrepareEpochFence), so
        nothing that producer still sends can join the transaction or a later one."""
        partition = self.partition_for(metadata.transactional_id)
        coordinator_epoch = self.state.coordinator_epoch(partition)
        assert coordinator_epoch is not None
        metadata.fence_producer_epoch()
        # TV2 bumps once more when it aborts, unless the fence took the very last epoch.
        transaction_version = metadata.client_transaction_version \
            if metadata.producer_epoch < MAX_PRODUCER_EPOCH else 0
        transit = metadata.prepare_abort_or_commit(_T.PREPARE_ABORT, transaction_version, NO_PRODUCER_ID, now_ms,
                                                   no_partition_added=False)

        def on_written(error: ErrorCode, at_ms: int) -> None:
            if error == ErrorCode.NONE:
                self._send_markers(metadata, coordinator_epoch, at_ms)
            elif self._owns(metadata, coordinator_epoch):
                # The epoch stays bumped in memory (the old producer stays fenced); the retry must not bump again.
                metadata.has_failed_epoch_fence = True
            on_done(error)

        self.state.append_transaction_to_log(metadata, transit, on_written)

    # -- AddPartitionsToTxn / AddOffsetsToTxn ------------------------------------------------------------------------

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition], client_transaction_version: int, now_ms: int,
                       respond: ErrorResponder) -> None:
        """AddPartitionsToTxn from a client (v0-v3), or from a partition leader adding a TV2 producer's partition
        implicitly (v4+ without verify_only): one error for all the partitions."""
        partitions = set(partitions)
        error, metadata = self._producer_metadata(transactional_id, producer_id, producer_epoch)
        if error == ErrorCode.NONE:
            assert metadata is not None
            if metadata.pending_transition_in_progress or metadata.state in (_T.PREPARE_COMMIT, _T.PREPARE_ABORT):
                error = ErrorCode.CONCURRENT_TRANSACTIONS
            elif metadata.state is _T.ONGOING and partitions <= metadata.topic_partitions:
                pass  # already recorded: nothing to write
            else:
                transit = metadata.prepare_add_partitions(partitions, now_ms, client_transaction_version)
                self.state.append_transaction_to_log(metadata, transit, lambda error, at_ms: respond(error))
                return
        respond(error)

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str, now_ms: int,
                    respond: ErrorResponder) -> None:
        """AddOffsetsToTxn: the group's __consumer_offsets partition joins the transaction (so the commit marker
        makes the transactional offset commits visible)."""
        offsets_partition = TopicPartition(GROUP_METADATA_TOPIC_NAME,
                                           partition_for(group_id, self.config.offsets_topic_num_partitions))
        self.add_partitions(transactional_id, producer_id, producer_epoch, [offsets_partition], 0, now_ms, respond)

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """AddPartitionsToTxn v4+ verify_only, from a partition leader before it appends a transactional batch
        (KIP-890): is this producer's transaction open with the partition in it? Nothing is written."""
        partitions = list(partitions)
        error, metadata = self._producer_metadata(transactional_id, producer_id, producer_epoch)
        if error == ErrorCode.NONE:
            assert metadata is not None
            if metadata.state in (_T.PREPARE_COMMIT, _T.PREPARE_ABORT):
                error = ErrorCode.CONCURRENT_TRANSACTIONS
            else:
                return {partition: ErrorCode.NONE if partition in metadata.topic_partitions
                        else ErrorCode.TRANSACTION_ABORTABLE for partition in partitions}
        return dict.fromkeys(partitions, error)

    def _producer_metadata(self, transactional_id: str, producer_id: int,
                           producer_epoch: int) -> tuple[ErrorCode, TransactionMetadata | None]:
        """The id's metadata if it belongs to this producer id and epoch, else the error to answer."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, None
        error, metadata = self.state.get(transactional_id)
        if error != ErrorCode.NONE:
            return error, None
        if metadata is None or metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED, None
        return ErrorCode.NONE, metadata

    # -- EndTxn ------------------------------------------------------------------------------------------------------

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                client_transaction_version: int, now_ms: int, respond: ProducerIdResponder) -> None:
        """EndTxn. A TV2 client (EndTxn v5+) ends every transaction with an epoch bump and learns the producer id
        and epoch to continue with; it may also abort when nothing is open, and retry an end whose answer it lost
        (its epoch is then one behind)."""
        if not transactional_id:
            respond(ProducerIdResult(ErrorCode.INVALID_REQUEST))
            return
        error, metadata = self.state.get(transactional_id)
        if error == ErrorCode.NONE and metadata is None:
            error = ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if error != ErrorCode.NONE:
            respond(ProducerIdResult(error))
            return
        assert metadata is not None
        if client_transaction_version >= TRANSACTION_VERSION_EPOCH_BUMP:
            outcome = self._end_txn_v2(metadata, producer_id, producer_epoch, committed)
        else:
            outcome = self._end_txn_v1(metadata, producer_id, producer_epoch, committed)
        if isinstance(outcome, ErrorCode):
            if outcome == ErrorCode.NONE:
                respond(ProducerIdResult(ErrorCode.NONE, metadata.producer_id, metadata.producer_epoch))
            else:
                respond(ProducerIdResult(outcome))
            return
        next_state, no_partition_added = outcome
        next_producer_id = NO_PRODUCER_ID
        if client_transaction_version >= TRANSACTION_VERSION_EPOCH_BUMP and metadata.is_producer_epoch_exhausted:
            # The bump uses the last epoch of this producer id: the transaction completes under a new one.
            new_id = self._new_producer_id()
            if isinstance(new_id, ErrorCode):
                respond(ProducerIdResult(new_id))
                return
            next_producer_id = new_id
        partition = self.partition_for(metadata.transactional_id)
        coordinator_epoch = self.state.coordinator_epoch(partition)
        assert coordinator_epoch is not None
        transit = metadata.prepare_abort_or_commit(next_state, client_transaction_version, next_producer_id, now_ms,
                                                   no_partition_added)

        def on_written(error: ErrorCode, at_ms: int) -> None:
            if error != ErrorCode.NONE:
                respond(ProducerIdResult(error))
                return
            complete = self._send_markers(metadata, coordinator_epoch, at_ms)
            # The producer id and epoch the producer continues with (after an epoch overflow: the next id at 0).
            respond(ProducerIdResult(ErrorCode.NONE, complete.producer_id, complete.producer_epoch))

        self.state.append_transaction_to_log(metadata, transit, on_written)

    @staticmethod
    def _end_txn_v1(metadata: TransactionMetadata, producer_id: int, producer_epoch: int,
                    committed: bool) -> ErrorCode | tuple[TransactionState, bool]:
        """The error to answer (NONE: already done), or the state to prepare and whether no partition was added."""
        if metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch != producer_epoch:
            return ErrorCode.PRODUCER_FENCED
        if metadata.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return _end_txn_by_state(metadata.state, committed, is_retry=True, abort_when_idle=False)

    @staticmethod
    def _end_txn_v2(metadata: TransactionMetadata, producer_id: int, producer_epoch: int,
                    committed: bool) -> ErrorCode | tuple[TransactionState, bool]:
        # A retry after the bump went through: the client still has the epoch before it (after an overflow: the
        # last epoch of the previous producer id).
        retry_on_overflow = metadata.previous_producer_id == producer_id \
            and producer_epoch == MAX_PRODUCER_EPOCH - 1 and metadata.producer_epoch == 0
        retry_on_epoch_bump = metadata.producer_epoch == producer_epoch + 1
        state = metadata.state
        if state in (_T.PREPARE_COMMIT, _T.PREPARE_ABORT):
            valid_epoch = retry_on_epoch_bump
        elif state in (_T.COMPLETE_COMMIT, _T.COMPLETE_ABORT):
            valid_epoch = retry_on_epoch_bump or retry_on_overflow or producer_epoch == metadata.producer_epoch
        else:
            valid_epoch = producer_epoch == metadata.producer_epoch
        if metadata.producer_id != producer_id and not retry_on_overflow:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if not valid_epoch:
            return ErrorCode.PRODUCER_FENCED
        if metadata.pending_transition_in_progress:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return _end_txn_by_state(state, committed, is_retry=retry_on_epoch_bump or retry_on_overflow,
                                 abort_when_idle=True)

    def _send_markers(self, metadata: TransactionMetadata, coordinator_epoch: int, now_ms: int) -> TxnTransitMetadata:
        """The transaction is prepared: write its markers, then its completion. Returns the completion to write."""
        complete = metadata.prepare_complete(now_ms)
        self.markers.add(metadata.transactional_id, self.partition_for(metadata.transactional_id),
                         metadata.producer_id, metadata.producer_epoch, metadata.state is _T.PREPARE_COMMIT,
                         coordinator_epoch, set(metadata.topic_partitions),
                         lambda at_ms: self._complete_transaction(metadata, coordinator_epoch, at_ms, complete),
                         now_ms)
        return complete

    def _complete_transaction(self, metadata: TransactionMetadata, coordinator_epoch: int, now_ms: int,
                              complete: TxnTransitMetadata | None = None) -> None:
        """Every marker is written: write CompleteCommit/CompleteAbort (retried until it is durable, unless the
        partition moved)."""
        if not self._owns(metadata, coordinator_epoch):
            return
        if complete is None:
            if metadata.pending_transition_in_progress or metadata.state not in (_T.PREPARE_COMMIT,
                                                                                 _T.PREPARE_ABORT):
                return
            complete = metadata.prepare_complete(now_ms)

        def on_written(error: ErrorCode, at_ms: int) -> None:
            if error in (ErrorCode.NONE, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
                return
            self.timer.schedule(("complete-retry", metadata.transactional_id),
                                at_ms + self.config.retry_backoff_ms,
                                lambda retry_ms: self._complete_transaction(metadata, coordinator_epoch, retry_ms))

        self.state.append_transaction_to_log(metadata, complete, on_written)

    def _owns(self, metadata: TransactionMetadata, coordinator_epoch: int) -> bool:
        _, current = self.state.get(metadata.transactional_id)
        return current is metadata and \
            self.state.coordinator_epoch(self.partition_for(metadata.transactional_id)) == coordinator_epoch

    # -- admin -------------------------------------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> DescribeTransactionsResponse.TransactionState:
        """DescribeTransactions for one id."""
        answer = DescribeTransactionsResponse.TransactionState(transactional_id=transactional_id)
        if not transactional_id:
            answer.error_code = ErrorCode.INVALID_REQUEST
            return answer
        error, metadata = self.state.get(transactional_id)
        if error == ErrorCode.NONE and (metadata is None or metadata.state is _T.DEAD):
            error = ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
        answer.error_code = error
        if error != ErrorCode.NONE:
            return answer
        assert metadata is not None
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(metadata.topic_partitions):
            topics.setdefault(topic, []).append(partition)
        answer.transaction_state = metadata.state.state_name
        answer.transaction_timeout_ms = metadata.txn_timeout_ms
        answer.transaction_start_time_ms = metadata.txn_start_timestamp
        answer.producer_id = metadata.producer_id
        answer.producer_epoch = metadata.producer_epoch
        answer.topics = [DescribeTransactionsResponse.TopicData(topic=topic, partitions=partitions)
                         for topic, partitions in topics.items()]
        return answer

    def list_transactions(self, state_filters: list[str], producer_id_filters: list[int], duration_filter_ms: int,
                          now_ms: int) -> ListTransactionsResponse:
        """ListTransactions over the partitions this broker coordinates. Unknown state names are echoed back
        (and match nothing); a duration filter (KIP-994, -1: none) keeps the transactions running longer than
        that, and, as in Kafka, those with no transaction running (no start time: they count as running since the
        epoch)."""
        response = ListTransactionsResponse()
        if self.state.is_loading:
            response.error_code = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
            return response
        states = set()
        for name in state_filters:
            state = TransactionState.from_name(name)
            if state is None:
                response.unknown_state_filters.append(name)
            else:
                states.add(state)
        if state_filters and not states:
            return response  # only unknown states were asked for
        producer_ids = set(producer_id_filters)
        for metadata in self.state.active_transactions():
            if producer_ids and metadata.producer_id not in producer_ids:
                continue
            if states and metadata.state not in states:
                continue
            if duration_filter_ms >= 0 and now_ms - metadata.txn_start_timestamp <= duration_filter_ms:
                continue
            response.transaction_states.append(ListTransactionsResponse.TransactionState(
                transactional_id=metadata.transactional_id, producer_id=metadata.producer_id,
                transaction_state=metadata.state.state_name))
        return response

    # -- periodic jobs -----------------------------------------------------------------------------------------------

    def _abort_timed_out_transactions(self, now_ms: int) -> None:
        """Every transaction.abort.timed.out.transaction.cleanup.interval.ms: abort, with a fenced epoch, every
        transaction open longer than the timeout its producer gave at InitProducerId."""
        self.timer.schedule(_ABORT_TIMED_OUT_KEY, now_ms + self.config.abort_timed_out_transactions_interval_ms,
                            self._abort_timed_out_transactions)
        for metadata in self.state.timed_out_transactions(now_ms):
            transactional_id = metadata.transactional_id
            log.info("Aborting the transaction of %s (producer id %d): open longer than %d ms", transactional_id,
                     metadata.producer_id, metadata.txn_timeout_ms)

            def on_done(error: ErrorCode, transactional_id: str = transactional_id) -> None:
                if error != ErrorCode.NONE:
                    log.warning("Aborting the timed out transaction of %s failed: %s", transactional_id,
                                error.name)

            self._fence_and_abort(metadata, now_ms, on_done)

    def _expire_transactional_ids(self, now_ms: int) -> None:
        """Every transaction.remove.expired.transaction.cleanup.interval.ms: tombstones for ids idle (and not in a
        transaction) for transactional.id.expiration.ms."""
        self.timer.schedule(_EXPIRE_IDS_KEY, now_ms + self.config.remove_expired_transactional_ids_interval_ms,
                            self._expire_transactional_ids)
        for metadata in self.state.expired_transactional_ids(now_ms):
            log.info("Expiring transactional id %s (idle since %d)", metadata.transactional_id,
                     metadata.txn_last_update_timestamp)
            self.state.append_transaction_to_log(metadata, metadata.prepare_dead(), lambda error, at_ms: None)


def _is_valid_producer_id(metadata: TransactionMetadata, producer_id: int, producer_epoch: int) -> bool:
    """KIP-360: may a client that says it has (producer_id, producer_epoch) re-initialize this id? Yes if the id
    was just created, if the producer id is the current one (its epoch is checked by the bump), or if it is the
    previous one with its epochs used up (a retry of the rotation whose answer was lost)."""
    return metadata.producer_epoch == NO_PRODUCER_EPOCH or producer_id == metadata.producer_id \
        or (producer_id == metadata.previous_producer_id and is_epoch_exhausted(producer_epoch))


def _end_txn_by_state(state: TransactionState, committed: bool, *, is_retry: bool,
                      abort_when_idle: bool) -> ErrorCode | tuple[TransactionState, bool]:
    """EndTxn by the transaction's state: an error (NONE: this end already happened), or the state to prepare and
    whether no partition was added. TV1 treats an end matching a completed transaction as a retry; TV2 knows
    retries by their epoch and may abort when nothing is open (`abort_when_idle`)."""
    if state is _T.ONGOING:
        return (_T.PREPARE_COMMIT if committed else _T.PREPARE_ABORT), False
    if state is _T.COMPLETE_COMMIT:
        if committed:
            return ErrorCode.NONE if is_retry else ErrorCode.INVALID_TXN_STATE
        return (_T.PREPARE_ABORT, True) if abort_when_idle and not is_retry else ErrorCode.INVALID_TXN_STATE
    if state is _T.COMPLETE_ABORT:
        if not committed:
            if is_retry:
                return ErrorCode.NONE
            return (_T.PREPARE_ABORT, True) if abort_when_idle else ErrorCode.INVALID_TXN_STATE
        return ErrorCode.INVALID_TXN_STATE
    if state is _T.PREPARE_COMMIT:
        return ErrorCode.CONCURRENT_TRANSACTIONS if committed else ErrorCode.INVALID_TXN_STATE
    if state is _T.PREPARE_ABORT:
        return ErrorCode.INVALID_TXN_STATE if committed else ErrorCode.CONCURRENT_TRANSACTIONS
    if state is _T.EMPTY:
        return (_T.PREPARE_ABORT, True) if abort_when_idle and not committed else ErrorCode.INVALID_TXN_STATE
    raise IllegalTransitionError(f"EndTxn found a transaction in {state.state_name}")
