"""CreateTopics, DeleteTopics and CreatePartitions through the QuorumController and a real embedded backend."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kfk.common.config_types import ConfigResourceType, ConfigSource
from kfk.errors import ErrorCode
from kfk.protocol.messages.create_partitions import CreatePartitionsRequest
from kfk.protocol.messages.create_topics import CreateTopicsRequest
from kfk.protocol.messages.delete_topics import DeleteTopicsRequest
from tests.controller.conftest import topic

ZERO_UUID = uuid.UUID(int=0)
DeleteTopicState = DeleteTopicsRequest.DeleteTopicState
CreatePartitionsTopic = CreatePartitionsRequest.CreatePartitionsTopic
CreatePartitionsAssignment = CreatePartitionsRequest.CreatePartitionsAssignment


# -- CreateTopics ----------------------------------------------------------------------------------------------------

def test_defaults_come_from_the_broker_config(make_cluster) -> None:
    cluster = make_cluster({"num.partitions": "3"})
    result = cluster.create(topic("orders", -1, -1))["orders"]
    assert result.error_code == ErrorCode.NONE and result.error_message is None
    assert (result.num_partitions, result.replication_factor) == (3, 1)
    created = cluster.image.topic("orders")
    assert created.topic_id == result.topic_id != ZERO_UUID
    for index, partition in created.partitions.items():
        assert (partition.replicas, partition.isr, partition.leader) == ((1,), (1,), 1)
        assert (partition.leader_epoch, partition.partition_epoch) == (0, 0)
    assert cluster.controller.image.topic("orders") == created  # the controller applied the same records


def test_replicas_go_to_distinct_live_brokers(make_cluster) -> None:
    cluster = make_cluster(brokers=4)
    cluster.register(5, unfence=False)  # fenced: never chosen
    cluster.create(topic("t", 8, 3))
    for partition in cluster.image.topic("t").partitions.values():
        assert len(set(partition.replicas)) == 3 and 5 not in partition.replicas
        assert partition.isr == partition.replicas and partition.leader == partition.replicas[0]


def test_a_replication_factor_above_the_live_brokers_is_refused(make_cluster) -> None:
    cluster = make_cluster(brokers=2)
    cluster.register(3, unfence=False)
    result = cluster.create(topic("t", 1, 3))["t"]
    assert result.error_code == ErrorCode.INVALID_REPLICATION_FACTOR
    assert result.error_message == ("Unable to replicate the partition 3 time(s): The target replication factor of 3 "
                                    "cannot be reached because only 2 broker(s) are registered.")
    assert cluster.image.topic("t") is None


@pytest.mark.parametrize(
    ("partitions", "replication_factor", "code", "message"),
    [
        (0, 1, ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."),
        (-2, 1, ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value."),
        (1, 0, ErrorCode.INVALID_REPLICATION_FACTOR,
         "Replication factor must be larger than 0, or -1 to use the default value."),
    ],
)
def test_non_positive_sizes(cluster, partitions, replication_factor, code, message) -> None:
    result = cluster.create(topic("t", partitions, replication_factor))["t"]
    assert (result.error_code, result.error_message) == (code, message)


def test_manual_assignments(make_cluster) -> None:
    cluster = make_cluster(brokers=3)
    result = cluster.create(topic("m", -1, -1, assignments={0: [2, 3], 1: [3, 1]}))["m"]
    assert result.error_code == ErrorCode.NONE and (result.num_partitions, result.replication_factor) == (2, 2)
    partitions = cluster.image.topic("m").partitions
    assert partitions[0].replicas == (2, 3) and partitions[0].leader == 2
    assert partitions[1].replicas == (3, 1) and partitions[1].leader == 3


@pytest.mark.parametrize(
    ("partitions", "replication_factor", "assignments", "code", "message"),
    [
        (1, -1, {0: [1]}, ErrorCode.INVALID_REQUEST,
         "A manual partition assignment was specified, but numPartitions was not set to -1."),
        (-1, 1, {0: [1]}, ErrorCode.INVALID_REQUEST,
         "A manual partition assignment was specified, but replication factor was not set to -1."),
        (-1, -1, {0: [1], 2: [2]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         "partitions should be a consecutive 0-based integer sequence"),
        (-1, -1, {0: [1, 9]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes broker 9, but no such broker is registered."),
        (-1, -1, {0: [1, 1]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes the broker 1 more than once."),
        (-1, -1, {0: [1, 2], 1: [1]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent with "
         "previous partitions, which have 2 replica(s)."),
        (-1, -1, {0: []}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes an empty replica list."),
        (-1, -1, {0: [4]}, ErrorCode.INVALID_REPLICA_ASSIGNMENT,
         "All brokers specified in the manual partition assignment for partition 0 are fenced or in controlled "
         "shutdown."),
    ],
    ids=["partitions-set", "rf-set", "gap", "unknown-broker", "repeated-broker", "uneven", "empty", "fenced"],
)
def test_bad_manual_assignments(make_cluster, partitions, replication_factor, assignments, code, message) -> None:
    cluster = make_cluster(brokers=2)
    cluster.register(4, unfence=False)
    result = cluster.create(topic("m", partitions, replication_factor, assignments=assignments))["m"]
    assert (result.error_code, result.error_message) == (code, message)
    assert cluster.image.topic("m") is None


def test_names_existence_and_collisions(cluster) -> None:
    cluster.create(topic("a.b"))
    results = cluster.create(topic("a.b"), topic("a_b"), topic("bad/name"), topic("__cluster_metadata"),
                             topic("twice"), topic("twice"), topic("fine"))
    assert (results["a.b"].error_code, results["a.b"].error_message) == (
        ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'a.b' already exists.")
    assert (results["a_b"].error_code, results["a_b"].error_message) == (
        ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic 'a_b' collides with existing topic: a.b")
    assert results["bad/name"].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert results["__cluster_metadata"].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    assert (results["twice"].error_code, results["twice"].error_message) == (
        ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
    assert results["fine"].error_code == ErrorCode.NONE
    assert sorted(cluster.image.topics_by_name) == ["a.b", "fine"]


def test_configs_are_validated_recorded_and_answered(cluster) -> None:
    results = cluster.create(
        topic("good", configs={"retention.ms": "1000", "cleanup.policy": "compact,delete"}),
        topic("bad-value", configs={"retention.ms": "soon"}),
        topic("unknown-key", configs={"retention.weeks": "1"}),
        topic("null-value", configs={"retention.ms": None}),
        topic("conflict", configs={"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}),
    )
    assert results["bad-value"].error_code == ErrorCode.INVALID_CONFIG
    assert results["bad-value"].error_message == ("Invalid value soon for configuration retention.ms: Not a number "
                                                  "of type LONG")
    assert (results["unknown-key"].error_code, results["unknown-key"].error_message) == (
        ErrorCode.INVALID_CONFIG, "Unknown topic config name: retention.weeks")
    assert (results["null-value"].error_code, results["null-value"].error_message) == (
        ErrorCode.INVALID_CONFIG, "Null value not supported for topic configs: retention.ms")
    assert results["conflict"].error_code == ErrorCode.INVALID_CONFIG
    assert sorted(cluster.image.topics_by_name) == ["good"]
    assert dict(cluster.image.config(ConfigResourceType.TOPIC, "good")) == {
        "retention.ms": "1000", "cleanup.policy": "compact,delete"}
    configs = {entry.name: entry for entry in results["good"].configs}
    assert configs["retention.ms"].value == "1000"
    assert configs["retention.ms"].config_source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert configs["segment.bytes"].config_source == ConfigSource.DEFAULT_CONFIG
    assert not any(entry.is_sensitive or entry.read_only for entry in configs.values())


def test_validate_only_answers_the_same_and_creates_nothing(cluster) -> None:
    offset = cluster.image.offset
    result = cluster.create(topic("dry", 2, 1, configs={"retention.ms": "5"}), validate_only=True)["dry"]
    assert result.error_code == ErrorCode.NONE and result.num_partitions == 2
    assert cluster.image.topic("dry") is None and cluster.image.offset == offset
    assert cluster.create(topic("dry", 2, 1, configs={"retention.ms": "x"}), validate_only=True)[
        "dry"].error_code == ErrorCode.INVALID_CONFIG


def test_an_excessively_large_request_fails_whole(cluster) -> None:
    results = cluster.create(topic("small"), topic("huge", 2**31 - 1))
    assert {r.error_code for r in results.values()} == {ErrorCode.POLICY_VIOLATION}
    assert results["huge"].error_message == "Unable to perform excessively large batch operation."
    assert cluster.image.topics_by_name == {}


def test_topics_and_configs_survive_a_reopen(cluster) -> None:
    cluster.create(topic("kept", 2, configs={"retention.ms": "42"}))
    before = cluster.image.topic("kept")
    cluster.reopen()
    assert cluster.image.topic("kept") == before
    assert cluster.image.config(ConfigResourceType.TOPIC, "kept")["retention.ms"] == "42"
    assert cluster.create(topic("kept"))["kept"].error_code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_concurrent_creations_of_one_name_create_it_once(cluster) -> None:
    async def race():
        requests = [CreateTopicsRequest(topics=[topic("race", 1)]) for _ in range(5)]
        return await asyncio.gather(*(cluster.controller.create_topics(r) for r in requests))

    codes = sorted(response.topics[0].error_code for response in cluster.run(race()))
    assert codes == [ErrorCode.NONE] + [ErrorCode.TOPIC_ALREADY_EXISTS] * 4


def test_a_controller_that_lost_its_epoch_answers_not_controller(cluster) -> None:
    cluster.run(cluster.backend.elect_controller(1))  # a newer epoch this controller object did not win
    result = cluster.create(topic("late"))["late"]
    assert result.error_code == ErrorCode.NOT_CONTROLLER
    cluster.controller.deactivate()
    assert cluster.create(topic("later"))["later"].error_code == ErrorCode.NOT_CONTROLLER


# -- DeleteTopics ----------------------------------------------------------------------------------------------------

def delete(cluster, *, names=(), states=(), version=6):
    response = cluster.run(cluster.controller.delete_topics(
        DeleteTopicsRequest(topic_names=list(names), topics=list(states)), version))
    return response.responses


def test_delete_by_name_and_by_id(cluster) -> None:
    cluster.create(topic("a", configs={"retention.ms": "1"}), topic("b"), topic("c"))
    b_id = cluster.image.topic("b").topic_id
    results = delete(cluster, names=["a"], states=[DeleteTopicState(name=None, topic_id=b_id)])
    assert {(r.name, r.error_code) for r in results} == {("a", ErrorCode.NONE), ("b", ErrorCode.NONE)}
    assert sorted(cluster.image.topics_by_name) == ["c"]
    assert cluster.image.config(ConfigResourceType.TOPIC, "a") == {}


def test_delete_errors(cluster) -> None:
    cluster.create(topic("a"))
    a_id = cluster.image.topic("a").topic_id
    unknown_id = uuid.uuid4()
    results = delete(cluster, names=["nope", "dup", "dup"], states=[
        DeleteTopicState(name=None, topic_id=unknown_id),
        DeleteTopicState(name=None, topic_id=ZERO_UUID),
        DeleteTopicState(name="a", topic_id=a_id),
    ])
    by_key = {(r.name, r.topic_id): (r.error_code, r.error_message) for r in results}
    assert by_key[("nope", ZERO_UUID)][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert by_key[("dup", ZERO_UUID)] == (ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
    assert by_key[(None, unknown_id)][0] == ErrorCode.UNKNOWN_TOPIC_ID
    assert by_key[(None, ZERO_UUID)] == (ErrorCode.INVALID_REQUEST, "Neither topic name nor id were specified.")
    assert by_key[("a", a_id)] == (ErrorCode.INVALID_REQUEST, "You may not specify both topic name and topic id.")
    assert cluster.image.topic("a") is not None


@pytest.mark.parametrize(("version", "code"), [(2, ErrorCode.INVALID_REQUEST),
                                               (3, ErrorCode.TOPIC_DELETION_DISABLED)])
def test_deletion_disabled(make_cluster, version, code) -> None:
    cluster = make_cluster({"delete.topic.enable": "false"})
    cluster.create(topic("a"))
    assert [r.error_code for r in delete(cluster, names=["a"], version=version)] == [code]
    assert cluster.image.topic("a") is not None


def test_a_deleted_topic_can_be_created_again_with_a_new_id(cluster) -> None:
    first = cluster.create(topic("again"))["again"].topic_id
    delete(cluster, names=["again"])
    assert cluster.create(topic("again"))["again"].topic_id not in (first, ZERO_UUID)


# -- CreatePartitions ------------------------------------------------------------------------------------------------

def add_partitions(cluster, *topics, validate_only=False):
    response = cluster.run(cluster.controller.create_partitions(
        CreatePartitionsRequest(topics=list(topics), validate_only=validate_only)))
    return {r.name: (r.error_code, r.error_message) for r in response.results}


def test_partitions_are_added_with_the_topics_replication_factor(make_cluster) -> None:
    cluster = make_cluster(brokers=3)
    cluster.create(topic("t", 1, 2))
    assert add_partitions(cluster, CreatePartitionsTopic(name="t", count=4, assignments=None)) == {
        "t": (ErrorCode.NONE, None)}
    partitions = cluster.image.topic("t").partitions
    assert sorted(partitions) == [0, 1, 2, 3]
    assert all(len(set(p.replicas)) == 2 and p.leader == p.replicas[0] for p in partitions.values())


def test_partition_assignments_and_errors(make_cluster) -> None:
    cluster = make_cluster(brokers=2)
    cluster.create(topic("t", 2, 1))
    Assignment = CreatePartitionsAssignment
    results = add_partitions(
        cluster,
        CreatePartitionsTopic(name="t", count=3, assignments=[Assignment(broker_ids=[2])]),
        CreatePartitionsTopic(name="missing", count=3, assignments=None),
        CreatePartitionsTopic(name="dup", count=3, assignments=None),
        CreatePartitionsTopic(name="dup", count=4, assignments=None),
    )
    assert results["t"] == (ErrorCode.NONE, None)
    assert cluster.image.topic("t").partitions[2].replicas == (2,)
    assert results["missing"][0] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert results["dup"] == (ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
    assert add_partitions(cluster, CreatePartitionsTopic(name="t", count=3, assignments=None)) == {
        "t": (ErrorCode.INVALID_PARTITIONS, "Topic already has 3 partition(s).")}
    assert add_partitions(cluster, CreatePartitionsTopic(name="t", count=1, assignments=None)) == {
        "t": (ErrorCode.INVALID_PARTITIONS, "The topic t currently has 3 partition(s); 1 would not be an increase.")}
    assert add_partitions(cluster, CreatePartitionsTopic(name="t", count=5, assignments=[Assignment(broker_ids=[1])]))[
        "t"] == (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                 "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.")
    assert add_partitions(cluster, CreatePartitionsTopic(name="t", count=4, assignments=[
        Assignment(broker_ids=[1, 2])]))["t"][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert add_partitions(cluster, CreatePartitionsTopic(name="t", count=9, assignments=None),
                          validate_only=True) == {"t": (ErrorCode.NONE, None)}
    assert len(cluster.image.topic("t").partitions) == 3
