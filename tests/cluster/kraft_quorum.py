"""Three combined KRaft nodes (`process.roles=broker,controller`, every one a voter of `controller.quorum.voters`,
optionally brokers-only observers) as `kfk server start` subprocesses, formatted with one cluster id, and what tests
and benchmarks ask them over the wire: DescribeQuorum (answered by the leader), Metadata, CreateTopics."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from kfk.common.internal_topics import CLUSTER_METADATA_TOPIC_NAME
from kfk.errors import ErrorCode
from kfk.protocol.messages.create_topics import CreateTopicsRequest
from kfk.protocol.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
from kfk.protocol.messages.metadata import MetadataRequest
from kfk.testing.broker import BrokerProcess, start_together
from kfk.testing.ports import free_ports
from tests.integration.wire import connect, request

ELECTION_TIMEOUT_MS = 1000
FETCH_TIMEOUT_MS = 2000
#: Kafka's defaults, set explicitly: the failover bound below is stated in them.
QUORUM_TIMEOUTS = {"controller.quorum.election.timeout.ms": str(ELECTION_TIMEOUT_MS),
                   "controller.quorum.fetch.timeout.ms": str(FETCH_TIMEOUT_MS)}


class Quorum:
    """Three combined nodes, formatted with one cluster id."""

    def __init__(self, root: Path, size: int = 3, observers: int = 0) -> None:
        ports = free_ports(size + observers)
        voters = ",".join(f"{node}@127.0.0.1:{port}" for node, port in zip(range(1, size + 1), ports))
        cluster_id = subprocess.run([sys.executable, "-m", "kfk", "storage", "random-uuid"], check=True,
                                    capture_output=True, text=True).stdout.strip()
        self.nodes: dict[int, BrokerProcess] = {}
        self.voter_ids = tuple(range(1, size + 1))
        for node_id, port in zip(range(1, size + observers + 1), ports):
            log_dir = root / f"node{node_id}"
            log_dir.mkdir()
            roles = "broker,controller" if node_id in self.voter_ids else "broker"
            overrides = {"process.roles": roles, "node.id": str(node_id),
                         "controller.quorum.voters": voters, "controller.listener.names": "CONTROLLER",
                         "log.dirs": str(log_dir / "data"), "offsets.topic.replication.factor": "1",
                         **QUORUM_TIMEOUTS}
            subprocess.run([sys.executable, "-m", "kfk", "storage", "format", "--cluster-id", cluster_id,
                            *[arg for key, value in overrides.items() for arg in ("--override", f"{key}={value}")]],
                           check=True, capture_output=True)
            # A voter's port is its controller listener (the voters string names it); an observer's, its broker's.
            voter = node_id in self.voter_ids
            self.nodes[node_id] = BrokerProcess(log_dir=log_dir / "data", overrides=overrides,
                                                log_path=log_dir / "broker.log", port=0 if voter else port,
                                                controller_port=port if voter else None)

    def start(self, *node_ids: int, timeout: float = 30.0) -> None:
        """Start nodes together: a node is ready once its broker is unfenced, which takes an elected controller,
        which takes a majority of the voters."""
        start_together([self.nodes[node_id] for node_id in node_ids or tuple(self.nodes)], timeout)

    def stop(self) -> None:
        for node in self.nodes.values():
            if node.process is not None and node.process.poll() is None:
                node.process.send_signal(signal.SIGCONT)
            node.kill()

    def describe(self, node_id: int) -> DescribeQuorumResponse.PartitionData | None:
        """The quorum as `node_id` answers DescribeQuorum: the partition entry if it leads, else None."""
        try:
            # A voter's controller listener (a broker listener forwards DescribeQuorum to the leader).
            node = self.nodes[node_id]
            address = f"127.0.0.1:{node.controller_port}" if node.controller_port else node.bootstrap_servers
            with connect(address, timeout=2) as sock:
                response = request(sock, DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
                    topic_name=CLUSTER_METADATA_TOPIC_NAME,
                    partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)])]), 2)
        except OSError:
            return None
        (partition,) = response.topics[0].partitions
        return partition if partition.error_code == ErrorCode.NONE else None

    def wait_for_leader(self, among: tuple[int, ...] | None = None, newer_than: int = 0,
                        timeout: float = 15.0) -> tuple[int, int]:
        """(leader id, epoch) once one of `among` answers DescribeQuorum as leader of an epoch > newer_than."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for node_id in among or self.voter_ids:
                partition = self.describe(node_id)
                if partition is not None and partition.leader_epoch > newer_than:
                    return partition.leader_id, partition.leader_epoch
            time.sleep(0.02)
        raise AssertionError(f"no leader among {among or self.voter_ids} within {timeout} s")

    def topics(self, node_id: int) -> set[str]:
        with connect(self.nodes[node_id].bootstrap_servers) as sock:
            response = request(sock, MetadataRequest(topics=None), 12)
        return {topic.name for topic in response.topics}

    def create_topic(self, node_id: int, name: str, timeout: float = 10.0) -> float:
        """Create `name` through `node_id`, retrying while it answers NOT_CONTROLLER (a new leader's controller
        becomes active once it has replayed the log); the seconds it took."""
        started = time.monotonic()
        while True:
            with connect(self.nodes[node_id].bootstrap_servers) as sock:
                response = request(sock, CreateTopicsRequest(timeout_ms=10_000, topics=[
                    CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=1)]), 7)
            error = response.topics[0].error_code
            if error != ErrorCode.NOT_CONTROLLER or time.monotonic() - started > timeout:
                assert error == ErrorCode.NONE, response
                return time.monotonic() - started
            time.sleep(0.02)

    def wait_for_topic(self, node_id: int, name: str, timeout: float = 10.0, poll_s: float = 0.05) -> None:
        deadline = time.monotonic() + timeout
        while name not in self.topics(node_id):
            assert time.monotonic() < deadline, f"node {node_id} never saw topic {name}"
            time.sleep(poll_s)
