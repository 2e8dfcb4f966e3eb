"""Every kfk tool that talks to a cluster reaches a SASL-secured broker with its client properties file, under the
flag Kafka's own tool gives that file (kafka-leader-election.sh's --admin.config, the console and perf tools'
--producer.config / --consumer.config, --command-config elsewhere) and under --command-config, which every kfk tool
takes; without the file each tool refuses at once, in one line that says the listener requires SASL.

The file is what a Java client's users write (security.protocol, sasl.mechanism and a JAAS line), so the same file
serves Apache Kafka's tools."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kfk.testing.broker import BrokerProcess, start_broker
from tests.security.test_sasl_clients import sasl_overrides

pytestmark = pytest.mark.integration

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
TOPIC = f"secured-{uuid.uuid4().hex[:8]}"
REFUSAL = "closed the connection before answering anything but ApiVersions: if its listener's security protocol is "


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("command-config"),
                          sasl_overrides(**{"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:admin"}),
                          listener_name="SASL_PLAINTEXT")
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("command-config-files")
    properties = directory / "admin.properties"
    properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                          "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                          'username="admin" password="admin-secret";\n')
    topics = directory / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
    return {"properties": str(properties), "topics": str(topics)}


@pytest.fixture(scope="module")
def secured_topic(sasl_broker: BrokerProcess, files: dict[str, str]) -> str:
    created = kfk("topics", "--create", "--topic", TOPIC, "--partitions", "1", "--bootstrap-server",
                  sasl_broker.bootstrap_servers, "--command-config", files["properties"])
    assert created.returncode == 0, created.stderr
    produced = kfk("console-produce", "--topic", TOPIC, "--bootstrap-server", sasl_broker.bootstrap_servers,
                   "--command-config", files["properties"], stdin="first\n")
    assert produced.returncode == 0, produced.stderr
    return TOPIC


def kfk(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfk", *args], input=stdin, capture_output=True, text=True,
                          timeout=120)


#: tool -> (the arguments after `kfk`, Kafka's name of the properties flag, what its stdout holds, stdin).
TOOLS: dict[str, tuple[list[str], str, str, str | None]] = {
    "topics": (["topics", "--describe", "--topic", TOPIC], "--command-config", f"Topic: {TOPIC}", None),
    "console-produce": (["console-produce", "--topic", TOPIC], "--producer.config", "", "second\n"),
    "console-consume": (["console-consume", "--topic", TOPIC, "--from-beginning", "--max-messages", "1"],
                        "--consumer.config", "first", None),
    "consumer-groups": (["consumer-groups", "--list"], "--command-config", "", None),
    "configs": (["configs", "--describe", "--entity-type", "topics", "--entity-name", TOPIC], "--command-config",
                f"Dynamic configs for topic {TOPIC} are:", None),
    "acls": (["acls", "--list"], "--command-config", "", None),
    "transactions": (["transactions", "list"], "--command-config", "TransactionalId", None),
    "metadata-quorum": (["metadata-quorum", "describe", "--status"], "--command-config", "LeaderId:", None),
    "producer-perf-test": (["perf-test", "produce", "--topic", TOPIC, "--num-records", "5", "--record-size", "10",
                            "--throughput", "-1"], "--producer.config", "5 records sent", None),
    "consumer-perf-test": (["perf-test", "consume", "--topic", TOPIC, "--messages", "1"], "--consumer.config",
                           "data.consumed.in.MB", None),
    "cluster": (["cluster", "describe"], "--command-config", TOPIC, None),
    "metadata-shell": (["metadata", "show", "/topics"], "--command-config", TOPIC, None),
    "reassign-partitions": (["reassign-partitions", "--generate", "--broker-list", "1"], "--command-config",
                            "Proposed partition reassignment configuration", None),
    "leader-election": (["leader-election", "--election-type", "preferred", "--all-topic-partitions"],
                        "--admin.config", "", None),
}


def arguments(tool: str, files: dict[str, str]) -> list[str]:
    args = list(TOOLS[tool][0])
    if tool == "reassign-partitions":
        args += ["--topics-to-move-json-file", files["topics"]]
    return args


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_each_tool_reaches_a_sasl_broker_with_its_properties_file(
        tool: str, sasl_broker: BrokerProcess, files: dict[str, str], secured_topic: str) -> None:
    _, kafka_flag, expected, stdin = TOOLS[tool]
    server = ["--bootstrap-server", sasl_broker.bootstrap_servers]
    for flag in sorted({kafka_flag, "--command-config"}):
        result = kfk(*arguments(tool, files), *server, flag, files["properties"], stdin=stdin)
        assert result.returncode == 0, (flag, result.stdout, result.stderr)
        assert expected in result.stdout, (flag, result.stdout)


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_each_tool_refuses_a_sasl_broker_without_it_in_one_line(
        tool: str, sasl_broker: BrokerProcess, files: dict[str, str], secured_topic: str) -> None:
    stdin = TOOLS[tool][3]
    result = kfk(*arguments(tool, files), "--bootstrap-server", sasl_broker.bootstrap_servers, stdin=stdin)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stderr.startswith("kfk: ") and REFUSAL in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
