"""GroupCoordinatorService: the asyncio shell around the GroupCoordinator state machine (Kafka's
GroupCoordinatorService + CoordinatorRuntime).

It owns nothing but plumbing:
- requests: each call runs the state machine on the event loop and awaits the answer it hands back (at once, after
  a write commits, or when a timer fires);
- writes: one queue and worker per __consumer_offsets partition (kfk.coordinator.runtime.CoordinatorWriter); a
  TxnOffsetCommit's records are a transactional batch of their own, so a fenced producer's epoch fails that commit
  only;
- time: one asyncio timer (kfk.coordinator.runtime.DeadlineTimer) armed at the next deadline; it calls `poll(now_ms)`;
- leadership: a MetadataCache listener. A partition of __consumer_offsets this broker now leads is loaded (its log
  read from the start to the log end and replayed, off the event loop for the file reads); one it lost is unloaded;
- transactions: `complete_transaction` is called once a COMMIT/ABORT marker is appended to a partition.

The partition layer is reached through two callables the broker supplies (kfk.coordinator.runtime).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from kfk.common.clock import Clock
from kfk.common.internal_topics import GROUP_METADATA_TOPIC_NAME
from kfk.coordinator.group.config import GroupCoordinatorConfig
from kfk.coordinator.group.group_coordinator import (
    FetchedOffset,
    GroupCoordinator,
    OffsetCommitPartition,
)
from kfk.coordinator.runtime import (
    AppendFunction,
    CoordinatorWriter,
    DeadlineTimer,
    LoadedEntry,
    LoadedMarker,
    LogLookup,
    call,
    load_partition,
    wait_while_loading,
)
from kfk.errors import ErrorCode
from kfk.metadata.image import MetadataImage
from kfk.protocol.messages.consumer_group_describe import ConsumerGroupDescribeResponse
from kfk.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kfk.protocol.messages.describe_groups import DescribeGroupsResponse
from kfk.protocol.messages.heartbeat import HeartbeatRequest
from kfk.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from kfk.protocol.messages.leave_group import LeaveGroupRequest
from kfk.protocol.messages.list_groups import ListGroupsResponse
from kfk.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

log = logging.getLogger("kfk.coordinator.group")


class GroupCoordinatorService:
    def __init__(self, config: GroupCoordinatorConfig, node_id: int, append: AppendFunction, log_of: LogLookup,
                 now_ms: Clock) -> None:
        self.config = config
        self.node_id = node_id
        self.coordinator = GroupCoordinator(config)
        self._log_of = log_of
        self._now_ms = now_ms
        self._writer: CoordinatorWriter = CoordinatorWriter(
            GROUP_METADATA_TOPIC_NAME, append, now_ms, self.coordinator.complete_write, self._after)
        self._loads: dict[int, asyncio.Task] = {}
        self._timer = DeadlineTimer(now_ms, self._on_timer)

    # -- plumbing ----------------------------------------------------------------------------------------------------

    def _after(self) -> None:
        """After any call into the state machine: queue its writes and re-arm the timer."""
        for write in self.coordinator.take_writes():
            self._writer.submit(write)
        self._timer.arm(self.coordinator.next_deadline_ms())

    def _on_timer(self) -> None:
        try:
            self.coordinator.poll(self._now_ms())
        except Exception:  # noqa: BLE001 - a bug in one timeout must not stop every other one
            log.exception("Group coordinator timer failed")
        self._after()

    async def _call(self, operation: Callable[[Callable[[Any], None]], None]) -> Any:
        return await call(operation, self._after)

    def stop(self) -> None:
        """Stop timers, loads and writers; requests still waiting get no answer (their connections close)."""
        self._timer.stop()
        self._writer.stop()
        for task in self._loads.values():
            task.cancel()

    # -- leadership --------------------------------------------------------------------------------------------------

    def on_metadata_update(self, previous: MetadataImage, current: MetadataImage) -> None:
        """MetadataCache listener: load the __consumer_offsets partitions this broker now leads, unload the others,
        and drop the groups' offsets of deleted topics. The consumer protocol assigns from the current image."""
        self.coordinator.image = current
        self.coordinator.consumer_groups.on_metadata_update()
        deleted = {(topic.name, index) for topic in current.topics_deleted_since(previous)
                   for index in topic.partitions}
        if deleted:
            self.coordinator.on_partitions_deleted(deleted)
        led = self._led_partitions(current)
        for partition in sorted(led - set(self.coordinator.partitions)):
            self.coordinator.begin_loading(partition)
            log.debug("Loading %s-%d", GROUP_METADATA_TOPIC_NAME, partition)
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                continue
            self._loads[partition] = loop.create_task(self._load(partition))
        for partition in sorted(set(self.coordinator.partitions) - led):
            log.debug("Unloading %s-%d", GROUP_METADATA_TOPIC_NAME, partition)
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
        count = await load_partition(GROUP_METADATA_TOPIC_NAME, partition, self._log_of,
                                     lambda entry: self._replay(partition, entry))
        if partition in self._loads:
            del self._loads[partition]
        self.coordinator.complete_loading(partition, self._now_ms())
        log.debug("Loaded %s-%d: %d records and markers", GROUP_METADATA_TOPIC_NAME, partition, count)
        self._after()

    def _replay(self, partition: int, entry: LoadedEntry) -> None:
        replay_entry(self.coordinator, partition, entry, self._now_ms())

    # -- requests ----------------------------------------------------------------------------------------------------

    async def join_group(self, request: JoinGroupRequest, api_version: int, client_id: str,
                         client_host: str) -> JoinGroupResponse:
        return await self._call(lambda respond: self.coordinator.join_group(
            request, api_version, client_id, client_host, self._now_ms(), respond))

    async def sync_group(self, request: SyncGroupRequest) -> SyncGroupResponse:
        return await self._call(lambda respond: self.coordinator.sync_group(request, self._now_ms(), respond))

    async def consumer_group_heartbeat(self, request: ConsumerGroupHeartbeatRequest, api_version: int,
                                       client_id: str, client_host: str) -> ConsumerGroupHeartbeatResponse:
        return await self._call(lambda respond: self.coordinator.consumer_group_heartbeat(
            request, api_version, client_id, client_host, self._now_ms(), respond))

    def consumer_group_describe(self, group_id: str) -> ConsumerGroupDescribeResponse.DescribedGroup:
        return self.coordinator.consumer_group_describe(group_id)

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

    async def commit_transactional_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                           member_id: str, group_instance_id: str | None, generation_id: int,
                                           partitions: list[OffsetCommitPartition]
                                           ) -> dict[tuple[str, int], ErrorCode]:
        """TxnOffsetCommit: an error code per (topic, partition), once the transactional records are durable."""
        return await self._call(lambda respond: self.coordinator.commit_transactional_offsets(
            group_id, producer_id, producer_epoch, member_id, group_instance_id, generation_id, partitions,
            self._now_ms(), respond))

    def partition_for(self, group_id: str) -> int:
        """The __consumer_offsets partition holding the group."""
        return self.coordinator.partition_for(group_id)

    def complete_transaction(self, offsets_partition: int, producer_id: int, is_commit: bool) -> None:
        """A COMMIT/ABORT marker of `producer_id` was appended to __consumer_offsets-`offsets_partition`."""
        try:
            self.coordinator.complete_transaction(offsets_partition, producer_id, is_commit)
        finally:
            self._after()

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None, require_stable: bool = False,
                      member_id: str | None = None, member_epoch: int = -1
                      ) -> tuple[ErrorCode, list[tuple[str, list[FetchedOffset]]]]:
        return self.coordinator.fetch_offsets(group_id, topics, require_stable, member_id, member_epoch)

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
        await wait_while_loading(lambda: self.coordinator.coordinator_error(group_id), self._now_ms, timeout_ms)


def replay_entry(coordinator: GroupCoordinator, partition: int, entry: LoadedEntry, now_ms: int) -> None:
    """One entry of a loading partition: a record (of a transaction when it has a producer id) or the marker that
    ends a producer's transaction."""
    if isinstance(entry, LoadedMarker):
        coordinator.complete_transaction(partition, entry.producer_id, entry.is_commit)
    else:
        coordinator.replay(partition, entry.key, entry.value, now_ms, entry.producer_id)
