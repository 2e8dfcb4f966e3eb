"""The classic group protocol with a manual clock: joins, syncs, heartbeats, leaves, timeouts, static members."""

from __future__ import annotations

from kfk.coordinator.group.classic_group import ClassicGroupState
from kfk.coordinator.group.record_serde import GroupMetadataRecord, deserialize_record
from kfk.errors import ErrorCode
from tests.coordinator.harness import Harness, subscription


def stable_group(h: Harness, group_id: str, count: int, **kwargs) -> list[str]:
    """`count` dynamic members joined and synced in one generation; returns their member ids, leader first."""
    pending = []
    for _ in range(count):
        first = h.join(group_id, **kwargs).only
        pending.append(first.member_id)
    answers = {member_id: h.join(group_id, member_id, **kwargs) for member_id in pending}
    group = group_of(h, group_id)
    while group.state is ClassicGroupState.PREPARING_REBALANCE:
        # Members answered by an earlier generation rejoin, as clients do.
        for member_id in pending:
            if not group.member(member_id).is_awaiting_join:
                answers[member_id] = h.join(group_id, member_id, **kwargs)
    responses = [answers[m][-1] for m in pending]
    generation = responses[0].generation_id
    leader = responses[0].leader
    assert all(r.error_code == ErrorCode.NONE and r.generation_id == generation for r in responses)
    syncs = [h.sync(group_id, m, generation, {m: m.encode() for m in pending} if m == leader else None)
             for m in sorted(pending, key=lambda m: m != leader)]
    assert all(s.only.error_code == ErrorCode.NONE for s in syncs)
    return sorted(pending, key=lambda m: m != leader)


def group_of(h: Harness, group_id: str):
    return h.coordinator.groups.group(group_id)


def test_member_id_required_then_join_elects_leader_with_member_metadata() -> None:
    h = Harness()
    first = h.join("g").only
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id.startswith("client-")
    joined = h.join("g", first.member_id).only
    assert joined.error_code == ErrorCode.NONE
    assert joined.generation_id == 1 and joined.leader == first.member_id and joined.protocol_name == "range"
    assert [m.member_id for m in joined.members] == [first.member_id]
    assert joined.members[0].metadata == subscription("t")
    assert group_of(h, "g").state is ClassicGroupState.COMPLETING_REBALANCE


def test_v3_join_needs_no_member_id_round_trip() -> None:
    h = Harness()
    joined = h.join("g", version=3).only
    assert joined.error_code == ErrorCode.NONE and joined.member_id


def test_initial_rebalance_held_for_the_delay_then_extended_per_new_member() -> None:
    h = Harness(initial_rebalance_delay_ms=3000)
    a = h.join("g", version=3, rebalance_timeout_ms=60_000)
    h.advance(2999)
    assert a == []
    h.advance(1)
    assert a.only.error_code == ErrorCode.NONE  # held exactly group.initial.rebalance.delay.ms

    h2 = Harness(initial_rebalance_delay_ms=3000)
    a = h2.join("g", version=3, rebalance_timeout_ms=60_000)
    h2.advance(2000)
    b = h2.join("g", version=3, rebalance_timeout_ms=60_000)
    h2.advance(1000)  # first delay over, but a member joined in it: another delay
    assert a == [] and b == []
    h2.advance(3000)
    assert a.only.generation_id == b.only.generation_id == 1


def test_initial_delay_is_bounded_by_the_rebalance_timeout() -> None:
    h = Harness(initial_rebalance_delay_ms=3000)
    a = h.join("g", version=3, rebalance_timeout_ms=4000)
    h.advance(2500)
    h.join("g", version=3, rebalance_timeout_ms=4000)
    h.advance(500)
    h.advance(1000)  # remaining = 4000 - 3000 = 1000
    assert a.only.error_code == ErrorCode.NONE


