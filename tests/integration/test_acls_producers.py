"""A producer whose principal may not produce idempotently fails, and says why: it does not hang. The broker
(embedded metadata, StandardAuthorizer, super.users=User:admin, SASL/PLAIN) refuses InitProducerId with
CLUSTER_AUTHORIZATION_FAILED to a principal with neither IDEMPOTENT_WRITE on the cluster nor WRITE on a topic
("alice" here: READ on her topic only, so that she sees it in Metadata). That is fatal for the idempotent producer
(the default): every record sent before or after fails with it, its callback runs, flush() returns; for kfk's sync
and asyncio producers, `kfk console-produce` (non-zero exit, one line) and Apache Kafka's console producer against
kfk (it logs each record's ClusterAuthorizationException and goes on). A transactional producer refused its
transactional id ("bob", who may write the topic) is done too. Deadlines here only guard against a hang."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kfk.client import Admin, NewTopic, Producer, TopicPartition
from kfk.client.aio import AIOProducer
from kfk.errors import ClusterAuthorizationError, TransactionalIdAuthorizationError
from kfk.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from kfk.testing.apache_kafka import run_kafka_tool
from kfk.testing.broker import BrokerProcess, start_broker
from tests.integration.test_acls_confluent import PASSWORDS, authorizer_overrides

pytestmark = pytest.mark.integration

HANG_GUARD_S = 60
REFUSED = "InitProducerId of the idempotent producer: Cluster authorization failed."


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("acl-producers"), authorizer_overrides(),
                           listener_name="SASL_PLAINTEXT")
    try:
        yield process
    finally:
        process.stop()


def config(broker: BrokerProcess, user: str, **extra) -> dict:
    return {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": PASSWORDS[user], **extra}


def allow(broker: BrokerProcess, user: str, operation: AclOperation, resource_type: ResourceType, name: str) -> None:
    binding = AclBinding(ResourcePattern(resource_type, name, PatternType.LITERAL),
                         AccessControlEntry(f"User:{user}", "*", operation, AclPermissionType.ALLOW))
    with Admin(config(broker, "admin")) as admin:
        assert admin.create_acls([binding]) == {binding: None}


@pytest.fixture
def readable_topic(broker: BrokerProcess) -> str:
    """A topic alice may read (and so see) but not write; she has no other ACL."""
    name = f"refused-{uuid.uuid4().hex[:8]}"
    with Admin(config(broker, "admin")) as admin:
        assert admin.create_topics([NewTopic(name, 1, 1)]) == {name: None}
    allow(broker, "alice", AclOperation.READ, ResourceType.TOPIC, name)
    return name


def test_the_sync_producer_fails_every_record_when_it_cannot_get_a_producer_id(broker: BrokerProcess,
                                                                               readable_topic: str) -> None:
    outcomes: list[tuple[object, BaseException | None]] = []
    called = threading.Event()

    def delivered(metadata: object, error: BaseException | None) -> None:
        outcomes.append((metadata, error))
        called.set()

    with Producer(config(broker, "alice")) as producer:
        future = producer.send(readable_topic, b"first", callback=delivered)
        producer.flush(HANG_GUARD_S)
        assert isinstance(future.exception(0), ClusterAuthorizationError)
        assert called.wait(HANG_GUARD_S)  # the callback runs on the network thread, right after the future is done
        assert [(metadata, str(error)) for metadata, error in outcomes] == [(None, REFUSED)]
        # Once failed, it fails every record at once: the future is done and the callback has run when send returns.
        later = producer.send(readable_topic, b"later", callback=delivered)
        assert later.done() and isinstance(later.exception(0), ClusterAuthorizationError)
        assert len(outcomes) == 2 and isinstance(outcomes[1][1], ClusterAuthorizationError)
        producer.flush(HANG_GUARD_S)


def test_the_asyncio_producer_fails_every_record_when_it_cannot_get_a_producer_id(broker: BrokerProcess,
                                                                                  readable_topic: str) -> None:
    async def scenario() -> None:
        async with AIOProducer(config(broker, "alice")) as producer:
            future = await producer.send(readable_topic, b"first")
            with pytest.raises(ClusterAuthorizationError, match=REFUSED):
                await asyncio.wait_for(future, HANG_GUARD_S)
            await producer.flush(HANG_GUARD_S)
            later = await producer.send(readable_topic, b"later")
            assert later.done() and isinstance(later.exception(), ClusterAuthorizationError)
            with pytest.raises(ClusterAuthorizationError):
                await producer.send_and_wait(readable_topic, b"and later")

    asyncio.run(scenario())


def test_a_transactional_producer_refused_its_transactional_id_is_done(broker: BrokerProcess,
                                                                       readable_topic: str) -> None:
    transactional_id = f"refused-{uuid.uuid4().hex[:8]}"
    # bob may write the topic but not use the transactional id (alice must keep no WRITE anywhere: with one, she
    # could produce idempotently).
    allow(broker, "bob", AclOperation.WRITE, ResourceType.TOPIC, readable_topic)
    with Producer(config(broker, "bob", **{"transactional.id": transactional_id})) as producer:
        with pytest.raises(TransactionalIdAuthorizationError) as refused:
            producer.init_transactions(HANG_GUARD_S)
        assert refused.value.fatal
        with pytest.raises(TransactionalIdAuthorizationError):
            producer.begin_transaction()
        with pytest.raises(TransactionalIdAuthorizationError):
            producer.send(readable_topic, b"never")
        producer.flush(HANG_GUARD_S)


def sasl_properties(path: Path, user: str) -> str:
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                    "org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f'username="{user}" password="{PASSWORDS[user]}";\n')
    return str(path)


def test_kfk_console_produce_exits_with_one_line(broker: BrokerProcess, readable_topic: str,
                                                 tmp_path: Path) -> None:
    produced = subprocess.run(
        [sys.executable, "-m", "kfk", "console-produce", "--topic", readable_topic, "--bootstrap-server",
         broker.bootstrap_servers, "--producer-config", sasl_properties(tmp_path / "alice.properties", "alice")],
        input="a\n", capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert produced.returncode == 1
    assert produced.stderr.splitlines() == [f"kfk: {REFUSED}"]


def test_kafka_console_producer_against_kfk_fails_the_same(broker: BrokerProcess, readable_topic: str,
                                                           tmp_path: Path) -> None:
    produced = run_kafka_tool("console-producer", [
        "--bootstrap-server", broker.bootstrap_servers, "--topic", readable_topic,
        "--producer.config", sasl_properties(tmp_path / "alice.properties", "alice")],
        input="a\nb\n", timeout=HANG_GUARD_S * 2)
    # Kafka's tool logs the failure of each record sent before the refusal arrived and goes on; a record it sends
    # after that is refused by send() itself ("in an error state"), which ends the tool (Java's race between its
    # stdin and its sender thread, the same against Apache Kafka). Either way every line read failed.
    failed_in_callbacks = produced.stderr.count("Error when sending message to topic")
    if failed_in_callbacks < 2:
        assert produced.returncode != 0, produced.stderr
        assert "Cannot execute transactional method because we are in an error state" in produced.stderr
    assert "ClusterAuthorizationException: Cluster authorization failed." in produced.stderr
    with Admin(config(broker, "admin")) as admin:
        assert admin.end_offsets([TopicPartition(readable_topic, 0)]) == {TopicPartition(readable_topic, 0): 0}
