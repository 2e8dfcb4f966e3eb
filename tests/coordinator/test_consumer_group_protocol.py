"""The KIP-848 consumer protocol in the group coordinator's state machine, driven by a manual clock (tests/coordinator
/harness.py): reconciliation (a partition is revoked before another member gets it), epochs and Kafka's errors,
session and rebalance timeouts, static members, regular expressions and topic changes, the records' replay on load,
offsets by member epoch, and the admin APIs' view of consumer groups. Real clients drive the same code in
tests/integration/test_consumer_groups_confluent.py and tests/interop/test_java_consumer_protocol.py."""

from __future__ import annotations

import uuid

import pytest

from kfk.config import BrokerConfig
from kfk.coordinator.group.assignors import range_assign, uniform_assign
from kfk.coordinator.group.config import GroupCoordinatorConfig
from kfk.coordinator.group.group_coordinator import GroupCoordinator
from kfk.errors import ErrorCode, InvalidConfigurationError
from kfk.protocol.messages import ApiKey
from kfk.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from kfk.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kfk.server.dispatch import served_broker_versions
from tests.coordinator.harness import Answers, Harness

TOPIC_IDS = {name: uuid.uuid5(uuid.NAMESPACE_DNS, name) for name in ("t", "u", "orders-eu", "orders-us", "other")}


def image(**partition_counts: int) -> MetadataImage:
    topics = [TopicImage(name, TOPIC_IDS.get(name) or uuid.uuid5(uuid.NAMESPACE_DNS, name),
                         {i: PartitionRegistration((1,), (1,), 1, 0, 0) for i in range(count)})
              for name, count in partition_counts.items()]
    return MetadataImage(offset=len(topics) + sum(partition_counts.values()),
                         topics_by_id={topic.topic_id: topic for topic in topics},
                         topics_by_name={topic.name: topic for topic in topics})


def harness(**config) -> Harness:
    h = Harness(**{"consumer_group_session_timeout_ms": 45_000, "consumer_group_heartbeat_interval_ms": 5_000,
                   **config})
    h.coordinator.image = image(t=4)
    return h


def heartbeat(h: Harness, member_id: str, epoch: int, *, group_id: str = "g", topics=None, regex=None,
              owned: dict[str, set[int]] | None = None, instance_id: str | None = None,
              rebalance_timeout_ms: int | None = None, assignor: str | None = None, version: int = 1):
    """One ConsumerGroupHeartbeat, as the Java consumer sends it: a join (epoch 0) carries everything."""
    joining = epoch == 0
    request = ConsumerGroupHeartbeatRequest(
        group_id=group_id, member_id=member_id, member_epoch=epoch, instance_id=instance_id,
        rebalance_timeout_ms=rebalance_timeout_ms if rebalance_timeout_ms is not None else (
            30_000 if joining else -1),
        subscribed_topic_names=list(topics) if topics is not None else (["t"] if joining and regex is None
                                                                         else None),
        subscribed_topic_regex=regex, server_assignor=assignor,
        topic_partitions=[ConsumerGroupHeartbeatRequest.TopicPartitions(topic_id=TOPIC_IDS[name],
                                                                        partitions=sorted(partitions))
                          for name, partitions in (owned or {}).items()] if (owned is not None or joining)
        else None)
    answers = Answers()
    h.coordinator.consumer_group_heartbeat(request, version, "client", "/127.0.0.1", h.now_ms, answers)
    h.after()
    return answers.only


def assigned(response) -> dict[uuid.UUID, set[int]] | None:
    if response.assignment is None:
        return None
    return {entry.topic_id: set(entry.partitions) for entry in response.assignment.topic_partitions}


def of_t(partitions) -> dict[str, set[int]]:
    return {"t": set(partitions)}