def test_sync_answers_only_after_the_assignment_is_committed() -> None:
    h = Harness(auto_commit=False)
    leader = h.join("g", version=3).only
    follower_join = h.join("g", version=3)
    # The follower joined a CompletingRebalance group: a new rebalance starts, the leader must rejoin.
    rejoin = h.join("g", leader.member_id, version=3)
    follower = follower_join.only
    assert rejoin.only.generation_id == follower.generation_id == 2
    follower_sync = h.sync("g", follower.member_id, 2)
    leader_sync = h.sync("g", leader.member_id, 2, {leader.member_id: b"L", follower.member_id: b"F"})
    assert follower_sync == [] and leader_sync == []
    assert group_of(h, "g").state is ClassicGroupState.COMPLETING_REBALANCE
    h.flush()
    assert leader_sync.only.assignment == b"L" and follower_sync.only.assignment == b"F"
    assert group_of(h, "g").state is ClassicGroupState.STABLE
    record = deserialize_record(*h.log[h.coordinator.partition_for("g")][-1])
    assert isinstance(record, GroupMetadataRecord)
    assert record.value.generation == 2 and record.value.leader == leader.member_id
    assert {m.member_id: m.assignment for m in record.value.members} == {leader.member_id: b"L",
                                                                          follower.member_id: b"F"}


