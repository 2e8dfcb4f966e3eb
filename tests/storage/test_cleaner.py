"""Compaction: latest value per key, offsets unchanged, tombstones kept delete.retention.ms, transactions,
crash-safe segment swaps."""

from __future__ import annotations

import os
import random
import shutil

from kfk.records import iter_batches
from kfk.storage.cleaner import LogCleaner
from kfk.storage.cleaner_manager import cleanable_offsets
from kfk.storage.fetch_data_info import FetchIsolation
from kfk.storage.log import Log
from kfk.storage.producer_state import AppendOrigin

from .conftest import make_batch, make_marker, read_all, small_config

COMPACT = {"cleanup.policy": "compact", "delete.retention.ms": 10_000, "internal.segment.bytes": 2048}


def keyed_workload(log: Log, count: int, seed: int, keys: int = 25,
                   tombstone_rate: float = 0.15) -> dict[bytes, tuple[int, bytes | None]]:
    """Append `count` single-record batches over `keys` keys; returns key -> (offset, value) of the latest."""
    rng = random.Random(seed)
    latest: dict[bytes, tuple[int, bytes | None]] = {}
    for index in range(count):
        key = f"key-{rng.randrange(keys)}".encode()
        value = None if rng.random() < tombstone_rate else f"value-{index}".encode()
        offset = log.log_end_offset
        log.append_as_leader(make_batch(offset, [value], keys=[key], timestamp=index), leader_epoch=0, now_ms=0)
        latest[key] = (offset, value)
    log.update_high_watermark(log.log_end_offset)
    return latest


def test_compacts_to_the_latest_value_per_key_with_offsets_unchanged(log_dir) -> None:
    log = Log.open(log_dir, small_config(COMPACT), now_ms=0)
    latest = keyed_workload(log, 600, seed=3)
    before = read_all(log)
    cleaner = LogCleaner()
    stats = cleaner.clean(log, now_ms=1_000)
    end = stats.end_offset
    assert end == log.active_segment.base_offset
    after = read_all(log)
    cleaned = [record for record in after if record.offset < end]
    # Exactly one record per key in the cleaned part, the latest one, at its original offset.
    latest_below_end = {}
    for record in before:
        if record.offset < end:
            latest_below_end[record.key] = (record.offset, record.value)
    assert {record.key: (record.offset, record.value) for record in cleaned} == latest_below_end
    assert len(cleaned) == len(latest_below_end)
    # The uncleaned part is untouched.
    assert [record for record in after if record.offset >= end] == [record for record in before if record.offset >= end]
    assert log.log_end_offset == 600
    # A consumer's view (latest per key over the whole log) is what the producer wrote last.
    view = {}
    for record in after:
        view[record.key] = (record.offset, record.value)
    assert view == latest
    log.close()


def test_tombstones_go_only_after_delete_retention_ms(log_dir) -> None:
    log = Log.open(log_dir, small_config(COMPACT), now_ms=0)
    keyed_workload(log, 400, seed=4, tombstone_rate=0.3)
    cleaner = LogCleaner()
    cleaner.clean(log, now_ms=1_000)
    end = cleaner.stats[-1].end_offset

    def tombstones() -> int:
        return sum(1 for record in read_all(log) if record.value is None and record.offset < end)

    kept = tombstones()
    assert kept > 0
    cleaner.clean(log, now_ms=1_000 + 9_999)  # within delete.retention.ms of the first cleaning
    assert tombstones() == kept
    cleaner.clean(log, now_ms=1_000 + 10_000)
    assert tombstones() == 0
    # Values survive; only tombstones went.
    assert all(record.value is not None for record in read_all(log) if record.offset < end)
    log.close()


def test_reopened_log_reads_the_same_after_cleaning(log_dir) -> None:
    log = Log.open(log_dir, small_config(COMPACT), now_ms=0)
    keyed_workload(log, 300, seed=5)
    LogCleaner().clean(log, now_ms=0)
    expected = read_all(log)
    log.close()
    for clean in (True, False):
        reopened = Log.open(log_dir, small_config(COMPACT), now_ms=0, had_clean_shutdown=clean)
        assert read_all(reopened) == expected
        reopened.close()


def test_dirty_ratio_and_compaction_lag_choose_what_is_cleanable(tmp_path) -> None:
    cleaner = LogCleaner()
    busy = Log.open(str(tmp_path / "busy-0"), small_config(COMPACT), now_ms=0)
    keyed_workload(busy, 300, seed=6)
    lagged = Log.open(str(tmp_path / "lagged-0"), small_config({**COMPACT, "min.compaction.lag.ms": 10**9}),
                      now_ms=0)
    keyed_workload(lagged, 300, seed=7)
    plain = Log.open(str(tmp_path / "plain-0"), small_config(), now_ms=0)
    keyed_workload(plain, 300, seed=8)
    chosen = cleaner.manager.grab_filthiest_compacted_log([busy, lagged, plain], now_ms=1_000)
    assert chosen is not None and chosen.log is busy and chosen.cleanable_ratio == 1.0
    assert cleanable_offsets(lagged, None, now_ms=1_000).first_uncleanable_offset == 0
    cleaner.clean_log(chosen, now_ms=1_000)
    with open(tmp_path / "cleaner-offset-checkpoint") as handle:
        assert handle.read() == f"0\n1\nbusy 0 {busy.active_segment.base_offset}\n"
    assert cleaner.manager.grab_filthiest_compacted_log([busy, lagged, plain], now_ms=1_000) is None
    for log in (busy, lagged, plain):
        log.close()


