"""The group coordinator's records in __consumer_offsets batches, both ways: the batches its writes go out as, and a
partition's log read back for a load.

Writes: consecutive writes of the same producer share one batch (most writes have none: one batch for many groups'
commits); a TxnOffsetCommit's records form a transactional batch of its producer id and epoch. Base sequence 0: the
log checks the epoch of a coordinator's batch (fencing a zombie producer's late commit), not its sequence.

Loads: records come back in log order with the producer id of their batch when it is transactional; a control batch
comes back as the transaction marker it holds (other control records, e.g. a leader change, are skipped).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING

from kfk.records import (
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    CompressionType,
    ControlRecordType,
    EndTransactionMarker,
    MemoryRecordsBuilder,
    control_record_type,
    iter_batches,
)
from kfk.storage.fetch_data_info import FetchIsolation
from kfk.storage.log import Log

if TYPE_CHECKING:
    from kfk.coordinator.group.group_coordinator import CoordinatorWrite, GroupCoordinator

#: Bytes read per step when loading a partition.
LOAD_BUFFER_BYTES = 1024 * 1024

#: Base sequence of the coordinator's transactional batches.
TRANSACTIONAL_BASE_SEQUENCE = 0


def batches_for(writes: list[CoordinatorWrite], timestamp: int) -> Iterator[tuple[list[CoordinatorWrite], bytes]]:
    """The writes grouped into batches, in order: (the writes a batch holds, the batch; empty if they hold no
    record)."""
    start = 0
    while start < len(writes):
        producer = (writes[start].producer_id, writes[start].producer_epoch)
        end = start + 1
        while end < len(writes) and (writes[end].producer_id, writes[end].producer_epoch) == producer:
            end += 1
        group = writes[start:end]
        yield group, build_batch(group, timestamp)
        start = end


def build_batch(writes: list[CoordinatorWrite], timestamp: int) -> bytes:
    """One uncompressed batch with every record of `writes` (all of one producer, or of none)."""
    producer_id, producer_epoch = writes[0].producer_id, writes[0].producer_epoch
    transactional = producer_id != NO_PRODUCER_ID
    builder = MemoryRecordsBuilder(compression_type=CompressionType.NONE, producer_id=producer_id,
                                   producer_epoch=producer_epoch, is_transactional=transactional,
                                   base_sequence=TRANSACTIONAL_BASE_SEQUENCE if transactional else NO_SEQUENCE)
    for write in writes:
        for key, value in write.records:
            builder.append(timestamp, key, value)
    return bytes(builder.close())


@dataclasses.dataclass(frozen=True, slots=True)
class LoadedRecord:
    key: bytes | None
    value: bytes | None
    #: The producer of the transactional batch holding the record; NO_PRODUCER_ID outside transactions.
    producer_id: int = NO_PRODUCER_ID


@dataclasses.dataclass(frozen=True, slots=True)
class LoadedMarker:
    producer_id: int
    is_commit: bool


LoadedEntry = LoadedRecord | LoadedMarker


def read_chunk(log_: Log, offset: int) -> tuple[list[LoadedEntry], int]:
    """The records and markers of the batches from `offset` (about LOAD_BUFFER_BYTES of them) and the next offset.
    Reads files: run it off the event loop."""
    info = log_.read(offset, LOAD_BUFFER_BYTES, FetchIsolation.LOG_END, True)
    data = info.records.read_bytes() if hasattr(info.records, "read_bytes") else bytes(info.records)
    entries: list[LoadedEntry] = []
    next_offset = offset
    for batch in iter_batches(data):
        next_offset = batch.last_offset + 1
        if getattr(batch, "is_control", False):
            for record in batch.records():
                if record.offset >= offset and control_record_type(record.key) in (ControlRecordType.COMMIT,
                                                                                    ControlRecordType.ABORT):
                    marker = EndTransactionMarker.deserialize(record)
                    entries.append(LoadedMarker(batch.producer_id,
                                                marker.control_type == ControlRecordType.COMMIT))
            continue
        producer_id = batch.producer_id if getattr(batch, "is_transactional", False) else NO_PRODUCER_ID
        for record in batch.records():
            if record.offset < offset:
                continue
            entries.append(LoadedRecord(None if record.key is None else bytes(record.key),
                                        None if record.value is None else bytes(record.value), producer_id))
    return entries, next_offset


def replay_entries(coordinator: GroupCoordinator, partition: int, entries: list[LoadedEntry], now_ms: int) -> None:
    """Hand a chunk of the partition's log to the loading coordinator, in log order."""
    for entry in entries:
        if isinstance(entry, LoadedMarker):
            coordinator.complete_transaction(partition, entry.producer_id, entry.is_commit)
        else:
            coordinator.replay(partition, entry.key, entry.value, now_ms, entry.producer_id)
