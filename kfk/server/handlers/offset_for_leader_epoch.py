"""OffsetForLeaderEpoch (key 23), v0-v4.

For each partition: the largest leader epoch at or below the one asked for that this log has, and the offset where
that epoch ends (the start of the next epoch, or the log end offset for the latest), from the leader-epoch cache;
-1/-1 when the log knows no such epoch. Followers ask it before truncating; consumers (KIP-320) to detect log
truncation after a leader change. v1 adds leader_epoch to the answer, v2 current_leader_epoch fencing
(FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH), v3 replica_id (a consumer sends -1 and must ask the leader; the default
-2 of older versions may ask a follower), v4 is flexible.
"""

from __future__ import annotations

from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode, KafkaError
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from kfk.replication.replica_manager import ReplicaManager
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext

DEBUGGING_REPLICA_ID = -2

OffsetForLeaderTopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = OffsetForLeaderEpochResponse.EpochEndOffset


class OffsetForLeaderEpochHandler:
    def __init__(self, replica_manager: ReplicaManager, auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.replica_manager = replica_manager
        self.auth = auth

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.OFFSET_FOR_LEADER_EPOCH, self.offset_for_leader_epoch)

    async def offset_for_leader_epoch(self, context: RequestContext,
                                      request: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
        replica_manager = self.replica_manager
        fetch_only_from_leader = request.replica_id != DEBUGGING_REPLICA_ID
        # Followers need CLUSTER_ACTION; consumers checking for truncation (KIP-320) DESCRIBE on the topic.
        names = [topic.topic for topic in request.topics]
        describable = set(names) if self.auth.authorize(context, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER) \
            else self.auth.authorized_names(context, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        topics: list[OffsetForLeaderTopicResult] = []
        for topic in request.topics:
            results: list[EpochEndOffset] = []
            for partition in topic.partitions:
                result = EpochEndOffset(error_code=ErrorCode.NONE, partition=partition.partition)
                if topic.topic not in describable:
                    result.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    results.append(result)
                    continue
                try:
                    result.leader_epoch, result.end_offset = replica_manager.last_offset_for_leader_epoch(
                        TopicPartition(topic.topic, partition.partition), partition.current_leader_epoch,
                        partition.leader_epoch, fetch_only_from_leader)
                except KafkaError as error:
                    result.error_code = error.error_code
                results.append(result)
            topics.append(OffsetForLeaderTopicResult(topic=topic.topic, partitions=results))
        return OffsetForLeaderEpochResponse(topics=topics)
