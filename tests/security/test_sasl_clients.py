"""SASL with real clients: confluent-kafka (librdkafka 2.16), kafka-python, aiokafka, kcat and kfk's own client produce
and consume with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 over SASL_PLAINTEXT and SASL_SSL; a wrong password and an
unknown user are refused with the error each client reports (Kafka's messages); SCRAM credentials are set with
AlterUserScramCredentials (kfk's Admin and confluent-kafka's) and described back. One broker serves the module: its
first listener SASL_PLAINTEXT (also the inter-broker one), a second SASL_SSL with conftest's certificates."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError as ConfluentKafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from kfk.client import Admin
from kfk.client import Consumer as KfkConsumer
from kfk.client import Producer as KfkProducer
from kfk.client.structs import ScramCredentialInfo as KfkScramCredentialInfo
from kfk.client.structs import UserScramCredentialDeletion, UserScramCredentialUpsertion as KfkUpsertion
from kfk.common.structs import TopicPartition
from kfk.errors import ResourceNotFoundError, SaslAuthenticationError, UnacceptableCredentialError
from kfk.testing.broker import BrokerProcess
from kfk.testing.plugin import TEST_OVERRIDES

from tests.security.conftest import Certificates

pytestmark = pytest.mark.integration

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
#: user -> password, for PLAIN (the JAAS users) and for SCRAM (credentials the module fixture creates).
PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
PROTOCOLS = ["SASL_PLAINTEXT", "SASL_SSL"]
PLAIN_FAILURE = "Authentication failed: Invalid username or password"


def scram_failure(mechanism: str) -> str:
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


def sasl_overrides(**extra: str) -> dict[str, str]:
    return {**TEST_OVERRIDES, "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS, **extra}


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory, certificates: Certificates):
    directory = tmp_path_factory.mktemp("sasl-broker")
    broker = BrokerProcess(log_dir=directory / "data", log_path=directory / "broker.log",
                           overrides=sasl_overrides(**certificates.broker_overrides(), **{
                               "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS}),
                           listener_name="SASL_PLAINTEXT", extra_listeners=["SASL_SSL://127.0.0.1:0"])
    broker.start()
    try:
        with Admin(kfk_config(broker.bootstrap_servers, "PLAIN", "admin", "admin-secret")) as admin:
            result = admin.alter_user_scram_credentials(
                [KfkUpsertion(user, mechanism, 4096, password)
                 for user, password in PASSWORDS.items() for mechanism in MECHANISMS[1:]])
            assert result == {"admin": None, "alice": None}
        yield broker
    finally:
        broker.stop()


def address(broker: BrokerProcess, protocol: str) -> str:
    return broker.bootstrap_servers if protocol == "SASL_PLAINTEXT" else f"127.0.0.1:{broker.ports['SASL_SSL']}"


def kfk_config(bootstrap: str, mechanism: str, user: str, password: str) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}


def kfk_protocol_config(broker: BrokerProcess, protocol: str, certificates: Certificates, mechanism: str, user: str,
                        password: str) -> dict[str, str]:
    config = {**kfk_config(address(broker, protocol), mechanism, user, password), "security.protocol": protocol}
    if protocol == "SASL_SSL":
        config.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certificates.ca)})
    return config


def confluent_config(bootstrap: str, mechanism: str, user: str, password: str, **extra) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password, **extra}


def confluent_protocol_config(broker: BrokerProcess, protocol: str, certificates: Certificates, mechanism: str,
                              user: str, password: str, **extra) -> dict:
    config = {**confluent_config(address(broker, protocol), mechanism, user, password, **extra),
              "security.protocol": protocol}
    if protocol == "SASL_SSL":
        config["ssl.ca.location"] = str(certificates.ca)
    return config


def python_client_config(broker: BrokerProcess, protocol: str, certificates: Certificates, mechanism: str,
                         user: str, password: str, aiokafka: bool = False) -> dict:
    """kafka-python's and aiokafka's settings (aiokafka takes an SSLContext, kafka-python a CA file)."""
    config = dict(bootstrap_servers=address(broker, protocol), security_protocol=protocol, sasl_mechanism=mechanism,
                  sasl_plain_username=user, sasl_plain_password=password)
    if protocol == "SASL_SSL":
        if aiokafka:
            from aiokafka.helpers import create_ssl_context
            config["ssl_context"] = create_ssl_context(cafile=str(certificates.ca))
        else:
            config["ssl_cafile"] = str(certificates.ca)
    return config


def new_topic() -> str:
    return f"sasl-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_confluent_kafka_produces_and_consumes(sasl_broker: BrokerProcess, certificates: Certificates, protocol: str,
                                               mechanism: str) -> None:
    topic = new_topic()
    config = confluent_protocol_config(sasl_broker, protocol, certificates, mechanism, "alice", "alice-secret")
    producer = Producer(config)
    errors: list = []
    for index in range(10):
        producer.produce(topic, f"v{index}".encode(), on_delivery=lambda error, _: errors.append(error))
    assert producer.flush(30) == 0
    assert errors == [None] * 10
    consumer = Consumer({**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < 10 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    assert values == [f"v{index}".encode() for index in range(10)]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("user,password", [("alice", "wrong-secret"), ("mallory", "alice-secret")])
def test_confluent_kafka_refused(sasl_broker: BrokerProcess, certificates: Certificates, protocol: str,
                                 mechanism: str, user: str, password: str) -> None:
    errors: list = []
    producer = Producer(confluent_protocol_config(sasl_broker, protocol, certificates, mechanism, user, password,
                                                  error_cb=errors.append, **{"log_level": 0}))
    producer.produce(new_topic(), b"never", on_delivery=lambda error, _: None)
    deadline = time.monotonic() + 15
    while not any(error.code() == ConfluentKafkaError._AUTHENTICATION for error in errors) \
            and time.monotonic() < deadline:
        producer.poll(0.2)
    authentication = [error for error in errors if error.code() == ConfluentKafkaError._AUTHENTICATION]
    assert authentication, errors
    expected = PLAIN_FAILURE if mechanism == "PLAIN" else scram_failure(mechanism)
    assert expected in authentication[0].str()
    assert producer.flush(0) == 1  # nothing was delivered
    producer.purge()


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_produces_and_consumes(sasl_broker: BrokerProcess, certificates: Certificates, protocol: str,
                                            mechanism: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = new_topic()
    config = python_client_config(sasl_broker, protocol, certificates, mechanism, "alice", "alice-secret")
    producer = KafkaProducer(**config)
    for index in range(5):
        producer.send(topic, f"v{index}".encode()).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000,
                             group_id=f"g-{topic}", **config)
    values = [message.value for _, message in zip(range(5), consumer)]
    consumer.close()
    assert values == [f"v{index}".encode() for index in range(5)]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kafka_python_refused(sasl_broker: BrokerProcess, mechanism: str, caplog: pytest.LogCaptureFixture) -> None:
    """kafka-python logs the broker's SaslAuthenticationFailedError for each bootstrap attempt, then gives up."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError as KafkaPythonTimeout

    with caplog.at_level(logging.ERROR, logger="kafka"), pytest.raises(KafkaPythonTimeout):
        KafkaProducer(bootstrap_servers=sasl_broker.bootstrap_servers, security_protocol="SASL_PLAINTEXT",
                      sasl_mechanism=mechanism, sasl_plain_username="alice", sasl_plain_password="wrong",
                      bootstrap_timeout_ms=2000)
    expected = PLAIN_FAILURE if mechanism == "PLAIN" else scram_failure(mechanism)
    failures = [record.getMessage() for record in caplog.records if "SaslAuthenticationFailedError" in
                record.getMessage()]
    assert failures and expected in failures[0]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka_produces_and_consumes(sasl_broker: BrokerProcess, certificates: Certificates, protocol: str,
                                        mechanism: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = new_topic()
    config = python_client_config(sasl_broker, protocol, certificates, mechanism, "alice", "alice-secret",
                                  aiokafka=True)

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**config)
        await producer.start()
        try:
            for index in range(5):
                await producer.send_and_wait(topic, f"v{index}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", group_id=f"g-{topic}", **config)
        await consumer.start()
        try:
            return [(await consumer.getone()).value for _ in range(5)]
        finally:
            await consumer.stop()

    assert asyncio.run(asyncio.wait_for(run(), 60)) == [f"v{index}".encode() for index in range(5)]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_aiokafka_refused(sasl_broker: BrokerProcess, mechanism: str) -> None:
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaError as AioKafkaError

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=sasl_broker.bootstrap_servers,
                                    security_protocol="SASL_PLAINTEXT", sasl_mechanism=mechanism,
                                    sasl_plain_username="mallory", sasl_plain_password="x")
        try:
            await producer.start()
        finally:
            await producer.stop()

    with pytest.raises(AioKafkaError):
        asyncio.run(asyncio.wait_for(run(), 30))


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kfk_client_produces_and_consumes(sasl_broker: BrokerProcess, certificates: Certificates, protocol: str,
                                          mechanism: str) -> None:
    topic = new_topic()
    config = kfk_protocol_config(sasl_broker, protocol, certificates, mechanism, "alice", "alice-secret")
    with KfkProducer(config) as producer:
        for index in range(5):
            producer.send(topic, f"v{index}".encode()).get(30)
    with KfkConsumer(config, auto_offset_reset="earliest", enable_auto_commit=False) as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(values) < 5 and time.monotonic() < deadline:
            values.extend(record.value for record in consumer.poll(500))
    assert values == [f"v{index}".encode() for index in range(5)]


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kfk_client_refused_with_kafkas_message(sasl_broker: BrokerProcess, mechanism: str) -> None:
    with Admin(kfk_config(sasl_broker.bootstrap_servers, mechanism, "alice", "wrong"),
               default_api_timeout_ms=5000) as admin:
        with pytest.raises(SaslAuthenticationError) as refused:
            admin.list_topics()
    assert refused.value.message == (PLAIN_FAILURE if mechanism == "PLAIN" else scram_failure(mechanism))


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_kcat(sasl_broker: BrokerProcess, mechanism: str) -> None:
    topic = new_topic()
    common = ["kcat", "-b", sasl_broker.bootstrap_servers, "-X", "security.protocol=SASL_PLAINTEXT",
              "-X", f"sasl.mechanisms={mechanism}", "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"]
    subprocess.run([*common, "-P", "-t", topic], input=b"one\ntwo\n", check=True, timeout=60)
    consumed = subprocess.run([*common, "-C", "-t", topic, "-e", "-o", "beginning", "-f", "%s\n"],
                              capture_output=True, check=True, timeout=60)
    assert consumed.stdout.split() == [b"one", b"two"]
    refused = subprocess.run(["kcat", "-b", sasl_broker.bootstrap_servers, "-X", "security.protocol=SASL_PLAINTEXT",
                              "-X", f"sasl.mechanisms={mechanism}", "-X", "sasl.username=alice",
                              "-X", "sasl.password=nope", "-L", "-m", "5"], capture_output=True, timeout=60)
    assert refused.returncode != 0
    expected = PLAIN_FAILURE if mechanism == "PLAIN" else scram_failure(mechanism)
    assert expected in refused.stderr.decode()


