"""The security page's edits, over HTTP against a SASL broker with StandardAuthorizer (the console logs in to Kafka
as the super user admin; the operator logs in to the console as ops): an ACL created through the console is one
kfk's Admin and kafka-acls.sh list, and is gone after its delete; a SCRAM user created through the console
authenticates a real librdkafka client; a quota set through the console is the one DescribeClientQuotas reads. Every
edit is refused without the session's CSRF token, logged with the operator's name, and a refused form comes back
with what was typed in it."""

from __future__ import annotations

import re
import time

import pytest
from confluent_kafka import KafkaError as ConfluentKafkaError
from confluent_kafka.admin import AdminClient

from kfk.client import Admin as KfkAdmin
from kfk.common.client_quotas import ClientQuotaEntity
from kfk.security.acl import AclBinding
from kfk.testing.apache_kafka import run_kafka_tool
from kfk.testing.broker import start_broker
from tests.integration.test_acls_confluent import authorizer_overrides, config
from tests.ui.conftest import ConsoleSession

pytestmark = pytest.mark.integration

ACL = {"resource_type": "TOPIC", "resource_name": "payments-", "pattern_type": "PREFIXED",
       "principal": "User:erin", "host": "*", "operation": "WRITE", "permission": "ALLOW"}


@pytest.fixture(scope="module")
def secured_broker(tmp_path_factory: pytest.TempPathFactory):
    process = start_broker(tmp_path_factory.mktemp("ui-security-edits"),
                           authorizer_overrides(mechanisms="PLAIN,SCRAM-SHA-512"), listener_name="SASL_PLAINTEXT")
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def console(secured_broker, console_factory, tmp_path):
    """A console that reaches Kafka as admin and asks its operator (ops) to log in."""
    properties = tmp_path / "admin.properties"
    properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                          "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                          'username="admin" password="admin-secret";\n')
    users = tmp_path / "users.properties"
    users.write_text("ops: console-secret\n")
    return console_factory(secured_broker.bootstrap_servers, "--command-config", str(properties),
                           "--auth", "basic", "--users-file", str(users))


@pytest.fixture
def kfk_admin(secured_broker):
    with KfkAdmin(config(secured_broker, "admin")) as admin:
        yield admin


def test_acl_created_and_deleted_through_the_console(console, secured_broker, kfk_admin, tmp_path) -> None:
    ops = ConsoleSession(console.url, login=("ops", "console-secret"))
    status, _, _ = ops.post("security/create-acl", ACL, with_token=False)
    assert status == 403 and kfk_admin.describe_acls() == []

    status, location, _ = ops.post("security/create-acl", ACL)
    assert status == 303 and "created+the+ACL" in location, location
    expected = AclBinding.of(2, "payments-", 4, "User:erin", "*", 4, 3)
    assert kfk_admin.describe_acls() == [expected]
    admin_properties = tmp_path / "kafka-admin.properties"
    admin_properties.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret";\n')
    listed = run_kafka_tool("acls", ["--bootstrap-server", secured_broker.bootstrap_servers, "--command-config",
                                     str(admin_properties), "--list"], timeout=120)
    assert listed.returncode == 0, listed.stderr
    assert ("Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=payments-, patternType=PREFIXED)`:"
            in listed.stdout), listed.stdout
    assert "(principal=User:erin, host=*, operation=WRITE, permissionType=ALLOW)" in listed.stdout

    status, body = ops.get("security")
    assert status == 200 and 'action="/security/delete-acl"' in body and "data-confirm=" in body

    # A principal Kafka cannot parse: the page again, its reason, the form open with what was typed.
    status, _, body = ops.post("security/create-acl", dict(ACL, principal="erin", resource_name="refunds"))
    assert status == 400
    assert "Could not parse principal from `erin`" in body
    assert 'value="refunds"' in body and 'value="erin"' in body

    status, location, _ = ops.post("security/delete-acl", ACL)
    assert status == 303 and "deleted+the+ACL" in location, location
    assert kfk_admin.describe_acls() == []
    log = console.stderr_path.read_text()
    cluster = re.escape(f"on the cluster at {secured_broker.bootstrap_servers}")
    assert re.search(rf"POST /security/create-acl {cluster} by ops at 127\.0\.0\.1:\d+: 303 \(notice: created the ACL ",
                     log), log
    assert re.search(rf"POST /security/delete-acl {cluster} by ops at 127\.0\.0\.1:\d+: 303 \(notice: deleted the ACL ",
                     log), log


