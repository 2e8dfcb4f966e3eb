"""kfk.streams without a broker: Kafka's serde bytes, the configuration's refusals, topology errors, sub-topologies
and task ids, the internal topics a topology needs (partition counts, configs) and the co-partitioning check."""

from __future__ import annotations

import pytest

from kfk.errors import InvalidConfigurationError
from kfk.streams import Serdes, StreamsBuilder, StreamsConfig, TaskId, Topology, TopologyException
from kfk.streams.kafka_streams import internal_topic_configs
from tests.streams.topologies import repartition, wordcount


def test_serdes_write_kafkas_bytes() -> None:
    assert Serdes.long().serialize(1) == b"\x00" * 7 + b"\x01"
    assert Serdes.integer().serialize(-2) == b"\xff\xff\xff\xfe"
    assert Serdes.long().deserialize(b"\x00" * 7 + b"\x05") == 5
    assert Serdes.string().serialize("é") == "é".encode()
    assert Serdes.json().serialize({"a": [1, 2]}) == b'{"a":[1,2]}'
    for serde in (Serdes.long(), Serdes.integer(), Serdes.string(), Serdes.json(), Serdes.bytes()):
        assert serde.serialize(None) is None and serde.deserialize(None) is None
    with pytest.raises(ValueError, match="Size of data received by LongDeserializer is not 8"):
        Serdes.long().deserialize(b"\x01")


def test_config_takes_kafkas_keys_and_refuses_what_streams_sets() -> None:
    config = StreamsConfig({"application.id": "app", "bootstrap.servers": "h:9092",
                            "processing.guarantee": "exactly_once_v2", "consumer.max.poll.records": 10,
                            "default.value.serde": "org.apache.kafka.common.serialization.Serdes$LongSerde"})
    assert config.commit_interval_ms == 100  # exactly-once's default, 30000 otherwise
    assert config.consumer_config("c", 1)["max.poll.records"] == 10
    assert config.consumer_config("c", 1)["isolation.level"] == "read_committed"
    assert config.value_serde.serialize(3) == Serdes.long().serialize(3)
    with pytest.raises(InvalidConfigurationError, match='Missing required configuration "application.id"'):
        StreamsConfig({"bootstrap.servers": "h:9092"})
    with pytest.raises(InvalidConfigurationError, match="kfk.streams sets group.id itself"):
        StreamsConfig({"application.id": "app", "bootstrap.servers": "h:9092", "consumer.group.id": "x"})
    with pytest.raises(InvalidConfigurationError, match="Unknown streams config name: no.such.key"):
        StreamsConfig({"application.id": "app", "bootstrap.servers": "h:9092", "no.such.key": 1})
    with pytest.raises(InvalidConfigurationError, match="processing.guarantee"):
        StreamsConfig({"application.id": "app", "bootstrap.servers": "h:9092", "processing.guarantee": "exactly_once"})


