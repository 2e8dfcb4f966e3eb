"""KRaft metadata benchmarks: what a snapshot saves a starting broker.

    python bench/bench_metadata.py [--records 100000] [--topics 100] [--repetitions 3]

A broker's data dir is given a __cluster_metadata log of `--records` metadata records (`--topics` one-partition
topics, then ConfigRecords changing their retention.ms: the churn a snapshot compacts), written through the
embedded backend as a controller writes it (batches of 100 records). The same dir is then copied and given a
snapshot of the whole image (the log behind it trimmed). Figures, median of `--repetitions`, runs interleaved:
- the backend's start() in process (open the log, load the snapshot, replay the records after it);
- `kfk server start` from process start to the ready line (Python start-up and the rest of the broker included).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from kfk.backends.embedded import EmbeddedMetadataBackend
from kfk.backends.embedded.snapshots import list_snapshots
from kfk.protocol.metadata_records import schema_class
from kfk.storage.meta_properties import MetaProperties
from kfk.testing.broker import BrokerProcess

TopicRecord = schema_class("TopicRecord")
PartitionRecord = schema_class("PartitionRecord")
ConfigRecord = schema_class("ConfigRecord")
FeatureLevelRecord = schema_class("FeatureLevelRecord")
BATCH = 100
OVERRIDES = {"offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
             "transaction.state.log.min.isr": "1"}


def metadata_records(records: int, topics: int) -> list:
    out = [FeatureLevelRecord(name="metadata.version", feature_level=7)]
    for index in range(topics):
        topic_id = uuid.uuid4()
        out += [TopicRecord(name=f"bench-{index}", topic_id=topic_id),
                PartitionRecord(partition_id=0, topic_id=topic_id, replicas=[1], isr=[1], leader=1, leader_epoch=0,
                                partition_epoch=0)]
    change = 0
    while len(out) < records:
        out.append(ConfigRecord(resource_type=2, resource_name=f"bench-{change % topics}", name="retention.ms",
                                value=str(3_600_000 + change)))
        change += 1
    return out


def backend(data_dir: Path) -> EmbeddedMetadataBackend:
    cluster_id = MetaProperties.read(str(data_dir)).cluster_id
    return EmbeddedMetadataBackend(str(data_dir), 1, cluster_id, segment_bytes=1024 * 1024,
                                   snapshot_max_new_record_bytes=2**62)


async def write_log(data_dir: Path, records: list) -> None:
    store = backend(data_dir)
    await store.start()
    epoch = await store.elect_controller(1)
    for start in range(0, len(records), BATCH):
        await store.append(records[start:start + BATCH], epoch)
    await store.stop()


async def snapshot(data_dir: Path) -> None:
    store = backend(data_dir)
    await store.start()
    await store.snapshot()
    await store.stop()


async def timed_backend_start(data_dir: Path) -> float:
    store = backend(data_dir)
    started = time.perf_counter()
    await store.start()
    elapsed = time.perf_counter() - started
    await store.stop()
    return elapsed


def timed_broker_start(data_dir: Path, log_path: Path) -> float:
    broker = BrokerProcess(log_dir=data_dir, overrides=dict(OVERRIDES), log_path=log_path)
    started = time.perf_counter()
    broker.start(timeout=600)
    elapsed = time.perf_counter() - started
    broker.stop()
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--repetitions", type=int, default=3)
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    root = Path(tempfile.mkdtemp(prefix="kfk-bench-metadata-"))
    try:
        plain = root / "log-only" / "data"
        BrokerProcess(log_dir=plain, overrides=dict(OVERRIDES), log_path=root / "format.log").start(60).stop()
        asyncio.run(write_log(plain, metadata_records(args.records, args.topics)))
        with_snapshot = root / "snapshot" / "data"
        shutil.copytree(plain, with_snapshot)
        asyncio.run(snapshot(with_snapshot))
        metadata_dir = with_snapshot / "__cluster_metadata-0"
        (snapshot_id,) = list_snapshots(str(metadata_dir))
        sizes = {name: sum(path.stat().st_size for path in (directory / "__cluster_metadata-0").glob(pattern))
                 for name, directory, pattern in (("log", plain, "*.log"), ("trimmed log", with_snapshot, "*.log"),
                                                  ("snapshot", with_snapshot, "*.checkpoint"))}
        print(f"{args.records:,} metadata records ({args.topics} topics, the rest ConfigRecords): log "
              f"{sizes['log'] / 2**20:.1f} MiB; snapshot {snapshot_id} {sizes['snapshot'] / 2**10:.0f} KiB, log "
              f"trimmed behind it to {sizes['trimmed log'] / 2**10:.0f} KiB\n")
        timings: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.repetitions):
            for name, directory in (("log only", plain), ("snapshot", with_snapshot)):
                timings.setdefault((name, "backend"), []).append(asyncio.run(timed_backend_start(directory)))
                timings.setdefault((name, "broker"), []).append(
                    timed_broker_start(directory, root / f"{name.replace(' ', '-')}.log"))
        print(f"{'metadata on disk':<18} {'backend start() s':>18} {'broker start s':>15}   (median of "
              f"{args.repetitions})")
        for name in ("log only", "snapshot"):
            print(f"{name:<18} {statistics.median(timings[(name, 'backend')]):>18.3f} "
                  f"{statistics.median(timings[(name, 'broker')]):>15.3f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
