"""The ACL matrix with confluent-kafka (librdkafka) over SASL/PLAIN: a principal without WRITE cannot produce, without
READ cannot fetch or join the group, without DESCRIBE does not see the topic in Metadata; prefixed ACLs apply to the
names they start; a DENY beats an ALLOW; the super user needs no ACL; idempotent and transactional producers, topic
creation, configs and deletion need theirs; only a principal with ALTER on the cluster may create ACLs (librdkafka
2.16 reports a refused DescribeAcls as an empty list: tests/integration/test_acls_wire.py checks that answer). The
errors are the codes Kafka answers, read from confluent-kafka's error objects. One broker (embedded metadata,
StandardAuthorizer, super.users=User:admin) serves the module; each test uses topics of its own."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES

pytestmark = pytest.mark.integration

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret", "carol": "carol-secret"}
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" ' + " ".join(f'user_{u}="{p}"' for u, p in PASSWORDS.items()) + ";")
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def authorizer_overrides(jaas: str = PLAIN_JAAS, mechanisms: str = "PLAIN", **extra: str) -> dict[str, str]:
    """A SASL_PLAINTEXT broker's settings with StandardAuthorizer: PLAIN users from `jaas`, User:admin super."""
    return {**TEST_OVERRIDES, "sasl.enabled.mechanisms": mechanisms, "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas,
            "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:admin", **extra}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    process = start_broker(tmp_path_factory.mktemp("acl-broker"), authorizer_overrides(),
                           listener_name="SASL_PLAINTEXT")
    try:
        yield process
    finally:
        _ADMINS.clear()
        process.stop()


def config(broker: BrokerProcess, user: str, **extra) -> dict:
    return {"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": PASSWORDS[user], **extra}


_ADMINS: dict[tuple[str, str], AdminClient] = {}


def admin(broker: BrokerProcess, user: str = "admin") -> AdminClient:
    """One AdminClient per broker and user (a client must outlive the futures of its calls)."""
    key = (broker.bootstrap_servers, user)
    if key not in _ADMINS:
        _ADMINS[key] = AdminClient(config(broker, user))
    return _ADMINS[key]


def new_topic(broker: BrokerProcess, prefix: str = "acl-") -> str:
    name = f"{prefix}{uuid.uuid4().hex[:8]}"
    for future in admin(broker).create_topics([NewTopic(name, 1, 1)]).values():
        future.result(10)
    return name


def allow(broker: BrokerProcess, user: str, operation: AclOperation, name: str,
          resource_type: ResourceType = ResourceType.TOPIC,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL,
          permission: AclPermissionType = AclPermissionType.ALLOW) -> None:
    binding = AclBinding(resource_type, name, pattern, f"User:{user}", "*", operation, permission)
    for future in admin(broker).create_acls([binding]).values():
        future.result(10)


def produce_error(broker: BrokerProcess, user: str, topic: str) -> int | None:
    """The delivery error code of one record (None: delivered)."""
    outcome: list = []
    producer = Producer(config(broker, user, **{"message.timeout.ms": 10000}))
    producer.produce(topic, b"value", on_delivery=lambda error, message: outcome.append(error))
    producer.flush(15)
    assert outcome, "no delivery report"
    return None if outcome[0] is None else outcome[0].code()