def test_scram_credentials_described_altered_and_deleted(sasl_broker: BrokerProcess) -> None:
    config = kfk_config(sasl_broker.bootstrap_servers, "PLAIN", "admin", "admin-secret")
    with Admin(config) as admin:
        assert admin.alter_user_scram_credentials([KfkUpsertion("carol", "SCRAM-SHA-512", 8192, "carol-secret")]) \
            == {"carol": None}
        described = admin.describe_user_scram_credentials(["carol", "alice", "nobody"])
        assert described["carol"] == [KfkScramCredentialInfo("SCRAM-SHA-512", 8192)]
        assert described["alice"] == [KfkScramCredentialInfo("SCRAM-SHA-256", 4096),
                                      KfkScramCredentialInfo("SCRAM-SHA-512", 4096)]
        assert isinstance(described["nobody"], ResourceNotFoundError)
        with KfkProducer(kfk_config(sasl_broker.bootstrap_servers, "SCRAM-SHA-512", "carol", "carol-secret")) as p:
            p.send(new_topic(), b"carol was here").get(30)
        few = admin.alter_user_scram_credentials([KfkUpsertion("dave", "SCRAM-SHA-256", 100, "x")])
        assert isinstance(few["dave"], UnacceptableCredentialError) and few["dave"].message == "user 'dave': Too few iterations"
        assert admin.alter_user_scram_credentials([UserScramCredentialDeletion("carol", "SCRAM-SHA-512")]) \
            == {"carol": None}
        assert isinstance(admin.describe_user_scram_credentials(["carol"])["carol"], ResourceNotFoundError)
        missing = admin.alter_user_scram_credentials([UserScramCredentialDeletion("carol", "SCRAM-SHA-512")])
        assert isinstance(missing["carol"], ResourceNotFoundError)
    with Admin(kfk_config(sasl_broker.bootstrap_servers, "SCRAM-SHA-512", "carol", "carol-secret"),
               default_api_timeout_ms=5000) as admin:
        with pytest.raises(SaslAuthenticationError):
            admin.list_topics()


