"""ConsumerGroup: one group of the KIP-848 consumer protocol, its members and their assignments (Kafka's
ConsumerGroup, ConsumerGroupMember, MemberState).

Three epochs drive the protocol:
- the group epoch, bumped whenever the group's membership, a member's subscription or the metadata of a subscribed
  topic changes;
- the target assignment epoch, the group epoch the current target assignment was computed at (when it is behind the
  group epoch, the next heartbeat computes a new target: the group is Assigning);
- each member's epoch, the target assignment epoch it has reconciled to. A member moves to a new epoch only once it
  has revoked what the new target takes away from it; partitions another member still holds are given to it only
  after that member revoked them (the group's partition epochs record who owns what).

This module holds data and derived state only; ConsumerGroupManager decides, and every change reaches it through the
replay of a __consumer_offsets record (kfk.coordinator.group.consumer_group_records), whether it comes from a
heartbeat or from loading the partition.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid

from kfk.common.uuids import uuid_to_base64

#: topic id -> partition indexes: an assignment, as the protocol and the records carry it.
Assignment = dict[uuid.UUID, frozenset[int]]

#: ConsumerGroupHeartbeat's member epochs that are requests, not epochs.
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
#: The partition epoch of a partition no member owns.
NO_OWNER_EPOCH = -1

CONSUMER_GROUP_TYPE = "consumer"
CONSUMER_PROTOCOL_TYPE = "consumer"


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(enum.IntEnum):
    """A member's reconciliation state (the values are those of ConsumerGroupCurrentMemberAssignmentValue.State)."""

    STABLE = 0
    #: Waiting for the member to revoke partitions the target took away.
    UNREVOKED_PARTITIONS = 1
    #: Waiting for other members to release partitions of this member's target.
    UNRELEASED_PARTITIONS = 2
    UNKNOWN = 127


@dataclasses.dataclass(frozen=True, slots=True)
class TopicMetadata:
    """What the group knows of a subscribed topic (ConsumerGroupPartitionMetadataValue.TopicMetadata)."""

    topic_id: uuid.UUID
    name: str
    num_partitions: int


