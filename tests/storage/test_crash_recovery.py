"""Crash tests: SIGKILL a writer process mid-append, tear and damage files, then reopen.

After every reopen: no acknowledged (flushed) record is lost, every record reads back with its value, the log ends
at a batch boundary, and the indexes match what Kafka's rules produce for the data (checked against an independent
walk of the .log file).
"""

from __future__ import annotations

import os
import random
import signal
import struct
import subprocess
import sys
import time

import pytest

from kfk.records import MemoryRecordsBuilder, iter_batches
from kfk.storage.fetch_data_info import FetchIsolation
from kfk.storage.log import Log
from kfk.storage.log_files import CLEAN_SHUTDOWN_FILE
from kfk.storage.segment import LogSegment

from . import crash_writer
from .conftest import make_batch, read_all, small_config

WRITER = os.path.join(os.path.dirname(__file__), "crash_writer.py")
# crash_writer's 2020 timestamps at clock 0: no future bound, as in the writer's own config.
UNBOUNDED_FUTURE = {"message.timestamp.after.max.ms": crash_writer.CONFIG["message.timestamp.after.max.ms"]}


def expected_offset_index(segment: LogSegment, interval: int) -> list[tuple[int, int]]:
    """Kafka's offset index rule applied to the .log bytes (one batch per append in these tests): an entry
    (last offset - base, position) for a batch that starts more than `interval` bytes after the previous entry."""
    with open(segment.log.path, "rb") as handle:
        data = handle.read()
    entries: list[tuple[int, int]] = []
    last_entry_position = 0
    for batch in iter_batches(data):
        if batch.position - last_entry_position > interval:
            entries.append((batch.last_offset - segment.base_offset, batch.position))
            last_entry_position = batch.position
    return entries


def check_time_index(segment: LogSegment) -> None:
    """Every time index entry is a (max timestamp so far, offset of the batch that reached it) of the log, entries
    strictly increase, and the last one is the segment's overall maximum."""
    with open(segment.log.path, "rb") as handle:
        data = handle.read()
    new_maxima: dict[int, int] = {}
    max_timestamp, offset_of_max = -1, segment.base_offset
    for batch in iter_batches(data):
        if batch.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max = batch.max_timestamp, batch.last_offset
            new_maxima[batch.last_offset - segment.base_offset] = max_timestamp
    with open(segment.time_index_path, "rb") as handle:
        entries = list(struct.iter_unpack(">qi", handle.read()))
    for timestamp, relative_offset in entries:
        assert new_maxima.get(relative_offset) == timestamp, (segment, timestamp, relative_offset)
    assert entries == sorted(set(entries))
    assert entries[-1] == (max_timestamp, offset_of_max - segment.base_offset)


def check_indexes(log: Log, interval: int) -> None:
    for segment in log.segments:
        if segment is log.active_segment:
            continue
        segment.offset_index  # open (and check or rebuild) the indexes as a read would
        with open(segment.offset_index_path, "rb") as handle:
            assert list(struct.iter_unpack(">ii", handle.read())) == expected_offset_index(segment, interval), segment
        check_time_index(segment)
        with open(segment.log.path, "rb") as handle:
            data = handle.read()
        for batch in iter_batches(data):
            found = segment.translate_offset(batch.base_offset)
            assert found is not None and found.position == batch.position


def check_log(log: Log, acked: int) -> None:
    assert log.log_end_offset >= acked
    records = read_all(log, FetchIsolation.LOG_END)
    assert [record.offset for record in records] == list(range(log.log_end_offset))
    for record in records:
        assert record.value == crash_writer.value_for(record.offset)
        assert record.timestamp == crash_writer.timestamp_for(record.offset)
    # The log ends at a batch boundary: the last segment's bytes are whole, valid batches.
    with open(log.active_segment.log.path, "rb") as handle:
        data = handle.read()
    end = 0
    for batch in iter_batches(data):
        batch.validate()
        end = batch.position + batch.size_in_bytes
    assert end == len(data)


def run_and_kill(log_dir: str, seed: int, rng: random.Random) -> int:
    """Start the writer, let it acknowledge a few flushes, SIGKILL it; returns the highest acknowledged offset."""
    process = subprocess.Popen([sys.executable, WRITER, log_dir, str(seed)], stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    acked = 0
    wanted = rng.randint(1, 15)
    seen = 0
    for line in process.stdout:
        if line.startswith("acked"):
            acked = max(acked, int(line.split()[1]))
            seen += 1
            if seen >= wanted:
                break
    time.sleep(rng.random() * 0.02)
    os.kill(process.pid, signal.SIGKILL)
    for line in process.stdout:  # acks printed before the kill are acknowledged too
        if line.startswith("acked"):
            acked = max(acked, int(line.split()[1]))
    process.wait()
    return acked


def kill_and_recover(tmp_path, kills: int, seed: int) -> None:
    log_dir = str(tmp_path / "data")
    rng = random.Random(seed)
    for round_number in range(kills):
        acked = run_and_kill(log_dir, seed * 1000 + round_number, rng)
        assert not os.path.exists(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))
        manager = crash_writer.log_manager(log_dir)
        manager.startup(now_ms=0)
        log = manager.get_log(crash_writer.TOPIC_PARTITION)
        assert log is not None
        check_log(log, acked)
        check_indexes(log, 1024)
        manager.shutdown()


