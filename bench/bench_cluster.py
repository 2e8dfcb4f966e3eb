"""Multi-broker benchmarks: three `kfk server start` processes on a real ZooKeeper (kfk.testing.cluster).

    python bench/bench_cluster.py [--megabytes 100] [--kills 20] [--reassign-megabytes 100]

Figures (printed as tables):
- produce: confluent-kafka (librdkafka) writing `--megabytes` of 1 KiB records to 3 partitions, acks=all to a topic
  with replication factor 3 versus acks=1 to one with replication factor 1, on the same cluster; MB/s of record
  values from the first send to the last delivery report, and the ratio.
- failover: a partition's leader is killed with kill -9 while a producer (acks=all) retries one record every 10 ms;
  the time from the kill to the first acknowledged record on the new leader, median and max over `--kills` kills
  (the killed broker is restarted and rejoins the ISR between kills). In ZooKeeper mode this is bounded below by
  zookeeper.session.timeout.ms (4000 ms in the test cluster): the controller learns of the death when the
  broker's ephemeral znode expires. The same with SIGTERM (controlled shutdown) shows the planned-restart case.
- reassignment: a topic holding `--reassign-megabytes` moves from brokers {1,2} to {2,3}; MB/s of log copied to the
  new replica, from the AlterPartitionReassignments request to the completed move.
"""

from __future__ import annotations

import argparse
import signal
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer  # noqa: E402

from kfk.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest  # noqa: E402
from kfk.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest  # noqa: E402
from kfk.testing.cluster import start_cluster  # noqa: E402
from kfk.testing.zookeeper import ZooKeeperServer  # noqa: E402
from tests.cluster.helpers import create_topic, partitions, wait_until  # noqa: E402
from tests.integration.wire import connect, request  # noqa: E402

RECORD = b"x" * 1024


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))


def produce_rate(bootstrap: str, topic: str, acks: str, megabytes: int) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "batch.size": 1_000_000, "queue.buffering.max.kbytes": 512 * 1024})
    count = megabytes * 1024
    delivered = [0]
    errors = [0]

    def report(error, _message) -> None:
        if error is None:
            delivered[0] += 1
        else:
            errors[0] += 1

    started = time.perf_counter()
    for index in range(count):
        while True:
            try:
                producer.produce(topic, RECORD, partition=index % 3, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.01)
        if index % 1000 == 0:
            producer.poll(0)
    producer.flush(300)
    elapsed = time.perf_counter() - started
    assert errors[0] == 0 and delivered[0] == count, (errors[0], delivered[0])
    return count * len(RECORD) / elapsed / 1e6


def bench_produce(cluster, megabytes: int) -> None:
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "bench-rf3", partitions=3, replication_factor=3)
    create_topic(bootstrap, "bench-rf1", partitions=3, replication_factor=1)
    wait_until(lambda: all(len(isr) == 3 for _, _, isr in partitions(bootstrap, "bench-rf3").values()))
    produce_rate(bootstrap, "bench-rf1", "1", 5)  # warm-up: connections, metadata
    rf1 = produce_rate(bootstrap, "bench-rf1", "1", megabytes)
    rf3 = produce_rate(bootstrap, "bench-rf3", "all", megabytes)
    table(f"produce, {megabytes} MB of 1 KiB records, 3 partitions, 3 brokers", ["setup", "MB/s"],
          [["acks=1, replication factor 1", f"{rf1:.1f}"], ["acks=all, replication factor 3", f"{rf3:.1f}"],
           ["ratio (RF3 acks=all / RF1 acks=1)", f"{rf3 / rf1:.2f}"]])


