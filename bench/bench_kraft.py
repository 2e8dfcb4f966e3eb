"""The KRaft metadata quorum: three combined `kfk server start` processes, every one a voter (tests/cluster/
kraft_quorum.py), Kafka's default quorum timeouts (election 1000 ms, fetch 2000 ms).

    python bench/bench_kraft.py [--kills 10] [--topics 50]

Figures (printed as tables):
- metadata commit latency: CreateTopics sent to the leader until the topic is in the Metadata of all three nodes,
  p50 and p99 over `--topics` topics (the leader commits once a majority has the batch; the followers apply it once
  their next fetch tells them the new high watermark);
- failover: kill -9 of the leader until another node answers DescribeQuorum as the leader of a newer epoch, and
  until the first CreateTopics succeeds on it, median and max over `--kills` kills (the killed node restarts and
  rejoins between kills). A follower declares its leader gone after `controller.quorum.fetch.timeout.ms`, so that
  bounds the figure below;
- graceful handover: the same after SIGTERM, where the leader resigns first with EndQuorumEpoch.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.cluster.kraft_quorum import Quorum  # noqa: E402


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def commit_latency(quorum: Quorum, topics: int) -> list[float]:
    leader_id, _ = quorum.wait_for_leader()
    quorum.create_topic(leader_id, "warm-up")
    latencies = []
    for index in range(topics):
        name = f"latency-{index}"
        started = time.monotonic()
        quorum.create_topic(leader_id, name)
        for node_id in quorum.voter_ids:
            quorum.wait_for_topic(node_id, name, timeout=10, poll_s=0.002)
        latencies.append(time.monotonic() - started)
    return latencies


def failovers(quorum: Quorum, kills: int, sig: int) -> tuple[list[float], list[float]]:
    elected, created = [], []
    for index in range(kills):
        leader_id, epoch = quorum.wait_for_leader()
        process = quorum.nodes[leader_id].process
        started = time.monotonic()
        process.send_signal(sig)
        survivors = tuple(node_id for node_id in quorum.voter_ids if node_id != leader_id)
        new_leader, _ = quorum.wait_for_leader(among=survivors, newer_than=epoch)
        elected.append(time.monotonic() - started)
        quorum.create_topic(new_leader, f"after-{sig}-{index}")
        created.append(time.monotonic() - started)
        process.wait(30)
        quorum.nodes[leader_id].process = None
        quorum.start(leader_id)
        quorum.wait_for_topic(leader_id, f"after-{sig}-{index}")
    return elected, created


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--topics", type=int, default=50)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kfk-bench-kraft-") as root:
        quorum = Quorum(Path(root))
        try:
            quorum.start()
            latencies = commit_latency(quorum, args.topics)
            crash = failovers(quorum, args.kills, signal.SIGKILL)
            graceful = failovers(quorum, args.kills, signal.SIGTERM)
        finally:
            quorum.stop()
    table("metadata commit latency (CreateTopics to visible on all 3 nodes)", ["topics", "p50 ms", "p99 ms"],
          [[len(latencies), f"{percentile(latencies, 0.5) * 1000:.1f}", f"{percentile(latencies, 0.99) * 1000:.1f}"]])
    rows = []
    for name, (elected, created) in (("kill -9", crash), ("SIGTERM", graceful)):
        rows.append([name, len(elected), f"{statistics.median(elected):.2f}", f"{max(elected):.2f}",
                     f"{statistics.median(created):.2f}", f"{max(created):.2f}"])
    table("controller failover (s)", ["signal", "runs", "elected median", "elected max", "CreateTopics median",
                                       "CreateTopics max"], rows)


if __name__ == "__main__":
    main()
