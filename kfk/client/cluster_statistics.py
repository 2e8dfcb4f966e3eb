"""A cluster's health at a glance: Kafka Manager's (CMAK's) topic and broker statistics, the under-replicated and
offline partitions, the controller, and every consumer group's and share group's total lag.

The statistics are pure functions of what any Kafka cluster answers (Metadata, ListOffsets, ListGroups,
DescribeGroups, OffsetFetch), so `kfk cluster describe` and a web console compute them the same way against kfk or
Apache Kafka; ``describe_cluster_statistics`` is the one function that asks the cluster.

CMAK's definitions, per topic (percentages are rounded down, as CMAK's integer arithmetic does: 2 of 3 brokers is
66 %):
- replication: the replicas per partition (the largest, should partitions differ);
- sum of partition offsets: the partitions' end offsets (high watermarks) added up, partitions without a leader left
  out (nobody can answer for them);
- total brokers: the brokers of the cluster, those registered plus any a replica assignment names (a stopped broker
  still holds its replicas, and leaving it out would put a topic's spread above 100 %);
- brokers for topic: the brokers holding at least one replica of the topic;
- Preferred Replicas %: partitions led by their preferred replica (the first of the assignment);
- Brokers Skewed %: brokers for topic holding more than ceil(replicas / brokers for topic) replicas of it;
- Brokers Leader Skewed %: brokers for topic leading more than ceil(partitions / brokers for topic) of its partitions;
- Brokers Spread %: brokers for topic out of total brokers;
- Under-replicated %: partitions whose ISR is smaller than their replica set.
A partition is offline when it has no leader. A group's lag on a partition is the end offset minus its committed
offset; the total adds them up over the partitions whose end offset is known.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kfk.client.admin import Admin
from kfk.client.structs import SHARE_PROTOCOL_TYPE, ClusterDescription, TopicDescription
from kfk.common.constants import NO_NODE
from kfk.common.structs import OffsetAndMetadata, TopicPartition

__all__ = [
    "BrokerTopicStatistics",
    "TopicStatistics",
    "BrokerStatistics",
    "GroupLag",
    "ClusterStatistics",
    "percent",
    "topic_statistics",
    "group_lag",
    "share_group_lag",
    "cluster_statistics",
    "describe_cluster_statistics",
]


def percent(part: int, whole: int) -> int:
    """CMAK's percentage: 100 * part / whole rounded down, 0 of nothing."""
    return 100 * part // whole if whole else 0


@dataclass(frozen=True)
class BrokerTopicStatistics:
    """One broker's share of one topic (a row of CMAK's per-topic broker table)."""

    broker_id: int
    partitions: tuple[int, ...]
    leader_partitions: tuple[int, ...]
    skewed: bool
    leader_skewed: bool

    @property
    def partition_count(self) -> int:
        return len(self.partitions)

    @property
    def leader_count(self) -> int:
        return len(self.leader_partitions)


@dataclass(frozen=True)
class TopicStatistics:
    topic: str
    is_internal: bool
    replication: int
    partition_count: int
    sum_of_partition_offsets: int
    total_brokers: int
    brokers_for_topic: int
    preferred_replicas_percent: int
    brokers_skewed_percent: int
    brokers_leader_skewed_percent: int
    brokers_spread_percent: int
    under_replicated_percent: int
    under_replicated_partitions: tuple[int, ...]
    offline_partitions: tuple[int, ...]
    brokers: tuple[BrokerTopicStatistics, ...]


@dataclass(frozen=True)
class BrokerStatistics:
    """One broker across every topic: replicas and leaderships it holds, and whether it is registered (online)."""

    broker_id: int
    online: bool
    partition_count: int
    leader_count: int
    skewed_topics: tuple[str, ...]
    leader_skewed_topics: tuple[str, ...]


@dataclass(frozen=True)
class GroupLag:
    group_id: str
    state: str
    #: The partitions the group committed offsets for (those its lag is over).
    partition_count: int
    total_lag: int
    #: The partitions assigned to its members now (0 for a group without members).
    assigned_partition_count: int = 0


