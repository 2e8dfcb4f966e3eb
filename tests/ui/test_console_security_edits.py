"""The security page's edits, over HTTP against a SASL broker with StandardAuthorizer (the console logs in to Kafka
as the super user admin; the operator logs in to the console as ops): an ACL created through the console is one
kfk's Admin and kafka-acls.sh list, and is gone after its delete; a SCRAM user created through the console
authenticates a real librdkafka client; a quota set through the console is the one DescribeClientQuotas reads, and
those of user+client-id pairs and ips (defaults included) are the ones kafka-configs.sh describes. Every
edit is refused without the session's CSRF token, logged with the operator's name, and a refused form comes back
with what was typed in it."""

from __future__ import annotations

import base64
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


def _kafka_configs_describe(secured_broker, tmp_path, *entity: str) -> str:
    """kafka-configs.sh --describe of quota entities, logged in to the kfk broker as admin."""
    properties = tmp_path / "kafka-configs-admin.properties"
    properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                          "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                          'username="admin" password="admin-secret";\n')
    described = run_kafka_tool("configs", ["--bootstrap-server", secured_broker.bootstrap_servers, "--command-config",
                                           str(properties), "--describe", *entity], timeout=120)
    assert described.returncode == 0, described.stderr
    return described.stdout


def test_user_client_id_and_ip_quotas_through_the_console(console, secured_broker, kfk_admin, browser_page,
                                                          tmp_path) -> None:
    """Quotas of a user+client-id pair, of the pair of defaults, of the default ip and of one ip: set over HTTP and
    from the browser's form, read back by kafka-configs.sh, removed from their rows."""
    ops = ConsoleSession(console.url, login=("ops", "console-secret"))
    for fields in ({"entity_type": "user+client-id", "entity_name": "", "client_id": "", "consumer_byte_rate": "4096"},
                   {"entity_type": "ip", "entity_name": "", "connection_creation_rate": "50"},
                   {"entity_type": "ip", "entity_name": "10.1.2.3", "connection_creation_rate": "5"}):
        status, location, _ = ops.post("security/set-quotas", fields)
        assert status == 303 and "notice=set+" in location, location
    # The broker's refusal of a key an ip does not take, on the page with the form as typed.
    status, _, body = ops.post("security/set-quotas", {"entity_type": "ip", "entity_name": "10.1.2.4",
                                                       "producer_byte_rate": "1024"})
    assert status == 400 and "Invalid configuration key producer_byte_rate" in body and 'value="10.1.2.4"' in body

    page = browser_page
    page.set_extra_http_headers({"Authorization": "Basic " + base64.b64encode(b"ops:console-secret").decode()})
    page.goto(console.url + "security")
    page.click("summary:has-text('Set client quotas')")
    page.select_option("#set-quotas select[name=entity_type]", "user+client-id")
    page.fill("#set-quotas input[name=entity_name]", "erin")
    page.fill("#set-quotas input[name=client_id]", "batch")
    page.fill("#set-quotas input[name=producer_byte_rate]", "2048")
    page.click("#set-quotas button[type=submit]")
    page.wait_for_url(lambda url: "notice=" in url)
    assert page.locator(".notice").inner_text() == "set producer_byte_rate=2048 of client-id=batch, user=erin"
    rows = [row.split("\t")[:2] for row in page.locator("#quotas tbody tr").all_inner_texts()]
    assert rows == [["client-id=<default>, user=<default>", "consumer_byte_rate=4096.0"],
                    ["client-id=batch, user=erin", "producer_byte_rate=2048.0"],
                    ["ip=<default>", "connection_creation_rate=50.0"],
                    ["ip=10.1.2.3", "connection_creation_rate=5.0"]], rows

    pairs = _kafka_configs_describe(secured_broker, tmp_path, "--entity-type", "users", "--entity-type", "clients")
    ips = _kafka_configs_describe(secured_broker, tmp_path, "--entity-type", "ips")
    assert sorted(pairs.splitlines()) == [
        "Quota configs for the default user-principal, the default client-id are consumer_byte_rate=4096.0",
        "Quota configs for user-principal 'erin', client-id 'batch' are producer_byte_rate=2048.0"], pairs
    assert sorted(line.strip() for line in ips.splitlines()) == [
        "Quota configs for ip '10.1.2.3' are connection_creation_rate=5.0",
        "Quota configs for the default ip are connection_creation_rate=50.0"], ips

    # The remove button of the pair's row (its confirm accepted) removes the pair's quotas only.
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#quotas tbody tr", has_text="user=erin").locator("button").click()
    page.wait_for_url(lambda url: "notice=removed" in url)
    assert ClientQuotaEntity.of([("user", "erin"), ("client-id", "batch")]) not in kfk_admin.describe_client_quotas()
    assert kfk_admin.describe_client_quotas()[ClientQuotaEntity.of([("ip", "10.1.2.3")])] == {
        "connection_creation_rate": 5.0}
    assert page.kfk_errors == []
