"""Offsets: commit validation, visibility after commit, replay from the log, expiry, DeleteGroups, OffsetDelete."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kfk.coordinator.group.classic_group import ClassicGroupState
from kfk.coordinator.group.record_serde import OffsetCommitRecord, deserialize_record
from kfk.errors import ErrorCode
from tests.coordinator.harness import Harness
from tests.coordinator.test_classic_group_protocol import group_of, stable_group


def reload(h: Harness) -> Harness:
    """A fresh coordinator that loads every partition from the first one's log (a restart or a new leader)."""
    fresh = Harness(load=False, **{k: getattr(h.config, k) for k in (
        "offsets_topic_num_partitions", "initial_rebalance_delay_ms", "min_session_timeout_ms",
        "max_session_timeout_ms", "offsets_retention_ms", "offsets_retention_check_interval_ms")})
    fresh.now_ms = h.now_ms
    for partition, records in h.log.items():
        fresh.coordinator.begin_loading(partition)
        for key, value in records:
            fresh.coordinator.replay(partition, key, value, fresh.now_ms)
        fresh.coordinator.complete_loading(partition, fresh.now_ms)
        fresh.log[partition] = list(records)
    return fresh


def test_simple_commit_and_fetch_with_metadata() -> None:
    h = Harness()
    result = h.commit("g", {("t", 0): 10, ("t", 1): 20}, metadata="checkpoint-1")
    assert result.only == {("t", 0): ErrorCode.NONE, ("t", 1): ErrorCode.NONE}
    error, topics = h.fetch("g", [("t", [0, 1, 2])])
    assert error == ErrorCode.NONE
    offsets = {p: (o.committed_offset, o.metadata) if o else None for p, o, _ in topics[0][1]}
    assert offsets == {0: (10, "checkpoint-1"), 1: (20, "checkpoint-1"), 2: None}
    assert group_of(h, "g").state is ClassicGroupState.EMPTY  # a simple group


def test_offsets_visible_only_after_the_write_commits() -> None:
    h = Harness(auto_commit=False)
    answer = h.commit("g", {("t", 0): 5})
    assert answer == [] and h.committed("g", "t", 0) is None
    h.flush()
    assert answer.only == {("t", 0): ErrorCode.NONE} and h.committed("g", "t", 0) == 5


