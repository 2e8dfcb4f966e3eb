"""MirrorMaker 2's pieces without a cluster: the internal topics' record formats, DefaultReplicationPolicy's names,
Kafka's default topic and group filters, mm2.properties -> herder and connector configs, and the CLI's one-line
errors. (tests/connect/test_mirror_maker.py checks all of it against Apache Kafka's MirrorMaker on real brokers.)"""

import subprocess
import sys

import pytest

from kfk.common.structs import TopicPartition
from kfk.connect.mirror.checkpoint import group_partitions
from kfk.connect.mirror.config import CHECKPOINT_CONFIG_DEF, SOURCE_CONFIG_DEF, MirrorConfig
from kfk.connect.mirror.mirror_maker import MirrorMakerConfig, SourceAndTarget
from kfk.connect.mirror.records import Checkpoint, Heartbeat, OffsetSync
from kfk.connect.mirror.replication_policy import DefaultReplicationPolicy, IdentityReplicationPolicy
from kfk.connect.mirror.source import MirrorSourceConnector, OffsetSyncWriter


def test_record_formats_are_kafkas_protocol_structs():
    sync = OffsetSync(TopicPartition("orders", 2), 10, 7)
    assert sync.record_key() == b"\x00\x06orders\x00\x00\x00\x02"
    assert sync.record_value() == (10).to_bytes(8, "big") + (7).to_bytes(8, "big")
    assert OffsetSync.deserialize(sync.record_key(), sync.record_value()) == sync
    checkpoint = Checkpoint("billing", TopicPartition("A.orders", 0), 40, 39, "meta")
    assert checkpoint.record_key() == b"\x00\x07billing\x00\x08A.orders\x00\x00\x00\x00"
    assert checkpoint.record_value() == b"\x00\x00" + (40).to_bytes(8, "big") + (39).to_bytes(8, "big") + b"\x00\x04meta"
    assert Checkpoint.deserialize(checkpoint.record_key(), checkpoint.record_value()) == checkpoint
    heartbeat = Heartbeat("A", "B", 1_700_000_000_000)
    assert heartbeat.record_key() == b"\x00\x01A\x00\x01B"
    assert heartbeat.record_value() == b"\x00\x00" + (1_700_000_000_000).to_bytes(8, "big")
    assert Heartbeat.deserialize(heartbeat.record_key(), heartbeat.record_value()) == heartbeat
    with pytest.raises(ValueError):
        Checkpoint.deserialize(checkpoint.record_key(), b"\x00\x01" + checkpoint.record_value()[2:])


def test_default_replication_policy_names_and_cycles():
    policy = DefaultReplicationPolicy()
    assert policy.format_remote_topic("A", "orders") == "A.orders"
    assert (policy.topic_source("B.A.orders"), policy.upstream_topic("B.A.orders")) == ("B", "A.orders")
    assert policy.original_topic("B.A.orders") == "orders"
    assert policy.topic_source("orders") is None
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    assert policy.is_heartbeats_topic("A.heartbeats") and not policy.is_heartbeats_topic("heartbeats-x")
    assert all(policy.is_internal_topic(topic) for topic in (
        "mm2-offsets.A.internal", "A.checkpoints.internal", "__consumer_offsets", ".hidden"))
    assert not policy.is_internal_topic("orders.internal")
    dashed = DefaultReplicationPolicy({"replication.policy.separator": "-"})
    assert dashed.format_remote_topic("A", "orders") == "A-orders"
    assert dashed.offset_syncs_topic("B") == "mm2-offset-syncs-B-internal"
    identity = IdentityReplicationPolicy({"source.cluster.alias": "A"})
    assert identity.format_remote_topic("A", "orders") == "orders"
    assert identity.format_remote_topic("A", "heartbeats") == "A.heartbeats"


def test_active_active_flows_never_replicate_back():
    """Flow B->A beside A->B: topics that came from A (at any depth) are cycles, heartbeats are replicated whatever
    the topic filter says, MirrorMaker's and Kafka's internal topics never."""
    connector = MirrorSourceConnector()
    connector.configure({"source.cluster.alias": "B", "target.cluster.alias": "A", "topics": "orders.*, C\\..*"})
    assert [topic for topic in ("orders", "A.orders", "C.A.orders", "C.orders", "heartbeats", "C.heartbeats",
                                "A.heartbeats", "mm2-offset-syncs.A.internal", "B.checkpoints.internal",
                                "__consumer_offsets", "payments")
            if connector.should_replicate_topic(topic)] == ["orders", "C.orders", "heartbeats", "C.heartbeats"]
    assert connector.remote_topic("orders") == "B.orders"


