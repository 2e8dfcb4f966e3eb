"""The online migration between the protocols (group.consumer.migration.policy) in the group coordinator's state
machine: a classic group upgraded by its first consumer-protocol member, its classic members served in the mixed
group (JoinGroup, SyncGroup and Heartbeat answers from the consumer protocol's target assignment), the downgrade when
the last consumer-protocol member leaves, and the records that make a reload give the same group. Real clients do
the same in tests/integration/test_group_migration_confluent.py."""

from __future__ import annotations

from kfk.client.consumer.assignors.protocol import decode_assignment, encode_assignment
from kfk.common.structs import TopicPartition
from kfk.coordinator.group.classic_group import ClassicGroupState
from kfk.coordinator.group.group_coordinator import GroupCoordinator
from kfk.coordinator.group.record_serde import group_metadata_key
from kfk.errors import ErrorCode
from tests.coordinator.harness import Harness
from tests.coordinator.test_consumer_group_protocol import TOPIC_IDS, assigned, harness, heartbeat, of_t

T = TOPIC_IDS["t"]


def classic_group_of_one(h: Harness) -> str:
    """A Stable classic group whose only member owns t-0..3."""
    joined = h.join_dynamic("g").only
    assert (joined.error_code, joined.generation_id) == (ErrorCode.NONE, 1)
    assignment = encode_assignment([TopicPartition("t", p) for p in range(4)])
    assert h.sync("g", joined.member_id, 1, {joined.member_id: assignment}).only.error_code == ErrorCode.NONE
    return joined.member_id


def reloaded(h: Harness) -> GroupCoordinator:
    fresh = GroupCoordinator(h.config)
    fresh.image = h.coordinator.image
    for partition, records in h.log.items():
        fresh.begin_loading(partition)
        for key, value in records:
            fresh.replay(partition, key, value, h.now_ms)
        fresh.complete_loading(partition, h.now_ms)
    return fresh


def test_upgrade_mixed_group_and_downgrade() -> None:
    h = harness()
    classic = classic_group_of_one(h)
    h.commit("g", {("t", 0): 5}, member_id=classic, generation_id=1)

    joined = heartbeat(h, "m1", 0)  # the first consumer-protocol member upgrades the group
    assert (joined.error_code, joined.member_epoch, assigned(joined)) == (ErrorCode.NONE, 2, {})
    assert h.coordinator.groups.group("g") is None
    group = h.coordinator.consumer_groups.group("g")
    assert group.members[classic].uses_classic_protocol and group.members[classic].member_epoch == 1
    assert group.target_assignment == {classic: {T: frozenset({0, 1})}, "m1": {T: frozenset({2, 3})}}
    partition = h.coordinator.partition_for("g")
    assert (group_metadata_key("g"), None) in h.log[partition]  # the classic group's record is deleted

    # The classic member learns of the rebalance from its heartbeat, rejoins owning nothing (eager), gets its target.
    assert h.heartbeat("g", classic, 1) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoined = h.join("g", classic).only
    assert (rejoined.error_code, rejoined.generation_id, rejoined.leader, rejoined.members) == (
        ErrorCode.NONE, 2, "", [])
    synced = h.sync("g", classic, 2, protocol_type="consumer", protocol_name="range").only
    assert decode_assignment(synced.assignment) == [TopicPartition("t", 0), TopicPartition("t", 1)]
    assert h.heartbeat("g", classic, 2) == ErrorCode.NONE
    assert h.sync("g", classic, 1).only.error_code == ErrorCode.ILLEGAL_GENERATION
    released = heartbeat(h, "m1", 2, owned={})
    assert assigned(released) == {T: {2, 3}}
    assert h.commit("g", {("t", 1): 7}, member_id=classic, generation_id=2).only == {("t", 1): 0}
    described = h.coordinator.consumer_group_describe("g")
    assert sorted(member.member_type for member in described.members) == [0, 1]

    before = h.coordinator.consumer_groups.group("g")
    after = reloaded(h).consumer_groups.group("g")
    assert after.members == before.members and after.target_assignment == before.target_assignment
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)

    # The last consumer-protocol member leaves: the group is classic again and rebalances.
    assert heartbeat(h, "m1", -1).error_code == ErrorCode.NONE
    assert h.coordinator.consumer_groups.group("g") is None
    group = h.coordinator.groups.group("g")
    assert group.state is ClassicGroupState.PREPARING_REBALANCE and group.generation_id == 2
    assert decode_assignment(group.members[classic].assignment) == [TopicPartition("t", 0), TopicPartition("t", 1)]
    assert h.heartbeat("g", classic, 2) == ErrorCode.REBALANCE_IN_PROGRESS
    again = h.join("g", classic).only
    assert (again.error_code, again.generation_id, again.leader) == (ErrorCode.NONE, 3, classic)
    reloaded_classic = reloaded(h).groups.group("g")
    assert reloaded_classic is not None and set(reloaded_classic.members) == {classic}
    assert (h.committed("g", "t", 0), h.committed("g", "t", 1)) == (5, 7)  # kept through both conversions


def test_a_classic_member_leaving_a_mixed_group_leaves_a_consumer_group() -> None:
    h = harness()
    classic = classic_group_of_one(h)
    heartbeat(h, "m1", 0)
    error, responses = h.leave("g", classic)
    assert (error, [r.error_code for r in responses]) == (ErrorCode.NONE, [ErrorCode.NONE])
    group = h.coordinator.consumer_groups.group("g")
    assert list(group.members) == ["m1"] and h.coordinator.groups.group("g") is None
    assert assigned(heartbeat(h, "m1", group.members["m1"].member_epoch, owned={})) == {T: {0, 1, 2, 3}}


def test_a_new_classic_member_joins_a_consumer_group() -> None:
    h = harness()
    heartbeat(h, "m1", 0)
    heartbeat(h, "m1", 2, owned=of_t({0, 1, 2, 3}))
    first = h.join("g").only
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED
    joined = h.join("g", first.member_id).only
    assert (joined.error_code, joined.generation_id) == (ErrorCode.NONE, 3)
    # t-2 and t-3 are still m1's: the classic member gets them once m1 revoked them.
    assert decode_assignment(h.sync("g", first.member_id, 3).only.assignment) == []
    assert h.heartbeat("g", first.member_id, 3) == ErrorCode.NONE
    revoking = heartbeat(h, "m1", 2, owned=of_t({0, 1, 2, 3}))
    assert assigned(revoking) == {T: {0, 1}}
    heartbeat(h, "m1", 2, owned=of_t({0, 1}))
    assert h.heartbeat("g", first.member_id, 3) == ErrorCode.REBALANCE_IN_PROGRESS
    h.join("g", first.member_id)
    assert decode_assignment(h.sync("g", first.member_id, 3).only.assignment) == [
        TopicPartition("t", 2), TopicPartition("t", 3)]
    wrong = h.join("g", protocols=(("roundrobin", b"\x00\x01"),)).only
    assert wrong.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


def test_the_policy_refuses_an_upgrade() -> None:
    h = harness(consumer_group_migration_policy="downgrade")
    classic_group_of_one(h)
    refused = heartbeat(h, "m1", 0)
    assert (refused.error_code, refused.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                           "Group g is not a consumer group.")
    assert h.coordinator.groups.group("g").state is ClassicGroupState.STABLE