def failover_once(cluster, bootstrap: str, topic: str, sig: int) -> float:
    leader = partitions(bootstrap, topic)[0][0]
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 60000,
                         "retry.backoff.ms": 10, "retry.backoff.max.ms": 50,
                         "topic.metadata.refresh.interval.ms": 100})
    producer.produce(topic, b"warm", partition=0)
    producer.flush(10)
    broker = cluster.broker(leader)
    started = time.perf_counter()
    if sig == signal.SIGKILL:
        broker.kill()
    else:
        stopper = threading.Thread(target=broker.stop)
        stopper.start()
    acknowledged = threading.Event()
    producer.produce(topic, b"after", partition=0,
                     on_delivery=lambda error, message: error is None and acknowledged.set())
    while not acknowledged.is_set():
        producer.poll(0.005)
        if time.perf_counter() - started > 60:
            raise RuntimeError("no produce succeeded within 60 s")
    elapsed = time.perf_counter() - started
    if sig != signal.SIGKILL:
        stopper.join()
    cluster.start([leader])
    wait_until(lambda: len(partitions(bootstrap, topic)[0][2]) == 3, timeout=30)
    return elapsed


def bench_failover(cluster, kills: int) -> None:
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "bench-failover", partitions=1, replication_factor=3)
    wait_until(lambda: len(partitions(bootstrap, "bench-failover")[0][2]) == 3)
    rows = []
    for name, sig, count in (("kill -9", signal.SIGKILL, kills), ("SIGTERM (controlled)", signal.SIGTERM,
                                                                   max(3, kills // 4))):
        times = [failover_once(cluster, cluster.bootstrap_servers, "bench-failover", sig) for _ in range(count)]
        rows.append([name, str(count), f"{statistics.median(times) * 1000:.0f}", f"{max(times) * 1000:.0f}"])
    table("failover: leader stopped -> first acks=all record acknowledged by the new leader",
          ["how", "runs", "median ms", "max ms"], rows)


def controller_request(bootstrap: str, message, version: int):
    for address in bootstrap.split(","):
        sock = connect(address)
        try:
            response = request(sock, message, version)
        finally:
            sock.close()
        if response.error_code == 0:
            return response
    raise RuntimeError("no broker answered as the controller")


def bench_reassignment(cluster, megabytes: int) -> None:
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "bench-move", assignment=[[1, 2]])
    wait_until(lambda: len(partitions(bootstrap, "bench-move")[0][2]) == 2)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "batch.size": 1_000_000,
                         "queue.buffering.max.kbytes": 512 * 1024})
    for _ in range(megabytes * 1024):
        while True:
            try:
                producer.produce("bench-move", RECORD, partition=0)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(300)
    size = sum(path.stat().st_size for path in (cluster.broker(1).log_dir / "bench-move-0").glob("*.log"))
    Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
    Partition = AlterPartitionReassignmentsRequest.ReassignablePartition
    started = time.perf_counter()
    controller_request(bootstrap, AlterPartitionReassignmentsRequest(topics=[Topic(name="bench-move", partitions=[
        Partition(partition_index=0, replicas=[2, 3])])]), 0)
    while controller_request(bootstrap, ListPartitionReassignmentsRequest(topics=None), 0).topics:
        time.sleep(0.05)
    elapsed = time.perf_counter() - started
    assert partitions(bootstrap, "bench-move")[0][1] == [2, 3]
    table("reassignment {1,2} -> {2,3} of one partition", ["log MB", "seconds", "catch-up MB/s"],
          [[f"{size / 1e6:.0f}", f"{elapsed:.2f}", f"{size / elapsed / 1e6:.1f}"]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--megabytes", type=int, default=100)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--reassign-megabytes", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kfk-bench-cluster-") as directory:
        zookeeper = ZooKeeperServer(Path(directory) / "zookeeper").start()
        cluster = None
        try:
            cluster = start_cluster(Path(directory) / "cluster", f"{zookeeper.connect_string}/bench", 3)
            bench_produce(cluster, args.megabytes)
            bench_reassignment(cluster, args.reassign_megabytes)
            bench_failover(cluster, args.kills)
        finally:
            if cluster is not None:
                cluster.shutdown()
            zookeeper.stop()


if __name__ == "__main__":
    main()
