"""Delegation tokens (KIP-48) on kfk, beside Apache Kafka 4.0.2: Kafka's kafka-delegation-tokens.sh and `kfk
delegation-tokens` print the same lines against either broker (token ids, HMACs and dates aside); a Java client and
kfk's own log in with a token over SASL/SCRAM (tokenauth=true) and then may not manage tokens; renewal and expiry
move the expiry time as Kafka's do; an expired token no longer logs in; an unauthenticated (PLAINTEXT) client is
refused token requests."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from kfk.client import Admin
from kfk.client.structs import UserScramCredentialUpsertion
from kfk.errors import SaslAuthenticationError, UnsupportedByAuthenticationError
from kfk.testing.apache_kafka import ApacheKafka
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.ports import free_port

from tests.interop.jvm import kafka_tool, unique_name
from tests.security.test_sasl_clients import PLAIN_JAAS, kfk_config, sasl_overrides

pytestmark = pytest.mark.integration

SECRET = "a-cluster-wide-secret"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required"


@dataclass
class Cluster:
    """A broker with a SASL_PLAINTEXT listener (PLAIN admin from the JAAS config, SCRAM user alice) and a PLAINTEXT
    one."""

    sasl: str
    plaintext: str


def _add_alice(bootstrap: str) -> None:
    with Admin(kfk_config(bootstrap, "PLAIN", "admin", "admin-secret")) as admin:
        assert admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("alice", "SCRAM-SHA-256", 4096, "alice-secret")]) == {"alice": None}


@pytest.fixture(scope="module")
def kfk_cluster_with_tokens(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    broker: BrokerProcess = start_broker(
        tmp_path_factory.mktemp("kfk-tokens"), sasl_overrides(**{"delegation.token.secret.key": SECRET}),
        listener_name="SASL_PLAINTEXT", extra_listeners=["PLAINTEXT://127.0.0.1:0"])
    try:
        _add_alice(broker.bootstrap_servers)
        yield Cluster(broker.bootstrap_servers, f"127.0.0.1:{broker.ports['PLAINTEXT']}")
    finally:
        broker.stop()


@pytest.fixture(scope="module")
def kafka_cluster_with_tokens(tmp_path_factory: pytest.TempPathFactory,
                              kafka_classpath_fixture: str) -> Iterator[Cluster]:
    node = ApacheKafka(tmp_path_factory.mktemp("kafka-tokens"))
    sasl_port = free_port()
    node.config.update({
        "listeners": f"PLAINTEXT://127.0.0.1:{node.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port},"
                     f"CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": f"{SCRAM_JAAS};",
        "delegation.token.secret.key": SECRET,
    })
    node.start()
    try:
        _add_alice(f"127.0.0.1:{sasl_port}")
        yield Cluster(f"127.0.0.1:{sasl_port}", node.bootstrap_server)
    finally:
        node.stop()


def _properties(path: Path, user: str, password: str, *, token: bool = False) -> str:
    tokenauth = ' tokenauth="true"' if token else ""
    path.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                    f'sasl.jaas.config={SCRAM_JAAS} username="{user}" password="{password}"{tokenauth};\n')
    return str(path)


def _tool(which: str, cluster: Cluster, args: list[str], *, ok: bool = True) -> subprocess.CompletedProcess:
    """kafka-delegation-tokens.sh (which="kafka") or `kfk delegation-tokens` (which="kfk")."""
    full = ["--bootstrap-server", cluster.sasl, *args]
    if which == "kafka":
        return kafka_tool("delegation-tokens", full, ok=ok)
    result = subprocess.run([sys.executable, "-m", "kfk", "delegation-tokens", *full], capture_output=True,
                            text=True, timeout=120)
    if ok:
        assert result.returncode == 0, result.stdout + result.stderr
    return result


_DATE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


def _masked(text: str, tokens: dict[str, str]) -> list[str]:
    """The tool's lines with dates, and the token ids and HMACs of `tokens` (id -> hmac), replaced by names; column
    padding kept (so widths are compared too: ids and HMACs are longer than their columns either way)."""
    for index, (token_id, hmac) in enumerate(tokens.items()):
        text = text.replace(token_id, f"<id{index}>").replace(hmac, f"<hmac{index}>")
    return _DATE.sub("<date>", text).split("\n")


def _created(output: str) -> tuple[str, str]:
    """The token id and HMAC --create printed."""
    row = output.strip().split("\n")[-1].split()
    return row[0], row[1]


def _walk(which: str, cluster: Cluster, tmp_path: Path) -> list[str]:
    """Create a token as alice, use it, describe, renew, expire: every line the tool printed, masked."""
    alice = _properties(tmp_path / f"alice-{which}.properties", "alice", "alice-secret")
    created = _tool(which, cluster, ["--command-config", alice, "--create", "--max-life-time-period", "-1",
                                     "--renewer-principal", "User:bob"]).stdout
    token_id, hmac = _created(created)
    assert base64.b64decode(hmac)  # the HMAC is printed in base64
    token = _properties(tmp_path / f"token-{which}.properties", token_id, hmac, token=True)
    # Java logs in with the token; it is then refused token requests.
    topic = unique_name("token-topic")
    kafka_tool("topics", ["--bootstrap-server", cluster.sasl, "--command-config", token, "--create", "--topic", topic,
                          "--partitions", "1"])
    refused = _tool(which, cluster, ["--command-config", token, "--describe"], ok=False)
    assert refused.returncode != 0
    assert "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token " \
           "authenticated channels" in refused.stdout + refused.stderr
    described = _tool(which, cluster, ["--command-config", alice, "--describe", "--owner-principal",
                                       "User:alice"]).stdout
    everyone = _tool(which, cluster, ["--command-config", alice, "--describe"]).stdout
    renewed = _tool(which, cluster, ["--command-config", alice, "--renew", "--hmac", hmac, "--renew-time-period",
                                     "3600000"]).stdout
    expired = _tool(which, cluster, ["--command-config", alice, "--expire", "--hmac", hmac, "--expiry-time-period",
                                     "-1"]).stdout
    after = _tool(which, cluster, ["--command-config", alice, "--describe", "--owner-principal", "User:alice"]).stdout
    plaintext = tmp_path / f"plaintext-{which}.properties"
    plaintext.write_text("security.protocol=PLAINTEXT\n")
    unauthenticated = _tool(which, Cluster(cluster.plaintext, cluster.plaintext),
                            ["--command-config", str(plaintext), "--create", "--max-life-time-period", "-1"], ok=False)
    assert unauthenticated.returncode != 0
    masked = {token_id: hmac}
    return [*_masked(created, masked), *_masked(described, masked), *_masked(everyone, masked),
            *_masked(renewed, masked), *_masked(expired, masked), *_masked(after, masked),
            str("Delegation Token requests are not allowed" in unauthenticated.stdout + unauthenticated.stderr)]


def test_kafka_tool_prints_the_same_on_kfk_and_kafka(kfk_cluster_with_tokens: Cluster,
                                                      kafka_cluster_with_tokens: Cluster, tmp_path: Path) -> None:
    on_kafka = _walk("kafka", kafka_cluster_with_tokens, tmp_path)
    assert _walk("kafka", kfk_cluster_with_tokens, tmp_path) == on_kafka
    assert _walk("kfk", kfk_cluster_with_tokens, tmp_path) == on_kafka


def test_kfk_client_logs_in_with_a_token_until_it_expires(kfk_cluster_with_tokens: Cluster) -> None:
    from kfk.client import Consumer, Producer
    from kfk.security.principal import KafkaPrincipal

    with Admin(kfk_config(kfk_cluster_with_tokens.sasl, "SCRAM-SHA-256", "alice", "alice-secret")) as alice:
        token = alice.create_delegation_token(renewers=[KafkaPrincipal("User", "bob")], max_lifetime_ms=600_000)
        assert token.owner == token.token_requester == KafkaPrincipal("User", "alice")
        assert token.max_timestamp_ms - token.issue_timestamp_ms == 600_000  # below the broker's 7 days
        assert token.expiry_timestamp_ms == token.max_timestamp_ms  # the 1 day default is capped by the maximum
        assert [t.token_id for t in alice.describe_delegation_token([KafkaPrincipal("User", "alice")])] \
            == [token.token_id]
    config = {"bootstrap.servers": kfk_cluster_with_tokens.sasl, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": "SCRAM-SHA-256",
              "sasl.jaas.config": f'{SCRAM_JAAS} username="{token.token_id}" '
                                  f'password="{base64.b64encode(token.hmac).decode()}" tokenauth="true";'}
    topic = unique_name("kfk-token")
    with Producer({**config, "linger.ms": 0}) as producer:
        producer.send(topic, b"by-token").get(30)
    with Consumer({**config, "group.id": unique_name("g"), "auto.offset.reset": "earliest"}) as consumer:
        consumer.subscribe([topic])
        values = []
        for _ in range(60):
            values += [record.value for record in consumer.poll(0.5)]
            if values:
                break
        assert values == [b"by-token"]
    with Admin(config) as by_token:
        with pytest.raises(UnsupportedByAuthenticationError):
            by_token.create_delegation_token()
    with Admin(kfk_config(kfk_cluster_with_tokens.sasl, "SCRAM-SHA-256", "alice", "alice-secret")) as alice:
        assert alice.expire_delegation_token(token.hmac, expiry_time_period_ms=-1) == -1
    with pytest.raises(SaslAuthenticationError), Admin(config) as by_token:
        by_token.list_topics()
