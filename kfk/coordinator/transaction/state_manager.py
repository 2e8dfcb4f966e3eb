"""TransactionStateManager: which transactional ids this broker coordinates and their metadata (Kafka's
TransactionStateManager, without the I/O).

Ownership follows leadership of __transaction_state partitions. A partition is LOADING from `begin_loading` (its
log is replayed record by record into a side table) until `complete_loading` publishes what was read; requests for
its ids meanwhile get COORDINATOR_LOAD_IN_PROGRESS, requests for ids of partitions not held get NOT_COORDINATOR.
Each load carries the coordinator epoch (the partition's leader epoch): a write that completes after the partition
was unloaded, or unloaded and loaded again, is refused with NOT_COORDINATOR instead of touching the new state.

Writes go out as TransactionWrites (the records of one transition for one partition and a continuation); the owner
appends them with acks=-1 and calls `complete_write` once they are committed or failed. Only then does the
metadata take the transition (or drop it), and the continuation sees the error mapped as Kafka maps it.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Iterator

from kfk.common.internal_topics import TRANSACTION_STATE_TOPIC_NAME
from kfk.coordinator.append_errors import append_error_to_response_error
from kfk.coordinator.partitioning import partition_for
from kfk.coordinator.transaction.config import TransactionCoordinatorConfig
from kfk.coordinator.transaction.metadata import (
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from kfk.coordinator.transaction.record_serde import (
    deserialize_record,
    transaction_log_key,
    transaction_log_value,
    value_version_for,
)
from kfk.coordinator.writes import CoordinatorWrite, Record, WriteCallback
from kfk.errors import ErrorCode, KafkaError

log = logging.getLogger("kfk.coordinator.transaction")

class PartitionState(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"


@dataclasses.dataclass(slots=True)
class _Partition:
    state: PartitionState
    coordinator_epoch: int
    transactions: dict[str, TransactionMetadata] = dataclasses.field(default_factory=dict)


class TransactionStateManager:
    def __init__(self, config: TransactionCoordinatorConfig) -> None:
        self.config = config
        #: The cluster's finalized transaction.version, which decides the TransactionLogValue version written (the
        #: service keeps it that of the metadata image; the config's until then).
        self.transaction_version_level = config.transaction_version_level
        self._partitions: dict[int, _Partition] = {}
        self._writes: list[CoordinatorWrite] = []

    # -- ownership ---------------------------------------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.transaction_state_log_num_partitions)

    @property
    def partitions(self) -> dict[int, PartitionState]:
        return {index: partition.state for index, partition in self._partitions.items()}

    def coordinator_epoch(self, partition: int) -> int | None:
        held = self._partitions.get(partition)
        return None if held is None else held.coordinator_epoch

    def coordinator_error(self, transactional_id: str) -> ErrorCode:
        held = self._partitions.get(self.partition_for(transactional_id))
        if held is None:
            return ErrorCode.NOT_COORDINATOR
        if held.state is PartitionState.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def begin_loading(self, partition: int, coordinator_epoch: int) -> None:
        """This broker now leads the partition (at `coordinator_epoch`): forget anything left from an earlier term
        and start reading its log."""
        self._partitions[partition] = _Partition(PartitionState.LOADING, coordinator_epoch)

    def replay(self, partition: int, key: bytes | memoryview | None, value: bytes | memoryview | None) -> None:
        """One record of the partition's log, in log order (a corrupt record is logged and skipped)."""
        held = self._partitions.get(partition)
        if held is None or held.state is not PartitionState.LOADING:
            return
        try:
            record = deserialize_record(key, value)
        except KafkaError as error:
            log.warning("Skipping a record of %s-%d: %s", TRANSACTION_STATE_TOPIC_NAME, partition, error)
            return
        if record is None:
            return
        if record.value is None:
            held.transactions.pop(record.transactional_id, None)
        else:
            held.transactions[record.transactional_id] = TransactionMetadata.from_transit(record.transactional_id,
                                                                                          record.value)

    def complete_loading(self, partition: int) -> list[TransactionMetadata]:
        """Serve the partition's ids; returns those left in PrepareCommit/PrepareAbort, whose markers the new
        coordinator must (re)write before it can complete them."""
        held = self._partitions.get(partition)
        if held is None or held.state is not PartitionState.LOADING:
            return []
        held.state = PartitionState.ACTIVE
        return [metadata for metadata in held.transactions.values()
                if metadata.state in (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)]

    def unload(self, partition: int) -> None:
        """This broker no longer leads the partition: forget its ids."""
        self._partitions.pop(partition, None)

    # -- lookups -----------------------------------------------------------------------------------------------------

    def get(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        """(NONE, metadata or None if the id is unknown), or the coordinator error."""
        error = self.coordinator_error(transactional_id)
        if error != ErrorCode.NONE:
            return error, None
        return ErrorCode.NONE, self._partitions[self.partition_for(transactional_id)].transactions.get(
            transactional_id)

    def put_if_absent(self, metadata: TransactionMetadata) -> TransactionMetadata:
        """Add a new id's metadata to its (active) partition, or return what is already there."""
        transactions = self._partitions[self.partition_for(metadata.transactional_id)].transactions
        return transactions.setdefault(metadata.transactional_id, metadata)

    def active_transactions(self) -> Iterator[TransactionMetadata]:
        for held in self._partitions.values():
            if held.state is PartitionState.ACTIVE:
                yield from held.transactions.values()

    @property
    def is_loading(self) -> bool:
        return any(held.state is PartitionState.LOADING for held in self._partitions.values())

    def validate_transaction_timeout_ms(self, txn_timeout_ms: int) -> bool:
        return 0 < txn_timeout_ms <= self.config.transaction_max_timeout_ms

    def timed_out_transactions(self, now_ms: int) -> list[TransactionMetadata]:
        """Ongoing transactions open longer than their timeout, nothing else pending on them."""
        return [metadata for metadata in self.active_transactions()
                if metadata.state is TransactionState.ONGOING and not metadata.pending_transition_in_progress
                and metadata.txn_start_timestamp + metadata.txn_timeout_ms < now_ms]

    def expired_transactional_ids(self, now_ms: int) -> list[TransactionMetadata]:
        """Ids idle (in a state that allows it) for transactional.id.expiration.ms."""
        horizon_ms = now_ms - self.config.transactional_id_expiration_ms
        return [metadata for metadata in self.active_transactions()
                if metadata.state.expiration_allowed and not metadata.pending_transition_in_progress
                and metadata.txn_last_update_timestamp <= horizon_ms]

    # -- writes ------------------------------------------------------------------------------------------------------

    def append_transaction_to_log(self, metadata: TransactionMetadata, transit: TxnTransitMetadata,
                                  on_complete: WriteCallback) -> None:
        """Write `transit` (prepared on `metadata`); once committed the metadata takes it (a Dead transit removes
        the id). `on_complete(error, now_ms)` gets the error mapped for the client."""
        transactional_id = metadata.transactional_id
        partition = self.partition_for(transactional_id)
        coordinator_epoch = self._partitions[partition].coordinator_epoch
        key = transaction_log_key(transactional_id)
        if transit.state is TransactionState.DEAD:
            records: list[Record] = [(key, None)]
        else:
            version = value_version_for(self.transaction_version_level)
            records = [(key, transaction_log_value(transit, version))]

        def on_written(error: ErrorCode, now_ms: int) -> None:
            error = append_error_to_response_error(error)
            held = self._partitions.get(partition)
            ours = held is not None and held.coordinator_epoch == coordinator_epoch \
                and held.transactions.get(transactional_id) is metadata
            if error == ErrorCode.NONE and not ours:
                # Committed, but the partition moved (and maybe came back): the new term's state decides.
                error = ErrorCode.NOT_COORDINATOR
            elif error == ErrorCode.NONE:
                if transit.state is TransactionState.DEAD:
                    del held.transactions[transactional_id]
                    metadata.state = TransactionState.DEAD
                    metadata.pending_state = None
                else:
                    metadata.complete_transition(transit)
            elif ours and metadata.pending_state is transit.state:
                metadata.abort_transition()
            if error != ErrorCode.NONE:
                log.info("Write of %s for %s to %s-%d failed: %s", transit.state.state_name, transactional_id,
                         TRANSACTION_STATE_TOPIC_NAME, partition, error.name)
            on_complete(error, now_ms)

        self._writes.append(CoordinatorWrite(partition, records, on_written))

    def take_writes(self) -> list[CoordinatorWrite]:
        writes, self._writes = self._writes, []
        return writes
