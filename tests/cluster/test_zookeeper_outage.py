"""A 30 s ZooKeeper outage, shorter than nothing but the brokers' patience: ZooKeeper restarts with the sessions it
had (a recovered session gets a full timeout again), so brokers that reconnect promptly keep their sessions, their
registrations (broker epochs) and the controller, and no partition changes leader.

This module owns its ZooKeeper (the session-wide one must not go down under other tests), with tickTime 2000 ms so
that ZooKeeper grants Kafka's 18 s session timeout (its maximum is 20 ticks).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from kfk.testing.zookeeper import ZooKeeperNotInstalledError, ZooKeeperServer
from tests.cluster.helpers import create_topic, partitions_of, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper]

CHROOT = "/kfk-outage"
OUTAGE_S = 30


@pytest.fixture
def own_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    try:
        server = ZooKeeperServer(tmp_path_factory.mktemp("own-zookeeper"), tick_time_ms=2000).start()
    except ZooKeeperNotInstalledError as error:
        pytest.skip(str(error))
    yield server
    server.stop()


@pytest.fixture
def zookeeper_connect(own_zookeeper: ZooKeeperServer) -> str:
    """kfk_cluster_factory's brokers use this module's ZooKeeper."""
    return own_zookeeper.connect_string + CHROOT


def session_state(connect: str, broker_ids: list[int], topic: str, partitions: int) -> dict[str, object]:
    """Each broker's registration (ephemeral owner = its session, czxid = its broker epoch), the controller's
    registration and epoch, and each partition's leader and leader epoch, read straight from the znodes."""
    client = KazooClient(hosts=connect)
    client.start(timeout=10)
    try:
        state: dict[str, object] = {}
        for broker_id in broker_ids:
            _, stat = client.get(f"/brokers/ids/{broker_id}")
            state[f"broker {broker_id}"] = (stat.ephemeralOwner, stat.czxid)
        data, stat = client.get("/controller")
        state["controller"] = (data, stat.ephemeralOwner)
        state["controller_epoch"] = client.get("/controller_epoch")[0]
        for partition in range(partitions):
            data, _ = client.get(f"/brokers/topics/{topic}/partitions/{partition}/state")
            state[f"{topic}-{partition}"] = data  # leader, leader_epoch, isr, controller_epoch
        return state
    finally:
        client.stop()
        client.close()


def test_brokers_keep_their_sessions_and_leaders_through_a_30s_zookeeper_outage(
        own_zookeeper: ZooKeeperServer, zookeeper_connect: str, kfk_cluster_factory) -> None:
    cluster = kfk_cluster_factory(3, {"zookeeper.session.timeout.ms": "18000"})
    bootstrap = cluster.bootstrap_servers
    create_topic(bootstrap, "outage", partitions=3, replication_factor=3)
    wait_until(lambda: all(len(isr) == 3 for _, _, isr in partitions_of(bootstrap, "outage").values()),
               what="full ISRs")
    time.sleep(2)  # let the ISR-change notifications settle
    before = session_state(zookeeper_connect, [1, 2, 3], "outage", 3)

    own_zookeeper.stop()
    time.sleep(OUTAGE_S)
    own_zookeeper.start()

    # Longer than the session timeout after the restart: a session not resumed by now has expired.
    time.sleep(20)
    after = session_state(zookeeper_connect, [1, 2, 3], "outage", 3)
    assert after == before
    assert all(len(isr) == 3 for _, _, isr in partitions_of(bootstrap, "outage").values())
    logs = cluster.logs()
    assert logs.count("reconnected to ZooKeeper in the same session") == 3
    assert "ZooKeeper session of broker" not in logs  # "... expired"
    assert " ERROR " not in logs and "Traceback" not in logs  # a connection that comes back is no error
    # Reconnecting every few hundred ms for 30 s: kazoo's "Connection dropped" once per broker, not 60 times.
    assert logs.count("Connection dropped") <= 2 * 3
