"""The asyncio plumbing both coordinator services share (Kafka's CoordinatorRuntime, the I/O half): time, calls,
writing a coordinator topic's records and loading a partition of it.

- DeadlineTimer: one asyncio timer kept armed at the state machine's next deadline;
- call: run a state machine operation that answers through a `respond` callable, and await that answer;

- CoordinatorWriter: one queue and worker per partition. The worker appends everything queued as few batches as it
  can (a busy coordinator writes many records per append), waits until each is committed (acks=-1 through the
  partition layer, which answers once the high watermark passes it) and completes the writes in order. Consecutive
  writes of the same producer share one batch (most writes have none); a TxnOffsetCommit's records form a
  transactional batch of its producer id and epoch, base sequence 0: the log checks the epoch of a coordinator's
  batch (fencing a zombie producer's late commit), not its sequence.
- load_partition: read a partition's log from its start to its end, a step at a time off the event loop (file
  reads), handing every record (with the producer id of its batch when transactional) and every transaction marker
  to the state machine's replay, in log order.

The partition layer is reached through callables the broker supplies, so the coordinators never import the
replication layer (DESIGN.md's layers): `append(partition, records) -> error code` and `log_of(partition) -> Log`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from kfk.coordinator.writes import CoordinatorWrite
from kfk.errors import ErrorCode, KafkaError
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

log = logging.getLogger("kfk.coordinator")

AppendFunction = Callable[[int, bytes], Awaitable[ErrorCode]]
LogLookup = Callable[[int], Log | None]

#: Bytes read per step when loading a partition.
LOAD_BUFFER_BYTES = 1024 * 1024

#: Base sequence of the coordinator's transactional batches.
TRANSACTIONAL_BASE_SEQUENCE = 0


class DeadlineTimer:
    """One asyncio timer armed at `deadline_ms` (re-armed only when the deadline changes); when it fires it calls
    `fire()`, which polls the state machine and arms the timer again."""

    def __init__(self, now_ms: Callable[[], int], fire: Callable[[], None]) -> None:
        self._now_ms = now_ms
        self._fire = fire
        self._handle: asyncio.TimerHandle | None = None
        self._deadline_ms: int | None = None
        self._stopped = False

    def arm(self, deadline_ms: int | None) -> None:
        if self._stopped or (deadline_ms == self._deadline_ms and self._handle is not None):
            return
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._deadline_ms = deadline_ms
        if deadline_ms is not None:
            delay_s = max(deadline_ms - self._now_ms(), 0) / 1000
            self._handle = asyncio.get_running_loop().call_later(delay_s, self._on_timer)

    def _on_timer(self) -> None:
        self._handle = None
        self._deadline_ms = None
        self._fire()

    def stop(self) -> None:
        self._stopped = True
        if self._handle is not None:
            self._handle.cancel()


async def call(operation: Callable[[Callable[[Any], None]], None], after: Callable[[], None]) -> Any:
    """Run `operation(respond)`, then `after()` (to take the writes and deadlines it produced), and wait for the
    answer it gives (at once, after a write commits, or when a timer fires)."""
    future: asyncio.Future = asyncio.get_running_loop().create_future()

    def respond(response: Any) -> None:
        if not future.done():
            future.set_result(response)

    try:
        operation(respond)
    finally:
        after()
    return await future


async def wait_while_loading(coordinator_error: Callable[[], ErrorCode], now_ms: Callable[[], int],
                             timeout_ms: int) -> None:
    """Return once the key's partition is loaded (its coordinator error is no longer COORDINATOR_LOAD_IN_PROGRESS:
    served, or not this broker's), or `timeout_ms` passed: FindCoordinator waits so that the client's next request
    does not meet the load and back off for seconds."""
    deadline_ms = now_ms() + timeout_ms
    while coordinator_error() == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS and now_ms() < deadline_ms:
        await asyncio.sleep(0.01)


class CoordinatorWriter:
    """Appends the writes a state machine hands out, per partition in order, and reports each one's outcome to
    `complete(write, error, now_ms)`; `after()` runs once a batch is completed (to take the writes and timers that
    completion produced)."""

    def __init__(self, topic_name: str, append: AppendFunction, now_ms: Callable[[], int],
                 complete: Callable[[CoordinatorWrite, ErrorCode, int], None], after: Callable[[], None]) -> None:
        self._topic_name = topic_name
        self._append = append
        self._now_ms = now_ms
        self._complete = complete
        self._after = after
        self._queues: dict[int, list[CoordinatorWrite]] = {}
        self._workers: dict[int, asyncio.Task] = {}

    def submit(self, write: CoordinatorWrite) -> None:
        self._queues.setdefault(write.partition, []).append(write)
        worker = self._workers.get(write.partition)
        if worker is None or worker.done():
            self._workers[write.partition] = asyncio.get_running_loop().create_task(self._drain(write.partition))

    def stop(self) -> None:
        for task in self._workers.values():
            task.cancel()

    async def _drain(self, partition: int) -> None:
        queue = self._queues[partition]
        while queue:
            writes = list(queue)
            queue.clear()
            for batch_writes, batch in batches_for(writes, self._now_ms()):
                error = ErrorCode.NONE
                if batch:
                    try:
                        error = await self._append(partition, batch)
                    except KafkaError as exception:
                        error = exception.error_code
                    except Exception:  # noqa: BLE001
                        log.exception("Append to %s-%d failed", self._topic_name, partition)
                        error = ErrorCode.UNKNOWN_SERVER_ERROR
                now_ms = self._now_ms()
                for write in batch_writes:
                    try:
                        self._complete(write, error, now_ms)
                    except Exception:  # noqa: BLE001
                        log.exception("Completing a write to %s-%d failed", self._topic_name, partition)
            self._after()


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
    """One uncompressed batch with every record of `writes` (all of one producer, or of none); empty without
    records."""
    if not any(write.records for write in writes):
        return b""
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
    #: The record's offset in the partition's log.
    offset: int = -1


@dataclasses.dataclass(frozen=True, slots=True)
class LoadedMarker:
    producer_id: int
    is_commit: bool


LoadedEntry = LoadedRecord | LoadedMarker


#: How often a load looks for its partition's log, and after how long (then twice as long, ...) it says it waits.
LOG_POLL_INTERVAL_S = 0.01
LOG_WAIT_WARNING_S = 30.0


async def load_partition(topic_name: str, partition: int, log_of: LogLookup,
                         replay: Callable[[LoadedEntry], None], poll_interval_s: float = LOG_POLL_INTERVAL_S) -> int:
    """Replay every record and transaction marker of the partition's log, in log order; the number of entries
    replayed. The replica manager opens the log from the same metadata change, possibly behind thousands of other
    new partitions (a bulk topic creation): the load waits for it as long as it takes, with a warning now and then,
    and the partition answers COORDINATOR_LOAD_IN_PROGRESS meanwhile. The caller cancels the load if leadership
    moves away."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    warn_at_s = LOG_WAIT_WARNING_S
    while (log_ := log_of(partition)) is None:
        if loop.time() - started >= warn_at_s:
            log.warning("%s-%d: still waiting for its log to open (%.0f s) before loading it", topic_name,
                        partition, loop.time() - started)
            warn_at_s *= 2
        await asyncio.sleep(poll_interval_s)
    offset = log_.log_start_offset
    count = 0
    while offset < log_.log_end_offset:
        chunk, next_offset = await loop.run_in_executor(None, read_chunk, log_, offset)
        if next_offset <= offset:
            break
        for entry in chunk:
            replay(entry)
        count += len(chunk)
        offset = next_offset
    return count


def read_chunk(log_: Log, offset: int) -> tuple[list[LoadedEntry], int]:
    """The records and markers of the batches from `offset` (about LOAD_BUFFER_BYTES of them) and the next offset;
    control records other than COMMIT/ABORT (a leader change) are skipped. Reads files: run it off the event loop."""
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
                                        None if record.value is None else bytes(record.value), producer_id,
                                        record.offset))
    return entries, next_offset
