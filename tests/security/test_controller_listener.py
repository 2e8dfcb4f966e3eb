"""A KRaft cluster of 3 controller-only nodes and 3 brokers whose CONTROLLER listener is SASL_SSL (PLAIN, with its
own listener.name.controller.* TLS and JAAS settings and sasl.mechanism.controller.protocol) and whose broker
listener is SASL_SSL too: the Raft requests between controllers and the brokers' registration, heartbeats,
AlterPartition and forwarded requests all run over TLS and authenticate. The controllers run an authorizer whose
only super user is the nodes' principal, so the cluster requests they serve are authorized as well.

One cluster serves the module; the test that kills the active controller runs last."""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.common.internal_topics import CLUSTER_METADATA_TOPIC_NAME
from kfk.errors import ErrorCode, NetworkError
from kfk.protocol.headers import RequestHeader, encode_request
from kfk.protocol.message import Message
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.api_versions import ApiVersionsRequest
from kfk.protocol.messages.broker_heartbeat import BrokerHeartbeatRequest
from kfk.protocol.messages.describe_cluster import DescribeClusterRequest
from kfk.protocol.messages.describe_quorum import DescribeQuorumRequest
from kfk.protocol.messages.unregister_broker import UnregisterBrokerRequest
from kfk.replication.broker_channel import BrokerChannel
from kfk.security.sasl.plain import PlainClient
from kfk.testing.apache_kafka import run_kafka_tool
from kfk.testing.broker import BrokerStartError
from kfk.testing.cluster import KfkCluster, start_cluster
from tests.cluster.helpers import wait_until
from tests.integration.wire import connect, read_frame
from tests.security.cluster_checks import produce_acks_all
from tests.security.conftest import Certificates
from tests.security.test_sasl_clients import PLAIN_JAAS

pytestmark = [pytest.mark.integration]

#: The nodes' principal towards the controllers (User:node, the controllers' super user) and a user the
#: controller listener knows but grants nothing.
CONTROLLER_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="node" '
                   'password="node-secret" user_node="node-secret" user_alice="alice-secret";')
CLIENT_PASSWORD = "admin-secret"


def _overrides(certificates: Certificates) -> dict[str, str]:
    """Every TLS and SASL setting is per listener (listener.name.<l>.), so a node that used the broker listener's
    settings to reach the controllers, or none, would fail."""
    return {
        "listener.security.protocol.map": "CONTROLLER:SASL_SSL,SASL_SSL:SASL_SSL",
        **certificates.broker_overrides("none", prefix="listener.name.controller."),
        **certificates.broker_overrides("none", prefix="listener.name.sasl_ssl."),
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": CONTROLLER_JAAS,
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "min.insync.replicas": "2",
    }


#: The controllers authorize: only User:node may send them cluster requests, and forwarded admin requests are
#: checked as their client (KIP-590), so the tests' admin is a super user there too.
CONTROLLER_AUTHORIZATION = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                            "super.users": "User:node;User:admin", "allow.everyone.if.no.acl.found": "false"}


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory, certificates: Certificates) -> Iterator[KfkCluster]:
    cluster = start_cluster(tmp_path_factory.mktemp("ctrlsec"), None, 3, _overrides(certificates), timeout=60,
                            controllers=3, listener_name="SASL_SSL", controller_overrides=CONTROLLER_AUTHORIZATION)
    yield cluster
    cluster.shutdown()


def _client(certificates: Certificates, bootstrap: str) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
            "sasl.username": "admin", "sasl.password": CLIENT_PASSWORD, "ssl.ca.location": str(certificates.ca)}


def _ask_controller(certificates: Certificates, port: int, message: Message, api_version: int,
                    user: str = "node", password: str = "node-secret") -> Message:
    """One request to a controller listener as kfk's nodes send it: TLS checked against the CA, then SASL PLAIN."""
    async def ask() -> Message:
        channel = BrokerChannel("127.0.0.1", port, "ctrlsec-test", 5000,
                                ssl.create_default_context(cafile=str(certificates.ca)),
                                lambda: PlainClient(user, password))
        try:
            return await channel.request(message, api_version)
        finally:
            await channel.close()
    return asyncio.run(ask())