@dataclass(frozen=True)
class ClusterStatistics:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerStatistics, ...]
    topics: tuple[TopicStatistics, ...]
    under_replicated_partitions: int
    offline_partitions: int
    groups: tuple[GroupLag, ...]
    #: Share groups (KIP-932): partition_count counts the partitions they have share state for, total_lag sums
    #: the lag DescribeShareGroupOffsets reports (records not yet acknowledged).
    share_groups: tuple[GroupLag, ...] = ()


def topic_statistics(topic: TopicDescription, cluster_brokers: Iterable[int],
                     end_offsets: Mapping[TopicPartition, int]) -> TopicStatistics:
    """CMAK's statistics of one topic. ``cluster_brokers``: the registered brokers (those the assignment names are
    added); ``end_offsets``: the partitions' end offsets (partitions missing from it count for nothing)."""
    partitions = topic.partitions
    replicas_of: dict[int, list[int]] = {}
    leaders_of: dict[int, list[int]] = {}
    for partition in partitions:
        for broker_id in partition.replicas:
            replicas_of.setdefault(broker_id, []).append(partition.partition)
        if partition.leader != NO_NODE:
            leaders_of.setdefault(partition.leader, []).append(partition.partition)
    brokers_for_topic = len(replicas_of)
    total_brokers = len(set(cluster_brokers) | replicas_of.keys())
    replica_count = sum(len(partition.replicas) for partition in partitions)
    fair_replicas = math.ceil(replica_count / brokers_for_topic) if brokers_for_topic else 0
    fair_leaders = math.ceil(len(partitions) / brokers_for_topic) if brokers_for_topic else 0
    brokers = tuple(
        BrokerTopicStatistics(broker_id, tuple(sorted(held)), tuple(sorted(leaders_of.get(broker_id, ()))),
                              skewed=len(held) > fair_replicas,
                              leader_skewed=len(leaders_of.get(broker_id, ())) > fair_leaders)
        for broker_id, held in sorted(replicas_of.items()))
    preferred = sum(1 for p in partitions if p.leader != NO_NODE and p.replicas and p.leader == p.replicas[0])
    under_replicated = tuple(p.partition for p in partitions if p.under_replicated)
    return TopicStatistics(
        topic=topic.name,
        is_internal=topic.is_internal,
        replication=max((len(p.replicas) for p in partitions), default=0),
        partition_count=len(partitions),
        sum_of_partition_offsets=sum(end_offsets.get(TopicPartition(topic.name, p.partition), 0)
                                     for p in partitions),
        total_brokers=total_brokers,
        brokers_for_topic=brokers_for_topic,
        preferred_replicas_percent=percent(preferred, len(partitions)),
        brokers_skewed_percent=percent(sum(b.skewed for b in brokers), brokers_for_topic),
        brokers_leader_skewed_percent=percent(sum(b.leader_skewed for b in brokers), brokers_for_topic),
        brokers_spread_percent=percent(brokers_for_topic, total_brokers),
        under_replicated_percent=percent(len(under_replicated), len(partitions)),
        under_replicated_partitions=under_replicated,
        offline_partitions=tuple(p.partition for p in partitions if p.leader == NO_NODE),
        brokers=brokers,
    )


def group_lag(group_id: str, state: str, committed: Mapping[TopicPartition, OffsetAndMetadata],
              end_offsets: Mapping[TopicPartition, int], assigned_partition_count: int = 0) -> GroupLag:
    """A group's total lag over the partitions it committed offsets for (those with a known end offset)."""
    lag = sum(max(end_offsets[tp] - offset.offset, 0) for tp, offset in committed.items() if tp in end_offsets)
    return GroupLag(group_id, state, len(committed), lag, assigned_partition_count)


def share_group_lag(group_id: str, state: str, offsets: Mapping[TopicPartition, tuple[int, int, int]],
                    assigned_partition_count: int = 0) -> GroupLag:
    """A share group's lag over the partitions it has share state for (`offsets`: Admin.list_share_group_offsets'
    start offset, leader epoch and lag, -1 where unknown)."""
    known = [lag for start, _, lag in offsets.values() if start >= 0]
    return GroupLag(group_id, state, len(known), sum(lag for lag in known if lag > 0), assigned_partition_count)


