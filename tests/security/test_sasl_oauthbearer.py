"""SASL/OAUTHBEARER with real clients: Kafka's unsecured development tokens (confluent-kafka's
`enable.sasl.oauthbearer.unsecure.jwt`, kfk's client with Java's unsecured login options), and signed JWTs checked
against a JWKS given by a file: URL and by an http: URL (KIP-768), with the expected audience and issuer; a token
signed by another key, for another audience or expired is refused with Kafka's `{"status":"invalid_token"}`."""

from __future__ import annotations

import functools
import http.server
import json
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaError as ConfluentKafkaError
from confluent_kafka import Producer
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from kfk.client import Admin, Producer as KfkProducer
from kfk.errors import SaslAuthenticationError
from kfk.security.sasl.oauthbearer import b64url_encode, unsecured_token
from kfk.testing.broker import BrokerProcess, start_broker

from tests.security.test_sasl_clients import sasl_overrides

pytestmark = pytest.mark.integration

ISSUER = "https://issuer.kfk.test"
AUDIENCE = "kfk-brokers"
INVALID_TOKEN = '{"status":"invalid_token"}'


def jwk(key: rsa.RSAPrivateKey, kid: str) -> dict:
    numbers = key.public_key().public_numbers()
    as_bytes = lambda value: value.to_bytes((value.bit_length() + 7) // 8, "big")  # noqa: E731
    return {"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256", "n": b64url_encode(as_bytes(numbers.n)),
            "e": b64url_encode(as_bytes(numbers.e))}


def signed_token(key: rsa.RSAPrivateKey, kid: str, subject: str = "alice", audience: str = AUDIENCE,
                 lifetime_s: int = 600, issuer: str = ISSUER) -> str:
    now = int(time.time())
    header = b64url_encode(json.dumps({"alg": "RS256", "typ": "JWT", "kid": kid}).encode())
    claims = b64url_encode(json.dumps({"sub": subject, "aud": audience, "iss": issuer, "iat": now,
                                       "exp": now + lifetime_s}).encode())
    signature = key.sign(f"{header}.{claims}".encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{header}.{claims}.{b64url_encode(signature)}"


@pytest.fixture(scope="module")
def keys() -> tuple[rsa.RSAPrivateKey, rsa.RSAPrivateKey]:
    """The identity provider's key (in the JWKS) and a stranger's (not)."""
    return (rsa.generate_private_key(public_exponent=65537, key_size=2048),
            rsa.generate_private_key(public_exponent=65537, key_size=2048))


@pytest.fixture(scope="module")
def unsecured_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("oauth-unsecured"), sasl_overrides(),
                           listener_name="SASL_PLAINTEXT")
    yield process
    process.stop()


@pytest.fixture(scope="module", params=["file", "http"])
def jwks_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, keys) -> Iterator[BrokerProcess]:
    directory = tmp_path_factory.mktemp("oauth-jwks")
    jwks = directory / "jwks.json"
    jwks.write_text(json.dumps({"keys": [jwk(keys[0], "idp-1")]}))
    server = None
    if request.param == "file":
        url = jwks.as_uri()
    else:
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{server.server_address[1]}/jwks.json"
    prefix = "listener.name.sasl_plaintext.oauthbearer."
    process = start_broker(directory / "broker", sasl_overrides(**{
        f"{prefix}sasl.oauthbearer.jwks.endpoint.url": url,
        f"{prefix}sasl.oauthbearer.expected.audience": AUDIENCE,
        f"{prefix}sasl.oauthbearer.expected.issuer": ISSUER}), listener_name="SASL_PLAINTEXT")
    yield process
    process.stop()
    if server is not None:
        server.shutdown()


def confluent_producer(bootstrap: str, errors: list, **config) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
                     "sasl.mechanism": "OAUTHBEARER", "error_cb": errors.append, "log_level": 0, **config})


def authentication_errors(producer: Producer, errors: list, timeout: float = 15) -> list:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not any(e.code() == ConfluentKafkaError._AUTHENTICATION for e in errors):
        producer.poll(0.2)
    return [error for error in errors if error.code() == ConfluentKafkaError._AUTHENTICATION]


def new_topic() -> str:
    return f"oauth-{uuid.uuid4().hex[:8]}"


def test_confluent_kafka_unsecured_token(unsecured_broker: BrokerProcess) -> None:
    errors: list = []
    producer = confluent_producer(unsecured_broker.bootstrap_servers, errors,
                                  **{"sasl.oauthbearer.config": "principal=alice",
                                     "enable.sasl.oauthbearer.unsecure.jwt": True})
    producer.produce(new_topic(), b"unsecured")
    assert producer.flush(30) == 0
    assert not [error for error in errors if error.code() == ConfluentKafkaError._AUTHENTICATION]


def test_kfk_client_unsecured_token_from_the_jaas_options(unsecured_broker: BrokerProcess) -> None:
    jaas = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
            'unsecuredLoginStringClaim_sub="alice";')
    config = {"bootstrap.servers": unsecured_broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": jaas}
    with KfkProducer(config) as producer:
        assert producer.send(new_topic(), b"unsecured").get(30).offset == 0


def test_expired_unsecured_token_refused(unsecured_broker: BrokerProcess) -> None:
    errors: list = []
    producer = confluent_producer(unsecured_broker.bootstrap_servers, errors, oauth_cb=lambda _: (
        unsecured_token("alice", -120), time.time() + 60, "alice", {}))
    producer.produce(new_topic(), b"never")
    refused = authentication_errors(producer, errors)
    assert refused and INVALID_TOKEN in refused[0].str()
    producer.purge()


def test_signed_token_accepted_by_kfk_and_confluent_clients(jwks_broker: BrokerProcess, keys) -> None:
    token = signed_token(keys[0], "idp-1")
    config = {"bootstrap.servers": jwks_broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token": token}
    with KfkProducer(config) as producer:
        producer.send(new_topic(), b"signed").get(30)
    errors: list = []
    producer = confluent_producer(jwks_broker.bootstrap_servers, errors,
                                  oauth_cb=lambda _: (token, time.time() + 600, "alice", {}))
    producer.produce(new_topic(), b"signed")
    assert producer.flush(30) == 0


@pytest.mark.parametrize("case", ["stranger's key", "other audience", "other issuer", "expired", "unsecured"])
def test_bad_tokens_refused(jwks_broker: BrokerProcess, keys, case: str) -> None:
    token = {
        "stranger's key": lambda: signed_token(keys[1], "idp-1"),
        "other audience": lambda: signed_token(keys[0], "idp-1", audience="somebody-else"),
        "other issuer": lambda: signed_token(keys[0], "idp-1", issuer="https://evil.test"),
        "expired": lambda: signed_token(keys[0], "idp-1", lifetime_s=-300),
        "unsecured": lambda: unsecured_token("alice", 600),
    }[case]()
    config = {"bootstrap.servers": jwks_broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token": token}
    with Admin(config, default_api_timeout_ms=5000) as admin:
        with pytest.raises(SaslAuthenticationError) as refused:
            admin.list_topics()
    assert refused.value.message == INVALID_TOKEN
