"""Apache Kafka's own tools and Java clients (4.4.0) against a kfk SASL_PLAINTEXT broker: kafka-configs.sh sets
SCRAM credentials (the Java admin salts the password: kfk's AlterUserScramCredentials must derive the same
keys the Java SCRAM client then proves), kafka-topics.sh and the console producer and consumer log in with PLAIN and
SCRAM-SHA-512 through `--command-config` JAAS settings, and a wrong password fails with Kafka's message."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kfk.client import Admin
from kfk.client.structs import ScramCredentialInfo
from kfk.testing.broker import BrokerProcess, start_broker

from tests.interop.jvm import kafka_tool, unique_name
from tests.security.test_sasl_clients import kfk_config, sasl_overrides

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def sasl_server(tmp_path_factory: pytest.TempPathFactory, kafka_classpath_fixture: str) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("kfk-sasl-interop"), sasl_overrides(),
                          listener_name="SASL_PLAINTEXT")
    yield broker
    broker.stop()


def client_properties(path: Path, mechanism: str, user: str, password: str) -> str:
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism={mechanism}\n"
                    f"sasl.jaas.config=org.apache.kafka.common.security.{module} required username=\"{user}\" "
                    f"password=\"{password}\";\n")
    return str(path)


def test_kafka_tools_over_sasl(sasl_server: BrokerProcess, tmp_path: Path) -> None:
    server = ["--bootstrap-server", sasl_server.bootstrap_servers]
    admin = client_properties(tmp_path / "admin.properties", "PLAIN", "admin", "admin-secret")
    kafka_tool("configs", [*server, "--command-config", admin, "--alter", "--entity-type", "users", "--entity-name",
                           "java-user", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=java-secret]"])
    # (kafka-configs --describe of users also asks DescribeClientQuotas, the quota work's: kfk's Admin describes.)
    with Admin(kfk_config(sasl_server.bootstrap_servers, "PLAIN", "admin", "admin-secret")) as kfk_admin:
        assert kfk_admin.describe_user_scram_credentials(["java-user"]) == {
            "java-user": [ScramCredentialInfo("SCRAM-SHA-512", 8192)]}
    scram = client_properties(tmp_path / "scram.properties", "SCRAM-SHA-512", "java-user", "java-secret")
    topic = unique_name("sasl-java")
    kafka_tool("topics", [*server, "--command-config", scram, "--create", "--topic", topic, "--partitions", "1"])
    listed = kafka_tool("topics", [*server, "--command-config", scram, "--list"])
    assert topic in listed.stdout.split()
    kafka_tool("console-producer", [*server, "--command-config", admin, "--topic", topic], input="one\ntwo\n")
    consumed = kafka_tool("console-consumer", [*server, "--command-config", scram, "--topic", topic,
                                               "--from-beginning", "--max-messages", "2", "--timeout-ms", "30000"])
    assert consumed.stdout.split() == ["one", "two"]
    wrong = client_properties(tmp_path / "wrong.properties", "SCRAM-SHA-512", "java-user", "nope")
    refused = kafka_tool("topics", [*server, "--command-config", wrong, "--list"], ok=False, timeout=120)
    assert refused.returncode != 0
    assert ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
            "SCRAM-SHA-512") in refused.stdout + refused.stderr
