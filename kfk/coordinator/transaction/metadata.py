"""A transactional id's state at the coordinator (Kafka's TransactionState, TransactionMetadata, TxnTransitMetadata).

Every change goes in two steps, because it is only true once it is durable in __transaction_state:
1. `prepare_*` checks the transition is legal from the current state, sets `pending_state` and returns a
   TxnTransitMetadata (the whole next value: it is what gets written);
2. once the write is committed the coordinator calls `complete_transition(transit)`, which checks the transit is
   still a legal successor and takes it over; if the write failed it calls `abort_transition()` instead.
While a transition is pending every other request for the id gets CONCURRENT_TRANSACTIONS.

Producer epochs are int16: Kafka never hands out 32767 (Short.MaxValue) to a client, so the coordinator can always
fence the last epoch it gave out by bumping once more; an epoch of 32766 is "exhausted" and the next bump rotates
to a new producer id.

Transaction versions (the client's, from the request version; the cluster's is the transaction.version feature):
TV0/TV1 end a transaction without touching the epoch; TV2 (KIP-890) bumps it at every commit/abort, so markers
carry an epoch the producer has never written with, and a late write of the old epoch is fenced.
"""

from __future__ import annotations

import dataclasses
import enum

from kfk.common.structs import TopicPartition

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: Short.MaxValue: never given to a client (kept for fencing).
MAX_PRODUCER_EPOCH = 32767
#: transaction.version levels: 2 is KIP-890's epoch bump at every transaction end.
TRANSACTION_VERSION_EPOCH_BUMP = 2


def is_epoch_exhausted(producer_epoch: int) -> bool:
    """No epoch may be given out after this one with the same producer id."""
    return producer_epoch >= MAX_PRODUCER_EPOCH - 1


class TransactionState(enum.Enum):
    """Kafka's transaction states: the id written in TransactionLogValue.transaction_status, the name
    DescribeTransactions/ListTransactions show, and whether an idle id in this state may expire."""

    EMPTY = (0, "Empty", True)
    ONGOING = (1, "Ongoing", False)
    PREPARE_COMMIT = (2, "PrepareCommit", False)
    PREPARE_ABORT = (3, "PrepareAbort", False)
    COMPLETE_COMMIT = (4, "CompleteCommit", True)
    COMPLETE_ABORT = (5, "CompleteAbort", True)
    DEAD = (6, "Dead", False)
    #: Kafka's in-memory step of fencing an ongoing transaction; kfk fences and prepares the abort in one call
    #: (`fence_producer_epoch`), so no metadata rests in it. Kept for the state table and the admin names.
    PREPARE_EPOCH_FENCE = (7, "PrepareEpochFence", False)

    def __init__(self, state_id: int, state_name: str, expiration_allowed: bool) -> None:
        self.state_id = state_id
        self.state_name = state_name
        self.expiration_allowed = expiration_allowed

    @property
    def valid_previous_states(self) -> frozenset[TransactionState]:
        return _VALID_PREVIOUS_STATES[self]

    @classmethod
    def from_id(cls, state_id: int) -> TransactionState:
        for state in cls:
            if state.state_id == state_id:
                return state
        raise ValueError(f"Unknown transaction state id {state_id}")

    @classmethod
    def from_name(cls, name: str) -> TransactionState | None:
        return _BY_NAME.get(name)


_T = TransactionState
_VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    _T.EMPTY: frozenset({_T.EMPTY, _T.COMPLETE_COMMIT, _T.COMPLETE_ABORT}),
    _T.ONGOING: frozenset({_T.ONGOING, _T.EMPTY, _T.COMPLETE_COMMIT, _T.COMPLETE_ABORT}),
    _T.PREPARE_COMMIT: frozenset({_T.ONGOING}),
    # TV2 lets a client abort when it is unsure whether anything is open (Empty and Complete* included).
    _T.PREPARE_ABORT: frozenset({_T.ONGOING, _T.PREPARE_EPOCH_FENCE, _T.EMPTY, _T.COMPLETE_COMMIT,
                                 _T.COMPLETE_ABORT}),
    _T.COMPLETE_COMMIT: frozenset({_T.PREPARE_COMMIT}),
    _T.COMPLETE_ABORT: frozenset({_T.PREPARE_ABORT}),
    _T.DEAD: frozenset({_T.EMPTY, _T.COMPLETE_COMMIT, _T.COMPLETE_ABORT}),
    _T.PREPARE_EPOCH_FENCE: frozenset({_T.ONGOING}),
}
_BY_NAME = {state.state_name: state for state in TransactionState}