def owners(h: Harness, group_id: str = "g") -> dict[tuple[uuid.UUID, int], list[str]]:
    """Who owns each partition (assigned or still revoking), by the group's members."""
    result: dict[tuple[uuid.UUID, int], list[str]] = {}
    for member in h.coordinator.consumer_groups.group(group_id).members.values():
        for assignment in (member.assigned_partitions, member.partitions_pending_revocation):
            for topic_id, partitions in assignment.items():
                for partition in partitions:
                    result.setdefault((topic_id, partition), []).append(member.member_id)
    return result


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    h = harness()
    first = heartbeat(h, "m1", 0)
    assert (first.error_code, first.member_epoch, assigned(first)) == (0, 2, {TOPIC_IDS["t"]: {0, 1, 2, 3}})
    second = heartbeat(h, "m2", 0)
    # m2 is at the new epoch, but every partition of its target is still m1's.
    assert second.member_epoch == 3 and assigned(second) == {}
    target_m2 = h.coordinator.consumer_groups.group("g").target_assignment["m2"][TOPIC_IDS["t"]]
    assert len(target_m2) == 2
    # m1 is told to revoke: it keeps its epoch and gets the partitions it keeps.
    revoking = heartbeat(h, "m1", 2, owned=of_t({0, 1, 2, 3}))
    kept = {0, 1, 2, 3} - target_m2
    assert revoking.member_epoch == 2 and assigned(revoking) == {TOPIC_IDS["t"]: kept}
    assert all(len(members) == 1 for members in owners(h).values())
    assert assigned(heartbeat(h, "m2", 3, owned={})) is None  # still nothing released
    assert h.coordinator.consumer_groups.group("g").state.value == "Reconciling"
    # m1 revoked: it moves to epoch 2; m2's next heartbeat gets the partitions.
    done = heartbeat(h, "m1", 2, owned=of_t(kept))
    assert done.member_epoch == 3
    given = heartbeat(h, "m2", 3, owned={})
    assert given.member_epoch == 3 and assigned(given) == {TOPIC_IDS["t"]: target_m2}
    assert all(len(members) == 1 for members in owners(h).values())
    assert h.coordinator.consumer_groups.group("g").state.value == "Stable"


def test_epoch_and_membership_errors_carry_kafkas_messages() -> None:
    h = harness()
    heartbeat(h, "m1", 0)
    ahead = heartbeat(h, "m1", 6, owned={})
    assert ahead.error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert ahead.error_message == ("The consumer group member has a greater member epoch (6) than the one known by "
                                   "the group coordinator (2). The member must abandon all its partitions and "
                                   "rejoin.")
    unknown = heartbeat(h, "nobody", 2, owned={})
    assert (unknown.error_code, unknown.error_message) == (ErrorCode.UNKNOWN_MEMBER_ID,
                                                           "Member nobody is not a member of group g.")
    missing = heartbeat(h, "m1", 2, group_id="nowhere", owned={})
    assert (missing.error_code, missing.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                           "Consumer group nowhere not found.")
    request = ConsumerGroupHeartbeatRequest(group_id="g", member_id="m2", rebalance_timeout_ms=1000,
                                            topic_partitions=[])
    answers = Answers()
    h.coordinator.consumer_group_heartbeat(request, 1, "client", "/127.0.0.1", h.now_ms, answers)
    assert (answers.only.error_code, answers.only.error_message) == (
        ErrorCode.INVALID_REQUEST, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                                   "(re-)joining.")
    assert heartbeat(h, "m2", 0, topics=[]).error_code == ErrorCode.NONE  # a pattern matching nothing yet
    assert heartbeat(h, "", 0).error_message == "MemberId can't be empty."
    assert heartbeat(h, "m3", -3).error_message == "MemberEpoch is invalid."
    bad_regex = heartbeat(h, "m3", 0, regex="(?<=x)y")
    assert bad_regex.error_code == ErrorCode.INVALID_REQUEST
    assignor = heartbeat(h, "m3", 0, assignor="sticky")
    assert (assignor.error_code, assignor.error_message) == (
        ErrorCode.UNSUPPORTED_ASSIGNOR, "ServerAssignor sticky is not supported. Supported assignors: uniform, range.")


def test_a_member_coming_back_with_its_previous_epoch_is_accepted_while_it_owns_no_more() -> None:
    h = harness()
    heartbeat(h, "m1", 0)
    heartbeat(h, "m2", 0)
    heartbeat(h, "m1", 2, owned=of_t({0, 1, 2, 3}))
    m1 = h.coordinator.consumer_groups.group("g").member("m1")
    heartbeat(h, "m1", 2, owned=of_t(m1.assigned_partitions[TOPIC_IDS["t"]]))  # now at epoch 2
    kept = h.coordinator.consumer_groups.group("g").member("m1").assigned_partitions[TOPIC_IDS["t"]]
    assert heartbeat(h, "m1", 2, owned=of_t(kept)).error_code == ErrorCode.NONE  # the epoch-2 answer was lost
    assert heartbeat(h, "m1", 2, owned=of_t({0, 1, 2, 3})).error_code == ErrorCode.FENCED_MEMBER_EPOCH