def test_filters_default_to_kafkas_lists():
    config = MirrorConfig({}, CHECKPOINT_CONFIG_DEF)
    topics, groups = config.topic_filter(), config.group_filter()
    assert topics("orders") and not topics("mm2-configs.A.internal") and not topics("x.replica")
    assert not topics("__consumer_offsets")
    assert groups("billing") and not groups("console-consumer-1") and not groups("connect-sink")
    narrow = MirrorConfig({"topics": "orders, pay.*", "topics.exclude": ""}, SOURCE_CONFIG_DEF).topic_filter()
    assert narrow("orders") and narrow("payments") and not narrow("orders2")
    assert not MirrorConfig({"topics": ""}, SOURCE_CONFIG_DEF).topic_filter()("orders")


def test_offset_syncs_follow_kafkas_rules():
    writer = OffsetSyncWriter.PartitionState(max_offset_lag=100)
    assert writer.update(0, 0)  # the first
    writer.should_sync_offsets = False
    assert not writer.update(1, 1)
    assert writer.update(5, 2)  # an upstream offset skipped (e.g. a transaction marker)
    writer.should_sync_offsets = False
    assert writer.update(6, 103)  # 100 downstream offsets past the last sync
    writer.should_sync_offsets = False
    assert writer.update(7, 0)  # the downstream topic was truncated
    assert group_partitions(["a", "b", "c", "d", "e"], 2) == [["a", "b", "c"], ["d", "e"]]


def test_mm2_properties_become_kafkas_herder_and_connector_configs():
    config = MirrorMakerConfig({
        "clusters": "A, B", "A.bootstrap.servers": "a:9092", "B.bootstrap.servers": "b:9092",
        "A->B.enabled": "true", "A->B.topics": "orders", "replication.factor": "1", "tasks.max": "4",
        "B.offset.flush.interval.ms": "1000", "config.storage.replication.factor": "1", "unrelated.key": "x"})
    assert config.cluster_pairs() == [SourceAndTarget("A", "B"), SourceAndTarget("B", "A")]
    worker = config.worker_config(SourceAndTarget("A", "B"))
    assert {key: worker[key] for key in ("bootstrap.servers", "group.id", "config.storage.topic",
                                         "offset.storage.topic", "status.storage.topic", "header.converter",
                                         "offset.flush.interval.ms", "config.storage.replication.factor")} == {
        "bootstrap.servers": "b:9092", "group.id": "A-mm2", "config.storage.topic": "mm2-configs.A.internal",
        "offset.storage.topic": "mm2-offsets.A.internal", "status.storage.topic": "mm2-status.A.internal",
        "header.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        "offset.flush.interval.ms": "1000", "config.storage.replication.factor": "1"}
    source = config.connector_base_config(SourceAndTarget("A", "B"),
                                          "org.apache.kafka.connect.mirror.MirrorSourceConnector")
    assert {key: source[key] for key in ("name", "enabled", "topics", "replication.factor", "tasks.max",
                                         "source.cluster.alias", "target.cluster.bootstrap.servers",
                                         "source.consumer.bootstrap.servers")} == {
        "name": "MirrorSourceConnector", "enabled": "true", "topics": "orders", "replication.factor": "1",
        "tasks.max": "4", "source.cluster.alias": "A", "target.cluster.bootstrap.servers": "b:9092",
        "source.consumer.bootstrap.servers": "a:9092"}
    assert "unrelated.key" not in source
    assert config.connector_base_config(SourceAndTarget("B", "A"), "x.MirrorSourceConnector")["enabled"] == "false"
    assert MirrorMakerConfig({"clusters": "A, B", "emit.heartbeats.enabled": "false"}).cluster_pairs() == []


@pytest.mark.parametrize("properties, expected", [
    ("A.bootstrap.servers=a:1\n", 'Missing required configuration "clusters" which has no default value.'),
    ("clusters=A, B\nemit.heartbeats.enabled=false\n", "No source->target replication flows."),
])
def test_bad_mm2_properties_fail_in_one_line(tmp_path, properties, expected):
    path = tmp_path / "mm2.properties"
    path.write_text(properties)
    result = subprocess.run([sys.executable, "-m", "kfk", "connect-mirror-maker", str(path)], capture_output=True,
                            text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert result.returncode == 1
    assert result.stderr.strip() == f"kfk: {expected}"
