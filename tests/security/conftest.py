"""Certificates for the TLS tests, made fresh per session with the `cryptography` package (never committed): a CA,
the brokers' certificate (for 127.0.0.1 and localhost, signed by the CA), a client certificate the CA signed, and a
client certificate of another CA that no broker trusts."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kfk.testing.broker import BrokerProcess

KEY_PASSWORD = "key-secret"
CLIENT_DN = "CN=alice,OU=eng,O=kfk-test,C=DE"


@dataclass(frozen=True)
class Identity:
    """One key and certificate: `pem` holds both (a PEM key store), `key` and `certificate` each alone."""

    pem: Path
    key: Path
    certificate: Path


@dataclass(frozen=True)
class Certificates:
    ca: Path  # the trust store: the CA's certificate
    broker: Identity
    broker_encrypted: Identity  # the same key encrypted with KEY_PASSWORD
    client: Identity  # subject CLIENT_DN, signed by the CA
    stranger: Identity  # signed by a CA nobody trusts
    elsewhere: Identity  # signed by the CA for the host name elsewhere.invalid only

    def broker_overrides(self, client_auth: str = "none", prefix: str = "") -> dict[str, str]:
        """A broker's ssl.* settings for a PEM key store and trust store."""
        return {f"{prefix}ssl.keystore.type": "PEM", f"{prefix}ssl.keystore.location": str(self.broker.pem),
                f"{prefix}ssl.truststore.type": "PEM", f"{prefix}ssl.truststore.location": str(self.ca),
                f"{prefix}ssl.client.auth": client_auth}


def _name(common_name: str, unit: str | None = None) -> x509.Name:
    attributes = [x509.NameAttribute(NameOID.COUNTRY_NAME, "DE"), x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kfk-test")]
    if unit:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, unit))
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(attributes)


def _certificate(subject: x509.Name, key, issuer: x509.Name, issuer_key, *, ca: bool = False,
                 hosts: list[str] | None = None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=2))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if hosts:
        import ipaddress

        names: list[x509.GeneralName] = []
        for host in hosts:
            try:
                names.append(x509.IPAddress(ipaddress.ip_address(host)))
            except ValueError:
                names.append(x509.DNSName(host))
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(directory: Path, name: str, key, certificate: x509.Certificate, chain: list[x509.Certificate],
           password: str | None = None) -> Identity:
    encryption = (serialization.BestAvailableEncryption(password.encode()) if password
                  else serialization.NoEncryption())
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    certificates = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [certificate, *chain])
    paths = Identity(directory / f"{name}.pem", directory / f"{name}.key", directory / f"{name}.crt")
    paths.pem.write_bytes(key_pem + certificates)
    paths.key.write_bytes(key_pem)
    paths.certificate.write_bytes(certificates)
    return paths


@pytest.fixture(scope="session")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    directory = tmp_path_factory.mktemp("tls")
    ca_key, stranger_ca_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name, stranger_ca_name = _name("kfk test CA"), _name("someone else's CA")
    ca = _certificate(ca_name, ca_key, ca_name, ca_key, ca=True)
    stranger_ca = _certificate(stranger_ca_name, stranger_ca_key, stranger_ca_name, stranger_ca_key, ca=True)
    (directory / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    broker_key, client_key, stranger_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    broker = _certificate(_name("broker"), broker_key, ca_name, ca_key, hosts=["localhost", "127.0.0.1"])
    elsewhere = _certificate(_name("elsewhere"), broker_key, ca_name, ca_key, hosts=["elsewhere.invalid"])
    client = _certificate(_name("alice", "eng"), client_key, ca_name, ca_key)
    stranger = _certificate(_name("mallory"), stranger_key, stranger_ca_name, stranger_ca_key)
    return Certificates(
        ca=directory / "ca.pem",
        broker=_write(directory, "broker", broker_key, broker, [ca]),
        broker_encrypted=_write(directory, "broker-encrypted", broker_key, broker, [ca], KEY_PASSWORD),
        client=_write(directory, "client", client_key, client, [ca]),
        stranger=_write(directory, "stranger", stranger_key, stranger, [stranger_ca]),
        elsewhere=_write(directory, "elsewhere", broker_key, elsewhere, [ca]),
    )


@pytest.fixture(scope="package")
def tls_broker(tmp_path_factory: pytest.TempPathFactory, certificates: Certificates) -> Iterator[BrokerProcess]:
    """One broker for the TLS tests: listener SSL (ssl.client.auth=requested) and listener MTLS, an SSL listener too
    (listener.security.protocol.map) whose listener.name.mtls.ssl.client.auth=required: the per-listener prefix at
    work. It logs at DEBUG, where each TLS connection's principal shows."""
    overrides = {
        "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1", "group.initial.rebalance.delay.ms": "0",
        "listener.security.protocol.map": "SSL:SSL,MTLS:SSL",
        **certificates.broker_overrides("requested"),
        "listener.name.mtls.ssl.client.auth": "required",
    }
    directory = tmp_path_factory.mktemp("tls-broker")
    broker = BrokerProcess(log_dir=directory / "data", overrides=overrides, log_path=directory / "broker.log",
                           listener_name="SSL", extra_listeners=["MTLS://127.0.0.1:0"],
                           extra_args=["--log-level", "debug"])
    broker.start()
    yield broker
    if broker.stop() != 0:
        print(broker.output()[-20000:])


def tls_address(broker: BrokerProcess, listener: str) -> str:
    return f"127.0.0.1:{broker.ports[listener]}"