def test_failed_assignment_write_answers_with_mapped_error_and_rebalances() -> None:
    h = Harness(auto_commit=False)
    member = h.join("g", version=3).only
    sync = h.sync("g", member.member_id, 1, {member.member_id: b"x"})
    h.flush(ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert sync.only.error_code == ErrorCode.NOT_COORDINATOR
    assert group_of(h, "g").state is ClassicGroupState.PREPARING_REBALANCE


def test_heartbeat_errors_and_rebalance_notice() -> None:
    h = Harness()
    leader, follower = stable_group(h, "g", 2)
    generation = group_of(h, "g").generation_id
    assert h.heartbeat("g", follower, generation) == ErrorCode.NONE
    assert h.heartbeat("g", follower, generation - 1) == ErrorCode.ILLEGAL_GENERATION
    assert h.heartbeat("g", "nobody", generation) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat("unknown-group", follower, generation) == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.heartbeat("", follower, generation) == ErrorCode.INVALID_GROUP_ID
    h.join("g", leader)  # the leader asks for a rebalance
    assert h.heartbeat("g", follower, generation) == ErrorCode.REBALANCE_IN_PROGRESS


def test_session_expiry_removes_member_and_rebalances_the_rest() -> None:
    h = Harness()
    leader, follower = stable_group(h, "g", 2, session_timeout_ms=1000, rebalance_timeout_ms=5000)
    generation = group_of(h, "g").generation_id
    h.advance(600)
    assert h.heartbeat("g", leader, generation) == ErrorCode.NONE
    assert h.heartbeat("g", follower, generation) == ErrorCode.NONE
    h.advance(600)
    assert h.heartbeat("g", leader, generation) == ErrorCode.NONE
    assert group_of(h, "g").has_member(follower)
    # The follower stopped heartbeating: gone after its session timeout, and the leader is told to rejoin.
    h.advance(600)
    assert not group_of(h, "g").has_member(follower)
    assert h.heartbeat("g", leader, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoin = h.join("g", leader, session_timeout_ms=1000, rebalance_timeout_ms=5000).only
    assert rejoin.generation_id == generation + 1 and [m.member_id for m in rejoin.members] == [leader]


def test_member_not_rejoining_is_dropped_after_rebalance_timeout() -> None:
    h = Harness()
    leader, follower = stable_group(h, "g", 2, session_timeout_ms=10_000, rebalance_timeout_ms=2000)
    generation = group_of(h, "g").generation_id
    rejoin = h.join("g", leader, session_timeout_ms=10_000, rebalance_timeout_ms=2000)
    h.advance(1000)
    assert h.heartbeat("g", follower, generation) == ErrorCode.REBALANCE_IN_PROGRESS
    h.advance(1000)
    assert rejoin.only.generation_id == generation + 1 and len(rejoin.only.members) == 1


def test_leave_group_triggers_rebalance_and_last_leave_empties_the_group() -> None:
    h = Harness()
    leader, follower = stable_group(h, "g", 2)
    generation = group_of(h, "g").generation_id
    error, members = h.leave("g", follower)
    assert error == ErrorCode.NONE and members[0].error_code == ErrorCode.NONE
    assert group_of(h, "g").state is ClassicGroupState.PREPARING_REBALANCE
    rejoin = h.join("g", leader).only
    assert rejoin.generation_id == generation + 1
    h.sync("g", leader, generation + 1, {leader: b"all"})
    error, members = h.leave("g", leader, "unknown-member")
    assert [m.error_code for m in members] == [ErrorCode.NONE, ErrorCode.UNKNOWN_MEMBER_ID]
    group = group_of(h, "g")
    assert group.state is ClassicGroupState.EMPTY and group.generation_id == generation + 2
    last = deserialize_record(*h.log[h.coordinator.partition_for("g")][-1])
    assert last.value.members == [] and last.value.generation == generation + 2 and last.value.protocol is None
    # A group that does not exist: the request succeeds and the member is unknown (Apache Kafka's answer, see
    # tests/interop).
    error, members = h.leave("missing", "m")
    assert (error, [(m.member_id, m.error_code) for m in members]) == (
        ErrorCode.NONE, [("m", ErrorCode.UNKNOWN_MEMBER_ID)])


def test_join_validation_errors() -> None:
    h = Harness()
    assert h.join("", version=5).only.error_code == ErrorCode.INVALID_GROUP_ID
    assert h.join("g", session_timeout_ms=50).only.error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.join("g", session_timeout_ms=10**9).only.error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.join("g", session_timeout_ms=-1).only.error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    assert h.join("g", protocols=()).only.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.join("g", protocol_type="").only.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.coordinator.groups.group("g") is None  # nothing left behind
    assert h.join("g", "made-up-id").only.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    stable_group(h, "g", 1)
    other = h.join("g", protocols=(("roundrobin", b""),), version=3).only
    assert other.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    other = h.join("g", protocol_type="connect", version=3).only
    assert other.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    assert h.join("g", "made-up-id").only.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_sync_validation_errors() -> None:
    h = Harness()
    (member,) = stable_group(h, "g", 1)
    assert h.sync("g", member, 7).only.error_code == ErrorCode.ILLEGAL_GENERATION
    assert h.sync("g", "who", 1).only.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.sync("nope", member, 1).only.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert h.sync("", member, 1).only.error_code == ErrorCode.INVALID_GROUP_ID
    bad = h.sync("g", member, 1, protocol_name="roundrobin").only
    assert bad.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    again = h.sync("g", member, 1, protocol_type="consumer", protocol_name="range").only
    assert again.error_code == ErrorCode.NONE and again.assignment == member.encode()


def test_protocol_selection_by_votes() -> None:
    h = Harness()
    both = (("roundrobin", b"r"), ("range", b"a"))
    a = h.join("g", version=3, protocols=both)
    h.join("g", a.only.member_id, version=3, protocols=both)
    b = h.join("g", version=3, protocols=(("range", b"a"), ("roundrobin", b"r")))
    c = h.join("g", version=3, protocols=both)
    h.join("g", a.only.member_id, version=3, protocols=both)
    assert {x[-1].protocol_name for x in (b, c)} == {"roundrobin"}


def test_static_member_rejoins_without_rebalance_and_fences_the_old_id() -> None:
    h = Harness()
    first = h.join("g", group_instance_id="instance-1", version=5).only
    assert first.error_code == ErrorCode.NONE  # static members skip MEMBER_ID_REQUIRED
    h.sync("g", first.member_id, 1, {first.member_id: b"mine"}, group_instance_id="instance-1")
    # Restart: same instance id, no member id. Same generation, same assignment, no rebalance.
    again = h.join("g", group_instance_id="instance-1", version=5).only
    assert again.error_code == ErrorCode.NONE and again.generation_id == 1
    assert again.member_id != first.member_id
    assert group_of(h, "g").state is ClassicGroupState.STABLE
    sync = h.sync("g", again.member_id, 1, group_instance_id="instance-1").only
    assert sync.assignment == b"mine"
    assert h.heartbeat("g", first.member_id, 1, "instance-1") == ErrorCode.FENCED_INSTANCE_ID
    assert h.sync("g", first.member_id, 1, group_instance_id="instance-1").only.error_code == \
        ErrorCode.FENCED_INSTANCE_ID
    # An admin removes the static member by its instance id.
    error, members = h.leave("g", "", group_instance_id="instance-1")
    assert members[0].error_code == ErrorCode.NONE and group_of(h, "g").is_empty


def test_static_leader_rejoining_gets_skip_assignment_on_v9() -> None:
    h = Harness()
    first = h.join("g", group_instance_id="i", version=9).only
    h.sync("g", first.member_id, 1, {first.member_id: b"x"}, group_instance_id="i")
    again = h.join("g", group_instance_id="i", version=9).only
    assert again.skip_assignment and again.leader == again.member_id and len(again.members) == 1


def test_pending_member_expires_after_session_timeout() -> None:
    h = Harness()
    first = h.join("g", session_timeout_ms=500).only
    assert group_of(h, "g").is_pending_member(first.member_id)
    h.advance(500)
    assert h.coordinator.groups.group("g") is None
    assert h.join("g", first.member_id).only.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_unresponsive_sync_member_removed_after_rebalance_timeout() -> None:
    h = Harness()
    a = h.join("g", version=3, rebalance_timeout_ms=1000).only
    b_join = h.join("g", version=3, rebalance_timeout_ms=1000)
    h.join("g", a.member_id, version=3, rebalance_timeout_ms=1000)
    b = b_join.only
    leader_sync = h.sync("g", a.member_id, 2, {a.member_id: b"a", b.member_id: b"b"})
    assert leader_sync.only.error_code == ErrorCode.NONE
    h.advance(1000)  # b never synced
    group = group_of(h, "g")
    assert not group.has_member(b.member_id) and group.state is ClassicGroupState.PREPARING_REBALANCE


def test_group_max_size() -> None:
    h = Harness(max_size=1)
    stable_group(h, "g", 1)
    assert h.join("g", version=3).only.error_code == ErrorCode.GROUP_MAX_SIZE_REACHED


def test_not_coordinator_and_loading() -> None:
    h = Harness(load=False)
    assert h.join("g").only.error_code == ErrorCode.NOT_COORDINATOR
    partition = h.coordinator.partition_for("g")
    h.coordinator.begin_loading(partition)
    assert h.join("g").only.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert h.heartbeat("g", "m", 1) == ErrorCode.NONE  # Kafka answers heartbeats blindly while loading
    assert h.commit("g", {("t", 0): 1}).only == {("t", 0): ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
    assert h.coordinator.describe_group("g").error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert h.coordinator.list_groups([], [])[0] == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    h.coordinator.complete_loading(partition, h.now_ms)
    assert h.join("g").only.error_code == ErrorCode.MEMBER_ID_REQUIRED


def test_describe_and_list_groups() -> None:
    h = Harness()
    leader, follower = stable_group(h, "g", 2)
    described = h.coordinator.describe_group("g")
    assert described.group_state == "Stable" and described.protocol_type == "consumer"
    assert described.protocol_data == "range"
    assert {m.member_id: m.member_assignment for m in described.members} == {leader: leader.encode(),
                                                                             follower: follower.encode()}
    assert all(m.member_metadata == subscription("t") and m.client_id == "client" for m in described.members)
    unknown = h.coordinator.describe_group("nope")
    assert unknown.error_code == ErrorCode.NONE and unknown.group_state == "Dead"
    h.commit("simple", {("t", 0): 3})
    error, listed = h.coordinator.list_groups([], [])
    assert error == ErrorCode.NONE
    assert {(g.group_id, g.group_state, g.protocol_type) for g in listed} == {("g", "Stable", "consumer"),
                                                                              ("simple", "Empty", "")}
    assert [g.group_id for g in h.coordinator.list_groups(["empty"], [])[1]] == ["simple"]
    assert h.coordinator.list_groups([], ["consumer"])[1] == []
    assert len(h.coordinator.list_groups([], ["Classic"])[1]) == 2


def test_a_retried_join_answers_the_first_request_too() -> None:
    h = Harness()
    leader, follower = stable_group(h, "g", 2)
    generation = group_of(h, "g").generation_id
    first = h.join("g", leader)
    second = h.join("g", leader)
    assert first.only.error_code == ErrorCode.REBALANCE_IN_PROGRESS
    h.join("g", follower)
    assert second.only.error_code == ErrorCode.NONE and second.only.generation_id == generation + 1
