"""The kfk tools against a SASL broker, as a subprocess: `--command-config` files with confluent-kafka style
(sasl.username / sasl.password) and Java style (sasl.jaas.config) credentials, `kfk configs --entity-type users`
setting, describing and deleting SCRAM credentials (kafka-configs.sh's flags and lines), and a refused login as one
line on stderr, never a traceback; so is a tool without SASL settings, which is told to set security.protocol."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kfk.testing.broker import start_broker

from tests.security.test_sasl_clients import sasl_overrides

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    process = start_broker(tmp_path_factory.mktemp("sasl-tools"), sasl_overrides(), listener_name="SASL_PLAINTEXT")
    yield process
    process.stop()


def kfk(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kfk", *args], input=stdin, capture_output=True, text=True,
                          timeout=120)


def properties(path: Path, **settings: str) -> str:
    path.write_text("".join(f"{key}={value}\n" for key, value in settings.items()))
    return str(path)


def sasl_properties(path: Path, mechanism: str, user: str, password: str, java_style: bool = False) -> str:
    if java_style:
        module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
        credentials = {"sasl.jaas.config": f'org.apache.kafka.common.security.{module} required '
                                           f'username="{user}" password="{password}";'}
    else:
        credentials = {"sasl.username": user, "sasl.password": password}
    return properties(path, **{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism, **credentials})


def test_tools_with_sasl_properties_files(broker, tmp_path: Path) -> None:
    topic = f"sasl-cli-{uuid.uuid4().hex[:8]}"
    server = broker.bootstrap_servers
    admin = sasl_properties(tmp_path / "admin.properties", "PLAIN", "admin", "admin-secret")
    java = sasl_properties(tmp_path / "java.properties", "PLAIN", "alice", "alice-secret", java_style=True)
    created = kfk("topics", "--create", "--topic", topic, "--bootstrap-server", server, "--command-config", admin)
    assert created.returncode == 0, created.stderr
    produced = kfk("console-produce", "--topic", topic, "--bootstrap-server", server, "--producer-config", java,
                   stdin="a\nb\n")
    assert produced.returncode == 0, produced.stderr
    consumed = kfk("console-consume", "--topic", topic, "--from-beginning", "--max-messages", "2",
                   "--bootstrap-server", server, "--consumer-config", java, "--timeout-ms", "20000")
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == ["a", "b"]
    wrong = sasl_properties(tmp_path / "wrong.properties", "PLAIN", "alice", "nope")
    refused = kfk("topics", "--list", "--bootstrap-server", server, "--command-config", wrong)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines()[-1].endswith("Authentication failed: Invalid username or password")
    unknown = properties(tmp_path / "gssapi.properties", **{"security.protocol": "SASL_PLAINTEXT"})
    gssapi = kfk("topics", "--list", "--bootstrap-server", server, "--command-config", unknown)
    assert gssapi.returncode != 0 and "Traceback" not in gssapi.stderr
    assert "GSSAPI is not one kfk implements" in gssapi.stderr


def test_a_plaintext_tool_on_a_sasl_listener_is_told_to_set_security_protocol(broker) -> None:
    """The broker answers ApiVersions, then closes the connection on the Metadata request that needs a login: one
    line at once that names security.protocol and --command-config, not a minute of retries then "closed the
    connection"."""
    refused = kfk("topics", "--list", "--bootstrap-server", broker.bootstrap_servers)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert line == (f"kfk: cannot connect to any bootstrap server ({broker.bootstrap_servers}): "
                    f"{broker.bootstrap_servers} closed the connection before answering anything but ApiVersions: if "
                    f"its listener's security protocol is SSL, SASL_PLAINTEXT or SASL_SSL, set that security.protocol "
                    f"(this client uses PLAINTEXT) with its ssl.* or sasl.* settings in the client's config (kfk's "
                    f"tools: --command-config FILE)")


def test_configs_manages_scram_credentials(broker, tmp_path: Path) -> None:
    server = broker.bootstrap_servers
    admin = sasl_properties(tmp_path / "admin.properties", "PLAIN", "admin", "admin-secret")
    common = ["--bootstrap-server", server, "--command-config", admin]
    added = kfk("configs", "--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
                "SCRAM-SHA-256=[iterations=8192,password=bob-secret],SCRAM-SHA-512=[password=bob-secret]", *common)
    assert added.returncode == 0, added.stderr
    assert added.stdout.strip() == "Completed updating config for user bob."
    described = kfk("configs", "--describe", "--entity-type", "users", "--entity-name", "bob", *common)
    assert described.stdout.strip() == ("SCRAM credential configs for user-principal 'bob' are "
                                        "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096")
    scram = sasl_properties(tmp_path / "bob.properties", "SCRAM-SHA-512", "bob", "bob-secret", java_style=True)
    listed = kfk("topics", "--list", "--bootstrap-server", server, "--command-config", scram)
    assert listed.returncode == 0, listed.stderr
    deleted = kfk("configs", "--alter", "--entity-type", "users", "--entity-name", "bob", "--delete-config",
                  "SCRAM-SHA-512", *common)
    assert deleted.returncode == 0, deleted.stderr
    refused = kfk("topics", "--list", "--bootstrap-server", server, "--command-config", scram)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in refused.stderr
    few = kfk("configs", "--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
              "SCRAM-SHA-256=[iterations=10,password=x]", *common)
    assert few.returncode != 0 and "Too few iterations" in few.stderr and "Traceback" not in few.stderr
    # A user's quotas beside its credentials: one --alter sets both, --describe prints both (kafka-configs.sh's way).
    both = kfk("configs", "--alter", "--entity-type", "users", "--entity-name", "bob", "--add-config",
               "producer_byte_rate=1024,SCRAM-SHA-512=[password=bob-secret]", *common)
    assert both.returncode == 0 and both.stdout == "Completed updating config for user bob.\n", both.stderr
    described = kfk("configs", "--describe", "--entity-type", "users", "--entity-name", "bob", *common)
    assert described.stdout == ("Quota configs for user-principal 'bob' are producer_byte_rate=1024.0\n"
                                "SCRAM credential configs for user-principal 'bob' are "
                                "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n")


@pytest.mark.parametrize(("overrides", "message"), [
    ({}, "listener SASL_PLAINTEXT: sasl.enabled.mechanisms GSSAPI names a mechanism kfk does not implement"),
    ({"sasl.enabled.mechanisms": "PLAIN"}, "listener SASL_PLAINTEXT enables PLAIN but has no JAAS config"),
    ({"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": "PlainLoginModule user_a=b;"},
     "control flag not specified"),
    ({"sasl.enabled.mechanisms": "PLAIN", "sasl.jaas.config": 'x.PlainLoginModule required user_a="b";'},
     "the inter-broker listener SASL_PLAINTEXT uses SASL (sasl.mechanism.inter.broker.protocol=GSSAPI): SASL "
     "mechanism GSSAPI is not one kfk implements"),
])
def test_a_sasl_listener_misconfigured_is_one_line(tmp_path: Path, overrides: dict[str, str], message: str) -> None:
    started = kfk("server", "start", "--override", f"log.dirs={tmp_path}",
                  "--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0",
                  *[arg for key, value in overrides.items() for arg in ("--override", f"{key}={value}")])
    assert started.returncode != 0 and "Traceback" not in started.stderr
    assert message in started.stderr
