"""Replica placement (Kafka's AdminUtils): Kafka's own expected layouts, and properties over random clusters."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfk.controller.placement import BrokerPlacement, assign_replicas_to_brokers, rack_alternated_brokers
from kfk.errors import InvalidPartitionsError, InvalidReplicationFactorError


def brokers(*ids: int, racks: dict[int, str] | None = None) -> list[BrokerPlacement]:
    return [BrokerPlacement(i, (racks or {}).get(i)) for i in ids]


def test_kafkas_rack_unaware_example() -> None:
    # AdminUtilsTest.testReplicaAssignment: five brokers, ten partitions, three replicas, start index 0
    assignment = assign_replicas_to_brokers(brokers(0, 1, 2, 3, 4), 10, 3, random.Random(), fixed_start_index=0)
    assert assignment == {
        0: [0, 1, 2], 1: [1, 2, 3], 2: [2, 3, 4], 3: [3, 4, 0], 4: [4, 0, 1],
        5: [0, 2, 3], 6: [1, 3, 4], 7: [2, 4, 0], 8: [3, 0, 1], 9: [4, 1, 2],
    }


def test_brokers_are_taken_in_id_order_whatever_order_they_come_in() -> None:
    shuffled = assign_replicas_to_brokers(brokers(4, 2, 0, 3, 1), 10, 3, random.Random(), fixed_start_index=0)
    assert shuffled == assign_replicas_to_brokers(brokers(0, 1, 2, 3, 4), 10, 3, random.Random(), fixed_start_index=0)


def test_kafkas_rack_alternated_broker_list() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated_brokers(racks) == [0, 3, 1, 5, 4, 2]


def test_continuing_a_topic_starts_where_asked() -> None:
    assignment = assign_replicas_to_brokers(brokers(0, 1, 2), 2, 2, random.Random(), fixed_start_index=1,
                                            start_partition_id=3)
    assert sorted(assignment) == [3, 4]
    assert assignment[3][0] == 1  # (3 + 1) mod 3


@pytest.mark.parametrize(
    ("partitions", "replication_factor", "error", "message"),
    [
        (0, 1, InvalidPartitionsError, "Number of partitions must be larger than 0."),
        (1, 0, InvalidReplicationFactorError, "Replication factor must be larger than 0."),
        (1, 4, InvalidReplicationFactorError,
         "The target replication factor of 4 cannot be reached because only 3 broker(s) are registered."),
    ],
)
def test_impossible_layouts(partitions: int, replication_factor: int, error: type, message: str) -> None:
    with pytest.raises(error) as raised:
        assign_replicas_to_brokers(brokers(1, 2, 3), partitions, replication_factor, random.Random())
    assert str(raised.value) == message


clusters = st.lists(st.integers(0, 1000), min_size=1, max_size=9, unique=True)


@given(clusters, st.integers(1, 40), st.data(), st.integers(0, 2**32))
def test_replicas_of_a_partition_are_distinct_and_leaders_are_spread(ids, partitions, data, seed) -> None:
    replication_factor = data.draw(st.integers(1, len(ids)))
    assignment = assign_replicas_to_brokers(brokers(*ids), partitions, replication_factor, random.Random(seed))
    assert sorted(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == replication_factor == len(set(replicas))
        assert set(replicas) <= set(ids)
    leaders = Counter(replicas[0] for replicas in assignment.values())
    assert max(leaders.values()) - min(leaders.get(i, 0) for i in ids) <= 1


@given(clusters, st.integers(1, 4), st.data(), st.integers(0, 2**32))
def test_whole_rounds_give_every_broker_the_same_number_of_replicas(ids, rounds, data, seed) -> None:
    replication_factor = data.draw(st.integers(1, len(ids)))
    assignment = assign_replicas_to_brokers(brokers(*ids), rounds * len(ids), replication_factor, random.Random(seed))
    counts = Counter(broker for replicas in assignment.values() for broker in replicas)
    assert set(counts.values()) == {rounds * replication_factor}


@given(st.integers(2, 4), st.integers(1, 3), st.integers(1, 30), st.data(), st.integers(0, 2**32))
def test_with_racks_replicas_spread_over_racks_first(rack_count, per_rack, partitions, data, seed) -> None:
    ids = list(range(rack_count * per_rack))
    racks = {i: f"rack{i % rack_count}" for i in ids}
    replication_factor = data.draw(st.integers(1, len(ids)))
    assignment = assign_replicas_to_brokers(brokers(*ids, racks=racks), partitions, replication_factor,
                                            random.Random(seed))
    for replicas in assignment.values():
        assert len(set(replicas)) == replication_factor
        used = [racks[b] for b in replicas]
        assert len(set(used)) == min(replication_factor, rack_count)


def test_brokers_without_a_rack_count_as_one_rack_when_others_have_racks() -> None:
    assignment = assign_replicas_to_brokers(brokers(1, 2, 3, racks={1: "a", 2: "b"}), 6, 3, random.Random(1))
    for replicas in assignment.values():
        assert sorted(replicas) == [1, 2, 3]
