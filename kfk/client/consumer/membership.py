"""ConsumerMembership: one member of a consumer group under the consumer group protocol (KIP-848,
group.protocol=consumer), as a sans-I/O state machine: time in, requests and deadlines out.

The coordinator computes the assignment; the member only heartbeats (ConsumerGroupHeartbeat) and reconciles:

    UNSUBSCRIBED --subscribe--> JOINING (epoch 0) --answer--> RECONCILING --revoke, assign--> ACKNOWLEDGING
        --the heartbeat naming the owned partitions is answered--> STABLE --a new target--> RECONCILING ...
    any --FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID--> FENCED --partitions lost (poll)--> JOINING (epoch 0)
    any --leave (close, unsubscribe)--> LEAVING (epoch -1, or -2 for a static member) --answer--> UNSUBSCRIBED
    any --a fatal error--> FATAL (raised from poll)

Why the states: the coordinator hands a partition to a new owner only once the old owner's heartbeat no longer
lists it, so a member must say what it owns after each reconciliation (ACKNOWLEDGING) and at every heartbeat, and it
takes new partitions only once the coordinator has them free (the target it sends never holds partitions another
member still owns). The member epoch the answers carry is what offset commits are checked against. The heartbeat
interval is the coordinator's (group.consumer.heartbeat.interval.ms), learned from each answer.

The reconciliation itself (the rebalance listener, commits before revocation, mapping topic ids to names) runs in
the caller's poll() thread, which is why the state machine stops at RECONCILING and FENCED until told the work is
done. Callers serialize access (one lock in the coordinator that drives it).
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Collection

from kfk.client.response_errors import response_error
from kfk.common.clock import Clock
from kfk.common.uuids import random_base64_uuid
from kfk.errors import ErrorCode, KafkaError
from kfk.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

__all__ = [
    "ConsumerMembership",
    "MemberState",
    "TopicIdPartition",
    "JOIN_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_MEMBER_EPOCH",
    "LEAVE_GROUP_STATIC_MEMBER_EPOCH",
]

#: A partition as the protocol names it: the topic's id and the partition index.
TopicIdPartition = tuple[uuid.UUID, int]

JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2  # the static member leaves for now; its instance id keeps the assignment

# Errors after which the member rejoins with epoch 0 (its partitions may already be someone else's).
_FENCED_ERRORS = frozenset({ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID})
_COORDINATOR_ERRORS = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_RETRY_ERRORS = frozenset({ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.REQUEST_TIMED_OUT})


class MemberState(enum.Enum):
    UNSUBSCRIBED = "unsubscribed"
    JOINING = "joining"
    RECONCILING = "reconciling"
    ACKNOWLEDGING = "acknowledging"
    STABLE = "stable"
    FENCED = "fenced"
    LEAVING = "leaving"
    FATAL = "fatal"


class ConsumerMembership:
    def __init__(self, *, group_id: str, group_instance_id: str | None, rack_id: str | None,
                 rebalance_timeout_ms: int, server_assignor: str | None, clock: Clock,
                 backoff_ms: Callable[[int], float]) -> None:
        """``backoff_ms(attempts)``: the wait before retrying after the given number of failed attempts."""
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.rack_id = rack_id
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.server_assignor = server_assignor
        self.clock = clock
        self.backoff_ms = backoff_ms
        # Kafka 4 consumers choose their member id (a random Uuid) and keep it for their lifetime (KIP-1082).
        self.member_id = random_base64_uuid()
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self.state = MemberState.UNSUBSCRIBED
        self.heartbeat_interval_ms: int | None = None
        self.subscribed_topics: list[str] = []
        self.subscribed_regex: str | None = None
        self.owned: frozenset[TopicIdPartition] = frozenset()
        self.target: frozenset[TopicIdPartition] | None = None
        self.fatal_error: KafkaError | None = None
        self._next_heartbeat_ms = 0.0
        self._in_flight = False
        self._ack_in_flight = False
        self._leave_in_flight = False
        self._failed_attempts = 0
        self._leave_on_answer_then: MemberState = MemberState.UNSUBSCRIBED

    # --- what the caller asks ----------------------------------------------------------------------------------------

    @property
    def in_group(self) -> bool:
        """The member holds an epoch the coordinator accepts (commits use it)."""
        return self.member_epoch > 0 and self.state in (MemberState.RECONCILING, MemberState.ACKNOWLEDGING,
                                                         MemberState.STABLE)

    @property
    def leave_epoch(self) -> int:
        return LEAVE_GROUP_STATIC_MEMBER_EPOCH if self.group_instance_id is not None else LEAVE_GROUP_MEMBER_EPOCH

    def subscribe(self, topics: Collection[str] = (), regex: str | None = None) -> None:
        """A new subscription (topic names, or a regular expression the coordinator matches, RE2 syntax): join, or
        tell the coordinator at once."""
        self.subscribed_topics = sorted(topics)
        self.subscribed_regex = regex
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.LEAVING):
            self._transition_to_joining()
        self._next_heartbeat_ms = 0

    def leave(self, *, then: MemberState = MemberState.UNSUBSCRIBED) -> bool:
        """Leave the group with the next heartbeat (epoch -1, or -2 for a static member); False when there is no
        membership to leave (never joined, fenced, failed). ``then``: the state once answered (FENCED when the poll
        timer expired, so that poll() loses the partitions and rejoins)."""
        if self.state in (MemberState.UNSUBSCRIBED, MemberState.FENCED, MemberState.FATAL):
            return False
        self.state = MemberState.LEAVING
        self._leave_on_answer_then = then
        self._next_heartbeat_ms = 0
        return True

    def time_to_next_heartbeat(self, now: float | None = None) -> float:
        """Milliseconds until a heartbeat is due (0: now); infinity when none is (nothing to say, or the caller's
        poll() has work to do first, or one is in flight)."""
        if self._in_flight or self.state in (MemberState.UNSUBSCRIBED, MemberState.FENCED, MemberState.FATAL):
            return float("inf")
        now = self.clock() if now is None else now
        return max(self._next_heartbeat_ms - now, 0.0)

    def build_heartbeat(self, version: int) -> ConsumerGroupHeartbeatRequest:
        """The heartbeat to send now (marks it in flight). The full state every time: the protocol lets a member
        leave unchanged fields null, but a full request is always valid and keeps nothing to track."""
        if self.subscribed_regex is not None and version < 1 and self.state != MemberState.LEAVING:
            raise KafkaError("a regular expression subscription needs ConsumerGroupHeartbeat v1 (Kafka 4.0 or later)")
        self._in_flight = True
        self._leave_in_flight = self.state == MemberState.LEAVING
        if self._leave_in_flight:
            return ConsumerGroupHeartbeatRequest(group_id=self.group_id, member_id=self.member_id,
                                                 member_epoch=self.leave_epoch, instance_id=self.group_instance_id)
        self._ack_in_flight = self.state == MemberState.ACKNOWLEDGING
        by_topic: dict[uuid.UUID, list[int]] = {}
        for topic_id, partition in sorted(self.owned):
            by_topic.setdefault(topic_id, []).append(partition)
        regex = self.subscribed_regex
        return ConsumerGroupHeartbeatRequest(
            group_id=self.group_id, member_id=self.member_id, member_epoch=self.member_epoch,
            instance_id=self.group_instance_id, rack_id=self.rack_id,
            rebalance_timeout_ms=self.rebalance_timeout_ms,
            subscribed_topic_names=[] if regex is not None else list(self.subscribed_topics),
            subscribed_topic_regex=regex if version >= 1 else None,
            server_assignor=self.server_assignor,
            topic_partitions=[ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=topic_id, partitions=partitions)
                              for topic_id, partitions in by_topic.items()])

    def on_heartbeat_failed(self, now: float | None = None) -> None:
        """The heartbeat got no answer (connection lost, timeout): retry after a backoff."""
        self._in_flight = self._ack_in_flight = False
        left, self._leave_in_flight = self._leave_in_flight, False
        self._failed_attempts += 1
        now = self.clock() if now is None else now
        self._next_heartbeat_ms = now + self.backoff_ms(self._failed_attempts)
        if left:  # leaving is best effort: the session timeout does the rest
            self._left()

    def on_heartbeat_response(self, response: ConsumerGroupHeartbeatResponse, now: float | None = None) -> bool:
        """Apply an answer; True when the coordinator must be looked up again (NOT_COORDINATOR and the like)."""
        now = self.clock() if now is None else now
        self._in_flight = False
        acked, self._ack_in_flight = self._ack_in_flight, False
        left, self._leave_in_flight = self._leave_in_flight, False
        code = response.error_code
        if left:
            self._left()
            return code in _COORDINATOR_ERRORS
        if self.state == MemberState.LEAVING:  # an earlier heartbeat's answer: the leave is still to be sent
            self._next_heartbeat_ms = 0
            return code in _COORDINATOR_ERRORS
        if code == ErrorCode.NONE:
            self._failed_attempts = 0
            if response.member_id:
                self.member_id = response.member_id
            self.member_epoch = response.member_epoch
            if response.heartbeat_interval_ms > 0:
                self.heartbeat_interval_ms = response.heartbeat_interval_ms
            self._next_heartbeat_ms = now + (self.heartbeat_interval_ms or 0)
            if response.assignment is not None:
                self.target = frozenset((topic.topic_id, partition)
                                        for topic in response.assignment.topic_partitions
                                        for partition in topic.partitions)
            if self.state == MemberState.ACKNOWLEDGING and not acked:
                self._next_heartbeat_ms = 0  # the acknowledgement is still to be sent
            elif self.state in (MemberState.JOINING, MemberState.ACKNOWLEDGING, MemberState.STABLE):
                target = self.owned if self.target is None else self.target
                self.state = MemberState.STABLE if target == self.owned else MemberState.RECONCILING
            return False
        self._failed_attempts += 1
        if code in _FENCED_ERRORS:
            self.state = MemberState.FENCED
            return False
        if code in _COORDINATOR_ERRORS or code in _RETRY_ERRORS:
            self._next_heartbeat_ms = now + self.backoff_ms(self._failed_attempts)
            return code in _COORDINATOR_ERRORS
        self.state = MemberState.FATAL
        self.fatal_error = response_error(code, f"ConsumerGroupHeartbeat for group {self.group_id!r}",
                                          response.error_message)
        return False

    # --- what poll() reports back ------------------------------------------------------------------------------------

    def assignment_to_reconcile(self) -> frozenset[TopicIdPartition] | None:
        """The target to reconcile towards, when there is one the member does not own yet."""
        if self.state != MemberState.RECONCILING or self.target is None:
            return None
        return self.target

    def on_reconciled(self, owned: Collection[TopicIdPartition]) -> None:
        """poll() revoked and assigned: acknowledge what the member owns now with the next heartbeat."""
        if self.state != MemberState.RECONCILING:
            return
        self.owned = frozenset(owned)
        self.state = MemberState.ACKNOWLEDGING
        self._next_heartbeat_ms = 0

    def on_partitions_lost(self) -> None:
        """poll() gave up the partitions of a fenced member: join again as a new incarnation (epoch 0)."""
        if self.state != MemberState.FENCED:
            return
        self.owned = frozenset()
        self.target = None
        self._transition_to_joining()

    def _left(self) -> None:
        self.state = self._leave_on_answer_then
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self.owned = frozenset()
        self.target = None

    def _transition_to_joining(self) -> None:
        self.state = MemberState.JOINING
        self.member_epoch = JOIN_GROUP_MEMBER_EPOCH
        self._next_heartbeat_ms = 0