@dataclasses.dataclass(frozen=True, slots=True)
class TxnTransitMetadata:
    """The value a transition writes (and what the metadata becomes once it is committed)."""

    producer_id: int
    previous_producer_id: int
    next_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    txn_timeout_ms: int
    state: TransactionState
    topic_partitions: frozenset[TopicPartition]
    txn_start_timestamp: int
    txn_last_update_timestamp: int
    client_transaction_version: int


class IllegalTransitionError(RuntimeError):
    """A bug: the coordinator asked for a transition its own checks should have refused."""


@dataclasses.dataclass(slots=True, eq=False)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    txn_timeout_ms: int
    state: TransactionState
    txn_last_update_timestamp: int
    #: The producer id before the transition that rotated it (InitProducerId on exhausted epochs, or a TV2
    #: completion after an epoch overflow); -1 after any other transition. It lets the client that still has the
    #: old id retry the call whose answer it lost. -1 is Kafka's default for the tagged field, so it is not
    #: written: the values of ordinary transactions are Kafka 4.0.2's bytes.
    previous_producer_id: int = NO_PRODUCER_ID
    #: TV2 only: the id a transaction prepared with the last epoch of its producer id completes under.
    next_producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    #: The epoch before the last bump: lets a client retrying InitProducerId (its answer was lost) be recognised.
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    topic_partitions: set[TopicPartition] = dataclasses.field(default_factory=set)
    txn_start_timestamp: int = -1
    client_transaction_version: int = 0
    pending_state: TransactionState | None = None
    #: An epoch fence whose write failed already bumped the epoch in memory: the retry must not bump it again.
    has_failed_epoch_fence: bool = False

    @classmethod
    def from_transit(cls, transactional_id: str, transit: TxnTransitMetadata) -> TransactionMetadata:
        """The metadata a loaded record describes (the last epoch is not stored: Kafka loads it as unknown)."""
        return cls(transactional_id=transactional_id, producer_id=transit.producer_id,
                   previous_producer_id=transit.previous_producer_id, next_producer_id=transit.next_producer_id,
                   producer_epoch=transit.producer_epoch, last_producer_epoch=NO_PRODUCER_EPOCH,
                   txn_timeout_ms=transit.txn_timeout_ms, state=transit.state,
                   topic_partitions=set(transit.topic_partitions), txn_start_timestamp=transit.txn_start_timestamp,
                   txn_last_update_timestamp=transit.txn_last_update_timestamp,
                   client_transaction_version=transit.client_transaction_version)

    @property
    def pending_transition_in_progress(self) -> bool:
        return self.pending_state is not None

    @property
    def is_producer_epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    @property
    def uses_epoch_bump(self) -> bool:
        return self.client_transaction_version >= TRANSACTION_VERSION_EPOCH_BUMP

    # -- prepare -----------------------------------------------------------------------------------------------------

    def _prepare(self, state: TransactionState, *, producer_id: int | None = None,
                 next_producer_id: int = NO_PRODUCER_ID, producer_epoch: int | None = None,
                 last_producer_epoch: int | None = None, txn_timeout_ms: int | None = None,
                 topic_partitions: frozenset[TopicPartition] | None = None, txn_start_timestamp: int | None = None,
                 update_timestamp: int | None = None,
                 client_transaction_version: int | None = None) -> TxnTransitMetadata:
        if self.pending_state is not None:
            raise IllegalTransitionError(f"{self.transactional_id}: transition to {state.state_name} while "
                                         f"{self.pending_state.state_name} is pending")
        if self.state not in state.valid_previous_states:
            raise IllegalTransitionError(f"{self.transactional_id}: {self.state.state_name} cannot become "
                                         f"{state.state_name}")
        next_id = self.producer_id if producer_id is None else producer_id
        transit = TxnTransitMetadata(
            producer_id=next_id,
            # Kafka 4.4 (TransactionMetadata.prepareTransitionTo) keeps the id the transition starts from, whether
            # or not it changes: its records carry PreviousProducerId always (4.0 wrote it only on a rotation).
            previous_producer_id=self.producer_id,
            next_producer_id=next_producer_id,
            producer_epoch=self.producer_epoch if producer_epoch is None else producer_epoch,
            last_producer_epoch=self.last_producer_epoch if last_producer_epoch is None else last_producer_epoch,
            txn_timeout_ms=self.txn_timeout_ms if txn_timeout_ms is None else txn_timeout_ms,
            state=state,
            topic_partitions=frozenset(self.topic_partitions) if topic_partitions is None else topic_partitions,
            txn_start_timestamp=self.txn_start_timestamp if txn_start_timestamp is None else txn_start_timestamp,
            txn_last_update_timestamp=self.txn_last_update_timestamp if update_timestamp is None
            else update_timestamp,
            client_transaction_version=self.client_transaction_version if client_transaction_version is None
            else client_transaction_version,
        )
        if transit.producer_id < 0:
            raise IllegalTransitionError(f"{self.transactional_id}: illegal producer id {transit.producer_id}")
        if state is not TransactionState.DEAD and transit.producer_epoch < 0:
            raise IllegalTransitionError(f"{self.transactional_id}: illegal epoch {transit.producer_epoch}")
        self.pending_state = state
        return transit

    def prepare_increment_producer_epoch(self, txn_timeout_ms: int, expected_epoch: int | None,
                                         now_ms: int) -> TxnTransitMetadata | None:
        """InitProducerId on the same producer id: Empty with the next epoch. `expected_epoch` is the epoch a
        KIP-360 client says it has: its current one (bump), or the one before the last bump (a retry whose answer
        was lost: answer the same epoch again). None if the expected epoch is neither (the caller is fenced). A
        client with no expected epoch is a new instance: the bump it gets remembers no previous epoch, so the
        instance it replaced cannot pass for a retry (Apache Kafka fences it)."""
        if self.is_producer_epoch_exhausted:
            raise IllegalTransitionError(f"{self.transactional_id}: epoch {self.producer_epoch} is exhausted")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last_epoch = bumped, NO_PRODUCER_EPOCH
        elif expected_epoch in (NO_PRODUCER_EPOCH, self.producer_epoch):
            epoch, last_epoch = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        else:
            return None
        return self._prepare(TransactionState.EMPTY, producer_epoch=epoch, last_producer_epoch=last_epoch,
                             txn_timeout_ms=txn_timeout_ms, topic_partitions=frozenset(), txn_start_timestamp=-1,
                             update_timestamp=now_ms)

    def prepare_producer_id_rotation(self, new_producer_id: int, txn_timeout_ms: int, now_ms: int,
                                     record_last_epoch: bool) -> TxnTransitMetadata:
        """InitProducerId when the epochs of the current producer id are used up: a new id at epoch 0."""
        return self._prepare(TransactionState.EMPTY, producer_id=new_producer_id, producer_epoch=0,
                             last_producer_epoch=self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH,
                             txn_timeout_ms=txn_timeout_ms, topic_partitions=frozenset(), txn_start_timestamp=-1,
                             update_timestamp=now_ms)

    def fence_producer_epoch(self) -> None:
        """Fence the producer of an ongoing transaction (InitProducerId from a new instance, or a timeout) before
        aborting it: the epoch is bumped in memory at once, so the old producer is refused from now on even if the
        abort's write fails (then `has_failed_epoch_fence` keeps the retry from bumping a second time). The bumped
        epoch is never given to a client: the abort is written with it and the client's retry bumps again."""
        if self.pending_state is not None or self.state is not TransactionState.ONGOING:
            raise IllegalTransitionError(f"{self.transactional_id}: cannot fence in {self.state.state_name}")
        if self.producer_epoch >= MAX_PRODUCER_EPOCH:
            raise IllegalTransitionError(f"{self.transactional_id}: cannot fence epoch {self.producer_epoch}")
        if not self.has_failed_epoch_fence:
            self.producer_epoch += 1
        self.last_producer_epoch = NO_PRODUCER_EPOCH

    def prepare_add_partitions(self, partitions: set[TopicPartition], now_ms: int,
                               client_transaction_version: int) -> TxnTransitMetadata:
        started = self.state in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT,
                                 TransactionState.COMPLETE_ABORT)
        return self._prepare(TransactionState.ONGOING, topic_partitions=frozenset(self.topic_partitions | partitions),
                             txn_start_timestamp=now_ms if started else self.txn_start_timestamp,
                             update_timestamp=now_ms, client_transaction_version=client_transaction_version)

    def prepare_abort_or_commit(self, state: TransactionState, client_transaction_version: int,
                                next_producer_id: int, now_ms: int, no_partition_added: bool) -> TxnTransitMetadata:
        """PrepareCommit/PrepareAbort. TV2 bumps the epoch here (to 32767 with a next producer id when the epochs
        are used up: the id changes when the transaction completes)."""
        if client_transaction_version >= TRANSACTION_VERSION_EPOCH_BUMP:
            epoch, last_epoch = self.producer_epoch + 1, self.producer_epoch
        else:
            epoch, last_epoch = self.producer_epoch, self.last_producer_epoch
        return self._prepare(state, next_producer_id=next_producer_id, producer_epoch=epoch,
                             last_producer_epoch=last_epoch,
                             txn_start_timestamp=now_ms if no_partition_added else self.txn_start_timestamp,
                             update_timestamp=now_ms, client_transaction_version=client_transaction_version)

    def prepare_complete(self, now_ms: int) -> TxnTransitMetadata:
        """CompleteCommit/CompleteAbort once every marker is written (TV2 overflow: the next producer id at 0)."""
        self.has_failed_epoch_fence = False
        state = TransactionState.COMPLETE_COMMIT if self.state is TransactionState.PREPARE_COMMIT \
            else TransactionState.COMPLETE_ABORT
        if self.uses_epoch_bump and self.next_producer_id != NO_PRODUCER_ID:
            producer_id, epoch = self.next_producer_id, 0
        else:
            producer_id, epoch = self.producer_id, self.producer_epoch
        return self._prepare(state, producer_id=producer_id, producer_epoch=epoch, topic_partitions=frozenset(),
                             update_timestamp=now_ms)

    def prepare_dead(self) -> TxnTransitMetadata:
        return self._prepare(TransactionState.DEAD, topic_partitions=frozenset())

    # -- complete ----------------------------------------------------------------------------------------------------

    def abort_transition(self) -> None:
        """The write failed: the state stays as it was."""
        self.pending_state = None

    def complete_transition(self, transit: TxnTransitMetadata) -> None:
        """The write of `transit` is committed: take it over (checked against the state it was prepared from)."""
        to_state = self.pending_state
        if to_state is None or to_state is not transit.state:
            raise IllegalTransitionError(f"{self.transactional_id}: completing {transit.state.state_name} but "
                                         f"{to_state.state_name if to_state else 'nothing'} is pending")
        valid = True
        if to_state is TransactionState.EMPTY:
            valid = (self.producer_epoch == transit.producer_epoch or self._valid_epoch_bump(transit)) \
                and not transit.topic_partitions and transit.txn_start_timestamp == -1
        elif to_state is TransactionState.ONGOING:
            valid = self._valid_producer_epoch(transit) and self.topic_partitions <= transit.topic_partitions \
                and self.txn_timeout_ms == transit.txn_timeout_ms
        elif to_state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            empty_abort = to_state is TransactionState.PREPARE_ABORT \
                and transit.client_transaction_version >= TRANSACTION_VERSION_EPOCH_BUMP \
                and self.state in (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT,
                                   TransactionState.COMPLETE_ABORT)
            valid = self._valid_producer_epoch(transit) and self.topic_partitions == transit.topic_partitions \
                and self.txn_timeout_ms == transit.txn_timeout_ms \
                and (self.txn_start_timestamp == transit.txn_start_timestamp or empty_abort)
        elif to_state in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT):
            valid = self._valid_producer_epoch(transit) and self.txn_timeout_ms == transit.txn_timeout_ms \
                and transit.txn_start_timestamp != -1
        else:
            # PrepareEpochFence is never written (PrepareAbort is); Dead is never completed (the id is removed).
            valid = False
        if not valid:
            raise IllegalTransitionError(f"{self.transactional_id}: unexpected transition {self} -> {transit}")
        self.producer_id = transit.producer_id
        self.previous_producer_id = transit.previous_producer_id
        self.next_producer_id = transit.next_producer_id
        self.producer_epoch = transit.producer_epoch
        self.last_producer_epoch = transit.last_producer_epoch
        self.txn_timeout_ms = transit.txn_timeout_ms
        self.topic_partitions = set(transit.topic_partitions)
        self.txn_start_timestamp = transit.txn_start_timestamp
        self.txn_last_update_timestamp = transit.txn_last_update_timestamp
        self.client_transaction_version = transit.client_transaction_version
        self.pending_state = None
        self.state = to_state

    def _valid_producer_epoch(self, transit: TxnTransitMetadata) -> bool:
        tv2 = transit.client_transaction_version >= TRANSACTION_VERSION_EPOCH_BUMP
        if tv2 and transit.state in (TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT) \
                and transit.producer_epoch == 0:
            # Completion after an epoch overflow: the id moved to the next producer id.
            return transit.last_producer_epoch == self.last_producer_epoch \
                and transit.previous_producer_id == self.producer_id
        if tv2 and transit.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT):
            return transit.last_producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id
        return transit.producer_epoch == self.producer_epoch and transit.producer_id == self.producer_id

    def _valid_epoch_bump(self, transit: TxnTransitMetadata) -> bool:
        return transit.producer_epoch == self.producer_epoch + 1 \
            or (transit.producer_epoch == 0 and transit.producer_id != self.producer_id)
