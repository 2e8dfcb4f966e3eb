"""LogManager: placement across log dirs, checkpoints, clean shutdown, periodic retention/flush, deletion."""

from __future__ import annotations

import os
import uuid

import pytest

from kfk.common.structs import TopicPartition
from kfk.config import LogConfig
from kfk.errors import KafkaStorageError
from kfk.storage.log_manager import LogManager

from .conftest import make_batch, small_config

DAY_MS = 86_400_000


def fill(manager: LogManager, topic_partition: TopicPartition, batches: int, *, timestamp: int = 1_000) -> None:
    log = manager.get_or_create_log(topic_partition, now_ms=0)
    for _ in range(batches):
        log.append_as_leader(make_batch(log.log_end_offset, [os.urandom(200)], timestamp=timestamp), 0, now_ms=0)
    log.update_high_watermark(log.log_end_offset)


def test_new_partitions_go_to_the_dir_with_fewest(tmp_path) -> None:
    dirs = [str(tmp_path / name) for name in ("a", "b", "c")]
    manager = LogManager(dirs, small_config())
    manager.startup(now_ms=0)
    placed = [os.path.dirname(manager.get_or_create_log(TopicPartition("t", p), now_ms=0).dir) for p in range(7)]
    assert placed == [dirs[0], dirs[1], dirs[2], dirs[0], dirs[1], dirs[2], dirs[0]]
    manager.delete_log(TopicPartition("t", 1), now_ms=0)
    assert os.path.dirname(manager.get_or_create_log(TopicPartition("u", 0), now_ms=0).dir) == dirs[1]
    assert os.path.isdir(os.path.join(dirs[0], "t-0"))
    manager.shutdown()


def test_checkpoints_and_clean_shutdown(tmp_path) -> None:
    log_dir = str(tmp_path / "data")
    manager = LogManager([log_dir], small_config())
    manager.startup(now_ms=0)
    fill(manager, TopicPartition("orders", 0), 40)
    fill(manager, TopicPartition("orders", 1), 5)
    manager.get_log(TopicPartition("orders", 0)).maybe_increment_log_start_offset(10)
    manager.shutdown(broker_epoch=42)
    with open(os.path.join(log_dir, "recovery-point-offset-checkpoint")) as handle:
        assert handle.read() == "0\n2\norders 0 40\norders 1 5\n"
    with open(os.path.join(log_dir, "replication-offset-checkpoint")) as handle:
        assert handle.read() == "0\n2\norders 0 40\norders 1 5\n"
    with open(os.path.join(log_dir, "log-start-offset-checkpoint")) as handle:
        assert handle.read() == "0\n1\norders 0 10\n"
    with open(os.path.join(log_dir, ".kafka_cleanshutdown")) as handle:
        assert handle.read() == '{"version":0,"brokerEpoch":42}'  # Kafka's CleanShutdownFileHandler content

    clean = LogManager([log_dir], small_config())
    clean.startup(now_ms=0)
    assert clean.had_clean_shutdown[log_dir] is True
    assert clean.previous_broker_epoch == 42  # what the broker registers as its previous broker epoch
    assert not os.path.exists(os.path.join(log_dir, ".kafka_cleanshutdown"))
    log = clean.get_log(TopicPartition("orders", 0))
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovered_segments) == (10, 40, 40, 0)
    # Crash: no shutdown, so no marker; the next start recovers from the recovery point on.
    log.append_as_leader(make_batch(40, [b"unflushed"]), leader_epoch=0, now_ms=0)
    for opened in clean.all_logs():
        opened.close_handlers()
    crashed = LogManager([log_dir], small_config())
    crashed.startup(now_ms=0)
    assert crashed.had_clean_shutdown[log_dir] is False
    recovered = crashed.get_log(TopicPartition("orders", 0))
    assert recovered.recovered_segments >= 1 and recovered.log_end_offset == 41
    crashed.shutdown()


def test_tick_runs_retention_flush_and_delayed_deletion(tmp_path) -> None:
    log_dir = str(tmp_path / "data")
    config = small_config({"retention.ms": DAY_MS, "file.delete.delay.ms": 60_000, "flush.ms": 1_000})
    manager = LogManager([log_dir], config, retention_check_interval_ms=300_000, flush_check_interval_ms=500)
    manager.startup(now_ms=0)
    fill(manager, TopicPartition("t", 0), 60, timestamp=0)
    log = manager.get_log(TopicPartition("t", 0))
    segments_before = log.number_of_segments
    next_deadline = manager.tick(now_ms=1_000)
    assert log.recovery_point == 60  # flush.ms passed
    assert next_deadline == 1_500
    manager.tick(now_ms=DAY_MS + 300_000)
    assert log.number_of_segments == 1 < segments_before
    deleted = [name for name in os.listdir(log.dir) if name.endswith(".deleted")]
    assert deleted  # renamed, not yet removed
    manager.tick(now_ms=DAY_MS + 300_000 + 59_999)
    assert [name for name in os.listdir(log.dir) if name.endswith(".deleted")]
    manager.tick(now_ms=DAY_MS + 300_000 + 60_000)
    assert not [name for name in os.listdir(log.dir) if name.endswith(".deleted")]
    manager.shutdown()


