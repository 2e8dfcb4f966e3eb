"""Committed offsets, answered by the group coordinator.

- OffsetCommit (8), v0-v10: v1 adds generation, member id and a per-partition commit timestamp; v2-v4 a retention
  time (the commit then expires on its own, written as OffsetCommitValue v1); v3 throttle time; v5 drops the
  retention; v6 the committed leader epoch; v7 group_instance_id; v8 flexible; v9 is the KIP-848 version (for a
  classic group the same as v8, except that a group that does not exist is GROUP_ID_NOT_FOUND, not
  ILLEGAL_GENERATION); v10 names topics by id (KIP-848), in the request and the response, and a topic id the
  metadata does not know answers UNKNOWN_TOPIC_ID for its partitions. Partitions of topics the metadata does not
  know get UNKNOWN_TOPIC_OR_PARTITION before the coordinator sees the rest; the answer goes out once the offsets are
  committed to __consumer_offsets.
- OffsetFetch (9), v0-v10: v1 reads offsets kept in Kafka (kfk keeps them all there); v2 adds a top-level error and
  null topics = every committed offset; v3 throttle time; v5 leader epochs; v6 flexible; v7 require_stable (a
  partition with transactional offsets pending in an open transaction is UNSTABLE_OFFSET_COMMIT); v8 many groups
  with an error each; v9 member id and epoch (KIP-848: a consumer protocol group's member fetches at its current
  epoch, else STALE_MEMBER_EPOCH or UNKNOWN_MEMBER_ID; ignored for classic groups); v10 names topics by id (an
  unknown id's partitions answer UNKNOWN_TOPIC_ID; all of a group's offsets are listed for the topics that still
  exist, each with its id). Errors the group has
  (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS) are per partition on v0-v1, top-level on v2-v7, per group from v8.
- OffsetDelete (47), v0: a top-level error and one per partition.
"""

from __future__ import annotations

import uuid

from kfk.coordinator.group.group_coordinator import OffsetCommitPartition
from kfk.coordinator.group.service import GroupCoordinatorService
from kfk.errors import ErrorCode
from kfk.metadata.cache import MetadataCache
from kfk.metadata.image import MetadataImage
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.offset_commit import OffsetCommitRequest, OffsetCommitResponse
from kfk.protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse
from kfk.protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext

INVALID_OFFSET = -1
FIRST_MULTI_GROUP_FETCH_VERSION = 8
#: From this version OffsetCommit and OffsetFetch name topics by id (KIP-848).
FIRST_TOPIC_ID_VERSION = 10

_NO_TOPIC_ID = uuid.UUID(int=0)

CommitTopic = OffsetCommitResponse.OffsetCommitResponseTopic
CommitPartition = OffsetCommitResponse.OffsetCommitResponsePartition


def _partition_known(image: MetadataImage, topic: str, partition: int) -> bool:
    return image.partition(topic, partition) is not None


def name_topics_by_id(image: MetadataImage, topics: list) -> set[uuid.UUID]:
    """Set each topic's name from its id (the request's v10+ topics), and answer the ids the metadata does not know."""
    unknown = set()
    for topic in topics:
        topic_image = image.topics_by_id.get(topic.topic_id)
        if topic_image is None:
            unknown.add(topic.topic_id)
        else:
            topic.name = topic_image.name
    return unknown


