"""KRaft broker lifecycle against real controller processes: a test speaks BrokerRegistration and BrokerHeartbeat to a
controller listener as a broker would, and watches the cluster through the brokers' Metadata answers.

- a combined node (broker and controller, the only voter) registers its own broker in-process and serves the
  controller APIs on its CONTROLLER listener only;
- a registered broker is fenced (not listed to clients) until a heartbeat shows it caught up, then unfenced;
- when its heartbeats stop for broker.session.timeout.ms it is fenced again and the partitions it led fail over;
- a controller-only node serves the controller APIs (Raft's too) and nothing of a broker's.
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from kfk.errors import ErrorCode
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.api_versions import ApiVersionsRequest
from kfk.protocol.messages.broker_heartbeat import BrokerHeartbeatRequest
from kfk.protocol.messages.broker_registration import BrokerRegistrationRequest
from kfk.protocol.messages.create_topics import CreateTopicsRequest
from kfk.protocol.messages.describe_cluster import DescribeClusterRequest
from kfk.protocol.messages.metadata import MetadataRequest
from kfk.server.controller_channel import ControllerChannel
from tests.cluster.helpers import create_topic, partitions_of, wait_until
from tests.integration.wire import connect, request

SESSION_TIMEOUT_MS = 2000


@pytest.fixture
def kfk_metadata_mode() -> str:
    return "kraft"


class FakeBroker:
    """A broker as the controller sees it: registration and heartbeats over the controller listener."""

    def __init__(self, controller: str, broker_id: int, cluster_id: str) -> None:
        self.sock = connect(controller)
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.broker_epoch = -1

    def register(self) -> int:
        Listener = BrokerRegistrationRequest.Listener
        response = request(self.sock, BrokerRegistrationRequest(
            broker_id=self.broker_id, cluster_id=self.cluster_id, incarnation_id=uuid.uuid4(),
            listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=1, security_protocol=0)],
            features=[BrokerRegistrationRequest.Feature(name=name, min_supported_version=low,
                                                        max_supported_version=high)
                      for name, low, high in (("metadata.version", 1, 33), ("group.version", 0, 1),
                                              ("eligible.leader.replicas.version", 0, 1),
                                              ("transaction.version", 0, 2))],
            rack=None, log_dirs=[uuid.uuid4()]), 4)
        assert response.error_code == ErrorCode.NONE, ErrorCode(response.error_code).name
        self.broker_epoch = response.broker_epoch
        return response.error_code

    def heartbeat(self, offset: int, **flags):
        response = request(self.sock, BrokerHeartbeatRequest(
            broker_id=self.broker_id, broker_epoch=self.broker_epoch, current_metadata_offset=offset, **flags), 1)
        assert response.error_code == ErrorCode.NONE, ErrorCode(response.error_code).name
        return response

    def close(self) -> None:
        self.sock.close()


def api_keys(address: str) -> set[int]:
    sock = connect(address)
    try:
        response = request(sock, ApiVersionsRequest(client_software_name="kfk-tests", client_software_version="1"), 3)
    finally:
        sock.close()
    return {entry.api_key for entry in response.api_keys}


def cluster_id_and_brokers(bootstrap: str) -> tuple[str, set[int]]:
    sock = connect(bootstrap)
    try:
        response = request(sock, MetadataRequest(topics=[]), 12)
    finally:
        sock.close()
    return response.cluster_id, {broker.node_id for broker in response.brokers}


def controller_address(cluster, node_id: int) -> str:
    return f"127.0.0.1:{cluster.voters[node_id]}"


def test_a_broker_is_unfenced_when_caught_up_and_fenced_when_its_heartbeats_stop(kfk_cluster_factory) -> None:
    cluster = kfk_cluster_factory(size=1, combined=True,
                                  overrides={"broker.session.timeout.ms": str(SESSION_TIMEOUT_MS)})
    bootstrap = cluster.bootstrap_servers
    controller = controller_address(cluster, 1)
    # The controller listener serves the controller's APIs, the client listener a broker's.
    assert {ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT, ApiKey.CREATE_TOPICS} <= api_keys(controller)
    assert ApiKey.PRODUCE not in api_keys(controller)
    assert ApiKey.BROKER_HEARTBEAT not in api_keys(bootstrap)
    cluster_id, brokers = cluster_id_and_brokers(bootstrap)
    assert brokers == {1}

    broker = FakeBroker(controller, 2, cluster_id)
    try:
        broker.register()
        assert cluster_id_and_brokers(bootstrap)[1] == {1}  # registered, fenced: not shown to clients
        behind = broker.heartbeat(broker.broker_epoch - 1)
        assert (behind.is_caught_up, behind.is_fenced) == (False, True)
        caught_up = broker.heartbeat(broker.broker_epoch)
        assert (caught_up.is_caught_up, caught_up.is_fenced) == (True, False)
        wait_until(lambda: cluster_id_and_brokers(bootstrap)[1] == {1, 2}, timeout=5, what="broker 2 listed")

        # Broker 2 leads a partition replicated on both; its heartbeats stop: fenced, the partition fails over.
        create_topic(bootstrap, "kraft-fencing", assignment=[[2, 1]])
        assert partitions_of(bootstrap, "kraft-fencing")[0][0] == 2
        stopped = time.monotonic()
        wait_until(lambda: cluster_id_and_brokers(bootstrap)[1] == {1}, timeout=10, what="broker 2 fenced")
        assert time.monotonic() - stopped >= SESSION_TIMEOUT_MS / 1000 - 0.5
        leader, replicas, isr = partitions_of(bootstrap, "kraft-fencing")[0]
        assert (leader, replicas, isr) == (1, [2, 1], [1])

        # It comes back: its next heartbeat unfences it.
        assert broker.heartbeat(broker.broker_epoch).is_fenced is False
        wait_until(lambda: cluster_id_and_brokers(bootstrap)[1] == {1, 2}, timeout=5, what="broker 2 back")
    finally:
        broker.close()


def test_a_controller_only_node_serves_the_controller_apis_alone(kfk_cluster_factory) -> None:
    cluster = kfk_cluster_factory(size=0, controllers=1)
    controller = controller_address(cluster, 101)
    keys = api_keys(controller)
    assert {ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT, ApiKey.ALTER_PARTITION,
            ApiKey.ALLOCATE_PRODUCER_IDS, ApiKey.DESCRIBE_QUORUM, ApiKey.VOTE, ApiKey.FETCH} <= keys  # Fetch: Raft's
    assert not keys & {ApiKey.PRODUCE, ApiKey.LIST_OFFSETS, ApiKey.JOIN_GROUP, ApiKey.METADATA}
    sock = connect(controller)
    try:
        described = request(sock, DescribeClusterRequest(endpoint_type=2), 1)  # a controller serves CONTROLLER
    finally:
        sock.close()
    broker = FakeBroker(controller, 1, described.cluster_id)
    try:
        broker.register()
        assert broker.heartbeat(broker.broker_epoch).is_fenced is False
        # A controlled shutdown with nothing to hand over: the broker may stop once it has applied the metadata up
        # to then (it is behind at its registration offset), and it is fenced.
        response = broker.heartbeat(broker.broker_epoch, want_shut_down=True)
        assert (response.should_shut_down, response.is_fenced) == (False, False)
        response = broker.heartbeat(2**40, want_shut_down=True)
        assert (response.should_shut_down, response.is_fenced) == (True, True)
    finally:
        broker.close()


def test_the_controller_channel_reaches_the_active_controller_on_its_controller_listener(kfk_cluster_factory) -> None:
    """What a broker that is not the controller does with a client's CreateTopics: the channel finds the active
    controller's address from the voters and sends the request there."""
    cluster = kfk_cluster_factory(size=1, combined=True)
    address = ("127.0.0.1", cluster.voters[1])

    async def forward() -> CreateTopicsRequest:
        channel = ControllerChannel(7, lambda: 1, {1: address}.get, request_timeout_ms=10_000)
        try:
            return await channel.send(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                name="through-the-channel", num_partitions=2, replication_factor=1)], timeout_ms=10_000), 7)
        finally:
            await channel.close()

    response = asyncio.run(forward())
    assert [(topic.name, topic.error_code) for topic in response.topics] == [("through-the-channel", ErrorCode.NONE)]
    assert sorted(partitions_of(cluster.bootstrap_servers, "through-the-channel")) == [0, 1]


