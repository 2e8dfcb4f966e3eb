"""kafka-python 3's KafkaAdminClient against a kfk broker, its API versions negotiated from our ApiVersions."""

from __future__ import annotations

import pytest
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewPartitions, NewTopic
from kafka.errors import InvalidConfigurationError, TopicAlreadyExistsError, UnknownTopicOrPartitionError

pytestmark = pytest.mark.integration


def test_create_describe_alter_and_delete(kfk_broker: str) -> None:
    client = KafkaAdminClient(bootstrap_servers=kfk_broker, request_timeout_ms=10000)
    try:
        result = client.create_topics([
            NewTopic("kp", 2, 1, topic_configs={"cleanup.policy": "compact", "retention.ms": "60000"})])
        (created,) = result["topics"]
        assert (created["name"], created["error_code"], created["num_partitions"]) == ("kp", 0, 2)
        assert created["configs"]["cleanup.policy"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        with pytest.raises(TopicAlreadyExistsError):
            client.create_topics([NewTopic("kp", 1, 1)])
        with pytest.raises(InvalidConfigurationError):
            client.create_topics([NewTopic("bad", 1, 1, topic_configs={"segment.bytes": "10"})])
        assert sorted(client.list_topics()) == ["kp"]

        described = client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp")],
                                            include_synonyms=True, config_filter="all")
        configs = described["topic"]["kp"]
        assert configs["retention.ms"]["value"] == "60000"
        assert configs["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert configs["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
        assert configs["segment.bytes"]["synonyms"][0]["name"] == "log.segment.bytes"
        assert configs["segment.bytes"]["config_type"] == "INT"
        assert not any(entry["is_sensitive"] for entry in configs.values())
        modified = client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp")])["topic"]["kp"]
        assert set(modified) == {"cleanup.policy", "retention.ms"}

        for incremental in (True, False):  # IncrementalAlterConfigs, then the legacy AlterConfigs
            value = "1000" if incremental else "2000"
            client.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp", configs={"retention.ms": value})],
                                 incremental=incremental)
            modified = client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp")])["topic"]["kp"]
            assert {name: entry["value"] for name, entry in modified.items()} == {
                "cleanup.policy": "compact", "retention.ms": value}
        client.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "kp",
                                             configs={"cleanup.policy": ("DELETE", None)})])
        modified = client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "kp")])["topic"]["kp"]
        assert set(modified) == {"retention.ms"}

        client.create_partitions({"kp": NewPartitions(total_count=4)})
        assert len(client.describe_topics(["kp"])[0]["partitions"]) == 4

        client.delete_topics(["kp"])
        assert client.list_topics() == []
        with pytest.raises(UnknownTopicOrPartitionError):
            client.delete_topics(["kp"])
        cluster = client.describe_cluster()
        assert [broker["broker_id"] for broker in cluster["brokers"]] == [1]
        assert cluster["controller_id"] == 1
    finally:
        client.close()


def test_describe_configs_as_kafka_4_reports_them(kfk_broker: str) -> None:
    """Every Kafka 4.x broker config is described (offsets.commit.timeout.ms among them), read-only unless Kafka
    updates it dynamically, passwords sensitive and hidden; an empty cleanup.policy is accepted."""
    client = KafkaAdminClient(bootstrap_servers=kfk_broker, request_timeout_ms=10000)
    try:
        described = client.describe_configs([ConfigResource(ConfigResourceType.BROKER, "1")],
                                            include_synonyms=True, config_filter="all")
        (configs,) = described["broker"].values()
        timeout = configs["offsets.commit.timeout.ms"]
        assert (timeout["value"], timeout["config_source"], timeout["read_only"]) == ("5000", "DEFAULT_CONFIG", True)
        assert configs["log.retention.ms"]["read_only"] is False
        assert configs["log.retention.hours"]["read_only"] is True
        assert configs["log.cleaner.threads"]["read_only"] is False
        assert configs["num.partitions"]["read_only"] is True
        password = configs["ssl.keystore.password"]
        assert (password["value"], password["is_sensitive"], password["config_type"]) == (None, True, "PASSWORD")

        client.create_topics([NewTopic("keep-all", 1, 1, topic_configs={"cleanup.policy": ""})])
        topic = client.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "keep-all")])["topic"]["keep-all"]
        assert topic["cleanup.policy"]["value"] == ""
        client.delete_topics(["keep-all"])
    finally:
        client.close()


def test_kafka_python_sees_kafka_4_pages_topic_partitions_and_describes_the_quorum(kfk_broker_factory) -> None:
    broker = kfk_broker_factory()
    client = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, request_timeout_ms=10000)
    try:
        # kafka-python infers the broker's release from the highest versions: Kafka 4.4's table reads as the newest
        # release kafka-python 3.0 knows, 4.3.
        assert client.get_broker_version_data(1).broker_version == (4, 3)
        client.create_topics([NewTopic("kp4-a", 3, 1), NewTopic("kp4-b", 1, 1)])
        first = client.describe_topic_partitions(["kp4-b", "kp4-a"], response_partition_limit=2)
        assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in first["topics"]] == [
            ("kp4-a", [0, 1])]
        assert first["next_cursor"] == {"topic_name": "kp4-a", "partition_index": 2}
        rest = client.describe_topic_partitions(["kp4-b", "kp4-a"], response_partition_limit=2,
                                                cursor=first["next_cursor"])
        assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in rest["topics"]] == [
            ("kp4-a", [2]), ("kp4-b", [0])]
        assert rest["next_cursor"] is None
        assert rest["topics"][1]["partitions"][0]["leader_id"] == 1

        quorum = client.describe_metadata_quorum()
        (topic,) = quorum["topics"]
        (partition,) = topic["partitions"]
        assert (topic["topic_name"], partition["error"], partition["leader_id"]) == ("__cluster_metadata", None, 1)
        assert [voter["replica_id"] for voter in partition["current_voters"]] == [1]
        assert partition["current_voters"][0]["log_end_offset"] == partition["high_watermark"] > 0
        assert [node["node_id"] for node in quorum["nodes"]] == [1]
    finally:
        client.close()
