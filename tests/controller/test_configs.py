"""IncrementalAlterConfigs, AlterConfigs and the DescribeConfigs entries (values, sources, synonyms)."""

from __future__ import annotations

import pytest

from kfk.common.config_types import ConfigResourceType, ConfigSource, ConfigSynonym, WireConfigType
from kfk.config import BROKER_CONFIG_DEF, DYNAMIC_BROKER_CONFIGS, LOG_CONFIG_DEF, BrokerConfig
from kfk.controller.config_control import OpType
from kfk.controller.config_describer import describe_broker_configs, describe_resource, describe_topic_configs
from kfk.errors import ErrorCode, InvalidRequestError, InvalidTopicError, UnknownTopicOrPartitionError
from kfk.protocol.messages.alter_configs import AlterConfigsRequest
from kfk.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from tests.controller.conftest import topic

TOPIC, BROKER = ConfigResourceType.TOPIC, ConfigResourceType.BROKER
Incremental = IncrementalAlterConfigsRequest
Legacy = AlterConfigsRequest


def incremental(cluster, resource_type, name, *ops, validate_only=False):
    request = Incremental(validate_only=validate_only, resources=[Incremental.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[Incremental.AlterableConfig(name=k, config_operation=op, value=v) for k, op, v in ops])])
    result = cluster.run(cluster.controller.incremental_alter_configs(request)).responses[0]
    assert (result.resource_type, result.resource_name) == (resource_type, name)
    return result.error_code, result.error_message


def legacy(cluster, resource_type, name, configs, validate_only=False):
    request = Legacy(validate_only=validate_only, resources=[Legacy.AlterConfigsResource(
        resource_type=resource_type, resource_name=name,
        configs=[Legacy.AlterableConfig(name=k, value=v) for k, v in configs.items()])])
    result = cluster.run(cluster.controller.legacy_alter_configs(request)).responses[0]
    return result.error_code, result.error_message


def overrides(cluster, name="t"):
    return dict(cluster.image.config(TOPIC, name))


def test_incremental_operations(cluster) -> None:
    cluster.create(topic("t", configs={"retention.ms": "10"}))
    assert incremental(cluster, TOPIC, "t", ("segment.ms", OpType.SET, "1000"),
                       ("retention.ms", OpType.DELETE, None)) == (ErrorCode.NONE, None)
    assert overrides(cluster) == {"segment.ms": "1000"}
    assert incremental(cluster, TOPIC, "t", ("cleanup.policy", OpType.APPEND, "compact"))[0] == ErrorCode.NONE
    assert overrides(cluster)["cleanup.policy"] == "delete,compact"  # appended to the effective value
    assert incremental(cluster, TOPIC, "t", ("cleanup.policy", OpType.APPEND, "compact"))[0] == ErrorCode.NONE
    assert overrides(cluster)["cleanup.policy"] == "delete,compact"
    assert incremental(cluster, TOPIC, "t", ("cleanup.policy", OpType.SUBTRACT, "delete"))[0] == ErrorCode.NONE
    assert overrides(cluster)["cleanup.policy"] == "compact"


@pytest.mark.parametrize(
    ("ops", "code", "message"),
    [
        ([("retention.ms", OpType.APPEND, "5")], ErrorCode.INVALID_CONFIG,
         "Can't APPEND to key retention.ms because its type is not LIST."),
        ([("no.such.key", OpType.SET, "5")], ErrorCode.INVALID_CONFIG, "Unknown topic config name: no.such.key"),
        ([("no.such.key", OpType.SUBTRACT, "5")], ErrorCode.INVALID_CONFIG, "Unknown topic config name: no.such.key"),
        ([("retention.ms", OpType.SET, "x")], ErrorCode.INVALID_CONFIG,
         "Invalid value x for configuration retention.ms: Not a number of type LONG"),
        ([("retention.ms", OpType.SET, None)], ErrorCode.INVALID_CONFIG,
         "Null value not supported for topic configs: retention.ms"),
        ([("cleanup.policy", OpType.APPEND, "shred")], ErrorCode.INVALID_CONFIG, None),
        ([("retention.ms", OpType.SET, "1"), ("retention.ms", OpType.DELETE, None)], ErrorCode.INVALID_REQUEST,
         "Error due to duplicate config keys"),
        ([("retention.ms", 9, "1")], ErrorCode.INVALID_REQUEST, "Unknown operation type 9"),
    ],
    ids=["append-to-long", "unknown-key", "subtract-unknown", "bad-value", "null", "bad-list", "dup-key", "op"],
)
def test_incremental_errors_change_nothing(cluster, ops, code, message) -> None:
    cluster.create(topic("t", configs={"retention.ms": "10"}))
    error_code, error_message = incremental(cluster, TOPIC, "t", *ops)
    assert error_code == code
    if message is not None:
        assert error_message == message
    assert overrides(cluster) == {"retention.ms": "10"}