def test_confluent_admin_sets_scram_credentials(sasl_broker: BrokerProcess) -> None:
    admin = AdminClient(confluent_config(sasl_broker.bootstrap_servers, "PLAIN", "admin", "admin-secret"))
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "erin", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"erin-secret")])
    assert futures["erin"].result(30) is None
    description = admin.describe_user_scram_credentials(["erin"])["erin"].result(30)
    assert [(info.mechanism, info.iterations) for info in description.scram_credential_infos] \
        == [(ScramMechanism.SCRAM_SHA_256, 8192)]
    producer = Producer(confluent_config(sasl_broker.bootstrap_servers, "SCRAM-SHA-256", "erin", "erin-secret"))
    producer.produce(new_topic(), b"erin")
    assert producer.flush(30) == 0


def test_confluent_kafka_reauthenticates_and_keeps_producing(tmp_path_factory: pytest.TempPathFactory) -> None:
    """connections.max.reauth.ms=1500: librdkafka re-authenticates (KIP-368) on its connections within the session
    lifetime the broker gives it; produce goes on throughout and no session is cut short."""
    directory = tmp_path_factory.mktemp("sasl-reauth-client")
    broker = BrokerProcess(log_dir=directory / "data", log_path=directory / "broker.log", listener_name="SASL_PLAINTEXT",
                           overrides=sasl_overrides(**{"connections.max.reauth.ms": "1500"}),
                           extra_args=["--log-level", "debug"])
    broker.start()
    try:
        producer = Producer(confluent_config(broker.bootstrap_servers, "PLAIN", "alice", "alice-secret"))
        errors: list = []
        topic = new_topic()
        deadline = time.monotonic() + 5
        sent = 0
        while time.monotonic() < deadline:
            producer.produce(topic, b"x", on_delivery=lambda error, _: errors.append(error))
            sent += 1
            producer.poll(0.1)
        assert producer.flush(30) == 0
        assert errors == [None] * sent
        log = broker.output()
        # librdkafka's connections (bootstrap, broker 1) authenticate once, then again at least every 1.5 s
        assert log.count("authenticated User:alice with PLAIN") >= 4
        assert "closing connection" not in log
    finally:
        broker.stop()
