"""Admin against a real kfk broker: topics, partitions, configs, cluster, records deletion, groups and offsets."""

from __future__ import annotations

import time

import pytest

from kfk.client import (
    Admin,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigResourceType,
    Consumer,
    ElectionType,
    NewPartitionReassignment,
    NewTopic,
    OffsetAndMetadata,
    Producer,
    TopicPartition,
)
from kfk.common.config_types import ConfigSource
from kfk.errors import (
    ElectionNotNeededError,
    InvalidConfigurationError,
    InvalidPartitionsError,
    InvalidReplicaAssignmentError,
    NetworkError,
    NoReassignmentInProgressError,
    TopicExistsError,
    UnknownTopicOrPartitionError,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def admin(bootstrap: str):
    with Admin({"bootstrap.servers": bootstrap, "default.api.timeout.ms": 10_000}) as client:
        yield client


def test_create_describe_and_delete_topics(admin: Admin, topic_name: str) -> None:
    results = admin.create_topics([NewTopic(topic_name, 3, 1), NewTopic(topic_name + "-bad", 1, 1, {"nope": "1"})])
    assert results[topic_name] is None
    assert isinstance(results[topic_name + "-bad"], InvalidConfigurationError)
    assert isinstance(admin.create_topics([NewTopic(topic_name, 3, 1)])[topic_name], TopicExistsError)
    assert topic_name in admin.list_topics()
    description = admin.describe_topics([topic_name])[topic_name]
    assert [p.partition for p in description.partitions] == [0, 1, 2]
    assert all(p.leader == 1 and p.replicas == (1,) and not p.under_replicated for p in description.partitions)
    assert admin.delete_topics([topic_name]) == {topic_name: None}
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.describe_topics([topic_name])


def test_validate_only_creates_nothing(admin: Admin, topic_name: str) -> None:
    assert admin.create_topics([NewTopic(topic_name, 2, 1)], validate_only=True) == {topic_name: None}
    assert topic_name not in admin.list_topics()


def test_create_partitions_grows_a_topic(admin: Admin, topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 1, 1)])
    assert admin.create_partitions({topic_name: 4}) == {topic_name: None}
    assert len(admin.describe_topics([topic_name])[topic_name].partitions) == 4
    assert isinstance(admin.create_partitions({topic_name: 2})[topic_name], InvalidPartitionsError)


def test_configs_describe_and_incremental_alter(admin: Admin, topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 1, 1, {"retention.ms": "1000"})])
    resource = ConfigResource(ConfigResourceType.TOPIC, topic_name)
    configs = admin.describe_configs([resource])[resource]
    assert configs["retention.ms"].value == "1000" and configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert configs["cleanup.policy"].is_default
    changes = {resource: [AlterConfigOp("retention.ms", None, AlterConfigOpType.DELETE),
                          AlterConfigOp("cleanup.policy", "compact")]}
    assert admin.incremental_alter_configs(changes) == {resource: None}
    configs = admin.describe_configs([resource])[resource]
    assert configs["cleanup.policy"].value == "compact" and configs["retention.ms"].is_default
    bad = admin.incremental_alter_configs({resource: [AlterConfigOp("no.such.config", "1")]})
    assert isinstance(bad[resource], InvalidConfigurationError)
    broker = ConfigResource(ConfigResourceType.BROKER, "1")
    assert "num.partitions" in admin.describe_configs([broker])[broker]


def test_partition_reassignments_alter_list_and_cancel(admin: Admin, topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 2, 1)])
    stays, moves_nowhere = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    outcomes = admin.alter_partition_reassignments({stays: NewPartitionReassignment([1]),
                                                    moves_nowhere: NewPartitionReassignment([7])})
    assert outcomes[stays] is None
    assert isinstance(outcomes[moves_nowhere], InvalidReplicaAssignmentError)  # there is no broker 7
    # Onto the replicas it already has, the reassignment is complete at once: nothing stays in progress.
    assert admin.list_partition_reassignments([stays, moves_nowhere]) == {}
    assert admin.list_partition_reassignments() == {}
    cancelled = admin.alter_partition_reassignments({stays: None})
    assert isinstance(cancelled[stays], NoReassignmentInProgressError)
    assert admin.describe_topics([topic_name])[topic_name].partitions[0].replicas == (1,)


def test_elect_leaders_of_partitions_whose_preferred_replica_leads(admin: Admin, topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 2, 1)])
    partitions = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
    outcomes = admin.elect_leaders(ElectionType.PREFERRED, partitions)
    assert set(outcomes) == set(partitions)
    assert all(isinstance(error, ElectionNotNeededError) for error in outcomes.values())
    unknown = TopicPartition(topic_name + "-missing", 0)
    assert isinstance(admin.elect_leaders(ElectionType.PREFERRED, [unknown])[unknown],
                      UnknownTopicOrPartitionError)


def test_describe_cluster(admin: Admin, bootstrap: str) -> None:
    cluster = admin.describe_cluster()
    assert cluster.cluster_id and cluster.controller_id == 1
    assert [broker.address for broker in cluster.brokers] == [bootstrap]


def test_delete_records_moves_the_log_start_offset(admin: Admin, bootstrap: str, topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 1, 1)])
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for n in range(20):
            producer.send(topic_name, b"x")
    tp = TopicPartition(topic_name, 0)
    assert admin.delete_records({tp: 12}) == {tp: 12}
    assert admin.beginning_offsets([tp]) == {tp: 12} and admin.end_offsets([tp]) == {tp: 20}


def test_consumer_group_offsets_list_alter_describe_delete(admin: Admin, bootstrap: str, topic_name: str) -> None:
    admin.create_topics([NewTopic(topic_name, 2, 1)])
    group = f"g-{topic_name}"
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    with Consumer({"bootstrap.servers": bootstrap, "group.id": group, "heartbeat.interval.ms": 100}) as consumer:
        consumer.subscribe([topic_name])
        deadline = time.monotonic() + 10
        while len(consumer.assignment()) < 2 and time.monotonic() < deadline:
            consumer.poll(0.1)
        description = admin.describe_consumer_groups([group])[group]
        assert description.state == "Stable" and description.partition_assignor == "range"
        assert [sorted(member.assignment) for member in description.members] == [[tp0, tp1]]
        assert any(g.group_id == group for g in admin.list_consumer_groups())
    assert admin.describe_consumer_groups([group])[group].state == "Empty"
    assert admin.alter_consumer_group_offsets(group, {tp0: OffsetAndMetadata(5), tp1: OffsetAndMetadata(7)}) == \
        {tp0: None, tp1: None}
    assert {tp: offset.offset for tp, offset in admin.list_consumer_group_offsets(group).items()} == {tp0: 5, tp1: 7}
    assert admin.delete_consumer_groups([group]) == {group: None}
    assert admin.list_consumer_group_offsets(group) == {}


def test_an_unreachable_bootstrap_server_fails_at_once() -> None:
    with Admin({"bootstrap.servers": "127.0.0.1:1"}) as admin:
        start = time.monotonic()
        with pytest.raises(NetworkError, match="cannot connect to any bootstrap server"):
            admin.list_topics()
        assert time.monotonic() - start < 2
