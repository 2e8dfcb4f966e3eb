"""The classic group membership and admin APIs, answered by the group coordinator.

- JoinGroup (11), v0-v9: v0 has no rebalance timeout (the session timeout stands in); v4+ asks a new dynamic member
  to join again with the member id it is given (MEMBER_ID_REQUIRED); v5+ static membership (group_instance_id);
  v6 flexible; v7+ returns the protocol type; v8 adds a reason; v9 may tell a static leader to skip the assignment.
  Protocol name is nullable from v7 only: older versions get "", and from v7 a refusal carries none (null), as
  Kafka's. v0 and v1 are deprecated in Kafka but served: old
  librdkafka (Debian's kcat, 2.0.2) falls back to v0.
- SyncGroup (14), v0-v5: v3+ group_instance_id; v4 flexible; v5 protocol type and name, checked against the group's.
- Heartbeat (12), v0-v4: v3+ group_instance_id; v4 flexible.
- LeaveGroup (13), v0-v5: v0-v2 one member_id and one error; v3+ a batch of members (by member id or, for an
  admin, by group instance id) with an error each; v4 flexible; v5 a reason. Leaving a group that does not exist
  succeeds with each member UNKNOWN_MEMBER_ID, as in Kafka.
- ListGroups (16), v0-v5: v3 flexible; v4 states filter (case-insensitive) and group_state; v5 types filter and
  group_type ("classic" for every kfk group).
- DescribeGroups (15), v0-v6: v3+ authorized operations on request; v4+ group_instance_id; v5 flexible. A group
  that does not exist is described as Dead with no error before v6; v6 (KIP-1043) answers it GROUP_ID_NOT_FOUND
  with an error message instead (its state still Dead, no authorized operations). Member metadata and assignment are shown once the group is Stable.
  A consumer protocol group (KIP-848) is not described: v6 answers GROUP_ID_NOT_FOUND ("is not a classic group"),
  older versions a Dead group with no error, as Kafka 4.x.
- DeleteGroups (42), v0-v3: v2 flexible, v3 an error message per group (none: kfk's errors need no words). A
  group with members gets NON_EMPTY_GROUP.

Authorization, as Kafka's: Join, Sync, Heartbeat and Leave need READ on the group, DescribeGroups DESCRIBE and
DeleteGroups DELETE on each group (GROUP_AUTHORIZATION_FAILED otherwise); ListGroups lists every group to a principal
with DESCRIBE on the cluster, else only the groups it may DESCRIBE.
"""

from __future__ import annotations

from kfk.coordinator.group.classic_group import ClassicGroupState
from kfk.coordinator.group.service import GroupCoordinatorService
from kfk.coordinator.group.share_group import ShareGroupCoordinator
from kfk.errors import ErrorCode
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.delete_groups import DeleteGroupsRequest, DeleteGroupsResponse
from kfk.protocol.messages.describe_groups import DescribeGroupsRequest, DescribeGroupsResponse
from kfk.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kfk.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from kfk.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from kfk.protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from kfk.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext
from kfk.server.handlers.metadata import AUTHORIZED_OPERATIONS_OMITTED

#: The operations a group has (group configs are KIP-848's), as DescribeGroups' authorized operations list them.
GROUP_OPERATIONS = (AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
                    AclOperation.ALTER_CONFIGS)


