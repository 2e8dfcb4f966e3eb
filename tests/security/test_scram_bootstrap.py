"""SCRAM credentials given at format time (`kfk storage format --add-scram`, KIP-900) let users in from the first
start, with no other step: a node formatted with kfk's defaults (no properties file, `./kfk-data`) and started with
a SASL_PLAINTEXT listener authenticates confluent-kafka and kafka-python as the formatted user, refuses a wrong
password, lists the credentials in `kfk configs --describe --entity-type users`, and its broker side authenticates
with a formatted credential itself (sasl.mechanism.inter.broker.protocol). A three-controller KRaft cluster
formatted the same way replicates over SCRAM between its brokers and holds the credentials once in its metadata log,
also after the active controller was killed and another took over."""

from __future__ import annotations

import logging
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError as ConfluentKafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.protocol.metadata_records import schema_class
from kfk.testing.broker import BrokerProcess
from kfk.testing.plugin import TEST_OVERRIDES

from tests.cluster.helpers import describe_quorum, metadata_log_batches, wait_until
from tests.security.cluster_checks import partition_zero, produce_acks_all, read_partition_zero
from tests.security.test_sasl_clients import confluent_config, scram_failure

pytestmark = pytest.mark.integration

FeatureLevelRecord = schema_class("FeatureLevelRecord")
UserScramCredentialRecord = schema_class("UserScramCredentialRecord")

#: alice is a client; admin is the brokers' own user between themselves.
ADD_SCRAM = ["--add-scram", "SCRAM-SHA-256=[name=alice,password=alice-secret]",
             "-S", "SCRAM-SHA-512=[name=admin,iterations=8192,password=admin-secret]"]
ADMIN_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" '
              'password="admin-secret";')
