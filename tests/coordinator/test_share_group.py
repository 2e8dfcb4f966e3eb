"""Share group membership (kfk.coordinator.group.share_group): heartbeats, the simple assignor, session timeouts,
describe and list, and the bounds of the group.share.* configs. Kafka's Java share consumer drives the same code
over the wire in tests/interop/test_share_groups.py."""

from __future__ import annotations

import uuid

import pytest

from kfk.common.clock import ManualClock
from kfk.config import BrokerConfig
from kfk.coordinator.group.share_group import (ShareGroupConfig, ShareGroupCoordinator, ShareMember,
                                               check_share_group_configs, simple_assignment)
from kfk.errors import ErrorCode, InvalidConfigurationError
from kfk.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest

TOPIC_ID = uuid.uuid4()
TOPICS = {"orders": (TOPIC_ID, 3)}


def member(member_id: str, *topics: str) -> ShareMember:
    return ShareMember(member_id, "client", "/127.0.0.1", None, list(topics))


def test_simple_assignment_spreads_partitions_and_shares_them_when_members_outnumber_them() -> None:
    few = simple_assignment([member("a", "orders"), member("b", "orders")], TOPICS)
    assert few == {"a": {TOPIC_ID: [0, 2]}, "b": {TOPIC_ID: [1]}}
    many = simple_assignment([member(name, "orders") for name in "abcde"], TOPICS)
    assert {name: partitions[TOPIC_ID] for name, partitions in many.items()} == {
        "a": [0], "b": [1], "c": [2], "d": [0], "e": [1]}
    assert simple_assignment([member("a", "other")], TOPICS) == {"a": {}}


@pytest.fixture
def coordinator() -> tuple[ShareGroupCoordinator, ManualClock]:
    clock = ManualClock(0)
    return ShareGroupCoordinator(ShareGroupConfig(session_timeout_ms=45000), TOPICS.get, clock), clock


def heartbeat(coordinator: ShareGroupCoordinator, member_id: str, epoch: int, topics: list[str] | None = None):
    return coordinator.heartbeat(ShareGroupHeartbeatRequest(group_id="g", member_id=member_id, member_epoch=epoch,
                                                            subscribed_topic_names=topics), "client", "/127.0.0.1")


def test_members_join_get_epochs_and_assignments_and_leave(coordinator) -> None:
    share_groups, _ = coordinator
    first = heartbeat(share_groups, "a", 0, ["orders"])
    assert (first.error_code, first.member_epoch, first.heartbeat_interval_ms) == (ErrorCode.NONE, 1, 5000)
    assert first.assignment.topic_partitions[0].partitions == [0, 1, 2]
    second = heartbeat(share_groups, "b", 0, ["orders"])
    assert second.member_epoch == 2 and second.assignment.topic_partitions[0].partitions == [1]
    assert heartbeat(share_groups, "a", 1).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    again = heartbeat(share_groups, "a", 2)
    assert again.assignment.topic_partitions[0].partitions == [0, 2]
    assert heartbeat(share_groups, "b", -1).member_epoch == -1
    assert heartbeat(share_groups, "a", 3).assignment.topic_partitions[0].partitions == [0, 1, 2]
    assert heartbeat(share_groups, "x", 5).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert heartbeat(share_groups, "y", 0).error_code == ErrorCode.INVALID_REQUEST  # no subscription


def test_a_silent_member_is_removed_after_the_session_timeout(coordinator) -> None:
    share_groups, clock = coordinator
    heartbeat(share_groups, "a", 0, ["orders"])
    heartbeat(share_groups, "b", 0, ["orders"])
    clock.advance(30000)
    heartbeat(share_groups, "a", 2)
    clock.advance(20000)  # b's last heartbeat is 50 s old, a's 20 s
    described = share_groups.describe("g", lambda topic_id: "orders")
    assert [m.member_id for m in described.members] == ["a"]
    assert described.members[0].assignment.topic_partitions[0].partitions == [0, 1, 2]
    assert (described.group_state, described.group_epoch, described.assignor_name) == ("Stable", 3, "simple")
    assert [group.group_type for group in share_groups.list_groups(set(), {"share"})] == ["share"]
    assert share_groups.list_groups(set(), {"classic"}) == []
    assert share_groups.delete("g") == ErrorCode.NON_EMPTY_GROUP
    clock.advance(45000)
    assert share_groups.list_groups({"empty"}, set())[0].group_state == "Empty"
    assert share_groups.delete("g") == ErrorCode.NONE
    assert share_groups.describe("g", str).error_code == ErrorCode.GROUP_ID_NOT_FOUND


def test_offsets_are_altered_and_deleted_only_while_the_group_is_empty(coordinator) -> None:
    """AlterShareGroupOffsets creates a missing group (empty); both offsets APIs refuse a group with members, and
    delete needs the group to exist; a member whose session timed out no longer counts."""
    share_groups, clock = coordinator
    assert share_groups.offsets_deletable("g") == ErrorCode.GROUP_ID_NOT_FOUND
    assert share_groups.offsets_alterable("g") == ErrorCode.NONE
    assert share_groups.groups["g"].state == "Empty"
    assert share_groups.offsets_deletable("g") == ErrorCode.NONE
    heartbeat(share_groups, "a", 0, ["orders"])
    assert share_groups.offsets_alterable("g") == ErrorCode.NON_EMPTY_GROUP
    assert share_groups.offsets_deletable("g") == ErrorCode.NON_EMPTY_GROUP
    clock.advance(45000)
    assert share_groups.offsets_alterable("g") == ErrorCode.NONE


def test_the_group_share_configs_are_checked_against_kafkas_bounds() -> None:
    def values(**overrides: str):
        config = BrokerConfig({"process.roles": "broker,controller", "node.id": "1",
                               **{key.replace("_", "."): value for key, value in overrides.items()}})
        return lambda key: config.values[key]

    check_share_group_configs(values())
    with pytest.raises(InvalidConfigurationError, match="group.share.delivery.count.limit"):
        check_share_group_configs(values(group_share_delivery_count_limit="1"))
    with pytest.raises(InvalidConfigurationError, match="greater than or equal to "
                                                        "group.share.min.record.lock.duration.ms"):
        check_share_group_configs(values(group_share_record_lock_duration_ms="2000"))
    check_share_group_configs(values(group_share_record_lock_duration_ms="2000",
                                     group_share_min_record_lock_duration_ms="1000"))
