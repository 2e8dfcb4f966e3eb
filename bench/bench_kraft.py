"""KRaft cluster benchmarks: real `kfk server start` processes on a Raft quorum, no ZooKeeper (kfk.testing.cluster).

    python bench/bench_kraft.py [--layouts separate,combined] [--samples 200] [--kills 20] [--handovers 20]
                                [--topics 1000 --partitions 10 --batch 100 --replication-factor 3]

Each layout is its own cluster: `separate` is 3 controller-only nodes (101-103) + 3 brokers (1-3), `combined` is 3
nodes with process.roles=broker,controller. Timeouts are kfk.testing's KRaft ones (controller.quorum.election.timeout.ms
1000 and controller.quorum.fetch.timeout.ms 2000, Kafka's defaults; broker.session.timeout.ms 3000). Figures:
- metadata commit latency: `--samples` CreateTopics (one partition, replication factor 3) sent in turn to each broker
  (which forwards to the active controller); from the request to its answer, and to the topic (with a leader)
  visible in Metadata on the first broker and on every broker (Metadata polled back to back), p50/p99/max;
- controller failover: kill -9 of the active controller (the leader DescribeQuorum names), `--kills` times; from the
  kill to a surviving voter answering DescribeQuorum as leader of a newer epoch, and to the first successful
  CreateTopics sent (from the moment of the kill, as a client retrying would) to a surviving broker; median and
  max. The killed node is restarted and has caught up with the leader's high watermark, and every broker is
  unfenced (DescribeCluster), before the next kill;
- controller handover: the same with SIGTERM instead of kill -9, `--handovers` times: the leader resigns (EndQuorumEpoch
  names its most caught-up voters, which run at once instead of waiting out controller.quorum.fetch.timeout.ms), then
  shuts down cleanly (exit code 0 checked);
- bulk creation: `--topics` topics x `--partitions` partitions in CreateTopics of `--batch` topics each, one after
  the other, as Admin.createTopics sends a list (one request per call; a single request for all 1,000 would pass
  the controller's 10,000 records per operation); from the first request to the last answer, and to every partition
  with a leader in Metadata on every broker. Topics refused with INVALID_REPLICATION_FACTOR (a broker fenced
  meanwhile: its heartbeats late by broker.session.timeout.ms) are sent again once every broker is unfenced, and
  listed; the time includes the wait. The brokers the active controller fenced meanwhile (heartbeats late by
  broker.session.timeout.ms, from the controllers' logs) are counted and listed.
Broker start with a 100,000-record metadata log, with and without a snapshot, is bench_metadata.py's.
The load average (1 min) is printed beside every figure: the machine is shared, figures move with it.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kfk.errors import ErrorCode  # noqa: E402
from kfk.protocol.messages.create_topics import CreateTopicsRequest  # noqa: E402
from kfk.protocol.messages.describe_cluster import DescribeClusterRequest  # noqa: E402
from kfk.protocol.messages.metadata import MetadataRequest  # noqa: E402
from kfk.testing.cluster import KfkCluster, start_cluster  # noqa: E402
from tests.cluster.helpers import describe_quorum, wait_until  # noqa: E402
from tests.integration.wire import connect, request  # noqa: E402

CREATE_TOPICS_VERSION = 7
DESCRIBE_CLUSTER_VERSION = 2  # include_fenced_brokers (KIP-1073)
METADATA_VERSION = 12
#: Answers after which a client sends CreateTopics again: the controller moved or was not reachable in time.
RETRIABLE = {ErrorCode.NOT_CONTROLLER, ErrorCode.REQUEST_TIMED_OUT}


def table(title: str, header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for row in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)))
    sys.stdout.flush()


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def creatable(name: str, partitions: int, replication_factor: int) -> CreateTopicsRequest.CreatableTopic:
    return CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions,
                                              replication_factor=replication_factor)


def create_topics(sock: socket.socket, topics: list[CreateTopicsRequest.CreatableTopic],
                  timeout_ms: int = 60_000) -> list[int]:
    response = request(sock, CreateTopicsRequest(topics=topics, timeout_ms=timeout_ms), CREATE_TOPICS_VERSION)
    return [topic.error_code for topic in response.topics]


def visible(sock: socket.socket, names: list[str] | None, partitions: int) -> int:
    """How many of `names` (None: every topic) this broker's Metadata lists with `partitions` partitions, each with a
    leader."""
    topics = None if names is None else [MetadataRequest.MetadataRequestTopic(name=name) for name in names]
    response = request(sock, MetadataRequest(topics=topics, allow_auto_topic_creation=False), METADATA_VERSION)
    return sum(1 for topic in response.topics if topic.error_code == ErrorCode.NONE
               and len(topic.partitions) == partitions and all(p.leader_id >= 0 for p in topic.partitions))


def broker_sockets(cluster: KfkCluster) -> dict[int, socket.socket]:
    return {broker_id: connect(broker.bootstrap_servers) for broker_id, broker in cluster.brokers.items()}


def all_brokers_unfenced(cluster: KfkCluster) -> bool:
    """Every broker registered and unfenced in the committed metadata, as the brokers answer DescribeCluster: after
    a controller failover a broker whose heartbeats did not reach the new controller within broker.session.timeout.ms
    is fenced until its next heartbeat, and replicas are placed on unfenced brokers only."""
    for broker in cluster.brokers.values():
        with connect(broker.bootstrap_servers, timeout=5) as sock:
            response = request(sock, DescribeClusterRequest(include_fenced_brokers=True), DESCRIBE_CLUSTER_VERSION)
        if sorted(b.broker_id for b in response.brokers if not b.is_fenced) != sorted(cluster.brokers):
            return False
    return True


def bench_commit_latency(cluster: KfkCluster, layout: str, samples: int) -> None:
    sockets = broker_sockets(cluster)
    answered: list[float] = []
    first: list[float] = []
    seen: list[float] = []
    loads = [load()]
    try:
        for index in range(samples):
            name = f"latency-{index}"
            via = sockets[list(sockets)[index % len(sockets)]]
            started = time.perf_counter()
            assert create_topics(via, [creatable(name, 1, 3)]) == [ErrorCode.NONE], name
            answered.append(time.perf_counter() - started)
            pending = set(sockets)
            while pending:
                pending = {broker_id for broker_id in pending if not visible(sockets[broker_id], [name], 1)}
                if len(pending) < len(sockets) and len(first) < len(answered):
                    first.append(time.perf_counter() - started)
            seen.append(time.perf_counter() - started)
    finally:
        for sock in sockets.values():
            sock.close()
    loads.append(load())
    table(f"[{layout}] metadata commit latency, {samples} CreateTopics (1 partition, RF 3), load {'->'.join(loads)}",
          ["from CreateTopics sent to", "p50 ms", "p99 ms", "max ms"],
          [[what, ms(statistics.median(values)), ms(percentile(values, 0.99)), ms(max(values))]
           for what, values in (("its answer", answered), ("visible on one broker", first),
                                ("visible on every broker", seen))])


def active_controller(cluster: KfkCluster, voters: list[int], newer_than: int = 0,
                      timeout: float = 60.0) -> tuple[int, int]:
    """(leader id, epoch) once one of `voters` answers DescribeQuorum as the leader of an epoch > newer_than."""
    def leader() -> tuple[int, int] | None:
        for node_id in voters:
            partition = describe_quorum(f"127.0.0.1:{cluster.voters[node_id]}", timeout=1.0)
            if partition is not None and partition.leader_epoch > newer_than:
                return partition.leader_id, partition.leader_epoch
        return None
    return wait_until(leader, timeout=timeout, interval=0.005, what=f"a leader among {voters}")


def caught_up(cluster: KfkCluster, node_id: int) -> bool:
    """The voter `node_id` has fetched up to the leader's high watermark."""
    leader_id, _ = active_controller(cluster, list(cluster.voters))
    partition = describe_quorum(f"127.0.0.1:{cluster.voters[leader_id]}")
    offsets = {voter.replica_id: voter.log_end_offset for voter in partition.current_voters} if partition else {}
    return partition is not None and offsets.get(node_id, -1) >= partition.high_watermark