SCRAM_OVERRIDES = {"sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
                   "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                   "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": ADMIN_JAAS}
ALICE = ("SCRAM-SHA-256", "alice", "alice-secret")


def kfk(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kfk", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def scram_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """Formatted as `kfk storage format --add-scram ...` with no properties file formats (./kfk-data, the
    single-node default `kfk server start` runs on), then started with a SASL_PLAINTEXT listener."""
    directory = tmp_path_factory.mktemp("scram-bootstrap")
    formatted = kfk("storage", "format", *ADD_SCRAM, cwd=directory)
    assert formatted.returncode == 0, formatted.stderr
    assert formatted.stdout == f"Formatting metadata directory {directory / 'kfk-data'} with metadata.version 4.4-IV2.\n"
    broker = BrokerProcess(log_dir=directory / "kfk-data", log_path=directory / "broker.log",
                           overrides={**TEST_OVERRIDES, **SCRAM_OVERRIDES}, listener_name="SASL_PLAINTEXT")
    broker.start()
    yield broker
    assert broker.stop() == 0


@pytest.fixture
def kfk_metadata_mode() -> str:
    return "kraft"


def test_confluent_kafka_authenticates_as_the_formatted_user(scram_broker: BrokerProcess) -> None:
    topic = f"scram-{uuid.uuid4().hex[:8]}"
    config = confluent_config(scram_broker.bootstrap_servers, *ALICE)
    values = [f"v{index}".encode() for index in range(10)]
    produce_acks_all(config, topic, values)
    assert read_partition_zero(config, topic, len(values)) == values


def test_kafka_python_authenticates_as_the_formatted_user(scram_broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"scram-{uuid.uuid4().hex[:8]}"
    config = dict(bootstrap_servers=scram_broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                  sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="admin", sasl_plain_password="admin-secret")
    producer = KafkaProducer(**config)
    for index in range(5):
        producer.send(topic, f"v{index}".encode()).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000, group_id=f"g-{topic}",
                             **config)
    values = [message.value for _, message in zip(range(5), consumer)]
    consumer.close()
    assert values == [f"v{index}".encode() for index in range(5)]


def test_a_wrong_password_is_refused(scram_broker: BrokerProcess, caplog: pytest.LogCaptureFixture) -> None:
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError as KafkaPythonTimeout

    errors: list = []
    producer = Producer(confluent_config(scram_broker.bootstrap_servers, "SCRAM-SHA-256", "alice", "wrong-secret",
                                         error_cb=errors.append, log_level=0))
    producer.produce("never", b"never")
    deadline = time.monotonic() + 15
    while not any(error.code() == ConfluentKafkaError._AUTHENTICATION for error in errors) \
            and time.monotonic() < deadline:
        producer.poll(0.2)
    authentication = [error for error in errors if error.code() == ConfluentKafkaError._AUTHENTICATION]
    assert authentication and scram_failure("SCRAM-SHA-256") in authentication[0].str(), errors
    assert producer.flush(0) == 1
    producer.purge()
    with caplog.at_level(logging.ERROR, logger="kafka"), pytest.raises(KafkaPythonTimeout):
        KafkaProducer(bootstrap_servers=scram_broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="admin", sasl_plain_password="wrong",
                      bootstrap_timeout_ms=2000)
    assert any(scram_failure("SCRAM-SHA-512") in record.getMessage() for record in caplog.records)


def test_configs_describe_lists_the_formatted_credentials(scram_broker: BrokerProcess, tmp_path: Path) -> None:
    command_config = tmp_path / "alice.properties"
    command_config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                              "sasl.username=alice\nsasl.password=alice-secret\n")
    described = kfk("configs", "--describe", "--entity-type", "users", "--bootstrap-server",
                    scram_broker.bootstrap_servers, "--command-config", str(command_config))
    assert described.returncode == 0, described.stderr
    assert described.stdout.splitlines() == [
        "SCRAM credential configs for user-principal 'admin' are SCRAM-SHA-512=iterations=8192",
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096"]


def test_a_formatted_quorum_holds_the_credentials_once(kfk_cluster_factory) -> None:
    cluster = kfk_cluster_factory(3, {**SCRAM_OVERRIDES, "min.insync.replicas": "2",
                                      "listener.security.protocol.map":
                                          "CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT"},
                                  combined=True, listener_name="SASL_PLAINTEXT", format_args=ADD_SCRAM)
    config = confluent_config(cluster.bootstrap_servers, *ALICE)
    admin = AdminClient(config)
    topic = f"scram-replicated-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    produce_acks_all(config, topic, [f"r{index}".encode() for index in range(50)])
    # acks=all with min.insync.replicas=2 and all three in sync: the followers fetched as the formatted admin.
    wait_until(lambda: len(partition_zero(admin, topic).isrs) == 3, 20, what="three in-sync replicas")

    def leader() -> int | None:
        for node_id, port in cluster.voters.items():
            if cluster.brokers[node_id].process is not None \
                    and (partition := describe_quorum(f"127.0.0.1:{port}")) is not None:
                return partition.leader_id
        return None

    first_leader = wait_until(leader, 20, what="the active controller")
    cluster.kill(first_leader)
    wait_until(lambda: leader() not in (None, first_leader), 30, what="another active controller")
    survivors = [node_id for node_id in cluster.brokers if node_id != first_leader]
    later = f"scram-later-{uuid.uuid4().hex[:6]}"
    survivor_admin = AdminClient(confluent_config(
        ",".join(cluster.brokers[node_id].bootstrap_servers for node_id in survivors), *ALICE))
    survivor_admin.create_topics([NewTopic(later, 1, 2)])[later].result(30)  # the new controller writes
    for node_id in survivors:
        assert cluster.stop(node_id) == 0
    for node_id in survivors:
        records = [record for batch in metadata_log_batches(cluster.brokers[node_id].log_dir) for record in batch]
        credentials = [(record.name, record.mechanism) for record in records
                       if isinstance(record, UserScramCredentialRecord)]
        assert sorted(credentials) == [("admin", 2), ("alice", 1)], node_id
        assert [(record.name, record.feature_level) for record in records
                if isinstance(record, FeatureLevelRecord)] == [("metadata.version", 33),
                                                                ("eligible.leader.replicas.version", 1),
                                                                ("group.version", 1), ("transaction.version", 2)]
