"""--add-scram bootstrap files both ways with Apache Kafka 4.0.2: kfk starts on a node Kafka's `kafka-storage format
--add-scram` formatted (Kafka's default metadata.version, 4.0-IV3) and lets the formatted users in, and Kafka's
`kafka-dump-log --cluster-metadata-decoder` reads in kfk's bootstrap.checkpoint the credential record Kafka's own
tool writes for the same argument."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kfk.testing.apache_kafka import PREVIOUS_APACHE_KAFKA_VERSION, run_kafka_tool
from kfk.testing.ports import free_port

from kfk.testing.broker import BrokerProcess
from kfk.testing.plugin import TEST_OVERRIDES

from tests.cluster.helpers import metadata_log_batches
from tests.security.test_sasl_clients import confluent_config
from tests.security.test_scram_bootstrap import SCRAM_OVERRIDES

#: The storage tool whose files kfk's `storage format` mirrors (4.0.2: 4.4's default also finalizes share.version
#: and streams.version, which kfk does not serve).
FORMAT_TOOL_VERSION = PREVIOUS_APACHE_KAFKA_VERSION

pytestmark = pytest.mark.integration

CLUSTER_ID = "i2J_3iFvQempjf-HJcyt3A"
#: The salted form: the same argument gives the same record in both tools (no random salt).
BOB = ('SCRAM-SHA-512=[name=bob,iterations=8192,salt="MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E=",'
       'saltedpassword="mT0yyUUxnlJaC99HXgRTSYlbuqa4FSGtJCJfTMvjYCE="]')
ADD_SCRAM = ["--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]",
             "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]", "--add-scram", BOB]


def _node_properties(directory: Path, controller_port: int) -> dict[str, str]:
    """A combined node's settings, the same for Kafka's format and for kfk's start (SASL_PLAINTEXT between brokers,
    SCRAM-SHA-512 as the formatted admin)."""
    return {**SCRAM_OVERRIDES, "inter.broker.listener.name": "SASL_PLAINTEXT",
            "process.roles": "broker,controller", "node.id": "1", "controller.listener.names": "CONTROLLER",
            "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "listeners": f"SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{controller_port}",
            "log.dirs": str(directory / "data")}


def _write_properties(path: Path, properties: dict[str, str]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
    return path


def _credential_payloads(bootstrap_checkpoint: Path) -> list[dict]:
    dumped = run_kafka_tool("dump-log", ["--files", str(bootstrap_checkpoint), "--cluster-metadata-decoder"],
                            version=FORMAT_TOOL_VERSION)
    assert dumped.returncode == 0, dumped.stderr
    payloads = [json.loads(line.split(" payload: ", 1)[1]) for line in dumped.stdout.splitlines()
                if " payload: " in line]
    return [payload for payload in payloads if payload["type"] == "USER_SCRAM_CREDENTIAL_RECORD"]


def test_kfk_starts_on_kafkas_add_scram_format_and_lets_the_users_in(tmp_path: Path) -> None:
    controller_port = free_port()
    properties = _node_properties(tmp_path, controller_port)
    formatted = run_kafka_tool("storage", ["format", "-c", str(_write_properties(tmp_path / "server.properties",
                                                                                properties)),
                                           "-t", CLUSTER_ID, *ADD_SCRAM], version=FORMAT_TOOL_VERSION)
    assert formatted.returncode == 0, formatted.stderr
    assert "with metadata.version 4.0-IV3" in formatted.stdout
    for key in ("log.dirs", "listeners"):  # BrokerProcess gives these
        properties.pop(key)
    broker = BrokerProcess(log_dir=tmp_path / "data", log_path=tmp_path / "broker.log",
                           overrides={**TEST_OVERRIDES, **properties},
                           listener_name="SASL_PLAINTEXT", controller_port=controller_port)
    broker.start(60)
    try:
        for mechanism, user, password in [("SCRAM-SHA-256", "alice", "alice-secret"),
                                          ("SCRAM-SHA-512", "admin", "admin-secret")]:
            producer = Producer(confluent_config(broker.bootstrap_servers, mechanism, user, password))
            producer.produce(f"scram-kafka-formatted-{uuid.uuid4().hex[:6]}", user.encode())
            assert producer.flush(30) == 0
        command_config = _write_properties(tmp_path / "alice.properties", {
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice",
            "sasl.password": "alice-secret"})
        described = subprocess.run([sys.executable, "-m", "kfk", "configs", "--describe", "--entity-type", "users",
                                    "--bootstrap-server", broker.bootstrap_servers, "--command-config",
                                    str(command_config)], capture_output=True, text=True, timeout=120)
        assert described.returncode == 0, described.stderr
        assert described.stdout.splitlines() == [
            "SCRAM credential configs for user-principal 'admin' are SCRAM-SHA-512=iterations=4096",
            "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096",
            "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=8192"]
    finally:
        assert broker.stop() == 0
    # Kafka 4.0's file asks for metadata.version 4.0-IV3, group.version and transaction.version: all levels kfk
    # serves, so kfk bootstraps at them as they are.
    assert "that kfk does not serve" not in broker.output()
    metadata_records = [record for batch in metadata_log_batches(tmp_path / "data") for record in batch]
    assert [(record.name, record.feature_level) for record in metadata_records
            if record.NAME == "FeatureLevelRecord"] == [("metadata.version", 25), ("group.version", 1),
                                                        ("transaction.version", 2)]


def test_kafka_dump_log_reads_kfks_credentials_as_kafkas_own(tmp_path: Path) -> None:
    checkpoints = {}
    for who in ("kafka", "kfk"):
        properties = _node_properties(tmp_path / who, free_port())
        config = _write_properties(tmp_path / f"{who}.properties", properties)
        flags = ["format", "-c", str(config), "-t", CLUSTER_ID, "--add-scram", BOB]
        if who == "kafka":
            result = run_kafka_tool("storage", flags, version=FORMAT_TOOL_VERSION)
        else:
            result = subprocess.run([sys.executable, "-m", "kfk", "storage", *flags], capture_output=True, text=True,
                                    timeout=60, stdin=subprocess.DEVNULL)
        assert result.returncode == 0, result.stderr
        checkpoints[who] = _credential_payloads(tmp_path / who / "data" / "bootstrap.checkpoint")
    assert checkpoints["kfk"] == checkpoints["kafka"]
    [payload] = checkpoints["kfk"]
    assert payload["data"]["name"] == "bob" and payload["data"]["iterations"] == 8192
