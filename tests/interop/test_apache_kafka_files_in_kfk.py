"""kfk started on a log dir Apache Kafka wrote: it serves every record and the committed offsets.

What kfk needs to start there: nothing changed, nothing created first. Apache Kafka 4.0's KRaft log dir holds
meta.properties (version 1: cluster.id, node.id, directory.id), bootstrap.checkpoint, its checkpoint files, the
partition directories (with partition.metadata naming each topic id) and __cluster_metadata-0, the KRaft metadata
log. kfk's embedded metadata backend replays that same log (Kafka's metadata records), so it learns the topics,
their ids, partitions and configs from it, and keeps the cluster id of meta.properties. The one condition is that
kfk runs as the node.id in meta.properties (1 in both kfk's default and ApacheKafka's). The broker runs on a copy:
kfk appends to the metadata log (a new leader epoch) and to __consumer_offsets.

And one more: the cluster's finalized feature levels must be ones kfk serves. Apache Kafka 4.4 formats at
metadata.version 4.4-IV2 with eligible.leader.replicas.version, share.version and streams.version finalized, which
kfk does not serve (issue 29: metadata.version levels), so the files kfk takes over here are those of an Apache Kafka
4.4 node formatted at kfk's level; on the default ones kfk says which feature it lacks and registers no broker.
"""

from __future__ import annotations

import base64
import re
import shutil
from pathlib import Path
from typing import Callable, Iterator

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicCollection, TopicPartition, Uuid
from confluent_kafka.admin import AdminClient

from kfk.testing.broker import BrokerProcess, BrokerStartError, start_broker
from kfk.testing.plugin import TEST_OVERRIDES

from .conftest import (
    ABORTED_VALUES,
    CODECS,
    COMMITTED_VALUES,
    COMPACTED_RECORDS,
    COMPACTED_TOPIC,
    GROUP,
    GROUP_OFFSETS,
    RECORDS_PER_CODEC,
    SEGMENTED_RECORDS,
    SEGMENTED_TOPIC,
    TRANSACTIONAL_TOPIC,
    WrittenLogDir,
    codec_record,
    codec_topic,
    consume_partition,
    segmented_value,
)

TOPICS = [*map(codec_topic, CODECS), SEGMENTED_TOPIC, COMPACTED_TOPIC, TRANSACTIONAL_TOPIC]


@pytest.fixture
def kfk_on_apache_kafka_files(apache_kafka_written_log_dir_at_kfk_metadata_version: WrittenLogDir, tmp_path: Path,
                              kfk_broker_factory: Callable[..., BrokerProcess]) -> Iterator[str]:
    """A kfk broker whose log.dirs is a copy of Apache Kafka's stopped log dir; yields its bootstrap address."""
    copy = tmp_path / "apache-kafka-logs"
    shutil.copytree(apache_kafka_written_log_dir_at_kfk_metadata_version.path, copy)
    yield kfk_broker_factory({"log.dirs": str(copy)}).bootstrap_servers


def test_kfk_serves_apache_kafkas_files(kfk_on_apache_kafka_files: str,
                                        apache_kafka_written_log_dir_at_kfk_metadata_version: WrittenLogDir) -> None:
    """One broker start for all the checks: starting kfk on the copy is what costs."""
    bootstrap = kfk_on_apache_kafka_files
    written = apache_kafka_written_log_dir_at_kfk_metadata_version
    admin = AdminClient({"bootstrap.servers": bootstrap})
    meta_properties = dict(line.split("=", 1) for line in (written.path / "meta.properties")
                           .read_text().splitlines() if "=" in line and not line.startswith("#"))
    assert admin.describe_cluster().result(30).cluster_id == meta_properties["cluster.id"]

    topics = admin.list_topics(timeout=30).topics
    described = admin.describe_topics(TopicCollection(TOPICS)).items()
    for topic, future in described:
        assert len(topics[topic].partitions) == 1
        partition_metadata = (written.partition_dir(topic) / "partition.metadata").read_text()
        assert f"topic_id: {_kafka_uuid_text(future.result(30).topic_id)}" in partition_metadata.splitlines()

    for codec in CODECS:
        messages = consume_partition(bootstrap, codec_topic(codec))
        assert [(m.offset(), m.key(), m.value(), m.headers()) for m in messages] == [
            (index, *codec_record(codec, index), [("origin", codec.encode())]) for index in range(RECORDS_PER_CODEC)]

    segmented = consume_partition(bootstrap, SEGMENTED_TOPIC)
    assert [m.value() for m in segmented] == [segmented_value(index) for index in range(SEGMENTED_RECORDS)]
    assert [m.offset() for m in segmented] == list(range(SEGMENTED_RECORDS))

    compacted = consume_partition(bootstrap, COMPACTED_TOPIC)
    assert [(m.key(), m.value()) for m in compacted] == COMPACTED_RECORDS

    committed = consume_partition(bootstrap, TRANSACTIONAL_TOPIC, isolation_level="read_committed")
    assert [m.value() for m in committed] == COMMITTED_VALUES
    everything = consume_partition(bootstrap, TRANSACTIONAL_TOPIC)
    assert [m.value() for m in everything] == COMMITTED_VALUES[:2] + ABORTED_VALUES + COMMITTED_VALUES[2:]

    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])[GROUP].result(30)
    assert {(tp.topic, tp.partition): tp.offset for tp in listed.topic_partitions} == GROUP_OFFSETS
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "enable.auto.commit": False})
    try:
        partitions = consumer.committed([TopicPartition(topic, partition) for topic, partition in GROUP_OFFSETS], 30)
    finally:
        consumer.close()
    assert {(tp.topic, tp.partition): tp.offset for tp in partitions} == GROUP_OFFSETS


def test_kfk_names_the_feature_it_lacks_on_apache_kafka_4_4s_default_files(
        apache_kafka_written_log_dir: WrittenLogDir, tmp_path: Path) -> None:
    """Kafka 4.4's default format finalizes share.version 2 and streams.version 1, which kfk does not serve: kfk's
    controller refuses its own broker's registration in Kafka's words, so no broker serves the files, and the files
    stay Apache Kafka's."""
    copy = tmp_path / "apache-kafka-logs"
    shutil.copytree(apache_kafka_written_log_dir.path, copy)
    with pytest.raises(BrokerStartError) as refused:
        start_broker(tmp_path / "kfk", {**TEST_OVERRIDES, "log.dirs": str(copy)}, timeout=8)
    assert re.search(r"Unable to register because the broker does not support finalized version \d of "
                     r"(share|streams)\.version", str(refused.value)), str(refused.value)[-2000:]
    for topic in TOPICS:  # every segment as Apache Kafka left it
        for original in apache_kafka_written_log_dir.files(topic, ".log"):
            assert (copy / original.parent.name / original.name).read_bytes() == original.read_bytes()


def _kafka_uuid_text(topic_id: Uuid) -> str:
    """Kafka's text form of a Uuid (URL-safe base64 without padding); confluent-kafka's str() uses plain base64."""
    raw = b"".join(bits.to_bytes(8, "big", signed=True) for bits in (topic_id.get_most_significant_bits(),
                                                                       topic_id.get_least_significant_bits()))
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")
