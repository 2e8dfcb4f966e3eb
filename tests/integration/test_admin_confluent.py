"""confluent-kafka's AdminClient (librdkafka 2.16) against a kfk broker: topics, partitions, configs, cluster."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from kfk.config import DYNAMIC_BROKER_CONFIGS

pytestmark = pytest.mark.integration
TIMEOUT = 10


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 5000})


def error_of(future) -> KafkaError:
    with pytest.raises(KafkaException) as raised:
        future.result(timeout=TIMEOUT)
    return raised.value.args[0]


def topic_configs(client: AdminClient, name: str) -> dict[str, ConfigEntry]:
    futures = client.describe_configs([ConfigResource(ResourceType.TOPIC, name)], request_timeout=TIMEOUT)
    return next(iter(futures.values())).result(timeout=TIMEOUT)


def test_create_list_describe_alter_partition_and_delete(kfk_broker: str) -> None:
    client = admin(kfk_broker)
    futures = client.create_topics([
        NewTopic("orders", 3, 1, config={"retention.ms": "3600000", "cleanup.policy": "compact"}),
        NewTopic("plain", 1, 1),
    ], request_timeout=TIMEOUT)
    for future in futures.values():
        assert future.result(timeout=TIMEOUT) is None

    metadata = client.list_topics(timeout=TIMEOUT)
    assert set(metadata.topics) == {"orders", "plain"}
    assert "__cluster_metadata" not in metadata.topics
    orders = metadata.topics["orders"]
    assert sorted(orders.partitions) == [0, 1, 2]
    for partition in orders.partitions.values():
        assert (partition.leader, partition.replicas, partition.isrs) == (1, [1], [1])
    assert list(metadata.brokers) == [1] and metadata.controller_id == 1
    assert metadata.cluster_id

    configs = topic_configs(client, "orders")
    retention = configs["retention.ms"]
    assert (retention.value, retention.source, retention.is_sensitive) == (
        "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value, False)
    assert retention.synonyms["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    default = configs["max.message.bytes"]
    assert (default.value, default.source, default.is_sensitive, default.is_read_only) == (
        "1048588", ConfigSource.DEFAULT_CONFIG.value, False, False)
    assert default.synonyms["message.max.bytes"].value == "1048588"
    assert "__cluster_metadata" not in str(configs)

    resource = ConfigResource(ResourceType.TOPIC, "orders", incremental_configs=[
        ConfigEntry("segment.ms", "60000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.APPEND),
    ])
    for future in client.incremental_alter_configs([resource]).values():
        future.result(timeout=TIMEOUT)
    configs = topic_configs(client, "orders")
    assert configs["segment.ms"].value == "60000"
    assert configs["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["cleanup.policy"].value == "compact,delete"

    for future in client.create_partitions([NewPartitions("orders", 5)], request_timeout=TIMEOUT).values():
        future.result(timeout=TIMEOUT)
    assert len(client.list_topics("orders", timeout=TIMEOUT).topics["orders"].partitions) == 5
    error = error_of(next(iter(client.create_partitions([NewPartitions("orders", 2)]).values())))
    assert error.code() == KafkaError.INVALID_PARTITIONS

    for future in client.delete_topics(["plain"], request_timeout=TIMEOUT).values():
        future.result(timeout=TIMEOUT)
    assert set(client.list_topics(timeout=TIMEOUT).topics) == {"orders"}
    error = error_of(next(iter(client.delete_topics(["plain"], request_timeout=TIMEOUT).values())))
    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_creation_errors_and_validate_only(kfk_broker: str) -> None:
    client = admin(kfk_broker)
    dry = client.create_topics([NewTopic("dry", 2, 1)], validate_only=True, request_timeout=TIMEOUT)
    assert dry["dry"].result(timeout=TIMEOUT) is None
    assert "dry" not in client.list_topics(timeout=TIMEOUT).topics

    futures = client.create_topics([
        NewTopic("bad-config", 1, 1, config={"retention.ms": "soon"}),
        NewTopic("unknown-config", 1, 1, config={"retention.weeks": "2"}),
        NewTopic("bad name!", 1, 1),
        NewTopic("too-many-replicas", 1, 3),
        NewTopic("exists", 1, 1),
    ], request_timeout=TIMEOUT)
    bad_config = error_of(futures["bad-config"])
    assert bad_config.code() == KafkaError.INVALID_CONFIG and "retention.ms" in bad_config.str()
    assert error_of(futures["unknown-config"]).code() == KafkaError.INVALID_CONFIG
    assert error_of(futures["bad name!"]).code() == KafkaError.TOPIC_EXCEPTION
    assert error_of(futures["too-many-replicas"]).code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert futures["exists"].result(timeout=TIMEOUT) is None
    again = client.create_topics([NewTopic("exists", 1, 1)], request_timeout=TIMEOUT)
    assert error_of(again["exists"]).code() == KafkaError.TOPIC_ALREADY_EXISTS


def test_a_broker_derived_topic_config_broker_configs_and_describe_cluster(kfk_broker_factory) -> None:
    client = admin(kfk_broker_factory({"log.segment.bytes": "2097152"}).bootstrap_servers)
    client.create_topics([NewTopic("derived", 1, 1)])["derived"].result(timeout=TIMEOUT)
    segment = topic_configs(client, "derived")["segment.bytes"]
    assert (segment.value, segment.source, segment.is_sensitive) == (
        "2097152", ConfigSource.STATIC_BROKER_CONFIG.value, False)
    # librdkafka keys synonyms by name: of log.segment.bytes (static 2097152, then its default) it keeps the last
    assert list(segment.synonyms) == ["log.segment.bytes"]
    assert segment.synonyms["log.segment.bytes"].value == "1073741824"

    futures = client.describe_configs([ConfigResource(ResourceType.BROKER, "1")], request_timeout=TIMEOUT)
    configs = next(iter(futures.values())).result(timeout=TIMEOUT)
    assert configs["num.partitions"].value == "1"
    assert configs["num.partitions"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert configs["log.retention.hours"].source == ConfigSource.DEFAULT_CONFIG.value
    assert configs["offsets.topic.replication.factor"].value == "1"
    # Read-only exactly where Kafka 4.x cannot update a broker config without a restart.
    assert {name for name, entry in configs.items() if not entry.is_read_only} == \
        DYNAMIC_BROKER_CONFIGS & set(configs)
    assert configs["num.partitions"].is_read_only and not configs["log.retention.ms"].is_read_only
    assert configs["log.retention.hours"].is_read_only  # only its .ms synonym is dynamic in Kafka 4.0
    assert (configs["offsets.commit.timeout.ms"].value, configs["offsets.commit.timeout.ms"].source) == (
        "5000", ConfigSource.DEFAULT_CONFIG.value)
    assert configs["sasl.jaas.config"].is_sensitive and configs["sasl.jaas.config"].value is None

    cluster = client.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert [node.id for node in cluster.nodes] == [1] and cluster.controller.id == 1
    assert cluster.cluster_id == client.list_topics(timeout=TIMEOUT).cluster_id
