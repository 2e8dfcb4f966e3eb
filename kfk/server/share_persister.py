"""SharePersister: how a partition leader's share partitions keep their state in the share coordinator (Kafka's
DefaultStatePersister and PersisterStateManager).

Every call names one share partition (group, topic id, partition). Its coordinator is the leader of partition
`partition_for("group:topicId:partition", share.coordinator.state.topic.num.partitions)` of __share_group_state
(created on first use, as FindCoordinator creates the coordinators' topics); this broker's own share coordinator is
called directly, another broker's with the state RPC over an inter-broker connection. NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE and a failed connection are retried, the leader looked up
again each time, until `timeout_ms` passed: a share coordinator moving (a broker restart, a leader change) delays a
share partition's first read or an acknowledgement, it does not fail them.

`set_start_offset` and `delete_state` are the admin operations (AlterShareGroupOffsets, DeleteShareGroupOffsets,
DeleteGroups of a share group): the share partition then starts from the new state when its leader next reads it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable

from kfk.common.internal_topics import SHARE_GROUP_STATE_TOPIC_NAME
from kfk.coordinator.partitioning import partition_for
from kfk.coordinator.share.coordinator import ReadResult
from kfk.coordinator.share.record_serde import SharePartitionKey, coordinator_key
from kfk.coordinator.share.service import ShareCoordinatorService
from kfk.coordinator.share.state_batches import DEFAULT_STATE_EPOCH, StateBatch
from kfk.errors import ErrorCode, KafkaError
from kfk.metadata.cache import MetadataCache
from kfk.protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest
from kfk.protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest
from kfk.protocol.messages.read_share_group_state import ReadShareGroupStateRequest
from kfk.protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryRequest
from kfk.protocol.messages.write_share_group_state import WriteShareGroupStateRequest
from kfk.server.inter_broker_channels import InterBrokerChannels

log = logging.getLogger("kfk.server.share_persister")

#: The errors after which the persister looks the coordinator up again and retries.
RETRIABLE = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                       ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NETWORK_EXCEPTION,
                       ErrorCode.REQUEST_TIMED_OUT})
RETRY_BACKOFF_S = 0.05

AutoCreateTopics = Callable[[list[str]], Awaitable[object]]


class SharePersister:
    def __init__(self, node_id: int, service: ShareCoordinatorService, metadata_cache: MetadataCache,
                 channels: InterBrokerChannels, auto_create_topics: AutoCreateTopics, num_partitions: int,
                 timeout_ms: int) -> None:
        self.node_id = node_id
        self.service = service
        self.metadata_cache = metadata_cache
        self.channels = channels
        self.auto_create_topics = auto_create_topics
        self.num_partitions = num_partitions
        self.timeout_ms = timeout_ms

    async def _coordinator(self, key: SharePartitionKey) -> int | None:
        """The broker leading the key's partition of __share_group_state (the topic created if missing)."""
        topic = self.metadata_cache.image.topic(SHARE_GROUP_STATE_TOPIC_NAME)
        if topic is None:
            await self.auto_create_topics([SHARE_GROUP_STATE_TOPIC_NAME])
            topic = self.metadata_cache.image.topic(SHARE_GROUP_STATE_TOPIC_NAME)
            if topic is None:
                return None
        registration = topic.partitions.get(partition_for(coordinator_key(key), len(topic.partitions)))
        return registration.leader if registration is not None and registration.leader >= 0 else None

    async def _call(self, key: SharePartitionKey, local: Callable[[], Awaitable[object]],
                    remote: Callable[[int], Awaitable[object]], error_of: Callable[[object], ErrorCode]) -> object:
        """`local()` on this broker's coordinator or `remote(broker)` on another's, retried while the coordinator
        moves; the last answer (or the error) when time is up."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_ms / 1000
        while True:
            try:
                broker = await self._coordinator(key)
                if broker is None:
                    answer: object = ErrorCode.COORDINATOR_NOT_AVAILABLE
                elif broker == self.node_id:
                    answer = await local()
                else:
                    answer = await remote(broker)
            except (KafkaError, OSError) as error:
                log.debug("Share state call for %s failed: %s", key, error)
                answer = getattr(error, "error_code", ErrorCode.NETWORK_EXCEPTION)
            error = answer if isinstance(answer, ErrorCode) else error_of(answer)
            if error not in RETRIABLE or loop.time() >= deadline:
                return answer
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def read_state(self, key: SharePartitionKey, leader_epoch: int, summary: bool = False) -> ReadResult:
        """The share partition's state (start offset -1: none stored); FENCED_LEADER_EPOCH when a later leader
        read it."""
        group_id, topic_id, partition = key

        async def local() -> ReadResult:
            return (self.service.read_summary if summary else self.service.read)(key, leader_epoch)

        async def remote(broker: int) -> ReadResult:
            if summary:
                request = ReadShareGroupStateSummaryRequest(group_id=group_id, topics=[
                    ReadShareGroupStateSummaryRequest.ReadStateSummaryData(topic_id=topic_id, partitions=[
                        ReadShareGroupStateSummaryRequest.PartitionData(partition=partition,
                                                                        leader_epoch=leader_epoch)])])
                response = await self.channels.request(broker, request, 1)
            else:
                request = ReadShareGroupStateRequest(group_id=group_id, topics=[
                    ReadShareGroupStateRequest.ReadStateData(topic_id=topic_id, partitions=[
                        ReadShareGroupStateRequest.PartitionData(partition=partition, leader_epoch=leader_epoch)])])
                response = await self.channels.request(broker, request, 0)
            (answer,) = response.results[0].partitions
            return ReadResult(ErrorCode(answer.error_code), answer.error_message, answer.state_epoch,
                              getattr(answer, "leader_epoch", -1), answer.start_offset,
                              tuple(StateBatch(batch.first_offset, batch.last_offset, batch.delivery_state,
                                               batch.delivery_count)
                                    for batch in getattr(answer, "state_batches", None) or ()),
                              getattr(answer, "delivery_complete_count", -1))

        answer = await self._call(key, local, remote, lambda result: result.error)
        return answer if isinstance(answer, ReadResult) else ReadResult(answer)

    async def write_state(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
                          state_batches: list[StateBatch], delivery_complete_count: int = -1) -> ErrorCode:
        group_id, topic_id, partition = key

        async def local() -> ErrorCode:
            return (await self.service.write(key, state_epoch, leader_epoch, start_offset, state_batches,
                                             delivery_complete_count))[0]

        async def remote(broker: int) -> ErrorCode:
            request = WriteShareGroupStateRequest(group_id=group_id, topics=[
                WriteShareGroupStateRequest.WriteStateData(topic_id=topic_id, partitions=[
                    WriteShareGroupStateRequest.PartitionData(
                        partition=partition, state_epoch=state_epoch, leader_epoch=leader_epoch,
                        start_offset=start_offset, delivery_complete_count=delivery_complete_count,
                        state_batches=[WriteShareGroupStateRequest.StateBatch(
                            first_offset=batch.first_offset, last_offset=batch.last_offset,
                            delivery_state=batch.delivery_state, delivery_count=batch.delivery_count)
                            for batch in state_batches])])])
            response = await self.channels.request(broker, request, 1)
            return ErrorCode(response.results[0].partitions[0].error_code)

        return await self._call(key, local, remote, lambda error: error)

    async def set_start_offset(self, key: SharePartitionKey, start_offset: int) -> ErrorCode:
        """Start the share partition afresh at `start_offset`, with no state batches (InitializeShareGroupState at
        the next state epoch): for AlterShareGroupOffsets, while the group is empty, as Kafka requires. The leader's
        copy is then stale: its next write is fenced (FENCED_STATE_EPOCH), and the next member to open a share
        session makes it read the new state."""
        group_id, topic_id, partition = key
        current = await self.read_state(key, -1, summary=True)
        if current.error not in (ErrorCode.NONE, ErrorCode.INVALID_REQUEST):  # INVALID_REQUEST: never initialized
            return current.error
        state_epoch = current.state_epoch + 1 if current.error == ErrorCode.NONE else DEFAULT_STATE_EPOCH

        async def local() -> ErrorCode:
            return (await self.service.initialize(key, state_epoch, start_offset))[0]

        async def remote(broker: int) -> ErrorCode:
            request = InitializeShareGroupStateRequest(group_id=group_id, topics=[
                InitializeShareGroupStateRequest.InitializeStateData(topic_id=topic_id, partitions=[
                    InitializeShareGroupStateRequest.PartitionData(partition=partition, state_epoch=state_epoch,
                                                                   start_offset=start_offset)])])
            response = await self.channels.request(broker, request, 0)
            return ErrorCode(response.results[0].partitions[0].error_code)

        return await self._call(key, local, remote, lambda error: error)

    async def delete_state(self, group_id: str, partitions: list[tuple[uuid.UUID, int]]) -> dict[
            tuple[uuid.UUID, int], ErrorCode]:
        """Delete a group's state of these (topic id, partition)s (DeleteShareGroupState): for DeleteGroups of a
        share group and DeleteShareGroupOffsets, while the group is empty. Each partition's error; the leaders'
        copies are dropped as with set_start_offset, and the partitions start again at share.auto.offset.reset."""
        results: dict[tuple[uuid.UUID, int], ErrorCode] = {}
        for topic_id, partition in partitions:
            key = (group_id, topic_id, partition)

            async def local(key: SharePartitionKey = key) -> ErrorCode:
                return (await self.service.delete(key))[0]

            async def remote(broker: int, topic_id: uuid.UUID = topic_id, partition: int = partition) -> ErrorCode:
                request = DeleteShareGroupStateRequest(group_id=group_id, topics=[
                    DeleteShareGroupStateRequest.DeleteStateData(topic_id=topic_id, partitions=[
                        DeleteShareGroupStateRequest.PartitionData(partition=partition)])])
                response = await self.channels.request(broker, request, 0)
                return ErrorCode(response.results[0].partitions[0].error_code)

            results[(topic_id, partition)] = await self._call(key, local, remote, lambda error: error)
        return results
