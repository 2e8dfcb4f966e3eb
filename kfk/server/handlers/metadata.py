"""Metadata (key 3), v0-v13: brokers, controller, cluster id and topics with their partitions, from the image.

Versions: v0 reads an empty topic list as "all topics" (v1+: null = all, empty = none) and leaves out replicas
whose broker is not available (REPLICA_NOT_AVAILABLE); v1 adds racks, controller_id and is_internal; v2
cluster_id; v3 throttle_time_ms; v4 allow_auto_topic_creation (before v4 a request always allows it); v5
offline_replicas; v6 answers LISTENER_NOT_FOUND (not LEADER_NOT_AVAILABLE) when the leader lacks the request's
listener; v7 leader_epoch; v8 authorized operations (-2147483648 unless asked for; without an authorizer every
operation of the resource type is allowed, as in Kafka); v9 is flexible; v10 topic ids; v11 drops the cluster
operations; v12 looks topics up by id (before v12 Kafka refuses ids and null names: INVALID_REQUEST); v13 adds a
top-level error_code (KIP-1102, REBOOTSTRAP_REQUIRED), which kfk never needs to set.

An unknown topic is created when the request allows it and auto.create.topics.enable is on; as in Kafka 4.0 (a
KRaft broker learns the new topic from the metadata log later) it is answered UNKNOWN_TOPIC_OR_PARTITION even
when the creation succeeded, and the client asks again. __cluster_metadata is never a topic: it is unknown, and
never created. An unknown topic id is answered without authorized operations (Kafka fills them in only for the
topics it looked up by name).
"""

from __future__ import annotations

import uuid

from kfk.common.internal_topics import CLUSTER_METADATA_TOPIC_NAME
from kfk.controller.backend import MetadataBackend
from kfk.controller.quorum_controller import QuorumController
from kfk.errors import ErrorCode
from kfk.metadata.cache import MetadataCache
from kfk.metadata.image import MetadataImage, TopicImage
from kfk.metadata.topic_names import is_internal, is_valid_topic_name
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kfk.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext

NO_LEADER_ID = -1
ZERO_UUID = uuid.UUID(int=0)
#: The schema default of the authorized-operations fields: "not requested".
AUTHORIZED_OPERATIONS_OMITTED = -2147483648


#: Every operation Kafka's AclEntry.supportedOperations lists for a topic / the cluster.
TOPIC_OPERATIONS = (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                    AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS)
CLUSTER_OPERATIONS = (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                      AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                      AclOperation.DESCRIBE)


Topic = MetadataResponse.MetadataResponseTopic
Partition = MetadataResponse.MetadataResponsePartition


def controller_id(metadata_backend: MetadataBackend, image: MetadataImage, listener_name: str) -> int:
    """The broker clients should send controller requests to: the active controller when it is a broker they can
    reach, else an alive broker (KRaft brokers forward), -1 when there is none."""
    active = metadata_backend.active_controller()
    if active is not None and image.alive_endpoint(active[0], listener_name) is not None:
        return active[0]
    alive = image.alive_brokers(listener_name)
    return alive[0][0].broker_id if alive else -1


def partition_metadata(image: MetadataImage, topic: TopicImage, listener_name: str, version: int,
                       alive_ids: set[int] | None = None) -> list[Partition]:
    """Kafka's KRaftMetadataCache.partitionMetadata: the leader if it is alive on this listener, the replicas and
    ISR (v0: only those alive), the replicas that are offline (unknown or fenced broker, or no such listener).
    `alive_ids`: the brokers alive on the listener, when the caller describes many topics."""
    if alive_ids is None:
        alive_ids = {broker.broker_id for broker, _ in image.alive_brokers(listener_name)}
    partitions = []
    for index in sorted(topic.partitions):
        registration = topic.partitions[index]
        alive = [r for r in registration.replicas if r in alive_ids]
        replicas = alive if version == 0 else list(registration.replicas)
        isr = [r for r in registration.isr if r in alive_ids] if version == 0 else list(registration.isr)
        offline = [r for r in registration.replicas if r not in alive_ids]
        leader = registration.leader
        if leader not in alive_ids:
            if leader not in image.brokers or version < 6:
                error = ErrorCode.LEADER_NOT_AVAILABLE
            else:
                error = ErrorCode.LISTENER_NOT_FOUND
            leader = NO_LEADER_ID
        elif len(replicas) < len(registration.replicas) or len(isr) < len(registration.isr):
            error = ErrorCode.REPLICA_NOT_AVAILABLE
        else:
            error = ErrorCode.NONE
        partitions.append(Partition(error_code=error, partition_index=index, leader_id=leader,
                                    leader_epoch=registration.leader_epoch, replica_nodes=replicas, isr_nodes=isr,
                                    offline_replicas=offline))
    return partitions