def test_a_stopped_broker_is_unregistered_through_another_broker(kfk_cluster_factory) -> None:
    """kafka-cluster.sh's commands on kfk, from a broker-only node (UnregisterBroker is forwarded to the controller):
    the cluster id, then the registration of a broker that stopped for good dropped, in kfk's and Kafka's words. The
    controller-only node's metrics endpoint counts the active and fenced brokers through it all."""
    import subprocess
    import sys

    from kfk.testing.ports import free_port
    from tests.integration.prometheus import scrape, value

    from tests.interop.jvm import kafka_tool

    def registered() -> set[int]:  # fenced brokers too (DescribeCluster v2, KIP-1073)
        sock = connect(bootstrap)
        try:
            response = request(sock, DescribeClusterRequest(include_fenced_brokers=True), 2)
        finally:
            sock.close()
        return {broker.broker_id for broker in response.brokers}

    metrics_port = free_port()
    cluster = kfk_cluster_factory(size=2, controllers=1, controller_overrides={"metrics.port": str(metrics_port)})
    bootstrap = cluster.broker(1).bootstrap_servers
    cluster_id, brokers = cluster_id_and_brokers(bootstrap)
    assert brokers == {1, 2}

    def broker_counts() -> tuple[float, float]:
        samples = scrape(metrics_port)
        return (value(samples, "kafka_controller_kafkacontroller_activebrokercount"),
                value(samples, "kafka_controller_kafkacontroller_fencedbrokercount"))

    assert broker_counts() == (2, 0)
    kfk = [sys.executable, "-m", "kfk", "cluster"]
    run = lambda *args: subprocess.run([*kfk, *args, "--bootstrap-server", bootstrap],  # noqa: E731
                                       capture_output=True, text=True, timeout=60)
    assert run("cluster-id").stdout == kafka_tool("cluster", ["cluster-id", "-b", bootstrap]).stdout \
        == f"Cluster ID: {cluster_id}\n"
    assert cluster.stop(2) == 0
    wait_until(lambda: cluster_id_and_brokers(bootstrap)[1] == {1}, timeout=20, what="broker 2 fenced")
    assert registered() == {1, 2}
    wait_until(lambda: broker_counts() == (1, 1), what="the controller counting broker 2 fenced")
    unregistered = run("unregister", "--id", "2")
    assert (unregistered.returncode, unregistered.stdout) == (0, "Broker 2 is no longer registered.\n")
    wait_until(lambda: registered() == {1}, timeout=10, what="broker 2's registration gone from broker 1's metadata")
    assert broker_counts() == (1, 0)
    again = kafka_tool("cluster", ["unregister", "-b", bootstrap, "--id", "2"], ok=False)
    assert again.returncode == 1 and "BrokerIdNotRegisteredException" in again.stderr
    unknown = run("unregister", "--id", "2")
    assert unknown.returncode == 1 and "\n" not in unknown.stderr.strip() and "Traceback" not in unknown.stderr
