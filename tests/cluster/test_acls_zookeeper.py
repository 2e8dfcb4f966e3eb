"""ACLs on a two-broker ZooKeeper cluster with Kafka's AclAuthorizer class name: CreateAcls sent to the broker that is
not the controller is forwarded to it; replication goes on under authorization (followers fetch with the
brokers' principal); both brokers' images (and so their authorizers and DescribeAcls) follow the
znodes; `kfk acls --add/--list/--remove` works through either broker, and Apache Kafka's kafka-acls.sh lists the
same ACLs as `kfk acls --list`. The brokers and the tools connect as User:ANONYMOUS, the super user here (Kafka's
usual setting for a PLAINTEXT inter-broker listener)."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest

from kfk.protocol.messages.create_acls import CreateAclsRequest
from kfk.protocol.messages.describe_acls import DescribeAclsRequest
from kfk.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from kfk.testing.apache_kafka import run_kafka_tool
from tests.cluster.helpers import controller_id, create_topic, partitions_of, produce_error, wait_until
from tests.integration import wire

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper]

OVERRIDES = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:ANONYMOUS"}


def kfk_acls(bootstrap: str, *args: str) -> str:
    result = subprocess.run([sys.executable, "-m", "kfk", "acls", "--bootstrap-server", bootstrap, *args],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return result.stdout


def listing(output: str) -> set[tuple[str, frozenset[str]]]:
    """kafka-acls.sh's listing as (resource line, its entries): the order of resources and entries is a map's."""
    blocks = set()
    for block in output.split("\n\n"):
        lines = [line.strip() for line in block.strip().splitlines() if line.strip()]
        if lines and lines[0].startswith("Current ACLs for resource"):
            blocks.add((lines[0], frozenset(lines[1:])))
    return blocks


def described(bootstrap: str, topic: str) -> list:
    with wire.connect(bootstrap) as sock:
        response = wire.request(sock, DescribeAclsRequest(
            resource_type_filter=ResourceType.TOPIC, resource_name_filter=topic,
            pattern_type_filter=PatternType.ANY, principal_filter=None, host_filter=None,
            operation=AclOperation.ANY, permission_type=AclPermissionType.ANY), 3)
    assert response.error_code == 0, response.error_message
    return [(resource.resource_name, acl.principal, acl.operation) for resource in response.resources
            for acl in resource.acls]


def eventually(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.1)


def test_acls_through_either_broker_and_kafka_acls_sh(kfk_cluster_factory, kafka_classpath_fixture: str) -> None:
    cluster = kfk_cluster_factory(2, OVERRIDES)
    controller = controller_id(cluster.bootstrap_servers)
    other = cluster.broker(2 if controller == 1 else 1).bootstrap_servers
    topic = f"acl-{uuid.uuid4().hex[:8]}"

    with wire.connect(other) as sock:  # not the controller: forwarded
        response = wire.request(sock, CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
            resource_type=ResourceType.TOPIC, resource_name=topic, resource_pattern_type=PatternType.LITERAL,
            principal="User:alice", host="*", operation=AclOperation.READ,
            permission_type=AclPermissionType.ALLOW)]), 3)
    assert [result.error_code for result in response.results] == [0]
    for broker in cluster.brokers.values():
        eventually(lambda: described(broker.bootstrap_servers, topic) == [(topic, "User:alice", AclOperation.READ)])

    kfk_acls(other, "--add", "--allow-principal", "User:bob", "--operation", "Write", "--operation", "Describe",
             "--topic", f"{topic}-", "--resource-pattern-type", "prefixed")
    kfk_acls(other, "--add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9", "--group", topic)
    ours = kfk_acls(cluster.broker(controller).bootstrap_servers, "--list")
    kafkas = run_kafka_tool("acls", ["--bootstrap-server", other, "--list"], timeout=120)
    assert kafkas.returncode == 0, kafkas.stderr
    assert listing(ours) == listing(kafkas.stdout)
    assert (f"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name={topic}-, patternType=PREFIXED)`:",
            frozenset({"(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)",
                       "(principal=User:bob, host=*, operation=DESCRIBE, permissionType=ALLOW)"})) in listing(ours)
    assert len(listing(ours)) == 3

    # kafka-acls.sh's own changes are seen by kfk too.
    added = run_kafka_tool("acls", ["--bootstrap-server", other, "--add", "--allow-principal", "User:carol",
                                    "--consumer", "--topic", topic, "--group", topic], timeout=120)
    assert added.returncode == 0, added.stderr
    assert ("Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=" + topic + ", patternType=LITERAL)`:",
            frozenset({"(principal=User:mallory, host=10.0.0.9, operation=ALL, permissionType=DENY)",
                       "(principal=User:carol, host=*, operation=READ, permissionType=ALLOW)"})) \
        in listing(kfk_acls(other, "--list", "--group", topic))

    # Replication under authorization: the follower's fetches (CLUSTER_ACTION, the brokers' super user) keep the
    # ISR whole, so an acks=all produce succeeds.
    replicated = f"{topic}-replicated"
    create_topic(cluster.bootstrap_servers, replicated, partitions=1, replication_factor=2)
    wait_until(lambda: len(partitions_of(cluster.bootstrap_servers, replicated)[0][2]) == 2, what="ISR of 2")
    leader = partitions_of(cluster.bootstrap_servers, replicated)[0][0]
    assert produce_error(cluster.broker(leader).bootstrap_servers, replicated, 0, acks=-1) == 0

    assert kfk_acls(other, "--remove", "--force", "--topic", topic) == ""  # as Kafka 4.0's tool: no listing after
    eventually(lambda: [name for name, _, _ in described(cluster.broker(controller).bootstrap_servers, topic)
                        if name == topic] == [])