def create_until_done(address: str, name: str, deadline: float) -> None:
    """CreateTopics through one broker, sent again after a retriable answer or a lost connection, until it is done."""
    while True:
        try:
            with connect(address, timeout=35) as sock:
                (error,) = create_topics(sock, [creatable(name, 1, 1)], timeout_ms=30_000)
            # The name is new: TOPIC_ALREADY_EXISTS says an earlier attempt went through, its answer lost as the
            # controller it reached stopped (a handover), and the broker forwarded it again.
            if error in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                return
            assert error in RETRIABLE, f"CreateTopics {name}: {ErrorCode(error).name}"
        except (OSError, AssertionError) as failure:
            if isinstance(failure, AssertionError) and "closed the connection" not in str(failure):
                raise
        assert time.monotonic() < deadline, f"CreateTopics {name} did not succeed in time"
        time.sleep(0.01)


def failover_once(cluster: KfkCluster, index: int, graceful: bool = False) -> tuple[float, float]:
    """One kill -9 (or, `graceful`, SIGTERM: the leader resigns with EndQuorumEpoch) of the active controller: from
    the signal to a new leader, and to the first successful CreateTopics."""
    voters = sorted(cluster.voters)
    leader_id, epoch = active_controller(cluster, voters)
    survivors = [node_id for node_id in voters if node_id != leader_id]
    via = next(broker for broker_id, broker in cluster.brokers.items() if broker_id != leader_id)
    elected: list[float] = []
    killed = time.perf_counter()
    process = cluster.nodes[leader_id].process
    if graceful:
        process.send_signal(signal.SIGTERM)
    else:
        cluster.kill(leader_id)

    def watch() -> None:
        active_controller(cluster, survivors, newer_than=epoch)
        elected.append(time.perf_counter() - killed)

    watcher = threading.Thread(target=watch)
    watcher.start()
    create_until_done(via.bootstrap_servers, f"{'handover' if graceful else 'failover'}-{index}",
                      time.monotonic() + 120)
    created = time.perf_counter() - killed
    watcher.join()
    if graceful:
        code = process.wait(60)  # not cluster.stop(): a second SIGTERM could reach it after its handler is gone
        assert code == 0, f"node {leader_id} exited with {code} on SIGTERM:\n{cluster.nodes[leader_id].output()[-3000:]}"
    cluster.start([leader_id], timeout=120)
    wait_until(lambda: caught_up(cluster, leader_id), timeout=60, interval=0.05, what=f"node {leader_id} caught up")
    wait_until(lambda: all_brokers_unfenced(cluster), timeout=60, what="every broker unfenced")
    return elected[0], created