def test_failed_commit_write_maps_errors_and_keeps_old_offset() -> None:
    h = Harness()
    h.commit("g", {("t", 0): 1})
    h.auto_commit = False
    answer = h.commit("g", {("t", 0): 2})
    h.flush(ErrorCode.NOT_ENOUGH_REPLICAS)
    assert answer.only == {("t", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}
    answer = h.commit("g", {("t", 0): 3})
    h.flush(ErrorCode.MESSAGE_TOO_LARGE)
    assert answer.only == {("t", 0): ErrorCode.INVALID_COMMIT_OFFSET_SIZE}
    assert h.committed("g", "t", 0) == 1


def test_member_commit_validation() -> None:
    h = Harness()
    leader, follower = stable_group(h, "g", 2)
    generation = group_of(h, "g").generation_id
    ok = h.commit("g", {("t", 0): 1}, member_id=leader, generation_id=generation)
    assert ok.only[("t", 0)] == ErrorCode.NONE
    assert h.commit("g", {("t", 0): 1}, member_id=leader, generation_id=generation + 5).only[("t", 0)] == \
        ErrorCode.ILLEGAL_GENERATION
    assert h.commit("g", {("t", 0): 1}, member_id="ghost", generation_id=generation).only[("t", 0)] == \
        ErrorCode.UNKNOWN_MEMBER_ID
    # No member and no generation while the group has members (OffsetCommit v0, or an admin): rejected.
    assert h.commit("g", {("t", 0): 1}).only[("t", 0)] == ErrorCode.UNKNOWN_MEMBER_ID
    # A group that does not exist with a generation: ILLEGAL_GENERATION before v9, GROUP_ID_NOT_FOUND from v9.
    assert h.commit("nope", {("t", 0): 1}, member_id="m", generation_id=1).only[("t", 0)] == \
        ErrorCode.ILLEGAL_GENERATION
    assert h.commit("nope", {("t", 0): 1}, member_id="m", generation_id=1, version=9).only[("t", 0)] == \
        ErrorCode.GROUP_ID_NOT_FOUND
    # During CompletingRebalance: REBALANCE_IN_PROGRESS.
    h.join("g", leader)
    h.join("g", follower)
    assert group_of(h, "g").state is ClassicGroupState.COMPLETING_REBALANCE
    assert h.commit("g", {("t", 0): 1}, member_id=leader, generation_id=generation + 1).only[("t", 0)] == \
        ErrorCode.REBALANCE_IN_PROGRESS


def test_metadata_too_large_per_partition() -> None:
    h = Harness(offset_metadata_max_bytes=4)
    answer = h.commit("g", {("t", 0): 1}, metadata="12345").only
    assert answer == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert h.commit("g", {("t", 0): 1}, metadata="1234").only == {("t", 0): ErrorCode.NONE}


def test_commit_to_a_group_of_another_coordinator() -> None:
    h = Harness(load=False)
    assert h.commit("g", {("t", 0): 1}).only == {("t", 0): ErrorCode.NOT_COORDINATOR}
    assert h.fetch("g")[0] == ErrorCode.NOT_COORDINATOR


def test_state_survives_a_reload_from_the_log() -> None:
    h = Harness()
    leader, follower = stable_group(h, "g", 2)
    generation = group_of(h, "g").generation_id
    h.commit("g", {("t", 0): 7, ("t", 1): 8}, member_id=leader, generation_id=generation, metadata="m")
    h.commit("simple", {("u", 3): 99})
    h.commit("simple", {("u", 3): 100})
    fresh = reload(h)
    group = group_of(fresh, "g")
    assert group.state is ClassicGroupState.STABLE and group.generation_id == generation
    assert group.leader_id == leader and set(group.members) == {leader, follower}
    assert group.member(follower).assignment == follower.encode()
    assert fresh.committed("g", "t", 1) == 8 and fresh.committed("simple", "u", 3) == 100
    assert fresh.fetch("g", [("t", [0])])[1][0][1][0][1].metadata == "m"
    # Loaded members heartbeat in the same generation; one that does not expires after its session.
    assert fresh.heartbeat("g", leader, generation) == ErrorCode.NONE
    fresh.advance(10_000)
    assert not group_of(fresh, "g").has_member(follower)


def test_delete_groups() -> None:
    h = Harness()
    h.commit("simple", {("t", 0): 1, ("t", 1): 2})
    stable_group(h, "busy", 1)
    answers = []
    h.coordinator.delete_groups(["simple", "busy", "missing", ""], h.now_ms, answers.append)
    h.flush()
    assert answers == [{"simple": ErrorCode.NONE, "busy": ErrorCode.NON_EMPTY_GROUP,
                        "missing": ErrorCode.GROUP_ID_NOT_FOUND, "": ErrorCode.GROUP_ID_NOT_FOUND}]
    assert h.coordinator.groups.group("simple") is None and h.committed("simple", "t", 0) is None
    tombstones = [deserialize_record(k, v) for k, v in h.log[h.coordinator.partition_for("simple")][-3:]]
    assert all(record.value is None for record in tombstones)
    assert reload(h).coordinator.groups.group("simple") is None


def test_offset_delete() -> None:
    h = Harness()
    (member,) = stable_group(h, "g", 1)
    generation = group_of(h, "g").generation_id
    h.commit("g", {("t", 0): 1, ("other", 0): 2}, member_id=member, generation_id=generation)
    answers = []
    h.coordinator.delete_offsets("g", [("t", [0]), ("other", [0, 5])], h.now_ms,
                                 lambda error, results: answers.append((error, results)))
    h.flush()
    assert answers == [(ErrorCode.NONE, [("t", [(0, ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC)]),
                                         ("other", [(0, ErrorCode.NONE), (5, ErrorCode.NONE)])])]
    assert h.committed("g", "other", 0) is None and h.committed("g", "t", 0) == 1
    answers.clear()
    h.coordinator.delete_offsets("missing", [("t", [0])], h.now_ms,
                                 lambda error, results: answers.append((error, results)))
    assert answers == [(ErrorCode.GROUP_ID_NOT_FOUND, [])]


def test_offsets_of_a_deleted_topic_go_from_every_group_through_tombstones() -> None:
    h = Harness()
    (member,) = stable_group(h, "g", 1)
    h.commit("g", {("t", 0): 1, ("gone", 0): 500, ("gone", 1): 700}, member_id=member,
             generation_id=group_of(h, "g").generation_id)
    h.commit("simple", {("gone", 1): 9, ("kept", 0): 4})
    h.coordinator.on_partitions_deleted({("gone", 0), ("gone", 1), ("gone", 2), ("t", 5)})
    h.after()
    assert [topic for topic, _ in h.fetch("g")[1]] == ["t"] and h.committed("g", "t", 0) == 1
    assert h.committed("simple", "gone", 1) is None and h.committed("simple", "kept", 0) == 4
    tombstones = [deserialize_record(key, value) for records in h.log.values() for key, value in records
                  if value is None]
    assert sorted((r.group_id, r.topic, r.partition) for r in tombstones) == [
        ("g", "gone", 0), ("g", "gone", 1), ("simple", "gone", 1)]
    fresh = reload(h)
    assert fresh.committed("g", "gone", 0) is None and fresh.committed("simple", "gone", 1) is None
    assert fresh.committed("g", "t", 0) == 1 and fresh.committed("simple", "kept", 0) == 4


def test_offsets_of_an_empty_group_expire_after_retention() -> None:
    h = Harness(offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    h.commit("simple", {("t", 0): 1})
    h.advance(50_000)
    assert h.committed("simple", "t", 0) == 1
    h.advance(20_000)
    assert h.committed("simple", "t", 0) is None
    assert h.coordinator.groups.group("simple") is None  # nothing left: the group goes too
    assert reload(h).coordinator.groups.group("simple") is None


def test_commit_with_its_own_retention_writes_v1_and_expires_then() -> None:
    h = Harness(offsets_retention_ms=10**9, offsets_retention_check_interval_ms=1000)
    h.commit("simple", {("t", 0): 1}, retention_time_ms=5000, version=2)
    key, value = h.log[h.coordinator.partition_for("simple")][-1]
    assert value[:2] == b"\x00\x01"
    h.advance(6000)
    assert h.committed("simple", "t", 0) is None


def test_stable_consumer_group_keeps_offsets_of_subscribed_topics() -> None:
    h = Harness(offsets_retention_ms=1000, offsets_retention_check_interval_ms=500)
    (member,) = stable_group(h, "g", 1, session_timeout_ms=60_000)
    generation = group_of(h, "g").generation_id
    h.commit("g", {("t", 0): 1, ("gone", 0): 2}, member_id=member, generation_id=generation)
    for _ in range(6):
        h.advance(500)
        assert h.heartbeat("g", member, generation) == ErrorCode.NONE
    assert h.committed("g", "t", 0) == 1 and h.committed("g", "gone", 0) is None


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.sampled_from(["t", "u"]), st.integers(0, 2),
                          st.one_of(st.none(), st.integers(0, 10**6))), max_size=30))