def consume_error(broker: BrokerProcess, user: str, topic: str, group: str, timeout_s: float = 15) -> int | None:
    """The first error the consumer reports (None: it read a record)."""
    consumer = Consumer(config(broker, user, **{"group.id": group, "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is not None:
                if message.error().code() == KafkaError._PARTITION_EOF:
                    continue
                return message.error().code()
            return None
        raise AssertionError(f"{user} neither read {topic} nor got an error in {timeout_s} s")
    finally:
        consumer.close()


def test_without_write_a_principal_cannot_produce(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    allow(broker, "alice", AclOperation.READ, topic)
    assert produce_error(broker, "alice", topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    allow(broker, "alice", AclOperation.WRITE, topic)
    assert produce_error(broker, "alice", topic) is None
    assert produce_error(broker, "bob", topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_without_read_a_principal_cannot_fetch_or_join_the_group(broker: BrokerProcess) -> None:
    topic, group = new_topic(broker), f"g-{uuid.uuid4().hex[:8]}"
    assert produce_error(broker, "admin", topic) is None
    allow(broker, "alice", AclOperation.WRITE, topic)  # DESCRIBE implied: alice sees the topic
    allow(broker, "alice", AclOperation.READ, group, ResourceType.GROUP)
    assert consume_error(broker, "alice", topic, group) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    other_group = f"g-{uuid.uuid4().hex[:8]}"
    allow(broker, "alice", AclOperation.READ, topic)
    assert consume_error(broker, "alice", topic, other_group) == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert consume_error(broker, "alice", topic, group) is None


def test_without_describe_the_topic_is_not_in_metadata(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    allow(broker, "alice", AclOperation.READ, topic)
    assert topic in admin(broker, "alice").list_topics(timeout=10).topics
    assert topic not in admin(broker, "bob").list_topics(timeout=10).topics
    assert topic in admin(broker, "admin").list_topics(timeout=10).topics
    named = admin(broker, "bob").list_topics(topic=topic, timeout=10).topics[topic]
    assert named.error is not None and named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_prefixed_acl_applies_to_the_names_it_starts(broker: BrokerProcess) -> None:
    prefix = f"pre-{uuid.uuid4().hex[:6]}-"
    inside, outside = new_topic(broker, prefix), new_topic(broker, "other-")
    allow(broker, "alice", AclOperation.WRITE, prefix, pattern=ResourcePatternType.PREFIXED)
    assert produce_error(broker, "alice", inside) is None
    assert produce_error(broker, "alice", outside) == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_deny_beats_allow(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    allow(broker, "alice", AclOperation.ALL, topic)
    assert produce_error(broker, "alice", topic) is None
    allow(broker, "alice", AclOperation.WRITE, topic, permission=AclPermissionType.DENY)
    assert produce_error(broker, "alice", topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    allow(broker, "alice", AclOperation.READ, "*", ResourceType.GROUP)
    assert consume_error(broker, "alice", topic, f"g-{uuid.uuid4().hex[:8]}") is None  # ALL still allows READ


def test_the_super_user_needs_no_acl(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    allow(broker, "bob", AclOperation.ALL, topic, permission=AclPermissionType.DENY)
    assert produce_error(broker, "admin", topic) is None
    assert consume_error(broker, "admin", topic, f"g-{uuid.uuid4().hex[:8]}") is None


def test_only_alter_on_the_cluster_creates_acls_and_describe_lists_them(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    binding = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:bob", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as refused:
        for future in admin(broker, "bob").create_acls([binding]).values():
            future.result(10)
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    allow(broker, "bob", AclOperation.ALTER, "kafka-cluster", ResourceType.BROKER)  # the CLUSTER type (id 4)
    for future in admin(broker, "bob").create_acls([binding]).values():
        future.result(10)
    described = admin(broker).describe_acls(AclBindingFilter(
        ResourceType.TOPIC, topic, ResourcePatternType.MATCH, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(10)
    assert described == [binding]
    deleted = admin(broker).delete_acls([AclBindingFilter(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:bob", None, AclOperation.ANY,
        AclPermissionType.ANY)])
    assert [future.result(10) for future in deleted.values()] == [[binding]]
    for future in admin(broker).delete_acls([AclBindingFilter(
            ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, "User:bob", None, AclOperation.ANY,
            AclPermissionType.ANY)]).values():
        future.result(10)


def test_idempotent_and_transactional_producers_need_their_acls(broker: BrokerProcess) -> None:
    topic = new_topic(broker)
    allow(broker, "carol", AclOperation.READ, topic)
    producer = Producer(config(broker, "carol", **{"enable.idempotence": True, "message.timeout.ms": 5000}))
    producer.produce(topic, b"v")
    # InitProducerId without IDEMPOTENT_WRITE on the cluster nor WRITE on any topic (carol has none anywhere,
    # which is why this test has a user of its own): a fatal error, which confluent-kafka raises from poll().
    with pytest.raises(KafkaException) as refused:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            producer.poll(0.2)
    assert refused.value.args[0].fatal()
    assert refused.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED

    transactional_id = f"tx-{uuid.uuid4().hex[:8]}"
    allow(broker, "carol", AclOperation.WRITE, topic)
    producer = Producer(config(broker, "carol", **{"transactional.id": transactional_id}))
    with pytest.raises(KafkaException) as refused:
        producer.init_transactions(10)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    allow(broker, "carol", AclOperation.WRITE, transactional_id, ResourceType.TRANSACTIONAL_ID)
    producer = Producer(config(broker, "carol", **{"transactional.id": transactional_id}))
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(topic, b"in a transaction")
    producer.commit_transaction(10)


def test_topic_administration_needs_create_delete_and_config_acls(broker: BrokerProcess) -> None:
    name = f"alice-{uuid.uuid4().hex[:8]}"
    with pytest.raises(KafkaException) as refused:
        admin(broker, "alice").create_topics([NewTopic(name, 1, 1)])[name].result(10)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    allow(broker, "alice", AclOperation.CREATE, "alice-", pattern=ResourcePatternType.PREFIXED)
    admin(broker, "alice").create_topics([NewTopic(name, 1, 1)])[name].result(10)

    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    with pytest.raises(KafkaException) as refused:
        admin(broker, "bob").describe_configs([resource])[resource].result(10)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    allow(broker, "bob", AclOperation.ALTER_CONFIGS, name)  # implies DESCRIBE_CONFIGS
    assert "retention.ms" in admin(broker, "bob").describe_configs([resource])[resource].result(10)

    with pytest.raises(KafkaException) as refused:
        admin(broker, "bob").delete_topics([name])[name].result(10)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    allow(broker, "bob", AclOperation.DELETE, name)
    admin(broker, "bob").delete_topics([name])[name].result(10)


def test_kfk_acls_with_sasl_users(broker: BrokerProcess, tmp_path) -> None:
    """kfk acls with --command-config: the admin adds and lists, alice (no ALTER on the cluster) is refused in one
    line with Kafka's message."""
    def properties(user: str):
        path = tmp_path / f"{user}.properties"
        path.write_text(f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username={user}\n"
                        f"sasl.password={PASSWORDS[user]}\n")
        return str(path)

    def kfk_acls(user: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kfk", "acls", "--bootstrap-server", broker.bootstrap_servers,
                               "--command-config", properties(user), *args], capture_output=True, text=True,
                              timeout=60)

    topic = new_topic(broker)
    refused = kfk_acls("alice", "--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", topic)
    assert refused.returncode == 1
    assert refused.stderr.strip().splitlines()[-1] == "kfk: CreateAcls: Cluster authorization failed."
    assert produce_error(broker, "alice", topic) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    added = kfk_acls("admin", "--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", topic)
    assert added.returncode == 0, added.stderr
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)" in \
        kfk_acls("admin", "--list", "--topic", topic).stdout
    assert produce_error(broker, "alice", topic) is None