def test_high_availability_and_rack_awareness_configs_are_kafkas() -> None:
    """Their defaults and Kafka Streams 4.4.0's refusals, word for word (StreamsConfig's checks, run in Java)."""
    base = {"application.id": "app", "bootstrap.servers": "h:9092"}
    config = StreamsConfig(base)
    assert (config.acceptable_recovery_lag, config.max_warmup_replicas, config.probing_rebalance_interval_ms,
            config.rack_aware_assignment_tags, config.client_tags) == (10_000, 2, 600_000, [], {})
    config = StreamsConfig({**base, "rack.aware.assignment.tags": "zone,cluster", "client.tag.zone": "z1",
                            "client.tag.cluster": "c1"})
    assert config.rack_aware_assignment_tags == ["zone", "cluster"]
    assert config.client_tags == {"zone": "z1", "cluster": "c1"}
    refusals = [
        ({"probing.rebalance.interval.ms": 5000},
         "Invalid value 5000 for configuration probing.rebalance.interval.ms: Value must be at least 60000"),
        ({"max.warmup.replicas": 0}, "Invalid value 0 for configuration max.warmup.replicas: Value must be at least 1"),
        ({"rack.aware.assignment.tags": "zone"},
         "Invalid value [zone] for configuration rack.aware.assignment.tags: Contains invalid value [zone] which "
         "doesn't have corresponding tag set via [client.tag.] prefix."),
        ({"rack.aware.assignment.tags": "a,b,c,d,e,f"},
         "Invalid value [a, b, c, d, e, f] for configuration rack.aware.assignment.tags: exceeds maximum list size of "
         "[5]."),
        ({f"client.tag.{key}": "1" for key in "abcdef"}, "At most 5 client tags can be specified using client.tag. "
                                                         "prefix."),
        ({"client.tag.averyveryverylongtagkey12345": "1"},
         "Invalid value averyveryverylongtagkey12345 for configuration client.tag.averyveryverylongtagkey12345: Tag "
         "key exceeds maximum length of 20."),
        ({"client.tag.zone": "averyveryverylongtagvalue1234567890"},
         "Invalid value averyveryverylongtagvalue1234567890 for configuration client.tag.zone: Tag value exceeds "
         "maximum length of 30."),
    ]
    for extra, message in refusals:
        with pytest.raises(InvalidConfigurationError) as refused:
            StreamsConfig({**base, **extra})
        assert str(refused.value) == message


def test_topology_errors_name_the_node() -> None:
    topology = Topology().add_source("source", "in")
    with pytest.raises(TopologyException, match="Invalid topology: Processor source is already added."):
        topology.add_source("source", "other")
    with pytest.raises(TopologyException, match="Topic in has already been registered by another source."):
        topology.add_source("again", "in")
    with pytest.raises(TopologyException, match="Parent processor missing is not added yet for p"):
        topology.add_processor("p", lambda: None, "missing")


def test_sub_topologies_and_internal_topics_of_a_word_count() -> None:
    topology = wordcount("lines", "out")
    first, second = topology.sub_topologies()
    assert (first.id, first.source_topics, first.stores) == (0, ["lines"], [])
    assert (second.id, second.source_topics, second.stores) == (1, ["counts-repartition"], ["counts"])
    internal, tasks = internal_topic_configs(topology, "app", {"lines": 3})
    assert tasks == {0: 3, 1: 3}
    assert internal == {
        "app-counts-repartition": (3, {"cleanup.policy": "delete", "segment.bytes": "52428800", "retention.ms": "-1",
                                       "message.timestamp.type": "CreateTime"}),
        "app-counts-changelog": (3, {"cleanup.policy": "compact", "message.timestamp.type": "CreateTime"})}
    assert str(TaskId(1, 2)) == "1_2" and TaskId.parse("1_2") == TaskId(1, 2)


def test_repartition_counts_follow_their_writers_and_co_partitioning_is_checked() -> None:
    builder = StreamsBuilder()
    builder.stream("a").repartition(num_partitions=5).group_by_key().count()
    internal, tasks = internal_topic_configs(builder.build(), "app", {"a": 2})
    assert internal["app-KSTREAM-REPARTITION-0000000001-repartition"][0] == 5
    assert internal["app-KSTREAM-AGGREGATE-STATE-STORE-0000000005-changelog"][0] == 5
    internal, _ = internal_topic_configs(repartition("lines", "out"), "app", {"lines": 4})
    assert {name: count for name, (count, _) in internal.items()} == {
        "app-KSTREAM-REPARTITION-0000000002-repartition": 4, "app-KSTREAM-REDUCE-STATE-STORE-0000000011-repartition": 4,
        "app-named-repartition": 4, "app-KSTREAM-AGGREGATE-STATE-STORE-0000000006-changelog": 4,
        "app-KSTREAM-REDUCE-STATE-STORE-0000000011-changelog": 4}
    topology = StreamsBuilder()
    topology.stream("left")
    topology.stream("right")
    built = topology.build()
    built.copartition_groups.append({"left", "right"})
    with pytest.raises(TopologyException, match=r"Topics not co-partitioned: \[left,right\]"):
        internal_topic_configs(built, "app", {"left": 2, "right": 3})
