"""ClassicGroup: one group of the classic (JoinGroup/SyncGroup) protocol, its members and its state (Kafka's
ClassicGroup, ClassicGroupMember, ClassicGroupState).

States and the only legal ways into them:

    Empty               <- PreparingRebalance (the rebalance ended with no members)
    PreparingRebalance  <- Empty, Stable, CompletingRebalance (a member joins, leaves, changes, or times out)
    CompletingRebalance <- PreparingRebalance (every member rejoined: JoinGroup answered, waiting for the leader's
                           assignment in SyncGroup)
    Stable              <- CompletingRebalance (the assignment is committed to __consumer_offsets)
    Dead                <- any (the group was deleted or its partition moved away)

This module only holds data and the bookkeeping Kafka keeps beside it (who is awaiting a JoinGroup or SyncGroup
answer, which protocols every member supports, the static members by group instance id). The decisions (when to
rebalance, what to write, which error to answer) are the GroupMetadataManager's. An awaiting answer is a plain
callable, so the group has no idea whether a socket or a test is behind it.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable
from typing import Any

from kfk.errors import (
    ErrorCode,
    FencedInstanceIdError,
    KafkaError,
    UnknownMemberIdError,
)
from kfk.protocol.messages.consumer_protocol_subscription import (
    ConsumerProtocolSubscription,
)
from kfk.protocol.messages.join_group import JoinGroupResponse
from kfk.protocol.messages.sync_group import SyncGroupResponse

#: The member id of a member that has none yet (JoinGroup) or of an admin removing by instance id (LeaveGroup).
UNKNOWN_MEMBER_ID = ""
#: A new member's id is `<client id or group instance id>-<uuid>`.
MEMBER_ID_DELIMITER = "-"
NO_GENERATION = 0
CONSUMER_PROTOCOL_TYPE = "consumer"
EMPTY_ASSIGNMENT = b""

Responder = Callable[[Any], None]


class ClassicGroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS_STATES: dict[ClassicGroupState, frozenset[ClassicGroupState]] = {
    ClassicGroupState.EMPTY: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.PREPARING_REBALANCE: frozenset(
        {ClassicGroupState.STABLE, ClassicGroupState.COMPLETING_REBALANCE, ClassicGroupState.EMPTY}),
    ClassicGroupState.COMPLETING_REBALANCE: frozenset({ClassicGroupState.PREPARING_REBALANCE}),
    ClassicGroupState.STABLE: frozenset({ClassicGroupState.COMPLETING_REBALANCE}),
    ClassicGroupState.DEAD: frozenset(ClassicGroupState),
}


class ClassicGroupMember:
    """One member: its identity, timeouts, the protocols it supports (name -> metadata, in its preference order),
    its current assignment, and the JoinGroup/SyncGroup answer it is waiting for, if any."""

    __slots__ = ("member_id", "group_instance_id", "client_id", "client_host", "rebalance_timeout_ms",
                 "session_timeout_ms", "protocol_type", "supported_protocols", "assignment", "awaiting_join",
                 "awaiting_sync", "is_new")

    def __init__(self, member_id: str, group_instance_id: str | None, client_id: str, client_host: str,
                 rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                 supported_protocols: list[tuple[str, bytes]], assignment: bytes = EMPTY_ASSIGNMENT) -> None:
        self.member_id = member_id
        self.group_instance_id = group_instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.supported_protocols = supported_protocols
        self.assignment = assignment
        self.awaiting_join: Responder | None = None
        self.awaiting_sync: Responder | None = None
        #: A member added by this rebalance; it may be expired while it waits for the JoinGroup answer.
        self.is_new = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.awaiting_join is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.awaiting_sync is not None

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.supported_protocols]

    def metadata(self, protocol_name: str) -> bytes:
        for name, metadata in self.supported_protocols:
            if name == protocol_name:
                return metadata
        raise ValueError(f"Member {self.member_id} does not support protocol {protocol_name}")

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """Same protocols with the same metadata, in the same order (a rejoin without changes)."""
        return [(name, bytes(metadata)) for name, metadata in protocols] == [
            (name, bytes(metadata)) for name, metadata in self.supported_protocols]

    def vote(self, candidates: set[str]) -> str:
        """The first protocol in this member's preference order that every member supports."""
        for name, _ in self.supported_protocols:
            if name in candidates:
                return name
        raise ValueError(f"Member {self.member_id} does not support any of the candidates {candidates}")

    def has_satisfied_heartbeat(self) -> bool:
        """Whether the session deadline may pass without expiring the member (Kafka's hasSatisfiedHeartbeat): a new
        member never; a member waiting for a JoinGroup or SyncGroup answer yes (the rebalance timeout covers it);
        any other no (a heartbeat would have moved the deadline)."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync


class ClassicGroup:
    """A classic group: generation, selected protocol, leader, members."""

    def __init__(self, group_id: str, now_ms: int, state: ClassicGroupState = ClassicGroupState.EMPTY) -> None:
        self.group_id = group_id
        self.state = state
        self.previous_state: ClassicGroupState | None = None
        self.current_state_timestamp_ms: int | None = now_ms
        self.generation_id = NO_GENERATION
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, ClassicGroupMember] = {}
        self.static_members: dict[str, str] = {}
        #: Members given an id by a first JoinGroup (MEMBER_ID_REQUIRED) that have not joined with it yet.
        self.pending_join_members: set[str] = set()
        #: Members that got their JoinGroup answer this generation but have not sent SyncGroup yet.
        self.pending_sync_members: set[str] = set()
        self.num_members_awaiting_join = 0
        self.supported_protocols: dict[str, int] = {}
        #: During the initial (delayed) rebalance: a member joined since the delay was last armed.
        self.new_member_added = False
        self.subscribed_topics: set[str] | None = None

    # -- state -------------------------------------------------------------------------------------------------------

    def is_in_state(self, *states: ClassicGroupState) -> bool:
        return self.state in states

    def transition_to(self, state: ClassicGroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS_STATES[state]:
            raise AssertionError(f"Group {self.group_id} cannot go from {self.state.value} to {state.value}")
        self.previous_state = self.state
        self.state = state
        self.current_state_timestamp_ms = now_ms

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS_STATES[ClassicGroupState.PREPARING_REBALANCE]

    # -- members -----------------------------------------------------------------------------------------------------

    @property
    def is_empty(self) -> bool:
        return not self.members

    def has_member(self, member_id: str) -> bool:
        return member_id in self.members

    def member(self, member_id: str) -> ClassicGroupMember:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def static_member_id(self, group_instance_id: str) -> str | None:
        return self.static_members.get(group_instance_id)

    def generate_member_id(self, client_id: str, group_instance_id: str | None) -> str:
        prefix = group_instance_id if group_instance_id is not None else client_id
        return f"{prefix}{MEMBER_ID_DELIMITER}{uuid.uuid4()}"

    def add(self, member: ClassicGroupMember, awaiting_join: Responder | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise AssertionError(f"Static member {member.group_instance_id} is already in {self.group_id}")
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self._count_protocols(member, 1)
        member.awaiting_join = awaiting_join
        if awaiting_join is not None:
            self.num_members_awaiting_join += 1
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._count_protocols(member, -1)
            if member.is_awaiting_join:
                self.num_members_awaiting_join -= 1
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)

    def update_member(self, member: ClassicGroupMember, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                      session_timeout_ms: int, awaiting_join: Responder | None) -> Responder | None:
        """New protocols and timeouts for a member; returns the JoinGroup answer it was still waiting for, which the
        caller must complete (a client that sends JoinGroup again no longer waits for the first answer, but the
        connection delivers answers in order)."""
        self._count_protocols(member, -1)
        member.supported_protocols = protocols
        self._count_protocols(member, 1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        replaced = member.awaiting_join
        if awaiting_join is not None and replaced is None:
            self.num_members_awaiting_join += 1
        elif awaiting_join is None and replaced is not None:
            self.num_members_awaiting_join -= 1
        member.awaiting_join = awaiting_join
        return replaced

    def replace_static_member(self, group_instance_id: str, old_member_id: str,
                              new_member_id: str) -> ClassicGroupMember:
        """A static member rejoined with an unknown member id: the old id is fenced (its pending answers get
        FENCED_INSTANCE_ID) and the member continues under the new id with the old assignment."""
        old = self.members.pop(old_member_id)
        if old.awaiting_join is not None:
            self.num_members_awaiting_join -= 1
        self.complete_join(old, fenced_join_response(old_member_id))
        self.complete_sync(old, fenced_sync_response())
        new = ClassicGroupMember(new_member_id, old.group_instance_id, old.client_id, old.client_host,
                                 old.rebalance_timeout_ms, old.session_timeout_ms, old.protocol_type,
                                 old.supported_protocols, old.assignment)
        self.members[new_member_id] = new
        if self.leader_id == old_member_id:
            self.leader_id = new_member_id
        self.static_members[group_instance_id] = new_member_id
        self.pending_sync_members.discard(old_member_id)
        return new

    def complete_join(self, member: ClassicGroupMember, response: Any) -> bool:
        respond = member.awaiting_join
        if respond is None:
            return False
        member.awaiting_join = None
        if member.member_id in self.members:
            self.num_members_awaiting_join -= 1
        respond(response)
        return True

    def complete_sync(self, member: ClassicGroupMember, response: Any) -> bool:
        respond = member.awaiting_sync
        if respond is None:
            return False
        member.awaiting_sync = None
        respond(response)
        return True

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_members_awaiting_join and not self.pending_join_members

    def not_yet_rejoined_members(self) -> list[ClassicGroupMember]:
        return [member for member in self.members.values() if not member.is_awaiting_join]

    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync_members

    def validate_member(self, member_id: str, group_instance_id: str | None) -> None:
        """UNKNOWN_MEMBER_ID for a member the group does not know; FENCED_INSTANCE_ID when a static member's id
        is not the one the group instance id now maps to."""
        if group_instance_id is not None:
            existing = self.static_members.get(group_instance_id)
            if existing is None:
                raise UnknownMemberIdError(f"Unknown static member {group_instance_id} in group {self.group_id}")
            if existing != member_id:
                raise FencedInstanceIdError(
                    f"Static member {group_instance_id} of group {self.group_id} was fenced: its member id is now "
                    f"{existing}, not {member_id}")
        elif member_id not in self.members:
            raise UnknownMemberIdError(f"Unknown member {member_id} in group {self.group_id}")

    # -- protocols ---------------------------------------------------------------------------------------------------

    def _count_protocols(self, member: ClassicGroupMember, delta: int) -> None:
        for name in member.protocol_names():
            count = self.supported_protocols.get(name, 0) + delta
            if count:
                self.supported_protocols[name] = count
            else:
                self.supported_protocols.pop(name, None)

    def supports_protocols(self, protocol_type: str, protocol_names: list[str]) -> bool:
        """An empty group takes any non-empty protocol type and list; otherwise the type must match and one of the
        protocols must be supported by every member."""
        if self.state is ClassicGroupState.EMPTY:
            return bool(protocol_type) and bool(protocol_names)
        return (self.protocol_type == protocol_type
                and any(self.supported_protocols.get(name, 0) == len(self.members) for name in protocol_names))

    def select_protocol(self) -> str:
        """Each member votes for its preferred protocol among those all members support; most votes wins (ties go
        to the first voted)."""
        candidates = {name for name, count in self.supported_protocols.items() if count == len(self.members)}
        votes: dict[str, int] = {}
        for member in self.members.values():
            name = member.vote(candidates)
            votes[name] = votes.get(name, 0) + 1
        return max(votes, key=votes.__getitem__)

    def maybe_elect_new_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick any member that did; False when none did."""
        if self.leader_id is None:
            return False
        leader = self.members.get(self.leader_id)
        if leader is not None and leader.is_awaiting_join:
            return True
        for member in self.members.values():
            if member.is_awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(ClassicGroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.subscribed_topics = self.compute_subscribed_topics()
            self.transition_to(ClassicGroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    def compute_subscribed_topics(self) -> set[str] | None:
        """The topics the members subscribe to, when the group uses the consumer protocol and every subscription
        parses; None when unknown (then no offset counts as unsubscribed)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            subscription = parse_subscription(member.metadata(self.protocol_name))
            if subscription is None:
                return None
            topics.update(subscription.topics)
        return topics

    def is_subscribed_to_topic(self, topic: str) -> bool:
        return self.subscribed_topics is not None and topic in self.subscribed_topics

    def uses_consumer_protocol(self) -> bool:
        return self.protocol_type == CONSUMER_PROTOCOL_TYPE

    def assignment_of_members(self) -> dict[str, bytes]:
        return {member_id: member.assignment for member_id, member in self.members.items()}


def parse_subscription(metadata: bytes) -> ConsumerProtocolSubscription | None:
    """A consumer's JoinGroup metadata (int16 version, then the subscription); versions newer than the schema are
    read as the newest, as Kafka's ConsumerProtocol does. None when it does not parse."""
    if len(metadata) < 2:
        return None
    version = int.from_bytes(metadata[:2], "big", signed=True)
    if version < 0:
        return None
    try:
        return ConsumerProtocolSubscription.decode(
            metadata, min(version, ConsumerProtocolSubscription.HIGHEST_VERSION), 2)
    except KafkaError:
        return None


def fenced_join_response(member_id: str) -> JoinGroupResponse:
    return JoinGroupResponse(error_code=ErrorCode.FENCED_INSTANCE_ID, member_id=member_id, protocol_name=None)


def fenced_sync_response() -> SyncGroupResponse:
    return SyncGroupResponse(error_code=ErrorCode.FENCED_INSTANCE_ID)
