"""The consumer group protocol's member state machine (kfk.client.consumer.membership) with a manual clock: joining,
reconciling and acknowledging, revocations, the coordinator's heartbeat interval, fencing, leaving (dynamic and
static), coordinator moves, fatal errors and regular expression subscriptions."""

from __future__ import annotations

import uuid

import pytest

from kfk.client.consumer.membership import ConsumerMembership, MemberState
from kfk.common.clock import ManualClock
from kfk.errors import ErrorCode, KafkaError, UnsupportedAssignorError
from kfk.protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

TOPIC = uuid.UUID(int=7)
BACKOFF_MS = 100


def member(clock: ManualClock, instance_id: str | None = None) -> ConsumerMembership:
    return ConsumerMembership(group_id="g", group_instance_id=instance_id, rack_id=None, rebalance_timeout_ms=300_000,
                              server_assignor="uniform", clock=clock, backoff_ms=lambda attempts: BACKOFF_MS)


def answer(epoch: int, partitions: list[int] | None = None, *, error: int = ErrorCode.NONE,
           interval_ms: int = 500) -> ConsumerGroupHeartbeatResponse:
    assignment = None if partitions is None else ConsumerGroupHeartbeatResponse.Assignment(
        topic_partitions=[ConsumerGroupHeartbeatResponse.TopicPartitions(topic_id=TOPIC, partitions=partitions)])
    return ConsumerGroupHeartbeatResponse(error_code=error, member_epoch=epoch, heartbeat_interval_ms=interval_ms,
                                          assignment=assignment)


def owned_in(request: ConsumerGroupHeartbeatRequest) -> set[tuple[uuid.UUID, int]]:
    return {(topic.topic_id, p) for topic in request.topic_partitions or [] for p in topic.partitions}


def stable_member(clock: ManualClock, partitions: list[int], epoch: int = 1,
                  instance_id: str | None = None) -> ConsumerMembership:
    membership = member(clock, instance_id)
    membership.subscribe(["t"])
    membership.build_heartbeat(1)
    membership.on_heartbeat_response(answer(epoch, partitions))
    membership.on_reconciled(membership.assignment_to_reconcile())
    membership.build_heartbeat(1)
    membership.on_heartbeat_response(answer(epoch))
    assert membership.state == MemberState.STABLE
    return membership


def test_a_member_joins_reconciles_acknowledges_and_then_heartbeats_at_the_coordinators_interval() -> None:
    clock = ManualClock()
    membership = member(clock)
    assert membership.time_to_next_heartbeat() == float("inf")  # nothing to say before subscribing
    membership.subscribe(["t", "a"])
    assert membership.state == MemberState.JOINING and membership.time_to_next_heartbeat() == 0
    join = membership.build_heartbeat(1)
    assert (join.member_epoch, join.subscribed_topic_names, join.subscribed_topic_regex, join.server_assignor,
            join.rebalance_timeout_ms, join.topic_partitions) == (0, ["a", "t"], None, "uniform", 300_000, [])
    assert join.member_id == membership.member_id and len(join.member_id) == 22  # a Uuid the client chose
    assert membership.time_to_next_heartbeat() == float("inf")  # one heartbeat in flight at a time

    membership.on_heartbeat_response(answer(3, [0, 1]))
    assert (membership.state, membership.member_epoch, membership.heartbeat_interval_ms) == (
        MemberState.RECONCILING, 3, 500)
    assert membership.assignment_to_reconcile() == {(TOPIC, 0), (TOPIC, 1)}
    assert membership.in_group
    membership.on_reconciled({(TOPIC, 0), (TOPIC, 1)})
    assert membership.state == MemberState.ACKNOWLEDGING and membership.time_to_next_heartbeat() == 0
    ack = membership.build_heartbeat(1)
    assert owned_in(ack) == {(TOPIC, 0), (TOPIC, 1)} and ack.member_epoch == 3

    membership.on_heartbeat_response(answer(3))
    assert membership.state == MemberState.STABLE
    assert membership.time_to_next_heartbeat() == 500
    clock.advance(499)
    assert membership.time_to_next_heartbeat() == 1
    clock.advance(1)
    assert membership.time_to_next_heartbeat() == 0


def test_a_revocation_is_acknowledged_before_the_epoch_moves_on() -> None:
    clock = ManualClock()
    membership = stable_member(clock, [0, 1])
    membership.build_heartbeat(1)
    membership.on_heartbeat_response(answer(1, [0]))  # partition 1 goes to another member, once released
    assert membership.state == MemberState.RECONCILING
    heartbeat = membership.build_heartbeat(1)  # while poll() has not reconciled yet, it is still owned
    assert owned_in(heartbeat) == {(TOPIC, 0), (TOPIC, 1)}
    membership.on_heartbeat_response(answer(1))
    assert membership.state == MemberState.RECONCILING  # no new target: still to reconcile
    membership.on_reconciled({(TOPIC, 0)})
    assert owned_in(membership.build_heartbeat(1)) == {(TOPIC, 0)}
    membership.on_heartbeat_response(answer(2))
    assert (membership.state, membership.member_epoch) == (MemberState.STABLE, 2)


