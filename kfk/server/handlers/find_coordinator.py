"""FindCoordinator (key 10), v0-v6.

v0 asks for the coordinator of one group; v1 adds key_type (0 group, 1 transaction), throttle_time_ms and an error
message ("NONE" when found, as Kafka writes it; v4's per-key message is then empty); v3 is flexible; v4 batches keys (coordinator_keys in, one Coordinator per key out, no top-level fields);
v5 only allows the TRANSACTION_ABORTABLE error; v6 adds key type 2 (share groups).

A group's coordinator is the leader of its __consumer_offsets partition, a transactional id's the leader of its
__transaction_state partition (abs(java hash) % partitions, for both). The first lookup when the topic does not
exist yet creates it (offsets.topic.* or transaction.state.log.* sizes, compacted); until it exists (the creation
failed, or it is not in this broker's metadata yet) the answer is COORDINATOR_NOT_AVAILABLE, which clients retry,
as Kafka does; a failed creation is logged at WARN (once a minute) with its cause and, for a replication factor
larger than the live brokers, the fix. A lookup for a partition of this broker that is still loading waits (briefly) for it, so the
client's next request does not meet COORDINATOR_LOAD_IN_PROGRESS. Key type 2 finds the share coordinator of a share
partition ("group:topicId:partition", the leader of its __share_group_state partition): CLUSTER_ACTION on the
cluster (brokers' persisters and tools ask for it), INVALID_REQUEST for a key of another shape.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from kfk.common.internal_topics import (
    GROUP_METADATA_TOPIC_NAME,
    SHARE_GROUP_STATE_TOPIC_NAME,
    TRANSACTION_STATE_TOPIC_NAME,
)
from kfk.common.uuids import uuid_from_base64
from kfk.controller.quorum_controller import QuorumController
from kfk.coordinator.group.service import GroupCoordinatorService
from kfk.coordinator.partitioning import partition_for
from kfk.coordinator.share.service import ShareCoordinatorService
from kfk.coordinator.transaction.service import TransactionCoordinatorService
from kfk.errors import ERROR_INFO, ErrorCode
from kfk.metadata.cache import MetadataCache
from kfk.metadata.image import MetadataImage
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext
from kfk.server.handlers.share_groups import share_groups_enabled

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

FIRST_BATCHED_VERSION = 4

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
SHARE_KEY_TYPE = 2

#: How long a lookup waits for the group's partition of this broker to finish loading.
LOAD_WAIT_MS = 5000
#: How often the broker repeats why a coordinator topic cannot be created (clients retry every few hundred ms).
CREATION_WARNING_INTERVAL_S = 60.0
REPLICATION_FACTOR_KEYS = {GROUP_METADATA_TOPIC_NAME: "offsets.topic.replication.factor",
                           TRANSACTION_STATE_TOPIC_NAME: "transaction.state.log.replication.factor",
                           SHARE_GROUP_STATE_TOPIC_NAME: "share.coordinator.state.topic.replication.factor"}
USERS = {GROUP_METADATA_TOPIC_NAME: "consumer groups", TRANSACTION_STATE_TOPIC_NAME: "transactional producers",
         SHARE_GROUP_STATE_TOPIC_NAME: "share groups"}


def _is_share_partition_key(key: str) -> bool:
    """Kafka's SharePartitionKey shape: "group:topicId:partition" (the group id may hold colons)."""
    group_id, _, rest = key.rpartition(":")
    group_id, _, topic_id = group_id.rpartition(":")
    if not group_id or not rest.isdigit():
        return False
    try:
        uuid_from_base64(topic_id)
    except ValueError:
        return False
    return True

log = logging.getLogger("kfk.server")

Coordinator = FindCoordinatorResponse.Coordinator