def bench_failover(cluster: KfkCluster, layout: str, kills: int, graceful: bool = False) -> None:
    loads = [load()]
    runs = [failover_once(cluster, index, graceful) for index in range(kills)]
    loads.append(load())
    elected, created = [run[0] for run in runs], [run[1] for run in runs]
    what = "SIGTERM (graceful resignation, EndQuorumEpoch)" if graceful else "kill -9"
    table(f"[{layout}] controller {'handover' if graceful else 'failover'}, {kills} x {what} of the active "
          f"controller, load {'->'.join(loads)}",
          ["from the signal to", "median ms", "max ms", "min ms"],
          [[what, ms(statistics.median(values)), ms(max(values)), ms(min(values))]
           for what, values in ((f"{'SIGTERM' if graceful else 'kill -9'} to new leader (DescribeQuorum)", elected),
                                ("to first successful CreateTopics", created))])


def bench_bulk_create(cluster: KfkCluster, layout: str, topics: int, partitions: int, batch: int,
                      replication_factor: int) -> None:
    names = [f"bulk-{index}" for index in range(topics)]
    wait_until(lambda: all_brokers_unfenced(cluster), timeout=60, what="every broker unfenced")
    log_sizes = {node_id: node.log_path.stat().st_size for node_id, node in cluster.nodes.items()}
    sockets = broker_sockets(cluster)
    via = next(iter(sockets.values()))
    loads = [load()]
    try:
        refused: list[str] = []
        started = time.perf_counter()
        for start in range(0, topics, batch):
            todo = names[start:start + batch]
            while todo:
                response = request(via, CreateTopicsRequest(topics=[creatable(name, partitions, replication_factor)
                                                                    for name in todo], timeout_ms=300_000),
                                   CREATE_TOPICS_VERSION)
                failed = [topic for topic in response.topics if topic.error_code != ErrorCode.NONE]
                assert {topic.error_code for topic in failed} <= {ErrorCode.INVALID_REPLICATION_FACTOR}, failed[:3]
                if failed:  # fewer unfenced brokers than replicas: sent again once every broker is back
                    refused.append(f"batch {start // batch}: {len(failed)} topics, {failed[0].error_message}")
                    wait_until(lambda: all_brokers_unfenced(cluster), timeout=120, what="every broker unfenced")
                todo = [topic.name for topic in failed]
        answered = time.perf_counter() - started
        pending = set(sockets)
        while pending:
            pending = {broker_id for broker_id in pending if visible(sockets[broker_id], names, partitions) < topics}
            time.sleep(0.1 if pending else 0)
        seen = time.perf_counter() - started
    finally:
        for sock in sockets.values():
            sock.close()
    loads.append(load())
    table(f"[{layout}] {topics} topics x {partitions} partitions (RF {replication_factor}), CreateTopics of {batch} "
          f"topics, load {'->'.join(loads)}", ["from the first CreateTopics to", "seconds", "partitions/s"],
          [[what, f"{value:.2f}", f"{topics * partitions / value:.0f}"]
           for what, value in (("the last answer", answered), ("all visible with leaders on every broker", seen))])
    for line in refused:
        print(f"  refused (INVALID_REPLICATION_FACTOR: a broker fenced), sent again: {line}")
    fenced = [line.split("kfk.controller: ", 1)[-1] for node_id, node in cluster.nodes.items()
              for line in node.log_path.read_bytes()[log_sizes[node_id]:].decode("utf-8", "replace").splitlines()
              if "fencing broker" in line]
    print(f"  brokers fenced by the active controller meanwhile: {len(fenced)}"
          + "".join(f"\n    {line}" for line in fenced))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layouts", default="separate,combined", help="separate, combined or both (comma-separated)")
    parser.add_argument("--samples", type=int, default=200, help="CreateTopics timed for the commit latency")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--handovers", type=int, default=20,
                        help="SIGTERMs of the active controller (graceful resignation) timed like the kills")
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--batch", type=int, default=100, help="topics per CreateTopics request")
    parser.add_argument("--replication-factor", type=int, default=3)
    args = parser.parse_args()
    layouts = args.layouts.split(",")
    if not set(layouts) <= {"separate", "combined"}:
        parser.error(f"unknown layout in {args.layouts!r} (separate, combined)")
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average {os.getloadavg()}")
    for layout in layouts:
        with tempfile.TemporaryDirectory(prefix=f"kfk-bench-kraft-{layout}-") as directory:
            started = time.perf_counter()
            cluster = start_cluster(Path(directory), None, 3, timeout=120, controllers=3 * (layout == "separate"),
                                    combined=layout == "combined")
            print(f"\n[{layout}] {len(cluster.nodes)} processes ready in {time.perf_counter() - started:.1f} s "
                  f"(load {load()})")
            try:
                if args.samples:
                    bench_commit_latency(cluster, layout, args.samples)
                if args.kills:
                    bench_failover(cluster, layout, args.kills)
                if args.handovers:
                    bench_failover(cluster, layout, args.handovers, graceful=True)
                if args.topics:
                    bench_bulk_create(cluster, layout, args.topics, args.partitions, args.batch,
                                      args.replication_factor)
            except BaseException:
                print(cluster.logs(), file=sys.stderr)  # the nodes' logs go with the temporary directory
                raise
            finally:
                cluster.shutdown()


if __name__ == "__main__":
    main()
