"""Feature versions on 3 combined KRaft nodes (real processes): kafka-features.sh and `kfk features` print the same
lines against kfk (through brokers and straight to the controllers); Kafka's tool changes a level through a broker that is not the active controller (forwarded); the
level holds through a kill -9 of the active controller (the new one takes the next change, kfk's tool sending it)
and through a restart from a metadata snapshot that holds it."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from kfk.backends.embedded.snapshots.reader import latest_valid_snapshot
from kfk.client import Admin
from kfk.testing.apache_kafka import run_kafka_tool
from tests.cluster.helpers import wait_until
from tests.cluster.test_kraft_cluster import quorum_leader
from tests.integration.wire import connect, request
from kfk.protocol.messages.create_topics import CreateTopicsRequest

pytestmark = [pytest.mark.integration]

OVERRIDES = {
    "metadata.log.max.record.bytes.between.snapshots": "4096",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.fetch.timeout.ms": "1000",
    "broker.session.timeout.ms": "3000",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
}


@pytest.fixture
def kfk_metadata_mode() -> str:
    return "kraft"


def kafka_features(bootstrap: str, *args: str, flag: str = "--bootstrap-server") -> subprocess.CompletedProcess:
    return run_kafka_tool("features", [flag, bootstrap, *args])


def kfk_features(bootstrap: str, *args: str, flag: str = "--bootstrap-server") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfk", "features", flag, bootstrap, *args],
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)


def finalized(bootstrap: str) -> dict[str, int]:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        return admin.describe_features().finalized_features


def _epochless(text: str) -> list[str]:
    return re.sub(r"Epoch: \d+$", "Epoch: #", text, flags=re.M).splitlines()


def test_levels_through_kafka_s_tool_a_failover_and_a_snapshot_restart(kfk_cluster_factory) -> None:
    cluster = kfk_cluster_factory(size=3, combined=True, overrides=OVERRIDES)
    bootstrap = cluster.bootstrap_servers
    outputs = {}
    controllers = ",".join(f"127.0.0.1:{port}" for port in cluster.voters.values())
    for flag, address, args in (("--bootstrap-server", bootstrap, ["describe"]),
                                ("--bootstrap-server", bootstrap, ["upgrade", "--feature", "group.version=1"]),
                                ("--bootstrap-controller", controllers,
                                 ["disable", "--feature", "transaction.version", "--dry-run"])):
        kafka, kfk = kafka_features(address, *args, flag=flag), kfk_features(address, *args, flag=flag)
        assert (_epochless(kfk.stdout), kfk.returncode) == (_epochless(kafka.stdout), kafka.returncode), args
        outputs[args[0]] = kafka.stdout
    assert re.search(r"Feature: transaction.version +SupportedMinVersion: 0 +SupportedMaxVersion: 2 +"
                     r"FinalizedVersionLevel: 2 ", outputs["describe"])
    assert outputs["disable"] == "transaction.version can be disabled.\n"

    leader = wait_until(lambda: quorum_leader(cluster), what="the active controller")
    other = min(node_id for node_id in cluster.nodes if node_id != leader)
    done = kafka_features(cluster.broker(other).bootstrap_servers, "downgrade", "--feature", "transaction.version=1")
    assert (done.returncode, done.stdout) == (0, "transaction.version was downgraded to 1.\n"), done.stderr[-2000:]
    for node in cluster.nodes.values():
        wait_until(lambda node=node: finalized(node.bootstrap_servers).get("transaction.version") == 1,
                   what=f"node {node.node_id} at transaction.version 1")

    cluster.kill(leader)
    wait_until(lambda: quorum_leader(cluster, exclude=leader) not in (None, leader), what="a new active controller")
    survivor = cluster.broker(other).bootstrap_servers
    assert finalized(survivor)["transaction.version"] == 1
    done = kfk_features(survivor, "upgrade", "--feature", "transaction.version=2")
    assert (done.returncode, done.stdout) == (0, "transaction.version was upgraded to 2.\n"), done.stderr
    cluster.start([leader])
    wait_until(lambda: finalized(cluster.broker(leader).bootstrap_servers).get("transaction.version") == 2,
               what="the restarted node at transaction.version 2")

    # Enough metadata for every node to snapshot past the change, then every node restarts from its snapshot.
    with connect(survivor) as sock:
        for batch in range(6):
            response = request(sock, CreateTopicsRequest(timeout_ms=10_000, topics=[
                CreateTopicsRequest.CreatableTopic(name=f"features-{batch}-{index}", num_partitions=1,
                                                   replication_factor=1) for index in range(10)]), 7)
            assert not [topic.name for topic in response.topics if topic.error_code]

    def snapshot_levels(node) -> dict[str, int] | None:
        snapshot = latest_valid_snapshot(os.path.join(node.log_dir, "__cluster_metadata-0"))
        if snapshot is None or not any(record.NAME == "TopicRecord" and record.name.startswith("features-")
                                       for record in snapshot.records):  # taken after the upgrade
            return None
        return {record.name: record.feature_level for record in snapshot.records
                if record.NAME == "FeatureLevelRecord"}

    for node in cluster.nodes.values():
        levels = wait_until(lambda node=node: snapshot_levels(node), what=f"node {node.node_id}'s snapshot")
        assert levels == {"metadata.version": 33, "eligible.leader.replicas.version": 1, "group.version": 1,
                          "transaction.version": 2}
    assert cluster.stop(other) == 0
    cluster.start([other])
    node = cluster.nodes[other]
    assert re.search(r"metadata snapshot SnapshotId\(.*\) loaded", node.output())
    wait_until(lambda: finalized(node.bootstrap_servers).get("transaction.version") == 2,
               what="the node restarted from its snapshot at transaction.version 2")
