"""Delegation tokens under StandardAuthorizer, on one broker: a token for another user needs CreateTokens on that
user; DescribeDelegationToken shows a token to its owner, requester and renewers, and to whoever may Describe the
token or DescribeTokens of its owner; a client that logs in with a token acts as the token's owner (its ACLs)."""

from __future__ import annotations

import base64
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kfk.client import Admin, NewTopic
from kfk.errors import DelegationTokenAuthorizationError
from kfk.security.acl import AccessControlEntry, AclBinding, AclOperation, AclPermissionType, PatternType, \
    ResourcePattern, ResourceType
from kfk.security.principal import KafkaPrincipal
from kfk.testing.broker import BrokerProcess, start_broker

from tests.cluster.helpers import wait_until
from tests.integration.test_acls_confluent import authorizer_overrides

pytestmark = pytest.mark.integration

USERS = ("admin", "alice", "bob", "carol", "dave", "eve")
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" ' + " ".join(f'user_{u}="{u}-secret"' for u in USERS) + ";")
CAROL = KafkaPrincipal("User", "carol")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    overrides = authorizer_overrides(PLAIN_JAAS, "PLAIN,SCRAM-SHA-256",
                                     **{"delegation.token.secret.key": "acl-test-secret"})
    process = start_broker(tmp_path_factory.mktemp("token-acls"), overrides, listener_name="SASL_PLAINTEXT")
    yield process
    process.stop()


def admin(broker: BrokerProcess, user: str) -> Admin:
    return Admin({"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": f"{user}-secret"})


def allow(broker: BrokerProcess, user: str, operation: AclOperation, resource_type: ResourceType, name: str) -> None:
    binding = AclBinding(ResourcePattern(resource_type, name, PatternType.LITERAL),
                         AccessControlEntry(f"User:{user}", "*", operation, AclPermissionType.ALLOW))
    with admin(broker, "admin") as super_user:
        assert super_user.create_acls([binding]) == {binding: None}


def visible(broker: BrokerProcess, user: str) -> list[str]:
    with admin(broker, user) as client:
        return [token.token_id for token in client.describe_delegation_token([CAROL])]


def test_tokens_for_others_and_who_sees_them(broker: BrokerProcess, tmp_path: Path) -> None:
    with admin(broker, "alice") as alice:
        with pytest.raises(DelegationTokenAuthorizationError):
            alice.create_delegation_token(owner=CAROL)
    # kafka-acls.sh's --user-principal names a user as the resource.
    admin_properties = tmp_path / "admin.properties"
    admin_properties.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=admin\n"
                                "sasl.password=admin-secret\n")
    granted = subprocess.run([sys.executable, "-m", "kfk", "acls", "--bootstrap-server", broker.bootstrap_servers,
                              "--command-config", str(admin_properties), "--add", "--allow-principal", "User:alice",
                              "--operation", "CreateTokens", "--user-principal", "User:carol"],
                             capture_output=True, text=True, timeout=60)
    assert granted.returncode == 0, granted.stderr
    with admin(broker, "alice") as alice:
        token = alice.create_delegation_token(owner=CAROL, renewers=[KafkaPrincipal("User", "bob")])
    assert (token.owner, token.token_requester) == (CAROL, KafkaPrincipal("User", "alice"))
    for user in ("alice", "bob", "carol"):  # requester, renewer, owner
        assert visible(broker, user) == [token.token_id], user
    assert visible(broker, "dave") == visible(broker, "eve") == []
    allow(broker, "dave", AclOperation.DESCRIBE_TOKENS, ResourceType.USER, "User:carol")
    allow(broker, "eve", AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token.token_id)
    wait_until(lambda: visible(broker, "dave") == visible(broker, "eve") == [token.token_id], 10,
               what="the ACLs in the broker's authorizer")

    # Logged in with the token, the client is carol: it sees the topic only carol may describe.
    topic = "carol-only"
    with admin(broker, "admin") as super_user:
        assert super_user.create_topics([NewTopic(topic, 1, 1)]) == {topic: None}
    allow(broker, "carol", AclOperation.DESCRIBE, ResourceType.TOPIC, topic)
    by_token = Admin({
        "bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": f'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            f'username="{token.token_id}" password="{base64.b64encode(token.hmac).decode()}" '
                            f'tokenauth="true";'})
    with by_token:
        assert topic in by_token.list_topics()
    with admin(broker, "alice") as alice:
        assert topic not in alice.list_topics()
