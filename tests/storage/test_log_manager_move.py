"""LogManager.move_log: a partition's log moves to another log dir while appends and reads go on."""

from __future__ import annotations

import os
import threading

import pytest

from kfk.common.structs import TopicPartition
from kfk.errors import KafkaStorageError, LogDirNotFoundError
from kfk.storage.fetch_data_info import FetchIsolation
from kfk.storage.log_files import log_future_dir_name
from kfk.storage.log_manager import LogManager

from .conftest import make_batch, read_all, small_config

PARTITION = TopicPartition("moving", 0)


def test_a_log_moves_to_another_dir_while_appends_go_on_and_stays_there_after_a_restart(tmp_path) -> None:
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    manager = LogManager([first, second], small_config())
    manager.startup(now_ms=0)
    log = manager.get_or_create_log(PARTITION, now_ms=0)
    assert os.path.dirname(log.dir) == first
    for index in range(100):  # 4 KiB segments: about 25 closed ones to copy
        log.append_as_leader(make_batch(0, [b"before-%d" % index + os.urandom(100)]), 3, now_ms=0)
    log.maybe_assign_epoch_start_offset(4)
    stop = threading.Event()
    appended: list[int] = []
    futures_seen: set[tuple[TopicPartition, str]] = set()

    def produce() -> None:
        while not stop.is_set():
            info = log.append_as_leader(make_batch(0, [b"during" + os.urandom(100)]), 4, now_ms=0)
            appended.append(info.first_offset)
            log.update_high_watermark(log.log_end_offset)
            futures_seen.update((tp, log_dir) for tp, (log_dir, _) in manager.future_log_sizes().items())

    producer = threading.Thread(target=produce)
    producer.start()
    try:
        assert manager.move_log(PARTITION, second, now_ms=0) is True
    finally:
        stop.set()
        producer.join()
    assert appended, "appends went on during the move"
    assert futures_seen == {(PARTITION, second)}  # the future replica, while it was copied
    assert manager.future_log_sizes() == {}
    assert manager.get_log(PARTITION) is log and log.dir == os.path.join(second, "moving-0")
    assert not os.path.exists(os.path.join(first, "moving-0"))
    (retired,) = [name for name in os.listdir(first) if name.endswith("-delete")]
    manager.tick(now_ms=0)  # file.delete.delay.ms is 0 here: the old folder goes at the next tick
    assert not os.path.exists(os.path.join(first, retired))
    assert not [name for name in os.listdir(second) if name.endswith("-future")]
    # the log goes on in its new folder: appends, rolls, reads of every record
    log.append_as_leader(make_batch(0, [b"after"]), 4, now_ms=0)
    log.update_high_watermark(log.log_end_offset)
    records = read_all(log, FetchIsolation.HIGH_WATERMARK)
    assert [record.offset for record in records] == list(range(log.log_end_offset))
    assert records[-1].value == b"after" and records[0].value.startswith(b"before-0")
    end, high_watermark = log.log_end_offset, log.high_watermark
    assert manager.move_log(PARTITION, second, now_ms=0) is False  # already there
    manager.shutdown()

    with open(os.path.join(second, "replication-offset-checkpoint")) as handle:
        assert f"moving 0 {high_watermark}" in handle.read()
    with open(os.path.join(first, "replication-offset-checkpoint")) as handle:
        assert "moving" not in handle.read()
    restarted = LogManager([first, second], small_config())
    restarted.startup(now_ms=0)
    reopened = restarted.get_log(PARTITION)
    assert reopened.dir == os.path.join(second, "moving-0")
    assert (reopened.log_end_offset, reopened.high_watermark) == (end, high_watermark)
    assert reopened.latest_epoch() == 4
    assert [record.value for record in read_all(reopened)] == [record.value for record in records]
    restarted.shutdown()


def test_a_move_to_an_unknown_dir_or_of_an_unknown_partition_fails(tmp_path) -> None:
    manager = LogManager([str(tmp_path / "a"), str(tmp_path / "b")], small_config())
    manager.startup(now_ms=0)
    manager.get_or_create_log(PARTITION, now_ms=0)
    with pytest.raises(LogDirNotFoundError):
        manager.move_log(PARTITION, str(tmp_path / "c"), now_ms=0)
    with pytest.raises(KafkaStorageError):
        manager.move_log(TopicPartition("other", 0), str(tmp_path / "b"), now_ms=0)
    manager.shutdown()


def test_a_failed_copy_leaves_the_log_where_it_was_and_no_future_folder(tmp_path) -> None:
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    manager = LogManager([first, second], small_config())
    manager.startup(now_ms=0)
    log = manager.get_or_create_log(PARTITION, now_ms=0)
    for _ in range(30):
        log.append_as_leader(make_batch(0, [os.urandom(200)]), 0, now_ms=0)
    manager.abort_log_dir_moves()  # as at shutdown: the copy stops at its first file
    with pytest.raises(KafkaStorageError, match="aborted"):
        manager.move_log(PARTITION, second, now_ms=0)
    assert log.dir == os.path.join(first, "moving-0")
    assert [name for name in os.listdir(second) if name.startswith("moving")] == []
    log.append_as_leader(make_batch(0, [b"still here"]), 0, now_ms=0)
    assert read_all(log)[-1].value == b"still here"
    manager.shutdown()


def test_a_future_folder_left_by_a_crash_during_a_move_is_removed_at_startup(tmp_path) -> None:
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    manager = LogManager([first, second], small_config())
    manager.startup(now_ms=0)
    log = manager.get_or_create_log(PARTITION, now_ms=0)
    for _ in range(30):
        log.append_as_leader(make_batch(0, [os.urandom(200)]), 0, now_ms=0)
    end = log.log_end_offset
    copy = log.start_copy(os.path.join(second, log_future_dir_name(PARTITION)))
    copy.copy_closed_segments(log.dir, threading.Event())  # the broker dies here, before the swap
    manager.shutdown()
    restarted = LogManager([first, second], small_config())
    restarted.startup(now_ms=0)
    assert not [name for name in os.listdir(second) if name.startswith("moving")]
    assert restarted.get_log(PARTITION).dir == os.path.join(first, "moving-0")
    assert restarted.get_log(PARTITION).log_end_offset == end
    restarted.shutdown()