def test_session_timeout_fences_a_member_and_its_partitions_go_to_the_others() -> None:
    h = harness()
    heartbeat(h, "m1", 0)
    heartbeat(h, "m2", 0)
    heartbeat(h, "m1", 1, owned=of_t({0, 1, 2, 3}))
    group = h.coordinator.consumer_groups.group("g")
    heartbeat(h, "m1", 1, owned=of_t(group.member("m1").assigned_partitions[TOPIC_IDS["t"]]))
    heartbeat(h, "m2", 2, owned={})
    epoch = group.group_epoch
    for _ in range(10):  # m2 keeps heartbeating, m1 goes silent
        h.advance(5_000)
        m2 = group.member("m2")
        response = heartbeat(h, "m2", m2.member_epoch,
                             owned=of_t(m2.assigned_partitions.get(TOPIC_IDS["t"], set())))
    assert "m1" not in group.members and group.group_epoch == epoch + 1
    assert response.error_code == ErrorCode.NONE and group.member("m2").assigned_partitions == {
        TOPIC_IDS["t"]: frozenset({0, 1, 2, 3})}


def test_a_member_that_does_not_revoke_in_its_rebalance_timeout_is_fenced() -> None:
    h = harness()
    heartbeat(h, "m1", 0, rebalance_timeout_ms=10_000)
    heartbeat(h, "m2", 0)
    heartbeat(h, "m1", 2, owned=of_t({0, 1, 2, 3}))  # told to revoke; it keeps heartbeating without revoking
    for _ in range(3):
        h.advance(4_000)
        response = heartbeat(h, "m1", 2, owned=of_t({0, 1, 2, 3}))
    assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert "m1" not in h.coordinator.consumer_groups.group("g").members


def test_a_static_member_that_leaves_with_minus_2_gets_its_partitions_back_without_a_rebalance() -> None:
    h = harness()
    heartbeat(h, "a1", 0, instance_id="a")
    heartbeat(h, "b1", 0, instance_id="b")
    group = h.coordinator.consumer_groups.group("g")
    heartbeat(h, "a1", 2, owned=of_t({0, 1, 2, 3}), instance_id="a")
    heartbeat(h, "a1", 2, owned=of_t(group.member("a1").assigned_partitions[TOPIC_IDS["t"]]), instance_id="a")
    heartbeat(h, "b1", 3, owned={}, instance_id="b")
    a_partitions = set(group.member("a1").assigned_partitions[TOPIC_IDS["t"]])
    b_partitions = set(group.member("b1").assigned_partitions[TOPIC_IDS["t"]])
    assert a_partitions and b_partitions
    left = heartbeat(h, "a1", -2, instance_id="a", owned=of_t(a_partitions))
    assert (left.error_code, left.member_epoch) == (0, -2)
    unreleased = heartbeat(h, "a2", 0, instance_id="b")
    assert unreleased.error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    h.advance(10_000)
    back = heartbeat(h, "a2", 0, instance_id="a")
    assert back.error_code == ErrorCode.NONE and assigned(back) == {TOPIC_IDS["t"]: a_partitions}
    b = group.member("b1")
    assert assigned(heartbeat(h, "b1", b.member_epoch, owned=of_t(b_partitions), instance_id="b")) in (
        None, {TOPIC_IDS["t"]: b_partitions})
    assert set(group.member("b1").assigned_partitions[TOPIC_IDS["t"]]) == b_partitions
    assert "a1" not in group.members and group.static_member("a").member_id == "a2"


def test_regex_subscription_follows_topics_created_and_partitions_added() -> None:
    h = harness()
    h.coordinator.image = image(**{"orders-eu": 2, "other": 1})
    first = heartbeat(h, "m1", 0, regex="orders-.*")
    assert assigned(first) == {TOPIC_IDS["orders-eu"]: {0, 1}}
    h.coordinator.image = image(**{"orders-eu": 3, "orders-us": 1, "other": 1})
    h.coordinator.consumer_groups.on_metadata_update()
    grown = heartbeat(h, "m1", 2, owned={"orders-eu": {0, 1}})
    assert grown.member_epoch == 3
    assert assigned(grown) == {TOPIC_IDS["orders-eu"]: {0, 1, 2}, TOPIC_IDS["orders-us"]: {0}}


