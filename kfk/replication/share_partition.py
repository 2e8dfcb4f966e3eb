"""Share partitions (KIP-932): what one share group has consumed of one partition, kept by the partition leader.

The share-partition start offset (SPSO) is the first offset not yet done with; the end offset (SPEO) the next one
never handed out. Between them every record is in flight: AVAILABLE (to be handed out again), ACQUIRED by one member
until it acknowledges it or its acquisition lock (`group.share.record.lock.duration.ms`) expires, ACKNOWLEDGED or
ARCHIVED (done with: accepted, rejected, or delivered `group.share.delivery.count.limit` times). The start offset
moves past the records done with; at most `group.share.partition.max.record.locks` records are in flight, so a
member that holds records back cannot make the leader track an unbounded window.

State is per record (the window is bounded by the record locks); Kafka keeps batches where it can, which the wire
does not show: acquired records go out as (first offset, last offset, delivery count) ranges either way.

Durable state (the share coordinator's, through the broker's persister): every record whose state changed since the
last write (acknowledged, archived, released, its lock expired) is collected, and `take_state_update` hands them out
as state batches with the start offset; a share partition started on a new leader is rebuilt from the stored start
offset and batches (`restore`): what was done with stays done, what was available is available with its delivery
count, and an acquired record, whose lock died with its leader, is available again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import struct
from typing import Awaitable, Callable, Collection, Iterable, Iterator

from kfk.errors import ErrorCode
from kfk.records.batch import entry_at

#: ShareFetch/ShareAcknowledge acknowledge types (KIP-932; RENEW is KIP-1222's).
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4

_BATCH_HEADER = struct.Struct(">qi")  # base offset, batch length
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_POSITION = 23


class RecordState(enum.Enum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


@dataclasses.dataclass(frozen=True)
class SharePartitionConfig:
    record_lock_duration_ms: int = 30000
    delivery_count_limit: int = 5
    max_record_locks: int = 2000


@dataclasses.dataclass(slots=True)
class InFlightRecord:
    state: RecordState = RecordState.AVAILABLE
    delivery_count: int = 0
    member_id: str | None = None
    lock_deadline_ms: int = 0


#: A stored state batch: (first offset, last offset, delivery state, delivery count), the share coordinator's
#: StateBatch (kfk.coordinator.share.state_batches) seen from this layer, which does not import the coordinators.
StateBatchTuple = tuple[int, int, int, int]
#: Sends (start offset, state batches) to the share coordinator; the error it answered.
StateWriter = Callable[[int, list[StateBatchTuple]], Awaitable[ErrorCode]]


def batch_offset_ranges(records: bytes) -> Iterator[tuple[int, int, int, int]]:
    """(base offset, last offset, start, end) of each whole v2 batch in `records` (a log read, which may end in a
    partial batch): what the records' offsets are, and where each batch lies to send on only those acquired."""
    position, size = 0, len(records)
    while position + 27 <= size:
        base_offset, length = _BATCH_HEADER.unpack_from(records, position)
        end = position + 12 + length
        if end > size:
            return
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(records, position + _LAST_OFFSET_DELTA_POSITION)
        yield base_offset, base_offset + delta, position, end
        position = end


def aborted_batches(records: bytes, batches: Iterable[tuple[int, int, int, int]],
                    aborted_transactions: Iterable[tuple[int, int, int]]) -> set[int]:
    """The base offsets of the data batches of aborted transactions among `batches` (of a read_committed log read):
    a transactional batch of producer P whose base offset lies within one of P's aborted transactions, given as
    (producer id, first offset, last offset: the abort marker's)."""
    by_producer: dict[int, list[tuple[int, int]]] = {}
    for producer_id, first_offset, last_offset in aborted_transactions:
        by_producer.setdefault(producer_id, []).append((first_offset, last_offset))
    if not by_producer:
        return set()
    aborted: set[int] = set()
    for base_offset, _, start, _ in batches:
        batch = entry_at(records, start)
        if batch is None or not batch.is_transactional or batch.is_control:
            continue
        if any(first <= base_offset <= last for first, last in by_producer.get(batch.producer_id, ())):
            aborted.add(base_offset)
    return aborted


