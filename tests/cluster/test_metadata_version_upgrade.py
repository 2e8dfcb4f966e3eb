"""An online metadata.version upgrade with Apache Kafka's own kafka-features.sh: a KRaft cluster formatted at
3.3-IV3 (what kfk formatted before it served later levels) goes to 4.4-IV2 with eligible leader replicas while it
runs. The broker then registers its log dir (amending its registration, as Kafka's brokers do), new partitions
record the dir of each replica, the controller writes ELR's cluster-wide min.insync.replicas, and the records are
written at the new level's versions. Read back from the controller's metadata log, as Kafka would read it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.common.uuids import uuid_from_base64
from kfk.storage.meta_properties import MetaProperties
from kfk.testing.apache_kafka import run_kafka_tool
from tests.cluster.helpers import metadata_log_batches, wait_until

pytestmark = [pytest.mark.integration]


@pytest.fixture
def kfk_metadata_mode() -> str:
    return "kraft"


def records(log_dir: Path, name: str) -> list:
    return [record for batch in metadata_log_batches(log_dir) for record in batch if record.NAME == name]


def test_a_running_cluster_upgraded_from_3_3_to_4_4_with_kafka_s_tool(kfk_cluster_factory) -> None:
    cluster = kfk_cluster_factory(size=1, format_args=["--release-version", "3.3-IV3"],
                                  overrides={"offsets.topic.replication.factor": "1"})
    bootstrap = cluster.bootstrap_servers
    controller_log = Path(cluster.controllers[101].log_dir)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("before", 1, 1)])["before"].result(30)

    upgrade = run_kafka_tool("features", ["--bootstrap-server", bootstrap, "upgrade", "--feature",
                                          "metadata.version=33", "--feature", "eligible.leader.replicas.version=1"])
    assert upgrade.returncode == 0, upgrade.stderr[-2000:]
    assert upgrade.stdout.splitlines() == ["eligible.leader.replicas.version was upgraded to 1.",
                                           "metadata.version was upgraded to 33."]
    described = subprocess.run([sys.executable, "-m", "kfk", "features", "--bootstrap-server", bootstrap,
                                "describe"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert "FinalizedVersionLevel: 4.4-IV2" in described.stdout, described.stdout

    # The broker's registration gains its log dir without a restart: the same epoch, still unfenced.
    directory_id = uuid_from_base64(MetaProperties.read(str(cluster.broker(1).log_dir)).directory_id)
    registrations = wait_until(lambda: [r for r in records(controller_log, "RegisterBrokerRecord") if r.log_dirs],
                               timeout=30, what="the broker's registration with its log dir")
    first = records(controller_log, "RegisterBrokerRecord")[0]
    assert (registrations[-1].log_dirs, registrations[-1].broker_epoch, registrations[-1].fenced) == (
        [directory_id], first.broker_epoch, False)

    admin.create_topics([NewTopic("after", 1, 1)])["after"].result(30)
    wait_until(lambda: len(records(controller_log, "PartitionRecord")) >= 2, what="the new partition's record")
    partitions = {record.topic_id: record for record in records(controller_log, "PartitionRecord")}
    topic_ids = {record.name: record.topic_id for record in records(controller_log, "TopicRecord")}
    assert partitions[topic_ids["before"]].directories == []  # from before the upgrade: MIGRATING, as Kafka reads it
    assert partitions[topic_ids["after"]].directories == [directory_id]
    configs = run_kafka_tool("configs", ["--bootstrap-server", bootstrap, "--describe", "--entity-type", "brokers",
                                         "--entity-default"])
    assert "min.insync.replicas=1 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:min.insync.replicas=1}" \
        in configs.stdout, configs.stdout

    downgrade = run_kafka_tool("features", ["--bootstrap-server", bootstrap, "downgrade", "--release-version", "3.3"])
    assert downgrade.returncode != 0
    assert "Refusing to perform the requested downgrade because it might delete metadata information." \
        in downgrade.stdout + downgrade.stderr