def test_resources_that_are_not_a_topic(cluster) -> None:
    assert incremental(cluster, TOPIC, "missing", ("retention.ms", OpType.SET, "1")) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'missing' does not exist.")
    assert incremental(cluster, TOPIC, "bad name", ("retention.ms", OpType.SET, "1"))[0] == \
        ErrorCode.INVALID_TOPIC_EXCEPTION
    assert incremental(cluster, BROKER, "1") == (ErrorCode.NONE, None)
    assert incremental(cluster, BROKER, "", ("log.retention.hours", OpType.SET, "1")) == (
        ErrorCode.INVALID_REQUEST, "Cannot update these configs dynamically: log.retention.hours")
    assert incremental(cluster, BROKER, "2") == (
        ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 1 or empty string, but received 2")
    assert incremental(cluster, ConfigResourceType.BROKER_LOGGER, "1") == (
        ErrorCode.INVALID_REQUEST, "Unexpected resource type BROKER_LOGGER.")
    assert incremental(cluster, 0, "x") == (ErrorCode.UNSUPPORTED_VERSION, "Unknown resource type 0.")


def test_validate_only_writes_nothing(cluster) -> None:
    cluster.create(topic("t"))
    assert incremental(cluster, TOPIC, "t", ("retention.ms", OpType.SET, "1"), validate_only=True)[0] == \
        ErrorCode.NONE
    assert legacy(cluster, TOPIC, "t", {"retention.ms": "1"}, validate_only=True)[0] == ErrorCode.NONE
    assert overrides(cluster) == {}


def test_legacy_alter_configs_replaces_the_whole_set(cluster) -> None:
    cluster.create(topic("t", configs={"retention.ms": "10", "segment.ms": "20"}))
    assert legacy(cluster, TOPIC, "t", {"segment.ms": "30", "cleanup.policy": "compact"}) == (ErrorCode.NONE, None)
    assert overrides(cluster) == {"segment.ms": "30", "cleanup.policy": "compact"}
    assert legacy(cluster, TOPIC, "t", {"retention.ms": "x"})[0] == ErrorCode.INVALID_CONFIG
    assert legacy(cluster, TOPIC, "t", {"retention.ms": None})[0] == ErrorCode.INVALID_CONFIG
    assert overrides(cluster) == {"segment.ms": "30", "cleanup.policy": "compact"}
    assert legacy(cluster, TOPIC, "t", {}) == (ErrorCode.NONE, None)
    assert overrides(cluster) == {}


def test_a_resource_named_twice_is_refused(cluster) -> None:
    cluster.create(topic("t"))
    resource = Legacy.AlterConfigsResource(resource_type=TOPIC, resource_name="t", configs=[])
    response = cluster.run(cluster.controller.legacy_alter_configs(Legacy(resources=[resource, resource])))
    assert [(r.error_code, r.error_message) for r in response.responses] == [
        (ErrorCode.INVALID_REQUEST, "Duplicate resource.")] * 2


def test_configs_survive_a_reopen(cluster) -> None:
    cluster.create(topic("t"))
    incremental(cluster, TOPIC, "t", ("max.message.bytes", OpType.SET, "2048"))
    cluster.reopen()
    assert overrides(cluster) == {"max.message.bytes": "2048"}


# -- describing ------------------------------------------------------------------------------------------------------

def broker_config(**props: str) -> BrokerConfig:
    base = {"process.roles": "broker,controller", "node.id": "1", "log.dirs": "/tmp/unused"}
    base.update({key.replace("_", "."): value for key, value in props.items()})
    return BrokerConfig(base)


def test_every_topic_config_is_described() -> None:
    entries = describe_topic_configs(broker_config(), {})
    names = [entry.name for entry in entries]
    assert names == sorted(name for name, key in LOG_CONFIG_DEF.keys.items() if not key.internal)


def test_a_default_an_override_and_a_broker_derived_topic_config() -> None:
    config = BrokerConfig({"process.roles": "broker,controller", "node.id": "1", "log.dirs": "/tmp/unused",
                           "log.segment.bytes": "2097152", "log.retention.ms": "5000"})
    entries = {e.name: e for e in describe_topic_configs(config, {"cleanup.policy": "compact"})}

    default = entries["max.message.bytes"]
    assert (default.value, default.source, default.is_sensitive, default.is_read_only) == (
        "1048588", ConfigSource.DEFAULT_CONFIG, False, False)
    assert default.synonyms == (ConfigSynonym("message.max.bytes", "1048588", ConfigSource.DEFAULT_CONFIG),)
    assert default.config_type == WireConfigType.INT

    overridden = entries["cleanup.policy"]
    assert (overridden.value, overridden.source) == ("compact", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert overridden.synonyms == (
        ConfigSynonym("cleanup.policy", "compact", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ConfigSynonym("log.cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG),
    )
    assert overridden.config_type == WireConfigType.LIST

    derived = entries["segment.bytes"]
    assert (derived.value, derived.source) == ("2097152", ConfigSource.STATIC_BROKER_CONFIG)
    assert derived.synonyms == (
        ConfigSynonym("log.segment.bytes", "2097152", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.segment.bytes", "1073741824", ConfigSource.DEFAULT_CONFIG),
    )
    retention = entries["retention.ms"]
    assert (retention.value, retention.source) == ("5000", ConfigSource.STATIC_BROKER_CONFIG)
    assert retention.synonyms == (ConfigSynonym("log.retention.ms", "5000", ConfigSource.STATIC_BROKER_CONFIG),
                                  ConfigSynonym("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG))


def test_synonyms_start_at_the_first_broker_name_as_in_kafka() -> None:
    # Kafka prints `retention.ms=604800000 sensitive=false synonyms={}`: log.retention.ms has no default, and the
    # list starts at it. Set only log.retention.hours and the value changes but still no synonym is listed.
    entries = {e.name: e for e in describe_topic_configs(broker_config(), {})}
    assert (entries["retention.ms"].value, entries["retention.ms"].synonyms) == ("604800000", ())
    assert entries["retention.ms"].source == ConfigSource.DEFAULT_CONFIG
    hours = {e.name: e for e in describe_topic_configs(broker_config(log_retention_hours="1"), {})}
    assert (hours["retention.ms"].value, hours["retention.ms"].synonyms) == ("3600000", ())


def test_every_broker_config_is_described_read_only_unless_kafka_updates_it_dynamically() -> None:
    config = broker_config(num_partitions="4")
    entries = {e.name: e for e in describe_broker_configs(config)}
    assert set(entries) == {name for name, key in BROKER_CONFIG_DEF.keys.items() if not key.internal}
    assert all(e.is_read_only == (e.name not in DYNAMIC_BROKER_CONFIGS) for e in entries.values())
    assert all(e.is_sensitive == (e.config_type == WireConfigType.PASSWORD) for e in entries.values())
    assert not entries["log.retention.ms"].is_read_only and not entries["listeners"].is_read_only
    assert entries["log.retention.hours"].is_read_only and entries["num.partitions"].is_read_only
    assert entries["advertised.listeners"].is_read_only
    assert (entries["num.partitions"].value, entries["num.partitions"].source) == (
        "4", ConfigSource.STATIC_BROKER_CONFIG)
    assert entries["num.partitions"].synonyms == (
        ConfigSynonym("num.partitions", "4", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("num.partitions", "1", ConfigSource.DEFAULT_CONFIG))
    assert (entries["log.retention.hours"].value, entries["log.retention.hours"].source) == (
        "168", ConfigSource.DEFAULT_CONFIG)
    assert entries["log.roll.ms"].value is None
    assert entries["process.roles"].value == "broker,controller"


def test_describe_resource_errors(cluster) -> None:
    cluster.create(topic("t"))
    image, config = cluster.image, cluster.config
    assert describe_resource(image, config, 1, TOPIC, "t")
    assert describe_resource(image, config, 1, BROKER, "") == []  # no dynamic default set
    assert describe_resource(image, config, 1, BROKER, "1")
    with pytest.raises(UnknownTopicOrPartitionError):
        describe_resource(image, config, 1, TOPIC, "missing")
    with pytest.raises(UnknownTopicOrPartitionError):
        describe_resource(image, config, 1, TOPIC, "__cluster_metadata")
    with pytest.raises(InvalidTopicError):
        describe_resource(image, config, 1, TOPIC, "bad name")
    with pytest.raises(InvalidRequestError, match="Broker id must be an integer, but it is: one"):
        describe_resource(image, config, 1, BROKER, "one")
    with pytest.raises(InvalidRequestError, match="expected 1 or empty string, but received 2"):
        describe_resource(image, config, 1, BROKER, "2")
    with pytest.raises(InvalidRequestError, match="Unsupported resource type: BROKER_LOGGER"):
        describe_resource(image, config, 1, ConfigResourceType.BROKER_LOGGER, "1")


def test_every_kafka_4_broker_name_is_known_and_others_are_reported() -> None:
    """server.properties names of Kafka 4.x (listener-prefixed ones too) are known; a misspelt one is reported."""
    config = BrokerConfig({"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181", "ssl.keystore.type": "PKCS12",
                           "listener.name.internal.ssl.keystore.location": "/k.jks", "group.share.max.size": "10",
                           "num.partition": "3"})
    assert config.unknown == ["num.partition"]
    assert config.ssl_keystore_type == "PKCS12" and config.group_share_max_size == 10


@pytest.mark.parametrize(
    ("name", "ops", "message"),
    [
        ("1", [("log.retention.hours", OpType.SET, "1")],
         "Cannot update these configs dynamically: log.retention.hours"),
        ("", [("listeners", OpType.SET, "PLAINTEXT://:9093")],
         "Cannot update these configs at default cluster level, broker id must be specified: listeners"),
        ("1", [("ssl.keystore.location", OpType.SET, "/k.jks")],
         "These security configs can be dynamically updated only per-listener using the listener prefix: "
         "ssl.keystore.location"),
        ("1", [("log.retention.bytes", OpType.SET, "lots")],
         "Invalid value lots for configuration log.retention.bytes: Not a number of type LONG"),
        ("1", [("listeners", OpType.SET, "PLAINTEXT:9093")], None),
        ("1", [("no.such.config", OpType.SET, "1")], "Unknown broker configs: no.such.config"),
        ("1", [("message.max.bytes", OpType.SET, None)], "Null value not supported for : message.max.bytes"),
        ("1", [("message.max.bytes", OpType.APPEND, "1")], "Can't APPEND to key message.max.bytes because its type "
                                                            "is not LIST."),
    ],
    ids=["read-only", "per-broker-at-default", "bare-keystore", "bad-value", "bad-listener", "unknown", "null",
         "append"],
)
def test_dynamic_broker_configs_refused_as_kafka_refuses_them(cluster, name, ops, message) -> None:
    before = dict(cluster.image.config(BROKER, name))
    code, error_message = incremental(cluster, BROKER, name, *ops)
    assert code == (ErrorCode.INVALID_CONFIG if ops[0][1] == OpType.APPEND else ErrorCode.INVALID_REQUEST)
    assert message is None or error_message == message
    assert "Set(" not in (error_message or "")
    assert dict(cluster.image.config(BROKER, name)) == before


def test_dynamic_broker_configs_are_written_and_described_with_their_sources(cluster) -> None:
    assert incremental(cluster, BROKER, "", ("log.retention.ms", OpType.SET, "5000"),
                       ("log.cleaner.threads", OpType.SET, "2")) == (ErrorCode.NONE, None)
    assert incremental(cluster, BROKER, "1", ("log.retention.ms", OpType.SET, "7000"),
                       ("listener.security.protocol.map", OpType.APPEND, "EXTRA:PLAINTEXT")) == (ErrorCode.NONE, None)
    assert incremental(cluster, BROKER, "1", ("listener.security.protocol.map", OpType.SUBTRACT,
                                              "SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL")) == (
        ErrorCode.NONE, None)  # APPEND started from the default list
    assert dict(cluster.image.config(BROKER, "")) == {"log.retention.ms": "5000", "log.cleaner.threads": "2"}
    assert dict(cluster.image.config(BROKER, "1")) == {
        "log.retention.ms": "7000", "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                                                                      "EXTRA:PLAINTEXT"}

    config = BrokerConfig({"broker.id": "1", "zookeeper.connect": "127.0.0.1:2181", "log.retention.hours": "1"})
    changed = config.reconfigure(cluster.image.config(BROKER, ""), cluster.image.config(BROKER, "1"))
    assert changed == {"log.retention.ms", "log.cleaner.threads", "listener.security.protocol.map"}
    assert (config.log_retention_time_ms, config.log_cleaner_threads) == (7000, 2)
    entries = {e.name: e for e in describe_broker_configs(config)}
    assert (entries["log.retention.ms"].value, entries["log.retention.ms"].source) == (
        "7000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert entries["log.retention.ms"].synonyms == (
        ConfigSynonym("log.retention.ms", "7000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.ms", "5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "1", ConfigSource.STATIC_BROKER_CONFIG),
        ConfigSynonym("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG))
    assert entries["log.cleaner.threads"].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
    retention = {e.name: e for e in describe_topic_configs(config, {})}["retention.ms"]
    assert (retention.value, retention.source) == ("7000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    default = describe_resource(cluster.image, config, 1, BROKER, "")
    assert [(e.name, e.value, e.synonyms) for e in default] == [
        ("log.cleaner.threads", "2", (ConfigSynonym("log.cleaner.threads", "2",
                                                    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),)),
        ("log.retention.ms", "5000", (ConfigSynonym("log.retention.ms", "5000",
                                                    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),))]

    assert config.reconfigure({}, {}) == changed  # deleted: server.properties and the defaults again
    assert (config.log_retention_time_ms, config.log_cleaner_threads) == (3_600_000, 1)


def test_group_configs_are_kraft_only_and_checked_as_a_whole(cluster, kraft) -> None:
    """A ZooKeeper-mode controller (no broker heartbeats) has nowhere to keep a group's configs and refuses them as
    Kafka 3.x's did; on KRaft they are overrides like a topic's, the group's whole set checked at once."""
    GROUP = ConfigResourceType.GROUP
    assert incremental(cluster, GROUP, "g", ("share.auto.offset.reset", OpType.SET, "earliest")) == (
        ErrorCode.INVALID_REQUEST, "Unexpected resource type GROUP.")
    assert incremental(kraft, GROUP, "g", ("share.session.timeout.ms", OpType.SET, "50000"),
                       ("share.auto.offset.reset", OpType.SET, "earliest")) == (ErrorCode.NONE, None)
    # The heartbeat interval must stay below the session timeout the group already has.
    assert incremental(kraft, GROUP, "g", ("share.heartbeat.interval.ms", OpType.SET, "15000"),
                       ("share.session.timeout.ms", OpType.SET, "45000")) == (ErrorCode.NONE, None)
    assert incremental(kraft, GROUP, "g", ("share.heartbeat.interval.ms", OpType.SET, "15000"),
                       ("share.session.timeout.ms", OpType.SET, "46000")) == (ErrorCode.NONE, None)
    assert legacy(kraft, GROUP, "g", {"share.heartbeat.interval.ms": "15000",
                                      "share.session.timeout.ms": "15000"}) == (
        ErrorCode.INVALID_CONFIG, "share.session.timeout.ms must be in the range 45000 to 60000 inclusive.")
    assert incremental(kraft, GROUP, "", ("share.auto.offset.reset", OpType.SET, "earliest")) == (
        ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
    assert dict(kraft.image.config(GROUP, "g")) == {"share.auto.offset.reset": "earliest",
                                                    "share.heartbeat.interval.ms": "15000",
                                                    "share.session.timeout.ms": "46000"}
    entries = {entry.name: entry for entry in describe_resource(kraft.image, kraft.config, 1, GROUP, "g")}
    assert entries["share.session.timeout.ms"].source == ConfigSource.GROUP_CONFIG
    assert entries["share.delivery.count.limit"].synonyms == (
        ConfigSynonym("group.share.delivery.count.limit", "5", ConfigSource.DEFAULT_CONFIG),)
    assert "consumer.assignor.offload.enable" not in entries  # Kafka's internal keys are never described
    with pytest.raises(InvalidRequestError, match="Group name must not be empty"):
        describe_resource(kraft.image, kraft.config, 1, GROUP, "")