class MetadataHandler:
    def __init__(self, metadata_cache: MetadataCache, metadata_backend: MetadataBackend, controller: QuorumController,
                 auto_create_topics_enable: bool, auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.metadata_cache = metadata_cache
        self.auth = auth
        self.metadata_backend = metadata_backend
        self.controller = controller
        self.auto_create_topics_enable = auto_create_topics_enable

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.METADATA, self.metadata)

    async def metadata(self, context: RequestContext, request: MetadataRequest) -> MetadataResponse:
        version = context.api_version
        if request.topics and version < 12:
            for wanted in request.topics:
                if wanted.name is None or wanted.topic_id != ZERO_UUID:
                    return _error_response(request, ErrorCode.INVALID_REQUEST)
        image = self.metadata_cache.image
        listener = context.listener_name
        alive = image.alive_brokers(listener)
        alive_ids = {registration.broker_id for registration, _ in alive}
        auth = self.auth

        def operations(name: str) -> int:
            if not request.include_topic_authorized_operations:
                return AUTHORIZED_OPERATIONS_OMITTED
            return auth.authorized_operations(context, ResourceType.TOPIC, name, TOPIC_OPERATIONS)

        def described(topic: TopicImage) -> Topic:
            return Topic(error_code=ErrorCode.NONE, name=topic.name, topic_id=topic.topic_id,
                         is_internal=topic.is_internal,
                         partitions=partition_metadata(image, topic, listener, version, alive_ids),
                         topic_authorized_operations=operations(topic.name))

        if request.topics is None or (version == 0 and not request.topics):
            # Topics the principal may not describe are left out, as if they did not exist.
            visible = auth.authorized_names(context, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                            image.topics_by_name.keys())
            topics = [described(image.topics_by_name[name]) for name in sorted(visible)]
        else:
            topics = []
            to_create: list[str] = []
            # A topic id, when given, names the topic (Kafka's broker looks up every non-zero id, whatever the name
            # says: the Java consumer 4.4 asks for a regex subscription's topics by id with an empty name).
            wanted_names = [getattr(image.topics_by_id.get(wanted.topic_id), "name", None)
                            if wanted.topic_id != ZERO_UUID else wanted.name for wanted in request.topics]
            describable = auth.authorized_names(context, AclOperation.DESCRIBE, ResourceType.TOPIC,
                                                [name for name in wanted_names if name is not None])
            for wanted, name in zip(request.topics, wanted_names):
                if name is not None and name not in describable:
                    topics.append(Topic(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=wanted.name,
                                        topic_id=wanted.topic_id, is_internal=is_internal(name)))
                    continue
                if wanted.topic_id != ZERO_UUID or wanted.name is None:
                    found = image.topics_by_id.get(wanted.topic_id)
                    topics.append(described(found) if found is not None else Topic(
                        error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None, topic_id=wanted.topic_id))
                    continue
                found = image.topic(wanted.name)
                if found is not None:
                    topics.append(described(found))
                    continue
                allow = version < 4 or request.allow_auto_topic_creation
                valid = is_valid_topic_name(wanted.name) and wanted.name != CLUSTER_METADATA_TOPIC_NAME
                error = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if is_valid_topic_name(wanted.name)
                         else ErrorCode.INVALID_TOPIC_EXCEPTION)
                if allow and valid and self.auto_create_topics_enable:
                    if not auth.may_create_topic(context, wanted.name):
                        error = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    elif wanted.name not in to_create:
                        to_create.append(wanted.name)
                topics.append(Topic(error_code=error, name=wanted.name, is_internal=is_internal(wanted.name),
                                    topic_authorized_operations=operations(wanted.name)))
            if to_create:
                await self.controller.auto_create_topics(to_create)
        brokers = [MetadataResponse.MetadataResponseBroker(node_id=registration.broker_id, host=endpoint.host,
                                                           port=endpoint.port, rack=registration.rack)
                   for registration, endpoint in alive]
        return MetadataResponse(
            brokers=brokers,
            cluster_id=self.metadata_backend.cluster_id,
            controller_id=controller_id(self.metadata_backend, image, listener),
            topics=topics,
            cluster_authorized_operations=(
                auth.authorized_operations(context, ResourceType.CLUSTER, CLUSTER_NAME, CLUSTER_OPERATIONS)
                if request.include_cluster_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED),
        )


def _error_response(request: MetadataRequest, error: ErrorCode) -> MetadataResponse:
    """Kafka's MetadataRequest.getErrorResponse: every requested topic with the error (a null name as "")."""
    return MetadataResponse(topics=[Topic(error_code=error, name=wanted.name or "", topic_id=wanted.topic_id)
                                    for wanted in request.topics or ()])