class OffsetsHandler:
    def __init__(self, metadata_cache: MetadataCache, group_coordinator: GroupCoordinatorService,
                 auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.metadata_cache = metadata_cache
        self.group_coordinator = group_coordinator
        self.auth = auth

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.OFFSET_COMMIT, self.offset_commit)
        dispatcher.register(ApiKey.OFFSET_FETCH, self.offset_fetch)
        dispatcher.register(ApiKey.OFFSET_DELETE, self.offset_delete)

    async def offset_commit(self, context: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
        image = self.metadata_cache.image
        errors: dict[tuple[str, int], ErrorCode] = {}
        accepted: list[OffsetCommitPartition] = []
        auth = self.auth
        unknown_ids = (name_topics_by_id(image, request.topics) if context.api_version >= FIRST_TOPIC_ID_VERSION
                       else set())
        group_allowed = auth.authorize(context, AclOperation.READ, ResourceType.GROUP, request.group_id)
        readable = auth.authorized_names(context, AclOperation.READ, ResourceType.TOPIC,
                                         (topic.name for topic in request.topics if topic.topic_id not in unknown_ids))
        for topic in request.topics:
            if topic.topic_id in unknown_ids:
                continue
            for partition in topic.partitions:
                if not group_allowed or topic.name not in readable:
                    errors[(topic.name, partition.partition_index)] = (
                        ErrorCode.TOPIC_AUTHORIZATION_FAILED if group_allowed else ErrorCode.GROUP_AUTHORIZATION_FAILED)
                    continue
                if not _partition_known(image, topic.name, partition.partition_index):
                    errors[(topic.name, partition.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                accepted.append(OffsetCommitPartition(
                    topic.name, partition.partition_index, partition.committed_offset,
                    partition.committed_leader_epoch, partition.committed_metadata, partition.commit_timestamp))
        if accepted:
            errors.update(await self.group_coordinator.commit_offsets(
                request.group_id, request.member_id, request.group_instance_id,
                request.generation_id_or_member_epoch, request.retention_time_ms, accepted, context.api_version))
        return OffsetCommitResponse(topics=[
            CommitTopic(name=topic.name, topic_id=topic.topic_id, partitions=[
                CommitPartition(partition_index=p.partition_index,
                                error_code=ErrorCode.UNKNOWN_TOPIC_ID if topic.topic_id in unknown_ids
                                else errors[(topic.name, p.partition_index)])
                for p in topic.partitions])
            for topic in request.topics])

    async def offset_fetch(self, context: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
        version = context.api_version
        if version >= FIRST_MULTI_GROUP_FETCH_VERSION:
            groups = []
            image = self.metadata_cache.image
            by_id = version >= FIRST_TOPIC_ID_VERSION
            for group in request.groups:
                unknown_ids = name_topics_by_id(image, group.topics or []) if by_id else set()
                wanted = None if group.topics is None else [(t.name, list(t.partition_indexes))
                                                            for t in group.topics if t.topic_id not in unknown_ids]
                error, topics = self._fetch_offsets(context, group.group_id, wanted, request.require_stable,
                                                    group.member_id, group.member_epoch)
                ids = {}
                if by_id:
                    ids = {name: topic_image.topic_id for name, _ in topics
                           if (topic_image := image.topic(name)) is not None}
                    topics = [(name, partitions) for name, partitions in topics if name in ids]
                    if error == ErrorCode.NONE:
                        topics += [(t.topic_id, [(index, None, ErrorCode.UNKNOWN_TOPIC_ID)
                                                 for index in t.partition_indexes])
                                   for t in group.topics or [] if t.topic_id in unknown_ids]
                        ids.update((topic_id, topic_id) for topic_id in unknown_ids)
                groups.append(OffsetFetchResponse.OffsetFetchResponseGroup(
                    group_id=group.group_id, error_code=error,
                    topics=[OffsetFetchResponse.OffsetFetchResponseTopics(
                        name=name if isinstance(name, str) else "", topic_id=ids.get(name, _NO_TOPIC_ID), partitions=[
                        OffsetFetchResponse.OffsetFetchResponsePartitions(
                            partition_index=index,
                            committed_offset=offset.committed_offset if offset else INVALID_OFFSET,
                            committed_leader_epoch=offset.leader_epoch if offset else -1,
                            metadata=offset.metadata if offset else "",
                            error_code=partition_error)
                        for index, offset, partition_error in partitions]) for name, partitions in topics]))
            return OffsetFetchResponse(groups=groups)
        wanted = None if request.topics is None else [(t.name, list(t.partition_indexes)) for t in request.topics]
        error, topics = self._fetch_offsets(context, request.group_id, wanted, request.require_stable)
        if error != ErrorCode.NONE and version < 2:
            # No top-level error before v2: every requested partition carries it.
            topics = [(name, [(index, None, error) for index in indexes]) for name, indexes in wanted or []]
        return OffsetFetchResponse(
            error_code=error if version >= 2 else ErrorCode.NONE,
            topics=[OffsetFetchResponse.OffsetFetchResponseTopic(name=name, partitions=[
                OffsetFetchResponse.OffsetFetchResponsePartition(
                    partition_index=index,
                    committed_offset=offset.committed_offset if offset else INVALID_OFFSET,
                    committed_leader_epoch=offset.leader_epoch if offset and version >= 5 else -1,
                    metadata=offset.metadata if offset else "",
                    error_code=partition_error)
                for index, offset, partition_error in partitions]) for name, partitions in topics])

    def _fetch_offsets(self, context: RequestContext, group_id: str, wanted: list[tuple[str, list[int]]] | None,
                       require_stable: bool, member_id: str | None = None, member_epoch: int = -1
                       ) -> tuple[ErrorCode, list]:
        """One group's committed offsets, as the principal may see them: DESCRIBE on the group (else
        GROUP_AUTHORIZATION_FAILED), and on each topic (a named topic's partitions answer TOPIC_AUTHORIZATION_FAILED,
        and when every topic is asked for, the others are left out)."""
        auth = self.auth
        if not auth.authorize(context, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, []
        if wanted is None:
            error, topics = self.group_coordinator.fetch_offsets(group_id, None, require_stable, member_id,
                                                                 member_epoch)
            describable = auth.authorized_names(context, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                                (name for name, _ in topics))
            return error, [(name, partitions) for name, partitions in topics if name in describable]
        describable = auth.authorized_names(context, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                            (name for name, _ in wanted))
        error, topics = self.group_coordinator.fetch_offsets(
            group_id, [(name, indexes) for name, indexes in wanted if name in describable], require_stable,
            member_id, member_epoch)
        found = dict(topics)
        return error, [(name, found[name]) if name in describable else
                       (name, [(index, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for index in indexes])
                       for name, indexes in wanted if name in found or name not in describable]

    async def offset_delete(self, context: RequestContext, request: OffsetDeleteRequest) -> OffsetDeleteResponse:
        image = self.metadata_cache.image
        auth = self.auth
        if not auth.authorize(context, AclOperation.DELETE, ResourceType.GROUP, request.group_id):
            return OffsetDeleteResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        readable = auth.authorized_names(context, AclOperation.READ, ResourceType.TOPIC,
                                         (topic.name for topic in request.topics))
        unknown: set[tuple[str, int]] = set()
        denied: set[tuple[str, int]] = set()
        known: list[tuple[str, list[int]]] = []
        for topic in request.topics:
            indexes = []
            for partition in topic.partitions:
                if topic.name not in readable:
                    denied.add((topic.name, partition.partition_index))
                elif _partition_known(image, topic.name, partition.partition_index):
                    indexes.append(partition.partition_index)
                else:
                    unknown.add((topic.name, partition.partition_index))
            if indexes:
                known.append((topic.name, indexes))
        error, results = await self.group_coordinator.delete_offsets(request.group_id, known)
        if error != ErrorCode.NONE:
            return OffsetDeleteResponse(error_code=error)
        errors = {(name, index): partition_error for name, partitions in results
                  for index, partition_error in partitions}
        errors.update(dict.fromkeys(unknown, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
        errors.update(dict.fromkeys(denied, ErrorCode.TOPIC_AUTHORIZATION_FAILED))
        return OffsetDeleteResponse(error_code=ErrorCode.NONE, topics=[
            OffsetDeleteResponse.OffsetDeleteResponseTopic(name=topic.name, partitions=[
                OffsetDeleteResponse.OffsetDeleteResponsePartition(
                    partition_index=p.partition_index, error_code=errors[(topic.name, p.partition_index)])
                for p in topic.partitions])
            for topic in request.topics])
