"""The cleaner in a broker's storage: cleaning states (abort-and-pause waits for a running cleaning), checkpoints kept
right through truncation and deletion, tombstones that expire without new dirty data, the I/O throttle, and the
cleaner threads the LogManager runs."""

from __future__ import annotations

import os
import sys
import threading
import time

from kfk.common.structs import TopicPartition
from kfk.config import BrokerConfig
from kfk.storage.cleaner import LogCleaner
from kfk.storage.cleaner_manager import CleaningState, LogCleanerManager, Throttler
from kfk.storage.cleaner_threads import CleanerConfig
from kfk.storage.log import Log
from kfk.storage.log_manager import LogManager

from .conftest import read_all, small_config
from .test_cleaner import COMPACT, keyed_workload

TOPIC_PARTITION = TopicPartition("compacted", 0)


def checkpoint_of(log_dir, topic_partition: TopicPartition) -> int | None:
    path = os.path.join(log_dir, "cleaner-offset-checkpoint")
    if not os.path.exists(path):
        return None
    for line in open(path).read().splitlines()[2:]:
        topic, partition, offset = line.split()
        if TopicPartition(topic, int(partition)) == topic_partition:
            return int(offset)
    return None


def test_abort_and_pause_waits_for_the_running_cleaning_and_leaves_the_log_as_it_was(tmp_path) -> None:
    log = Log.open(str(tmp_path / "compacted-0"), small_config(COMPACT), now_ms=0)
    keyed_workload(log, 400, seed=11)
    before = read_all(log)
    entered, release = threading.Event(), threading.Event()

    def sleep(seconds: float) -> None:  # the throttle holds the cleaner mid-cleaning until the test lets it go
        entered.set()
        release.wait(10)

    ticks = iter(range(0, 10**9, 1_000))
    manager = LogCleanerManager()
    cleaner = LogCleaner(manager, Throttler(1.0, clock_ms=lambda: next(ticks), sleep=sleep))
    results: list[object] = []
    cleaning = threading.Thread(target=lambda: results.append(cleaner.clean(log, now_ms=1_000)))
    cleaning.start()
    assert entered.wait(10)
    aborting = threading.Thread(target=manager.abort_and_pause_cleaning, args=(log.topic_partition,))
    aborting.start()
    time.sleep(0.2)
    assert aborting.is_alive(), "abort_and_pause_cleaning returned while the cleaning was still running"
    assert manager.state(log.topic_partition) == (CleaningState.ABORTED, 0)
    release.set()
    aborting.join(10)
    cleaning.join(10)
    assert results == [None]
    assert manager.state(log.topic_partition) == (CleaningState.PAUSED, 1)
    assert read_all(log) == before
    assert not [name for name in os.listdir(log.dir) if name.endswith((".cleaned", ".swap"))]
    assert cleaner.clean(log, now_ms=1_000) is None  # paused: not cleaned
    manager.resume_cleaning(log.topic_partition)
    assert manager.state(log.topic_partition) is None
    assert cleaner.clean(log, now_ms=1_000) is not None
    assert len(read_all(log)) < len(before)
    log.close()


def test_truncation_and_deletion_through_the_log_manager_fix_the_cleaner_checkpoint(tmp_path) -> None:
    log_manager = LogManager([str(tmp_path)], small_config(COMPACT),
                             cleaner_config=CleanerConfig(enable_cleaner=False))
    log_manager.startup(now_ms=0)
    log = log_manager.get_or_create_log(TOPIC_PARTITION, now_ms=0)
    keyed_workload(log, 300, seed=12)
    stats = LogCleaner(log_manager.cleaner_manager).clean(log, now_ms=1_000)
    assert stats is not None and checkpoint_of(tmp_path, TOPIC_PARTITION) == stats.end_offset
    target = stats.end_offset - 5
    log.update_high_watermark(target)  # a follower truncates only above its high watermark
    assert log_manager.truncate_to(TOPIC_PARTITION, target, now_ms=2_000)
    assert log.log_end_offset <= target  # compaction left holes: the cut falls on a kept batch's boundary
    assert checkpoint_of(tmp_path, TOPIC_PARTITION) == log.log_end_offset
    assert log_manager.cleaner_manager.state(TOPIC_PARTITION) is None  # resumed after the truncation
    assert log_manager.delete_log(TOPIC_PARTITION, now_ms=3_000)
    assert checkpoint_of(tmp_path, TOPIC_PARTITION) is None
    log_manager.shutdown()