def test_a_deleted_topic_is_revoked_and_leaves_the_assignment() -> None:
    h = harness()
    h.coordinator.image = image(t=2, u=2)
    joined = heartbeat(h, "m1", 0, topics=["t", "u"])
    assert assigned(joined) == {TOPIC_IDS["t"]: {0, 1}, TOPIC_IDS["u"]: {0, 1}}
    h.coordinator.image = image(t=2)
    h.coordinator.consumer_groups.on_metadata_update()
    revoking = heartbeat(h, "m1", 2, owned={"t": {0, 1}, "u": {0, 1}})
    assert revoking.member_epoch == 2 and assigned(revoking) == {TOPIC_IDS["t"]: {0, 1}}
    done = heartbeat(h, "m1", 2, owned={"t": {0, 1}})
    assert done.member_epoch == 3 and h.coordinator.consumer_groups.group("g").state.value == "Stable"


def test_the_records_rebuild_every_epoch_and_assignment_after_a_reload() -> None:
    h = harness()
    heartbeat(h, "m1", 0)
    heartbeat(h, "m2", 0, instance_id="s")
    heartbeat(h, "m1", 1, owned=of_t({0, 1, 2, 3}))
    before = h.coordinator.consumer_groups.group("g")
    fresh = GroupCoordinator(h.config)
    fresh.image = h.coordinator.image
    for partition, records in h.log.items():
        fresh.begin_loading(partition)
        for key, value in records:
            fresh.replay(partition, key, value, h.now_ms)
        fresh.complete_loading(partition, h.now_ms)
    after = fresh.consumer_groups.group("g")
    assert (after.group_epoch, after.assignment_epoch, after.target_assignment) == (
        before.group_epoch, before.assignment_epoch, before.target_assignment)
    assert after.members == before.members and after.static_members == {"s": "m2"}
    assert after.partition_epochs == before.partition_epochs
    assert after.state == before.state


