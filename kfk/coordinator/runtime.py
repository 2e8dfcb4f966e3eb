"""The asyncio plumbing both coordinator services share (Kafka's CoordinatorRuntime, the I/O half): writing a
coordinator topic's records and loading a partition of it.

- CoordinatorWriter: one queue and worker per partition. The worker appends everything queued as one batch (a busy
  coordinator writes many records per append), waits until it is committed (acks=-1 through the partition layer,
  which answers once the high watermark passes it) and completes the writes in order.
- load_partition: read a partition's log from its start to its end, a step at a time off the event loop (file
  reads), handing every record to the state machine's replay.

The partition layer is reached through callables the broker supplies, so the coordinators never import the
replication layer (DESIGN.md's layers): `append(partition, records) -> error code` and `log_of(partition) -> Log`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Generic, Protocol, TypeVar

from kfk.errors import ErrorCode, KafkaError
from kfk.records import CompressionType, MemoryRecordsBuilder, iter_batches
from kfk.storage.fetch_data_info import FetchIsolation
from kfk.storage.log import Log

log = logging.getLogger("kfk.coordinator")

AppendFunction = Callable[[int, bytes], Awaitable[ErrorCode]]
LogLookup = Callable[[int], Log | None]
KeyValue = tuple[bytes | None, bytes | None]

#: Bytes read per step when loading a partition.
LOAD_BUFFER_BYTES = 1024 * 1024


class Write(Protocol):
    partition: int
    records: list[tuple[bytes, bytes | None]]


W = TypeVar("W", bound=Write)


class CoordinatorWriter(Generic[W]):
    """Appends the writes a state machine hands out, per partition in order, and reports each one's outcome to
    `complete(write, error, now_ms)`; `after()` runs once a batch is completed (to take the writes and timers that
    completion produced)."""

    def __init__(self, topic_name: str, append: AppendFunction, now_ms: Callable[[], int],
                 complete: Callable[[W, ErrorCode, int], None], after: Callable[[], None]) -> None:
        self._topic_name = topic_name
        self._append = append
        self._now_ms = now_ms
        self._complete = complete
        self._after = after
        self._queues: dict[int, list[W]] = {}
        self._workers: dict[int, asyncio.Task] = {}

    def submit(self, write: W) -> None:
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
            records = [record for write in writes for record in write.records]
            error = ErrorCode.NONE
            if records:
                builder = MemoryRecordsBuilder(compression_type=CompressionType.NONE)
                timestamp = self._now_ms()
                for key, value in records:
                    builder.append(timestamp, key, value)
                try:
                    error = await self._append(partition, bytes(builder.close()))
                except KafkaError as exception:
                    error = exception.error_code
                except Exception:  # noqa: BLE001
                    log.exception("Append to %s-%d failed", self._topic_name, partition)
                    error = ErrorCode.UNKNOWN_SERVER_ERROR
            now_ms = self._now_ms()
            for write in writes:
                try:
                    self._complete(write, error, now_ms)
                except Exception:  # noqa: BLE001
                    log.exception("Completing a write to %s-%d failed", self._topic_name, partition)
            self._after()


async def load_partition(topic_name: str, partition: int, log_of: LogLookup,
                         replay: Callable[[bytes | None, bytes | None], None]) -> int | None:
    """Replay every record of the partition's log (control batches skipped); the number replayed, or None if the
    partition's log never appeared."""
    loop = asyncio.get_running_loop()
    log_ = None
    for _ in range(3000):
        log_ = log_of(partition)
        if log_ is not None:
            break
        await asyncio.sleep(0.01)  # the replica manager opens the log from the same metadata change
    if log_ is None:
        log.error("No log for %s-%d: cannot load it", topic_name, partition)
        return None
    offset = log_.log_start_offset
    count = 0
    while offset < log_.log_end_offset:
        chunk, next_offset = await loop.run_in_executor(None, read_chunk, log_, offset)
        if next_offset <= offset:
            break
        for key, value in chunk:
            replay(key, value)
            count += 1
        offset = next_offset
    return count


def read_chunk(log_: Log, offset: int) -> tuple[list[KeyValue], int]:
    """The keys and values of the batches from `offset` (about LOAD_BUFFER_BYTES of them) and the next offset."""
    info = log_.read(offset, LOAD_BUFFER_BYTES, FetchIsolation.LOG_END, True)
    data = info.records.read_bytes() if hasattr(info.records, "read_bytes") else bytes(info.records)
    records: list[KeyValue] = []
    next_offset = offset
    for batch in iter_batches(data):
        next_offset = batch.last_offset + 1
        if getattr(batch, "is_control", False):
            continue
        for record in batch.records():
            if record.offset < offset:
                continue
            records.append((None if record.key is None else bytes(record.key),
                            None if record.value is None else bytes(record.value)))
    return records, next_offset