def test_offsets_match_a_table_model_and_survive_reload(operations) -> None:
    """Commits and deletes against a plain dict: the coordinator, and a coordinator reloaded from its log, agree."""
    h = Harness()
    model: dict[tuple[str, str, int], int] = {}
    for group_id, topic, partition, offset in operations:
        if offset is None:
            answers = []
            h.coordinator.delete_offsets(group_id, [(topic, [partition])], h.now_ms,
                                         lambda error, results: answers.append(error))
            h.flush()
            expected = ErrorCode.NONE if h.coordinator.groups.group(group_id) is not None or not answers \
                else ErrorCode.GROUP_ID_NOT_FOUND
            if answers and answers[0] == ErrorCode.NONE:
                model.pop((group_id, topic, partition), None)
            else:
                assert answers == [expected] or answers == [ErrorCode.GROUP_ID_NOT_FOUND]
        else:
            assert h.commit(group_id, {(topic, partition): offset}).only == {(topic, partition): ErrorCode.NONE}
            model[(group_id, topic, partition)] = offset
        h.advance(1)
    fresh = reload(h)
    for coordinator in (h, fresh):
        for group_id in "abc":
            for topic in "tu":
                for partition in range(3):
                    assert coordinator.committed(group_id, topic, partition) == model.get(
                        (group_id, topic, partition))
    for records in h.log.values():
        assert all(isinstance(deserialize_record(k, v), OffsetCommitRecord) for k, v in records)


def test_offsets_commit_timeout_ms_comes_from_server_properties() -> None:
    """The coordinator's writes wait offsets.commit.timeout.ms for the __consumer_offsets replicas (Kafka 4.x's
    name, default 5000), so a broker setting it is honoured, not ignored as an unknown property."""
    from kfk.config import BrokerConfig
    from kfk.coordinator.group.config import GroupCoordinatorConfig

    properties = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181"}
    assert GroupCoordinatorConfig.from_broker_config(BrokerConfig(properties)).offsets_commit_timeout_ms == 5000
    configured = BrokerConfig({**properties, "offsets.commit.timeout.ms": "1234"})
    assert configured.unknown == []
    assert GroupCoordinatorConfig.from_broker_config(configured).offsets_commit_timeout_ms == 1234