def test_offsets_are_committed_and_fetched_at_the_member_epoch() -> None:
    h = harness()
    heartbeat(h, "m1", 0)
    assert h.commit("g", {("t", 0): 5}, member_id="m1", generation_id=2, version=9).only == {("t", 0): 0}
    assert h.commit("g", {("t", 0): 6}, member_id="m1", generation_id=0, version=9).only == {
        ("t", 0): ErrorCode.STALE_MEMBER_EPOCH}
    assert h.commit("g", {("t", 0): 6}, member_id="m1", generation_id=2, version=8).only == {
        ("t", 0): ErrorCode.UNSUPPORTED_VERSION}
    assert h.commit("g", {("t", 0): 6}, member_id="x", generation_id=2, version=9).only == {
        ("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert h.coordinator.fetch_offsets("g", [("t", [0])], member_id="m1", member_epoch=0)[0] == \
        ErrorCode.STALE_MEMBER_EPOCH
    error, topics = h.coordinator.fetch_offsets("g", [("t", [0])], member_id="m1", member_epoch=2)
    assert error == ErrorCode.NONE and topics[0][1][0][1].committed_offset == 5
    assert h.committed("g", "t", 0) == 5  # an admin's fetch (no member, epoch -1)


def test_list_describe_and_delete_see_a_consumer_group() -> None:
    h = harness()
    heartbeat(h, "m1", 0)
    error, listed = h.coordinator.list_groups([], ["consumer"])
    assert [(g.group_id, g.group_type, g.protocol_type, g.group_state) for g in listed] == [
        ("g", "consumer", "consumer", "Stable")]
    assert h.coordinator.list_groups(["empty"], [])[1] == []
    described = h.coordinator.describe_group("g")
    assert (described.error_code, described.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                                "Group g is not a classic group.")
    consumer = h.coordinator.consumer_group_describe("g")
    assert (consumer.group_epoch, consumer.assignment_epoch, consumer.assignor_name) == (2, 2, "uniform")
    assert [m.member_id for m in consumer.members] == ["m1"]
    deleted = Answers()
    h.coordinator.delete_groups(["g"], h.now_ms, deleted)
    h.after()
    assert deleted.only == {"g": ErrorCode.NON_EMPTY_GROUP}
    heartbeat(h, "m1", -1)
    deleted = Answers()
    h.coordinator.delete_groups(["g"], h.now_ms, deleted)
    h.after()
    assert deleted.only == {"g": ErrorCode.NONE} and h.coordinator.consumer_groups.group("g") is None


def test_group_max_size() -> None:
    h = harness(consumer_group_max_size=1)
    heartbeat(h, "m1", 0)
    full = heartbeat(h, "m2", 0)
    assert (full.error_code, full.error_message) == (
        ErrorCode.GROUP_MAX_SIZE_REACHED, "The consumer group has reached its maximum capacity of 1 members.")


@pytest.mark.parametrize("members", [1, 2, 3, 5, 7])
def test_uniform_is_balanced_and_sticky(members: int) -> None:
    topics = {uuid.uuid4(): count for count in (5, 3, 8)}
    subscriptions = {f"m{i}": frozenset(topics) for i in range(members)}
    first = uniform_assign(subscriptions, topics, {})
    sizes = [sum(len(p) for p in a.values()) for a in first.values()]
    assert sum(sizes) == 16 and max(sizes) - min(sizes) <= 1
    subscriptions[f"m{members}"] = frozenset(topics)  # one member joins
    second = uniform_assign(subscriptions, topics, first)
    sizes = [sum(len(p) for p in a.values()) for a in second.values()]
    assert sum(sizes) == 16 and max(sizes) - min(sizes) <= 1
    moved = sum(len(partitions - second[m].get(t, frozenset())) for m, a in first.items()
                for t, partitions in a.items())
    assert moved <= -(-16 // (members + 1))  # only what the newcomer takes


def test_range_gives_co_partitioned_topics_the_same_partitions() -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    result = range_assign({"m1": frozenset({a, b}), "m2": frozenset({a, b})}, {a: 3, b: 3}, {})
    assert result["m1"] == {a: frozenset({0, 1}), b: frozenset({0, 1})}
    assert result["m2"] == {a: frozenset({2}), b: frozenset({2})}


def test_an_empty_consumer_group_gives_way_to_a_classic_group_and_an_upgrade_can_be_refused() -> None:
    h = harness(consumer_group_migration_policy="downgrade")
    heartbeat(h, "m1", 0)
    heartbeat(h, "m1", -1)
    assert h.join_dynamic("g").only.error_code == ErrorCode.NONE  # the empty consumer group gave way
    assert h.coordinator.consumer_groups.group("g") is None and h.coordinator.groups.group("g") is not None
    taken = heartbeat(h, "m2", 0)
    assert (taken.error_code, taken.error_message) == (ErrorCode.GROUP_ID_NOT_FOUND,
                                                       "Group g is not a consumer group.")


BROKER = {"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181"}


def test_the_broker_settings_of_the_consumer_protocol() -> None:
    config = GroupCoordinatorConfig.from_broker_config(BrokerConfig({
        **BROKER, "group.consumer.assignors": "org.apache.kafka.coordinator.group.assignor.RangeAssignor,uniform",
        "group.consumer.session.timeout.ms": "50000", "group.consumer.heartbeat.interval.ms": "6000"}))
    assert (config.consumer_group_assignors, config.consumer_group_session_timeout_ms,
            config.consumer_group_heartbeat_interval_ms) == (("range", "uniform"), 50000, 6000)
    assert ApiKey.CONSUMER_GROUP_HEARTBEAT in served_broker_versions(config.consumer_protocol_enabled)
    classic_only = GroupCoordinatorConfig.from_broker_config(BrokerConfig(
        {**BROKER, "group.coordinator.rebalance.protocols": "classic"}))
    served = served_broker_versions(classic_only.consumer_protocol_enabled)
    assert ApiKey.CONSUMER_GROUP_HEARTBEAT not in served and ApiKey.CONSUMER_GROUP_DESCRIBE not in served
    for settings, message in [
        ({"group.consumer.session.timeout.ms": "1000"},
         "group.consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
        ({"group.consumer.heartbeat.interval.ms": "20000"},
         "group.consumer.heartbeat.interval.ms must be less than or equal to "
         "group.consumer.max.heartbeat.interval.ms"),
        ({"group.consumer.assignors": "sticky"}, "Invalid value sticky for configuration group.consumer.assignors"),
    ]:
        with pytest.raises(InvalidConfigurationError, match=message):
            GroupCoordinatorConfig.from_broker_config(BrokerConfig({**BROKER, **settings}))