def test_delete_log_renames_then_removes(tmp_path) -> None:
    log_dir = str(tmp_path / "data")
    manager = LogManager([log_dir], small_config({"file.delete.delay.ms": 1_000}))
    manager.startup(now_ms=0)
    fill(manager, TopicPartition("gone", 3), 5)
    assert manager.delete_log(TopicPartition("gone", 3), now_ms=0)
    names = os.listdir(log_dir)
    assert not os.path.exists(os.path.join(log_dir, "gone-3"))
    assert any(name.startswith("gone-3.") and name.endswith("-delete") for name in names)
    manager.tick(now_ms=1_000)
    assert not any(name.endswith("-delete") for name in os.listdir(log_dir))
    # A `-delete` folder left by a crash is removed at startup.
    os.makedirs(os.path.join(log_dir, "old-0.0123456789abcdef0123456789abcdef-delete"))
    manager.shutdown()
    again = LogManager([log_dir], small_config())
    again.startup(now_ms=0)
    assert not any(name.endswith("-delete") for name in os.listdir(log_dir))
    assert again.get_log(TopicPartition("gone", 3)) is None
    again.shutdown()


def test_a_stray_log_is_renamed_and_kept_for_the_operator(tmp_path) -> None:
    log_dir = str(tmp_path / "data")
    manager = LogManager([log_dir], small_config({"file.delete.delay.ms": 0}))
    manager.startup(now_ms=0)
    fill(manager, TopicPartition("gone", 0), 5)
    fill(manager, TopicPartition("kept", 0), 2)
    old_dir = manager.get_log(TopicPartition("gone", 0)).dir
    segment_bytes = sorted(os.path.getsize(os.path.join(old_dir, name)) for name in os.listdir(old_dir)
                           if name.endswith(".log"))
    stray_dir = manager.mark_stray(TopicPartition("gone", 0))
    assert manager.mark_stray(TopicPartition("gone", 0)) is None
    assert os.path.dirname(stray_dir) == log_dir and not os.path.exists(old_dir)
    assert os.path.basename(stray_dir).startswith("gone-0.") and stray_dir.endswith("-stray")
    assert manager.get_log(TopicPartition("gone", 0)) is None
    with open(os.path.join(log_dir, "recovery-point-offset-checkpoint")) as handle:
        assert [line.split()[0] for line in handle.read().splitlines()[2:]] == ["kept"]
    manager.tick(now_ms=DAY_MS)  # nothing deletes it, not even with file.delete.delay.ms 0
    assert sorted(os.path.getsize(os.path.join(stray_dir, name)) for name in os.listdir(stray_dir)
                  if name.endswith(".log")) == segment_bytes
    manager.shutdown()
    # A restart leaves it alone: not loaded, not removed; a new log of the same partition starts empty beside it
    again = LogManager([log_dir], small_config())
    again.startup(now_ms=0)
    assert again.get_log(TopicPartition("gone", 0)) is None and os.path.isdir(stray_dir)
    assert again.get_or_create_log(TopicPartition("gone", 0), now_ms=0).log_end_offset == 0
    again.shutdown()


def test_meta_properties_and_topic_id(tmp_path) -> None:
    log_dir = str(tmp_path / "data")
    manager = LogManager([log_dir], LogConfig())
    manager.startup(now_ms=0, node_id=1, cluster_id="Hc8uTNLTQz6dYx8b8Dkh5Q")
    topic_id = uuid.uuid4()
    log = manager.get_or_create_log(TopicPartition("t", 0), now_ms=0, topic_id=topic_id)
    assert log.partition_metadata.read() == topic_id
    manager.shutdown()
    with open(os.path.join(log_dir, "meta.properties")) as handle:
        text = handle.read()
    assert "node.id=1" in text and "cluster.id=Hc8uTNLTQz6dYx8b8Dkh5Q" in text and "version=1" in text
    other = LogManager([log_dir], LogConfig())
    with pytest.raises(KafkaStorageError, match="cluster.id"):
        other.startup(now_ms=0, node_id=1, cluster_id="AAAAAAAAAAAAAAAAAAAAAA")
    with pytest.raises(KafkaStorageError, match="node id"):
        other.startup(now_ms=0, node_id=2, cluster_id="Hc8uTNLTQz6dYx8b8Dkh5Q")


def test_topic_config_updates_reach_open_logs(tmp_path) -> None:
    manager = LogManager([str(tmp_path / "data")], small_config())
    manager.startup(now_ms=0)
    log = manager.get_or_create_log(TopicPartition("t", 0), now_ms=0)
    compacted = small_config({"cleanup.policy": "compact"})
    manager.update_topic_config("t", compacted)
    assert log.config is compacted
    assert manager.get_or_create_log(TopicPartition("t", 1), now_ms=0).config is compacted
    manager.shutdown()
