"""The console run as a principal with DESCRIBE rights only (SASL/PLAIN, StandardAuthorizer; `carol` may describe
every topic, group and the cluster, nothing more): every page renders (HTTP 200) in headless Chromium with no
JavaScript error, and the panels that need more say what is missing and why instead of failing the page."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

from kfk.client import Admin as KfkAdmin
from kfk.client.structs import UserScramCredentialUpsertion
from kfk.testing.broker import start_broker
from tests.integration.test_acls_confluent import PASSWORDS, admin, authorizer_overrides, config
from tests.ui.conftest import ConsoleSession, screenshot

pytestmark = pytest.mark.integration

TOPIC = "described"
GROUP = "described-group"


@pytest.fixture(scope="module")
def secured_broker(tmp_path_factory: pytest.TempPathFactory):
    process = start_broker(tmp_path_factory.mktemp("ui-acl-broker"),
                           authorizer_overrides(mechanisms="PLAIN,SCRAM-SHA-256"),
                           listener_name="SASL_PLAINTEXT")
    try:
        yield process
    finally:
        process.stop()


def _describe_only(broker) -> None:
    """carol: DESCRIBE on every topic and group and on the cluster; admin makes a topic with records and a group
    with committed offsets."""
    bindings = [AclBinding(kind, name, ResourcePatternType.LITERAL, "User:carol", "*", AclOperation.DESCRIBE,
                           AclPermissionType.ALLOW)
                for kind, name in ((ResourceType.TOPIC, "*"), (ResourceType.GROUP, "*"),
                                   (ResourceType.BROKER, "kafka-cluster"))]
    for future in admin(broker).create_acls(bindings).values():
        future.result(10)
    producer = Producer(config(broker, "admin"))
    for index in range(6):
        producer.produce(TOPIC, b"record %d" % index, partition=0)
    assert producer.flush(20) == 0
    committer = Consumer(config(broker, "admin", **{"group.id": GROUP, "enable.auto.commit": False}))
    committer.commit(offsets=[ConfluentTopicPartition(TOPIC, 0, 2)], asynchronous=False)
    committer.close()


def test_every_page_renders_for_a_describe_only_user(secured_broker, console_factory, browser_page,
                                                     tmp_path) -> None:
    _describe_only(secured_broker)
    properties = tmp_path / "carol.properties"
    properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                          "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                          f'username="carol" password="{PASSWORDS["carol"]}";\n')
    console = console_factory(secured_broker.bootstrap_servers, "--command-config", str(properties))
    page = browser_page
    notes: dict[str, str] = {}
    for path in ("", "topics", f"topics/{TOPIC}", f"topics/{TOPIC}/messages", "groups", f"groups/{GROUP}",
                 "reassignments", "transactions", "security", "quorum", "brokers/1"):
        response = page.goto(console.url + path)
        assert response is not None and response.status == 200, (path, page.content())
        notes[path] = " ".join(page.locator(".panel-note").all_inner_texts())
        screenshot(page, f"describe-only-{path.replace('/', '-') or 'overview'}")
    assert page.kfk_errors == []
    # The topic page shows partitions and offsets (DESCRIBE suffices) and says why its configs are missing.
    page.goto(console.url + f"topics/{TOPIC}")
    assert page.locator("#partitions tbody tr").count() == 1
    assert "Configs not shown" in notes[f"topics/{TOPIC}"]
    assert "DESCRIBE_CONFIGS" in notes[f"topics/{TOPIC}"]
    assert "Configs not shown" in notes["brokers/1"] and "DESCRIBE_CONFIGS on the cluster" in notes["brokers/1"]
    # Reading records needs READ: the browser says so, the page is still there.
    assert "Records not shown" in notes[f"topics/{TOPIC}/messages"] and "READ" in notes[f"topics/{TOPIC}/messages"]
    # The group page: its committed offset and lag (DESCRIBE on the group and topic suffice).
    page.goto(console.url + f"groups/{GROUP}")
    assert page.locator("#total-lag").inner_text() == "4"


def test_operators_log_in_with_their_own_kafka_credentials(secured_broker, console_factory, tmp_path) -> None:
    """`kfk ui --auth sasl`: no shared principal; each operator's Basic login is their SASL/PLAIN user, so alice (who
    may describe only `alice-visible`) sees that topic and not `alice-hidden`, and is refused a topic creation
    that admin (a super user) then makes through the same console; with SCRAM-SHA-256, dave sees the other one."""
    from confluent_kafka.admin import NewTopic

    for future in admin(secured_broker).create_topics([NewTopic(name, 1, 1)
                                                       for name in ("alice-visible", "alice-hidden")]).values():
        future.result(30)
    bindings = [AclBinding(kind, name, ResourcePatternType.LITERAL, "User:alice", "*", AclOperation.DESCRIBE,
                           AclPermissionType.ALLOW)
                for kind, name in ((ResourceType.TOPIC, "alice-visible"), (ResourceType.BROKER, "kafka-cluster"))]
    for future in admin(secured_broker).create_acls(bindings).values():
        future.result(10)
    properties = tmp_path / "sasl.properties"
    properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n")
    console = console_factory(secured_broker.bootstrap_servers, "--auth", "sasl", "--command-config",
                              str(properties))

    assert ConsoleSession(console.url).get("")[0] == 401
    status, body = ConsoleSession(console.url, login=("alice", "not-her-password")).get("topics")
    assert status == 401 and "the cluster refused alice's credentials" in body

    alice = ConsoleSession(console.url, login=("alice", PASSWORDS["alice"]))
    status, body = alice.get("topics")
    assert status == 200 and 'id="user">alice<' in body
    assert "alice-visible" in body and "alice-hidden" not in body
    status, body = alice.get("topics/alice-hidden")
    assert status in (400, 403, 404) and "alice-hidden" in body  # the error page: Kafka refused or hid it
    status, _, body = alice.post("topics", {"name": "made-by-alice", "partitions": "1"})
    assert status == 400 and "authorization failed" in body.lower()

    operator = ConsoleSession(console.url, login=("admin", PASSWORDS["admin"]))
    status, body = operator.get("topics")
    assert status == 200 and "alice-visible" in body and "alice-hidden" in body
    status, location, _ = operator.post("topics", {"name": "made-by-admin", "partitions": "1"})
    assert status == 303 and location.startswith("/topics/made-by-admin")

    status, body = alice.get("logout")
    assert status == 401 and "Logged out alice" in body
    assert alice.get("topics")[0] == 200  # logging in again makes a new client

    # SCRAM: dave has SCRAM credentials only, and may describe alice-hidden alone.
    with KfkAdmin(config(secured_broker, "admin")) as kfk_admin:
        assert kfk_admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
            "dave", "SCRAM-SHA-256", 4096, "dave-secret")]) == {"dave": None}
    for future in admin(secured_broker).create_acls([AclBinding(
            ResourceType.TOPIC, "alice-hidden", ResourcePatternType.LITERAL, "User:dave", "*", AclOperation.DESCRIBE,
            AclPermissionType.ALLOW)]).values():
        future.result(10)
    scram = tmp_path / "scram.properties"
    scram.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n")
    scram_console = console_factory(secured_broker.bootstrap_servers, "--auth", "sasl", "--command-config",
                                    str(scram))
    status, body = ConsoleSession(scram_console.url, login=("dave", "dave-secret")).get("topics")
    assert status == 200 and "alice-hidden" in body and "alice-visible" not in body
    assert ConsoleSession(scram_console.url, login=("dave", "wrong")).get("topics")[0] == 401


def test_operator_clients_are_bounded_and_expire(secured_broker) -> None:
    """The --auth sasl clients on their own, against the SASL broker: a refused password makes no client, a full
    console refuses a further operator (never evicting one), an idle client is closed and made again on return."""
    from kfk.errors import SaslAuthenticationError
    from kfk.ui.operator_sessions import OperatorClients

    operators = OperatorClients({"bootstrap.servers": secured_broker.bootstrap_servers,
                                 "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN"}, max_sessions=1)
    try:
        with pytest.raises(SaslAuthenticationError):
            operators.view_for("bob", "not-his-password")
        assert operators.open_count() == 0
        bob = operators.view_for("bob", PASSWORDS["bob"])
        assert operators.view_for("bob", PASSWORDS["bob"]) is bob
        with pytest.raises(OverflowError, match="1 operators are logged in already"):
            operators.view_for("carol", PASSWORDS["carol"])
        operators.idle_timeout_s = 0
        carol = operators.view_for("carol", PASSWORDS["carol"])  # bob's idle client went first
        assert operators.open_count() == 1 and carol.admin.describe_cluster().brokers
        assert operators.log_out("carol", PASSWORDS["carol"]) and operators.open_count() == 0
    finally:
        operators.close()
