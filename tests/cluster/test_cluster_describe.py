"""`kfk cluster describe` on three brokers on ZooKeeper, with a deliberately skewed assignment and a stopped broker:
every CMAK statistic equals the value worked out by hand below."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from confluent_kafka import Producer

from kfk.client import Admin, NewTopic, OffsetAndMetadata, TopicPartition
from tests.cluster.helpers import admin as confluent_admin
from tests.cluster.helpers import partitions_of, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper]

# Brokers 1, 2, 3. "skewed": broker 1 holds a replica of every partition.
SKEWED = {0: [1, 2], 1: [1, 3], 2: [1, 2], 3: [3, 1]}
SKEWED_RECORDS = {0: 3, 1: 2, 2: 1, 3: 4}
# "single": one replica each; partition 0 lives only on broker 3, the broker the test stops.
SINGLE = {0: [3], 1: [2]}
SINGLE_RECORDS = {0: 1, 1: 2}


def _kfk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfk", *args], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ))


def _produce(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for partition, count in counts.items():
        for index in range(count):
            producer.produce(topic, f"{topic}-{partition}-{index}".encode(), partition=partition)
    assert producer.flush(20) == 0


def test_cluster_describe_statistics_on_a_skewed_cluster_with_a_stopped_broker(kfk_cluster) -> None:
    bootstrap = kfk_cluster.bootstrap_servers
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        results = admin.create_topics([NewTopic("skewed", replica_assignments=SKEWED),
                                       NewTopic("single", replica_assignments=SINGLE)])
        assert results == {"skewed": None, "single": None}
        wait_until(lambda: all(len(isr) == len(SKEWED[p]) for p, (_, _, isr) in
                               partitions_of(bootstrap, "skewed").items()), what="skewed fully in sync")
        wait_until(lambda: all(leader >= 0 for leader, _, _ in partitions_of(bootstrap, "single").values()))
        _produce(bootstrap, "skewed", SKEWED_RECORDS)
        _produce(bootstrap, "single", SINGLE_RECORDS)
        # A group without members that committed 1 on skewed-0 and skewed-3: lag (3 - 1) + (4 - 1) = 5.
        # (retried while the new __consumer_offsets partition loads: the Admin returns the per-partition
        # COORDINATOR_LOAD_IN_PROGRESS instead of retrying it)
        wait_until(lambda: set(admin.alter_consumer_group_offsets("g", {
            TopicPartition("skewed", 0): OffsetAndMetadata(1),
            TopicPartition("skewed", 3): OffsetAndMetadata(1)}).values()) == {None}, what="offsets committed")

    assert kfk_cluster.stop(3) == 0
    survivor = kfk_cluster.broker(1).bootstrap_servers

    def settled() -> bool:
        skewed, single = partitions_of(survivor, "skewed"), partitions_of(survivor, "single")
        return (skewed[3][0] == 1 and skewed[1][2] == [1] and skewed[3][2] == [1]
                and single[0][0] == -1 and single[1][0] == 2)

    wait_until(settled, timeout=30, what="broker 3's leadership and ISR membership gone")
    assert partitions_of(survivor, "single")[0][2] == [3]  # an offline partition keeps its last ISR, as in Kafka
    controller = confluent_admin(survivor).list_topics(timeout=5).controller_id

    result = _kfk("cluster", "describe", "--bootstrap-server", survivor, "--exclude-internal", "--output", "json")
    assert result.returncode == 0, result.stderr
    stats = json.loads(result.stdout)
    assert stats["controller_id"] == controller
    topics = {topic["topic"]: topic for topic in stats["topics"]}
    assert sorted(topics) == ["single", "skewed"]

    skewed = topics["skewed"]
    # 8 replicas on 3 brokers: fair share ceil(8/3) = 3; broker 1 holds 4 -> 1 of 3 brokers skewed.
    # Leaders after broker 3 stopped: 1, 1, 1, 1 (partition 3's preferred replica, 3, is gone); fair share
    # ceil(4/3) = 2; broker 1 leads 4 -> 1 of 3 leader-skewed. Partitions 1 and 3 lost a replica.
    assert {key: skewed[key] for key in (
        "replication", "partition_count", "sum_of_partition_offsets", "total_brokers", "brokers_for_topic",
        "preferred_replicas_percent", "brokers_skewed_percent", "brokers_leader_skewed_percent",
        "brokers_spread_percent", "under_replicated_percent", "under_replicated_partitions", "offline_partitions",
    )} == {
        "replication": 2, "partition_count": 4, "sum_of_partition_offsets": 3 + 2 + 1 + 4, "total_brokers": 3,
        "brokers_for_topic": 3, "preferred_replicas_percent": 75, "brokers_skewed_percent": 33,
        "brokers_leader_skewed_percent": 33, "brokers_spread_percent": 100, "under_replicated_percent": 50,
        "under_replicated_partitions": [1, 3], "offline_partitions": [],
    }
    assert [(b["broker_id"], b["partitions"], b["leader_partitions"], b["skewed"], b["leader_skewed"])
            for b in skewed["brokers"]] == [(1, [0, 1, 2, 3], [0, 1, 2, 3], True, True),
                                            (2, [0, 2], [], False, False),
                                            (3, [1, 3], [], False, False)]

    single = topics["single"]
    # The notes' example: 3 brokers in the cluster, the topic on 2 of them -> Brokers Spread 66 %. Partition 0 has
    # no leader: offline, not preferred, left out of the sum of offsets (nobody can answer for it); its ISR is its
    # whole replica set, so it is not under-replicated.
    assert {key: single[key] for key in (
        "replication", "partition_count", "sum_of_partition_offsets", "total_brokers", "brokers_for_topic",
        "preferred_replicas_percent", "brokers_skewed_percent", "brokers_leader_skewed_percent",
        "brokers_spread_percent", "under_replicated_partitions", "offline_partitions",
    )} == {
        "replication": 1, "partition_count": 2, "sum_of_partition_offsets": 2, "total_brokers": 3,
        "brokers_for_topic": 2, "preferred_replicas_percent": 50, "brokers_skewed_percent": 0,
        "brokers_leader_skewed_percent": 0, "brokers_spread_percent": 66,
        "under_replicated_partitions": [], "offline_partitions": [0],
    }

    assert [(b["broker_id"], b["online"], b["partition_count"], b["leader_count"], b["skewed_topics"],
             b["leader_skewed_topics"]) for b in stats["brokers"]] == [
        (1, True, 4, 4, ["skewed"], ["skewed"]),
        (2, True, 2 + 1, 1, [], []),
        (3, False, 2 + 1, 0, [], [])]
    assert stats["under_replicated_partitions"] == 2
    assert stats["offline_partitions"] == 1
    assert stats["groups"] == [{"group_id": "g", "state": "Empty", "partition_count": 2, "total_lag": 5,
                                "assigned_partition_count": 0}]

    # The tables say the same; --json is the other spelling of --output json.
    table = _kfk("cluster", "describe", "--bootstrap-server", survivor, "--exclude-internal")
    assert table.returncode == 0, table.stderr
    rows = [[cell.strip() for cell in line.split("|")] for line in table.stdout.splitlines() if "|" in line]
    assert ["skewed", "1", "4", "4", "(0,1,2,3)", "true", "true"] in rows
    assert ["single", "3", "1", "0", "(0)", "false", "false"] in rows
    assert ["skewed", "2", "4", "10", "3", "3", "75", "33", "33", "100", "50"] in rows
    assert ["g", "Empty", "2", "5"] in rows
    assert json.loads(_kfk("cluster", "describe", "--bootstrap-server", survivor, "--exclude-internal",
                           "--json").stdout) == stats
