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