def _authentication(secured_broker, user: str, password: str) -> str:
    """"ok" once a librdkafka client logs in with SCRAM-SHA-512 as `user` and reads metadata, else the name of
    the error librdkafka reports (it retries a refused login, so the first error decides)."""
    errors: list[ConfluentKafkaError] = []
    client = AdminClient({"bootstrap.servers": secured_broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                          "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": password,
                          "error_cb": errors.append, "log_level": 0})
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            client.list_topics(timeout=1)
            return "ok"
        except Exception:  # noqa: BLE001 - a refused login is an error_cb report plus a metadata timeout
            client.poll(0.1)  # serves error_cb
            if any(error.code() == ConfluentKafkaError._AUTHENTICATION for error in errors):
                return "_AUTHENTICATION"
    return "timed out"


def test_scram_user_created_through_the_console_logs_in(console, secured_broker, kfk_admin) -> None:
    ops = ConsoleSession(console.url, login=("ops", "console-secret"))
    status, location, _ = ops.post("security/set-user", {"user": "erin", "mechanism": "SCRAM-SHA-512",
                                                         "iterations": "8192", "password": "erin-secret"})
    assert status == 303 and "SCRAM-SHA-512+credential+of+erin" in location, location
    [credential] = kfk_admin.describe_user_scram_credentials(["erin"])["erin"]
    assert (credential.mechanism, credential.iterations) == ("SCRAM-SHA-512", 8192)
    assert _authentication(secured_broker, "erin", "erin-secret") == "ok"

    # Too few iterations: Kafka's refusal on the page, the form kept (never the password).
    status, _, body = ops.post("security/set-user", {"user": "frank", "mechanism": "SCRAM-SHA-512",
                                                     "iterations": "10", "password": "frank-secret"})
    assert status == 400 and "set user: " in body and 'value="frank"' in body and "frank-secret" not in body

    status, location, _ = ops.post("security/delete-user", {"user": "erin", "mechanism": "SCRAM-SHA-512"})
    assert status == 303 and "deleted+the+SCRAM-SHA-512+credential+of+erin" in location, location
    assert "erin" not in kfk_admin.describe_user_scram_credentials()
    assert _authentication(secured_broker, "erin", "erin-secret") == "_AUTHENTICATION"


def test_client_quotas_set_and_removed_through_the_console(console, kfk_admin) -> None:
    ops = ConsoleSession(console.url, login=("ops", "console-secret"))
    entity = ClientQuotaEntity.of([("user", "erin")])
    status, location, _ = ops.post("security/set-quotas", {
        "entity_type": "user", "entity_name": "erin", "producer_byte_rate": "1048576", "consumer_byte_rate": "",
        "request_percentage": "150"})
    assert status == 303 and "set+producer_byte_rate" in location, location
    assert kfk_admin.describe_client_quotas()[entity] == {"producer_byte_rate": 1048576.0,
                                                          "request_percentage": 150.0}
    status, _, body = ops.post("security/set-quotas", {"entity_type": "client-id", "entity_name": "batch",
                                                       "consumer_byte_rate": "fast"})
    assert status == 400 and "consumer_byte_rate must be a number, not &#39;fast&#39;" in body
    assert 'value="batch"' in body and 'value="fast"' in body

    status, _, _ = ops.post("security/set-quotas", {"entity_type": "user", "entity_name": "erin",
                                                    "remove_request_percentage": "yes"})
    assert status == 303
    assert kfk_admin.describe_client_quotas()[entity] == {"producer_byte_rate": 1048576.0}
    status, body = ops.get("security")
    assert 'action="/security/remove-quotas"' in body
    status, location, _ = ops.post("security/remove-quotas", {"entity_type": "user", "entity_name": "erin"})
    assert status == 303 and "removed+producer_byte_rate" in location, location
    assert entity not in kfk_admin.describe_client_quotas()
