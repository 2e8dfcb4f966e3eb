"""kfk.security.tls on its own: contexts built from ssl.* settings (PEM files, inline PEM, an encrypted key, the
protocol and cipher bounds, refusals that name the key), handshakes between them over real sockets, and the principal
of a certificate: Java's RFC 2253 form of its subject, mapped by ssl.principal.mapping.rules."""

from __future__ import annotations

import socket
import ssl
import threading

import pytest

from kfk.config import BrokerConfig
from kfk.errors import InvalidConfigurationError
from kfk.security.principal import ANONYMOUS, KafkaPrincipal
from kfk.security.tls import (PrincipalMapper, client_context, distinguished_name, openssl_cipher_name,
                              peer_principal, server_context)

from .conftest import CLIENT_DN, KEY_PASSWORD, Certificates


def settings_of(**values: str):
    """ssl.* settings as a broker resolves them (its types and defaults), from keyword names with _ for ."""
    config = BrokerConfig({"process.roles": "broker", "node.id": "1",
                           **{key.replace("_", "."): value for key, value in values.items()}})
    return lambda key: config.listener_override("SSL", key)


def handshake(server: ssl.SSLContext, client: ssl.SSLContext, host: str = "127.0.0.1"):
    """One TLS handshake over a real socket pair; (the server's SSLObject-like socket results, client error)."""
    listener = socket.create_server(("127.0.0.1", 0))
    result: dict = {}

    def accept() -> None:
        connection, _ = listener.accept()
        try:
            with server.wrap_socket(connection, server_side=True) as tls:
                result["version"] = tls.version()
                result["cipher"] = tls.cipher()[0]
                result["peer"] = tls.getpeercert()
                tls.recv(1)
        except (ssl.SSLError, OSError) as error:
            result["server_error"] = error

    thread = threading.Thread(target=accept)
    thread.start()
    try:
        with socket.create_connection(listener.getsockname()) as raw, \
                client.wrap_socket(raw, server_hostname=host) as tls:
            tls.sendall(b"x")
    except (ssl.SSLError, OSError) as error:
        result["client_error"] = error
    thread.join(10)
    listener.close()
    return result


def broker_settings(certificates: Certificates, **extra: str):
    return settings_of(ssl_keystore_type="PEM", ssl_keystore_location=str(certificates.broker.pem),
                       ssl_truststore_type="PEM", ssl_truststore_location=str(certificates.ca), **extra)


def client_settings(certificates: Certificates, with_certificate: bool = False, **extra: str):
    values = {"ssl_truststore_type": "PEM", "ssl_truststore_location": str(certificates.ca), **extra}
    if with_certificate:
        values.update(ssl_keystore_type="PEM", ssl_keystore_location=str(certificates.client.pem))
    return settings_of(**values)


def test_a_client_certificate_gives_the_principal_its_dn(certificates) -> None:
    server = server_context(broker_settings(certificates, ssl_client_auth="required"), "SSL")
    result = handshake(server, client_context(client_settings(certificates, True)))
    assert result["version"] == "TLSv1.3"
    assert distinguished_name(result["peer"]["subject"]) == CLIENT_DN


def test_required_client_auth_refuses_a_client_without_a_certificate(certificates) -> None:
    server = server_context(broker_settings(certificates, ssl_client_auth="required"), "SSL")
    result = handshake(server, client_context(client_settings(certificates)))
    assert "certificate" in str(result.get("server_error", "")).lower()


def test_an_encrypted_key_needs_ssl_key_password(certificates) -> None:
    encrypted = dict(ssl_keystore_type="PEM", ssl_keystore_location=str(certificates.broker_encrypted.pem))
    server = server_context(settings_of(**encrypted, ssl_key_password=KEY_PASSWORD), "SSL")
    assert handshake(server, client_context(client_settings(certificates)))["version"] == "TLSv1.3"
    with pytest.raises(InvalidConfigurationError, match="cannot load the key store"):
        server_context(settings_of(**encrypted, ssl_key_password="wrong"), "SSL")


def test_inline_pem_key_chain_and_trusted_certificates(certificates) -> None:
    """Inline PEM as properties files hold it: here the key on one line (its lines joined by spaces)."""
    one_line_key = " ".join(certificates.broker.key.read_text().splitlines())
    server = server_context(settings_of(ssl_keystore_type="PEM", ssl_keystore_key=one_line_key,
                                        ssl_keystore_certificate_chain=certificates.broker.certificate.read_text()),
                            "SSL")
    client = client_context(settings_of(ssl_truststore_type="PEM",
                                        ssl_truststore_certificates=certificates.ca.read_text()))
    assert handshake(server, client)["version"] == "TLSv1.3"


