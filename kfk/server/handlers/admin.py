"""Topic administration: CreateTopics (key 19) v0-v7, DeleteTopics (key 20) v0-v6, CreatePartitions (key 37) v0-v3.

The controller decides (kfk/controller/replication_control.py); these handlers pass the request on and answer
once the change is committed. Versions:
- CreateTopics: v1 adds validate_only and error messages; v2 throttle_time_ms; v4 lets num_partitions and
  replication_factor be -1 (the broker's defaults); v5 is flexible and answers the new topic's partition count,
  replication factor and configs; v6 only changes quota behaviour; v7 answers the topic id.
- DeleteTopics: v1 throttle_time_ms; before v3 a broker with delete.topic.enable=false answers INVALID_REQUEST,
  since v3 TOPIC_DELETION_DISABLED; v4 is flexible; v5 error messages; v6 names topics by name or by id.
- CreatePartitions: v2 is flexible; v1 and v3 change nothing on the wire.
Fields a version lacks are left out by the codec (they are all ignorable).
"""

from __future__ import annotations

from kfk.controller.quorum_controller import QuorumController
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from kfk.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from kfk.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from kfk.server.dispatch import Dispatcher, RequestContext


class TopicAdminHandler:
    def __init__(self, controller: QuorumController) -> None:
        self.controller = controller

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.CREATE_TOPICS, self.create_topics)
        dispatcher.register(ApiKey.DELETE_TOPICS, self.delete_topics)
        dispatcher.register(ApiKey.CREATE_PARTITIONS, self.create_partitions)

    async def create_topics(self, context: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
        return await self.controller.create_topics(request)

    async def delete_topics(self, context: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
        return await self.controller.delete_topics(request, context.api_version)

    async def create_partitions(self, context: RequestContext,
                                request: CreatePartitionsRequest) -> CreatePartitionsResponse:
        return await self.controller.create_partitions(request)
