"""Leadership and ISR as brokers come and go, preferred elections, controlled shutdown and reassignment steps:
pure functions of the image (kfk/controller/partition_change.py, reassignment.py)."""

from __future__ import annotations

import uuid

from kfk.controller import partition_change, reassignment
from kfk.errors import ErrorCode
from kfk.metadata.image import NO_LEADER, MetadataImage, PartitionRegistration
from kfk.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from kfk.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from kfk.protocol.metadata_records import schema_class

TopicRecord = schema_class("TopicRecord")
PartitionRecord = schema_class("PartitionRecord")
RegisterBrokerRecord = schema_class("RegisterBrokerRecord")


def registration(replicas, isr=None, leader=None, leader_epoch=0, adding=(), removing=()) -> PartitionRegistration:
    replicas = tuple(replicas)
    return PartitionRegistration(replicas=replicas, isr=tuple(replicas if isr is None else isr),
                                 leader=replicas[0] if leader is None else leader, leader_epoch=leader_epoch,
                                 partition_epoch=0, adding_replicas=tuple(adding), removing_replicas=tuple(removing))


def image_with(*partitions: PartitionRegistration, name: str = "t") -> tuple[MetadataImage, uuid.UUID]:
    topic_id = uuid.uuid4()
    records = [RegisterBrokerRecord(broker_id=broker_id, incarnation_id=uuid.uuid4(), broker_epoch=1, fenced=False)
               for broker_id in (1, 2, 3)]
    records.append(TopicRecord(name=name, topic_id=topic_id))
    for index, partition in enumerate(partitions):
        records.append(PartitionRecord(partition_id=index, topic_id=topic_id, replicas=list(partition.replicas),
                                       isr=list(partition.isr), leader=partition.leader,
                                       leader_epoch=partition.leader_epoch, partition_epoch=0,
                                       adding_replicas=list(partition.adding_replicas),
                                       removing_replicas=list(partition.removing_replicas)))
    return MetadataImage().apply(records, 1), topic_id


def applied(image: MetadataImage, records) -> MetadataImage:
    return image.apply(records, image.offset + 1)


def test_a_dead_leader_is_replaced_by_the_first_live_in_sync_replica() -> None:
    change = partition_change.elect_after_broker_changes(registration([1, 2, 3], isr=[1, 3, 2]), {2, 3}, False)
    assert change.leader == 2 and change.isr == (3, 2)


def test_a_dead_follower_leaves_the_isr_and_the_leader_stays() -> None:
    change = partition_change.elect_after_broker_changes(registration([1, 2, 3]), {1, 3}, False)
    assert change.leader is None and change.isr == (1, 3)
    assert partition_change.elect_after_broker_changes(registration([1, 2, 3]), {1, 2, 3}, False) is None


def test_without_a_live_in_sync_replica_the_partition_goes_offline_and_keeps_its_isr() -> None:
    change = partition_change.elect_after_broker_changes(registration([1, 2, 3], isr=[1]), {2, 3}, False)
    assert change.leader == NO_LEADER and change.isr is None  # ISR [1] kept: never empty
    # The in-sync replica returns: it leads again.
    offline = registration([1, 2, 3], isr=[1], leader=NO_LEADER)
    change = partition_change.elect_after_broker_changes(offline, {1, 2, 3}, False)
    assert change.leader == 1 and change.isr is None


def test_unclean_election_takes_an_out_of_sync_replica_only_when_allowed(caplog) -> None:
    change = partition_change.elect_after_broker_changes(registration([1, 2, 3], isr=[1]), {3}, True, "t-0")
    assert change.leader == 3 and change.isr == (3,)
    assert "may be lost" in caplog.text
    error, change = partition_change.elect_unclean_leader(registration([1, 2, 3], isr=[1], leader=NO_LEADER), {2})
    assert error == ErrorCode.NONE and change.leader == 2
    error, _ = partition_change.elect_unclean_leader(registration([1, 2, 3]), {1, 2})
    assert error == ErrorCode.ELECTION_NOT_NEEDED


def test_handle_broker_changes_records_apply_to_a_new_leader_epoch() -> None:
    image, _ = image_with(registration([1, 2]), registration([2, 1]), registration([3, 1], isr=[3]))
    records = partition_change.handle_broker_changes(image, {2, 3}, lambda topic: False)
    after = applied(image, records)
    partitions = after.topic("t").partitions
    assert (partitions[0].leader, partitions[0].isr, partitions[0].leader_epoch) == (2, (2,), 1)
    assert (partitions[1].leader, partitions[1].isr, partitions[1].leader_epoch) == (2, (2,), 0)
    assert partitions[2] == image.topic("t").partitions[2]
    assert partition_change.handle_broker_changes(after, {2, 3}, lambda topic: False) == []


def test_preferred_election() -> None:
    assert partition_change.elect_preferred_leader(registration([1, 2]), {1, 2})[0] == ErrorCode.ELECTION_NOT_NEEDED
    error, change = partition_change.elect_preferred_leader(registration([1, 2], leader=2), {1, 2})
    assert error == ErrorCode.NONE and change.leader == 1
    assert partition_change.elect_preferred_leader(registration([1, 2], isr=[2], leader=2), {1, 2})[0] == \
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
    assert partition_change.elect_preferred_leader(registration([1, 2], leader=2), {2})[0] == \
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


def test_imbalance_above_the_percentage_moves_leaders_back() -> None:
    image, _ = image_with(registration([1, 2], leader=2), registration([1, 2]), registration([2, 1]))
    assert partition_change.imbalanced_partitions(image, {1, 2}, 10) == [("t", 0)]
    assert partition_change.imbalanced_partitions(image, {1, 2}, 50) == []
    assert partition_change.imbalanced_partitions(image, {2}, 10) == []