@pytest.mark.slow
def test_kill_writer_mid_append_many_times(tmp_path) -> None:
    """25 SIGKILLs at random points of a writer that keeps appending to the recovered log (about 10 s)."""
    kill_and_recover(tmp_path, kills=25, seed=2)


def write_log(log_dir: str, batches: int = 80) -> Log:
    log = Log.open(log_dir, small_config(UNBOUNDED_FUTURE), now_ms=0)
    for _ in range(batches):
        base = log.log_end_offset
        builder = MemoryRecordsBuilder(base_offset=base, partition_leader_epoch=0)
        for offset in range(base, base + 3):
            builder.append(crash_writer.timestamp_for(offset), None, crash_writer.value_for(offset))
        log.append_as_leader(builder.close(), leader_epoch=0, now_ms=0)
    return log


def reopen(log_dir: str, clean: bool, recovery_point: int = 0) -> Log:
    return Log.open(log_dir, small_config(UNBOUNDED_FUTURE), now_ms=0, had_clean_shutdown=clean, recovery_point=recovery_point)


def test_torn_batch_in_the_last_segment_is_cut(log_dir) -> None:
    log = write_log(log_dir)
    end = log.log_end_offset
    last_path = log.active_segment.log.path
    log.close()
    with open(last_path, "rb") as handle:
        data = handle.read()
    batches = list(iter_batches(data))
    torn_at = batches[-1].position + batches[-1].size_in_bytes // 2
    os.truncate(last_path, torn_at)
    recovered = reopen(log_dir, clean=False)
    assert recovered.log_end_offset == end - 3
    assert os.path.getsize(last_path) == batches[-1].position
    records = read_all(recovered)
    assert [record.offset for record in records] == list(range(end - 3))
    recovered.append_as_leader(make_batch(end - 3, [b"after"]), leader_epoch=0, now_ms=0)
    assert read_all(recovered)[-1].value == b"after"
    recovered.close()


def test_garbage_in_the_middle_of_an_unflushed_segment(log_dir) -> None:
    log = write_log(log_dir)
    segments = list(log.segments)
    middle = segments[len(segments) // 2]
    cut_base = middle.base_offset
    log.close()
    with open(middle.log.path, "r+b") as handle:
        batches = list(iter_batches(handle.read()))
        handle.seek(batches[1].position + 30)
        handle.write(b"\xde\xad\xbe\xef" * 4)  # flips bytes under the CRC
    recovered = reopen(log_dir, clean=False, recovery_point=cut_base)
    # The segment is cut before the damaged batch and every later segment is gone.
    assert recovered.log_end_offset == batches[1].base_offset
    assert recovered.active_segment.base_offset == cut_base
    assert [record.offset for record in read_all(recovered)] == list(range(batches[1].base_offset))
    recovered.close()


@pytest.mark.parametrize("damage", ["zero", "garble", "delete", "truncate"])
@pytest.mark.parametrize("clean", [True, False])
def test_damaged_indexes_are_rebuilt(log_dir, damage: str, clean: bool, caplog) -> None:
    log = write_log(log_dir, batches=120)
    end = log.log_end_offset
    log.flush()
    recovery_point = log.recovery_point
    log.close()
    targets = sorted(name for name in os.listdir(log_dir) if name.endswith((".index", ".timeindex")))
    damaged = targets[2:8]
    rng = random.Random(damage)
    for name in damaged:
        path = os.path.join(log_dir, name)
        size = os.path.getsize(path)
        if damage == "zero":
            with open(path, "r+b") as handle:
                handle.write(b"\0" * size)
        elif damage == "garble":
            with open(path, "r+b") as handle:
                handle.write(bytes(rng.randrange(256) for _ in range(size)))
        elif damage == "delete":
            os.unlink(path)
        else:
            os.truncate(path, max(0, size - 5))
    recovered = reopen(log_dir, clean=clean, recovery_point=recovery_point if clean else 0)
    assert recovered.log_end_offset == end
    check_log(recovered, end)
    check_indexes(recovered, 256)
    for offset in range(0, end, 7):
        info = recovered.read(offset, 100_000, FetchIsolation.LOG_END)
        first = next(iter_batches(info.records.read_bytes()))
        assert first.base_offset <= offset <= first.last_offset
    if damage in ("zero", "garble", "truncate") and clean:
        assert "Found a corrupted index file" in caplog.text
    recovered.close()
