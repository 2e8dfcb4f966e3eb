"""GroupCoordinatorService: the asyncio shell around the GroupCoordinator state machine (Kafka's
GroupCoordinatorService + CoordinatorRuntime).

It owns nothing but plumbing:
- requests: each call runs the state machine on the event loop and awaits the answer it hands back (at once, after
  a write commits, or when a timer fires);
- writes: one queue and worker per __consumer_offsets partition. The worker appends everything queued as one batch
  (a busy group commits many offsets per append), waits until it is committed (acks=-1 through the partition layer,
  which answers once the high watermark passes it) and completes the writes in order;
- time: one asyncio timer armed at the state machine's next deadline; it calls `poll(now_ms)`;
- leadership: a MetadataCache listener. A partition of __consumer_offsets this broker now leads is loaded (its log
  read from the start to the log end and replayed, off the event loop for the file reads); one it lost is unloaded.

The partition layer is reached through two callables the broker supplies, so this package never imports the
replication layer (DESIGN.md's layers): `append(partition, records) -> error code` and `log_of(partition) -> Log`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kfk.common.clock import Clock
from kfk.common.internal_topics import GROUP_METADATA_TOPIC_NAME
from kfk.coordinator.group.config import GroupCoordinatorConfig
from kfk.coordinator.group.group_coordinator import CoordinatorWrite, GroupCoordinator, OffsetCommitPartition
from kfk.errors import ErrorCode, KafkaError
from kfk.metadata.image import MetadataImage
from kfk.protocol.messages.describe_groups import DescribeGroupsResponse
from kfk.protocol.messages.heartbeat import HeartbeatRequest
from kfk.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from kfk.protocol.messages.leave_group import LeaveGroupRequest
from kfk.protocol.messages.list_groups import ListGroupsResponse
from kfk.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from kfk.records import CompressionType, MemoryRecordsBuilder, iter_batches
from kfk.storage.fetch_data_info import FetchIsolation
from kfk.storage.log import Log

log = logging.getLogger("kfk.coordinator.group")

AppendFunction = Callable[[int, bytes], Awaitable[ErrorCode]]
LogLookup = Callable[[int], Log | None]

#: Bytes read per step when loading a partition.
LOAD_BUFFER_BYTES = 1024 * 1024


class GroupCoordinatorService:
    def __init__(self, config: GroupCoordinatorConfig, node_id: int, append: AppendFunction, log_of: LogLookup,
                 now_ms: Clock) -> None:
        self.config = config
        self.node_id = node_id
        self.coordinator = GroupCoordinator(config)
        self._append = append
        self._log_of = log_of
        self._now_ms = now_ms
        self._queues: dict[int, list[CoordinatorWrite]] = {}
        self._workers: dict[int, asyncio.Task] = {}
        self._loads: dict[int, asyncio.Task] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_deadline_ms: int | None = None
        self._stopped = False

    # -- plumbing ----------------------------------------------------------------------------------------------------

    def _after(self) -> None:
        """After any call into the state machine: queue its writes and re-arm the timer."""
        for write in self.coordinator.take_writes():
            self._queues.setdefault(write.partition, []).append(write)
            worker = self._workers.get(write.partition)
            if worker is None or worker.done():
                self._workers[write.partition] = asyncio.get_running_loop().create_task(
                    self._drain(write.partition))
        self._arm_timer()

    def _arm_timer(self) -> None:
        if self._stopped:
            return
        deadline_ms = self.coordinator.next_deadline_ms()
        if deadline_ms == self._timer_deadline_ms and self._timer is not None:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_deadline_ms = deadline_ms
        if deadline_ms is not None:
            delay_s = max(deadline_ms - self._now_ms(), 0) / 1000
            self._timer = asyncio.get_running_loop().call_later(delay_s, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_deadline_ms = None
        try:
            self.coordinator.poll(self._now_ms())
        except Exception:  # noqa: BLE001 - a bug in one timeout must not stop every other one
            log.exception("Group coordinator timer failed")
        self._after()

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
                    log.exception("Append to %s-%d failed", GROUP_METADATA_TOPIC_NAME, partition)
                    error = ErrorCode.UNKNOWN_SERVER_ERROR
            now_ms = self._now_ms()
            for write in writes:
                try:
                    self.coordinator.complete_write(write, error, now_ms)
                except Exception:  # noqa: BLE001
                    log.exception("Completing a group coordinator write failed")
            self._after()

    async def _call(self, operation: Callable[[Callable[[Any], None]], None]) -> Any:
        """Run `operation(respond)` and wait for the answer it gives."""
        future: asyncio.Future = asyncio.get_running_loop().create_future()

        def respond(response: Any) -> None:
            if not future.done():
                future.set_result(response)

        try:
            operation(respond)
        finally:
            self._after()
        return await future

    def stop(self) -> None:
        """Stop timers, loads and writers; requests still waiting get no answer (their connections close)."""
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
        for task in list(self._workers.values()) + list(self._loads.values()):
            task.cancel()

    # -- leadership --------------------------------------------------------------------------------------------------

    def on_metadata_update(self, previous: MetadataImage, current: MetadataImage) -> None:
        """MetadataCache listener: load the __consumer_offsets partitions this broker now leads, unload the others."""
        led = self._led_partitions(current)
        for partition in sorted(led - set(self.coordinator.partitions)):
            self.coordinator.begin_loading(partition)
            log.info("Loading %s-%d", GROUP_METADATA_TOPIC_NAME, partition)
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                continue
            self._loads[partition] = loop.create_task(self._load(partition))
        for partition in sorted(set(self.coordinator.partitions) - led):
            log.info("Unloading %s-%d", GROUP_METADATA_TOPIC_NAME, partition)
            task = self._loads.pop(partition, None)
            if task is not None:
                task.cancel()
            self.coordinator.unload(partition)
        try:
            self._after()
        except RuntimeError:
            pass  # no running loop (a listener called at subscription time outside the loop)

    def _led_partitions(self, image: MetadataImage) -> set[int]:
        topic = image.topic(GROUP_METADATA_TOPIC_NAME)
        if topic is None:
            return set()
        return {index for index, registration in topic.partitions.items() if registration.leader == self.node_id}

    async def _load(self, partition: int) -> None:
        """Replay the partition's log (read off the loop, a step at a time), then serve its groups."""
        loop = asyncio.get_running_loop()
        log_ = None
        for _ in range(3000):
            log_ = self._log_of(partition)
            if log_ is not None:
                break
            await asyncio.sleep(0.01)  # the replica manager opens the log from the same metadata change
        if log_ is None:
            log.error("No log for %s-%d: cannot load its groups", GROUP_METADATA_TOPIC_NAME, partition)
            return
        offset = log_.log_start_offset
        count = 0
        while True:
            end = log_.log_end_offset
            if offset >= end:
                break
            chunk, next_offset = await loop.run_in_executor(None, _read_chunk, log_, offset)
            if next_offset <= offset:
                break
            now_ms = self._now_ms()
            for key, value in chunk:
                self.coordinator.replay(partition, key, value, now_ms)
                count += 1
            offset = next_offset
        if partition in self._loads:
            del self._loads[partition]
        self.coordinator.complete_loading(partition, self._now_ms())
        log.info("Loaded %s-%d: %d records", GROUP_METADATA_TOPIC_NAME, partition, count)
        self._after()

    # -- requests ----------------------------------------------------------------------------------------------------

    async def join_group(self, request: JoinGroupRequest, api_version: int, client_id: str,
                         client_host: str) -> JoinGroupResponse:
        return await self._call(lambda respond: self.coordinator.join_group(
            request, api_version, client_id, client_host, self._now_ms(), respond))

    async def sync_group(self, request: SyncGroupRequest) -> SyncGroupResponse:
        return await self._call(lambda respond: self.coordinator.sync_group(request, self._now_ms(), respond))

    def heartbeat(self, request: HeartbeatRequest) -> ErrorCode:
        try:
            return self.coordinator.heartbeat(request, self._now_ms())
        finally:
            self._after()

    def leave_group(self, group_id: str, members: list[LeaveGroupRequest.MemberIdentity]) -> tuple[ErrorCode, list]:
        try:
            return self.coordinator.leave_group(group_id, members, self._now_ms())
        finally:
            self._after()

    async def commit_offsets(self, group_id: str, member_id: str, group_instance_id: str | None,
                             generation_id: int, retention_time_ms: int, partitions: list[OffsetCommitPartition],
                             api_version: int) -> dict[tuple[str, int], ErrorCode]:
        return await self._call(lambda respond: self.coordinator.commit_offsets(
            group_id, member_id, group_instance_id, generation_id, retention_time_ms, partitions, api_version,
            self._now_ms(), respond))

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None):
        return self.coordinator.fetch_offsets(group_id, topics)

    async def delete_offsets(self, group_id: str, topics: list[tuple[str, list[int]]]):
        return await self._call(lambda respond: self.coordinator.delete_offsets(
            group_id, topics, self._now_ms(), lambda error, results: respond((error, results))))

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        return await self._call(lambda respond: self.coordinator.delete_groups(group_ids, self._now_ms(), respond))

    def list_groups(self, states_filter: list[str], types_filter: list[str]
                    ) -> tuple[ErrorCode, list[ListGroupsResponse.ListedGroup]]:
        return self.coordinator.list_groups(states_filter, types_filter)

    def describe_group(self, group_id: str) -> DescribeGroupsResponse.DescribedGroup:
        return self.coordinator.describe_group(group_id)

    async def wait_until_loaded(self, group_id: str, timeout_ms: int) -> None:
        """Return once the group's partition is loaded (or is not this broker's, or `timeout_ms` passed)."""
        deadline_ms = self._now_ms() + timeout_ms
        while self.coordinator.coordinator_error(group_id) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS \
                and self._now_ms() < deadline_ms:
            await asyncio.sleep(0.01)


def _read_chunk(log_: Log, offset: int) -> tuple[list[tuple[bytes | None, bytes | None]], int]:
    """The keys and values of the batches from `offset` (about LOAD_BUFFER_BYTES of them) and the next offset."""
    info = log_.read(offset, LOAD_BUFFER_BYTES, FetchIsolation.LOG_END, True)
    data = info.records.read_bytes() if hasattr(info.records, "read_bytes") else bytes(info.records)
    records: list[tuple[bytes | None, bytes | None]] = []
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
