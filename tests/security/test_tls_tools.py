"""kfk's own client library and tools over TLS: Producer, Consumer and Admin with security.protocol=SSL (with and
without a client certificate), and the CLI with its client properties file (`--command-config`, the console tools'
`--producer-config` / `--consumer-config`), against conftest's tls_broker."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kfk.client import Admin, Consumer, NewTopic, Producer
from kfk.errors import InvalidConfigurationError, KafkaError

from .conftest import CLIENT_DN, Certificates, tls_address


def _ssl_config(certificates: Certificates, with_certificate: bool) -> dict[str, str]:
    config = {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
              "ssl.truststore.location": str(certificates.ca)}
    if with_certificate:
        config.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certificates.client.pem)})
    return config


def _properties(path: Path, config: dict[str, str]) -> Path:
    path.write_text("".join(f"{key}={value}\n" for key, value in config.items()))
    return path


def _kfk(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kfk", *args], input=stdin, capture_output=True, text=True,
                          timeout=120)


def test_kfk_s_client_library_over_tls(tls_broker, certificates) -> None:
    topic = f"tls-kfk-{uuid.uuid4().hex[:8]}"
    anonymous = {"bootstrap.servers": tls_address(tls_broker, "SSL"), **_ssl_config(certificates, False)}
    with Admin(anonymous) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
    with Producer(anonymous) as producer:
        for index in range(50):
            producer.send(topic, value=f"v{index}".encode())
        producer.flush()
    authenticated = {"bootstrap.servers": tls_address(tls_broker, "MTLS"), **_ssl_config(certificates, True)}
    with Consumer({**authenticated, "group.id": "tls-kfk", "auto.offset.reset": "earliest"}) as consumer:
        consumer.subscribe([topic])
        values: list[bytes] = []
        for _ in range(60):
            values += [record.value for record in consumer.poll(500)]
            if len(values) >= 50:
                break
    assert values == [f"v{index}".encode() for index in range(50)]  # fetched over TLS: read from the file, not sendfile
    assert f"on MTLS (TLSv1.3): principal User:{CLIENT_DN}" in tls_broker.output()


def test_kfk_s_client_checks_the_broker_s_certificate_and_host_name(tls_broker, certificates) -> None:
    stranger = {"bootstrap.servers": tls_address(tls_broker, "SSL"), "security.protocol": "SSL",
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certificates.stranger.certificate),
                "default.api.timeout.ms": 2000, "request.timeout.ms": 1000}
    with pytest.raises(KafkaError, match="TLS handshake with .* failed: .*certificate"), Admin(stranger) as admin:
        admin.describe_cluster()


def test_kfk_s_client_checks_the_host_name_unless_told_not_to(certificates) -> None:
    """A TLS server (the CA trusted) whose certificate names elsewhere.invalid only: the handshake fails on the host
    name with ssl.endpoint.identification.algorithm=https (the default) and passes with it empty (the ApiVersions
    that follows finds no Kafka broker: the server closes)."""
    import asyncio
    import ssl

    from kfk.client.config import ADMIN_CONFIG_DEF, ClientConfig
    from kfk.client.network_client import NetworkClient

    async def run() -> tuple[str, str]:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(certificates.elsewhere.pem))
        server = await asyncio.start_server(lambda reader, writer: writer.close(), "127.0.0.1", 0, ssl=context)
        port = server.sockets[0].getsockname()[1]
        outcomes = []
        for check in ("https", ""):
            client = NetworkClient(ClientConfig(ADMIN_CONFIG_DEF, "admin", {
                "bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SSL", "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(certificates.ca), "ssl.endpoint.identification.algorithm": check,
                "socket.connection.setup.timeout.ms": 10_000}))
            with pytest.raises(KafkaError) as failure:
                await client.connect(-1)
            outcomes.append(str(failure.value))
        server.close()
        return outcomes[0], outcomes[1]

    checked, unchecked = asyncio.run(run())
    assert "TLS handshake" in checked and "IP address mismatch" in checked
    assert "TLS handshake" not in unchecked and "closed the connection" in unchecked  # passed, then closed


def test_a_jks_store_is_refused_with_a_message_naming_pem(certificates) -> None:
    with pytest.raises(InvalidConfigurationError, match="ssl.truststore.type=JKS is not supported by kfk: use PEM"):
        Admin({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SSL", "ssl.truststore.type": "JKS",
               "ssl.truststore.location": str(certificates.ca)})


def test_the_tools_take_ssl_settings_from_their_properties_file(tls_broker, certificates, tmp_path) -> None:
    topic = f"tls-cli-{uuid.uuid4().hex[:8]}"
    anonymous = str(_properties(tmp_path / "client.properties", _ssl_config(certificates, False)))
    authenticated = str(_properties(tmp_path / "mtls.properties", _ssl_config(certificates, True)))
    ssl_server, mtls_server = tls_address(tls_broker, "SSL"), tls_address(tls_broker, "MTLS")
    created = _kfk("topics", "--create", "--topic", topic, "--partitions", "2", "--bootstrap-server", ssl_server,
                   "--command-config", anonymous)
    assert created.returncode == 0, created.stderr
    listed = _kfk("topics", "--list", "--bootstrap-server", mtls_server, "--command-config", authenticated)
    assert listed.returncode == 0, listed.stderr
    assert topic in listed.stdout.split()
    produced = _kfk("console-produce", "--topic", topic, "--bootstrap-server", mtls_server,
                    "--producer-config", authenticated, stdin="a\nb\nc\n")
    assert produced.returncode == 0, produced.stderr
    consumed = _kfk("console-consume", "--topic", topic, "--from-beginning", "--max-messages", "3",
                    "--bootstrap-server", ssl_server, "--consumer-config", anonymous, "--timeout-ms", "20000")
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.split()) == ["a", "b", "c"]
    # Without the client certificate the MTLS listener refuses the tool: one line, no traceback.
    refused = _kfk("topics", "--list", "--bootstrap-server", mtls_server, "--command-config", anonymous)
    assert refused.returncode != 0
    assert "Traceback" not in refused.stderr and refused.stderr.strip()


def test_a_plaintext_tool_on_a_tls_listener_is_told_to_set_security_protocol(tls_broker) -> None:
    """The TLS handshake fails on the ApiVersions bytes and the broker closes: one line that names
    security.protocol and --command-config, not just "closed the connection"."""
    refused = _kfk("topics", "--list", "--bootstrap-server", tls_address(tls_broker, "SSL"))
    assert refused.returncode == 1 and "Traceback" not in refused.stderr
    (line,) = refused.stderr.strip().splitlines()
    assert "before answering anything but ApiVersions: if its listener's security protocol is SSL, SASL_PLAINTEXT " \
           "or SASL_SSL, set that security.protocol (this client uses PLAINTEXT)" in line
    assert "--command-config" in line
