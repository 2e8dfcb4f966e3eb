"""Log: appends (leader and follower), reads with isolation, rolling, truncation, retention, ListOffsets."""

from __future__ import annotations

import os

import pytest

from kfk.common.constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from kfk.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordTooLargeError,
)
from kfk.records import iter_batches
from kfk.storage.fetch_data_info import FetchIsolation
from kfk.storage.log import Log, UnexpectedAppendOffsetError
from kfk.storage.producer_state import AppendOrigin

from .conftest import make_batch, make_marker, read_all, small_config

DAY_MS = 86_400_000


def append_values(log: Log, count: int, *, now_ms: int = 0, size: int = 100, timestamp: int = 1_000,
                  per_batch: int = 1) -> None:
    for _ in range(count):
        values = [os.urandom(size) for _ in range(per_batch)]
        log.append_as_leader(make_batch(log.log_end_offset, values, timestamp=timestamp), leader_epoch=0, now_ms=now_ms)


def test_append_and_read_back(log_dir) -> None:
    log = Log.open(log_dir, small_config(), now_ms=0)
    values = [f"value-{index}".encode() for index in range(200)]
    for start in range(0, 200, 4):
        info = log.append_as_leader(make_batch(log.log_end_offset, values[start:start + 4]), leader_epoch=0, now_ms=0)
        assert (info.first_offset, info.last_offset) == (start, start + 3)
    assert log.log_end_offset == 200
    assert log.number_of_segments > 1
    assert [record.value for record in read_all(log)] == values
    assert [record.offset for record in read_all(log, start=77)] == list(range(77, 200))
    log.close()


def test_read_returns_a_file_region_not_bytes(log_dir) -> None:
    log = Log.open(log_dir, small_config(), now_ms=0)
    append_values(log, 5)
    log.update_high_watermark(5)
    info = log.read(2, 1 << 20)
    assert info.fetch_offset_metadata.message_offset == 2
    assert info.records.length > 0 and isinstance(info.records.fileno(), int)
    first = next(iter_batches(info.records.read_bytes()))
    assert first.base_offset == 2
    log.close()


def test_reads_stop_at_high_watermark_and_bounds(log_dir) -> None:
    log = Log.open(log_dir, small_config(), now_ms=0)
    append_values(log, 10)
    assert read_all(log, FetchIsolation.HIGH_WATERMARK) == []
    log.update_high_watermark(6)
    assert [record.offset for record in read_all(log, FetchIsolation.HIGH_WATERMARK)] == list(range(6))
    assert len(read_all(log, FetchIsolation.LOG_END)) == 10
    assert log.read(10, 100).records.length == 0
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, 100)
    min_one = log.read(0, 1, FetchIsolation.LOG_END, min_one_message=True)
    assert min_one.records.length > 1 and min_one.first_entry_incomplete is False
    none = log.read(0, 1, FetchIsolation.LOG_END, min_one_message=False)
    assert none.first_entry_incomplete is True
    log.close()


