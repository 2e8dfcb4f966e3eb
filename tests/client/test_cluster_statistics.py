"""CMAK's statistics as pure functions: the user's notes' worked examples, and the edge cases (a stopped broker, a
partition without leader, an empty cluster) computed by hand."""

from __future__ import annotations

import uuid

from kfk.client.cluster import BrokerMetadata
from kfk.client.cluster_statistics import cluster_statistics, group_lag, percent, topic_statistics
from kfk.client.structs import ClusterDescription, PartitionInfo, TopicDescription
from kfk.common.structs import OffsetAndMetadata, TopicPartition


def _topic(name: str, partitions: list[tuple[int, list[int], list[int]]], internal: bool = False
           ) -> TopicDescription:
    """partitions: (leader, replicas, isr) per partition id 0, 1, ..."""
    return TopicDescription(name, uuid.uuid4(), internal, [
        PartitionInfo(index, leader, 0, tuple(replicas), tuple(isr), ())
        for index, (leader, replicas, isr) in enumerate(partitions)])


def _cluster(*broker_ids: int, controller: int = 1) -> ClusterDescription:
    return ClusterDescription("cid", controller, [BrokerMetadata(b, "127.0.0.1", 9000 + b) for b in broker_ids])


def test_percent_rounds_down_as_cmak_does() -> None:
    assert percent(2, 3) == 66
    assert percent(1, 3) == 33
    assert percent(3, 3) == 100
    assert percent(0, 0) == 0


def test_notes_topic_example_three_brokers_topic_on_two_gives_spread_66() -> None:
    """The notes' topic summary: 3 brokers in the cluster, the topic on 2 of them, every partition led by its
    preferred replica and in sync: Spread 66 %, Preferred 100 %, nothing skewed or under-replicated."""
    topic = _topic("t", [(1, [1, 2], [1, 2]), (2, [2, 1], [2, 1]), (1, [1, 2], [1, 2])])
    stats = topic_statistics(topic, [1, 2, 3], {TopicPartition("t", 0): 5, TopicPartition("t", 1): 7})
    assert stats.replication == 2
    assert stats.partition_count == 3
    assert stats.sum_of_partition_offsets == 12
    assert stats.total_brokers == 3
    assert stats.brokers_for_topic == 2
    assert stats.brokers_spread_percent == 66
    assert stats.preferred_replicas_percent == 100
    # 6 replicas on 2 brokers: fair share ceil(6/2) = 3 each, and each holds 3.
    assert stats.brokers_skewed_percent == 0
    # 3 leaders on 2 brokers: fair share ceil(3/2) = 2; broker 1 leads 2, broker 2 leads 1.
    assert stats.brokers_leader_skewed_percent == 0
    assert stats.under_replicated_percent == 0


def test_notes_broker_table_example() -> None:
    """The notes' broker table: 3 brokers each holding partitions (0,1,2); broker 0 leads one, broker 1 two, broker 2
    none: only broker 1 is leader-skewed (2 > ceil(3/3)), no broker is skewed (3 = ceil(9/3))."""
    topic = _topic("t", [(0, [0, 1, 2], [0, 1, 2]), (1, [1, 2, 0], [1, 2, 0]), (1, [2, 0, 1], [2, 0, 1])])
    stats = topic_statistics(topic, [0, 1, 2], {})
    rows = {b.broker_id: (b.partition_count, b.leader_count, b.partitions, b.skewed, b.leader_skewed)
            for b in stats.brokers}
    assert rows == {0: (3, 1, (0, 1, 2), False, False),
                    1: (3, 2, (0, 1, 2), False, True),
                    2: (3, 0, (0, 1, 2), False, False)}
    assert stats.brokers_leader_skewed_percent == 33
    assert stats.brokers_skewed_percent == 0
    assert stats.preferred_replicas_percent == 66  # partition 2 is led by broker 1, its preferred replica is 2
    assert stats.brokers_spread_percent == 100


def test_skew_under_replication_and_offline_partitions() -> None:
    """4 partitions x 2 replicas on brokers 1, 2, 3 with broker 3 stopped (not registered): 8 replicas on 3 brokers,
    fair share ceil(8/3) = 3; broker 1 holds 4 (skewed). Partition 3 lives only on broker 3... and has no leader."""
    topic = _topic("t", [(1, [1, 2], [1, 2]), (1, [2, 1], [2, 1]), (1, [1, 3], [1]), (-1, [3, 1], [3])])
    stats = topic_statistics(topic, [1, 2], {TopicPartition("t", 0): 10, TopicPartition("t", 1): 20,
                                             TopicPartition("t", 2): 30})
    assert stats.total_brokers == 3  # the stopped broker still holds replicas
    assert stats.brokers_for_topic == 3
    assert stats.brokers_spread_percent == 100
    assert {b.broker_id: b.partition_count for b in stats.brokers} == {1: 4, 2: 2, 3: 2}
    assert [b.broker_id for b in stats.brokers if b.skewed] == [1]
    assert stats.brokers_skewed_percent == 33
    # 4 partitions on 3 brokers: fair share ceil(4/3) = 2 leaders; broker 1 leads 3.
    assert [b.broker_id for b in stats.brokers if b.leader_skewed] == [1]
    assert stats.brokers_leader_skewed_percent == 33
    assert stats.preferred_replicas_percent == 50  # partitions 0 and 2
    assert stats.under_replicated_partitions == (2, 3)
    assert stats.under_replicated_percent == 50
    assert stats.offline_partitions == (3,)
    assert stats.sum_of_partition_offsets == 60


def test_cluster_totals_brokers_and_group_lag() -> None:
    a = _topic("a", [(1, [1, 2], [1, 2]), (2, [2, 3], [2])])
    b = _topic("b", [(-1, [3], [3])])
    ends = {TopicPartition("a", 0): 100, TopicPartition("a", 1): 50}
    lag = group_lag("g", "Stable", {TopicPartition("a", 0): OffsetAndMetadata(90),
                                    TopicPartition("a", 1): OffsetAndMetadata(50),
                                    TopicPartition("b", 0): OffsetAndMetadata(3)}, ends)
    assert (lag.partition_count, lag.total_lag) == (3, 10)  # b-0 has no end offset: not counted
    stats = cluster_statistics(_cluster(1, 2, controller=2), [b, a], ends, [lag])
    assert [t.topic for t in stats.topics] == ["a", "b"]
    assert stats.controller_id == 2
    assert stats.under_replicated_partitions == 1
    assert stats.offline_partitions == 1
    assert [(s.broker_id, s.online, s.partition_count, s.leader_count) for s in stats.brokers] == [
        (1, True, 1, 1), (2, True, 2, 1), (3, False, 2, 0)]
    assert stats.groups == (lag,)


def test_empty_topic_and_cluster() -> None:
    stats = cluster_statistics(_cluster(1), [], {})
    assert stats.topics == () and stats.under_replicated_partitions == 0
    assert [(s.broker_id, s.partition_count) for s in stats.brokers] == [(1, 0)]
