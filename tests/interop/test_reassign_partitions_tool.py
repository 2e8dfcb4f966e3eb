"""`kfk reassign-partitions --verify` beside Apache Kafka's kafka-reassign-partitions.sh, on the same KRaft cluster of
three kfk brokers: once no reassignment runs, both clear the throttles of every broker of the cluster (the move's
source included, which the plan does not name) and of the plan's topics, and print the same lines.

On KRaft because Kafka's admin client sends a broker's configs to that broker, which forwards them to the controller:
kfk's ZooKeeper-mode brokers answer NOT_CONTROLLER for them unless they are the controller."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kfk.client import Admin
from kfk.testing.apache_kafka import run_kafka_tool
from tests.cluster.helpers import create_topic, partitions_of, throttled_brokers, wait_until

pytestmark = [pytest.mark.integration]

@pytest.fixture
def kfk_metadata_mode() -> str:
    return "kraft"


def kfk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfk", *args], capture_output=True, text=True, timeout=120)


def test_verify_clears_every_brokers_throttle_and_prints_kafkas_lines(kfk_cluster, tmp_path,
                                                                      kafka_classpath_fixture) -> None:
    bootstrap = kfk_cluster.bootstrap_servers
    create_topic(bootstrap, "moved", assignment=[[1, 2]])
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": "moved", "partition": 0, "replicas": [2, 3]}]}))
    executed = kfk("reassign-partitions", "--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file",
                   str(plan), "--throttle", "10000000")
    assert executed.returncode == 0, executed.stderr
    assert throttled_brokers(bootstrap) == [1, 2, 3]
    wait_until(lambda: partitions_of(bootstrap, "moved")[0][1] == [2, 3], timeout=60, what="the move to complete")
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        wait_until(lambda: not admin.list_partition_reassignments(), timeout=60,
                   what="no reassignment left in the cluster")

    verified = kfk("reassign-partitions", "--bootstrap-server", bootstrap, "--verify", "--reassignment-json-file",
                   str(plan))
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout == ("Status of partition reassignment:\nReassignment of partition moved-0 is completed.\n\n"
                               "Clearing broker-level throttles on brokers 1,2,3\n"
                               "Clearing topic-level throttles on topic moved\n")
    assert throttled_brokers(bootstrap) == []  # broker 1's too: the move's source, not named in the plan

    kafka = run_kafka_tool("reassign-partitions", ["--bootstrap-server", bootstrap, "--verify",
                                                   "--reassignment-json-file", str(plan)])
    assert kafka.returncode == 0, kafka.stdout + kafka.stderr
    assert kafka.stdout == verified.stdout
