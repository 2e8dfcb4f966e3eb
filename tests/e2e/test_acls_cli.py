"""`kfk acls` through the real CLI (`python -m kfk` in a subprocess): kafka-acls.sh 4.0's output for --add, --list and
--remove against an embedded-metadata broker whose authorizer lets User:ANONYMOUS (this PLAINTEXT client) do
everything, --producer/--consumer's sets, the confirmation --remove asks for, SECURITY_DISABLED from a broker
without an authorizer, and mistakes in the flags answered in one line."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("acls-cli-broker"), {
        **TEST_OVERRIDES, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"})
    yield process
    process.stop()


def kfk(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfk", "acls", *args], input=stdin, capture_output=True, text=True,
                          timeout=60)


def test_add_list_and_remove_print_what_kafka_acls_prints(broker: BrokerProcess) -> None:
    server = ["--bootstrap-server", broker.bootstrap_servers]
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    added = kfk(*server, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic)
    assert added.returncode == 0, added.stderr
    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    entry = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    assert added.stdout == f"Adding ACLs for resource `{pattern}`: \n \t{entry}\n\n"  # and no listing (Kafka 4.0)
    listed = kfk(*server, "--list", "--topic", topic)
    assert listed.stdout == f"Current ACLs for resource `{pattern}`:\n\t{entry}\n\n"

    producer = kfk(*server, "--add", "--producer", "--idempotent", "--allow-principal", "User:bob", "--topic", topic,
                   "--transactional-id", f"{topic}-tx")
    assert producer.returncode == 0, producer.stderr
    listed = kfk(*server, "--list", "--principal", "User:bob").stdout
    assert listed.startswith("ACLs for principal `User:bob`\n")
    for expected in (f"name={topic}, patternType=LITERAL)`", "operation=WRITE", "operation=CREATE",
                     f"resourceType=TRANSACTIONAL_ID, name={topic}-tx", "resourceType=CLUSTER, name=kafka-cluster",
                     "operation=IDEMPOTENT_WRITE"):
        assert expected in listed
    assert "User:alice" not in listed

    kept = kfk(*server, "--remove", "--topic", topic, stdin="n\n")
    assert kept.returncode == 0 and "Are you sure you want to delete all ACLs for resource filter" in kept.stdout
    assert entry in kfk(*server, "--list", "--topic", topic).stdout
    removed = kfk(*server, "--remove", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic,
                  "--force")
    assert removed.returncode == 0 and removed.stdout == "", removed.stderr
    left = kfk(*server, "--list").stdout
    assert "User:alice" not in left and "User:bob" in left


def test_a_broker_without_an_authorizer_says_so(kfk_broker: str) -> None:
    result = kfk("--bootstrap-server", kfk_broker, "--list")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == ["kfk: DescribeAcls: No Authorizer is configured."]


@pytest.mark.parametrize("args, message", [
    (["--add", "--list"], "give exactly one of --add, --remove and --list"),
    (["--add", "--topic", "t"], "--add needs --allow-principal or --deny-principal"),
    (["--add", "--allow-principal", "alice", "--topic", "t"], "--allow-principal: expected a principal"),
    (["--add", "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t"], "unknown --operation 'Fly'"),
    (["--add", "--allow-principal", "User:a", "--topic", "t", "--resource-pattern-type", "match"],
     "--resource-pattern-type must be one of literal, prefixed with --add"),
    (["--add", "--consumer", "--allow-principal", "User:a", "--topic", "t"], "--consumer needs --group"),
    (["--add", "--allow-principal", "User:a"], "name a resource"),
])
def test_mistakes_are_one_line(args: list[str], message: str) -> None:
    result = kfk("--bootstrap-server", "127.0.0.1:1", *args)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
