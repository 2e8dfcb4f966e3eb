"""Certificates for TLS tests and benchmarks, made fresh with the `cryptography` package (a test dependency, never
imported by kfk itself) so that no key is ever committed: a CA, the brokers' certificate (for 127.0.0.1 and
localhost), a client certificate the CA signed, one of another CA that no broker trusts, and one for another host
name. Each is written as PEM: key and chain in one file (a PEM key store) and apart (for librdkafka's
ssl.key.location / ssl.certificate.location)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

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
    attributes = [x509.NameAttribute(NameOID.COUNTRY_NAME, "DE"),
                  x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kfk-test")]
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


def make_certificates(directory: Path) -> Certificates:
    """Make the CA and certificates and write them under `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
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
