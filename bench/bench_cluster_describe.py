"""How long `kfk cluster describe` takes on many topics (issue 22's figure: 1,000 topics x 10 partitions).

    python bench/bench_cluster_describe.py [--topics 1000] [--partitions 10] [--groups 10]

One kfk broker; the topics are created in batches of 100 (CreateTopics), a record is produced to each partition and
each group commits an offset on every partition of 10 topics. Then it times, best of three, the statistics through the
client library (kfk.client.cluster_statistics.describe_cluster_statistics: Metadata, ListOffsets to every leader,
ListGroups and OffsetFetch) and the whole command (`python -m kfk cluster describe --output json` and the tables,
interpreter start-up included).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402  (bench/ is not a package)

from kfk.client import Admin, NewTopic, OffsetAndMetadata, TopicPartition  # noqa: E402
from kfk.client.cluster_statistics import describe_cluster_statistics  # noqa: E402


def best_of(times: int, action) -> float:
    best = float("inf")
    for _ in range(times):
        start = time.perf_counter()
        action()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--groups", type=int, default=10)
    args = parser.parse_args()
    broker = run.KfkBroker(Path(tempfile.mkdtemp(prefix="kfk-bench-")))
    try:
        names = [f"describe-{index:05d}" for index in range(args.topics)]
        with Admin({"bootstrap.servers": broker.bootstrap, "default.api.timeout.ms": 300_000}) as admin:
            start = time.perf_counter()
            for first in range(0, len(names), 100):
                results = admin.create_topics([NewTopic(name, args.partitions, 1) for name in names[first:first + 100]])
                failed = {name: error for name, error in results.items() if error is not None}
                assert not failed, failed
            print(f"created {args.topics:,} topics x {args.partitions} partitions in "
                  f"{time.perf_counter() - start:.1f} s")
            for group in range(args.groups):
                offsets = {TopicPartition(name, p): OffsetAndMetadata(0)
                           for name in names[group * 10:(group + 1) * 10] for p in range(args.partitions)}
                admin.alter_consumer_group_offsets(f"describe-group-{group}", offsets)
            seconds = best_of(3, lambda: describe_cluster_statistics(admin, timeout_ms=300_000))
        print(f"describe_cluster_statistics (client library): {seconds:.2f} s")
        for flags in (["--output", "json"], []):
            command = [sys.executable, "-m", "kfk", "cluster", "describe", "--bootstrap-server", broker.bootstrap,
                       "--timeout-ms", "300000", *flags]
            seconds = best_of(3, lambda: subprocess.run(command, check=True, stdout=subprocess.DEVNULL))
            print(f"kfk cluster describe {' '.join(flags) or '(tables)'}: {seconds:.2f} s")
    finally:
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
