"""The consumer group protocol's APIs (KIP-848), answered by the group coordinator; served (and advertised) while
group.coordinator.rebalance.protocols names `consumer` (Kafka's default). As in Kafka 4.4, the group.version feature
gates the protocol: unless it is finalized at 1 or more, ConsumerGroupHeartbeat answers UNSUPPORTED_VERSION (the API
is still advertised), so a cluster formatted before it (or at a release without it) needs `kfk features upgrade`.

- ConsumerGroupHeartbeat (68), v0-v1: joining (member epoch 0), heartbeats with the member's epoch and owned
  partitions, leaving (epoch -1; a static member's -2 keeps its partitions for its session). v1 (KIP-1082): the
  client makes its member id, so an empty one is INVALID_REQUEST at any epoch. Errors carry Kafka's message.
- ConsumerGroupDescribe (69), v0-v1: a group's epochs, assignor, and every member's subscription, assignment and
  target assignment (topic names beside ids); v1 adds member_type (1: a consumer protocol member). A group that is
  not a consumer group is GROUP_ID_NOT_FOUND with Kafka's message.

Authorization, as Kafka's: the heartbeat needs READ on the group, the describe DESCRIBE on each group
(GROUP_AUTHORIZATION_FAILED otherwise).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kfk.common.features import GROUP_VERSION_FEATURE_NAME
from kfk.coordinator.group.service import GroupCoordinatorService
from kfk.errors import ErrorCode
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from kfk.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext
from kfk.server.handlers.groups import GROUP_OPERATIONS
from kfk.server.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED

#: ConsumerGroupDescribe v1: the member type of a member speaking the consumer protocol.
CONSUMER_MEMBER_TYPE = 1
UNKNOWN_MEMBER_TYPE = -1


def consumer_protocol_enabled(finalized_features: Mapping[str, int]) -> bool:
    """Whether group.version is finalized at 1 or more: the level that enables the consumer group protocol."""
    return finalized_features.get(GROUP_VERSION_FEATURE_NAME, 0) >= 1


class ConsumerGroupsHandler:
    def __init__(self, group_coordinator: GroupCoordinatorService, finalized_features: Callable[[], Mapping[str, int]],
                 auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.group_coordinator = group_coordinator
        #: The cluster's finalized feature levels, as this broker last read them.
        self.finalized_features = finalized_features
        self.auth = auth

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.CONSUMER_GROUP_HEARTBEAT, self.consumer_group_heartbeat)
        dispatcher.register(ApiKey.CONSUMER_GROUP_DESCRIBE, self.consumer_group_describe)

    async def consumer_group_heartbeat(self, context: RequestContext, request: ConsumerGroupHeartbeatRequest
                                       ) -> ConsumerGroupHeartbeatResponse:
        if not consumer_protocol_enabled(self.finalized_features()):
            return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
        if not self.auth.authorize(context, AclOperation.READ, ResourceType.GROUP, request.group_id):
            return ConsumerGroupHeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        return await self.group_coordinator.consumer_group_heartbeat(request, context.api_version,
                                                                     context.client_id or "",
                                                                     f"/{context.client_host}")

    async def consumer_group_describe(self, context: RequestContext, request: ConsumerGroupDescribeRequest
                                      ) -> ConsumerGroupDescribeResponse:
        described = []
        for group_id in request.group_ids:
            if not self.auth.authorize(context, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
                described.append(ConsumerGroupDescribeResponse.DescribedGroup(
                    error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id))
                continue
            group = self.group_coordinator.consumer_group_describe(group_id)
            if group.error_code == ErrorCode.NONE:
                group.authorized_operations = self.auth.authorized_operations(
                    context, ResourceType.GROUP, group_id, GROUP_OPERATIONS) \
                    if request.include_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED
                if context.api_version < 1:
                    for member in group.members:
                        member.member_type = UNKNOWN_MEMBER_TYPE
            described.append(group)
        return ConsumerGroupDescribeResponse(groups=described)