def _ranges(offsets: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    """(offset, delivery count) pairs, ascending, as (first, last, delivery count) ranges."""
    ranges: list[tuple[int, int, int]] = []
    for offset, count in offsets:
        if ranges and ranges[-1][1] == offset - 1 and ranges[-1][2] == count:
            ranges[-1] = (ranges[-1][0], offset, count)
        else:
            ranges.append((offset, offset, count))
    return ranges


class SharePartition:
    def __init__(self, config: SharePartitionConfig, start_offset: int, leader_epoch: int = -1,
                 state_epoch: int = 0) -> None:
        self.config = config
        self.leader_epoch = leader_epoch  # of the partition leader that started it
        self.state_epoch = state_epoch
        self.start_offset = start_offset
        self.end_offset = start_offset
        self.records: dict[int, InFlightRecord] = {}
        #: Offsets whose state changed since the last take_state_update, and whether the start offset did.
        self._changed: set[int] = set()
        self._start_offset_changed = False
        #: Held while a write is with the share coordinator (see write_state).
        self._write_lock = asyncio.Lock()

    def restore(self, state_batches: Iterable[StateBatchTuple]) -> None:
        """Take the stored batches (past the start offset) back: records not yet read again, above the end offset,
        which acquire() honours as it reaches them."""
        for first_offset, last_offset, delivery_state, delivery_count in state_batches:
            state = RecordState(delivery_state)
            if state is RecordState.ACQUIRED:
                state = RecordState.AVAILABLE
            for offset in range(max(first_offset, self.start_offset), last_offset + 1):
                self.records[offset] = InFlightRecord(state=state, delivery_count=delivery_count)

    def take_state_update(self) -> tuple[int, list[StateBatchTuple]] | None:
        """What changed since the last call, to write to the share coordinator: (start offset, the changed records
        as state batches); None when nothing changed. Acquired records are left out (a lock is not durable)."""
        if not self._changed and not self._start_offset_changed:
            return None
        batches: list[StateBatchTuple] = []
        for offset in sorted(self._changed):
            record = self.records.get(offset)
            if offset < self.start_offset or record is None or record.state is RecordState.ACQUIRED:
                continue
            state, count = record.state.value, record.delivery_count
            if batches and batches[-1][1] == offset - 1 and batches[-1][2:] == (state, count):
                batches[-1] = (batches[-1][0], offset, state, count)
            else:
                batches.append((offset, offset, state, count))
        self._changed.clear()
        self._start_offset_changed = False
        return self.start_offset, batches

    async def write_state(self, write: StateWriter) -> ErrorCode:
        """Write what changed since the last write (take_state_update) with `write`, one write at a time, in the
        order their changes were taken. A write is an update the share coordinator lays over what it has, start
        offset included: one overtaken by a later write (it waited longer for a share coordinator that moved)
        would land after it and roll the start offset and the records' states back, and a leader started from that
        state would deliver accepted records again. A failed write's records go with the next one."""
        update = self.take_state_update()
        if update is None:
            return ErrorCode.NONE
        start_offset, batches = update
        async with self._write_lock:  # asyncio's lock wakes its waiters first come, first served
            error = await write(start_offset, batches)
        if error != ErrorCode.NONE:
            self.mark_changed(offset for first, last, _, _ in batches for offset in range(first, last + 1))
        return error

    def mark_changed(self, offsets: Iterable[int]) -> None:
        """A write that failed: its records are written with the next one."""
        self._changed.update(offsets)
        self._start_offset_changed = True

    def _unlock(self, record: InFlightRecord) -> None:
        """An acquired record given back (released, lock expired, member gone): available again, unless it was
        delivered as often as the limit allows."""
        record.member_id = None
        record.state = RecordState.ARCHIVED if record.delivery_count >= self.config.delivery_count_limit \
            else RecordState.AVAILABLE

    def expire_locks(self, now_ms: int) -> None:
        for offset, record in self.records.items():
            if record.state is RecordState.ACQUIRED and record.lock_deadline_ms <= now_ms:
                self._unlock(record)
                self._changed.add(offset)
        self._advance_start()

    def _advance_start(self) -> None:
        while self.start_offset < self.end_offset:
            record = self.records.get(self.start_offset)
            if record is not None and record.state not in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED):
                break
            self.records.pop(self.start_offset, None)
            self._changed.discard(self.start_offset)
            self.start_offset += 1
            self._start_offset_changed = True

    def done_in_flight(self) -> int:
        """How many records past the start offset are done with (acknowledged or archived): not part of the lag."""
        return sum(record.state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED) for record in self.records.values())

    def locks_exhausted(self) -> bool:
        """Whether a read could acquire nothing now: no in-flight record is available and the end offset is as far
        past the start offset as group.share.partition.max.record.locks allows. Only an acknowledgement, a release
        or an expired lock changes that, never new records in the log."""
        return self.end_offset - self.start_offset >= self.config.max_record_locks and not any(
            record.state is RecordState.AVAILABLE and offset < self.end_offset
            for offset, record in self.records.items())

    def next_fetch_offset(self) -> int:
        """Where a read for this share partition starts: the first available record, else the end offset (records
        restored past the end offset are reached by reading on from it)."""
        available = [offset for offset, record in self.records.items()
                     if record.state is RecordState.AVAILABLE and offset < self.end_offset]
        return min(available, default=self.end_offset)

    def acquire(self, member_id: str, batches: Iterable[tuple[int, int, int, int]], max_records: int, now_ms: int,
                aborted: Collection[int] = ()) -> list[tuple[int, int, int]]:
        """Acquire for `member_id` what it may have of the records the log read returned (their batches' offset
        ranges): available in-flight records and records past the end offset, up to `max_records` and the record
        locks. The batches whose base offsets are in `aborted` (a read_committed group's aborted transactions) are
        archived instead, never delivered. Returns the acquired (first offset, last offset, delivery count)
        ranges."""
        acquired: list[tuple[int, int]] = []
        deadline = now_ms + self.config.record_lock_duration_ms
        for base_offset, last_offset, _, _ in batches:
            if base_offset in aborted:
                self._archive(base_offset, last_offset)
                continue
            for offset in range(max(base_offset, self.start_offset), last_offset + 1):
                if len(acquired) >= max_records:
                    break
                record = self._read_first_time(offset) if offset >= self.end_offset else self.records.get(offset)
                if record is None or record.state is not RecordState.AVAILABLE:
                    continue  # done with, or no record there
                record.state = RecordState.ACQUIRED
                record.delivery_count += 1
                record.member_id = member_id
                record.lock_deadline_ms = deadline
                acquired.append((offset, record.delivery_count))
        return _ranges(acquired)

    def _read_first_time(self, offset: int) -> InFlightRecord | None:
        """A record past the end offset, read for the first time by this leader (one restored from the stored state
        keeps what it says); None beyond the record locks. The offsets a read skipped hold no record (the read is
        contiguous from at most the end offset): compacted away."""
        if offset - self.start_offset >= self.config.max_record_locks:
            return None
        record = self.records.get(offset)
        if record is None:
            record = self.records[offset] = InFlightRecord()
        self.end_offset = offset + 1
        return record

    def _archive(self, base_offset: int, last_offset: int) -> None:
        """A batch of an aborted transaction: its records, available or read for the first time, are done with."""
        for offset in range(max(base_offset, self.start_offset), last_offset + 1):
            record = self._read_first_time(offset) if offset >= self.end_offset else self.records.get(offset)
            if record is not None and record.state is RecordState.AVAILABLE:
                record.state = RecordState.ARCHIVED
                self._changed.add(offset)
        self._advance_start()

    def acknowledge(self, member_id: str, batches: list[tuple[int, int, list[int]]], now_ms: int) -> ErrorCode:
        """Apply (first offset, last offset, acknowledge types) batches: one type for the whole range, or one per
        offset. All or nothing: INVALID_RECORD_STATE when a record is not acquired by `member_id`."""
        changes: list[tuple[InFlightRecord, int]] = []
        offsets_of: dict[int, int] = {}
        for first_offset, last_offset, types in batches:
            if last_offset < first_offset or len(types) not in (1, last_offset - first_offset + 1) \
                    or any(ack_type not in (GAP, ACCEPT, RELEASE, REJECT, RENEW) for ack_type in types):
                return ErrorCode.INVALID_REQUEST
            for index, offset in enumerate(range(first_offset, last_offset + 1)):
                if offset < self.start_offset:
                    continue  # done with already: Kafka lets such acknowledgements pass
                ack_type = types[0] if len(types) == 1 else types[index]
                record = self.records.get(offset)
                if record is None or record.state is not RecordState.ACQUIRED or record.member_id != member_id:
                    if ack_type == GAP and record is None:
                        continue  # no record there (compacted, a control batch): nothing to do
                    return ErrorCode.INVALID_RECORD_STATE
                changes.append((record, ack_type))
                offsets_of[id(record)] = offset
        for record, ack_type in changes:
            self._changed.add(offsets_of[id(record)])
            if ack_type in (ACCEPT, GAP):
                record.state, record.member_id = RecordState.ACKNOWLEDGED, None
            elif ack_type == REJECT:
                record.state, record.member_id = RecordState.ARCHIVED, None
            elif ack_type == RELEASE:
                self._unlock(record)
            else:
                record.lock_deadline_ms = now_ms + self.config.record_lock_duration_ms
        self._advance_start()
        return ErrorCode.NONE

    def release_member(self, member_id: str) -> None:
        """A member's share session closed: what it holds is available to the others again."""
        for offset, record in self.records.items():
            if record.state is RecordState.ACQUIRED and record.member_id == member_id:
                self._unlock(record)
                self._changed.add(offset)
        self._advance_start()