def test_append_offsets_must_continue_the_log(log_dir) -> None:
    log = Log.open(log_dir, small_config(), now_ms=0)
    append_values(log, 3)
    # The leader assigns offsets from its end, whatever the batch says (Kafka's appendAsLeader).
    assert log.append_as_leader(make_batch(5, [b"x"]), leader_epoch=0, now_ms=0).first_offset == 3
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(make_batch(1, [b"x"]), now_ms=0)
    # A follower may skip offsets (a compacted leader), never go back.
    log.append_as_follower(make_batch(10, [b"x", b"y"]), now_ms=0)
    assert log.log_end_offset == 12
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(make_batch(12, [b"x"])[:-3], leader_epoch=0, now_ms=0)
    corrupted = bytearray(make_batch(12, [b"abc"]))
    corrupted[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_follower(bytes(corrupted), now_ms=0)
    assert log.log_end_offset == 12
    log.close()


def test_batch_larger_than_max_message_bytes_is_refused(log_dir) -> None:
    log = Log.open(log_dir, small_config({"max.message.bytes": 500}), now_ms=0)
    with pytest.raises(RecordTooLargeError):
        log.append_as_leader(make_batch(0, [b"x" * 1000]), leader_epoch=0, now_ms=0)
    assert log.log_end_offset == 0
    log.close()


def test_roll_on_size_time_and_index_full(log_dir, tmp_path) -> None:
    log = Log.open(log_dir, small_config(), now_ms=0)
    append_values(log, 40, size=200)
    assert log.number_of_segments >= 2
    assert all(segment.size <= 4096 for segment in log.segments)

    timed = Log.open(str(tmp_path / "timed-0"), small_config({"segment.ms": 1000}), now_ms=0)
    timed.append_as_leader(make_batch(0, [b"a"], timestamp=10_000), leader_epoch=0, now_ms=0)
    timed.append_as_leader(make_batch(1, [b"b"], timestamp=10_500), leader_epoch=0, now_ms=0)
    assert timed.number_of_segments == 1
    timed.append_as_leader(make_batch(2, [b"c"], timestamp=11_001), leader_epoch=0, now_ms=0)
    assert timed.number_of_segments == 2 and timed.active_segment.base_offset == 2

    tiny_index = Log.open(str(tmp_path / "tiny-0"), small_config({"segment.index.bytes": 24,
                                                                  "index.interval.bytes": 0}), now_ms=0)
    append_values(tiny_index, 10, size=10)
    assert tiny_index.number_of_segments > 2
    assert [record.offset for record in read_all(tiny_index)] == list(range(10))
    for opened in (log, timed, tiny_index):
        opened.close()


def test_roll_on_offset_overflow(log_dir) -> None:
    log = Log.open(log_dir, small_config(), now_ms=0)
    log.append_as_follower(make_batch(0, [b"a"]), now_ms=0)
    far = 2**31 + 10
    log.append_as_follower(make_batch(far, [b"b"]), now_ms=0)
    assert log.segments.base_offsets == [0, far]
    assert [record.offset for record in read_all(log)] == [0, far]
    log.close()


def test_truncate_inside_a_batch_removes_the_whole_batch(log_dir) -> None:
    log = Log.open(log_dir, small_config(), now_ms=0)
    log.append_as_leader(make_batch(0, [b"a", b"b", b"c"]), leader_epoch=0, now_ms=0)
    log.append_as_leader(make_batch(3, [b"d", b"e", b"f"]), leader_epoch=0, now_ms=0)
    log.truncate_to(4, now_ms=0)
    assert log.log_end_offset == 3
    assert [record.value for record in read_all(log)] == [b"a", b"b", b"c"]
    log.close()


def test_truncate_to_and_fully(log_dir) -> None:
    log = Log.open(log_dir, small_config(), now_ms=0)
    append_values(log, 60, size=200)
    segments_before = log.number_of_segments
    assert log.truncate_to(25, now_ms=0)
    assert log.log_end_offset == 25
    assert log.number_of_segments < segments_before
    assert [record.offset for record in read_all(log)] == list(range(25))
    append_values(log, 5)
    assert [record.offset for record in read_all(log)] == list(range(30))
    assert not log.truncate_to(100, now_ms=0)
    log.truncate_fully_and_start_at(500, now_ms=0)
    assert (log.log_start_offset, log.log_end_offset, log.number_of_segments) == (500, 500, 1)
    append_values(log, 2)
    assert [record.offset for record in read_all(log)] == [500, 501]
    assert sorted(name for name in os.listdir(log_dir) if name.endswith(".log")) == ["00000000000000000500.log"]
    log.close()


def test_delete_records_moves_log_start(log_dir) -> None:
    log = Log.open(log_dir, small_config(), now_ms=0)
    append_values(log, 60, size=200)
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(30)
    log.update_high_watermark(60)
    assert log.maybe_increment_log_start_offset(30)
    assert log.log_start_offset == 30
    with pytest.raises(OffsetOutOfRangeError):
        log.read(29, 100)
    assert [record.offset for record in read_all(log)][:1] == [30]
    deleted = log.delete_old_segments(now_ms=0)
    assert deleted >= 1
    assert log.segments.first_segment.base_offset <= 30 < log.segments.base_offsets[1]
    log.close()


def test_retention_by_time_and_size(log_dir, tmp_path) -> None:
    log = Log.open(log_dir, small_config({"retention.ms": DAY_MS}), now_ms=0)
    for index in range(60):
        log.append_as_leader(make_batch(log.log_end_offset, [os.urandom(200)], timestamp=index * 1000), 0, now_ms=0)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments(now_ms=DAY_MS) == 0
    deleted = log.delete_old_segments(now_ms=DAY_MS + 30_500)
    assert deleted >= 1
    assert all(segment.largest_timestamp >= 30_500 - 1000 for segment in log.segments)
    # Everything expired: a new segment is rolled first, so the active segment is never the one deleted.
    log.delete_old_segments(now_ms=10 * DAY_MS)
    assert log.number_of_segments == 1 and log.active_segment.size == 0
    assert log.log_start_offset == log.log_end_offset == 60

    sized = Log.open(str(tmp_path / "sized-0"), small_config({"retention.bytes": 8000}), now_ms=0)
    append_values(sized, 80, size=200)
    sized.update_high_watermark(sized.log_end_offset)
    sized.delete_old_segments(now_ms=0)
    # Kafka's rule: delete oldest segments while the log stays at or above retention.bytes without them.
    assert sized.size - sized.segments.first_segment.size < 8000 <= sized.size
    assert read_all(sized)[-1].offset == 79
    log.close()
    sized.close()


def test_retention_never_passes_the_high_watermark(log_dir) -> None:
    log = Log.open(log_dir, small_config({"retention.ms": 1}), now_ms=0)
    append_values(log, 60, size=200)
    assert log.delete_old_segments(now_ms=DAY_MS) == 0
    log.update_high_watermark(20)
    log.delete_old_segments(now_ms=DAY_MS)
    assert log.log_start_offset <= 20
    log.close()


def test_offset_for_timestamp(log_dir) -> None:
    log = Log.open(log_dir, small_config(), now_ms=0)
    for index in range(50):
        log.append_as_leader(make_batch(log.log_end_offset, [b"a" * 150, b"b" * 150], timestamp=10_000 + index * 100,
                                        leader_epoch=index // 10), leader_epoch=index // 10, now_ms=0)
    found = log.offset_for_timestamp(10_000 + 2_001)
    assert (found.timestamp, found.offset, found.leader_epoch) == (12_001, 41, 2)
    assert log.offset_for_timestamp(10_000 + 2_000).offset == 40
    assert log.offset_for_timestamp(0).offset == 0
    assert log.offset_for_timestamp(99_999_999) is None
    assert log.offset_for_timestamp(EARLIEST_TIMESTAMP).offset == 0
    assert log.offset_for_timestamp(LATEST_TIMESTAMP).offset == 100
    assert log.offset_for_timestamp(LATEST_TIMESTAMP).leader_epoch == 4
    maximum = log.offset_for_timestamp(MAX_TIMESTAMP)
    assert (maximum.timestamp, maximum.offset) == (10_000 + 4_900 + 1, 99)
    log.close()


def test_leader_epochs_recorded_and_truncated(log_dir) -> None:
    log = Log.open(log_dir, small_config(), now_ms=0)
    for epoch in (0, 0, 1, 3, 3):
        log.append_as_leader(make_batch(log.log_end_offset, [b"x", b"y"], leader_epoch=epoch), leader_epoch=epoch,
                             now_ms=0)
    assert [tuple(entry) for entry in log.leader_epoch_cache.entries] == [(0, 0), (1, 4), (3, 6)]
    assert log.end_offset_for_epoch(1) == (1, 6)
    assert log.end_offset_for_epoch(3) == (3, 10)
    log.truncate_to(6, now_ms=0)
    assert [tuple(entry) for entry in log.leader_epoch_cache.entries] == [(0, 0), (1, 4)]
    with open(os.path.join(log_dir, "leader-epoch-checkpoint")) as handle:
        assert handle.read() == "0\n2\n0 0\n1 4\n"
    log.close()


def test_idempotent_duplicates_and_sequence_checks(log_dir) -> None:
    log = Log.open(log_dir, small_config(), now_ms=0)
    first = make_batch(0, [b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0)
    info = log.append_as_leader(first, leader_epoch=0, now_ms=0)
    assert (info.first_offset, info.last_offset, info.duplicate) == (0, 1, False)
    log.append_as_leader(make_batch(2, [b"c"], producer_id=7, producer_epoch=0, base_sequence=2), 0, now_ms=0)
    retry = log.append_as_leader(make_batch(3, [b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0),
                                 leader_epoch=0, now_ms=0)
    assert (retry.first_offset, retry.last_offset, retry.duplicate) == (0, 1, True)
    assert log.log_end_offset == 3
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(make_batch(3, [b"d"], producer_id=7, producer_epoch=0, base_sequence=5), 0, now_ms=0)
    log.append_as_leader(make_batch(3, [b"e"], producer_id=7, producer_epoch=1, base_sequence=0), 0, now_ms=0)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(make_batch(4, [b"f"], producer_id=7, producer_epoch=0, base_sequence=3), 0, now_ms=0)
    log.close()
    reopened = Log.open(log_dir, small_config(), now_ms=0, had_clean_shutdown=True, recovery_point=4)
    entry = reopened.producer_state.last_entry(7)
    assert (entry.producer_epoch, entry.last_sequence, entry.last_data_offset) == (1, 0, 3)
    with pytest.raises(OutOfOrderSequenceError):
        reopened.append_as_leader(make_batch(4, [b"g"], producer_id=7, producer_epoch=1, base_sequence=2), 0, now_ms=0)
    reopened.append_as_leader(make_batch(4, [b"g"], producer_id=7, producer_epoch=1, base_sequence=1), 0, now_ms=0)
    reopened.close()


def test_transactions_bound_the_last_stable_offset(log_dir) -> None:
    log = Log.open(log_dir, small_config(), now_ms=0)
    log.append_as_leader(make_batch(0, [b"plain"]), leader_epoch=0, now_ms=0)
    log.append_as_leader(make_batch(1, [b"t1", b"t2"], producer_id=5, producer_epoch=0, base_sequence=0,
                                    transactional=True), leader_epoch=0, now_ms=0)
    log.append_as_leader(make_batch(3, [b"other"]), leader_epoch=0, now_ms=0)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 1
    assert [record.value for record in read_all(log, FetchIsolation.TXN_COMMITTED)] == [b"plain"]
    log.append_as_leader(make_marker(4, 5, 0, commit=False), leader_epoch=0, now_ms=0,
                         origin=AppendOrigin.COORDINATOR)
    assert log.last_stable_offset == 1  # decided, but the marker is not yet below the high watermark
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 5
    info = log.read(0, 1 << 20, FetchIsolation.TXN_COMMITTED)
    assert [(txn.producer_id, txn.first_offset) for txn in info.aborted_transactions] == [(5, 1)]
    aborted = log.active_segment.txn_index.all_aborted_txns()
    assert [tuple(txn) for txn in aborted] == [(5, 1, 4, 5)]
    log.close()
    reopened = Log.open(log_dir, small_config(), now_ms=0, had_clean_shutdown=False, recovery_point=0)
    assert [tuple(txn) for txn in reopened.active_segment.txn_index.all_aborted_txns()] == [(5, 1, 4, 5)]
    reopened.close()


def test_flush_moves_the_recovery_point(log_dir) -> None:
    log = Log.open(log_dir, small_config({"flush.messages": 5}), now_ms=0)
    append_values(log, 4)
    assert log.recovery_point == 0
    append_values(log, 1)
    assert log.recovery_point == 5
    timed = small_config({"flush.ms": 1000})
    log.update_config(timed)
    append_values(log, 2)
    assert not log.maybe_flush(now_ms=500)
    assert log.maybe_flush(now_ms=1500) and log.recovery_point == 7
    log.close()


def test_preallocated_segments_are_trimmed_and_recovered(log_dir) -> None:
    config = small_config({"preallocate": True})
    log = Log.open(log_dir, config, now_ms=0)
    append_values(log, 3)
    path = log.active_segment.log.path
    assert os.path.getsize(path) == 4096 > log.active_segment.size
    log.close_handlers()  # a crash: the zeros after the data are still there
    recovered = Log.open(log_dir, config, now_ms=0, had_clean_shutdown=False)
    assert recovered.log_end_offset == 3
    assert os.path.getsize(path) == recovered.active_segment.size
    append_values(recovered, 40, size=200)
    recovered.close()
    sizes = [os.path.getsize(os.path.join(log_dir, name)) for name in os.listdir(log_dir) if name.endswith(".log")]
    assert all(size < 4096 for size in sizes)  # rolled and closed segments are trimmed to their data
    assert len(read_all(Log.open(log_dir, config, now_ms=0, had_clean_shutdown=True))) == 43


def test_control_batches_come_only_from_a_coordinator(log_dir) -> None:
    """Transaction markers go through the same leader append as produce, with origin COORDINATOR: validated,
    given offsets from the log end, and they complete the transaction; a client may not write one."""
    log = Log.open(log_dir, small_config(), now_ms=0)
    log.append_as_leader(make_batch(0, [b"t1", b"t2"], producer_id=5, producer_epoch=0, base_sequence=0,
                                    transactional=True), leader_epoch=0, now_ms=0)
    assert log.first_unstable_offset == 0
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(make_marker(2, 5, 0, commit=True), leader_epoch=0, now_ms=0)
    assert log.log_end_offset == 2
    info = log.append_as_leader(make_marker(40, 5, 0, commit=True, leader_epoch=7), leader_epoch=1, now_ms=0,
                                origin=AppendOrigin.COORDINATOR)
    assert (info.first_offset, info.last_offset, info.last_leader_epoch) == (2, 2, 1)
    log.update_high_watermark(3)
    assert log.first_unstable_offset is None and log.last_stable_offset == 3
    marker = list(iter_batches(log.read(2, 1 << 20, FetchIsolation.LOG_END).records.read_bytes()))[0]
    assert (marker.is_control, marker.base_offset, marker.partition_leader_epoch) == (True, 2, 1)
    log.close()