def test_enabled_protocols_and_cipher_suites_bound_the_handshake(certificates) -> None:
    server = server_context(broker_settings(certificates, ssl_enabled_protocols="TLSv1.2",
                                            ssl_cipher_suites="TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"), "SSL")
    result = handshake(server, client_context(client_settings(certificates)))
    assert result["version"] == "TLSv1.2" and result["cipher"] == "ECDHE-ECDSA-AES256-GCM-SHA384"
    assert openssl_cipher_name("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256") == "ECDHE-RSA-AES128-GCM-SHA256"
    assert openssl_cipher_name("TLS_RSA_WITH_AES_256_CBC_SHA") == "AES256-SHA"
    assert openssl_cipher_name("ECDHE-RSA-CHACHA20-POLY1305") == "ECDHE-RSA-CHACHA20-POLY1305"


def test_the_client_checks_the_host_name_by_default(certificates) -> None:
    server = server_context(settings_of(ssl_keystore_type="PEM", ssl_keystore_location=str(certificates.elsewhere.pem)),
                            "SSL")
    refused = handshake(server, client_context(client_settings(certificates)))
    assert "mismatch" in str(refused["client_error"])
    unchecked = client_context(client_settings(certificates, ssl_endpoint_identification_algorithm=""))
    assert handshake(server, unchecked)["version"] == "TLSv1.3"


def test_misconfigurations_name_the_key(certificates) -> None:
    with pytest.raises(InvalidConfigurationError, match="listener SSL uses TLS but has no key store"):
        server_context(settings_of(), "SSL")
    with pytest.raises(InvalidConfigurationError, match="ssl.keystore.type=JKS is not supported by kfk: use PEM"):
        server_context(settings_of(ssl_keystore_location=str(certificates.broker.pem)), "SSL")  # Kafka's default JKS
    with pytest.raises(InvalidConfigurationError, match="ssl.client.auth"):
        server_context(broker_settings(certificates, ssl_client_auth="sometimes"), "SSL")
    with pytest.raises(InvalidConfigurationError, match="ssl.enabled.protocols"):
        client_context(client_settings(certificates, ssl_enabled_protocols="SSLv3"))
    with pytest.raises(InvalidConfigurationError, match="ssl.cipher.suites"):
        client_context(client_settings(certificates, ssl_cipher_suites="TLS_NO_SUCH_WITH_NOTHING"))


def test_distinguished_names_are_java_s_rfc_2253_form() -> None:
    subject = ((("countryName", "US"),), (("organizationName", "Acme, Inc."),),
               (("organizationalUnitName", "eng"), ("commonName", "bob")), (("emailAddress", "bob@acme.example"),))
    assert distinguished_name(subject) == \
        "1.2.840.113549.1.9.1=#1610626f624061636d652e6578616d706c65,OU=eng+CN=bob,O=Acme\\, Inc.,C=US"
    assert distinguished_name(((("commonName", " #lead"),),)) == "CN=\\ #lead"


def test_principal_mapping_rules() -> None:
    mapper = PrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=.*$/$1@$2/U, DEFAULT")
    assert mapper.name("CN=kafka-broker,OU=ServiceUsers,O=corp") == "kafka-broker"
    assert mapper.name("CN=alice,OU=eng,O=corp") == "ALICE@ENG"
    assert mapper.name("CN=x,O=corp") == "CN=x,O=corp"  # DEFAULT: the DN itself
    strict = PrincipalMapper("RULE:^CN=([a-z]+),.*$/$1/L")
    with pytest.raises(ValueError, match="No rules apply to O=corp"):
        strict.name("O=corp")
    with pytest.raises(InvalidConfigurationError, match="ssl.principal.mapping.rules"):
        PrincipalMapper("RULE:^CN=(.*$/$1/")
    with pytest.raises(InvalidConfigurationError, match="ssl.principal.mapping.rules"):
        PrincipalMapper("NONSENSE")


def test_peer_principal_is_anonymous_without_a_certificate() -> None:
    assert peer_principal(None, PrincipalMapper(None)) is ANONYMOUS
    assert KafkaPrincipal("User", CLIENT_DN) == KafkaPrincipal.parse(f"User:{CLIENT_DN}")
