"""DeleteRecords (key 21), v0-v2.

Moves each partition's log start offset forward to the requested offset (-1: the high watermark); the records below
become unreadable at once and their segments go at the next retention pass. An offset beyond the high watermark is
OFFSET_OUT_OF_RANGE, a compact-only topic POLICY_VIOLATION. The answer is the low watermark: the smallest log start
offset over the replicas, which on one broker is the leader's own, so nothing waits for timeout_ms. v1 is v0 with
throttling semantics, v2 is flexible.
"""

from __future__ import annotations

from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.delete_records import DeleteRecordsRequest, DeleteRecordsResponse
from kfk.replication.replica_manager import ReplicaManager
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext

DeleteRecordsTopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
DeleteRecordsPartitionResult = DeleteRecordsResponse.DeleteRecordsPartitionResult


class DeleteRecordsHandler:
    """DELETE on the topic, else TOPIC_AUTHORIZATION_FAILED."""

    def __init__(self, replica_manager: ReplicaManager, auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.replica_manager = replica_manager
        self.auth = auth

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.DELETE_RECORDS, self.delete_records)

    async def delete_records(self, context: RequestContext, request: DeleteRecordsRequest) -> DeleteRecordsResponse:
        replica_manager = self.replica_manager
        image = replica_manager.image
        offsets: dict[TopicPartition, int] = {}
        results: dict[TopicPartition, tuple[ErrorCode, int]] = {}
        deletable = self.auth.authorized_names(context, AclOperation.DELETE, ResourceType.TOPIC,
                                               (topic.name for topic in request.topics))
        for topic in request.topics:
            for partition in topic.partitions:
                topic_partition = TopicPartition(topic.name, partition.partition_index)
                if topic.name not in deletable:
                    results[topic_partition] = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)
                elif image.partition(topic.name, partition.partition_index) is None:
                    results[topic_partition] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)
                else:
                    offsets[topic_partition] = partition.offset
        results.update(replica_manager.delete_records(offsets))
        return DeleteRecordsResponse(topics=[
            DeleteRecordsTopicResult(name=topic.name, partitions=[
                _partition_result(partition.partition_index,
                                  results[TopicPartition(topic.name, partition.partition_index)])
                for partition in topic.partitions])
            for topic in request.topics
        ])


def _partition_result(index: int, result: tuple[ErrorCode, int]) -> DeleteRecordsPartitionResult:
    error, low_watermark = result
    return DeleteRecordsPartitionResult(partition_index=index, low_watermark=low_watermark, error_code=error)
