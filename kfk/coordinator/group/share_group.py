"""Share groups' membership (KIP-932): ShareGroupHeartbeat with server-side assignment, ShareGroupDescribe, and the
share groups ListGroups lists, beside the classic groups of the same coordinator.

A share group has no rebalance protocol to run: the coordinator computes every member's assignment itself (the
`simple` assignor, Kafka's only share assignor) and a member takes it as soon as a heartbeat answers it. Several
members may share one partition: the share partition on the partition leader (kfk.replication.share_partition)
hands each record to one member at a time. The member ids are the clients' own (ShareGroupHeartbeat v1, KIP-1082).

Membership is kept in memory: a coordinator that restarts answers UNKNOWN_MEMBER_ID and the members join again
(their acquired records stay locked on the partition leaders until their acquisition locks expire).
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Callable, Iterable, Mapping

from kfk.errors import ErrorCode, InvalidConfigurationError
from kfk.group_config import SHARE_HEARTBEAT_INTERVAL_MS, SHARE_SESSION_TIMEOUT_MS, group_override
from kfk.protocol.messages.list_groups import ListGroupsResponse
from kfk.protocol.messages.share_group_describe import ShareGroupDescribeResponse
from kfk.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse

#: A member leaving says so with this epoch; the response echoes it.
LEAVE_GROUP_MEMBER_EPOCH = -1
SHARE_GROUP_TYPE = "share"
#: Kafka's ShareGroup.ShareGroupState names.
EMPTY, STABLE = "Empty", "Stable"
SIMPLE_ASSIGNOR = "simple"

#: A topic name -> (topic id, partition count), or None when the topic does not exist (the metadata image).
TopicLookup = Callable[[str], "tuple[uuid.UUID, int] | None"]


@dataclasses.dataclass(frozen=True)
class ShareGroupConfig:
    """The broker's `group.share.*` settings the coordinator applies (Kafka's ShareGroupConfig / GroupConfig)."""

    session_timeout_ms: int = 45000
    heartbeat_interval_ms: int = 5000
    max_size: int = 200
    assignors: tuple[str, ...] = (SIMPLE_ASSIGNOR,)


def _in_range(values: Callable[[str], int], key: str, lowest: int, highest: int | None = None) -> None:
    value = values(key)
    if value < lowest or (highest is not None and value > highest):
        limit = f"[{lowest},...,{highest}]" if highest is not None else f"[{lowest},...]"
        raise InvalidConfigurationError(f"Invalid value {value} for configuration {key}: Value must be in the "
                                        f"range {limit}")


def _between(values: Callable[[str], int], key: str, low_key: str, high_key: str) -> None:
    if values(key) < values(low_key):
        raise InvalidConfigurationError(f"{key} must be greater than or equal to {low_key}")
    if values(key) > values(high_key):
        raise InvalidConfigurationError(f"{key} must be less than or equal to {high_key}")


def check_share_group_configs(values: Callable[[str], int]) -> None:
    """Refuse `group.share.*` settings outside Kafka's bounds (`values(key)` is the broker's value of key)."""
    _in_range(values, "group.share.delivery.count.limit", 2, 10)
    _in_range(values, "group.share.record.lock.duration.ms", 1000, 3600000)
    _in_range(values, "group.share.min.record.lock.duration.ms", 1000, 30000)
    _in_range(values, "group.share.max.record.lock.duration.ms", 30000, 3600000)
    _in_range(values, "group.share.partition.max.record.locks", 100, 10000)
    _in_range(values, "group.share.max.size", 1, 1000)
    _in_range(values, "group.share.max.share.sessions", 1)
    for key in ("group.share.session.timeout.ms", "group.share.min.session.timeout.ms",
                "group.share.max.session.timeout.ms", "group.share.heartbeat.interval.ms",
                "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms"):
        _in_range(values, key, 1)
    _between(values, "group.share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms",
             "group.share.max.record.lock.duration.ms")
    _between(values, "group.share.session.timeout.ms", "group.share.min.session.timeout.ms",
             "group.share.max.session.timeout.ms")
    _between(values, "group.share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms",
             "group.share.max.heartbeat.interval.ms")
    if values("group.share.session.timeout.ms") <= values("group.share.heartbeat.interval.ms"):
        raise InvalidConfigurationError("group.share.heartbeat.interval.ms must be less than "
                                        "group.share.session.timeout.ms")


@dataclasses.dataclass
class ShareMember:
    member_id: str
    client_id: str
    client_host: str
    rack_id: str | None
    subscribed_topic_names: list[str]
    member_epoch: int = 0
    deadline_ms: int = 0
    #: topic id -> the partitions assigned.
    assignment: dict[uuid.UUID, list[int]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class ShareGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = dataclasses.field(default_factory=dict)
    #: What the last assignment was computed from: the subscribed topics' (name, id, partition count).
    assigned_from: tuple = ()

    @property
    def state(self) -> str:
        return STABLE if self.members else EMPTY


def simple_assignment(members: list[ShareMember], topics: dict[str, tuple[uuid.UUID, int]]
                      ) -> dict[str, dict[uuid.UUID, list[int]]]:
    """The simple assignor's spread, member by member (sorted by member id): every partition of a topic goes to at
    least one of its subscribers; with more subscribers than partitions, each partition goes to several members in
    turn, with fewer, the partitions are dealt out in turn."""
    assignment: dict[str, dict[uuid.UUID, list[int]]] = {member.member_id: {} for member in members}
    for name, (topic_id, partition_count) in sorted(topics.items()):
        subscribers = sorted(member.member_id for member in members if name in member.subscribed_topic_names)
        if not subscribers or partition_count <= 0:
            continue
        if len(subscribers) >= partition_count:
            pairs: Iterable[tuple[str, int]] = ((member_id, index % partition_count)
                                                for index, member_id in enumerate(subscribers))
        else:
            pairs = ((subscribers[partition % len(subscribers)], partition) for partition in range(partition_count))
        for member_id, partition in pairs:
            assignment[member_id].setdefault(topic_id, []).append(partition)
    return assignment


class ShareGroupCoordinator:
    """The share groups of one group coordinator, in memory. `now_ms` is read on every call; members whose session
    timed out are removed on the next call that looks at their group (heartbeats, describes, lists)."""

    def __init__(self, config: ShareGroupConfig, topics: TopicLookup, now_ms: Callable[[], int],
                 group_configs: Callable[[str], Mapping[str, str]] = lambda group_id: {}) -> None:
        self.config = config
        self.topics = topics
        self.now_ms = now_ms
        #: A group's own configs (share.session.timeout.ms, share.heartbeat.interval.ms over the broker's).
        self.group_configs = group_configs
        self.groups: dict[str, ShareGroup] = {}
        #: Called with a group id once the group is deleted (the share partitions forget the group's state).
        self.on_delete: list[Callable[[str], None]] = []

    def _expire(self, group: ShareGroup) -> None:
        now = self.now_ms()
        expired = [member_id for member_id, member in group.members.items() if member.deadline_ms <= now]
        for member_id in expired:
            del group.members[member_id]
        if expired:
            group.group_epoch += 1

    def _assign(self, group: ShareGroup) -> None:
        """Compute the target assignment when the members, their subscriptions or the topics changed."""
        names = sorted({name for member in group.members.values() for name in member.subscribed_topic_names})
        topics = {name: found for name in names if (found := self.topics(name)) is not None}
        basis = tuple(sorted(topics.items()))
        if basis != group.assigned_from and group.group_epoch == group.assignment_epoch:
            group.group_epoch += 1  # a subscribed topic appeared, went or grew: a new group epoch, as Kafka's
        if group.group_epoch == group.assignment_epoch:
            return
        for member_id, assignment in simple_assignment(list(group.members.values()), topics).items():
            member = group.members[member_id]
            member.assignment = assignment
            member.member_epoch = group.group_epoch
        group.assignment_epoch = group.group_epoch
        group.assigned_from = basis

    def heartbeat(self, request: ShareGroupHeartbeatRequest, client_id: str, client_host: str
                  ) -> ShareGroupHeartbeatResponse:
        def refuse(error: ErrorCode, message: str | None) -> ShareGroupHeartbeatResponse:
            return ShareGroupHeartbeatResponse(error_code=error, error_message=message)

        if not request.group_id:
            return refuse(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
        if not request.member_id:
            return refuse(ErrorCode.INVALID_REQUEST, None)  # as Kafka 4.4: no message
        if request.member_epoch == 0 and not request.subscribed_topic_names:
            return refuse(ErrorCode.INVALID_REQUEST, "SubscribedTopicNames must be set in first request.")
        if request.member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            return refuse(ErrorCode.INVALID_REQUEST, f"MemberEpoch is {request.member_epoch}, but must be greater "
                                                     f"than or equal to -1.")
        group = self.groups.get(request.group_id)
        if group is not None:
            self._expire(group)
        if request.member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if group is not None and group.members.pop(request.member_id, None) is not None:
                group.group_epoch += 1
                self._assign(group)
            return ShareGroupHeartbeatResponse(member_id=request.member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH)
        member = group.members.get(request.member_id) if group is not None else None
        if request.member_epoch > 0:
            if member is None:
                return refuse(ErrorCode.UNKNOWN_MEMBER_ID, f"Member {request.member_id} is not a member of group "
                                                           f"{request.group_id}.")
            if request.member_epoch != member.member_epoch:
                return refuse(ErrorCode.FENCED_MEMBER_EPOCH, f"The share group member has a smaller member epoch "
                                                             f"({request.member_epoch}) than the one known by the "
                                                             f"group coordinator ({member.member_epoch}). The "
                                                             f"member must abandon all its partitions and rejoin.")
        if group is None:
            group = self.groups[request.group_id] = ShareGroup(request.group_id)
        if member is None:
            if len(group.members) >= self.config.max_size:
                return refuse(ErrorCode.GROUP_MAX_SIZE_REACHED, f"The share group has reached its maximum capacity "
                                                                f"of {self.config.max_size} members.")
            member = group.members[request.member_id] = ShareMember(
                request.member_id, client_id, client_host, request.rack_id, list(request.subscribed_topic_names))
            group.group_epoch += 1
        elif request.subscribed_topic_names is not None \
                and list(request.subscribed_topic_names) != member.subscribed_topic_names:
            member.subscribed_topic_names = list(request.subscribed_topic_names)
            group.group_epoch += 1
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        overrides = self.group_configs(group.group_id)
        member.deadline_ms = self.now_ms() + group_override(overrides, SHARE_SESSION_TIMEOUT_MS,
                                                            self.config.session_timeout_ms)
        self._assign(group)
        return ShareGroupHeartbeatResponse(
            member_id=member.member_id, member_epoch=member.member_epoch,
            heartbeat_interval_ms=group_override(overrides, SHARE_HEARTBEAT_INTERVAL_MS,
                                                 self.config.heartbeat_interval_ms),
            assignment=ShareGroupHeartbeatResponse.Assignment(topic_partitions=[
                ShareGroupHeartbeatResponse.TopicPartitions(topic_id=topic_id, partitions=sorted(partitions))
                for topic_id, partitions in member.assignment.items()]))

    def describe(self, group_id: str, topic_name: Callable[[uuid.UUID], str]
                 ) -> ShareGroupDescribeResponse.DescribedGroup:
        group = self.groups.get(group_id)
        if group is None:
            return ShareGroupDescribeResponse.DescribedGroup(
                error_code=ErrorCode.GROUP_ID_NOT_FOUND, error_message=f"Group {group_id} not found.",
                group_id=group_id)
        self._expire(group)
        self._assign(group)
        return ShareGroupDescribeResponse.DescribedGroup(
            group_id=group_id, group_state=group.state, group_epoch=group.group_epoch,
            assignment_epoch=group.assignment_epoch, assignor_name=self.config.assignors[0],
            members=[ShareGroupDescribeResponse.Member(
                member_id=member.member_id, rack_id=member.rack_id, member_epoch=member.member_epoch,
                client_id=member.client_id, client_host=member.client_host,
                subscribed_topic_names=list(member.subscribed_topic_names),
                assignment=ShareGroupDescribeResponse.Assignment(topic_partitions=[
                    ShareGroupDescribeResponse.TopicPartitions(topic_id=topic_id, topic_name=topic_name(topic_id),
                                                               partitions=sorted(partitions))
                    for topic_id, partitions in member.assignment.items()]))
                for member in group.members.values()])

    def list_groups(self, states: set[str], types: set[str]) -> list[ListGroupsResponse.ListedGroup]:
        """The share groups matching ListGroups' filters (lower-cased; empty for all)."""
        if types and SHARE_GROUP_TYPE not in types:
            return []
        listed = []
        for group in self.groups.values():
            self._expire(group)
            if states and group.state.lower() not in states:
                continue
            listed.append(ListGroupsResponse.ListedGroup(group_id=group.group_id, protocol_type=SHARE_GROUP_TYPE,
                                                         group_state=group.state, group_type=SHARE_GROUP_TYPE))
        return listed

    def offsets_alterable(self, group_id: str) -> ErrorCode:
        """AlterShareGroupOffsets' check: NON_EMPTY_GROUP while the group has members. A group that does not exist
        is created empty, as Kafka's coordinator does, so its start offsets can be set before anyone consumes."""
        group = self.groups.get(group_id)
        if group is None:
            self.groups[group_id] = ShareGroup(group_id)
            return ErrorCode.NONE
        self._expire(group)
        return ErrorCode.NON_EMPTY_GROUP if group.members else ErrorCode.NONE

    def offsets_deletable(self, group_id: str) -> ErrorCode:
        """DeleteShareGroupOffsets' check: the group must exist (GROUP_ID_NOT_FOUND) and have no members."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.GROUP_ID_NOT_FOUND
        self._expire(group)
        return ErrorCode.NON_EMPTY_GROUP if group.members else ErrorCode.NONE

    def delete(self, group_id: str) -> ErrorCode | None:
        """DeleteGroups of a share group: None when it is not one, NON_EMPTY_GROUP while it has members."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        self._expire(group)
        if group.members:
            return ErrorCode.NON_EMPTY_GROUP
        del self.groups[group_id]
        for listener in self.on_delete:
            listener(group_id)
        return ErrorCode.NONE
