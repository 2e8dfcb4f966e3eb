"""GroupMetadataManager: the classic group protocol as a state machine (Kafka's GroupMetadataManager, classic part).

JoinGroup, SyncGroup, Heartbeat and LeaveGroup move a ClassicGroup through its states; timers (session, join phase,
sync phase, initial rebalance delay) are deadlines in the shared CoordinatorTimer; what must be durable goes out as
a write of __consumer_offsets records whose continuation runs once the records are committed:
- a rebalance that ends with no members writes the empty group (generation bumped) before anything else happens;
- the leader's SyncGroup writes the group with every member's assignment; only when that is committed do the members
  get their assignment and the group become Stable;
- a static member that rejoins a Stable group with a new member id writes the group under the new id and gets its
  JoinGroup answer (the old assignment, no rebalance) only when that is committed.

Answers are delivered through the `respond` callables the caller passes in; a JoinGroup may be answered much later
(when the join phase completes), from another request's call or from `CoordinatorTimer.poll`.

Rules, error codes and their order follow Kafka's classic group implementation; the comments say where kfk differs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kfk.coordinator.append_errors import append_error_to_response_error
from kfk.coordinator.group.classic_group import (
    EMPTY_ASSIGNMENT,
    UNKNOWN_MEMBER_ID,
    ClassicGroup,
    ClassicGroupMember,
    ClassicGroupState,
    Responder,
)
from kfk.coordinator.group.config import GroupCoordinatorConfig
from kfk.coordinator.group.record_serde import group_metadata_key, group_metadata_value
from kfk.coordinator.timer import CoordinatorTimer
from kfk.coordinator.writes import WriteFunction
from kfk.errors import ErrorCode, KafkaError
from kfk.protocol.group_records.group_metadata_value import GroupMetadataValue
from kfk.protocol.messages.heartbeat import HeartbeatRequest
from kfk.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from kfk.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from kfk.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

log = logging.getLogger("kfk.coordinator.group")

#: JoinGroup v4+ without a group instance id: the first request only gets a member id (MEMBER_ID_REQUIRED).
FIRST_VERSION_REQUIRING_KNOWN_MEMBER_ID = 4
#: JoinGroup v9+: a static leader rejoining a Stable group is told to skip the assignment (KIP-814).
FIRST_VERSION_SUPPORTING_SKIP_ASSIGNMENT = 9

_S = ClassicGroupState

MemberResponse = LeaveGroupResponse.MemberResponse


def _join_key(group_id: str) -> tuple[str, str]:
    return ("join", group_id)


def _sync_key(group_id: str) -> tuple[str, str]:
    return ("sync", group_id)


def _heartbeat_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("heartbeat", group_id, member_id)


def _protocols(request: JoinGroupRequest) -> list[tuple[str, bytes]]:
    return [(protocol.name, bytes(protocol.metadata)) for protocol in request.protocols]


class GroupMetadataManager:
    def __init__(self, config: GroupCoordinatorConfig, timer: CoordinatorTimer, write: WriteFunction,
                 has_offsets: Callable[[str], bool]) -> None:
        self.config = config
        self.timer = timer
        self._write = write
        #: Whether a group holds committed offsets (then an empty group is kept: it is a simple group).
        self._has_offsets = has_offsets
        self.groups: dict[str, ClassicGroup] = {}

    # -- lookups -----------------------------------------------------------------------------------------------------

    def group(self, group_id: str) -> ClassicGroup | None:
        return self.groups.get(group_id)

    def get_or_create_group(self, group_id: str, now_ms: int) -> ClassicGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = ClassicGroup(group_id, now_ms)
            self.groups[group_id] = group
        return group

    @staticmethod
    def rebalance_timeout_ms(group: ClassicGroup) -> int:
        return max((member.rebalance_timeout_ms for member in group.members.values()), default=0)

    # -- JoinGroup ---------------------------------------------------------------------------------------------------

    def join_group(self, request: JoinGroupRequest, api_version: int, client_id: str, client_host: str,
                   now_ms: int, respond: Responder) -> None:
        member_id = request.member_id
        is_unknown_member = member_id == UNKNOWN_MEMBER_ID
        group = self.groups.get(request.group_id)
        if group is None:
            if not is_unknown_member:
                respond(JoinGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))
                return
            group = self.get_or_create_group(request.group_id, now_ms)
        if not self._accept_joining_member(group, member_id):
            group.remove(member_id)
            self.timer.cancel(_heartbeat_key(group.group_id, member_id))
            respond(JoinGroupResponse(error_code=ErrorCode.GROUP_MAX_SIZE_REACHED, member_id=UNKNOWN_MEMBER_ID))
        elif is_unknown_member:
            self._join_new_member(request, api_version, client_id, client_host, group, now_ms, respond)
        else:
            self._join_existing_member(request, api_version, client_id, client_host, group, now_ms, respond)
        # A JoinGroup that created a group but did not keep a member in it (a rejected protocol) leaves nothing.
        self._drop_if_unused(group)

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        if group.is_in_state(_S.EMPTY, _S.DEAD):
            return True
        if group.is_in_state(_S.PREPARING_REBALANCE):
            return ((group.has_member(member_id) and group.member(member_id).is_awaiting_join)
                    or group.num_members_awaiting_join < self.config.max_size)
        return group.has_member(member_id) or len(group.members) < self.config.max_size

    def _join_new_member(self, request: JoinGroupRequest, api_version: int, client_id: str, client_host: str,
                         group: ClassicGroup, now_ms: int, respond: Responder) -> None:
        if group.is_in_state(_S.DEAD):
            # The group was just deleted or moved: let the member find the coordinator again and rejoin.
            respond(JoinGroupResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=UNKNOWN_MEMBER_ID))
            return
        if not group.supports_protocols(request.protocol_type, [p.name for p in request.protocols]):
            respond(JoinGroupResponse(error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=UNKNOWN_MEMBER_ID))
            return
        new_member_id = group.generate_member_id(client_id, request.group_instance_id)
        if request.group_instance_id is not None:
            existing_member_id = group.static_member_id(request.group_instance_id)
            if existing_member_id is None:
                self._add_member_then_rebalance_or_complete_join(request, client_id, client_host, group,
                                                                 new_member_id, now_ms, respond)
            else:
                self._update_static_member_then_rebalance_or_complete_join(
                    request, api_version, group, existing_member_id, new_member_id, now_ms, respond)
        elif api_version >= FIRST_VERSION_REQUIRING_KNOWN_MEMBER_ID:
            # KIP-394: hand out the member id first; the member is added when it joins again with it. A pending
            # member that never comes back expires after its session timeout.
            group.pending_join_members.add(new_member_id)
            self.timer.schedule(_heartbeat_key(group.group_id, new_member_id), now_ms + request.session_timeout_ms,
                                lambda at_ms: self._expire_member(group.group_id, new_member_id, at_ms))
            respond(JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id=new_member_id))
        else:
            self._add_member_then_rebalance_or_complete_join(request, client_id, client_host, group, new_member_id,
                                                             now_ms, respond)

    def _join_existing_member(self, request: JoinGroupRequest, api_version: int, client_id: str, client_host: str,
                              group: ClassicGroup, now_ms: int, respond: Responder) -> None:
        member_id = request.member_id
        if group.is_in_state(_S.DEAD):
            respond(JoinGroupResponse(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id=member_id))
            return
        if not group.supports_protocols(request.protocol_type, [p.name for p in request.protocols]):
            respond(JoinGroupResponse(error_code=ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id))
            return
        if group.is_pending_member(member_id):
            if request.group_instance_id is not None:
                # A pending member is always dynamic; a static id here is a client bug.
                respond(JoinGroupResponse(error_code=ErrorCode.INVALID_REQUEST, member_id=member_id))
                return
            self._add_member_then_rebalance_or_complete_join(request, client_id, client_host, group, member_id,
                                                             now_ms, respond)
            return
        try:
            group.validate_member(member_id, request.group_instance_id)
        except KafkaError as error:
            respond(JoinGroupResponse(error_code=error.error_code, member_id=member_id, protocol_name=None))
            return
        member = group.member(member_id)
        protocols = _protocols(request)
        if group.is_in_state(_S.PREPARING_REBALANCE):
            self._update_member_then_rebalance_or_complete_join(request, group, member, now_ms, respond)
        elif group.is_in_state(_S.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # The member lost the JoinGroup answer: give the same generation again.
                respond(self._join_response(group, member, api_version))
            else:
                self._update_member_then_rebalance_or_complete_join(request, group, member, now_ms, respond)
        elif group.is_in_state(_S.STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # A leader's JoinGroup is how it asks for a rebalance (e.g. topic metadata changed).
                self._update_member_then_rebalance_or_complete_join(request, group, member, now_ms, respond)
            else:
                respond(JoinGroupResponse(error_code=ErrorCode.NONE, generation_id=group.generation_id,
                                          protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                                          leader=group.leader_id or "", member_id=member_id, members=[]))
        else:
            # Empty with a known member cannot happen; let the member reset and rejoin.
            respond(JoinGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID, member_id=member_id))

    def _join_response(self, group: ClassicGroup, member: ClassicGroupMember, api_version: int,
                       skip_assignment: bool = False) -> JoinGroupResponse:
        is_leader = group.is_leader(member.member_id)
        return JoinGroupResponse(
            error_code=ErrorCode.NONE,
            generation_id=group.generation_id,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            skip_assignment=skip_assignment,
            member_id=member.member_id,
            members=self._current_members(group) if is_leader else [],
        )

    @staticmethod
    def _current_members(group: ClassicGroup) -> list[JoinGroupResponse.JoinGroupResponseMember]:
        protocol_name = group.protocol_name
        if protocol_name is None:
            return []
        return [JoinGroupResponse.JoinGroupResponseMember(member_id=member.member_id,
                                                          group_instance_id=member.group_instance_id,
                                                          metadata=member.metadata(protocol_name))
                for member in group.members.values()]

    def _add_member_then_rebalance_or_complete_join(self, request: JoinGroupRequest, client_id: str,
                                                    client_host: str, group: ClassicGroup, member_id: str,
                                                    now_ms: int, respond: Responder) -> None:
        member = ClassicGroupMember(member_id, request.group_instance_id, client_id, client_host,
                                    request.rebalance_timeout_ms, request.session_timeout_ms, request.protocol_type,
                                    _protocols(request))
        member.is_new = True
        if group.is_in_state(_S.PREPARING_REBALANCE) and group.previous_state is _S.EMPTY:
            group.new_member_added = True
        group.add(member, respond)
        # A new member cannot heartbeat before its JoinGroup is answered, and a client that gave up and retried
        # would leave a phantom member behind: its JoinGroup times out after the new-member join timeout.
        self._reschedule_heartbeat(group, member, now_ms, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance_or_complete_join(group, now_ms)

    def _update_member_then_rebalance_or_complete_join(self, request: JoinGroupRequest, group: ClassicGroup,
                                                       member: ClassicGroupMember, now_ms: int,
                                                       respond: Responder) -> None:
        replaced = group.update_member(member, _protocols(request), request.rebalance_timeout_ms,
                                       request.session_timeout_ms, respond)
        if replaced is not None:
            replaced(JoinGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS, member_id=member.member_id))
        self._maybe_prepare_rebalance_or_complete_join(group, now_ms)

    def _update_static_member_then_rebalance_or_complete_join(self, request: JoinGroupRequest, api_version: int,
                                                              group: ClassicGroup, old_member_id: str,
                                                              new_member_id: str, now_ms: int,
                                                              respond: Responder) -> None:
        current_leader = group.leader_id
        member = group.replace_static_member(request.group_instance_id, old_member_id, new_member_id)
        self.timer.cancel(_heartbeat_key(group.group_id, old_member_id))
        self._reschedule_heartbeat(group, member, now_ms)
        old_rebalance_timeout_ms = member.rebalance_timeout_ms
        old_session_timeout_ms = member.session_timeout_ms
        old_protocols = member.supported_protocols
        group.update_member(member, _protocols(request), request.rebalance_timeout_ms, request.session_timeout_ms,
                            respond)
        if group.is_in_state(_S.STABLE):
            if group.protocol_name == group.select_protocol():
                # Same protocol next generation: persist the new member id, no rebalance.
                generation_id = group.generation_id

                def on_written(error: ErrorCode, at_ms: int) -> None:
                    if error != ErrorCode.NONE:
                        log.warning("Failed to persist static member %s of group %s: %s", new_member_id,
                                    group.group_id, error.name)
                        if group.has_member(new_member_id):
                            group.update_member(member, old_protocols, old_rebalance_timeout_ms,
                                                old_session_timeout_ms, None)
                            old = group.replace_static_member(request.group_instance_id, new_member_id,
                                                              old_member_id)
                            self.timer.cancel(_heartbeat_key(group.group_id, new_member_id))
                            self._reschedule_heartbeat(group, old, at_ms)
                        respond(JoinGroupResponse(error_code=append_error_to_response_error(error),
                                                  member_id=UNKNOWN_MEMBER_ID, generation_id=group.generation_id,
                                                  protocol_type=group.protocol_type,
                                                  protocol_name=group.protocol_name,
                                                  leader=current_leader or ""))
                        return
                    if not group.has_member(new_member_id) or group.generation_id != generation_id:
                        return  # a rebalance since answered (or fenced) the member
                    if api_version >= FIRST_VERSION_SUPPORTING_SKIP_ASSIGNMENT:
                        is_leader = group.is_leader(new_member_id)
                        group.complete_join(member, self._join_response(group, member, api_version,
                                                                        skip_assignment=is_leader))
                    else:
                        group.complete_join(member, JoinGroupResponse(
                            error_code=ErrorCode.NONE, generation_id=group.generation_id,
                            protocol_type=group.protocol_type, protocol_name=group.protocol_name,
                            leader=current_leader or "", member_id=new_member_id, members=[]))

                self._write(group.group_id, [self.group_metadata_record(group, group.assignment_of_members())],
                            on_written)
            else:
                self._maybe_prepare_rebalance_or_complete_join(group, now_ms)
        elif group.is_in_state(_S.COMPLETING_REBALANCE):
            # The leader may already have computed an assignment for the old member id: rebalance.
            self._prepare_rebalance(group, now_ms)
        else:
            self._maybe_prepare_rebalance_or_complete_join(group, now_ms)

    # -- rebalance ---------------------------------------------------------------------------------------------------

    def _maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, now_ms)
        else:
            self._maybe_complete_join_phase(group, now_ms)

    def prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> None:
        """A rebalance the coordinator asks for (a group downgraded from the consumer protocol lost a member)."""
        self._prepare_rebalance(group, now_ms)

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> None:
        if group.is_in_state(_S.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_with_error(group, ErrorCode.REBALANCE_IN_PROGRESS, now_ms)
        self.timer.cancel(_sync_key(group.group_id))
        is_initial_rebalance = group.is_in_state(_S.EMPTY)
        if is_initial_rebalance:
            # A new group waits group.initial.rebalance.delay.ms for more members; each member that joins in that
            # window extends it by another delay, up to the rebalance timeout.
            delay_ms = self.config.initial_rebalance_delay_ms
            remaining_ms = max(self.rebalance_timeout_ms(group) - delay_ms, 0)
            group_id = group.group_id
            self.timer.schedule(_join_key(group_id), now_ms + delay_ms,
                                lambda at_ms: self._try_complete_initial_rebalance(group_id, delay_ms, remaining_ms,
                                                                                   at_ms))
        log.info("Preparing to rebalance group %s in state %s with old generation %d", group.group_id,
                 group.state.value, group.generation_id)
        group.transition_to(_S.PREPARING_REBALANCE, now_ms)
        if not is_initial_rebalance:
            self._maybe_complete_join_else_schedule(group, now_ms)

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup, now_ms: int) -> None:
        if group.has_all_members_joined():
            self._complete_join(group, now_ms)
        else:
            group_id = group.group_id
            self.timer.schedule(_join_key(group_id), now_ms + self.rebalance_timeout_ms(group),
                                lambda at_ms: self._complete_join_by_id(group_id, at_ms))

    def _try_complete_initial_rebalance(self, group_id: str, delay_ms: int, remaining_ms: int, now_ms: int) -> None:
        group = self.groups.get(group_id)
        if group is None or not group.is_in_state(_S.PREPARING_REBALANCE):
            return
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            new_delay_ms = min(self.config.initial_rebalance_delay_ms, remaining_ms)
            new_remaining_ms = max(remaining_ms - delay_ms, 0)
            self.timer.schedule(_join_key(group_id), now_ms + new_delay_ms,
                                lambda at_ms: self._try_complete_initial_rebalance(group_id, new_delay_ms,
                                                                                   new_remaining_ms, at_ms))
        else:
            self._complete_join(group, now_ms)

    def _maybe_complete_join_phase(self, group: ClassicGroup, now_ms: int) -> None:
        if (group.is_in_state(_S.PREPARING_REBALANCE) and group.has_all_members_joined()
                and group.previous_state is not _S.EMPTY):
            self._complete_join(group, now_ms)

    def _complete_join_by_id(self, group_id: str, now_ms: int) -> None:
        group = self.groups.get(group_id)
        if group is not None and group.is_in_state(_S.PREPARING_REBALANCE):
            self._complete_join(group, now_ms)

    def _complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        self.timer.cancel(_join_key(group.group_id))
        for member in group.not_yet_rejoined_members():
            if not member.is_static:
                group.remove(member.member_id)
                self.timer.cancel(_heartbeat_key(group.group_id, member.member_id))
        if group.is_in_state(_S.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and not group.is_empty:
            # Only static members that did not rejoin are left: wait another rebalance timeout for them (or for
            # their sessions to expire).
            log.error("Group %s could not complete rebalance because no members rejoined", group.group_id)
            group_id = group.group_id
            self.timer.schedule(_join_key(group_id), now_ms + self.rebalance_timeout_ms(group),
                                lambda at_ms: self._complete_join_by_id(group_id, at_ms))
            return
        group.init_next_generation(now_ms)
        if group.is_in_state(_S.EMPTY):
            log.info("Group %s with generation %d is now empty", group.group_id, group.generation_id)
            self._write(group.group_id, [self.group_metadata_record(group, {})], None)
            return
        log.info("Stabilized group %s generation %d with %d members", group.group_id, group.generation_id,
                 len(group.members))
        for member in list(group.members.values()):
            response = self._join_response(group, member, 0)
            group.complete_join(member, response)
            self._reschedule_heartbeat(group, member, now_ms)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        group_id, generation_id = group.group_id, group.generation_id
        self.timer.schedule(_sync_key(group_id), now_ms + self.rebalance_timeout_ms(group),
                            lambda at_ms: self._expire_pending_sync(group_id, generation_id, at_ms))

    def _expire_pending_sync(self, group_id: str, generation_id: int, now_ms: int) -> None:
        group = self.groups.get(group_id)
        if group is None or generation_id != group.generation_id:
            return
        if group.is_in_state(_S.COMPLETING_REBALANCE, _S.STABLE) and not group.has_received_sync_from_all_members():
            pending = sorted(group.pending_sync_members)
            for member_id in pending:
                group.remove(member_id)
                self.timer.cancel(_heartbeat_key(group_id, member_id))
            log.info("Removing %s from group %s: no SyncGroup within the rebalance timeout", pending, group_id)
            self._prepare_rebalance(group, now_ms)

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.is_in_state(_S.DEAD, _S.EMPTY, _S.PREPARING_REBALANCE) \
                or group.has_received_sync_from_all_members():
            self.timer.cancel(_sync_key(group.group_id))

    def _reset_and_propagate_assignment_with_error(self, group: ClassicGroup, error: ErrorCode,
                                                   now_ms: int) -> None:
        for member in group.members.values():
            member.assignment = EMPTY_ASSIGNMENT
        self._propagate_assignment(group, error, now_ms)

    def _set_and_propagate_assignment(self, group: ClassicGroup, assignment: dict[str, bytes], now_ms: int) -> None:
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, EMPTY_ASSIGNMENT)
        self._propagate_assignment(group, ErrorCode.NONE, now_ms)

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode, now_ms: int) -> None:
        ok = error == ErrorCode.NONE
        for member in list(group.members.values()):
            response = SyncGroupResponse(error_code=error,
                                         protocol_type=group.protocol_type if ok else None,
                                         protocol_name=group.protocol_name if ok else None,
                                         assignment=member.assignment)
            if group.complete_sync(member, response):
                # A session that ran out while the member waited for its assignment counted as satisfied; start
                # the session again now that it has its answer.
                self._reschedule_heartbeat(group, member, now_ms)

    # -- sessions ----------------------------------------------------------------------------------------------------

    def _reschedule_heartbeat(self, group: ClassicGroup, member: ClassicGroupMember, now_ms: int,
                              timeout_ms: int | None = None) -> None:
        group_id, member_id = group.group_id, member.member_id
        timeout_ms = member.session_timeout_ms if timeout_ms is None else timeout_ms
        self.timer.schedule(_heartbeat_key(group_id, member_id), now_ms + max(timeout_ms, 0),
                            lambda at_ms: self._expire_member(group_id, member_id, at_ms))

    def reschedule_heartbeat(self, group: ClassicGroup, member_id: str, now_ms: int) -> None:
        member = group.members.get(member_id)
        if member is not None:
            self._reschedule_heartbeat(group, member, now_ms)

    def _expire_member(self, group_id: str, member_id: str, now_ms: int) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_in_state(_S.DEAD):
            return
        if group.is_pending_member(member_id):
            log.info("Pending member %s of group %s expired (no second JoinGroup)", member_id, group_id)
            group.remove(member_id)
            if group.is_in_state(_S.PREPARING_REBALANCE) and group.has_all_members_joined():
                self._complete_join(group, now_ms)
            self._drop_if_unused(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        log.info("Member %s of group %s expired (session timeout)", member_id, group_id)
        self._remove_member_and_update_group(group, member, now_ms)

    def _remove_member_and_update_group(self, group: ClassicGroup, member: ClassicGroupMember, now_ms: int) -> None:
        # A new member may still wait for its JoinGroup answer: tell it to join again.
        group.complete_join(member, JoinGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID,
                                                      member_id=UNKNOWN_MEMBER_ID))
        group.remove(member.member_id)
        if group.is_in_state(_S.STABLE, _S.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, now_ms)
        elif group.is_in_state(_S.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group, now_ms)

    def _drop_if_unused(self, group: ClassicGroup) -> None:
        """A group that never got past its first JoinGroup (no generation, nothing stored) is forgotten."""
        if group.is_empty and group.is_in_state(_S.EMPTY) and group.generation_id == 0 \
                and not group.pending_join_members and not self._has_offsets(group.group_id) \
                and self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    # -- SyncGroup ---------------------------------------------------------------------------------------------------

    def sync_group(self, request: SyncGroupRequest, now_ms: int, respond: Responder) -> None:
        group = self.groups.get(request.group_id)
        if group is None:
            respond(SyncGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID))
            return
        error = self._validate_sync_group(group, request)
        if error != ErrorCode.NONE:
            respond(SyncGroupResponse(error_code=error))
        elif group.is_in_state(_S.EMPTY):
            respond(SyncGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID))
        elif group.is_in_state(_S.PREPARING_REBALANCE):
            respond(SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS))
        elif group.is_in_state(_S.COMPLETING_REBALANCE):
            member = group.member(request.member_id)
            if member.awaiting_sync is not None:
                # A retried SyncGroup replaces the first; the first still needs an answer on its connection.
                member.awaiting_sync(SyncGroupResponse(error_code=ErrorCode.REBALANCE_IN_PROGRESS))
            member.awaiting_sync = respond
            self._remove_pending_sync_member(group, request.member_id)
            if group.is_leader(request.member_id):
                assignment = {a.member_id: bytes(a.assignment) for a in request.assignments}
                missing = [member_id for member_id in group.members if member_id not in assignment]
                if missing:
                    log.warning("Setting empty assignments for members %s of group %s generation %d", missing,
                                group.group_id, group.generation_id)
                for member_id in missing:
                    assignment[member_id] = EMPTY_ASSIGNMENT
                assignment = {member_id: assignment[member_id] for member_id in group.members}
                generation_id = request.generation_id

                def on_written(error: ErrorCode, at_ms: int) -> None:
                    # Another member may have joined meanwhile: only this generation's CompletingRebalance applies.
                    if not (group.is_in_state(_S.COMPLETING_REBALANCE) and group.generation_id == generation_id):
                        return
                    if error != ErrorCode.NONE:
                        self._reset_and_propagate_assignment_with_error(
                            group, append_error_to_response_error(error), at_ms)
                        self._maybe_prepare_rebalance_or_complete_join(group, at_ms)
                    else:
                        self._set_and_propagate_assignment(group, assignment, at_ms)
                        group.transition_to(_S.STABLE, at_ms)

                self._write(group.group_id, [self.group_metadata_record(group, assignment)], on_written)
        elif group.is_in_state(_S.STABLE):
            self._remove_pending_sync_member(group, request.member_id)
            member = group.member(request.member_id)
            respond(SyncGroupResponse(error_code=ErrorCode.NONE, protocol_type=group.protocol_type,
                                      protocol_name=group.protocol_name, assignment=member.assignment))

    @staticmethod
    def _validate_sync_group(group: ClassicGroup, request: SyncGroupRequest) -> ErrorCode:
        if group.is_in_state(_S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            group.validate_member(request.member_id, request.group_instance_id)
        except KafkaError as error:
            return error.error_code
        if request.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if _inconsistent(request.protocol_type, group.protocol_type) \
                or _inconsistent(request.protocol_name, group.protocol_name):
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return ErrorCode.NONE

    # -- Heartbeat ---------------------------------------------------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest, now_ms: int) -> ErrorCode:
        group = self.groups.get(request.group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if group.is_in_state(_S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        try:
            group.validate_member(request.member_id, request.group_instance_id)
        except KafkaError as error:
            return error.error_code
        if request.generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        if group.is_in_state(_S.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        self.reschedule_heartbeat(group, request.member_id, now_ms)
        if group.is_in_state(_S.PREPARING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    # -- LeaveGroup --------------------------------------------------------------------------------------------------

    def leave_group(self, group_id: str, members: list[LeaveGroupRequest.MemberIdentity],
                    now_ms: int) -> tuple[ErrorCode, list[MemberResponse]]:
        """(top-level error, per-member answers)."""
        group = self.groups.get(group_id)
        if group is None:
            # As Kafka: the request succeeds, and each member is unknown (v0-v2 answer the first member's error).
            return ErrorCode.NONE, [MemberResponse(member_id=identity.member_id,
                                                   group_instance_id=identity.group_instance_id,
                                                   error_code=ErrorCode.UNKNOWN_MEMBER_ID) for identity in members]
        if group.is_in_state(_S.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
        responses: list[MemberResponse] = []
        left = 0
        for identity in members:
            error = ErrorCode.NONE
            if identity.member_id == UNKNOWN_MEMBER_ID:
                # An admin removing a static member by its group instance id.
                static_member_id = (group.static_member_id(identity.group_instance_id)
                                    if identity.group_instance_id is not None else None)
                if static_member_id is not None:
                    self._remove_current_member(group, static_member_id)
                else:
                    error = ErrorCode.UNKNOWN_MEMBER_ID
            elif group.is_pending_member(identity.member_id):
                group.remove(identity.member_id)
                self.timer.cancel(_heartbeat_key(group_id, identity.member_id))
            else:
                try:
                    group.validate_member(identity.member_id, identity.group_instance_id)
                    self._remove_current_member(group, identity.member_id)
                except KafkaError as exception:
                    error = exception.error_code
            if error == ErrorCode.NONE:
                left += 1
            responses.append(MemberResponse(member_id=identity.member_id,
                                            group_instance_id=identity.group_instance_id, error_code=error))
        if left:
            if group.is_in_state(_S.STABLE, _S.COMPLETING_REBALANCE):
                self._maybe_prepare_rebalance_or_complete_join(group, now_ms)
            elif group.is_in_state(_S.PREPARING_REBALANCE):
                self._maybe_complete_join_phase(group, now_ms)
        return ErrorCode.NONE, responses

    def _remove_current_member(self, group: ClassicGroup, member_id: str) -> None:
        member = group.member(member_id)
        self.timer.cancel(_heartbeat_key(group.group_id, member_id))
        log.info("Member %s left group %s", member_id, group.group_id)
        group.complete_join(member, JoinGroupResponse(error_code=ErrorCode.UNKNOWN_MEMBER_ID,
                                                      member_id=UNKNOWN_MEMBER_ID))
        group.remove(member_id)

    # -- records -----------------------------------------------------------------------------------------------------

    @staticmethod
    def group_metadata_record(group: ClassicGroup, assignment: dict[str, bytes]) -> tuple[bytes, bytes | None]:
        protocol_name = group.protocol_name
        members = []
        for member in group.members.values():
            members.append(GroupMetadataValue.MemberMetadata(
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                rebalance_timeout=member.rebalance_timeout_ms,
                session_timeout=member.session_timeout_ms,
                subscription=member.metadata(protocol_name) if protocol_name is not None else b"",
                assignment=assignment.get(member.member_id, EMPTY_ASSIGNMENT),
            ))
        value = GroupMetadataValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.current_state_timestamp_ms
            if group.current_state_timestamp_ms is not None else -1,
            members=members,
        )
        return group_metadata_key(group.group_id), group_metadata_value(value)

    def replay_group_metadata(self, group_id: str, value: GroupMetadataValue | None, now_ms: int) -> None:
        """Load a group from its latest record (None: deleted)."""
        if value is None:
            self.groups.pop(group_id, None)
            return
        protocol_type = value.protocol_type or None
        group = ClassicGroup(group_id, now_ms, _S.STABLE if value.members else _S.EMPTY)
        group.generation_id = value.generation
        group.protocol_type = protocol_type
        group.protocol_name = value.protocol
        group.leader_id = value.leader
        group.current_state_timestamp_ms = value.current_state_timestamp if value.current_state_timestamp != -1 \
            else None
        for metadata in value.members:
            rebalance_timeout_ms = metadata.rebalance_timeout if metadata.rebalance_timeout != -1 \
                else metadata.session_timeout
            member = ClassicGroupMember(metadata.member_id, metadata.group_instance_id, metadata.client_id,
                                        metadata.client_host, rebalance_timeout_ms, metadata.session_timeout,
                                        value.protocol_type, [(value.protocol or "", bytes(metadata.subscription))],
                                        bytes(metadata.assignment))
            group.add(member)
        group.protocol_type = protocol_type
        group.subscribed_topics = group.compute_subscribed_topics()
        self.groups[group_id] = group

    def on_loaded(self, group: ClassicGroup, now_ms: int) -> None:
        """Start the sessions of a loaded group's members; a group over group.max.size rebalances."""
        for member in group.members.values():
            self._reschedule_heartbeat(group, member, now_ms)
        if len(group.members) > self.config.max_size:
            self._prepare_rebalance(group, now_ms)

    def unload(self, group: ClassicGroup, error: ErrorCode = ErrorCode.NOT_COORDINATOR) -> None:
        """The partition moved away (or the group became a consumer group): answer whoever waits with `error` and
        forget the group."""
        group_id = group.group_id
        for member in list(group.members.values()):
            self.timer.cancel(_heartbeat_key(group_id, member.member_id))
            group.complete_join(member, JoinGroupResponse(error_code=error, member_id=member.member_id))
            group.complete_sync(member, SyncGroupResponse(error_code=error))
        for member_id in group.pending_join_members:
            self.timer.cancel(_heartbeat_key(group_id, member_id))
        self.timer.cancel(_join_key(group_id))
        self.timer.cancel(_sync_key(group_id))
        group.transition_to(_S.DEAD, group.current_state_timestamp_ms or 0)
        self.groups.pop(group_id, None)


def _inconsistent(protocol: str | None, group_protocol: str | None) -> bool:
    return protocol is not None and group_protocol is not None and protocol != group_protocol