def cluster_statistics(cluster: ClusterDescription, topics: Iterable[TopicDescription],
                       end_offsets: Mapping[TopicPartition, int], groups: Iterable[GroupLag] = (),
                       share_groups: Iterable[GroupLag] = ()) -> ClusterStatistics:
    """Every topic's statistics, every broker's totals over them, the cluster's under-replicated and offline
    partition counts, and the groups' lags."""
    registered = {broker.node_id for broker in cluster.brokers}
    per_topic = tuple(topic_statistics(topic, registered, end_offsets)
                      for topic in sorted(topics, key=lambda t: t.name))
    shares: dict[int, list[tuple[str, BrokerTopicStatistics]]] = {broker_id: [] for broker_id in registered}
    for stats in per_topic:
        for share in stats.brokers:
            shares.setdefault(share.broker_id, []).append((stats.topic, share))
    brokers = tuple(
        BrokerStatistics(broker_id, broker_id in registered,
                         partition_count=sum(share.partition_count for _, share in held),
                         leader_count=sum(share.leader_count for _, share in held),
                         skewed_topics=tuple(topic for topic, share in held if share.skewed),
                         leader_skewed_topics=tuple(topic for topic, share in held if share.leader_skewed))
        for broker_id, held in sorted(shares.items()))
    return ClusterStatistics(
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        brokers=brokers,
        topics=per_topic,
        under_replicated_partitions=sum(len(t.under_replicated_partitions) for t in per_topic),
        offline_partitions=sum(len(t.offline_partitions) for t in per_topic),
        groups=tuple(sorted(groups, key=lambda g: g.group_id)),
        share_groups=tuple(sorted(share_groups, key=lambda g: g.group_id)),
    )


def describe_cluster_statistics(admin: Admin, include_internal: bool = True, timeout_ms: float | None = None
                                ) -> ClusterStatistics:
    """Ask the cluster through ``admin`` (a kfk.client.Admin) and compute the statistics: Metadata for the brokers,
    controller and partitions, ListOffsets (latest) to the leaders of the partitions that have one, ListGroups (the
    consumer groups and their states), DescribeGroups (their members' assignments) and OffsetFetch (their committed
    offsets)."""
    cluster = admin.describe_cluster(timeout_ms=timeout_ms)
    topics = admin.describe_topics(include_internal=include_internal, timeout_ms=timeout_ms)
    registered = {broker.node_id for broker in cluster.brokers}
    led = [TopicPartition(topic.name, p.partition) for topic in topics.values() for p in topic.partitions
           if p.leader in registered]
    end_offsets = admin.end_offsets(led, timeout_ms=timeout_ms) if led else {}
    every_group = admin.list_consumer_groups(timeout_ms=timeout_ms)
    listings = [listing for listing in every_group if listing.protocol_type in ("consumer", "")]
    described = admin.describe_consumer_groups([listing.group_id for listing in listings], timeout_ms=timeout_ms) \
        if listings else {}
    groups = [group_lag(listing.group_id, listing.state,
                        admin.list_consumer_group_offsets(listing.group_id, timeout_ms=timeout_ms), end_offsets,
                        sum(len(member.assignment) for member in described[listing.group_id].members)
                        if listing.group_id in described else 0)
              for listing in listings]
    share_listings = [listing for listing in every_group if listing.protocol_type == SHARE_PROTOCOL_TYPE]
    shared = admin.describe_share_groups([listing.group_id for listing in share_listings], timeout_ms=timeout_ms) \
        if share_listings else {}
    share_groups = [share_group_lag(listing.group_id, listing.state,
                                    admin.list_share_group_offsets(listing.group_id, timeout_ms=timeout_ms),
                                    len({tp for member in shared[listing.group_id].members
                                         for tp in member.assignment}) if listing.group_id in shared else 0)
                    for listing in share_listings]
    return cluster_statistics(cluster, topics.values(), end_offsets, groups, share_groups)