def test_controlled_shutdown_moves_leadership_and_leaves_the_isr() -> None:
    image, _ = image_with(registration([1, 2, 3]), registration([2, 1, 3]), registration([1], isr=[1]))
    records, remaining = partition_change.controlled_shutdown(image, 1, {1, 2, 3})
    assert remaining == [("t", 2)]
    partitions = applied(image, records).topic("t").partitions
    assert (partitions[0].leader, partitions[0].isr) == (2, (2, 3))
    assert (partitions[1].leader, partitions[1].isr) == (2, (2, 3))


def test_a_reassignment_adds_then_completes_and_moves_the_leader() -> None:
    image, topic_id = image_with(registration([1, 2]))
    request = AlterPartitionReassignmentsRequest(topics=[AlterPartitionReassignmentsRequest.ReassignableTopic(
        name="t", partitions=[AlterPartitionReassignmentsRequest.ReassignablePartition(partition_index=0,
                                                                                        replicas=[2, 3])])])
    result = reassignment.alter_partition_reassignments(image, request, {1, 2, 3})
    assert result.response.responses[0].partitions[0].error_code == ErrorCode.NONE
    started = applied(image, result.records)
    partition = started.topic("t").partitions[0]
    assert (partition.replicas, partition.adding_replicas, partition.removing_replicas) == ((2, 3, 1), (3,), (1,))
    listed = reassignment.list_partition_reassignments(started, ListPartitionReassignmentsRequest(topics=None))
    assert listed.topics[0].partitions[0].adding_replicas == [3]
    assert reassignment.reassignment_progress(started, {1, 2, 3}) == []  # 3 has not caught up
    caught_up = applied(started, [partition_change.PartitionChange(isr=(1, 2, 3)).record(topic_id, 0)])
    done = applied(caught_up, reassignment.reassignment_progress(caught_up, {1, 2, 3})).topic("t").partitions[0]
    assert (done.replicas, done.isr, done.leader, done.adding_replicas, done.removing_replicas) == \
        ((2, 3), (2, 3), 2, (), ())
    assert done.leader_epoch == 1


def test_a_reassignment_can_be_cancelled_and_bad_targets_are_refused() -> None:
    image, _ = image_with(registration([2, 3, 1], isr=[1, 2], leader=1, adding=[3], removing=[1]))
    Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
    Partition = AlterPartitionReassignmentsRequest.ReassignablePartition
    cancel = AlterPartitionReassignmentsRequest(topics=[Topic(name="t", partitions=[Partition(partition_index=0,
                                                                                              replicas=None)])])
    result = reassignment.alter_partition_reassignments(image, cancel, {1, 2, 3})
    partition = applied(image, result.records).topic("t").partitions[0]
    assert (partition.replicas, partition.isr, partition.leader, partition.adding_replicas) == ((2, 1), (1, 2), 1, ())
    for replicas, error in (([], ErrorCode.INVALID_REPLICA_ASSIGNMENT), ([2, 2], ErrorCode.INVALID_REPLICA_ASSIGNMENT),
                            ([2, 9], ErrorCode.INVALID_REPLICA_ASSIGNMENT)):
        request = AlterPartitionReassignmentsRequest(topics=[Topic(name="t", partitions=[
            Partition(partition_index=0, replicas=replicas)])])
        result = reassignment.alter_partition_reassignments(image, request, {1, 2, 3})
        assert result.response.responses[0].partitions[0].error_code == error and not result.records
    missing = AlterPartitionReassignmentsRequest(topics=[Topic(name="nope", partitions=[
        Partition(partition_index=0, replicas=[1])])])
    result = reassignment.alter_partition_reassignments(image, missing, {1})
    assert result.response.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_generate_proposes_kafkas_placement_on_the_given_brokers() -> None:
    import random

    proposal = reassignment.propose_assignment({"t": {0: [1, 2], 1: [2, 1], 2: [1, 2]}}, [2, 3], random.Random(1))
    assert sorted(proposal["t"]) == [0, 1, 2]
    assert all(sorted(replicas) == [2, 3] for replicas in proposal["t"].values())


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def partition_states(draw):
    replicas = draw(st.lists(st.integers(1, 6), min_size=1, max_size=5, unique=True))
    isr = draw(st.lists(st.sampled_from(replicas), min_size=1, max_size=len(replicas), unique=True))
    leader = draw(st.sampled_from([*isr, NO_LEADER]))
    live = draw(st.sets(st.integers(1, 6)))
    return registration(replicas, isr=isr, leader=leader), live


@settings(max_examples=500, deadline=None)
@given(partition_states(), st.booleans())
def test_elections_keep_kafkas_invariants(state, unclean) -> None:
    before, live = state
    change = partition_change.elect_after_broker_changes(before, live, unclean)
    leader = before.leader if change is None or change.leader is None else change.leader
    isr = before.isr if change is None or change.isr is None else change.isr
    assert isr and set(isr) <= set(before.replicas)  # never empty, never outside the replicas
    if leader != NO_LEADER:
        assert leader in live and leader in isr
        if leader not in before.isr:  # an out-of-sync leader: only by an unclean election
            assert unclean and isr == (leader,) and not set(before.isr) & set(live)
    else:
        assert not set(before.isr) & set(live) and (not unclean or not set(before.replicas) & set(live))
    if set(before.isr) & set(live):
        assert set(isr) == set(before.isr) & set(live)  # only the dead leave, and all of them
    assert partition_change.elect_after_broker_changes(
        registration(before.replicas, isr=isr, leader=leader), live, unclean) is None  # a fixed point