class FindCoordinatorHandler:
    """`node_id` is this broker's: a group whose coordinator it is may still be loading."""

    def __init__(self, metadata_cache: MetadataCache, controller: QuorumController,
                 group_coordinator: GroupCoordinatorService, transaction_coordinator: TransactionCoordinatorService,
                 node_id: int, auth: RequestAuthorizer = ALLOW_ALL,
                 share_coordinator: ShareCoordinatorService | None = None) -> None:
        self.metadata_cache = metadata_cache
        self.auth = auth
        self.controller = controller
        self.group_coordinator = group_coordinator
        self.transaction_coordinator = transaction_coordinator
        self.node_id = node_id
        self.share_coordinator = share_coordinator
        self._next_creation_warning: dict[str, float] = {}

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.FIND_COORDINATOR, self.find_coordinator)

    async def _find_coordinator(self, key: str, topic_name: str, image: MetadataImage, listener: str,
                                wait_until_loaded: Callable[[str, int], Awaitable[None]]) -> Coordinator:
        """The leader of the key's partition of the coordinator's topic (created on the first lookup)."""
        topic = image.topic(topic_name)
        if topic is None:
            response = await self.controller.auto_create_topics([topic_name])
            self._warn_if_not_created(topic_name, response.topics)
            image = self.metadata_cache.image
            topic = image.topic(topic_name)
            if topic is None:
                return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        registration = topic.partitions.get(partition_for(key, len(topic.partitions)))
        endpoint = image.alive_endpoint(registration.leader, listener) if registration is not None else None
        if endpoint is None:
            return _error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if registration.leader == self.node_id:
            # A partition of this broker still loading (just created, or just led) is ready in a moment; answering
            # before that would only earn the client COORDINATOR_LOAD_IN_PROGRESS and a back-off of seconds.
            await wait_until_loaded(key, LOAD_WAIT_MS)
        return Coordinator(key=key, node_id=registration.leader, host=endpoint.host, port=endpoint.port,
                           error_code=ErrorCode.NONE, error_message="")

    def _warn_if_not_created(self, topic_name: str, results) -> None:
        """Clients only see COORDINATOR_NOT_AVAILABLE and retry forever: the operator learns why from this broker's
        log, at WARN, at most once a minute per topic, with the fix when the cause is the replication factor."""
        for result in results:
            if result.error_code in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                continue
            now = time.monotonic()
            if now < self._next_creation_warning.get(topic_name, 0.0):
                return
            self._next_creation_warning[topic_name] = now + CREATION_WARNING_INTERVAL_S
            users = USERS[topic_name]
            fix = ""
            if result.error_code == ErrorCode.INVALID_REPLICATION_FACTOR:
                key = REPLICATION_FACTOR_KEYS[topic_name]
                fix = (f"; start more brokers or lower {key} (now {self.controller.config.values[key]}) to at most "
                       "the number of live brokers")
            log.warning("cannot create %s, so %s wait for a coordinator: %s (%s)%s", topic_name, users,
                        ErrorCode(result.error_code).name, result.error_message, fix)

    async def find_coordinator(self, context: RequestContext,
                               request: FindCoordinatorRequest) -> FindCoordinatorResponse:
        version = context.api_version
        keys = list(request.coordinator_keys) if version >= FIRST_BATCHED_VERSION else [request.key]
        image = self.metadata_cache.image
        coordinators = []
        for key in keys:
            # DESCRIBE on the group or transactional id the key names (Kafka's order: before the key is looked up).
            if request.key_type == GROUP_KEY_TYPE \
                    and not self.auth.authorize(context, AclOperation.DESCRIBE, ResourceType.GROUP, key):
                coordinators.append(_error(key, ErrorCode.GROUP_AUTHORIZATION_FAILED))
            elif request.key_type == TRANSACTION_KEY_TYPE \
                    and not self.auth.authorize(context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
                coordinators.append(_error(key, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
            elif request.key_type == GROUP_KEY_TYPE:
                coordinators.append(await self._find_coordinator(
                    key, GROUP_METADATA_TOPIC_NAME, image, context.listener_name,
                    self.group_coordinator.wait_until_loaded))
            elif request.key_type == TRANSACTION_KEY_TYPE:
                coordinators.append(await self._find_coordinator(
                    key, TRANSACTION_STATE_TOPIC_NAME, image, context.listener_name,
                    self.transaction_coordinator.wait_until_loaded))
            elif request.key_type == SHARE_KEY_TYPE and self.share_coordinator is not None:
                if not share_groups_enabled(image.features):
                    coordinators.append(_error(key, ErrorCode.COORDINATOR_NOT_AVAILABLE, ""))  # as Kafka 4.4
                elif not self.auth.authorize(context, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
                    coordinators.append(_error(key, ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
                elif not _is_share_partition_key(key):
                    coordinators.append(_error(key, ErrorCode.INVALID_REQUEST, ""))  # no message, as Kafka
                else:
                    coordinators.append(await self._find_coordinator(
                        key, SHARE_GROUP_STATE_TOPIC_NAME, image, context.listener_name,
                        self.share_coordinator.wait_until_loaded))
            else:
                coordinators.append(_error(key, ErrorCode.INVALID_REQUEST,
                                           f"Unknown coordinator type received: {request.key_type}"))
        if version >= FIRST_BATCHED_VERSION:
            return FindCoordinatorResponse(coordinators=coordinators)
        (only,) = coordinators
        # Before v4 Kafka's message of a found coordinator is the error's name, "NONE".
        message = only.error_message or ErrorCode(only.error_code).name
        return FindCoordinatorResponse(error_code=only.error_code, error_message=message if version >= 1 else None,
                                       node_id=only.node_id, host=only.host, port=only.port)


def _error(key: str, error: ErrorCode, message: str | None = None) -> Coordinator:
    return Coordinator(key=key, node_id=-1, host="", port=-1, error_code=error,
                       error_message=message if message is not None else ERROR_INFO[error].message)