def test_aborted_transactions_are_removed_and_markers_kept_while_needed(log_dir) -> None:
    log = Log.open(log_dir, small_config(COMPACT), now_ms=0)
    log.append_as_leader(make_batch(0, [b"committed-1"], keys=[b"a"], producer_id=1, producer_epoch=0,
                                    base_sequence=0, transactional=True), leader_epoch=0, now_ms=0)
    log.append_as_leader(make_batch(1, [b"aborted"], keys=[b"b"], producer_id=2, producer_epoch=0,
                                    base_sequence=0, transactional=True), leader_epoch=0, now_ms=0)
    log.append_as_leader(make_marker(2, 1, 0, commit=True), leader_epoch=0, now_ms=0,
                         origin=AppendOrigin.COORDINATOR)
    log.append_as_leader(make_marker(3, 2, 0, commit=False), leader_epoch=0, now_ms=0,
                         origin=AppendOrigin.COORDINATOR)
    log.append_as_leader(make_batch(4, [b"plain"], keys=[b"c"]), leader_epoch=0, now_ms=0)
    # Producer 2 goes on (so its aborted batch is not the batch that keeps its idempotence state).
    log.append_as_leader(make_batch(5, [b"again"], keys=[b"e"], producer_id=2, producer_epoch=0,
                                    base_sequence=1, transactional=True), leader_epoch=0, now_ms=0)
    log.append_as_leader(make_marker(6, 2, 0, commit=True), leader_epoch=0, now_ms=0,
                         origin=AppendOrigin.COORDINATOR)
    log.roll(now_ms=0)
    log.append_as_leader(make_batch(7, [b"tail"], keys=[b"d"]), leader_epoch=0, now_ms=0)
    log.update_high_watermark(log.log_end_offset)
    cleaner = LogCleaner()
    cleaner.clean(log, now_ms=1_000)
    data = [(record.offset, record.value) for record in read_all(log)]
    assert data == [(0, b"committed-1"), (4, b"plain"), (5, b"again"), (7, b"tail")]
    # The abort marker stays: this pass removed its transaction's data (Kafka drops it in a later pass).
    control_offsets = [batch.base_offset for batch in _batches(log) if batch.is_control]
    assert 3 in control_offsets
    cleaner.clean(log, now_ms=2_000)
    cleaner.clean(log, now_ms=2_000 + 10_000)
    control_offsets = [batch.base_offset for batch in _batches(log) if batch.is_control and batch.records_count]
    assert 3 not in control_offsets
    assert [record.value for record in read_all(log, FetchIsolation.LOG_END)] == [b"committed-1", b"plain", b"again",
                                                                                 b"tail"]
    log.close()


def test_last_batch_of_an_active_producer_is_kept_empty(log_dir) -> None:
    log = Log.open(log_dir, small_config(COMPACT), now_ms=0)
    log.append_as_leader(make_batch(0, [b"old"], keys=[b"k"], producer_id=9, producer_epoch=0, base_sequence=0),
                         leader_epoch=0, now_ms=0)
    log.append_as_leader(make_batch(1, [b"new"], keys=[b"k"]), leader_epoch=0, now_ms=0)
    log.roll(now_ms=0)
    log.append_as_leader(make_batch(2, [b"x"], keys=[b"x"]), leader_epoch=0, now_ms=0)
    log.update_high_watermark(log.log_end_offset)
    LogCleaner().clean(log, now_ms=0)
    first = _batches(log)[0]
    assert (first.base_offset, first.records_count, first.producer_id, first.base_sequence) == (0, 0, 9, 0)
    assert [record.value for record in read_all(log)] == [b"new", b"x"]
    log.close()
    reopened = Log.open(log_dir, small_config(COMPACT), now_ms=0)
    assert reopened.producer_state.last_entry(9).last_sequence == 0
    reopened.close()


def test_crash_during_cleaning_is_undone_or_completed(log_dir, tmp_path) -> None:
    log = Log.open(log_dir, small_config(COMPACT), now_ms=0)
    keyed_workload(log, 300, seed=9)
    before = read_all(log)
    log.close()
    backup = str(tmp_path / "backup")
    shutil.copytree(log_dir, backup)
    # Cleaned files left by a crash before the swap: removed at load, the log is as it was.
    for name in os.listdir(log_dir):
        if name.endswith(".log"):
            shutil.copy(os.path.join(log_dir, name), os.path.join(log_dir, name + ".cleaned"))
    reopened = Log.open(log_dir, small_config(COMPACT), now_ms=0)
    assert not any(name.endswith(".cleaned") for name in os.listdir(log_dir))
    assert read_all(reopened) == before
    LogCleaner().clean(reopened, now_ms=0)
    after = read_all(reopened)
    reopened.close()
    # A crash after `.swap` was written but before the old segments were renamed: the load completes the swap.
    cleaned_files = {name: open(os.path.join(log_dir, name), "rb").read() for name in os.listdir(log_dir)
                     if name.endswith((".log", ".index", ".timeindex"))}
    shutil.rmtree(log_dir)
    shutil.copytree(backup, log_dir)
    first_base = min(int(name.split(".")[0]) for name in cleaned_files)
    for name, content in cleaned_files.items():
        if int(name.split(".")[0]) == first_base:
            with open(os.path.join(log_dir, name + ".swap"), "wb") as handle:
                handle.write(content)
    swapped = Log.open(log_dir, small_config(COMPACT), now_ms=0)
    records = read_all(swapped)
    assert not any(name.endswith(".swap") for name in os.listdir(log_dir))
    first_segment_end = min(base for base in swapped.segments.base_offsets if base > first_base)
    assert [r for r in records if r.offset < first_segment_end] == [r for r in after if r.offset < first_segment_end]
    swapped.close()


def _batches(log: Log) -> list:
    batches = []
    for segment in log.segments:
        with open(segment.log.path, "rb") as handle:
            data = handle.read()
        batches.extend(iter_batches(data))
    return batches