def _describe_quorum():
    return DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
        topic_name=CLUSTER_METADATA_TOPIC_NAME, partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)])])


def _quorum(cluster: KfkCluster, certificates: Certificates):
    """The quorum as its leader describes it (asked over the secured controller listener), None if no live
    controller leads."""
    for node_id, controller in cluster.controllers.items():
        if controller.process is None or controller.process.poll() is not None:
            continue
        try:
            response = _ask_controller(certificates, cluster.voters[node_id], _describe_quorum(), 2)
        except NetworkError:
            continue
        partition = response.topics[0].partitions[0]
        if response.error_code == ErrorCode.NONE and partition.error_code == ErrorCode.NONE:
            return partition
    return None


def _produce_and_consume(certificates: Certificates, cluster: KfkCluster, prefix: str) -> None:
    """A new topic (3 replicas, created through a broker, which forwards it to the active controller), 100 records
    with acks=all, every one read back with confluent-kafka."""
    config = _client(certificates, cluster.bootstrap_servers)
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(config)  # kept until the result is in: a destroyed handle fails the future
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    values = [f"{prefix}-{index}".encode() for index in range(100)]
    produce_acks_all(config, topic, values)
    consumer = Consumer({**config, "group.id": f"g-{uuid.uuid4().hex[:6]}", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    received: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(received) < len(values) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            received.append(message.value())
    consumer.close()
    assert received == values


def _registered_brokers(certificates: Certificates, cluster: KfkCluster) -> set[int]:
    metadata = AdminClient(_client(certificates, cluster.bootstrap_servers)).list_topics(timeout=10)
    return set(metadata.brokers)


def test_brokers_register_and_serve_over_a_sasl_ssl_controller_listener(secured: KfkCluster,
                                                                       certificates: Certificates) -> None:
    quorum = _quorum(secured, certificates)
    assert quorum is not None and quorum.leader_id in secured.controllers
    # Every voter fetches from the leader over SASL_SSL: all are caught up with it.
    wait_until(lambda: {voter.replica_id for voter in _quorum(secured, certificates).current_voters
                        if voter.log_end_offset >= 0} == set(secured.controllers), 20, what="three voters fetching")
    # The brokers registered, were unfenced (start_cluster waited for that) and are listed.
    assert _registered_brokers(certificates, secured) == {1, 2, 3}
    observers = {observer.replica_id for observer in _quorum(secured, certificates).observers}
    assert observers == {1, 2, 3}  # the brokers replicate the metadata log over the controller listener too
    _produce_and_consume(certificates, secured, "secured")


def test_the_controllers_authorize_cluster_requests(secured: KfkCluster, certificates: Certificates,
                                                   tmp_path: Path) -> None:
    port = next(iter(secured.voters.values()))
    # User:alice authenticates on the controller listener but holds no ACL: its cluster requests are refused.
    heartbeat = _ask_controller(certificates, port, BrokerHeartbeatRequest(broker_id=1, broker_epoch=0), 1,
                                "alice", "alice-secret")
    assert heartbeat.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    unregister = _ask_controller(certificates, port, UnregisterBrokerRequest(broker_id=999), 0, "alice",
                                 "alice-secret")
    assert unregister.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    # The super user's are served: an inactive controller says so, the active one finds no broker 999.
    unregister = _ask_controller(certificates, port, UnregisterBrokerRequest(broker_id=999), 0)
    assert unregister.error_code in (ErrorCode.NOT_CONTROLLER, ErrorCode.BROKER_ID_NOT_REGISTERED), unregister
    # A wrong password is refused by the listener itself.
    with pytest.raises(NetworkError, match="Invalid username or password"):
        _ask_controller(certificates, port, _describe_quorum(), 2, "node", "wrong")
    # kafka-metadata-quorum's way in: ApiVersions on the controller listener advertises SaslHandshake and
    # SaslAuthenticate, and the tool, with the nodes' credentials, describes the quorum.
    properties = tmp_path / "node.properties"
    properties.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\nsasl.username=node\n"
                          f"sasl.password=node-secret\nssl.truststore.type=PEM\n"
                          f"ssl.truststore.location={certificates.ca}\n")
    # The leader alone: kfk's Admin sends DescribeQuorum to any bootstrap node and retries a follower's
    # NOT_LEADER_OR_FOLLOWER on whichever node it picks next, which may be the same follower again.
    leader = _quorum(secured, certificates).leader_id
    tool = subprocess.run([sys.executable, "-m", "kfk", "metadata-quorum", "describe", "--status", "--json",
                           "--bootstrap-controller", f"127.0.0.1:{secured.voters[leader]}", "--command-config",
                           str(properties)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert tool.returncode == 0, tool.stderr
    status = json.loads(tool.stdout)
    assert status["ClusterId"] == secured.cluster_id
    assert status["LeaderId"] == leader


def test_kafka_s_metadata_quorum_tool_authenticates_on_the_controller_listener(secured: KfkCluster,
                                                                            certificates: Certificates,
                                                                            tmp_path: Path) -> None:
    """Apache Kafka's kafka-metadata-quorum.sh (Java's SASL_SSL client, its PEM trust store and JAAS config) reads
    the ApiVersions of the controller listener, authenticates with the nodes' credentials and describes the quorum."""
    # What Java's Admin asks first on --bootstrap-controller: the controllers, on the controller listener.
    port = next(iter(secured.voters.values()))
    described = _ask_controller(certificates, port, DescribeClusterRequest(endpoint_type=2), 1)
    assert described.error_code == ErrorCode.NONE and described.endpoint_type == 2
    assert {(node.broker_id, node.port) for node in described.brokers} == set(secured.voters.items())
    assert described.controller_id == _quorum(secured, certificates).leader_id
    as_broker = _ask_controller(certificates, port, DescribeClusterRequest(endpoint_type=1), 1)
    assert as_broker.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE
    properties = tmp_path / "java.properties"
    properties.write_text("security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
                          "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                          'username="node" password="node-secret";\n'
                          f"ssl.truststore.type=PEM\nssl.truststore.location={certificates.ca}\n")
    controllers = ",".join(f"127.0.0.1:{port}" for port in secured.voters.values())
    tool = run_kafka_tool("metadata-quorum", ["--bootstrap-controller", controllers, "--command-config",
                                              str(properties), "describe", "--status"], timeout=120)
    assert tool.returncode == 0, tool.stderr[-3000:]
    leader = _quorum(secured, certificates).leader_id
    assert re.search(rf"^LeaderId:\s+{leader}$", tool.stdout, re.MULTILINE), tool.stdout
    assert re.search(rf"^ClusterId:\s+{re.escape(secured.cluster_id)}$", tool.stdout, re.MULTILINE), tool.stdout


def test_a_plaintext_connection_to_the_controller_listener_is_refused(secured: KfkCluster,
                                                                      certificates: Certificates) -> None:
    leader = _quorum(secured, certificates).leader_id
    with connect(f"127.0.0.1:{secured.voters[leader]}", timeout=5) as sock:
        header = RequestHeader(request_api_key=ApiKey.API_VERSIONS, request_api_version=3, correlation_id=1,
                               client_id="plaintext")
        try:
            sock.sendall(encode_request(header, ApiVersionsRequest(client_software_name="kfk-tests",
                                                                   client_software_version="1")))
            frame = read_frame(sock)  # the TLS handshake fails: at most an alert, then the connection closes
        except (ConnectionResetError, TimeoutError):
            frame = None
    assert frame is None
    # The quorum did not notice: same leader, the brokers still registered and serving.
    assert _quorum(secured, certificates).leader_id == leader
    _produce_and_consume(certificates, secured, "after-plaintext")


def test_a_node_with_the_wrong_controller_password_cannot_join(secured: KfkCluster,
                                                               certificates: Certificates) -> None:
    wrong = CONTROLLER_JAAS.replace('password="node-secret"', 'password="not-the-secret"')
    intruder = secured.add_broker(4, {"listener.name.controller.plain.sasl.jaas.config": wrong})
    try:
        with pytest.raises(BrokerStartError):
            intruder.start(timeout=20)  # never unfenced: it cannot register
        # On a loaded machine the intruder may still be starting when that wait ends: its refusal comes later.
        wait_until(lambda: "failed authentication" in (log := intruder.output())
                   and "Invalid username or password" in log, 30, what="the intruder's authentication failure")
    finally:
        intruder.kill()
        del secured.brokers[4]
    assert _registered_brokers(certificates, secured) == {1, 2, 3}
    assert _quorum(secured, certificates) is not None
    _produce_and_consume(certificates, secured, "after-intruder")


def test_killing_the_active_controller_elects_another_over_the_secured_listener(secured: KfkCluster,
                                                                                certificates: Certificates) -> None:
    before = _quorum(secured, certificates)
    secured.kill(before.leader_id)
    after = wait_until(lambda: (quorum := _quorum(secured, certificates)) is not None
                       and quorum.leader_id != before.leader_id and quorum, 20, what="a new active controller")
    assert after.leader_epoch > before.leader_epoch
    # The brokers heartbeat to the new controller over SASL_SSL: still registered, and it creates topics.
    assert _registered_brokers(certificates, secured) == {1, 2, 3}
    _produce_and_consume(certificates, secured, "after-failover")


def test_combined_nodes_over_a_mutual_tls_controller_listener(tmp_path_factory: pytest.TempPathFactory,
                                                              certificates: Certificates) -> None:
    """CONTROLLER mapped to SSL with ssl.client.auth=required, on 3 combined nodes (the broker listener stays
    PLAINTEXT): the voters elect a leader and replicate, each presenting its certificate; the active node's broker
    registers in-process, the others over TLS. A node whose certificate no trusted CA signed cannot join."""
    overrides = {"listener.security.protocol.map": "CONTROLLER:SSL,PLAINTEXT:PLAINTEXT",
                 **certificates.broker_overrides("required", prefix="listener.name.controller."),
                 "min.insync.replicas": "2"}
    cluster = start_cluster(tmp_path_factory.mktemp("ctrlsec-mtls"), None, 3, overrides, timeout=60, combined=True)
    try:
        config = {"bootstrap.servers": cluster.bootstrap_servers}
        admin = AdminClient(config)
        assert set(admin.list_topics(timeout=10).brokers) == {1, 2, 3}
        topic = f"mtls-{uuid.uuid4().hex[:6]}"
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
        produce_acks_all(config, topic, [f"mtls-{index}".encode() for index in range(100)])
        stranger = cluster.add_broker(4, {"listener.name.controller.ssl.keystore.location":
                                          str(certificates.stranger.pem)})
        with pytest.raises(BrokerStartError):
            stranger.start(timeout=20)
        log = stranger.output()
        assert "failed authentication" in log and "refused this node's certificate" in log, log[-3000:]
        # The controllers refused its certificate during the handshake (logged at INFO on their side).
        assert any("CERTIFICATE_VERIFY_FAILED" in cluster.brokers[node_id].output() for node_id in (1, 2, 3))
        assert set(admin.list_topics(timeout=10).brokers) == {1, 2, 3}
    finally:
        cluster.shutdown()


def test_a_node_without_credentials_for_a_sasl_controller_listener_does_not_start(tmp_path: Path) -> None:
    """Checked before anything binds or is formatted: one line on stderr naming the setting, a non-zero exit."""
    overrides = {"process.roles": "broker", "node.id": "7", "controller.quorum.voters": "1@127.0.0.1:1",
                 "controller.listener.names": "CONTROLLER", "listeners": "PLAINTEXT://127.0.0.1:0",
                 "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT",
                 "sasl.mechanism.controller.protocol": "PLAIN", "log.dirs": str(tmp_path / "data")}
    server = subprocess.run([sys.executable, "-m", "kfk", "server", "start",
                             *[arg for key, value in overrides.items() for arg in ("--override", f"{key}={value}")]],
                            capture_output=True, text=True, timeout=60, check=False)
    assert server.returncode != 0
    lines = server.stderr.strip().splitlines()
    assert len(lines) == 1 and "controller listener CONTROLLER uses SASL" in lines[0], server.stderr
    assert "sasl.mechanism.controller.protocol=PLAIN" in lines[0] and "user name and a password" in lines[0]
    assert not (tmp_path / "data").exists()