@dataclasses.dataclass(slots=True)
class ConsumerGroupMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    rebalance_timeout_ms: int = -1
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned_partitions: Assignment = dataclasses.field(default_factory=dict)
    partitions_pending_revocation: Assignment = dataclasses.field(default_factory=dict)
    #: (topic id, partition) -> the member epoch at which the member was given the partition, for the partitions
    #: it holds (assigned or pending revocation); absent: given at its current epoch (KIP-1251: a commit at an older
    #: member epoch is accepted for a partition held since that epoch).
    assignment_epochs: dict[tuple[uuid.UUID, int], int] = dataclasses.field(default_factory=dict)
    #: A member of the classic protocol in a consumer group (after an online upgrade, or a JoinGroup to a mixed
    #: group): the protocols of its JoinGroup, (name, metadata) in its order of preference; None for a member of the
    #: consumer protocol (ConsumerGroupMemberMetadataValue.ClassicMemberMetadata).
    classic_protocols: tuple[tuple[str, bytes], ...] | None = None
    classic_session_timeout_ms: int = -1

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic_protocols is not None

    def holds(self, topic_id: uuid.UUID, partition: int) -> bool:
        """Whether the partition is assigned to the member or pending its revocation."""
        return partition in self.assigned_partitions.get(topic_id, ()) \
            or partition in self.partitions_pending_revocation.get(topic_id, ())

    def assignment_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The member epoch since which it holds the partition (meaningful for a partition it holds)."""
        return self.assignment_epochs.get((topic_id, partition), self.member_epoch)


def copy_member(member: ConsumerGroupMember, **changes) -> ConsumerGroupMember:
    return dataclasses.replace(member, **changes)


def assignment_size(assignment: Assignment) -> int:
    return sum(len(partitions) for partitions in assignment.values())


def normalized(assignment: dict[uuid.UUID, set[int] | frozenset[int]]) -> Assignment:
    """The assignment without empty topics, its partition sets frozen: assignments compare equal by content."""
    return {topic_id: frozenset(partitions) for topic_id, partitions in assignment.items() if partitions}


class ConsumerGroup:
    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerGroupMember] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        #: member id -> its target assignment.
        self.target_assignment: dict[str, Assignment] = {}
        #: topic name -> what the group last recorded of it (ConsumerGroupPartitionMetadata).
        self.subscription_metadata: dict[str, TopicMetadata] = {}
        #: (topic id, partition) -> the epoch of the member that owns it (assigned or pending revocation).
        self.partition_epochs: dict[tuple[uuid.UUID, int], int] = {}
        self.dead = False
        #: Bumped whenever a member's subscription changes or a member comes or goes: with the metadata image's
        #: offset, it tells whether the subscribed topics' metadata must be computed again.
        self.subscriptions_version = 0
        #: (metadata image offset, subscriptions version) the subscription metadata was last checked against.
        self.metadata_checked: tuple[int, int] | None = None

    # -- state -------------------------------------------------------------------------------------------------------

    @property
    def state(self) -> ConsumerGroupState:
        if self.dead:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for member in self.members.values():
            if member.state is not MemberState.STABLE or member.member_epoch != self.assignment_epoch:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    @property
    def is_empty(self) -> bool:
        return not self.members

    def member(self, member_id: str) -> ConsumerGroupMember | None:
        return self.members.get(member_id)

    def static_member(self, instance_id: str) -> ConsumerGroupMember | None:
        member_id = self.static_members.get(instance_id)
        return None if member_id is None else self.members.get(member_id)

    def subscribed_topic_names(self) -> set[str]:
        """Every topic a member subscribes to by name or through its regular expression (as resolved in the
        subscription metadata)."""
        names = {name for member in self.members.values() for name in member.subscribed_topic_names}
        return names | set(self.subscription_metadata)

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return topic in self.subscribed_topic_names()

    def all_members_use_classic_protocol_except(self, member_id: str) -> bool:
        return all(member.uses_classic_protocol for other_id, member in self.members.items() if other_id != member_id)

    def waits_on_unreleased_partition(self, member: ConsumerGroupMember) -> bool:
        """Whether a partition of the member's target that it does not hold yet is still owned by another member."""
        target = self.target_assignment.get(member.member_id, {})
        return any(self.current_partition_epoch(topic_id, partition) != NO_OWNER_EPOCH
                   for topic_id, partitions in target.items()
                   for partition in partitions - member.assigned_partitions.get(topic_id, frozenset()))

    def current_partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        return self.partition_epochs.get((topic_id, partition), NO_OWNER_EPOCH)

    # -- updates (from replay only) ----------------------------------------------------------------------------------

    def put_member(self, member: ConsumerGroupMember) -> None:
        """Add or replace a member, keeping the static-member index and the partition epochs in step."""
        previous = self.members.get(member.member_id)
        if previous is None or (previous.subscribed_topic_names, previous.subscribed_topic_regex) != \
                (member.subscribed_topic_names, member.subscribed_topic_regex):
            self.subscriptions_version += 1
        if previous is not None:
            self._release_partitions(previous)
            if previous.instance_id is not None and self.static_members.get(previous.instance_id) == member.member_id:
                del self.static_members[previous.instance_id]
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self._own_partitions(member)

    def remove_member(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is None:
            return
        self.subscriptions_version += 1
        self._release_partitions(member)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]

    def _own_partitions(self, member: ConsumerGroupMember) -> None:
        for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    self.partition_epochs[(topic_id, partition)] = member.member_epoch

    def _release_partitions(self, member: ConsumerGroupMember) -> None:
        for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    if self.partition_epochs.get((topic_id, partition)) is not None:
                        del self.partition_epochs[(topic_id, partition)]


def new_member_id() -> str:
    """A member id as Kafka's coordinator makes one for a v0 request (v1 clients make their own): a random UUID in
    Kafka's base64 form."""
    return uuid_to_base64(uuid.uuid4())
