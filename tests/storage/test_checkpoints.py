"""Checkpoint files, leader-epoch-checkpoint, partition.metadata and meta.properties in Kafka's text formats."""

from __future__ import annotations

import os
import uuid

import pytest

from kfk.common.structs import TopicPartition
from kfk.errors import InconsistentTopicIdError, KafkaStorageError
from kfk.storage.checkpoint import OffsetCheckpointFile
from kfk.storage.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, EpochEntry, LeaderEpochFileCache
from kfk.storage.log_files import filename_prefix_from_offset, log_delete_dir_name, parse_topic_partition_name
from kfk.storage.meta_properties import MetaProperties, read_properties
from kfk.common.uuids import uuid_from_base64, uuid_to_base64
from kfk.storage.partition_metadata import PartitionMetadataFile


def test_offset_checkpoint_text_format(tmp_path) -> None:
    path = str(tmp_path / "recovery-point-offset-checkpoint")
    checkpoint = OffsetCheckpointFile(path)
    checkpoint.write({TopicPartition("orders", 1): 977, TopicPartition("orders", 0): 1042})
    with open(path) as handle:
        assert handle.read() == "0\n2\norders 0 1042\norders 1 977\n"
    assert checkpoint.read() == {TopicPartition("orders", 0): 1042, TopicPartition("orders", 1): 977}
    assert not os.path.exists(path + ".tmp")


