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

Authorization, as Kafka's: CreateTopics needs CREATE on the cluster or the topic, DeleteTopics DELETE and
CreatePartitions ALTER on the topic; a refused topic is answered TOPIC_AUTHORIZATION_FAILED ("Authorization failed.")
while the others go on to the controller; the answers keep the request's order, as Kafka's.
"""

from __future__ import annotations

from kfk.controller.quorum_controller import QuorumController
from kfk.controller.replication_control import create_partitions_error, create_topics_error, delete_topics_error
from kfk.controller.result import ApiError
from kfk.errors import ErrorCode
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from kfk.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from kfk.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext

_REFUSED = ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.")


class TopicAdminHandler:
    def __init__(self, controller: QuorumController, auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.controller = controller
        self.auth = auth

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.CREATE_TOPICS, self.create_topics)
        dispatcher.register(ApiKey.DELETE_TOPICS, self.delete_topics)
        dispatcher.register(ApiKey.CREATE_PARTITIONS, self.create_partitions)

    async def create_topics(self, context: RequestContext, request: CreateTopicsRequest) -> CreateTopicsResponse:
        refused = [topic for topic in request.topics if not self.auth.may_create_topic(context, topic.name)]
        if not refused:
            return await self.controller.create_topics(request)
        allowed = [topic for topic in request.topics if topic not in refused]
        response = create_topics_error(CreateTopicsRequest(topics=refused), _REFUSED)
        if allowed:
            created = await self.controller.create_topics(CreateTopicsRequest(
                topics=allowed, timeout_ms=request.timeout_ms, validate_only=request.validate_only))
            response.topics[:0] = created.topics
        _in_request_order(response.topics, [topic.name for topic in request.topics])
        return response

    async def delete_topics(self, context: RequestContext, request: DeleteTopicsRequest) -> DeleteTopicsResponse:
        if not self.auth.enabled:
            return await self.controller.delete_topics(request, context.api_version)
        image = self.controller.image

        def may_delete(name: str | None, topic_id=None) -> bool:
            if name is None:  # by id (v6): the topic's name is what ACLs know; an unknown id is the controller's
                topic = image.topics_by_id.get(topic_id)
                if topic is None:
                    return True
                name = topic.name
            return self.auth.authorize(context, AclOperation.DELETE, ResourceType.TOPIC, name)

        refused = DeleteTopicsRequest(topic_names=[name for name in request.topic_names if not may_delete(name)],
                                      topics=[state for state in request.topics
                                              if not may_delete(state.name, state.topic_id)])
        if not refused.topic_names and not refused.topics:
            return await self.controller.delete_topics(request, context.api_version)
        response = delete_topics_error(refused, _REFUSED)
        allowed = DeleteTopicsRequest(
            topic_names=[name for name in request.topic_names if name not in refused.topic_names],
            topics=[state for state in request.topics if state not in refused.topics], timeout_ms=request.timeout_ms)
        if allowed.topic_names or allowed.topics:
            deleted = await self.controller.delete_topics(allowed, context.api_version)
            response.responses[:0] = deleted.responses
        _in_request_order(response.responses, [*request.topic_names, *(state.name for state in request.topics)])
        return response

    async def create_partitions(self, context: RequestContext,
                                request: CreatePartitionsRequest) -> CreatePartitionsResponse:
        alterable = self.auth.authorized_names(context, AclOperation.ALTER, ResourceType.TOPIC,
                                               (topic.name for topic in request.topics))
        refused = [topic for topic in request.topics if topic.name not in alterable]
        if not refused:
            return await self.controller.create_partitions(request)
        response = create_partitions_error(CreatePartitionsRequest(topics=refused), _REFUSED)
        allowed = [topic for topic in request.topics if topic.name in alterable]
        if allowed:
            altered = await self.controller.create_partitions(CreatePartitionsRequest(
                topics=allowed, timeout_ms=request.timeout_ms, validate_only=request.validate_only))
            response.results[:0] = altered.results
        _in_request_order(response.results, [topic.name for topic in request.topics])
        return response


def _in_request_order(results: list, names: list[str | None]) -> None:
    """Sort results (each with a `name`) as their names first appear in the request."""
    position = {}
    for index, name in enumerate(names):
        position.setdefault(name, index)
    results.sort(key=lambda result: position.get(result.name, len(names)))