class GroupsHandler:
    def __init__(self, group_coordinator: GroupCoordinatorService, auth: RequestAuthorizer = ALLOW_ALL,
                 share_groups: ShareGroupCoordinator | None = None) -> None:
        self.group_coordinator = group_coordinator
        self.auth = auth
        self.share_groups = share_groups

    def _may(self, context: RequestContext, operation: AclOperation, group_id: str) -> bool:
        return self.auth.authorize(context, operation, ResourceType.GROUP, group_id)

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.JOIN_GROUP, self.join_group)
        dispatcher.register(ApiKey.SYNC_GROUP, self.sync_group)
        dispatcher.register(ApiKey.HEARTBEAT, self.heartbeat)
        dispatcher.register(ApiKey.LEAVE_GROUP, self.leave_group)
        dispatcher.register(ApiKey.LIST_GROUPS, self.list_groups)
        dispatcher.register(ApiKey.DESCRIBE_GROUPS, self.describe_groups)
        dispatcher.register(ApiKey.DELETE_GROUPS, self.delete_groups)

    async def join_group(self, context: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
        version = context.api_version
        if version == 0:
            request.rebalance_timeout_ms = request.session_timeout_ms
        if self._may(context, AclOperation.READ, request.group_id):
            response = await self.group_coordinator.join_group(request, version, context.client_id or "",
                                                               f"/{context.client_host}")
        else:
            response = JoinGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, protocol_name=None,
                                         member_id=request.member_id)
        if version < 7 and response.protocol_name is None:
            response.protocol_name = ""
        elif version >= 7 and response.error_code != ErrorCode.NONE:
            response.protocol_name = None
        if version < 9:
            response.skip_assignment = False
        return response

    async def sync_group(self, context: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
        if not self._may(context, AclOperation.READ, request.group_id):
            return SyncGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        return await self.group_coordinator.sync_group(request)

    async def heartbeat(self, context: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
        if not self._may(context, AclOperation.READ, request.group_id):
            return HeartbeatResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        return HeartbeatResponse(error_code=self.group_coordinator.heartbeat(request))

    async def leave_group(self, context: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
        if not self._may(context, AclOperation.READ, request.group_id):
            return LeaveGroupResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        if context.api_version < 3:
            members = [LeaveGroupRequest.MemberIdentity(member_id=request.member_id)]
        else:
            members = list(request.members)
        error, responses = self.group_coordinator.leave_group(request.group_id, members)
        if context.api_version < 3:
            if error == ErrorCode.NONE:
                error = next((r.error_code for r in responses if r.error_code != ErrorCode.NONE), ErrorCode.NONE)
            return LeaveGroupResponse(error_code=error)
        return LeaveGroupResponse(error_code=error, members=responses)

    async def list_groups(self, context: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
        error, groups = self.group_coordinator.list_groups(list(request.states_filter or ()),
                                                           list(request.types_filter or ()))
        if self.share_groups is not None:
            coordinator = self.group_coordinator.coordinator
            groups += [group for group in self.share_groups.list_groups(
                {state.lower() for state in request.states_filter or ()},
                {group_type.lower() for group_type in request.types_filter or ()})
                if coordinator.coordinator_error(group.group_id) == ErrorCode.NONE]
        if not self.auth.authorize(context, AclOperation.DESCRIBE, ResourceType.CLUSTER):
            describable = self.auth.authorized_names(context, AclOperation.DESCRIBE, ResourceType.GROUP,
                                                     (group.group_id for group in groups))
            groups = [group for group in groups if group.group_id in describable]
        return ListGroupsResponse(error_code=error, groups=groups)

    async def describe_groups(self, context: RequestContext,
                              request: DescribeGroupsRequest) -> DescribeGroupsResponse:
        described = []
        for group_id in request.groups:
            if not self._may(context, AclOperation.DESCRIBE, group_id):
                described.append(DescribeGroupsResponse.DescribedGroup(
                    error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id))
                continue
            if self.share_groups is not None and group_id in self.share_groups.groups:
                # Kafka describes only classic groups here: another type of group is one it does not find.
                described.append(DescribeGroupsResponse.DescribedGroup(
                    error_code=ErrorCode.GROUP_ID_NOT_FOUND if context.api_version >= 6 else ErrorCode.NONE,
                    error_message=f"Group {group_id} is not a classic group." if context.api_version >= 6
                    else None, group_id=group_id, group_state=ClassicGroupState.DEAD.value))
                continue
            group = self.group_coordinator.describe_group(group_id)
            if group.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
                if context.api_version >= 6:
                    described.append(group)  # a consumer protocol group: "is not a classic group"
                    continue
                # Before v6 Kafka describes a group of another protocol as a Dead classic group.
                group.error_code, group.error_message = ErrorCode.NONE, None
            elif context.api_version >= 6 and group.error_code == ErrorCode.NONE and \
                    group.group_state == ClassicGroupState.DEAD.value:
                # The coordinator describes a group it does not have as Dead: v6 says so with an error.
                # Kafka's answer keeps the state Dead and leaves out the authorized operations.
                described.append(DescribeGroupsResponse.DescribedGroup(
                    error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} not found.",
                    group_id=group_id, group_state=ClassicGroupState.DEAD.value))
                continue
            if context.api_version >= 3:
                group.authorized_operations = self.auth.authorized_operations(
                    context, ResourceType.GROUP, group_id, GROUP_OPERATIONS) if request.include_authorized_operations \
                    else AUTHORIZED_OPERATIONS_OMITTED
            described.append(group)
        return DescribeGroupsResponse(groups=described)

    async def delete_groups(self, context: RequestContext, request: DeleteGroupsRequest) -> DeleteGroupsResponse:
        deletable = self.auth.authorized_names(context, AclOperation.DELETE, ResourceType.GROUP, request.groups_names)
        share_results = {name: error for name in request.groups_names if name in deletable
                         and self.share_groups is not None and (error := self.share_groups.delete(name)) is not None}
        results = await self.group_coordinator.delete_groups([name for name in request.groups_names
                                                              if name in deletable and name not in share_results])
        results.update(share_results)
        results.update((name, ErrorCode.GROUP_AUTHORIZATION_FAILED) for name in request.groups_names
                       if name not in deletable)
        return DeleteGroupsResponse(results=[DeleteGroupsResponse.DeletableGroupResult(group_id=group_id,
                                                                                       error_code=error)
                                             for group_id, error in results.items()])