def test_reads_a_kafka_written_checkpoint(tmp_path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text("0\n3\n__consumer_offsets 22 0\nmy-topic 0 15\nmy.topic_2 10 123456789012\n")
    assert OffsetCheckpointFile(str(path)).read() == {
        TopicPartition("__consumer_offsets", 22): 0,
        TopicPartition("my-topic", 0): 15,
        TopicPartition("my.topic_2", 10): 123456789012,
    }
    assert OffsetCheckpointFile(str(tmp_path / "missing")).read() == {}
    empty = tmp_path / "cleaner-offset-checkpoint"  # Apache Kafka 4.4 leaves this one empty when nothing was cleaned
    empty.write_text("")
    assert OffsetCheckpointFile(str(empty)).read() == {}


@pytest.mark.parametrize(
    "text",
    ["1\n0\n", "0\nx\n", "0\n2\norders 0 1\n", "0\n1\norders zero 1\n", "0\n1\norders 0 1 2\n"],
)
def test_malformed_checkpoint_raises_storage_error(tmp_path, text: str) -> None:
    path = tmp_path / "cp"
    path.write_text(text)
    with pytest.raises(KafkaStorageError):
        OffsetCheckpointFile(str(path)).read()


def test_leader_epoch_cache_assign_and_persist(tmp_path) -> None:
    path = str(tmp_path / "leader-epoch-checkpoint")
    cache = LeaderEpochFileCache(path)
    assert cache.assign(0, 0)
    assert not cache.assign(0, 5)  # same epoch, later offset: nothing new
    assert cache.assign(2, 10)
    assert cache.assign(3, 25)
    with open(path) as handle:
        assert handle.read() == "0\n3\n0 0\n2 10\n3 25\n"
    assert LeaderEpochFileCache(path).entries == [EpochEntry(0, 0), EpochEntry(2, 10), EpochEntry(3, 25)]
    # A new epoch at an offset below existing entries removes the contradicted ones.
    cache.assign(4, 20)
    assert cache.entries == [EpochEntry(0, 0), EpochEntry(2, 10), EpochEntry(4, 20)]
    assert cache.epoch_for_offset(15) == 2 and cache.epoch_for_offset(30) == 4


def test_leader_epoch_end_offset_for(tmp_path) -> None:
    cache = LeaderEpochFileCache(str(tmp_path / "leader-epoch-checkpoint"))
    assert cache.end_offset_for(0, 100) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    cache.assign(1, 0)
    cache.assign(3, 40)
    cache.assign(5, 90)
    assert cache.end_offset_for(5, 120) == (5, 120)
    assert cache.end_offset_for(3, 120) == (3, 90)
    assert cache.end_offset_for(4, 120) == (3, 90)
    assert cache.end_offset_for(2, 120) == (1, 40)
    assert cache.end_offset_for(0, 120) == (0, 0)
    assert cache.end_offset_for(6, 120) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    assert cache.end_offset_for(UNDEFINED_EPOCH, 120) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def test_leader_epoch_truncation(tmp_path) -> None:
    cache = LeaderEpochFileCache(str(tmp_path / "leader-epoch-checkpoint"))
    for epoch, offset in ((1, 0), (3, 40), (5, 90)):
        cache.assign(epoch, offset)
    cache.truncate_from_end(90)
    assert cache.entries == [EpochEntry(1, 0), EpochEntry(3, 40)]
    cache.truncate_from_start(50)
    assert cache.entries == [EpochEntry(3, 50)]
    assert LeaderEpochFileCache(cache.checkpoint.path).entries == [EpochEntry(3, 50)]


def test_partition_metadata_format(tmp_path) -> None:
    topic_id = uuid.UUID("1c5d3b2e-4f6a-4b8c-9d0e-1f2a3b4c5d6e")
    metadata = PartitionMetadataFile(str(tmp_path))
    metadata.write(topic_id)
    text = (tmp_path / "partition.metadata").read_text()
    assert text == f"version: 0\ntopic_id: {uuid_to_base64(topic_id)}"
    assert len(uuid_to_base64(topic_id)) == 22 and "=" not in text
    assert metadata.read() == topic_id
    metadata.write(topic_id)
    with pytest.raises(InconsistentTopicIdError):
        metadata.write(uuid.uuid4())
    # Kafka's own example form: URL-safe base64 without padding.
    assert uuid_to_base64(uuid_from_base64("AAAAAAAAAAAAAAAAAAAAAQ")) == "AAAAAAAAAAAAAAAAAAAAAQ"


def test_meta_properties_round_trip_and_java_format(tmp_path) -> None:
    meta = MetaProperties(version=1, cluster_id="Hc8uTNLTQz6dYx8b8Dkh5Q", node_id=1, directory_id="x" * 22)
    meta.write(str(tmp_path))
    lines = (tmp_path / "meta.properties").read_text().splitlines()
    assert lines[0] == "#" and lines[1].startswith("#")
    assert lines[2:] == ["cluster.id=Hc8uTNLTQz6dYx8b8Dkh5Q", "directory.id=" + "x" * 22, "node.id=1", "version=1"]
    assert MetaProperties.read(str(tmp_path)) == meta
    (tmp_path / "zk").mkdir()
    (tmp_path / "zk" / "meta.properties").write_text(
        "#\n#Tue Mar 05 10:00:00 UTC 2024\nbroker.id=7\nversion=0\ncluster.id : abc\\=d\n"
    )
    assert read_properties(str(tmp_path / "zk" / "meta.properties"))["cluster.id"] == "abc=d"
    assert MetaProperties.read(str(tmp_path / "zk")) == MetaProperties(0, "abc=d", 7, None)
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "meta.properties").write_text("version=1\nnode.id=1\n")
    with pytest.raises(KafkaStorageError, match="cluster.id"):
        MetaProperties.read(str(tmp_path / "bad"))
    assert MetaProperties.read(str(tmp_path / "none")) is None


def test_file_and_directory_names() -> None:
    assert filename_prefix_from_offset(368796) == "00000000000000368796"
    assert parse_topic_partition_name("my-topic-12") == TopicPartition("my-topic", 12)
    deleted = log_delete_dir_name(TopicPartition("my-topic", 3))
    assert deleted.startswith("my-topic-3.") and deleted.endswith("-delete")
    assert parse_topic_partition_name(deleted) == TopicPartition("my-topic", 3)
    assert len(log_delete_dir_name(TopicPartition("t" * 249, 3))) <= 255
    for bad in ("nodash", "topic-", "-1", "topic-x"):
        with pytest.raises(ValueError):
            parse_topic_partition_name(bad)