def test_tombstones_past_their_delete_horizon_make_a_log_cleanable_without_dirty_data(tmp_path) -> None:
    log = Log.open(str(tmp_path / "compacted-0"), small_config(COMPACT), now_ms=0)
    keyed_workload(log, 400, seed=13, tombstone_rate=0.3)
    cleaner = LogCleaner()
    first = cleaner.clean_filthiest_log([log], now_ms=1_000)
    assert first is not None and first.earliest_delete_horizon_ms == 1_000 + 10_000

    def tombstones() -> int:
        return sum(1 for record in read_all(log) if record.value is None and record.offset < first.end_offset)

    assert tombstones() > 0
    assert cleaner.clean_filthiest_log([log], now_ms=10_999) is None  # nothing dirty, horizon not reached
    second = cleaner.clean_filthiest_log([log], now_ms=11_000)
    assert second is not None and second.earliest_delete_horizon_ms is None
    assert tombstones() == 0
    assert cleaner.clean_filthiest_log([log], now_ms=20_000) is None  # nothing left to expire
    log.close()


def test_cleaner_settings_default_to_kafkas() -> None:
    defaults = CleanerConfig.from_broker_config(BrokerConfig({"process.roles": "broker", "node.id": "1"}))
    assert defaults == CleanerConfig(num_threads=1, backoff_ms=15_000, max_io_bytes_per_second=sys.float_info.max,
                                     enable_cleaner=True)
    assert CleanerConfig() == defaults
    custom = CleanerConfig.from_broker_config(BrokerConfig({
        "process.roles": "broker", "node.id": "1", "log.cleaner.threads": "3", "log.cleaner.backoff.ms": "50",
        "log.cleaner.io.max.bytes.per.second": "1048576", "log.cleaner.enable": "false"}))
    assert custom == CleanerConfig(num_threads=3, backoff_ms=50, max_io_bytes_per_second=1048576.0,
                                   enable_cleaner=False)
    assert LogManager(["/nonexistent"], cleaner_config=custom).cleaner is None


def test_the_throttler_sleeps_to_keep_the_average_rate() -> None:
    now = [0.0]
    slept: list[float] = []
    throttler = Throttler(1_000.0, clock_ms=lambda: now[0], sleep=slept.append)
    assert throttler.maybe_throttle(1_000) == 0.0  # the window is not over yet
    now[0] = 300.0
    assert throttler.maybe_throttle(0) == 700.0  # 1,000 bytes at 1,000 B/s take a second: 700 ms more
    assert slept == [0.7]
    now[0] = 1_000.0
    assert throttler.maybe_throttle(100) == 0.0  # well under the rate


def test_the_log_manager_runs_the_cleaner_threads(tmp_path) -> None:
    before = set(threading.enumerate())  # other tests' log managers in this process may still run cleaners
    log_manager = LogManager([str(tmp_path)], small_config(COMPACT),
                             cleaner_config=CleanerConfig(num_threads=2, backoff_ms=20))
    log_manager.startup(now_ms=0)
    cleaners = [thread for thread in threading.enumerate()
                if thread not in before and thread.name.startswith("kafka-log-cleaner-thread")]
    assert len(cleaners) == 2
    logs, latest = [], []
    for partition in range(3):  # the threads clean while these are appended
        log = log_manager.get_or_create_log(TopicPartition("compacted", partition), now_ms=0)
        latest.append(keyed_workload(log, 300, seed=20 + partition))
        logs.append(log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if all(checkpoint_of(tmp_path, log.topic_partition) == log.active_segment.base_offset for log in logs):
            break
        time.sleep(0.05)
    else:
        raise AssertionError("the cleaner threads did not clean every log")
    assert all(len(read_all(log)) < 300 for log in logs)  # 300 records over 25 keys each, compacted
    for log, expected in zip(logs, latest, strict=True):
        assert {record.key: (record.offset, record.value) for record in read_all(log)} == expected
    log_manager.shutdown()
    assert not [thread for thread in cleaners if thread.is_alive()]
