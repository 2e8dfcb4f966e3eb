"""Share groups' APIs (KIP-932): ShareGroupHeartbeat (76) and ShareGroupDescribe (77), answered by the group
coordinator's share groups (kfk.coordinator.group.share_group); ShareFetch (78) and ShareAcknowledge (79), answered
by the partition leaders' share partitions (kfk.replication.share_partition) through share sessions
(kfk.server.share_session).

- ShareGroupHeartbeat v1 (Kafka 4.1+: the member id is the client's own), ShareGroupDescribe v1.
- ShareFetch v1-v2: a member acquires records (each acquired by one member at a time) and piggy-backs the
  acknowledgements of what it had; v2 adds the acquire mode and lock renewal (RENEW acknowledgements).
  The read waits, like a Fetch, until min_bytes are readable or max_wait_ms passed.
- ShareAcknowledge v1-v2: acknowledgements alone (ACCEPT 1, RELEASE 2, REJECT 3, GAP 0; RENEW 4 from v2).
- DescribeShareGroupOffsets v0-v1, AlterShareGroupOffsets v0 and DeleteShareGroupOffsets v0 (the admin side):
  each partition's start offset and lag; set the start offsets of an empty group, or forget whole topics of it.

Authorization, as Kafka's: READ on the group for all four (DESCRIBE for ShareGroupDescribe), READ on each topic
fetched or acknowledged (TOPIC_AUTHORIZATION_FAILED for that partition); the offsets APIs: DESCRIBE on the group
and topic to describe, READ on both to alter, DELETE on the group and READ on the topic to delete. Share groups need the `share.version`
feature at 1 in Kafka 4.4: `share_groups_enabled` is the one check of it; finalized at 0, the four APIs answer
UNSUPPORTED_VERSION and FindCoordinator finds no share coordinator (COORDINATOR_NOT_AVAILABLE), while ApiVersions
still advertises every share API, as Apache Kafka 4.4.0 does once share.version is downgraded to 0.

Durable state: a share partition starts from what the share coordinator keeps of it (kfk.server.share_persister)
and writes what changed there before an acknowledgement is answered (kfk.replication.share_partition has which
changes); a share partition never initialized starts at share.auto.offset.reset.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Mapping
from typing import Callable

from kfk.common.config_types import ConfigResourceType
from kfk.common.structs import TopicPartition
from kfk.coordinator.group.service import GroupCoordinatorService
from kfk.coordinator.group.share_group import ShareGroupCoordinator
from kfk.coordinator.share.state_batches import UNINITIALIZED_START_OFFSET, StateBatch
from kfk.errors import ERROR_INFO, ErrorCode, KafkaError, error_for_code
from kfk.group_config import (GROUP_CONFIG_KEYS, SHARE_AUTO_OFFSET_RESET, SHARE_DELIVERY_COUNT_LIMIT,
                              SHARE_ISOLATION_LEVEL, SHARE_PARTITION_MAX_RECORD_LOCKS, SHARE_RECORD_LOCK_DURATION_MS, group_override,
                              parse_duration_ms)
from kfk.metadata.cache import MetadataCache
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.alter_share_group_offsets import (AlterShareGroupOffsetsRequest,
                                                             AlterShareGroupOffsetsResponse)
from kfk.protocol.messages.delete_share_group_offsets import (DeleteShareGroupOffsetsRequest,
                                                              DeleteShareGroupOffsetsResponse)
from kfk.protocol.messages.describe_share_group_offsets import (DescribeShareGroupOffsetsRequest,
                                                                DescribeShareGroupOffsetsResponse)
from kfk.protocol.messages.share_acknowledge import ShareAcknowledgeRequest, ShareAcknowledgeResponse
from kfk.protocol.messages.share_fetch import ShareFetchRequest, ShareFetchResponse
from kfk.protocol.messages.share_group_describe import ShareGroupDescribeRequest, ShareGroupDescribeResponse
from kfk.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse
from kfk.replication.fetch_params import READ_COMMITTED, READ_UNCOMMITTED, FetchParams, FetchPartitionRequest
from kfk.replication.replica_manager import ReplicaManager
from kfk.replication.share_partition import (SharePartition, SharePartitionConfig, aborted_batches,
                                             batch_offset_ranges)
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext
from kfk.server.handlers.groups import GROUP_OPERATIONS
from kfk.server.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED
from kfk.server.share_persister import SharePersister
from kfk.server.share_session import FINAL_EPOCH, SharePartitionKey, ShareSession, ShareSessionCache

log = logging.getLogger("kfk.server.share_groups")

SHARE_VERSION_FEATURE = "share.version"
#: kfk serves share groups unless share.version is finalized at 0. kfk does not finalize share.version itself
#: (controller/features.py: it does not serve its levels yet, and level 2 is Kafka 4.4's share-group DLQ), so a kfk
#: cluster has no share.version record, while an Apache Kafka cluster's files taken over keep theirs.
DEFAULT_SHARE_VERSION = 1
#: The group configs that override the broker's share-partition settings (group.share.*), by SharePartitionConfig
#: field: read from the image on every use, so a change applies at once, as in Kafka.
_PARTITION_OVERRIDES = {SHARE_RECORD_LOCK_DURATION_MS: "record_lock_duration_ms",
                        SHARE_DELIVERY_COUNT_LIMIT: "delivery_count_limit",
                        SHARE_PARTITION_MAX_RECORD_LOCKS: "max_record_locks"}
BY_DURATION = "by_duration:"


def share_groups_enabled(finalized_features: Mapping[str, int]) -> bool:
    """Whether the share APIs are served: share.version finalized at 1 or more (kfk's default when unset)."""
    return finalized_features.get(SHARE_VERSION_FEATURE, DEFAULT_SHARE_VERSION) >= 1


#: The errors that tell a client to look for the partition's leader: with them goes the leader the broker knows.
_LEADER_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


def _leader_on_error(leader_class: type, error: ErrorCode, leader: tuple[int, int]):
    """current_leader, as Kafka fills it: the leader after a leadership error, else left at its zero default."""
    if error in _LEADER_ERRORS:
        return leader_class(leader_id=leader[0], leader_epoch=leader[1])
    return leader_class()


class ShareGroupsHandler:
    def __init__(self, share_groups: ShareGroupCoordinator, group_coordinator: GroupCoordinatorService,
                 replica_manager: ReplicaManager, metadata_cache: MetadataCache, partition_config: SharePartitionConfig,
                 now_ms: Callable[[], int], persister: SharePersister | None = None,
                 auth: RequestAuthorizer = ALLOW_ALL, max_share_sessions: int = 2000) -> None:
        self.share_groups = share_groups
        self.group_coordinator = group_coordinator
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.partition_config = partition_config
        self.now_ms = now_ms
        self.auth = auth
        self.sessions = ShareSessionCache(max_share_sessions)
        self.partitions: dict[tuple[str, TopicPartition], SharePartition] = {}
        #: Durable state (None: in memory only, for tests of the handler alone).
        self.persister = persister
        self._initializing: dict[tuple[str, TopicPartition], asyncio.Future] = {}
        #: Set (and replaced) whenever records go back to a share partition or its start offset moves: what a
        #: ShareFetch waits for while every record lock of its partitions is taken (see _wait_for_locks).
        self._locks_freed = asyncio.Event()
        #: Sessions being closed because their connection closed (kept until done: the loop holds tasks weakly).
        self._closing: set[asyncio.Task] = set()
        share_groups.on_delete.append(self._forget_group)

    def _forget_group(self, group_id: str) -> None:
        """A deleted share group's partitions start afresh if the group comes back, as in Kafka."""
        for key in [key for key in self.partitions if key[0] == group_id]:
            del self.partitions[key]

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.SHARE_GROUP_HEARTBEAT, self.heartbeat)
        dispatcher.register(ApiKey.SHARE_GROUP_DESCRIBE, self.describe)
        dispatcher.register(ApiKey.SHARE_FETCH, self.share_fetch)
        dispatcher.register(ApiKey.SHARE_ACKNOWLEDGE, self.share_acknowledge)
        dispatcher.register(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, self.describe_offsets)
        dispatcher.register(ApiKey.ALTER_SHARE_GROUP_OFFSETS, self.alter_offsets)
        dispatcher.register(ApiKey.DELETE_SHARE_GROUP_OFFSETS, self.delete_offsets)

    def _may(self, context: RequestContext, operation: AclOperation, kind: ResourceType, name: str) -> bool:
        return self.auth.authorize(context, operation, kind, name)

    def _disabled(self) -> bool:
        """share.version finalized at 0: the share APIs answer UNSUPPORTED_VERSION, as Kafka's."""
        return not share_groups_enabled(self.metadata_cache.image.features)

    def _another_type(self, group_id: str) -> bool:
        """Whether `group_id` is a group of the coordinator's other kinds (classic or consumer)."""
        return group_id in self.group_coordinator.coordinator.groups.groups

    # -- the coordinator's ---------------------------------------------------------------------------------------

    async def heartbeat(self, context: RequestContext,
                        request: ShareGroupHeartbeatRequest) -> ShareGroupHeartbeatResponse:
        if self._disabled():
            return ShareGroupHeartbeatResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
        if not self._may(context, AclOperation.READ, ResourceType.GROUP, request.group_id):
            return ShareGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        error = self.group_coordinator.coordinator.coordinator_error(request.group_id)
        if error != ErrorCode.NONE:
            return ShareGroupHeartbeatResponse(error_code=error)
        if self._another_type(request.group_id):
            return ShareGroupHeartbeatResponse(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                error_message=f"Group {request.group_id} is not a share group.")
        return self.share_groups.heartbeat(request, context.client_id or "", f"/{context.client_host}")

    async def describe(self, context: RequestContext,
                       request: ShareGroupDescribeRequest) -> ShareGroupDescribeResponse:
        if self._disabled():
            return ShareGroupDescribeResponse(groups=[ShareGroupDescribeResponse.DescribedGroup(
                error_code=ErrorCode.UNSUPPORTED_VERSION, group_id=group_id) for group_id in request.group_ids])
        image = self.metadata_cache.image

        def topic_name(topic_id: uuid.UUID) -> str:
            topic = image.topics_by_id.get(topic_id)
            return topic.name if topic is not None else ""

        described = []
        for group_id in request.group_ids:
            if not self._may(context, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
                described.append(ShareGroupDescribeResponse.DescribedGroup(
                    error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id))
                continue
            error = self.group_coordinator.coordinator.coordinator_error(group_id)
            if error != ErrorCode.NONE:
                described.append(ShareGroupDescribeResponse.DescribedGroup(error_code=error, group_id=group_id))
                continue
            group = self.share_groups.describe(group_id, topic_name)
            if group.error_code == ErrorCode.NONE:
                group.authorized_operations = AUTHORIZED_OPERATIONS_OMITTED
                if request.include_authorized_operations:
                    group.authorized_operations = self.auth.authorized_operations(
                        context, ResourceType.GROUP, group_id, GROUP_OPERATIONS)
            described.append(group)
        return ShareGroupDescribeResponse(groups=described)

    async def describe_offsets(self, context: RequestContext, request: DescribeShareGroupOffsetsRequest
                               ) -> DescribeShareGroupOffsetsResponse:
        """Each partition's share-partition start offset and lag (the records after it not yet done with), -1 for
        a partition the group has not read. kfk's share partitions live on their leaders, so this broker answers
        for the partitions it leads (every partition on one broker)."""
        Response = DescribeShareGroupOffsetsResponse
        image = self.metadata_cache.image
        groups = []
        for group in request.groups:
            error = ErrorCode.UNSUPPORTED_VERSION if self._disabled() else ErrorCode.NONE
            if error == ErrorCode.NONE and not self._may(context, AclOperation.DESCRIBE, ResourceType.GROUP,
                                                         group.group_id):
                error = ErrorCode.GROUP_AUTHORIZATION_FAILED
            if error == ErrorCode.NONE:
                error = self.group_coordinator.coordinator.coordinator_error(group.group_id)
            if error != ErrorCode.NONE:
                groups.append(Response.DescribeShareGroupOffsetsResponseGroup(group_id=group.group_id,
                                                                               error_code=error))
                continue
            if group.topics is None:
                known = {tp for group_id, tp in self.partitions if group_id == group.group_id}
                known.update(self._stored_partitions(group.group_id))
                names = sorted({tp.topic for tp in known})
                wanted = [(name, sorted(tp.partition for tp in known if tp.topic == name)) for name in names]
            else:
                wanted = [(topic.topic_name, list(topic.partitions)) for topic in group.topics]
            topics = []
            for name, partitions in wanted:
                topic = image.topic(name)
                if topic is None or not self._may(context, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                    error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if topic is None \
                        else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    topics.append(Response.DescribeShareGroupOffsetsResponseTopic(topic_name=name, partitions=[
                        Response.DescribeShareGroupOffsetsResponsePartition(partition_index=index, start_offset=-1,
                                                                            leader_epoch=-1, error_code=error)
                        for index in partitions]))
                    continue
                topics.append(Response.DescribeShareGroupOffsetsResponseTopic(
                    topic_name=name, topic_id=topic.topic_id,
                    partitions=[await self._offsets_of(group.group_id, TopicPartition(name, index))
                                for index in partitions]))
            groups.append(Response.DescribeShareGroupOffsetsResponseGroup(group_id=group.group_id, topics=topics))
        return Response(groups=groups)

    def _offsets_request_error(self, context: RequestContext, group_id: str, operation: AclOperation
                               ) -> ErrorCode:
        """The group-level checks AlterShareGroupOffsets and DeleteShareGroupOffsets share, in Kafka's order."""
        if self._disabled():
            return ErrorCode.UNSUPPORTED_VERSION
        if not self._may(context, operation, ResourceType.GROUP, group_id):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        return self.group_coordinator.coordinator.coordinator_error(group_id)

    async def alter_offsets(self, context: RequestContext, request: AlterShareGroupOffsetsRequest
                            ) -> AlterShareGroupOffsetsResponse:
        """Set the share-partition start offsets of an empty share group (created if missing, as in Kafka). Each
        partition answers alone: TOPIC_AUTHORIZATION_FAILED without READ on its topic, UNKNOWN_TOPIC_OR_PARTITION
        when the topic or the partition does not exist. The offset is taken as given, as Kafka's coordinator
        takes it (no check against the log)."""
        Response = AlterShareGroupOffsetsResponse
        group_id = request.group_id
        error = self._offsets_request_error(context, group_id, AclOperation.READ)
        if error == ErrorCode.NONE and not request.topics:
            return Response()
        if error == ErrorCode.NONE and self._another_type(group_id):
            return Response(error_code=ErrorCode.GROUP_ID_NOT_FOUND,
                            error_message=f"Group {group_id} is not a share group.")
        if error == ErrorCode.NONE:
            error = self.share_groups.offsets_alterable(group_id)
        if error != ErrorCode.NONE:
            return Response(error_code=error, error_message=ERROR_INFO[error].message)
        image = self.metadata_cache.image
        responses = []
        for topic in request.topics:
            found = image.topic(topic.topic_name)
            topic_error = ErrorCode.NONE
            if not self._may(context, AclOperation.READ, ResourceType.TOPIC, topic.topic_name):
                topic_error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif found is None:
                topic_error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            partitions = []
            for partition in topic.partitions:
                partition_error = topic_error
                if partition_error == ErrorCode.NONE and partition.partition_index not in found.partitions:
                    partition_error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if partition_error == ErrorCode.NONE:
                    partition_error = await self.reset_start_offset(
                        group_id, TopicPartition(topic.topic_name, partition.partition_index), partition.start_offset)
                partitions.append(Response.AlterShareGroupOffsetsResponsePartition(
                    partition_index=partition.partition_index, error_code=partition_error,
                    error_message=ERROR_INFO[partition_error].message if partition_error else None))
            responses.append(Response.AlterShareGroupOffsetsResponseTopic(
                topic_name=topic.topic_name, topic_id=found.topic_id if found is not None and not topic_error
                else uuid.UUID(int=0), partitions=partitions))
        return Response(responses=responses)

    async def reset_start_offset(self, group_id: str, topic_partition: TopicPartition,
                                 start_offset: int) -> ErrorCode:
        """AlterShareGroupOffsets applied to one share partition: it starts afresh at `start_offset` (the group is
        empty: no member holds records), in the share coordinator's state (a new state epoch), which the partition's
        leader reads again when a member next opens a share session. Without a share coordinator, in memory."""
        self.partitions.pop((group_id, topic_partition), None)
        if self.persister is None:
            self.partitions[(group_id, topic_partition)] = SharePartition(
                self._partition_config(group_id), start_offset, self._leader(topic_partition)[1])
            return ErrorCode.NONE
        return await self.persister.set_start_offset(self._state_key(group_id, topic_partition), start_offset)

    async def delete_offsets(self, context: RequestContext, request: DeleteShareGroupOffsetsRequest
                             ) -> DeleteShareGroupOffsetsResponse:
        """Forget an empty share group's state of whole topics: a topic the group has no state for answers
        UNKNOWN_TOPIC_OR_PARTITION with Kafka's "There is no offset information to delete."."""
        Response = DeleteShareGroupOffsetsResponse
        group_id = request.group_id
        error = self._offsets_request_error(context, group_id, AclOperation.DELETE)
        if error == ErrorCode.NONE and not request.topics:
            return Response()
        message = None
        if error == ErrorCode.NONE:
            error = self.share_groups.offsets_deletable(group_id)
            if error == ErrorCode.GROUP_ID_NOT_FOUND:
                message = f"Group {group_id} not found."
        if error != ErrorCode.NONE:
            return Response(error_code=error, error_message=message or ERROR_INFO[error].message)
        image = self.metadata_cache.image
        responses = []
        for topic in request.topics:
            found = image.topic(topic.topic_name)
            topic_error, message = ErrorCode.NONE, None
            if not self._may(context, AclOperation.READ, ResourceType.TOPIC, topic.topic_name):
                topic_error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif found is None:
                topic_error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif not await self.forget_topic(group_id, topic.topic_name):
                topic_error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "There is no offset information to delete."
            responses.append(Response.DeleteShareGroupOffsetsResponseTopic(
                topic_name=topic.topic_name, topic_id=found.topic_id if topic_error == ErrorCode.NONE
                else uuid.UUID(int=0), error_code=topic_error,
                error_message=message or (ERROR_INFO[topic_error].message if topic_error else None)))
        return Response(responses=responses)

    async def forget_topic(self, group_id: str, topic: str) -> bool:
        """DeleteShareGroupOffsets applied: the group's share partitions of `topic` (held here, or stored by this
        broker's share coordinator) are gone, their stored state deleted; the group starts them afresh at
        share.auto.offset.reset if it reads the topic again. False if there were none."""
        keys = [key for key in self.partitions if key[0] == group_id and key[1].topic == topic]
        for key in keys:
            del self.partitions[key]
        held = {key[1] for key in keys} | {tp for tp in self._stored_partitions(group_id) if tp.topic == topic}
        found = self.metadata_cache.image.topic(topic)
        if held and found is not None and self.persister is not None:
            await self.persister.delete_state(group_id, [(found.topic_id, tp.partition) for tp in sorted(held)])
        return bool(held)

    def _stored_partitions(self, group_id: str) -> set[TopicPartition]:
        """The group's partitions whose state this broker's share coordinator holds (with the in-memory share
        partitions, what a DescribeShareGroupOffsets of all topics lists; a restarted broker's group has only
        these)."""
        if self.persister is None:
            return set()
        found = set()
        for stored_group, topic_id, partition in list(self.persister.service.coordinator.states):
            if stored_group == group_id and (topic_partition := self._topic_partition(topic_id, partition)):
                found.add(topic_partition)
        return found

    async def _offsets_of(self, group_id: str, topic_partition: TopicPartition
                          ) -> DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponsePartition:
        """The leader's share partition when this broker leads it and has it started, else the share
        coordinator's stored summary; the lag from this broker's log when it leads the partition."""
        Partition = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponsePartition
        share_partition = self.partitions.get((group_id, topic_partition))
        hosted = self.replica_manager.get_partition(topic_partition)
        leader = hosted is not None and hosted.is_leader
        if share_partition is not None and leader:
            start_offset, leader_epoch = share_partition.start_offset, share_partition.leader_epoch
            done = share_partition.done_in_flight()
        else:
            summary = None
            if self.persister is not None:
                summary = await self.persister.read_state(self._state_key(group_id, topic_partition), -1, True)
            if summary is None or summary.error != ErrorCode.NONE \
                    or summary.start_offset == UNINITIALIZED_START_OFFSET:
                return Partition(partition_index=topic_partition.partition, start_offset=-1, leader_epoch=0)
            start_offset, leader_epoch = summary.start_offset, max(summary.leader_epoch, 0)
            done = max(summary.delivery_complete_count, 0)
        if not leader:
            return Partition(partition_index=topic_partition.partition, start_offset=start_offset,
                             leader_epoch=leader_epoch)
        high_watermark = hosted.log.fetch_offset_snapshot().high_watermark
        return Partition(partition_index=topic_partition.partition, start_offset=start_offset,
                         leader_epoch=leader_epoch, lag=high_watermark - start_offset - done)

    # -- the partition leaders' ----------------------------------------------------------------------------------

    def _topic_partition(self, topic_id: uuid.UUID, partition: int) -> TopicPartition | None:
        topic = self.metadata_cache.image.topics_by_id.get(topic_id)
        return TopicPartition(topic.name, partition) if topic is not None else None

    async def _share_partition(self, group_id: str, topic_partition: TopicPartition,
                               revalidate: bool = False) -> SharePartition:
        """The group's share partition: started on first use (and on a new leader epoch) from the state the share
        coordinator keeps, or at the group's share.auto.offset.reset when it keeps none. With `revalidate` (a
        member opening its share session) the stored state epoch is checked first: the admin tools start a share
        partition afresh (set_start_offset, delete_state) while the group is empty, and its leader then drops what
        it had. Raises when this broker does not lead the partition, or the stored state cannot be read."""
        partition = self.replica_manager.get_partition_or_error(topic_partition)
        log_ = partition.local_log_with_epoch(-1, require_leader=True)
        key = (group_id, topic_partition)
        share_partition = self.partitions.get(key)
        if share_partition is not None and share_partition.leader_epoch != partition.leader_epoch:
            # Led elsewhere in between: the share coordinator has the state that leader wrote.
            del self.partitions[key]
            share_partition = None
        if share_partition is not None and revalidate and self.persister is not None:
            summary = await self.persister.read_state(self._state_key(group_id, topic_partition), -1, True)
            if summary.error == ErrorCode.INVALID_REQUEST or (summary.error == ErrorCode.NONE and
                                                              summary.state_epoch != share_partition.state_epoch):
                self.partitions.pop(key, None)
                share_partition = None
        if share_partition is None:
            pending = self._initializing.get(key)
            if pending is None:
                pending = self._initializing[key] = asyncio.ensure_future(
                    self._initialize(group_id, topic_partition, partition.leader_epoch, log_))
                pending.add_done_callback(lambda done: self._initializing.pop(key, None)
                                          if self._initializing.get(key) is done else None)
            share_partition = await asyncio.shield(pending)
        share_partition.config = self._partition_config(group_id)
        share_partition.expire_locks(self.now_ms())
        await self._persist(group_id, topic_partition, share_partition)
        return share_partition

    def _state_key(self, group_id: str, topic_partition: TopicPartition) -> tuple[str, uuid.UUID, int]:
        topic = self.metadata_cache.image.topic(topic_partition.topic)
        if topic is None:
            raise error_for_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)(f"Unknown topic {topic_partition.topic}")
        return group_id, topic.topic_id, topic_partition.partition

    async def _initialize(self, group_id: str, topic_partition: TopicPartition, leader_epoch: int,
                          log_) -> SharePartition:
        offsets = log_.fetch_offset_snapshot()
        if self.persister is None:
            state_epoch, start, batches = 0, UNINITIALIZED_START_OFFSET, ()
        else:
            key = self._state_key(group_id, topic_partition)
            state = await self.persister.read_state(key, leader_epoch)
            if state.error == ErrorCode.INVALID_REQUEST:  # never initialized: the group starts reading here
                state = dataclasses.replace(state, error=ErrorCode.NONE, start_offset=UNINITIALIZED_START_OFFSET,
                                            state_batches=())
            if state.error != ErrorCode.NONE:
                log.info("Reading the share state of %s %s failed: %s", group_id, topic_partition, state.error.name)
                raise error_for_code(state.error)(state.error_message or state.error.name)
            state_epoch, start, batches = state.state_epoch, state.start_offset, state.state_batches
        initialized = start != UNINITIALIZED_START_OFFSET
        if not initialized:
            start = self._reset_offset(group_id, log_, offsets.log_start_offset, offsets.high_watermark)
        share_partition = SharePartition(self._partition_config(group_id), max(start, offsets.log_start_offset),
                                         leader_epoch, state_epoch)
        share_partition.restore(batches)
        if not initialized or share_partition.start_offset != start:
            share_partition.mark_changed(())  # the start offset chosen here is the state from now on
        key = (group_id, topic_partition)
        if self.partitions.get(key) is None or self.partitions[key].leader_epoch != leader_epoch:
            self.partitions[key] = share_partition
        return self.partitions[key]

    def _reset_offset(self, group_id: str, log_, log_start_offset: int, high_watermark: int) -> int:
        """Where a share partition with no stored state starts: the group's share.auto.offset.reset (earliest,
        latest, or by_duration:<ISO-8601 duration>, the first record at most that old, else the high watermark)."""
        reset = self.metadata_cache.image.config(ConfigResourceType.GROUP, group_id).get(
            SHARE_AUTO_OFFSET_RESET, GROUP_CONFIG_KEYS[SHARE_AUTO_OFFSET_RESET].key.default)
        if reset == "earliest":
            return log_start_offset
        if reset.startswith(BY_DURATION):
            duration_ms = parse_duration_ms(reset[len(BY_DURATION):])
            found = log_.offset_for_timestamp(self.now_ms() - (duration_ms or 0))
            return min(found.offset, high_watermark) if found is not None else high_watermark
        return high_watermark

    def _read_committed(self, group_id: str) -> bool:
        """The group's share.isolation.level: read_committed reads up to the last stable offset and never delivers
        the records of aborted transactions (they are archived)."""
        level = self.metadata_cache.image.config(ConfigResourceType.GROUP, group_id).get(
            SHARE_ISOLATION_LEVEL, GROUP_CONFIG_KEYS[SHARE_ISOLATION_LEVEL].key.default)
        return level == "read_committed"

    def _partition_config(self, group_id: str) -> SharePartitionConfig:
        """The broker's share-partition settings with the group's own configs over them."""
        overrides = self.metadata_cache.image.config(ConfigResourceType.GROUP, group_id)
        changes = {field: group_override(overrides, key, None) for key, field in _PARTITION_OVERRIDES.items()
                   if key in overrides}
        return dataclasses.replace(self.partition_config, **changes) if changes else self.partition_config

    async def _persist(self, group_id: str, topic_partition: TopicPartition,
                       share_partition: SharePartition) -> ErrorCode:
        """Write what changed in the share partition to the share coordinator; on failure the changes stay to be
        written with the next write, and the error is the caller's answer."""
        if self.persister is None:
            share_partition.take_state_update()  # nowhere to keep it
            return ErrorCode.NONE

        async def write(start_offset: int, batches: list[tuple[int, int, int, int]]) -> ErrorCode:
            try:
                key = self._state_key(group_id, topic_partition)
            except KafkaError as error:
                return error.error_code
            return await self.persister.write_state(key, share_partition.state_epoch, share_partition.leader_epoch,
                                                    start_offset, [StateBatch(*batch) for batch in batches],
                                                    share_partition.done_in_flight())

        error = await share_partition.write_state(write)
        if error in (ErrorCode.FENCED_STATE_EPOCH, ErrorCode.FENCED_LEADER_EPOCH):
            # The state was started afresh (the admin tools) or a later leader took over: what this broker holds is
            # stale; the next use reads the stored state again.
            log.info("The share state of %s %s moved on (%s): reading it again", group_id, topic_partition,
                     error.name)
            if self.partitions.get((group_id, topic_partition)) is share_partition:
                del self.partitions[(group_id, topic_partition)]
        elif error != ErrorCode.NONE:
            log.warning("Writing the share state of %s %s failed: %s", group_id, topic_partition, error.name)
        return error

    def _leader(self, topic_partition: TopicPartition) -> tuple[int, int]:
        registration = self.metadata_cache.image.partition(topic_partition.topic, topic_partition.partition)
        return (registration.leader, registration.leader_epoch) if registration is not None else (-1, -1)

    async def _acknowledge(self, context: RequestContext, group_id: str, member_id: str, topic_id: uuid.UUID,
                           partition: int, batches: list) -> ErrorCode:
        topic_partition = self._topic_partition(topic_id, partition)
        if topic_partition is None:
            return ErrorCode.UNKNOWN_TOPIC_ID
        if not self._may(context, AclOperation.READ, ResourceType.TOPIC, topic_partition.topic):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED
        try:
            share_partition = await self._share_partition(group_id, topic_partition)
        except KafkaError as error:
            return error.error_code
        error = share_partition.acknowledge(member_id, [(batch.first_offset, batch.last_offset,
                                                         list(batch.acknowledge_types)) for batch in batches],
                                            self.now_ms())
        if error != ErrorCode.NONE:
            return error
        self._free_locks()
        # Answered once the share coordinator has the new state (as Kafka's acknowledgement waits for its write).
        return await self._persist(group_id, topic_partition, share_partition)

    def connection_closed(self, listener_name: str, client_host: str, client_port: int) -> None:
        """A client's connection closed: the share sessions it opened end, and what their members held goes back
        to the others at once (Kafka's share session cache on a disconnect), not when the locks expire."""
        for session in self.sessions.opened_on((listener_name, client_host, client_port)):
            task = asyncio.get_running_loop().create_task(self._close(session))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)

    async def _close(self, session: ShareSession) -> None:
        """The member's last request (or its connection closed): what it still holds goes back to the others."""
        if not self.sessions.close(session):
            return
        for topic_id, partition in session.partitions:
            topic_partition = self._topic_partition(topic_id, partition)
            share_partition = self.partitions.get((session.group_id, topic_partition)) if topic_partition else None
            if share_partition is not None:
                share_partition.release_member(session.member_id)
                self._free_locks()
                await self._persist(session.group_id, topic_partition, share_partition)

    async def share_fetch(self, context: RequestContext, request: ShareFetchRequest) -> ShareFetchResponse:
        if self._disabled():
            return ShareFetchResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
        group_id, member_id = request.group_id or "", request.member_id or ""
        lock_ms = self._partition_config(group_id).record_lock_duration_ms
        if not self._may(context, AclOperation.READ, ResourceType.GROUP, group_id):
            return ShareFetchResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        if request.share_session_epoch == FINAL_EPOCH and any(topic.partitions for topic in request.topics):
            return ShareFetchResponse(error_code=ErrorCode.INVALID_REQUEST, error_message="The final share fetch "
                                      "request of a share session cannot fetch partitions.")
        error, session = self.sessions.open_or_advance(
            group_id, member_id, request.share_session_epoch, True,
            (context.listener_name, context.client_host, context.client_port))
        if session is None:
            return ShareFetchResponse(error_code=error)
        for forgotten in request.forgotten_topics_data:
            for partition in forgotten.partitions:
                session.partitions.pop((forgotten.topic_id, partition), None)
        acknowledged: dict[SharePartitionKey, ErrorCode] = {}
        for topic in request.topics:
            for partition in topic.partitions:
                key = (topic.topic_id, partition.partition_index)
                session.partitions[key] = None
                if partition.acknowledgement_batches:
                    acknowledged[key] = await self._acknowledge(context, group_id, member_id, topic.topic_id,
                                                          partition.partition_index,
                                                          partition.acknowledgement_batches)
        if request.share_session_epoch == FINAL_EPOCH:
            await self._close(session)
            return ShareFetchResponse(acquisition_lock_timeout_ms=lock_ms,
                                      responses=self._answers(acknowledged, {}))
        fetched = await self._fetch(context, request, group_id, member_id, list(session.partitions))
        return ShareFetchResponse(acquisition_lock_timeout_ms=lock_ms, responses=self._answers(acknowledged, fetched))

    async def _fetch(self, context: RequestContext, request: ShareFetchRequest, group_id: str, member_id: str,
                     keys: list[SharePartitionKey]) -> dict[SharePartitionKey, ShareFetchResponse.PartitionData]:
        answers: dict[SharePartitionKey, ShareFetchResponse.PartitionData] = {}
        reads: list[tuple[SharePartitionKey, TopicPartition]] = []
        for key in keys:
            topic_partition = self._topic_partition(*key)
            if topic_partition is None:
                answers[key] = ShareFetchResponse.PartitionData(partition_index=key[1], records=b"",
                                                                error_code=ErrorCode.UNKNOWN_TOPIC_ID)
                continue
            if not self._may(context, AclOperation.READ, ResourceType.TOPIC, topic_partition.topic):
                answers[key] = ShareFetchResponse.PartitionData(partition_index=key[1], records=b"",
                                                                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                continue
            try:
                await self._share_partition(group_id, topic_partition, revalidate=request.share_session_epoch == 0)
            except KafkaError as error:
                answers[key] = ShareFetchResponse.PartitionData(
                    partition_index=key[1], error_code=error.error_code, records=b"",
                    current_leader=_leader_on_error(ShareFetchResponse.LeaderIdAndEpoch, error.error_code,
                                                    self._leader(topic_partition)))
                continue
            reads.append((key, topic_partition))
        if not reads:
            return answers
        max_bytes = max(request.max_bytes, 1)
        max_wait_ms = await self._wait_for_locks([self.partitions[(group_id, topic_partition)]
                                                  for _, topic_partition in reads], request.max_wait_ms)
        read_committed = self._read_committed(group_id)
        params = FetchParams(-1, max_wait_ms, request.min_bytes, max_bytes,
                             READ_COMMITTED if read_committed else READ_UNCOMMITTED)
        requests = [FetchPartitionRequest(topic_partition,
                                          self.partitions[(group_id, topic_partition)].next_fetch_offset(),
                                          max_bytes) for _, topic_partition in reads]
        results = await self.replica_manager.fetch_messages(params, requests)
        max_records = request.max_records if request.max_records > 0 else \
            self._partition_config(group_id).max_record_locks
        now = self.now_ms()
        for (key, topic_partition), result in zip(reads, results):
            answer = ShareFetchResponse.PartitionData(
                partition_index=key[1], error_code=result.error, error_message=result.error_message, records=b"",
                current_leader=_leader_on_error(ShareFetchResponse.LeaderIdAndEpoch, result.error,
                                                (result.leader_id, result.leader_epoch)))
            answers[key] = answer
            if result.error != ErrorCode.NONE or not result.size or max_records <= 0:
                continue
            data = result.records.read_bytes()
            batches = list(batch_offset_ranges(data))
            aborted = aborted_batches(data, batches, [
                (txn.producer_id, txn.first_offset, txn.last_offset) for txn in result.aborted_transactions or ()
            ]) if read_committed else ()
            acquired = self.partitions[(group_id, topic_partition)].acquire(member_id, batches, max_records, now,
                                                                            aborted)
            if not acquired:
                continue
            max_records -= sum(last - first + 1 for first, last, _ in acquired)
            # Only the batches that hold acquired records go out.
            wanted = [(start, end) for base, last, start, end in batches
                      if any(base <= last_acquired and last >= first for first, last_acquired, _ in acquired)]
            answer.records = b"".join(data[start:end] for start, end in wanted)
            answer.acquired_records = [ShareFetchResponse.AcquiredRecords(first_offset=first, last_offset=last,
                                                                          delivery_count=count)
                                       for first, last, count in acquired]
        return answers

    def _free_locks(self) -> None:
        freed, self._locks_freed = self._locks_freed, asyncio.Event()
        freed.set()

    async def _wait_for_locks(self, share_partitions: list[SharePartition], max_wait_ms: int) -> int:
        """While every partition fetched has all its record locks taken, wait (up to max_wait_ms) for an
        acknowledgement or release to free some, as Kafka's delayed share fetch waits; a log read would only wait
        for new records, which could not be acquired either. Returns what is left of max_wait_ms for the read."""
        if max_wait_ms <= 0 or not all(share_partition.locks_exhausted() for share_partition in share_partitions):
            return max_wait_ms
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            await asyncio.wait_for(self._locks_freed.wait(), max_wait_ms / 1000)
        except asyncio.TimeoutError:
            return 0
        return max(int(max_wait_ms - (loop.time() - started) * 1000), 0)

    @staticmethod
    def _answers(acknowledged: dict[SharePartitionKey, ErrorCode],
                 fetched: dict[SharePartitionKey, ShareFetchResponse.PartitionData]
                 ) -> list[ShareFetchResponse.ShareFetchableTopicResponse]:
        by_topic: dict[uuid.UUID, list[ShareFetchResponse.PartitionData]] = {}
        for key in dict.fromkeys([*fetched, *acknowledged]):
            answer = fetched.get(key) or ShareFetchResponse.PartitionData(
                partition_index=key[1], records=b"", current_leader=ShareFetchResponse.LeaderIdAndEpoch())
            if key in acknowledged:
                answer.acknowledge_error_code = acknowledged[key]
            by_topic.setdefault(key[0], []).append(answer)
        return [ShareFetchResponse.ShareFetchableTopicResponse(topic_id=topic_id, partitions=partitions)
                for topic_id, partitions in by_topic.items()]

    async def share_acknowledge(self, context: RequestContext,
                                request: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
        if self._disabled():
            return ShareAcknowledgeResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
        group_id, member_id = request.group_id or "", request.member_id or ""
        if not self._may(context, AclOperation.READ, ResourceType.GROUP, group_id):
            return ShareAcknowledgeResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        error, session = self.sessions.open_or_advance(group_id, member_id, request.share_session_epoch, False)
        if session is None:
            return ShareAcknowledgeResponse(error_code=error)
        responses = []
        for topic in request.topics:
            partitions = []
            for partition in topic.partitions:
                error = await self._acknowledge(context, group_id, member_id, topic.topic_id,
                                                partition.partition_index, partition.acknowledgement_batches)
                topic_partition = self._topic_partition(topic.topic_id, partition.partition_index)
                leader = self._leader(topic_partition) if topic_partition else (-1, -1)
                partitions.append(ShareAcknowledgeResponse.PartitionData(
                    partition_index=partition.partition_index, error_code=error,
                    current_leader=_leader_on_error(ShareAcknowledgeResponse.LeaderIdAndEpoch, error, leader)))
            responses.append(ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse(topic_id=topic.topic_id,
                                                                                    partitions=partitions))
        if request.share_session_epoch == FINAL_EPOCH:
            await self._close(session)
        return ShareAcknowledgeResponse(acquisition_lock_timeout_ms=self._partition_config(
                                            request.group_id or "").record_lock_duration_ms,
                                        responses=responses)
