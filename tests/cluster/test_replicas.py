"""In-sync replicas and their guarantees, with separate broker processes on a real ZooKeeper or on a KRaft controller:
min.insync.replicas, a frozen follower leaving and rejoining the ISR, a restarted former leader truncating its
divergent tail, a broker whose session expires (its ZooKeeper session, or its heartbeats to the KRaft controller),
preferred leader election."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka import ElectionType

from kfk.errors import ErrorCode
from tests.cluster.helpers import admin, consume_all, create_topic, partitions, produce_error, wait_until

pytestmark = [pytest.mark.integration]


@pytest.fixture(params=[pytest.param("zookeeper", marks=pytest.mark.zookeeper), "kraft"])
def kfk_metadata_mode(request: pytest.FixtureRequest) -> str:
    """Every test on both metadata backends: brokers on ZooKeeper, and brokers on a KRaft controller."""
    return request.param


def test_min_insync_replicas_refuses_acks_all_writes_until_a_replica_returns(kfk_cluster) -> None:
    bootstrap = kfk_cluster.bootstrap_servers
    create_topic(bootstrap, "safe", assignment=[[1, 2, 3]], config={"min.insync.replicas": "2"})
    wait_until(lambda: partitions(bootstrap, "safe")[0][2] == [1, 2, 3])
    leader = kfk_cluster.broker(1).bootstrap_servers
    assert produce_error(leader, "safe", 0) == ErrorCode.NONE
    kfk_cluster.kill(2)
    kfk_cluster.kill(3)
    wait_until(lambda: partitions(leader, "safe")[0][2] == [1], what="the ISR down to the leader")
    assert produce_error(leader, "safe", 0) == ErrorCode.NOT_ENOUGH_REPLICAS
    assert produce_error(leader, "safe", 0, acks=1) == ErrorCode.NONE  # acks=1 does not need the ISR
    kfk_cluster.start([2])
    wait_until(lambda: produce_error(leader, "safe", 0) == ErrorCode.NONE, what="acks=all accepted again")
    assert partitions(leader, "safe")[0][2] in ([1, 2], [2, 1])


def test_a_frozen_follower_leaves_the_isr_and_rejoins_when_it_resumes(kfk_cluster_factory) -> None:
    # A frozen broker also stops its ZooKeeper session or KRaft heartbeats, and a broker whose session ends leaves
    # every ISR through the controller; sessions that outlive the leader's lag check (2 s, checked every second)
    # by far leave the leader's own shrink to be tested, whatever the machine's load.
    kfk_cluster = kfk_cluster_factory(overrides={"zookeeper.session.timeout.ms": "10000",
                                                 "broker.session.timeout.ms": "10000"})
    bootstrap = kfk_cluster.bootstrap_servers
    create_topic(bootstrap, "lagging", assignment=[[1, 2, 3]])
    wait_until(lambda: partitions(bootstrap, "lagging")[0][2] == [1, 2, 3])
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5})
    # Asked of the leader: a Metadata request to the frozen broker (which `bootstrap` lists) waits out the admin
    # client's socket timeout, and a few of those ate the whole budget in CI.
    leader = kfk_cluster.broker(1).bootstrap_servers
    kfk_cluster.pause(3)
    try:
        started = time.monotonic()
        while partitions(leader, "lagging")[0][2] != [1, 2]:
            producer.produce("lagging", b"x" * 100, partition=0)
            producer.poll(0)
            time.sleep(0.02)
            assert time.monotonic() - started < 10, "the frozen follower stayed in the ISR"
        # replica.lag.time.max.ms is 2000 in the cluster fixture; the check runs every half of it.
        assert time.monotonic() - started >= 1.0
    finally:
        kfk_cluster.resume(3)
    assert producer.flush(10) == 0
    # Asked of the leader again: just resumed, broker 3 still answers from its stale image (the ISR before the
    # shrink), before the leader has even seen it catch up.
    wait_until(lambda: sorted(partitions(leader, "lagging")[0][2]) == [1, 2, 3], what="follower 3 back in sync")
    # The leader logs each ISR change once (every follower fetch while it is in flight proposes it again).
    leader_log = kfk_cluster.broker(1).output()
    assert leader_log.count("lagging-0: replica 3 caught up; changing the ISR from [1, 2] to [1, 2, 3]") == 1
    assert leader_log.count("lagging-0: followers [3] have not caught up") == 1


@pytest.mark.slow
def test_a_restarted_former_leader_truncates_its_divergent_tail(kfk_cluster) -> None:
    bootstrap = kfk_cluster.bootstrap_servers
    create_topic(bootstrap, "diverge", assignment=[[1, 2]], config={"min.insync.replicas": "1"})
    wait_until(lambda: partitions(bootstrap, "diverge")[0][2] == [1, 2])
    leader = kfk_cluster.broker(1).bootstrap_servers
    committed = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for sequence in range(20):
        committed.produce("diverge", f"committed-{sequence}".encode(), partition=0)
    assert committed.flush(10) == 0
    # Freeze the follower, write records that only the leader gets (acks=1), and crash the leader.
    kfk_cluster.pause(2)
    for sequence in range(5):
        assert produce_error(leader, "diverge", 0, acks=1) == ErrorCode.NONE
    kfk_cluster.kill(1)
    kfk_cluster.resume(2)
    follower = kfk_cluster.broker(2).bootstrap_servers
    wait_until(lambda: partitions(follower, "diverge")[0][0] == 2, timeout=20, what="broker 2 leads")
    for sequence in range(10):
        committed.produce("diverge", f"after-{sequence}".encode(), partition=0)
    assert committed.flush(20) == 0
    kfk_cluster.start([1])
    wait_until(lambda: sorted(partitions(bootstrap, "diverge")[0][2]) == [1, 2], timeout=20,
               what="the former leader back in the ISR")
    assert "truncating the divergent tail" in kfk_cluster.broker(1).output()
    # Make broker 1 lead again and read everything from it: exactly the committed records, in order.
    client = admin(bootstrap)
    client.elect_leaders(ElectionType.PREFERRED, [ConfluentTopicPartition("diverge", 0)]).result(10)
    wait_until(lambda: partitions(bootstrap, "diverge")[0][0] == 1, what="broker 1 leads again")
    values = consume_all(bootstrap, "diverge", 1)[0]
    assert values[:20] == [f"committed-{s}".encode() for s in range(20)]
    assert values[-10:] == [f"after-{s}".encode() for s in range(10)]
    # A fetch already parked at the leader when the follower froze may have carried the first acks=1 record to
    # it (it is then part of the new leader's log); the rest existed only on the crashed leader and are gone.
    middle = values[20:-10]
    assert len(middle) < 5 and set(middle) <= {b"value"}


def test_a_broker_whose_session_expires_loses_its_partitions_and_comes_back(kfk_cluster) -> None:
    bootstrap = kfk_cluster.bootstrap_servers
    create_topic(bootstrap, "sessions", assignment=[[3, 1, 2]])
    wait_until(lambda: partitions(bootstrap, "sessions")[0][2] == [3, 1, 2])
    # No heartbeats: ZooKeeper expires the session after zookeeper.session.timeout.ms, the KRaft controller fences
    # the broker after broker.session.timeout.ms.
    kfk_cluster.pause(3)
    others = ",".join(kfk_cluster.broker(i).bootstrap_servers for i in (1, 2))
    try:
        wait_until(lambda: partitions(others, "sessions")[0][0] in (1, 2), timeout=20, what="failover")
    finally:
        kfk_cluster.resume(3)
    if kfk_cluster.kraft:
        controllers = kfk_cluster.controllers.values()
        wait_until(lambda: "".join(node.output() for node in controllers).count("broker 3 caught up") >= 2,
                   timeout=20, what="unfenced again")
    else:
        wait_until(lambda: "registered again in a new ZooKeeper session" in kfk_cluster.broker(3).output(),
                   timeout=20, what="re-registration")
    wait_until(lambda: sorted(partitions(bootstrap, "sessions")[0][2]) == [1, 2, 3], timeout=20,
               what="broker 3 back in the ISR")
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce("sessions", b"after expiry", partition=0)
    assert producer.flush(10) == 0


@pytest.mark.slow
def test_without_a_live_in_sync_replica_the_partition_waits_unless_unclean_election_is_enabled(kfk_cluster) -> None:
    bootstrap = kfk_cluster.bootstrap_servers
    create_topic(bootstrap, "unclean", assignment=[[1, 2]])
    wait_until(lambda: partitions(bootstrap, "unclean")[0][2] == [1, 2])
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5})
    kfk_cluster.pause(2)
    try:
        deadline = time.monotonic() + 15
        while partitions(bootstrap, "unclean")[0][2] != [1]:  # 2 falls out of sync
            assert time.monotonic() < deadline, "broker 2 stayed in sync"
            producer.produce("unclean", b"x", partition=0)
            producer.poll(0.02)
        kfk_cluster.kill(1)
    finally:
        kfk_cluster.resume(2)
    others = ",".join(kfk_cluster.broker(i).bootstrap_servers for i in (2, 3))
    # Broker 1's session ends; broker 2 is live but out of sync: no clean leader, the partition is offline.
    wait_until(lambda: 1 not in controller_live_brokers(others), timeout=20, what="broker 1 gone")
    time.sleep(1)
    leader, _, isr = partitions(others, "unclean")[0]
    # In KRaft with eligible leader replicas (Kafka 4.4's default) the ISR empties and broker 1 stays eligible; on
    # ZooKeeper the ISR keeps its last member.
    assert leader == -1 and isr == ([] if kfk_cluster.kraft else [1])
    set_topic_config(others, "unclean", "unclean.leader.election.enable", "true")
    wait_until(lambda: partitions(others, "unclean")[0][0] == 2, timeout=10, what="an unclean leader")
    # Logged by the controller that elected it (a broker on ZooKeeper, the controller node in KRaft).
    assert "Unclean leader election" in "".join(node.output() for node in kfk_cluster.nodes.values())


def controller_live_brokers(bootstrap: str) -> list[int]:
    client = admin(bootstrap)
    return sorted(node.id for node in client.describe_cluster(request_timeout=5).result(10).nodes)


def set_topic_config(bootstrap: str, topic: str, key: str, value: str) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

    client = admin(bootstrap)
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)])
    for future in client.incremental_alter_configs([resource]).values():
        future.result(10)
