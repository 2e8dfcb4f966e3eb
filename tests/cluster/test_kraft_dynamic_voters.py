"""A dynamic KRaft quorum (KIP-853) grown and shrunk with `kfk metadata-quorum`, on real processes.

One controller formatted with `kfk storage format --standalone` and two brokers start; two more controllers
formatted with --no-initial-controllers start as observers and are added with `add-controller` (describe: 3
voters); the first controller is killed with SIGKILL, one of the added ones takes over, topics are still created and
records produced and consumed with confluent-kafka; `remove-controller` takes the dead one out (describe: 2 voters).
A dynamic quorum trims its metadata log behind its snapshots too: controllers started once the first one trimmed away
the VotersRecord that made it a voter learn the voters from its snapshot (FetchSnapshot) and are added all the same.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kfk.testing.broker import BrokerProcess, start_together
from kfk.testing.cluster import KRAFT_OVERRIDES, random_cluster_id
from kfk.testing.ports import free_port
from tests.cluster.helpers import admin, consume_all, create_topic, wait_until
from tests.cluster.test_kraft_fetch_snapshot import create_topics, snapshots_and_log_start

pytestmark = pytest.mark.integration

CONTROLLER_IDS = (101, 102, 103)
BROKER_IDS = (1, 2)
#: Small metadata segments and frequent snapshots, so that a few hundred topics trim the metadata logs.
TRIMMING = {"metadata.log.max.record.bytes.between.snapshots": "8192", "metadata.log.segment.bytes": "16384",
            "metadata.log.segment.min.bytes": "16384"}


def kfk(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfk", *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def status(bootstrap_flag: str, address: str) -> dict:
    result = kfk("metadata-quorum", "describe", "--status", "--json", bootstrap_flag, address)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


class DynamicCluster:
    def __init__(self, directory: Path, overrides: dict[str, str] | None = None) -> None:
        """`overrides`: more properties for every node."""
        self.directory = directory
        self.overrides = overrides or {}
        self.cluster_id = random_cluster_id()
        self.controller_ports = {node_id: free_port() for node_id in CONTROLLER_IDS}
        self.bootstrap_controllers = ",".join(f"127.0.0.1:{port}" for port in self.controller_ports.values())
        self.nodes: dict[int, BrokerProcess] = {}

    def properties(self, node_id: int, roles: str) -> dict[str, str]:
        return {**KRAFT_OVERRIDES, "process.roles": roles, "node.id": str(node_id),
                "controller.quorum.bootstrap.servers": self.bootstrap_controllers,
                "log.dirs": str(self.directory / f"node-{node_id}" / "data"),
                "offsets.topic.replication.factor": "2", "transaction.state.log.replication.factor": "2",
                "transaction.state.log.min.isr": "1", "group.initial.rebalance.delay.ms": "0", **self.overrides}

    def add(self, node_id: int, roles: str, format_args: list[str]) -> BrokerProcess:
        directory = self.directory / f"node-{node_id}"
        directory.mkdir(parents=True, exist_ok=True)
        node = BrokerProcess(log_dir=directory / "data", overrides=self.properties(node_id, roles),
                             log_path=directory / "kfk.log", controller_port=self.controller_ports.get(node_id),
                             cluster_id=self.cluster_id, format_args=format_args)
        self.nodes[node_id] = node
        return node

    def properties_file(self, node_id: int) -> Path:
        """The controller's server.properties, as add-controller reads it."""
        node = self.nodes[node_id]
        values = {**node.overrides, "listeners": f"CONTROLLER://127.0.0.1:{self.controller_ports[node_id]}"}
        path = self.directory / f"node-{node_id}" / "server.properties"
        path.write_text("".join(f"{key}={value}\n" for key, value in values.items()))
        return path

    def directory_id(self, node_id: int) -> str:
        meta = (self.directory / f"node-{node_id}" / "data" / "meta.properties").read_text()
        return next(line.split("=", 1)[1] for line in meta.splitlines() if line.startswith("directory.id="))

    def start(self, node_ids: list[int]) -> None:
        """Start nodes at once, as KfkCluster.start does (each waits for the quorum on its own)."""
        start_together([self.nodes[node_id] for node_id in node_ids], 60)

    def logs(self) -> str:
        return "\n".join(f"--- node {node_id} ---\n{node.output()[-6000:]}" for node_id, node in self.nodes.items())

    def shutdown(self) -> None:
        for node in self.nodes.values():
            node.kill()


