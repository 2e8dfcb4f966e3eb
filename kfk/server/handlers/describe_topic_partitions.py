"""DescribeTopicPartitions (key 75), v0 (KIP-966): topics and their partitions, a page at a time.

What Metadata tells about partitions, for clients (Kafka's Admin.describeTopics) that may meet topics with more
partitions than one response should carry. The topics are described in name order: the named ones (an unknown
name is UNKNOWN_TOPIC_OR_PARTITION, an invalid one INVALID_TOPIC_EXCEPTION) or, with an empty list, every topic. At
most min(response_partition_limit, max.request.partition.size.limit) partitions are described; when more remain,
next_cursor names the topic and partition the next request starts from (with the request's cursor, topics before
its topic and that topic's partitions before its index are skipped). A cursor on a topic the request does not name
is INVALID_REQUEST for every topic. Each partition carries its eligible leader replicas and last known ELR
(KIP-966), empty unless eligible.leader.replicas.version is enabled. Topics the principal may not DESCRIBE are left out of "every topic" and answered
TOPIC_AUTHORIZATION_FAILED when named; the authorized operations are always given.
"""

from __future__ import annotations

from kfk.errors import ErrorCode
from kfk.metadata.cache import MetadataCache
from kfk.metadata.image import MetadataImage
from kfk.metadata.topic_names import is_internal, is_valid_topic_name
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.describe_topic_partitions import (
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from kfk.server.dispatch import Dispatcher, RequestContext
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.handlers.metadata import TOPIC_OPERATIONS, partition_metadata

Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
Partition = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponsePartition
Cursor = DescribeTopicPartitionsResponse.Cursor

#: partition_metadata answers as the Metadata version whose rules DescribeTopicPartitions shares: every replica
#: listed, a leader on an unknown broker LEADER_NOT_AVAILABLE and one without this listener LISTENER_NOT_FOUND.
_METADATA_RULES_VERSION = 13


class DescribeTopicPartitionsHandler:
    def __init__(self, metadata_cache: MetadataCache, max_request_partition_size_limit: int,
                 auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.metadata_cache = metadata_cache
        self.auth = auth
        self.max_request_partition_size_limit = max_request_partition_size_limit

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.DESCRIBE_TOPIC_PARTITIONS, self.describe_topic_partitions)

    async def describe_topic_partitions(self, context: RequestContext, request: DescribeTopicPartitionsRequest
                                        ) -> DescribeTopicPartitionsResponse:
        image = self.metadata_cache.image
        cursor = request.cursor
        every_topic = not request.topics
        names = sorted(image.topics_by_name) if every_topic else sorted({topic.name for topic in request.topics})
        describable = self.auth.authorized_names(context, AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        if every_topic:
            names = [name for name in names if name in describable]
        if cursor is not None and not every_topic and cursor.topic_name not in names:
            return DescribeTopicPartitionsResponse(topics=[
                Topic(error_code=ErrorCode.INVALID_REQUEST, name=name) for name in names])
        if cursor is not None:
            names = [name for name in names if name >= cursor.topic_name]
        remaining = min(request.response_partition_limit, self.max_request_partition_size_limit)
        response = DescribeTopicPartitionsResponse()
        alive_ids = {broker.broker_id for broker, _ in image.alive_brokers(context.listener_name)}
        for name in names:
            if remaining <= 0:
                # Every partition of the topics before is described: the next page starts at this topic.
                response.next_cursor = Cursor(topic_name=name, partition_index=0)
                break
            operations = self.auth.authorized_operations(context, ResourceType.TOPIC, name, TOPIC_OPERATIONS)
            if name not in describable:
                response.topics.append(Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name,
                                             is_internal=is_internal(name)))
                continue
            topic = image.topic(name)
            if topic is None:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if is_valid_topic_name(name) \
                    else ErrorCode.INVALID_TOPIC_EXCEPTION
                response.topics.append(Topic(error_code=error, name=name, is_internal=is_internal(name),
                                             topic_authorized_operations=operations))
                continue
            start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
            partitions = _partitions(image, name, context.listener_name, alive_ids)[start:]
            page, rest = partitions[:remaining], partitions[remaining:]
            response.topics.append(Topic(error_code=ErrorCode.NONE, name=name, topic_id=topic.topic_id,
                                         is_internal=topic.is_internal, partitions=page,
                                         topic_authorized_operations=operations))
            if rest:
                response.next_cursor = Cursor(topic_name=name, partition_index=rest[0].partition_index)
                break
            remaining -= len(page)
        return response


def _partitions(image: MetadataImage, name: str, listener_name: str, alive_ids: set[int]) -> list[Partition]:
    """The topic's partitions in index order, as Metadata describes them."""
    topic = image.topics_by_name[name]
    registrations = topic.partitions
    return [Partition(error_code=p.error_code, partition_index=p.partition_index, leader_id=p.leader_id,
                      leader_epoch=p.leader_epoch, replica_nodes=p.replica_nodes, isr_nodes=p.isr_nodes,
                      eligible_leader_replicas=list(registrations[p.partition_index].elr),
                      last_known_elr=list(registrations[p.partition_index].last_known_elr),
                      offline_replicas=p.offline_replicas)
            for p in partition_metadata(image, topic, listener_name, _METADATA_RULES_VERSION, alive_ids)]
