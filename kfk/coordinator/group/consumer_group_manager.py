"""ConsumerGroupManager: the KIP-848 consumer protocol as a state machine (Kafka's GroupMetadataManager, consumer
group part): ConsumerGroupHeartbeat, the members' sessions and rebalance timeouts, ConsumerGroupDescribe, and the
replay of the consumer groups' __consumer_offsets records.

Every change is a record: a heartbeat computes the records its changes need (member subscription, group epoch,
partition metadata, target assignment, the member's current assignment), applies them at once through `replay`
(the same path a load takes, so a coordinator that takes over after a restart or a failover rebuilds exactly the
state it had) and answers once they are committed to __consumer_offsets. (A write that fails answers with the
mapped error and keeps what was applied, where Kafka reverts to its last committed state: writes fail when the
partition moves away, and the next coordinator loads the log.) One heartbeat:

1. validates the request (Kafka's INVALID_REQUEST messages) and finds the member: a new one at epoch 0 (a static
   member whose instance id a previous member released with epoch -2 takes over that member's assignment, with no
   rebalance), else an existing one whose epoch must match (FENCED_MEMBER_EPOCH; the previous epoch is accepted
   when the member owns no more than its assignment: the answer that moved it on may have been lost);
2. records a changed subscription and the metadata of the subscribed topics (names, and the topics the regular
   expressions match: RE2 syntax, as Kafka's RE2/J); either change bumps the group epoch;
3. computes a new target assignment with the group's assignor when the group epoch is ahead of it;
4. reconciles the member toward its target (kfk.coordinator.group.current_assignment): revocations first, then
   partitions no other member owns any more.

A member that misses its session (`group.consumer.session.timeout.ms`) or does not revoke within its rebalance
timeout is fenced: its records are deleted and the group epoch bumped; the next heartbeat of any member computes
the new target. Topics created, deleted or grown are seen by the next heartbeat of each group (the subscription
metadata is compared with the metadata image each time).

Classic members (a group upgraded online from the classic protocol, or a JoinGroup to a group with members) live in
the same group, with their JoinGroup protocols recorded: a JoinGroup is their heartbeat at epoch 0 (subscription from
the protocol metadata, owned partitions from it too), its generation their member epoch; SyncGroup gives their current
partitions; Heartbeat answers REBALANCE_IN_PROGRESS when they must join again to move on (Kafka's
classicGroup*ToConsumerGroup). When the last consumer-protocol member leaves, the coordinator may downgrade the group
(kfk.coordinator.group.group_migration).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import re2

from kfk.coordinator.append_errors import append_error_to_response_error
from kfk.coordinator.group.assignors import ASSIGNORS
from kfk.coordinator.group.classic_group import parse_subscription
from kfk.coordinator.group.config import GroupCoordinatorConfig
from kfk.coordinator.group.consumer_group import (
    CONSUMER_PROTOCOL_TYPE,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    TopicMetadata,
    copy_member,
    new_member_id,
    normalized,
)
from kfk.coordinator.group.consumer_group_records import (
    ConsumerGroupRecord,
    Record,
    RecordType,
    assignment_epochs_of,
    assignment_of,
    classic_protocols_of,
    current_assignment_record,
    group_epoch_record,
    group_tombstones,
    member_metadata_record,
    member_state_of,
    member_tombstones,
    partition_metadata_record,
    target_assignment_epoch_record,
    target_assignment_record,
)
from kfk.coordinator.group.current_assignment import reconcile
from kfk.coordinator.group.group_migration import assignment_bytes, owned_assignment
from kfk.coordinator.group.record_serde import deserialize_record
from kfk.coordinator.timer import CoordinatorTimer
from kfk.coordinator.writes import WriteFunction
from kfk.errors import (
    ErrorCode,
    FencedInstanceIdError,
    FencedMemberEpochError,
    GroupIdNotFoundError,
    GroupMaxSizeReachedError,
    IllegalGenerationError,
    InconsistentGroupProtocolError,
    InvalidRequestError,
    KafkaError,
    StaleMemberEpochError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
    UnsupportedAssignorError,
    UnsupportedVersionError,
)
from kfk.group_config import CONSUMER_HEARTBEAT_INTERVAL_MS, CONSUMER_SESSION_TIMEOUT_MS, group_override
from kfk.metadata.image import ConfigResourceType, MetadataImage
from kfk.protocol.messages.consumer_group_describe import ConsumerGroupDescribeResponse
from kfk.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from kfk.protocol.messages.heartbeat import HeartbeatRequest
from kfk.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from kfk.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from kfk.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

log = logging.getLogger("kfk.coordinator.group")

#: ConsumerGroupDescribe's MemberType of a member of either protocol.
CLASSIC_MEMBER_TYPE = 0
CONSUMER_MEMBER_TYPE = 1

#: JoinGroup v4+ without a group instance id: the first request only gets a member id (MEMBER_ID_REQUIRED).
FIRST_JOIN_VERSION_REQUIRING_MEMBER_ID = 4

#: ConsumerGroupHeartbeat v1+: the client makes its member id (KIP-1082); v0 may leave it to the coordinator.
FIRST_VERSION_WITH_CLIENT_MEMBER_ID = 1

Responder = Callable[[ConsumerGroupHeartbeatResponse], None]
#: (group, leaving member id, now) -> the records of the group's downgrade to a classic group, None if refused.
Downgrade = Callable[[ConsumerGroup, str, int], "list[Record] | None"]
#: The epoch a consumer group created by a member's first heartbeat moves to: 2 in Kafka 4.4 (a group left by its
#: last member and joined again moves by 1, as every later change does; Kafka 4.0 started at 1).
NEW_GROUP_FIRST_EPOCH = 2
#: Checks one (topic, partition) of an offset commit made at an older member epoch; raises its error.
PartitionValidator = Callable[[str, int], None]

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False


def _session_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-session", group_id, member_id)


def _rebalance_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-rebalance", group_id, member_id)


def _sync_key(group_id: str, member_id: str) -> tuple[str, str, str]:
    return ("consumer-classic-sync", group_id, member_id)


def _blank(value: str | None) -> bool:
    """Kafka's throwIfEmptyString test: set, and nothing but whitespace (Java's trim strips chars <= U+0020)."""
    return value is not None and all(char <= " " for char in value)


def _owned_assignment(request: ConsumerGroupHeartbeatRequest) -> Assignment | None:
    if request.topic_partitions is None:
        return None
    return normalized({entry.topic_id: set(entry.partitions) for entry in request.topic_partitions})


def compile_regex(pattern: str):
    """The regular expression, in RE2 syntax (Kafka compiles SubscribedTopicRegex with RE2/J); INVALID_REQUEST when
    it does not compile."""
    try:
        return re2.compile(pattern, options=_RE2_OPTIONS)
    except re2.error as error:
        raise InvalidRequestError(f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: "
                                  f"{error}.") from error


class ConsumerGroupManager:
    def __init__(self, config: GroupCoordinatorConfig, timer: CoordinatorTimer, write: WriteFunction,
                 image: Callable[[], MetadataImage], classic_group_exists: Callable[[str], bool],
                 downgrade: Downgrade | None = None) -> None:
        self.config = config
        self.timer = timer
        self._write = write
        self._image = image
        #: Whether a classic group (with members or offsets) holds the id: the consumer protocol cannot take it.
        self._classic_group_exists = classic_group_exists
        #: Converts the group to a classic group when the leaving member is its last of the consumer protocol and
        #: the conversion is allowed (the records that do it), else None (kfk.coordinator.group.group_migration).
        self._downgrade = downgrade
        self.groups: dict[str, ConsumerGroup] = {}
        self._regex_cache: dict[str, frozenset[str]] = {}
        self._regex_cache_offset = -2

    def group(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def _group_setting(self, group_id: str, name: str, broker_value: int) -> int:
        """A timing the group's own config (kafka-configs --entity-type groups) may set, else the broker's: read at
        each use, so a change applies from the member's next heartbeat, as in Kafka."""
        return group_override(self._image().config(ConfigResourceType.GROUP, group_id), name, broker_value)

    # -- ConsumerGroupHeartbeat --------------------------------------------------------------------------------------

    def heartbeat(self, request: ConsumerGroupHeartbeatRequest, api_version: int, client_id: str, client_host: str,
                  now_ms: int, respond: Responder) -> None:
        try:
            self._validate(request, api_version)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                self._leave(request, now_ms, respond)
            else:
                self._heartbeat(request, client_id, client_host, now_ms, respond)
        except KafkaError as error:
            log.debug("ConsumerGroupHeartbeat of member %s of group %s refused: %s", request.member_id,
                      request.group_id, error)
            respond(ConsumerGroupHeartbeatResponse(error_code=error.error_code, error_message=error.message))

    def _validate(self, request: ConsumerGroupHeartbeatRequest, api_version: int) -> None:
        """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid, check for check."""
        epoch = request.member_epoch
        if api_version >= FIRST_VERSION_WITH_CLIENT_MEMBER_ID or epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if _blank(request.member_id):
                raise InvalidRequestError("MemberId can't be empty.")
        if _blank(request.group_id):
            raise InvalidRequestError("GroupId can't be empty.")
        if _blank(request.instance_id):
            raise InvalidRequestError("InstanceId can't be empty.")
        if _blank(request.rack_id):
            raise InvalidRequestError("RackId can't be empty.")
        if epoch == 0:
            if request.rebalance_timeout_ms == -1:
                raise InvalidRequestError("RebalanceTimeoutMs must be provided in first request.")
            if request.topic_partitions is None or request.topic_partitions:
                raise InvalidRequestError("TopicPartitions must be empty when (re-)joining.")
            # An empty list of names (a pattern that matches nothing yet) or an empty regex joins with no topics.
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                raise InvalidRequestError("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null "
                                          "when (re-)joining.")
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if request.instance_id is None:
                raise InvalidRequestError("InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise InvalidRequestError("MemberEpoch is invalid.")
        if request.subscribed_topic_regex:
            compile_regex(request.subscribed_topic_regex)
        assignors = self.config.consumer_group_assignors
        if request.server_assignor is not None and request.server_assignor not in assignors:
            raise UnsupportedAssignorError(f"ServerAssignor {request.server_assignor} is not supported. Supported "
                                           f"assignors: {', '.join(assignors)}.")

    def _heartbeat(self, request: ConsumerGroupHeartbeatRequest, client_id: str, client_host: str, now_ms: int,
                   respond: Responder) -> None:
        group_id = request.group_id
        epoch = request.member_epoch
        group = self.groups.get(group_id)
        created = group is None
        if group is None:
            if epoch != 0:
                raise GroupIdNotFoundError(f"Consumer group {group_id} not found.")
            if self._classic_group_exists(group_id):
                raise GroupIdNotFoundError(f"Group {group_id} is not a consumer group.")
            group = ConsumerGroup(group_id)
        member_id = request.member_id or new_member_id()
        max_size = self.config.consumer_group_max_size
        if len(group.members) >= max_size and (not request.member_id or member_id not in group.members):
            raise GroupMaxSizeReachedError(
                f"The consumer group has reached its maximum capacity of {max_size} members.")
        records: list[Record] = []
        member, replaced = self._member_for(group, request, member_id)
        if replaced is not None:
            # The static member's new incarnation inherits its target: nothing moves.
            records += member_tombstones(group_id, replaced.member_id)
            records.append(target_assignment_record(group_id, member_id,
                                                    group.target_assignment.get(replaced.member_id, {})))
        elif epoch != 0:
            # A member joining again at epoch 0 with its id (after FENCED_MEMBER_EPOCH, or a lost answer) gets its
            # assignment again; any other epoch must be the member's.
            self._check_member_epoch(member, epoch, _owned_assignment(request))

        updated = self._updated_member(member, request, client_id, client_host)
        is_new = member_id not in group.members or replaced is not None
        # A static member's new incarnation with the subscription it had changes nothing of the group.
        previous = replaced if replaced is not None else member
        bump = (is_new and replaced is None) or (updated.subscribed_topic_names, updated.subscribed_topic_regex) != \
            (previous.subscribed_topic_names, previous.subscribed_topic_regex)
        if updated != member or is_new:
            records.append(member_metadata_record(group_id, updated))
        self.apply(records)  # a new group is created by the replay of its first record
        records_applied = list(records)
        group = self.groups[group_id]

        records = self._refresh_metadata(group, force_bump=bump, created=created)
        self.apply(records)
        records_applied += records

        records = self._maybe_update_target(group)
        self.apply(records)
        records_applied += records

        current = group.members[member_id]
        reconciled = reconcile(current, group.assignment_epoch, group.target_assignment.get(member_id, {}),
                               _owned_assignment(request), group.current_partition_epoch)
        if reconciled != current or is_new:
            records = [current_assignment_record(group_id, reconciled)]
            self.apply(records)
            records_applied += records
        self._schedule_session_timeout(group_id, member_id, now_ms)
        self._schedule_rebalance_timeout(group, reconciled, now_ms)

        response = ConsumerGroupHeartbeatResponse(
            error_code=ErrorCode.NONE, member_id=member_id, member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self._group_setting(group_id, CONSUMER_HEARTBEAT_INTERVAL_MS,
                                                      self.config.consumer_group_heartbeat_interval_ms))
        full_request = request.rebalance_timeout_ms != -1 and request.topic_partitions is not None and (
            request.subscribed_topic_names is not None or request.subscribed_topic_regex is not None)
        if epoch == 0 or full_request or reconciled.assigned_partitions != member.assigned_partitions:
            response.assignment = ConsumerGroupHeartbeatResponse.Assignment(topic_partitions=[
                ConsumerGroupHeartbeatResponse.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
                for topic_id, partitions in sorted(reconciled.assigned_partitions.items(), key=lambda i: str(i[0]))])
        self._respond_after_write(group_id, records_applied, response, respond)

    def _member_for(self, group: ConsumerGroup, request: ConsumerGroupHeartbeatRequest, member_id: str
                    ) -> tuple[ConsumerGroupMember, ConsumerGroupMember | None]:
        """(the member the heartbeat is of, the static member it replaces or None)."""
        instance_id = request.instance_id
        if instance_id is None:
            member = group.member(member_id)
            if member is None:
                if request.member_epoch != 0:
                    raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
                member = ConsumerGroupMember(member_id)
            return member, None
        existing = group.static_member(instance_id)
        if request.member_epoch == 0:
            if existing is None or existing.member_id == member_id:
                return existing or ConsumerGroupMember(member_id, instance_id=instance_id), None
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise UnreleasedInstanceIdError(
                    f"Static member {member_id} with instance id {instance_id} cannot join the group because the "
                    f"instance id is owned by {existing.member_id} member.")
            log.info("Static member %s with instance id %s of group %s replaces member %s", member_id, instance_id,
                     group.group_id, existing.member_id)
            return ConsumerGroupMember(member_id, instance_id=instance_id,
                                       assigned_partitions=existing.assigned_partitions), existing
        if existing is None:
            raise UnknownMemberIdError(f"Instance id {instance_id} is unknown.")
        if existing.member_id != member_id:
            raise FencedInstanceIdError(f"Static member {member_id} with instance id {instance_id} was fenced by "
                                        f"member {existing.member_id}.")
        return existing, None

    @staticmethod
    def _check_member_epoch(member: ConsumerGroupMember, received: int, owned: Assignment | None) -> None:
        if received > member.member_epoch:
            raise FencedMemberEpochError(
                f"The consumer group member has a greater member epoch ({received}) than the one known by the group "
                f"coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.")
        if received < member.member_epoch:
            # The answer that moved the member on may have been lost: its previous epoch is accepted while it owns
            # no more than its assignment.
            subset = owned is not None and all(partitions <= member.assigned_partitions.get(topic_id, frozenset())
                                               for topic_id, partitions in owned.items())
            if received != member.previous_member_epoch or not subset:
                raise FencedMemberEpochError(
                    f"The consumer group member has a smaller member epoch ({received}) than the one known by the "
                    f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and "
                    f"rejoin.")

    @staticmethod
    def _updated_member(member: ConsumerGroupMember, request: ConsumerGroupHeartbeatRequest, client_id: str,
                        client_host: str) -> ConsumerGroupMember:
        changes: dict = {"client_id": client_id, "client_host": client_host}
        if request.instance_id is not None:
            changes["instance_id"] = request.instance_id
        if request.rack_id is not None:
            changes["rack_id"] = request.rack_id
        if request.rebalance_timeout_ms != -1:
            changes["rebalance_timeout_ms"] = request.rebalance_timeout_ms
        if request.server_assignor is not None:
            changes["server_assignor"] = request.server_assignor
        if request.subscribed_topic_names is not None:
            changes["subscribed_topic_names"] = tuple(sorted(set(request.subscribed_topic_names)))
        if request.subscribed_topic_regex is not None:
            changes["subscribed_topic_regex"] = request.subscribed_topic_regex or None
        return copy_member(member, **changes)

    # -- classic members in a consumer group (an online migration: kfk.coordinator.group.group_migration) -----------

    def adopt_members(self, group_id: str, members: list[ConsumerGroupMember], epoch: int,
                      now_ms: int) -> list[Record]:
        """The records (applied) of a consumer group made of a classic group's members at `epoch`, each owning its
        assignment, which is also its target (Kafka's ConsumerGroup.createConsumerGroupRecords)."""
        records = [member_metadata_record(group_id, member) for member in members]
        records.append(group_epoch_record(group_id, epoch))
        self.apply(records)
        group = self.groups[group_id]
        image = self._image()
        more = [partition_metadata_record(group_id, self._subscription_metadata(group, image))]
        more += [target_assignment_record(group_id, member.member_id, member.assigned_partitions)
                 for member in members]
        more.append(target_assignment_epoch_record(group_id, epoch))
        more += [current_assignment_record(group_id, member) for member in members]
        self.apply(more)
        group.metadata_checked = (image.offset, group.subscriptions_version)
        for member in members:
            self._schedule_session_timeout(group_id, member.member_id, now_ms, member.classic_session_timeout_ms)
        return records + more

    def classic_join(self, request: JoinGroupRequest, api_version: int, client_id: str, client_host: str,
                     now_ms: int, respond: Callable[[JoinGroupResponse], None]) -> None:
        """A JoinGroup to a consumer group with members: the classic member joins the consumer protocol's
        assignment; its generation is its member epoch (Kafka's classicGroupJoinToConsumerGroup)."""
        try:
            self._classic_join(self.groups[request.group_id], request, api_version, client_id, client_host, now_ms,
                               respond)
        except KafkaError as error:
            log.debug("JoinGroup of member %s to consumer group %s refused: %s", request.member_id, request.group_id,
                      error)
            respond(JoinGroupResponse(error_code=error.error_code, member_id=request.member_id))

    def _classic_join(self, group: ConsumerGroup, request: JoinGroupRequest, api_version: int, client_id: str,
                      client_host: str, now_ms: int, respond: Callable[[JoinGroupResponse], None]) -> None:
        group_id = group.group_id
        is_unknown = not request.member_id
        member_id = request.member_id or new_member_id()
        max_size = self.config.consumer_group_max_size
        if len(group.members) >= max_size and member_id not in group.members:
            raise GroupMaxSizeReachedError(
                f"The consumer group has reached its maximum capacity of {max_size} members.")
        protocols = tuple((protocol.name, bytes(protocol.metadata)) for protocol in request.protocols)
        if not self._supports_classic_protocols(group, request.protocol_type, [name for name, _ in protocols]):
            raise InconsistentGroupProtocolError(
                f"Member {member_id}'s supported protocols are not compatible with group {group_id}.")
        if is_unknown and request.group_instance_id is None and api_version >= FIRST_JOIN_VERSION_REQUIRING_MEMBER_ID:
            respond(JoinGroupResponse(error_code=ErrorCode.MEMBER_ID_REQUIRED, member_id=member_id))
            return
        records: list[Record] = []
        member = group.member(member_id)
        replaced = None
        if request.group_instance_id is not None:
            existing = group.static_member(request.group_instance_id)
            if existing is not None and existing.member_id != member_id:
                if not is_unknown:
                    raise FencedInstanceIdError(f"Static member {member_id} with instance id "
                                                f"{request.group_instance_id} was fenced by member "
                                                f"{existing.member_id}.")
                # The static member's new incarnation takes over its assignment.
                replaced = existing
                member = copy_member(existing, member_id=member_id)
                records += member_tombstones(group_id, existing.member_id)
                records.append(target_assignment_record(group_id, member_id,
                                                        group.target_assignment.get(existing.member_id, {})))
        if member is not None and not member.uses_classic_protocol:
            raise UnknownMemberIdError(f"Member {member_id} does not use the classic protocol.")
        is_new = member is None or replaced is not None
        if member is None:
            member = ConsumerGroupMember(member_id)
        subscription = parse_subscription(protocols[0][1])
        if subscription is None:
            raise InconsistentGroupProtocolError(f"The subscription of member {member_id} does not parse.")
        updated = copy_member(
            member, instance_id=request.group_instance_id, rack_id=subscription.rack_id or None,
            rebalance_timeout_ms=request.rebalance_timeout_ms, server_assignor=None, client_id=client_id,
            client_host=client_host, subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            subscribed_topic_regex=None, classic_protocols=protocols,
            classic_session_timeout_ms=request.session_timeout_ms)
        bump = is_new and replaced is None or updated.subscribed_topic_names != member.subscribed_topic_names
        if updated != member or is_new:
            records.append(member_metadata_record(group_id, updated))
        self.apply(records)
        applied = list(records)
        for step in (lambda: self._refresh_metadata(group, force_bump=bump), lambda: self._maybe_update_target(group)):
            records = step()
            self.apply(records)
            applied += records
        current = group.members[member_id]
        reconciled = reconcile(current, group.assignment_epoch, group.target_assignment.get(member_id, {}),
                               owned_assignment(protocols[0][1], self._image()), group.current_partition_epoch)
        if reconciled != current or is_new:
            records = [current_assignment_record(group_id, reconciled)]
            self.apply(records)
            applied += records
        self._schedule_session_timeout(group_id, member_id, now_ms, request.session_timeout_ms)
        self._schedule_rebalance_timeout(group, reconciled, now_ms)
        self.timer.schedule(_sync_key(group_id, member_id), now_ms + max(request.rebalance_timeout_ms, 0),
                            lambda at_ms: self._fence(group_id, member_id, "no SyncGroup within its rebalance "
                                                      "timeout", at_ms))
        response = JoinGroupResponse(error_code=ErrorCode.NONE, generation_id=reconciled.member_epoch,
                                     protocol_type=CONSUMER_PROTOCOL_TYPE, protocol_name=protocols[0][0],
                                     leader="", member_id=member_id, members=[])

        def on_written(error: ErrorCode, at_ms: int) -> None:
            if error == ErrorCode.NONE:
                respond(response)
            else:
                respond(JoinGroupResponse(error_code=append_error_to_response_error(error), member_id=member_id))

        if applied:
            self._write(group_id, applied, on_written)
        else:
            respond(response)

    @staticmethod
    def _supports_classic_protocols(group: ConsumerGroup, protocol_type: str, names: list[str]) -> bool:
        """The consumer protocol type, and a protocol every classic member of the group supports too."""
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
            return False
        classic = [member for member in group.members.values() if member.uses_classic_protocol]
        return not classic or any(all(name in dict(member.classic_protocols or ()) for member in classic)
                                  for name in names)

    def _classic_member(self, group: ConsumerGroup, member_id: str,
                        instance_id: str | None) -> ConsumerGroupMember:
        if instance_id is not None:
            existing = group.static_member(instance_id)
            if existing is None:
                raise UnknownMemberIdError(f"Instance id {instance_id} is unknown.")
            if existing.member_id != member_id:
                raise FencedInstanceIdError(f"Static member {member_id} with instance id {instance_id} was fenced "
                                            f"by member {existing.member_id}.")
        member = group.member(member_id)
        if member is None or not member.uses_classic_protocol:
            raise UnknownMemberIdError(f"Member {member_id} is not a classic member of group {group.group_id}.")
        return member

    def classic_sync(self, request: SyncGroupRequest, now_ms: int,
                     respond: Callable[[SyncGroupResponse], None]) -> None:
        """A SyncGroup of a classic member: its current partitions (Kafka's classicGroupSyncToConsumerGroup)."""
        group = self.groups[request.group_id]
        try:
            member = self._classic_member(group, request.member_id, request.group_instance_id)
            if request.generation_id != member.member_epoch:
                raise IllegalGenerationError(f"The request generation id {request.generation_id} is not equal to "
                                             f"the member epoch {member.member_epoch}.")
            protocol_name = (member.classic_protocols or (("", b""),))[0][0]
            if (request.protocol_type is not None and request.protocol_type != CONSUMER_PROTOCOL_TYPE) or \
                    (request.protocol_name is not None and request.protocol_name != protocol_name):
                raise InconsistentGroupProtocolError("The protocol type or name does not match the member's.")
        except KafkaError as error:
            respond(SyncGroupResponse(error_code=error.error_code))
            return
        self.timer.cancel(_sync_key(group.group_id, member.member_id))
        self._schedule_session_timeout(group.group_id, member.member_id, now_ms, member.classic_session_timeout_ms)
        respond(SyncGroupResponse(error_code=ErrorCode.NONE, protocol_type=CONSUMER_PROTOCOL_TYPE,
                                  protocol_name=protocol_name,
                                  assignment=assignment_bytes(member.assigned_partitions, self._image())))

    def classic_heartbeat(self, request: HeartbeatRequest, now_ms: int) -> ErrorCode:
        """A classic member's Heartbeat: REBALANCE_IN_PROGRESS when it must join again to move toward its target
        (the group epoch moved on, it must revoke partitions, or partitions it waited for are free)."""
        group = self.groups[request.group_id]
        try:
            member = self._classic_member(group, request.member_id, request.group_instance_id)
        except KafkaError as error:
            return error.error_code
        if request.generation_id != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self._schedule_session_timeout(group.group_id, member.member_id, now_ms, member.classic_session_timeout_ms)
        if member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS or (
                member.state is MemberState.UNRELEASED_PARTITIONS and not group.waits_on_unreleased_partition(member)):
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def classic_leave(self, group_id: str, identities: list[LeaveGroupRequest.MemberIdentity],
                      now_ms: int) -> tuple[ErrorCode, list[LeaveGroupResponse.MemberResponse]]:
        """LeaveGroup to a consumer group: each member (of either protocol) is removed as a fenced member is."""
        responses = []
        records: list[Record] = []
        for identity in identities:
            error = ErrorCode.NONE
            group = self.groups.get(group_id)
            member = None
            if group is not None:
                if identity.group_instance_id is not None:
                    member = group.static_member(identity.group_instance_id)
                    if member is not None and identity.member_id and member.member_id != identity.member_id:
                        error = ErrorCode.FENCED_INSTANCE_ID
                else:
                    member = group.member(identity.member_id)
            if error == ErrorCode.NONE and member is None:
                error = ErrorCode.UNKNOWN_MEMBER_ID
            if error == ErrorCode.NONE and group is not None and member is not None:
                log.info("Member %s left consumer group %s", member.member_id, group_id)
                records += self._fence_records(group, member, now_ms)
            responses.append(LeaveGroupResponse.MemberResponse(member_id=identity.member_id,
                                                               group_instance_id=identity.group_instance_id,
                                                               error_code=error))
        if records:
            self._write(group_id, records, None)
        return ErrorCode.NONE, responses

    def _subscription_metadata(self, group: ConsumerGroup, image: MetadataImage) -> dict[str, TopicMetadata]:
        names: set[str] = set()
        for member in group.members.values():
            names |= self._member_topic_names(member, image)
        metadata = {}
        for name in names:
            topic = image.topic(name)
            if topic is not None:
                metadata[name] = TopicMetadata(topic.topic_id, name, len(topic.partitions))
        return metadata

    # -- leaving and fencing -----------------------------------------------------------------------------------------

    def _leave(self, request: ConsumerGroupHeartbeatRequest, now_ms: int, respond: Responder) -> None:
        group_id = request.group_id
        group = self.groups.get(group_id)
        if group is None:
            raise GroupIdNotFoundError(f"Consumer group {group_id} not found.")
        response = ConsumerGroupHeartbeatResponse(error_code=ErrorCode.NONE, member_id=request.member_id,
                                                  member_epoch=request.member_epoch)
        if request.instance_id is None:
            member = group.member(request.member_id)
            if member is None:
                raise UnknownMemberIdError(f"Member {request.member_id} is not a member of group {group_id}.")
        else:
            member = group.static_member(request.instance_id)
            if member is None:
                raise UnknownMemberIdError(f"Instance id {request.instance_id} is unknown.")
            if member.member_id != request.member_id:
                raise FencedInstanceIdError(
                    f"Static member {request.member_id} with instance id {request.instance_id} was fenced by member "
                    f"{member.member_id}.")
            if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                # Gone for now: its partitions stay its own until it comes back or its session expires.
                log.info("Static member %s with instance id %s temporarily left group %s", member.member_id,
                         request.instance_id, group_id)
                left = copy_member(member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                                   partitions_pending_revocation={})
                records = [current_assignment_record(group_id, left)]
                self.apply(records)
                self.timer.cancel(_rebalance_key(group_id, member.member_id))
                self._respond_after_write(group_id, records, response, respond)
                return
        log.info("Member %s left consumer group %s", member.member_id, group_id)
        records = self._fence_records(group, member, now_ms)
        self._respond_after_write(group_id, records, response, respond)

    def _fence_records(self, group: ConsumerGroup, member: ConsumerGroupMember, now_ms: int) -> list[Record]:
        """Remove the member (applied): its records deleted, the group epoch bumped; or, when it was the last
        member of the consumer protocol, the group converted to a classic group."""
        group_id = group.group_id
        self.timer.cancel(_session_key(group_id, member.member_id))
        self.timer.cancel(_rebalance_key(group_id, member.member_id))
        self.timer.cancel(_sync_key(group_id, member.member_id))
        if self._downgrade is not None and not member.uses_classic_protocol:
            downgraded = self._downgrade(group, member.member_id, now_ms)
            if downgraded is not None:
                return downgraded
        records = member_tombstones(group_id, member.member_id)
        self.apply(records)
        more = self._refresh_metadata(group, force_bump=True)
        self.apply(more)
        return records + more

    def _fence(self, group_id: str, member_id: str, why: str, now_ms: int) -> None:
        group = self.groups.get(group_id)
        member = group.member(member_id) if group is not None else None
        if member is None:
            return
        log.info("Member %s of consumer group %s fenced: %s", member_id, group_id, why)
        self._write(group_id, self._fence_records(group, member, now_ms), None)

    def _schedule_session_timeout(self, group_id: str, member_id: str, now_ms: int, timeout_ms: int = -1) -> None:
        """A member's session: the group's consumer.session.timeout.ms (group.consumer.session.timeout.ms unless the
        group sets its own), or a classic member's own session timeout."""
        timeout_ms = timeout_ms if timeout_ms > 0 else self._group_setting(
            group_id, CONSUMER_SESSION_TIMEOUT_MS, self.config.consumer_group_session_timeout_ms)
        self.timer.schedule(_session_key(group_id, member_id), now_ms + timeout_ms,
                            lambda at_ms: self._fence(group_id, member_id, "session timeout", at_ms))

    def _schedule_rebalance_timeout(self, group: ConsumerGroup, member: ConsumerGroupMember, now_ms: int) -> None:
        """A member revoking partitions has its rebalance timeout to do it (from when the revocation began)."""
        key = _rebalance_key(group.group_id, member.member_id)
        if member.state is not MemberState.UNREVOKED_PARTITIONS:
            self.timer.cancel(key)
            return
        if self.timer.is_scheduled(key):
            return
        epoch = member.member_epoch
        group_id, member_id = group.group_id, member.member_id

        def expire(at_ms: int) -> None:
            current = self.groups.get(group_id)
            still = current.member(member_id) if current is not None else None
            if still is not None and still.state is MemberState.UNREVOKED_PARTITIONS and still.member_epoch == epoch:
                self._fence(group_id, member_id, "it did not revoke its partitions within its rebalance timeout",
                            at_ms)

        self.timer.schedule(key, now_ms + max(member.rebalance_timeout_ms, 0), expire)

    # -- metadata and target assignment ------------------------------------------------------------------------------

    def _regex_topics(self, pattern: str, image: MetadataImage) -> frozenset[str]:
        if image.offset != self._regex_cache_offset:
            self._regex_cache.clear()
            self._regex_cache_offset = image.offset
        topics = self._regex_cache.get(pattern)
        if topics is None:
            compiled = compile_regex(pattern)
            topics = frozenset(name for name, topic in image.topics_by_name.items()
                               if not topic.is_internal and compiled.fullmatch(name) is not None)
            self._regex_cache[pattern] = topics
        return topics

    def _member_topic_names(self, member: ConsumerGroupMember, image: MetadataImage) -> set[str]:
        names = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            names |= self._regex_topics(member.subscribed_topic_regex, image)
        return names

    def _refresh_metadata(self, group: ConsumerGroup, force_bump: bool, created: bool = False) -> list[Record]:
        """The partition metadata record when the subscribed topics' metadata changed, and the group epoch bumped
        when it did or `force_bump` (to NEW_GROUP_FIRST_EPOCH for a group `created` by this heartbeat)."""
        image = self._image()
        checked = (image.offset, group.subscriptions_version)
        if group.metadata_checked == checked and not force_bump:
            return []  # neither the topics nor the subscriptions changed since the last check
        group.metadata_checked = checked
        metadata = self._subscription_metadata(group, image)
        records: list[Record] = []
        if metadata != group.subscription_metadata:
            records.append(partition_metadata_record(group.group_id, metadata))
        if records or force_bump:
            records.append(group_epoch_record(group.group_id,
                                              NEW_GROUP_FIRST_EPOCH if created else group.group_epoch + 1))
        return records

    def _maybe_update_target(self, group: ConsumerGroup) -> list[Record]:
        if group.group_epoch <= group.assignment_epoch:
            return []
        image = self._image()
        ids = {name: topic.topic_id for name, topic in group.subscription_metadata.items()}
        subscriptions = {member_id: frozenset(ids[name] for name in self._member_topic_names(member, image)
                                              if name in ids)
                         for member_id, member in group.members.items()}
        counts = {topic.topic_id: topic.num_partitions for topic in group.subscription_metadata.values()}
        assignor = ASSIGNORS[self._assignor_name(group)]
        target = assignor(subscriptions, counts, group.target_assignment)
        records = [target_assignment_record(group.group_id, member_id, assignment)
                   for member_id, assignment in sorted(target.items())
                   if group.target_assignment.get(member_id) != assignment]
        records.append(target_assignment_epoch_record(group.group_id, group.group_epoch))
        return records

    def _assignor_name(self, group: ConsumerGroup) -> str:
        """The assignor the members ask for most (ties: the first in group.consumer.assignors' order), else the
        first configured (Kafka's ConsumerGroup.computePreferredServerAssignor)."""
        configured = self.config.consumer_group_assignors
        counts: dict[str, int] = {}
        for member in group.members.values():
            if member.server_assignor in configured:
                counts[member.server_assignor] = counts.get(member.server_assignor, 0) + 1
        if not counts:
            return configured[0]
        return max(configured, key=lambda name: (counts.get(name, 0), -configured.index(name)))

    def on_metadata_update(self) -> None:
        """Topics changed: the regular expressions are resolved again on the next heartbeat of each group."""
        self._regex_cache.clear()

    # -- writes ------------------------------------------------------------------------------------------------------

    def apply(self, records: list[Record]) -> None:
        """Replay records this coordinator writes, at once (their write may still fail: see the module doc)."""
        for key, value in records:
            record = deserialize_record(key, value)
            assert isinstance(record, ConsumerGroupRecord)
            self.replay(record)

    def _respond_after_write(self, group_id: str, records: list[Record], response: ConsumerGroupHeartbeatResponse,
                             respond: Responder) -> None:
        if not records:
            respond(response)
            return

        def on_written(error: ErrorCode, at_ms: int) -> None:
            if error == ErrorCode.NONE:
                respond(response)
            else:
                respond(ConsumerGroupHeartbeatResponse(error_code=append_error_to_response_error(error)))

        self._write(group_id, records, on_written)

    # -- replay ------------------------------------------------------------------------------------------------------

    def replay(self, record: ConsumerGroupRecord) -> None:
        """Apply one record (written now, or read by a load), as Kafka's GroupMetadataManager.replay does."""
        group_id, value = record.group_id, record.value
        kind = record.record_type
        group = self.groups.get(group_id)
        if group is None:
            if value is None:
                return
            group = self.groups[group_id] = ConsumerGroup(group_id)
        if kind is RecordType.GROUP_METADATA:
            if value is None:
                del self.groups[group_id]
            else:
                group.group_epoch = value.epoch
        elif kind is RecordType.PARTITION_METADATA:
            group.subscription_metadata = {} if value is None else {
                topic.topic_name: TopicMetadata(topic.topic_id, topic.topic_name, topic.num_partitions)
                for topic in value.topics}
        elif kind is RecordType.TARGET_ASSIGNMENT_METADATA:
            group.assignment_epoch = 0 if value is None else value.assignment_epoch
        elif kind is RecordType.TARGET_ASSIGNMENT_MEMBER:
            if value is None:
                group.target_assignment.pop(record.member_id, None)
            else:
                group.target_assignment[record.member_id] = assignment_of(value.topic_partitions)
        elif kind is RecordType.MEMBER_METADATA:
            self._replay_member_metadata(group, record.member_id, value)
        elif kind is RecordType.CURRENT_MEMBER_ASSIGNMENT:
            member = group.member(record.member_id) or ConsumerGroupMember(record.member_id)
            if value is None:
                group.put_member(copy_member(member, member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                             previous_member_epoch=LEAVE_GROUP_MEMBER_EPOCH,
                                             state=MemberState.STABLE, assigned_partitions={},
                                             partitions_pending_revocation={}, assignment_epochs={}))
            else:
                group.put_member(copy_member(
                    member, member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch,
                    state=member_state_of(value.state), assigned_partitions=assignment_of(value.assigned_partitions),
                    partitions_pending_revocation=assignment_of(value.partitions_pending_revocation),
                    assignment_epochs=assignment_epochs_of(value.assigned_partitions,
                                                           value.partitions_pending_revocation)))

    @staticmethod
    def _replay_member_metadata(group: ConsumerGroup, member_id: str, value) -> None:
        if value is None:
            group.remove_member(member_id)
            return
        member = group.member(member_id) or ConsumerGroupMember(member_id)
        group.put_member(copy_member(
            member, instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
            client_host=value.client_host, subscribed_topic_names=tuple(value.subscribed_topic_names),
            subscribed_topic_regex=value.subscribed_topic_regex or None,
            rebalance_timeout_ms=value.rebalance_timeout_ms, server_assignor=value.server_assignor,
            classic_protocols=classic_protocols_of(value),
            classic_session_timeout_ms=value.classic_member_metadata.session_timeout_ms
            if value.classic_member_metadata is not None else -1))

    def on_loaded(self, group: ConsumerGroup, now_ms: int) -> None:
        """A loaded group's members get a fresh session (and revoking members their rebalance timeout)."""
        for member_id, member in group.members.items():
            self._schedule_session_timeout(group.group_id, member_id, now_ms, member.classic_session_timeout_ms)
            self._schedule_rebalance_timeout(group, member, now_ms)

    def unload(self, group_id: str) -> None:
        group = self.groups.pop(group_id, None)
        if group is None:
            return
        for member_id in group.members:
            self.timer.cancel(_session_key(group_id, member_id))
            self.timer.cancel(_rebalance_key(group_id, member_id))
            self.timer.cancel(_sync_key(group_id, member_id))

    # -- offsets, admin ----------------------------------------------------------------------------------------------

    def validate_offset_commit(self, group: ConsumerGroup, member_id: str, member_epoch: int,
                               api_version: int) -> PartitionValidator | None:
        """Kafka 4.4's ConsumerGroup.validateOffsetCommit: an admin's commit (epoch < 0) only to an empty group; a
        member's with OffsetCommit v9+, at its current epoch, or at an older one for the partitions it has held since
        that epoch (KIP-1251: the partitions are then checked one by one by the validator returned; a newer epoch
        is STALE_MEMBER_EPOCH)."""
        if member_epoch < 0 and group.is_empty:
            return None
        member = group.member(member_id)
        if member is None:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
        if member.uses_classic_protocol:
            # A classic member commits with its generation, the member epoch its JoinGroup answer gave it.
            if member_epoch != member.member_epoch:
                raise IllegalGenerationError(f"The received generation id {member_epoch} does not match the "
                                             f"expected generation id {member.member_epoch}.")
            return None
        if api_version < 9:
            raise UnsupportedVersionError("OffsetCommit version 9 or above must be used by members using the "
                                          "consumer group protocol")
        if member_epoch == member.member_epoch:
            return None
        if member_epoch > member.member_epoch:
            raise StaleMemberEpochError(f"Received member epoch {member_epoch} is newer than current member epoch "
                                        f"{member.member_epoch}.")
        image = self._image()

        def validate_partition(topic: str, partition: int) -> None:
            topic_image = image.topics_by_name.get(topic)
            if topic_image is None or not member.holds(topic_image.topic_id, partition):
                raise StaleMemberEpochError(f"Partition {topic}-{partition} is not assigned or pending revocation "
                                            f"for member.")
            assignment_epoch = member.assignment_epoch(topic_image.topic_id, partition)
            if member_epoch < assignment_epoch:
                raise StaleMemberEpochError(f"Received member epoch {member_epoch} is older than assignment epoch "
                                            f"{assignment_epoch} for partition {topic}-{partition}.")

        return validate_partition

    @staticmethod
    def validate_offset_fetch(group: ConsumerGroup, member_id: str | None, member_epoch: int) -> None:
        """Kafka's ConsumerGroup.validateOffsetFetch: an admin (epoch -1, no member) fetches freely; a member at its
        current epoch."""
        if member_epoch < 0 and not member_id:
            return
        member = group.member(member_id or "")
        if member is None:
            raise UnknownMemberIdError(f"Member {member_id} is not a member of group {group.group_id}.")
        if member_epoch != member.member_epoch:
            raise StaleMemberEpochError(f"The received member epoch {member_epoch} does not match the expected "
                                        f"member epoch {member.member_epoch}.")

    def deletion_records(self, group: ConsumerGroup) -> list[Record]:
        return group_tombstones(group.group_id, sorted(group.members))

    def describe(self, group_id: str, image: MetadataImage) -> ConsumerGroupDescribeResponse.DescribedGroup:
        group = self.groups.get(group_id)
        if group is None:
            return ConsumerGroupDescribeResponse.DescribedGroup(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} not found.",
                group_id=group_id)
        names = {topic.topic_id: name for name, topic in image.topics_by_name.items()}

        def described(assignment: Assignment) -> ConsumerGroupDescribeResponse.Assignment:
            return ConsumerGroupDescribeResponse.Assignment(topic_partitions=[
                ConsumerGroupDescribeResponse.TopicPartitions(topic_id=topic_id, topic_name=names.get(topic_id, ""),
                                                              partitions=sorted(partitions))
                for topic_id, partitions in sorted(assignment.items(), key=lambda item: str(item[0]))
                if topic_id in names])

        members = [ConsumerGroupDescribeResponse.Member(
            member_id=member.member_id, instance_id=member.instance_id, rack_id=member.rack_id,
            member_epoch=member.member_epoch, client_id=member.client_id, client_host=member.client_host,
            subscribed_topic_names=list(member.subscribed_topic_names),
            subscribed_topic_regex=member.subscribed_topic_regex or "",
            assignment=described(member.assigned_partitions),
            target_assignment=described(group.target_assignment.get(member.member_id, {})),
            member_type=CLASSIC_MEMBER_TYPE if member.uses_classic_protocol else CONSUMER_MEMBER_TYPE)
            for member in group.members.values()]
        return ConsumerGroupDescribeResponse.DescribedGroup(
            error_code=ErrorCode.NONE, group_id=group_id, group_state=group.state.value,
            group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
            assignor_name=self._assignor_name(group), members=members)