def test_controllers_added_and_removed_with_metadata_quorum(tmp_path: Path) -> None:
    cluster = DynamicCluster(tmp_path)
    try:
        first = cluster.add(CONTROLLER_IDS[0], "controller", ["--standalone"])
        brokers = [cluster.add(broker_id, "broker", []) for broker_id in BROKER_IDS]
        for node_id in CONTROLLER_IDS[1:]:
            cluster.add(node_id, "controller", ["--no-initial-controllers"])
        cluster.start([CONTROLLER_IDS[0], *BROKER_IDS, *CONTROLLER_IDS[1:]])
        bootstrap = ",".join(broker.bootstrap_servers for broker in brokers)
        quorum = status("--bootstrap-server", bootstrap)
        assert [voter["id"] for voter in quorum["CurrentVoters"]] == [CONTROLLER_IDS[0]]
        assert quorum["CurrentVoters"][0]["directoryId"] == cluster.directory_id(CONTROLLER_IDS[0])
        # The voters' CONTROLLER endpoints, not a broker listener.
        assert quorum["CurrentVoters"][0]["endpoints"] == [f"CONTROLLER://127.0.0.1:{first.controller_port}"]

        for node_id in CONTROLLER_IDS[1:]:
            added = kfk("metadata-quorum", "add-controller", "--command-config", str(cluster.properties_file(node_id)),
                        "--bootstrap-server", bootstrap)
            assert added.returncode == 0, added.stderr + cluster.logs()
            assert added.stdout.startswith(f"Added controller {node_id} with directory id "
                                           f"{cluster.directory_id(node_id)} and endpoints: CONTROLLER://127.0.0.1:")
        quorum = status("--bootstrap-controller", cluster.bootstrap_controllers)
        assert sorted(voter["id"] for voter in quorum["CurrentVoters"]) == list(CONTROLLER_IDS)
        assert quorum["LeaderId"] == CONTROLLER_IDS[0]
        again = kfk("metadata-quorum", "add-controller", "--command-config",
                    str(cluster.properties_file(CONTROLLER_IDS[1])), "--bootstrap-server", bootstrap)
        assert again.returncode == 1 and "already a voter" in again.stderr, again.stderr

        first.kill()
        survivors = ",".join(f"127.0.0.1:{cluster.controller_ports[node_id]}" for node_id in CONTROLLER_IDS[1:])
        quorum = wait_until(lambda: status("--bootstrap-controller", survivors), timeout=20,
                            what="a leader among the added controllers")
        assert quorum["LeaderId"] in CONTROLLER_IDS[1:]

        topic = "after-failover"
        create_topic(bootstrap, topic, partitions=2, replication_factor=2)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for index in range(20):
            producer.produce(topic, value=f"record-{index}".encode(), partition=index % 2)
        assert producer.flush(20) == 0
        consumed = consume_all(bootstrap, topic, 2)
        assert sorted(value for values in consumed.values() for value in values) == \
            sorted(f"record-{index}".encode() for index in range(20))

        removed = kfk("metadata-quorum", "remove-controller", "--controller-id", str(CONTROLLER_IDS[0]),
                      "--controller-directory-id", cluster.directory_id(CONTROLLER_IDS[0]),
                      "--bootstrap-controller", survivors)
        assert removed.returncode == 0, removed.stderr + cluster.logs()
        assert removed.stdout.strip() == (f"Removed KRaft controller {CONTROLLER_IDS[0]} with directory id "
                                          f"{cluster.directory_id(CONTROLLER_IDS[0])}")
        quorum = status("--bootstrap-server", bootstrap)
        assert sorted(voter["id"] for voter in quorum["CurrentVoters"]) == list(CONTROLLER_IDS[1:])
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.shutdown()


def test_controllers_started_after_the_log_was_trimmed_learn_the_voters_from_a_snapshot(tmp_path: Path) -> None:
    cluster = DynamicCluster(tmp_path, overrides=TRIMMING)
    try:
        first = cluster.add(CONTROLLER_IDS[0], "controller", ["--standalone"])
        broker = cluster.add(BROKER_IDS[0], "broker", [])
        cluster.start([CONTROLLER_IDS[0], BROKER_IDS[0]])
        names = [f"trim-{index:03d}" for index in range(200)]
        for start in range(0, len(names), 20):
            create_topics(first.controller_port, names[start:start + 20])
        # The first segment, which held the VotersRecord the leader wrote on its first election, is deleted.
        wait_until(lambda: snapshots_and_log_start(first)[1] > 0, what="the first controller's log trimmed")

        added_ids = list(CONTROLLER_IDS[1:])
        for node_id in added_ids:
            cluster.add(node_id, "controller", ["--no-initial-controllers"])
        cluster.start(added_ids)
        for node_id in added_ids:
            node = cluster.nodes[node_id]
            wait_until(lambda node=node: "fetched from the leader loaded" in node.output(),
                       what=f"controller {node_id} loading the leader's snapshot")
            assert snapshots_and_log_start(node)[1] > 0  # its log starts at the snapshot's end, not at 0
            added = wait_until(lambda node_id=node_id: (done := kfk(
                "metadata-quorum", "add-controller", "--command-config", str(cluster.properties_file(node_id)),
                "--bootstrap-server", broker.bootstrap_servers)).returncode == 0 and done,
                timeout=30, what=f"controller {node_id} added")
            assert added.stdout.startswith(f"Added controller {node_id} ")
        quorum = status("--bootstrap-controller", cluster.bootstrap_controllers)
        assert sorted(voter["id"] for voter in quorum["CurrentVoters"]) == list(CONTROLLER_IDS)

        first.kill()
        survivors = ",".join(f"127.0.0.1:{cluster.controller_ports[node_id]}" for node_id in added_ids)
        quorum = wait_until(lambda: status("--bootstrap-controller", survivors), timeout=20,
                            what="a leader among the added controllers")
        assert quorum["LeaderId"] in added_ids
        create_topic(broker.bootstrap_servers, "after-trim", partitions=1, replication_factor=1)
        assert "after-trim" in admin(broker.bootstrap_servers).list_topics(timeout=10).topics
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.shutdown()


@pytest.fixture
def kfk_metadata_mode() -> str:
    return "kraft"


def test_describe_status_names_a_static_voters_controller_endpoint(kfk_cluster_factory) -> None:
    """controller.quorum.voters: the voter's endpoint is its CONTROLLER listener, never a broker listener."""
    cluster = kfk_cluster_factory(size=1, controllers=1)
    (controller_id, port), = cluster.voters.items()
    quorum = status("--bootstrap-server", cluster.bootstrap_servers)
    assert quorum["CurrentVoters"] == [{"id": controller_id, "endpoints": [f"CONTROLLER://127.0.0.1:{port}"]}]
