"""ListOffsets (key 2), v0-v11.

A timestamp of -2 (EARLIEST) answers the log start offset, -1 (LATEST) the high watermark — the offset the next
record will get once committed, not the start of the last batch — and >= 0 the first offset whose record timestamp
is at or after it (time index), or -1/-1 past the end. v0 is the old form: max_num_offsets and a list of
old_style_offsets taken from segment boundaries (Kafka's legacy algorithm). v1 answers one offset with its
timestamp; v2 adds isolation_level (READ_COMMITTED: LATEST is the last stable offset and lookups stop there); v4
current_leader_epoch fencing and the leader_epoch of the answer; v6 is flexible; v7 MAX_TIMESTAMP (-3: the record with
the largest timestamp); v8 EARLIEST_LOCAL (-4: the log start, there being no tiered storage); v9 LATEST_TIERED (-5:
-1, nothing is tiered); v10 timeout_ms, for remote reads, which do not happen here; v11 EARLIEST_PENDING_UPLOAD
(-6, KIP-1023: -1, nothing waits for an upload). A partition listed twice in one
request gets INVALID_REQUEST, as in Kafka.
"""

from __future__ import annotations

from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode, KafkaError
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.list_offsets import ListOffsetsRequest, ListOffsetsResponse
from kfk.replication.replica_manager import ReplicaManager
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext

CONSUMER_REPLICA_ID = -1
DEBUGGING_REPLICA_ID = -2

ListOffsetsTopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse
ListOffsetsPartitionResponse = ListOffsetsResponse.ListOffsetsPartitionResponse


class ListOffsetsHandler:
    def __init__(self, replica_manager: ReplicaManager, auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.replica_manager = replica_manager
        self.auth = auth

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.LIST_OFFSETS, self.list_offsets)

    async def list_offsets(self, context: RequestContext, request: ListOffsetsRequest) -> ListOffsetsResponse:
        replica_manager = self.replica_manager
        version = context.api_version
        is_client = request.replica_id == CONSUMER_REPLICA_ID
        isolation_level = request.isolation_level if is_client else None
        fetch_only_from_leader = request.replica_id != DEBUGGING_REPLICA_ID
        seen: dict[TopicPartition, int] = {}
        for topic in request.topics:
            for partition in topic.partitions:
                key = TopicPartition(topic.name, partition.partition_index)
                seen[key] = seen.get(key, 0) + 1
        describable = self.auth.authorized_names(context, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                                 (topic.name for topic in request.topics))
        responses: list[ListOffsetsTopicResponse] = []
        for topic in request.topics:
            answers: list[ListOffsetsPartitionResponse] = []
            for partition in topic.partitions:
                topic_partition = TopicPartition(topic.name, partition.partition_index)
                response = ListOffsetsPartitionResponse(partition_index=partition.partition_index)
                answers.append(response)
                if topic.name not in describable:
                    response.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    continue
                if version > 0 and seen[topic_partition] > 1:
                    response.error_code = ErrorCode.INVALID_REQUEST
                    continue
                try:
                    if version == 0:
                        response.old_style_offsets = replica_manager.legacy_fetch_offsets_before(
                            topic_partition, partition.timestamp, partition.max_num_offsets, is_client,
                            fetch_only_from_leader)
                        continue
                    found = replica_manager.fetch_offset_for_timestamp(
                        topic_partition, partition.timestamp, isolation_level, partition.current_leader_epoch,
                        fetch_only_from_leader)
                except KafkaError as error:
                    response.error_code = error.error_code  # offset and timestamp stay -1
                    continue
                if found is not None:
                    response.timestamp = found.timestamp
                    response.offset = found.offset
                    if version >= 4 and found.leader_epoch is not None:
                        response.leader_epoch = found.leader_epoch
            responses.append(ListOffsetsTopicResponse(name=topic.name, partitions=answers))
        return ListOffsetsResponse(topics=responses)
