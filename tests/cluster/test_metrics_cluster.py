"""Metrics of a three-broker cluster on ZooKeeper, each broker with its own metrics.port: under-replicated partitions
on the leader go to N while a follower is frozen (SIGSTOP) and back to 0 when it resumes; the ISR shrinks and
expands are counted; exactly one broker reports itself the active controller; followers' fetches count as
replication bytes out (and as FetchFollower requests); every group's lag is exported once across the cluster."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kfk.client import Admin, NewTopic
from kfk.testing.ports import free_port
from tests.cluster.helpers import partitions_of, wait_until
from tests.integration.prometheus import scrape, value

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper]

# Broker 1 leads every partition; broker 3 follows the first N of them.
ASSIGNMENT = {0: [1, 3], 1: [1, 3], 2: [1, 3], 3: [1, 2]}
FOLLOWED_BY_3 = 3


def test_under_replicated_partitions_follow_a_frozen_follower(kfk_cluster_factory) -> None:
    cluster = kfk_cluster_factory(size=0)
    ports = {broker_id: free_port() for broker_id in (1, 2, 3)}
    for broker_id, port in ports.items():
        cluster.add_broker(broker_id, {"metrics.port": str(port)})
    cluster.start()
    bootstrap = cluster.bootstrap_servers
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.create_topics([NewTopic("watched", replica_assignments=ASSIGNMENT)]) == {"watched": None}
    wait_until(lambda: all(len(isr) == len(ASSIGNMENT[p]) for p, (_, _, isr) in
                           partitions_of(bootstrap, "watched").items()), what="every replica in sync")
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5})
    for partition in ASSIGNMENT:
        producer.produce("watched", b"x" * 1000, partition=partition)
    assert producer.flush(20) == 0

    leader = ports[1]
    wait_until(lambda: value(scrape(leader), "kafka_server_brokertopicmetrics_replicationbytesout_total",
                             topic="watched") > 0, what="followers fetched from the leader")
    before = scrape(leader)
    assert value(before, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert value(before, "kafka_server_replicamanager_leadercount") == len(ASSIGNMENT)
    assert value(before, "kafka_network_requestmetrics_requests_total", request="FetchFollower") > 0
    assert sum(value(scrape(port), "kafka_controller_kafkacontroller_activecontrollercount")
               for port in ports.values()) == 1
    shrinks = value(before, "kafka_server_replicamanager_isrshrinks_total")
    expands = value(before, "kafka_server_replicamanager_isrexpands_total")

    cluster.pause(3)
    try:
        def under_replicated_while_producing() -> bool:
            # New records leave the frozen follower behind: the leader drops it from the ISRs after
            # replica.lag.time.max.ms (2 s here), before its ZooKeeper session (4 s) expires.
            for partition in ASSIGNMENT:
                producer.produce("watched", b"y" * 100, partition=partition)
            producer.poll(0)
            return value(scrape(leader), "kafka_server_replicamanager_underreplicatedpartitions") == FOLLOWED_BY_3

        wait_until(under_replicated_while_producing, timeout=30, what=f"{FOLLOWED_BY_3} under-replicated partitions")
        # Broker 2 still follows everything it should: it leads nothing, so it reports nothing under-replicated.
        assert value(scrape(ports[2]), "kafka_server_replicamanager_underreplicatedpartitions") == 0
    finally:
        cluster.resume(3)
    assert producer.flush(20) == 0
    wait_until(lambda: value(scrape(leader), "kafka_server_replicamanager_underreplicatedpartitions") == 0,
               timeout=30, what="broker 3 back in every ISR")
    after = scrape(leader)
    assert value(after, "kafka_server_replicamanager_isrshrinks_total") >= shrinks + 1
    assert value(after, "kafka_server_replicamanager_isrexpands_total") >= expands + 1
    assert sum(value(scrape(port), "kafka_controller_kafkacontroller_offlinepartitionscount")
               for port in ports.values()) == 0


LAG_PARTITIONS = 9


def test_consumer_lag_of_every_partition_is_exported_once_across_the_cluster(kfk_cluster_factory) -> None:
    """A group over 9 partitions led by all three brokers: its coordinator exports the lag of each partition once
    (asking the other leaders for their high watermarks), and the sum over the brokers' endpoints is the total of
    `kfk consumer-groups --describe` (the group is idle: its offsets and the logs do not move)."""
    cluster = kfk_cluster_factory(size=0)
    ports = {broker_id: free_port() for broker_id in (1, 2, 3)}
    for broker_id, port in ports.items():
        cluster.add_broker(broker_id, {"metrics.port": str(port)})
    cluster.start()
    bootstrap = cluster.bootstrap_servers
    assignment = {partition: [partition % 3 + 1, (partition + 1) % 3 + 1] for partition in range(LAG_PARTITIONS)}
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.create_topics([NewTopic("lagged", replica_assignments=assignment)]) == {"lagged": None}
    wait_until(lambda: {leader for leader, _, _ in partitions_of(bootstrap, "lagged").values()} == {1, 2, 3},
               what="partitions led by all three brokers")
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for partition in range(LAG_PARTITIONS):
        for _ in range(20 + 7 * partition):
            producer.produce("lagged", b"r" * 100, partition=partition)
    assert producer.flush(30) == 0
    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": "idle-group", "enable.auto.commit": False})
    committer.commit(offsets=[KafkaTopicPartition("lagged", partition, 3 * partition)
                              for partition in range(LAG_PARTITIONS)], asynchronous=False)
    committer.close()

    described = subprocess.run([sys.executable, "-m", "kfk", "consumer-groups", "--describe", "--group", "idle-group",
                                "--json", "--bootstrap-server", bootstrap], capture_output=True, text=True,
                               timeout=60)
    assert described.returncode == 0, described.stderr
    rows = json.loads(described.stdout)[0]["offsets"]
    assert len(rows) == LAG_PARTITIONS
    described_total = sum(row["lag"] for row in rows)
    assert described_total == sum(20 + 7 * p - 3 * p for p in range(LAG_PARTITIONS))

    def exported() -> dict[tuple[str, str], list[float]]:
        series: dict[tuple[str, str], list[float]] = {}
        for port in ports.values():
            for (name, labels), sample in scrape(port).items():
                labels = dict(labels)
                if name == "kafka_consumergroup_lag" and labels["consumergroup"] == "idle-group":
                    series.setdefault((labels["topic"], labels["partition"]), []).append(sample)
        return series

    series = wait_until(lambda: (found := exported()) and len(found) == LAG_PARTITIONS and found,
                        what="the lag of every partition exported")
    assert all(len(samples) == 1 for samples in series.values()), series  # each series from one broker only
    assert sum(samples[0] for samples in series.values()) == described_total
    assert {key: samples[0] for key, samples in series.items()} == {
        ("lagged", str(row["partition"])): row["lag"] for row in rows}
