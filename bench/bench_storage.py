"""Storage benchmarks: append and zero-copy read throughput, log open time, offset lookup in a 10 GB partition.

    python bench/bench_storage.py [--dir /tmp/kfk-bench] [--append-mib 512]

Figures (printed as a table):
- append: 1 MiB batches through Log.append_as_leader (validated: header and CRC, offsets assigned in the header, as
  the broker does) vs a plain os.write of the same bytes to a file, in the same run; the ratio is the storage
  layer's overhead (target >= 0.8).
- read: Log.read file regions sent with os.sendfile to a socketpair drained by a thread (the fetch path).
- open: a 1,000-segment log after a clean shutdown, after an unclean one with a recent recovery point (the usual
  crash) and after an unclean one with no recovery point (every segment re-scanned and CRC-checked).
- lookup: random offsets in a 10 GiB partition (10 sparse 1 GiB segments of 1 MiB batches): index binary search
  plus a header scan, per read.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import shutil
import socket
import statistics
import tempfile
import threading
import time

from kfk.common.structs import TopicPartition
from kfk.config import LogConfig
from kfk.records import MemoryRecordsBuilder, RecordBatch, set_base_offset
from kfk.storage.fetch_data_info import FetchIsolation
from kfk.storage.log import Log
from kfk.storage.log_files import producer_snapshot_file
from kfk.storage.log_manager import LogManager
from kfk.storage.producer_state import ProducerStateManager

MIB = 1024 * 1024


def build_batch(target_size: int, record_size: int = 1024) -> bytearray:
    """One v2 batch of about `target_size` bytes made of `record_size`-byte values."""
    builder = MemoryRecordsBuilder(base_offset=0, partition_leader_epoch=0)
    payload = os.urandom(record_size)
    while builder.estimated_size_in_bytes() + record_size + 16 <= target_size:
        builder.append(1_700_000_000_000, None, payload)
    return bytearray(builder.close())


def bench_append(root: str, total_mib: int, rounds: int = 3) -> dict[str, float]:
    """Alternate log and plain runs (the machine is shared: the best of each is the steady state). The leader epoch
    is recorded before timing, as a partition does when it becomes leader; both runs fsync after timing."""
    batch = build_batch(MIB)
    count = max(1, total_mib * MIB // len(batch))
    results: dict[str, list[float]] = {"log": [], "plain": []}
    for _ in range(rounds):
        directory = os.path.join(root, "append-0")
        shutil.rmtree(directory, ignore_errors=True)
        log = Log.open(directory, LogConfig(), now_ms=0)
        log.leader_epoch_cache.assign(0, 0)
        start = time.perf_counter()
        for _ in range(count):
            log.append_as_leader(batch, leader_epoch=0, now_ms=0)
        elapsed = time.perf_counter() - start
        log.flush()
        log.close()
        results["log"].append(count * len(batch) / MIB / elapsed)
        shutil.rmtree(directory, ignore_errors=True)

        plain_path = os.path.join(root, "plain.bin")
        fd = os.open(plain_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        start = time.perf_counter()
        for _ in range(count):
            view = memoryview(batch)
            while view:
                view = view[os.write(fd, view):]
        elapsed = time.perf_counter() - start
        os.fsync(fd)
        os.close(fd)
        os.unlink(plain_path)
        results["plain"].append(count * len(batch) / MIB / elapsed)
    log_rate, plain_rate = max(results["log"]), max(results["plain"])
    return {"log": log_rate, "plain": plain_rate, "ratio": log_rate / plain_rate, "mib": count * len(batch) / MIB}


def bench_read(root: str, total_mib: int) -> dict[str, float]:
    directory = os.path.join(root, "read-0")
    shutil.rmtree(directory, ignore_errors=True)
    log = Log.open(directory, LogConfig.from_properties({"internal.segment.bytes": 128 * MIB}), now_ms=0)
    batch = build_batch(MIB)
    count = max(1, total_mib * MIB // len(batch))
    for _ in range(count):
        log.append_as_leader(batch, leader_epoch=0, now_ms=0)
    log.update_high_watermark(log.log_end_offset)
    sender, receiver = socket.socketpair()
    received = [0]

    def drain() -> None:
        buffer = bytearray(4 * MIB)
        while True:
            n = receiver.recv_into(buffer)
            if n == 0:
                return
            received[0] += n

    thread = threading.Thread(target=drain)
    thread.start()
    start = time.perf_counter()
    offset = 0
    sent = 0
    while offset < log.log_end_offset:
        info = log.read(offset, 4 * MIB, FetchIsolation.HIGH_WATERMARK)
        region = info.records
        position, remaining = region.position, region.length
        while remaining:
            n = os.sendfile(sender.fileno(), region.fileno(), position, remaining)
            position += n
            remaining -= n
        sent += region.length
        # The next fetch starts after the last whole batch sent (a client learns it from the batches it got).
        segment = log.segments.floor_segment(offset)
        next_offset = offset
        for _, header in segment.log.batch_headers(region.position, region.position + region.length):
            next_offset = header.next_offset
        offset = next_offset if next_offset > offset else log.log_end_offset
    sender.shutdown(socket.SHUT_WR)
    thread.join()
    elapsed = time.perf_counter() - start
    sender.close()
    receiver.close()
    log.close()
    shutil.rmtree(directory, ignore_errors=True)
    assert received[0] == sent
    return {"read": sent / MIB / elapsed, "mib": sent / MIB}


def bench_open(root: str, segments: int = 1000) -> dict[str, float]:
    log_dir = os.path.join(root, "open")
    shutil.rmtree(log_dir, ignore_errors=True)
    config = LogConfig.from_properties({"internal.segment.bytes": 64 * 1024, "index.interval.bytes": 4096,
                                        "segment.index.bytes": 64 * 1024})
    manager = LogManager([log_dir], config)
    manager.startup(now_ms=0)
    log = manager.get_or_create_log(TopicPartition("open", 0), now_ms=0)
    batch = build_batch(16 * 1024)
    while log.number_of_segments < segments:
        log.append_as_leader(batch, leader_epoch=0, now_ms=0)
    log.update_high_watermark(log.log_end_offset)
    manager.shutdown()

    def timed_open(clean: bool, recovery_point: int | None) -> tuple[float, int]:
        marker = os.path.join(log_dir, ".kafka_cleanshutdown")
        if not clean and os.path.exists(marker):
            os.unlink(marker)
        if recovery_point is not None:
            with open(os.path.join(log_dir, "recovery-point-offset-checkpoint"), "w") as handle:
                handle.write(f"0\n1\nopen 0 {recovery_point}\n")
        start = time.perf_counter()
        opened = LogManager([log_dir], config)
        opened.startup(now_ms=0)
        elapsed = time.perf_counter() - start
        opened_log = opened.get_log(TopicPartition("open", 0))
        recovered = opened_log.recovered_segments
        end = opened_log.log_end_offset
        opened.shutdown()
        return elapsed, recovered if end else -1

    clean_s, _ = timed_open(True, None)
    end_offset = log.log_end_offset
    last_base = log.segments.base_offsets[-1]
    recent_s, recent_n = timed_open(False, last_base)
    full_s, full_n = timed_open(False, 0)
    shutil.rmtree(log_dir, ignore_errors=True)
    return {"segments": segments, "clean_s": clean_s, "unclean_recent_s": recent_s, "recent_recovered": recent_n,
            "unclean_full_s": full_s, "full_recovered": full_n, "end_offset": end_offset}


def bench_lookup(root: str, lookups: int = 20_000) -> dict[str, float]:
    """10 sparse 1 GiB segments of 1 MiB batches (headers written, payload holes): 10 GiB, ~10 M offsets."""
    directory = os.path.join(root, "lookup-0")
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(directory)
    template = build_batch(MIB)
    header = bytearray(template[:61])
    batch_size = len(template)
    records_per_batch = RecordBatch(template).last_offset_delta + 1
    segment_bytes = 1024 * MIB
    batches_per_segment = segment_bytes // batch_size
    offset = 0
    for _ in range(10):
        base = offset
        path = os.path.join(directory, f"{base:020d}.log")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        for index in range(batches_per_segment):
            set_base_offset(header, 0, offset)
            os.pwrite(fd, header, index * batch_size)
            offset += records_per_batch
        os.ftruncate(fd, batches_per_segment * batch_size)
        os.close(fd)
    ProducerStateManager.write_snapshot(producer_snapshot_file(directory, offset), [])  # as a clean shutdown leaves
    config = LogConfig.from_properties({"segment.bytes": segment_bytes})
    start = time.perf_counter()
    log = Log.open(directory, config, now_ms=0, had_clean_shutdown=True, recovery_point=offset)
    open_s = time.perf_counter() - start
    start = time.perf_counter()
    for segment in log.segments:
        segment.offset_index  # first use: indexes missing, rebuilt from the headers
    rebuild_s = time.perf_counter() - start
    rng = random.Random(1)
    targets = [rng.randrange(offset) for _ in range(lookups)]
    timings = []
    for target in targets:
        start = time.perf_counter_ns()
        info = log.read(target, 1, FetchIsolation.LOG_END)
        timings.append(time.perf_counter_ns() - start)
        assert info.fetch_offset_metadata.message_offset == target
    size_gib = sum(segment.size for segment in log.segments) / (1024 * MIB)
    log.close_handlers()
    shutil.rmtree(directory, ignore_errors=True)
    timings.sort()
    return {"size_gib": size_gib, "offsets": offset, "open_s": open_s, "index_rebuild_s": rebuild_s,
            "median_us": statistics.median(timings) / 1000, "p99_us": timings[int(len(timings) * 0.99)] / 1000}


def main() -> None:
    logging.basicConfig(level=logging.ERROR)  # the lookup set-up has no index files: rebuilding them warns
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="where to write (default: a temporary directory)")
    parser.add_argument("--append-mib", type=int, default=512, help="MiB appended per append run")
    parser.add_argument("--read-mib", type=int, default=512, help="MiB written then read back")
    args = parser.parse_args()
    root = args.dir or tempfile.mkdtemp(prefix="kfk-bench-")
    os.makedirs(root, exist_ok=True)
    try:
        append = bench_append(root, args.append_mib)
        read = bench_read(root, args.read_mib)
        opened = bench_open(root)
        lookup = bench_lookup(root)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    rows = [
        ("append, Log.append_as_leader, 1 MiB batches", f"{append['log']:.0f} MB/s", f"{append['mib']:.0f} MiB"),
        ("append, plain os.write of the same bytes", f"{append['plain']:.0f} MB/s", ""),
        ("append ratio (target >= 0.8)", f"{append['ratio']:.2f}", ""),
        ("read, Log.read + os.sendfile to a socketpair", f"{read['read']:.0f} MB/s", f"{read['mib']:.0f} MiB"),
        (f"open {opened['segments']} segments, clean shutdown", f"{opened['clean_s'] * 1000:.0f} ms", ""),
        ("open, unclean, recovery point in the last segment", f"{opened['unclean_recent_s'] * 1000:.0f} ms",
         f"{opened['recent_recovered']} segment(s) recovered"),
        ("open, unclean, no recovery point", f"{opened['unclean_full_s'] * 1000:.0f} ms",
         f"{opened['full_recovered']} segments recovered"),
        (f"offset lookup, {lookup['size_gib']:.0f} GiB partition, median", f"{lookup['median_us']:.1f} us",
         f"{lookup['offsets']:,} offsets"),
        ("offset lookup, p99", f"{lookup['p99_us']:.1f} us", ""),
        ("open the 10 GiB partition (clean)", f"{lookup['open_s'] * 1000:.0f} ms",
         f"index rebuild on first use {lookup['index_rebuild_s'] * 1000:.0f} ms"),
    ]
    width = max(len(row[0]) for row in rows)
    print(f"{'figure':<{width}}  {'value':>12}  note")
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>12}  {note}")


if __name__ == "__main__":
    main()