def test_an_answer_to_an_earlier_heartbeat_is_not_the_acknowledgement() -> None:
    clock = ManualClock()
    membership = member(clock)
    membership.subscribe(["t"])
    membership.build_heartbeat(1)
    membership.on_heartbeat_response(answer(1, [0]))
    membership.build_heartbeat(1)  # sent before poll() reconciled
    membership.on_reconciled({(TOPIC, 0)})
    membership.on_heartbeat_response(answer(1))
    assert membership.state == MemberState.ACKNOWLEDGING and membership.time_to_next_heartbeat() == 0
    assert owned_in(membership.build_heartbeat(1)) == {(TOPIC, 0)}
    membership.on_heartbeat_response(answer(1))
    assert membership.state == MemberState.STABLE


@pytest.mark.parametrize("error", [ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.UNKNOWN_MEMBER_ID])
def test_a_fenced_member_waits_for_poll_to_lose_its_partitions_then_rejoins_with_epoch_zero(error: int) -> None:
    clock = ManualClock()
    membership = stable_member(clock, [0, 1], epoch=4)
    member_id = membership.member_id
    membership.build_heartbeat(1)
    membership.on_heartbeat_response(answer(0, error=error))
    assert membership.state == MemberState.FENCED and not membership.in_group
    assert membership.time_to_next_heartbeat() == float("inf")
    membership.on_partitions_lost()
    assert membership.state == MemberState.JOINING and membership.time_to_next_heartbeat() == 0
    rejoin = membership.build_heartbeat(1)
    assert (rejoin.member_epoch, rejoin.member_id, rejoin.topic_partitions) == (0, member_id, [])


@pytest.mark.parametrize(("instance_id", "epoch"), [(None, -1), ("static-1", -2)])
def test_leaving_sends_epoch_minus_one_or_minus_two_for_a_static_member(instance_id: str | None,
                                                                         epoch: int) -> None:
    clock = ManualClock()
    membership = stable_member(clock, [0], instance_id=instance_id)
    membership.build_heartbeat(1)  # a heartbeat is in flight when close() asks to leave
    assert membership.leave()
    membership.on_heartbeat_response(answer(1))  # its answer is not the leave's
    assert membership.state == MemberState.LEAVING and membership.time_to_next_heartbeat() == 0
    leave = membership.build_heartbeat(1)
    assert (leave.member_epoch, leave.instance_id, leave.subscribed_topic_names) == (epoch, instance_id, None)
    membership.on_heartbeat_response(answer(epoch))
    assert membership.state == MemberState.UNSUBSCRIBED and membership.owned == frozenset()
    assert not membership.leave()  # nothing left to leave


def test_a_member_whose_poll_timer_expired_leaves_and_poll_then_rejoins() -> None:
    clock = ManualClock()
    membership = stable_member(clock, [0])
    assert membership.leave(then=MemberState.FENCED)
    membership.build_heartbeat(1)
    membership.on_heartbeat_response(answer(-1))
    assert membership.state == MemberState.FENCED
    membership.on_partitions_lost()
    assert membership.state == MemberState.JOINING


def test_coordinator_moves_and_lost_heartbeats_are_retried_after_a_backoff() -> None:
    clock = ManualClock()
    membership = stable_member(clock, [0])
    membership.build_heartbeat(1)
    assert membership.on_heartbeat_response(answer(0, error=ErrorCode.NOT_COORDINATOR)) is True
    assert membership.state == MemberState.STABLE and membership.time_to_next_heartbeat() == BACKOFF_MS
    clock.advance(BACKOFF_MS)
    membership.build_heartbeat(1)
    assert membership.on_heartbeat_response(answer(0, error=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)) is False
    assert membership.time_to_next_heartbeat() == BACKOFF_MS
    clock.advance(BACKOFF_MS)
    membership.build_heartbeat(1)
    membership.on_heartbeat_failed()
    assert membership.state == MemberState.STABLE and membership.time_to_next_heartbeat() == BACKOFF_MS


def test_errors_no_retry_fixes_are_fatal_with_the_coordinators_message() -> None:
    clock = ManualClock()
    membership = member(clock)
    membership.subscribe(["t"])
    membership.build_heartbeat(1)
    response = answer(0, error=ErrorCode.UNSUPPORTED_ASSIGNOR)
    response.error_message = "ServerAssignor uniform is not supported."
    membership.on_heartbeat_response(response)
    assert membership.state == MemberState.FATAL
    assert isinstance(membership.fatal_error, UnsupportedAssignorError)
    assert "ServerAssignor uniform is not supported." in str(membership.fatal_error)
    assert membership.time_to_next_heartbeat() == float("inf")


def test_a_regular_expression_is_sent_for_the_coordinator_to_match_and_needs_version_one() -> None:
    membership = member(ManualClock())
    membership.subscribe(regex="orders\\..*")
    with pytest.raises(KafkaError, match="ConsumerGroupHeartbeat v1"):
        membership.build_heartbeat(0)
    assert membership.time_to_next_heartbeat() == 0  # nothing was sent
    request = membership.build_heartbeat(1)
    assert (request.subscribed_topic_regex, request.subscribed_topic_names) == ("orders\\..*", [])
