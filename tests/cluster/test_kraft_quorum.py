"""A real multi-voter KRaft quorum: three combined nodes (`process.roles=broker,controller`, every node a voter of
`controller.quorum.voters`) as `kfk server start` subprocesses, talking Raft to each other over their listeners.

They elect one leader (the active controller); a topic created on it is replicated through the metadata log to the
others; kill -9 of the leader elects a new one within the fetch timeout plus an election, and nothing committed is
lost; a leader stopped (SIGSTOP) past the fetch timeout is deposed and catches up once resumed; a minority of the
voters never elects a leader. DescribeQuorum (answered by the leader) and Metadata are read over the wire.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kfk.common.internal_topics import CLUSTER_METADATA_TOPIC_NAME
from kfk.errors import ErrorCode
from kfk.protocol.messages.create_topics import CreateTopicsRequest
from kfk.protocol.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
from kfk.protocol.messages.metadata import MetadataRequest
from kfk.testing.broker import BrokerProcess
from tests.integration.wire import connect, request

ELECTION_TIMEOUT_MS = 1000
FETCH_TIMEOUT_MS = 2000
#: Kafka's defaults, set explicitly: the failover bound below is stated in them.
QUORUM_TIMEOUTS = {"controller.quorum.election.timeout.ms": str(ELECTION_TIMEOUT_MS),
                   "controller.quorum.fetch.timeout.ms": str(FETCH_TIMEOUT_MS)}


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    for probe in sockets:
        probe.bind(("127.0.0.1", 0))
    ports = [probe.getsockname()[1] for probe in sockets]
    for probe in sockets:
        probe.close()
    return ports


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
            self.nodes[node_id] = BrokerProcess(log_dir=log_dir / "data", overrides=overrides,
                                                log_path=log_dir / "broker.log", controller_port=port)

    def start(self, *node_ids: int, timeout: float = 30.0) -> None:
        """Start nodes together: a node is ready once its broker is unfenced, which takes an elected controller,
        which takes a majority of the voters."""
        errors: list[BaseException] = []

        def start_one(node: BrokerProcess) -> None:
            try:
                node.start(timeout)
            except BaseException as error:  # noqa: BLE001 - raised below
                errors.append(error)

        threads = [threading.Thread(target=start_one, args=(self.nodes[node_id],))
                   for node_id in node_ids or tuple(self.nodes)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]

    def stop(self) -> None:
        for node in self.nodes.values():
            if node.process is not None and node.process.poll() is None:
                node.process.send_signal(signal.SIGCONT)
            node.kill()

    def describe(self, node_id: int) -> DescribeQuorumResponse.PartitionData | None:
        """The quorum as `node_id` answers DescribeQuorum: the partition entry if it leads, else None."""
        try:
            # The controller listener: a broker listener forwards DescribeQuorum to the leader.
            with connect(f"127.0.0.1:{self.nodes[node_id].controller_port}", timeout=2) as sock:
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

    def wait_for_topic(self, node_id: int, name: str, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while name not in self.topics(node_id):
            assert time.monotonic() < deadline, f"node {node_id} never saw topic {name}"
            time.sleep(0.05)


@pytest.fixture
def quorum(tmp_path):
    quorum = Quorum(tmp_path)
    yield quorum
    quorum.stop()


def test_three_voters_elect_one_leader_and_replicate_the_metadata_to_voters_and_observers(tmp_path) -> None:
    quorum = Quorum(tmp_path, observers=1)  # node 4: process.roles=broker, not a voter
    try:
        quorum.start()
        all_up = time.monotonic()
        leader_id, epoch = quorum.wait_for_leader()
        print(f"first election: {time.monotonic() - all_up:.2f} s after the last node was up")
        quorum.create_topic(leader_id, "replicated")
        for node_id in quorum.nodes:
            quorum.wait_for_topic(node_id, "replicated")
        described = quorum.describe(leader_id)
        assert (described.leader_id, described.leader_epoch) == (leader_id, epoch)
        assert sorted(voter.replica_id for voter in described.current_voters) == [1, 2, 3]
        assert all(voter.log_end_offset > 0 for voter in described.current_voters)
        assert [observer.replica_id for observer in described.observers] == [4]
        others = [node_id for node_id in quorum.nodes if node_id != leader_id]
        assert all(quorum.describe(node_id) is None for node_id in others)  # only the leader describes the quorum
    finally:
        quorum.stop()


def test_a_leader_shut_down_cleanly_hands_over_before_the_fetch_timeout(quorum: Quorum) -> None:
    quorum.start()
    leader_id, epoch = quorum.wait_for_leader()
    quorum.create_topic(leader_id, "before-the-shutdown")
    stopping = time.monotonic()
    quorum.nodes[leader_id].process.send_signal(signal.SIGTERM)  # EndQuorumEpoch names the successors
    survivors = tuple(node_id for node_id in quorum.voter_ids if node_id != leader_id)
    new_leader, _ = quorum.wait_for_leader(among=survivors, newer_than=epoch)
    handed_over_s = time.monotonic() - stopping
    print(f"graceful handover: new leader {handed_over_s:.2f} s after SIGTERM")
    assert handed_over_s < FETCH_TIMEOUT_MS / 1000
    assert quorum.nodes[leader_id].process.wait(20) == 0  # and the shutdown completes
    assert "before-the-shutdown" in quorum.topics(new_leader)


def test_kill_9_of_the_leader_elects_a_new_one_and_loses_nothing_committed(quorum: Quorum) -> None:
    quorum.start()
    leader_id, epoch = quorum.wait_for_leader()
    quorum.create_topic(leader_id, "before-the-crash")
    for node_id in quorum.nodes:
        quorum.wait_for_topic(node_id, "before-the-crash")
    killed = time.monotonic()
    quorum.nodes[leader_id].kill()
    survivors = tuple(node_id for node_id in quorum.nodes if node_id != leader_id)
    new_leader, new_epoch = quorum.wait_for_leader(among=survivors, newer_than=epoch)
    elected_s = time.monotonic() - killed
    created_s = elected_s + quorum.create_topic(new_leader, "after-the-crash")
    print(f"failover: new leader {elected_s:.2f} s after kill -9, first CreateTopics {created_s:.2f} s after")
    # A follower notices its leader is gone after the fetch timeout; an election takes at most one more
    # randomized election timeout (up to twice the configured one), then a few round trips.
    assert elected_s < (FETCH_TIMEOUT_MS + 2 * ELECTION_TIMEOUT_MS) / 1000 + 0.5
    for node_id in survivors:
        quorum.wait_for_topic(node_id, "after-the-crash")
        assert "before-the-crash" in quorum.topics(node_id)
    # The crashed node comes back as a follower and catches up.
    quorum.start(leader_id)
    quorum.wait_for_topic(leader_id, "after-the-crash")
    assert quorum.wait_for_leader(among=survivors) == (new_leader, new_epoch)


def test_a_stopped_leader_is_deposed_and_catches_up_when_resumed(quorum: Quorum) -> None:
    quorum.start()
    leader_id, epoch = quorum.wait_for_leader()
    stopped = quorum.nodes[leader_id].process
    stopped.send_signal(signal.SIGSTOP)
    try:
        survivors = tuple(node_id for node_id in quorum.nodes if node_id != leader_id)
        new_leader, new_epoch = quorum.wait_for_leader(among=survivors, newer_than=epoch)
        quorum.create_topic(new_leader, "while-stopped")
        time.sleep(FETCH_TIMEOUT_MS / 1000)  # well past the fetch timeout
    finally:
        stopped.send_signal(signal.SIGCONT)
    # Resumed, it learns the new epoch (its check-quorum, or the first answer from a voter), follows, catches up.
    quorum.wait_for_topic(leader_id, "while-stopped")
    assert quorum.describe(leader_id) is None
    described = quorum.describe(new_leader)
    assert described.leader_epoch == new_epoch
    deadline = time.monotonic() + 10
    while True:
        described = quorum.describe(new_leader)
        offsets = {voter.replica_id: voter.log_end_offset for voter in described.current_voters}
        if offsets[leader_id] >= described.high_watermark:
            break
        assert time.monotonic() < deadline, offsets
        time.sleep(0.05)


def test_a_minority_of_the_voters_cannot_elect_a_leader(quorum: Quorum) -> None:
    # Node 1 alone is not ready (its broker waits for a controller to unfence it) but serves its controller listener.
    first = threading.Thread(target=quorum.start, args=(1,), kwargs={"timeout": 90.0})
    first.start()
    time.sleep(3 * (FETCH_TIMEOUT_MS + 2 * ELECTION_TIMEOUT_MS) / 1000 / 2)
    assert quorum.describe(1) is None
    assert "no leader" in str(pytest.raises(AssertionError, quorum.wait_for_leader, timeout=1.0).value)
    quorum.start(2)  # a majority now: two of three
    first.join()
    assert quorum.nodes[1].process is not None  # and node 1 became ready with it
    leader_id, _ = quorum.wait_for_leader(among=(1, 2))
    assert leader_id in (1, 2)
