"""Metrics of a three-broker cluster on ZooKeeper, each broker with its own metrics.port: under-replicated partitions
on the leader go to N while a follower is frozen (SIGSTOP) and back to 0 when it resumes; the ISR shrinks and
expands are counted; exactly one broker reports itself the active controller; followers' fetches count as
replication bytes out."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from kfk.client import Admin, NewTopic
from kfk.testing.zookeeper import free_port
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
