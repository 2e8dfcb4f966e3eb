"""ShareCoordinator: the share coordinator's state machine (Kafka's ShareCoordinatorShard), no I/O.

It holds the state of every share partition whose key hashes to a __share_group_state partition this broker leads,
and answers the five state RPCs for them:
- InitializeShareGroupState: a snapshot at the given state epoch and start offset, no batches;
- ReadShareGroupState: the state epoch, start offset and batches; INVALID_REQUEST when nothing is stored (Kafka
  4.4 initializes a share partition before its leader reads it); a read at a higher leader epoch records it, so a
  write of the previous leader is fenced (FENCED_LEADER_EPOCH);
- WriteShareGroupState: an update (the changed batches, the start offset), or a snapshot once
  `snapshot_update_records_per_snapshot` updates followed the last one; FENCED_LEADER_EPOCH/FENCED_STATE_EPOCH
  for a write of an older leader or state epoch;
- DeleteShareGroupState: tombstones for the share partition's keys;
- ReadShareGroupStateSummary: the epochs and start offset without the batches.
Pruning (Kafka's share coordinator deletes the redundant prefix of __share_group_state, which is not compacted): a
share partition's records before its latest snapshot mean nothing once that snapshot is committed, so a state
partition's records before the oldest latest snapshot of its live share partitions may go (`redundant_offset`); a
share partition idle for `cold_partition_snapshot_interval_ms` gets its snapshot written again (`cold_snapshots`),
so that it does not hold the prefix back forever.
A write is applied to the state as it is handed out (the records' replay is the one way state changes, on load and
on write alike); the service reloads a partition whose append failed, so memory never runs ahead of the log.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable

from kfk.coordinator.partitioning import partition_for
from kfk.coordinator.share.record_serde import (
    SharePartitionKey,
    ShareStateRecord,
    ShareUpdate,
    coordinator_key,
    deserialize_record,
    snapshot_key,
    snapshot_value,
    update_key,
    update_value,
)
from kfk.coordinator.share.state_batches import (
    DEFAULT_STATE_EPOCH,
    UNINITIALIZED_START_OFFSET,
    ShareGroupOffset,
    StateBatch,
    combine,
)
from kfk.coordinator.writes import Record
from kfk.errors import ErrorCode


@dataclasses.dataclass(frozen=True)
class ShareCoordinatorConfig:
    """share.coordinator.* (Kafka's ShareCoordinatorConfig): the topic's size and how often a snapshot is written."""

    state_topic_num_partitions: int = 50
    snapshot_update_records_per_snapshot: int = 500
    write_timeout_ms: int = 5000
    prune_interval_ms: int = 5 * 60 * 1000
    cold_partition_snapshot_interval_ms: int = 5 * 60 * 1000

    @classmethod
    def from_broker_config(cls, config) -> ShareCoordinatorConfig:
        return cls(state_topic_num_partitions=config.share_coordinator_state_topic_num_partitions,
                   snapshot_update_records_per_snapshot=config.share_coordinator_snapshot_update_records_per_snapshot,
                   write_timeout_ms=config.share_coordinator_write_timeout_ms,
                   prune_interval_ms=config.share_coordinator_state_topic_prune_interval_ms,
                   cold_partition_snapshot_interval_ms=config.share_coordinator_cold_partition_snapshot_interval_ms)


@dataclasses.dataclass(frozen=True, slots=True)
class ReadResult:
    error: ErrorCode
    error_message: str | None = None
    state_epoch: int = DEFAULT_STATE_EPOCH
    leader_epoch: int = -1
    start_offset: int = UNINITIALIZED_START_OFFSET
    state_batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = -1


@dataclasses.dataclass(frozen=True, slots=True)
class WriteResult:
    """What a write hands the service: an error now, or records to append to `partition` (answer NONE once they
    are committed)."""

    error: ErrorCode
    error_message: str | None = None
    partition: int = -1
    records: tuple[Record, ...] = ()


class ShareCoordinator:
    def __init__(self, config: ShareCoordinatorConfig,
                 partition_exists: Callable[[uuid.UUID, int], bool]) -> None:
        self.config = config
        self._partition_exists = partition_exists
        #: __share_group_state partitions this broker leads: True once loaded.
        self.loaded: dict[int, bool] = {}
        self.states: dict[SharePartitionKey, ShareGroupOffset] = {}
        self._updates_since_snapshot: dict[SharePartitionKey, int] = {}
        #: Leader epochs seen in reads (Kafka's leaderEpochMap): ahead of the stored one until the next write.
        self._leader_epochs: dict[SharePartitionKey, int] = {}
        #: Where each share partition's latest committed snapshot is in its state partition's log: the offset read
        #: on load, or for a snapshot written since, the log end offset when it was handed out (it was appended at
        #: or after it). Set once the record is committed: until then the previous snapshot is the one to keep.
        self._snapshot_offsets: dict[SharePartitionKey, int] = {}

    def partition_of(self, key: SharePartitionKey) -> int:
        return partition_for(coordinator_key(key), self.config.state_topic_num_partitions)

    def coordinator_error(self, key: SharePartitionKey) -> ErrorCode:
        loaded = self.loaded.get(self.partition_of(key))
        if loaded is None:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE if loaded else ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    # -- leadership --------------------------------------------------------------------------------------------

    def begin_loading(self, partition: int) -> None:
        self.unload(partition)
        self.loaded[partition] = False

    def complete_loading(self, partition: int) -> None:
        if partition in self.loaded:
            self.loaded[partition] = True

    def unload(self, partition: int) -> None:
        self.loaded.pop(partition, None)
        for key in self._keys_of(partition):
            self.states.pop(key, None)
            self._updates_since_snapshot.pop(key, None)
            self._leader_epochs.pop(key, None)
        for key in [key for key in self._snapshot_offsets if self.partition_of(key) == partition]:
            del self._snapshot_offsets[key]

    def _keys_of(self, partition: int) -> list[SharePartitionKey]:
        return [key for key in self.states if self.partition_of(key) == partition]

    def replay(self, record_key: bytes | None, record_value: bytes | None, offset: int | None = None) -> None:
        """Apply one record of the log (on load, with its `offset`, and as a write is handed out)."""
        record = deserialize_record(record_key, record_value)
        if record is not None:
            self._apply(record)
            if offset is not None:
                self._track_snapshot(record, offset)

    def _track_snapshot(self, record: ShareStateRecord, offset: int) -> None:
        if record.value is None:
            self._snapshot_offsets.pop(record.key, None)
        elif isinstance(record.value, ShareGroupOffset):
            self._snapshot_offsets[record.key] = offset

    def committed(self, records: tuple[Record, ...], offset_floor: int) -> None:
        """A write's records are committed; they were appended at or after `offset_floor`."""
        for record_key, record_value in records:
            record = deserialize_record(record_key, record_value)
            if record is not None:
                self._track_snapshot(record, offset_floor)

    def redundant_offset(self, partition: int, high_watermark: int) -> int | None:
        """The offset before which the state partition's records are redundant (the oldest latest snapshot of its
        live share partitions), or None while any live share partition's latest snapshot is not committed (below
        `high_watermark`) or it has none."""
        offsets = [self._snapshot_offsets.get(key) for key in self._keys_of(partition)]
        if not offsets or any(offset is None or offset >= high_watermark for offset in offsets):
            return None
        return min(offsets)

    def cold_snapshots(self, partition: int, now_ms: int) -> list[WriteResult]:
        """The share partitions of a state partition whose latest snapshot is older than
        cold_partition_snapshot_interval_ms, written again as they stand (a snapshot one epoch on)."""
        if not self.loaded.get(partition):
            return []
        writes = []
        for key in self._keys_of(partition):
            state = self.states[key]
            if key in self._snapshot_offsets and \
                    now_ms - state.write_timestamp >= self.config.cold_partition_snapshot_interval_ms:
                snapshot = dataclasses.replace(state, snapshot_epoch=state.snapshot_epoch + 1, write_timestamp=now_ms)
                writes.append(self._hand_out(partition, [(snapshot_key(key), snapshot_value(snapshot))]))
        return writes

    def _apply(self, record: ShareStateRecord) -> None:
        key = record.key
        if record.value is None:
            self.states.pop(key, None)
            self._updates_since_snapshot.pop(key, None)
            self._leader_epochs.pop(key, None)
        elif isinstance(record.value, ShareGroupOffset):
            self.states[key] = record.value
            self._updates_since_snapshot[key] = 0
        else:
            current = self.states.get(key)
            if current is None:
                return  # an update whose snapshot was deleted: nothing to apply it to
            update: ShareUpdate = record.value
            start_offset = current.start_offset if update.start_offset == -1 else update.start_offset
            self.states[key] = dataclasses.replace(
                current, start_offset=start_offset,
                leader_epoch=current.leader_epoch if update.leader_epoch == -1 else update.leader_epoch,
                state_batches=combine(current.state_batches, update.state_batches, start_offset),
                delivery_complete_count=update.delivery_complete_count)
            self._updates_since_snapshot[key] = self._updates_since_snapshot.get(key, 0) + 1

    def _hand_out(self, partition: int, records: list[Record]) -> WriteResult:
        for record_key, record_value in records:
            self.replay(record_key, record_value)
        return WriteResult(ErrorCode.NONE, partition=partition, records=tuple(records))

    # -- requests ----------------------------------------------------------------------------------------------

    def _check(self, key: SharePartitionKey) -> tuple[ErrorCode, str | None]:
        error = self.coordinator_error(key)
        if error != ErrorCode.NONE:
            return error, None
        if key[2] < 0:
            return ErrorCode.INVALID_REQUEST, "Partition id cannot be negative."
        if not self._partition_exists(key[1], key[2]):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
        return ErrorCode.NONE, None

    def _stored_leader_epoch(self, key: SharePartitionKey) -> int:
        state = self.states.get(key)
        return max(self._leader_epochs.get(key, -1), state.leader_epoch if state is not None else -1)

    def read(self, key: SharePartitionKey, leader_epoch: int) -> ReadResult:
        error = self.coordinator_error(key)
        if error != ErrorCode.NONE:
            return ReadResult(error)
        if key[2] < 0:
            return ReadResult(ErrorCode.INVALID_REQUEST, "Partition id cannot be negative.")
        state = self.states.get(key)
        if state is None:
            # As Kafka 4.4: a share partition is initialized (InitializeShareGroupState) before it is read.
            return ReadResult(ErrorCode.INVALID_REQUEST, f"The share partition {key[0]}:{key[1]}:{key[2]} has no "
                              "state to read: it was never initialized.")
        error, message = self._check(key)
        if error != ErrorCode.NONE:
            return ReadResult(error, message)
        if leader_epoch != -1:
            if self._stored_leader_epoch(key) > leader_epoch:
                return ReadResult(ErrorCode.FENCED_LEADER_EPOCH, "The leader epoch in the request is older than "
                                  "the epoch on the broker.")
            self._leader_epochs[key] = leader_epoch
        return ReadResult(ErrorCode.NONE, None, state.state_epoch, state.leader_epoch, state.start_offset,
                          tuple(state.state_batches), state.delivery_complete_count)

    def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ReadResult:
        result = self.read(key, leader_epoch)
        return dataclasses.replace(result, state_batches=())

    def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
              state_batches: list[StateBatch], delivery_complete_count: int, now_ms: int) -> WriteResult:
        error, message = self._check(key)
        if error != ErrorCode.NONE:
            return WriteResult(error, message)
        if self._stored_leader_epoch(key) > leader_epoch:
            return WriteResult(ErrorCode.FENCED_LEADER_EPOCH, "The leader epoch in the request is older than the "
                               "epoch on the broker.")
        current = self.states.get(key)
        if current is not None and current.state_epoch > state_epoch:
            return WriteResult(ErrorCode.FENCED_STATE_EPOCH, "The state epoch in the request is older than the "
                               "epoch on the broker.")
        partition = self.partition_of(key)
        if current is None or self._updates_since_snapshot.get(key, 0) >= \
                self.config.snapshot_update_records_per_snapshot:
            # First state of the key, or time for a snapshot: the whole state, combined.
            start = start_offset if start_offset != -1 else (current.start_offset if current else 0)
            snapshot = ShareGroupOffset(
                snapshot_epoch=current.snapshot_epoch + 1 if current is not None else 0,
                state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start,
                state_batches=combine(current.state_batches if current else [], state_batches, start),
                create_timestamp=current.create_timestamp if current is not None else now_ms,
                write_timestamp=now_ms, delivery_complete_count=delivery_complete_count)
            return self._hand_out(partition, [(snapshot_key(key), snapshot_value(snapshot))])
        update = ShareUpdate(snapshot_epoch=current.snapshot_epoch, leader_epoch=leader_epoch,
                             start_offset=start_offset, state_batches=list(state_batches),
                             delivery_complete_count=delivery_complete_count)
        return self._hand_out(partition, [(update_key(key), update_value(update))])

    def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int, now_ms: int) -> WriteResult:
        error, message = self._check(key)
        if error != ErrorCode.NONE:
            return WriteResult(error, message)
        current = self.states.get(key)
        if current is not None and current.state_epoch > state_epoch:
            return WriteResult(ErrorCode.FENCED_STATE_EPOCH, "The state epoch in the request is older than the "
                               "epoch on the broker.")
        snapshot = ShareGroupOffset(
            snapshot_epoch=current.snapshot_epoch + 1 if current is not None else 0, state_epoch=state_epoch,
            leader_epoch=-1, start_offset=start_offset, state_batches=[], create_timestamp=now_ms,
            write_timestamp=now_ms)
        return self._hand_out(self.partition_of(key), [(snapshot_key(key), snapshot_value(snapshot))])

    def delete(self, key: SharePartitionKey) -> WriteResult:
        error, message = self.coordinator_error(key), None
        if error != ErrorCode.NONE:
            return WriteResult(error, message)
        if key not in self.states:
            return WriteResult(ErrorCode.NONE)
        return self._hand_out(self.partition_of(key), [(snapshot_key(key), None), (update_key(key), None)])
