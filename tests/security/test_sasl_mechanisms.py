"""The sans-I/O SASL mechanisms against each other and against the rules Kafka applies: PLAIN, SCRAM-SHA-256/512
(credentials, the exchange, extensions, the failures and which of them the client may see), OAUTHBEARER's client
response, the unsecured validator and the JWKS validator (RSA, RSA-PSS and ECDSA signatures; `none` and HMAC
refused), and the JAAS config parser."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from kfk.errors import SaslAuthenticationError
from kfk.security.sasl import SaslException
from kfk.security.sasl.jaas import parse_jaas_config, plain_users
from kfk.security.sasl.jwt import JwtValidator, parse_jwks
from kfk.security.sasl.oauthbearer import (OAuthBearerClient, OAuthBearerServer, TokenValidationError,
                                           UnsecuredJwsValidator, b64url_encode, format_client_response,
                                           parse_client_response, unsecured_token)
from kfk.security.sasl.plain import PlainClient, PlainServer
from kfk.security.sasl.scram import (ScramClient, ScramMechanism, ScramServer, TokenCredential,
                                     credential_from_password, format_credential, parse_credential)

SCRAM = [ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512]


def run(client, server) -> None:
    """Drive a client and a server to the end (or the first exception)."""
    token = client.initial_response()
    while True:
        challenge = server.evaluate_response(token)
        token = client.evaluate_challenge(challenge)
        if token is None:
            return


# -- PLAIN -------------------------------------------------------------------------------------------------------

def test_plain() -> None:
    server = PlainServer({"alice": "alice-secret"})
    run(PlainClient("alice", "alice-secret"), server)
    assert server.complete and server.authorization_id == "alice"
    for token, message in [(b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
                           (b"\0bob\0alice-secret", "Authentication failed: Invalid username or password"),
                           (b"\0\0x", "Authentication failed: username not specified"),
                           (b"\0alice\0", "Authentication failed: password not specified"),
                           (b"bob\0alice\0alice-secret", "Authentication failed: Client requested an authorization "
                                                         "id that is different from username"),
                           # Kafka stops counting at four tokens (the rest is the fourth).
                           (b"alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 1"),
                           (b"alice\0alice-secret", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
                           (b"\0alice\0alice-secret\0", "Invalid SASL/PLAIN response: expected 3 tokens, got 4"),
                           (b"\0alice\0a\0b\0c\0", "Invalid SASL/PLAIN response: expected 3 tokens, got 4")]:
        with pytest.raises(SaslAuthenticationError) as refused:
            PlainServer({"alice": "alice-secret"}).evaluate_response(token)
        assert refused.value.message == message


# -- SCRAM -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mechanism", SCRAM)
def test_scram_exchange(mechanism: ScramMechanism) -> None:
    credentials = {"al,i=ce": credential_from_password(mechanism, "pencil", 4096)}
    server = ScramServer(mechanism, credentials.get)
    client = ScramClient(mechanism, "al,i=ce", "pencil")
    assert b"n=al=2Ci=3Dce," in client.initial_response()  # RFC 5802 saslname escaping
    run(client, server)
    assert client.complete and server.complete and server.authorization_id == "al,i=ce"


@pytest.mark.parametrize("mechanism", SCRAM)
def test_scram_wrong_password_and_unknown_user_fail_alike(mechanism: ScramMechanism) -> None:
    credentials = {"alice": credential_from_password(mechanism, "pencil")}
    with pytest.raises(SaslException):
        run(ScramClient(mechanism, "alice", "crayon"), ScramServer(mechanism, credentials.get))
    with pytest.raises(SaslException):
        run(ScramClient(mechanism, "mallory", "pencil"), ScramServer(mechanism, credentials.get))


def test_scram_client_refuses_a_server_that_does_not_know_the_password() -> None:
    mechanism = ScramMechanism.SCRAM_SHA_256
    impostor = {"alice": credential_from_password(mechanism, "something else")}
    client = ScramClient(mechanism, "alice", "pencil")
    server = ScramServer(mechanism, impostor.get)
    final = client.evaluate_challenge(server.evaluate_response(client.initial_response()))
    with pytest.raises(SaslException):
        server.evaluate_response(final)
    forged = b"v=" + base64.b64encode(b"\0" * 32)
    with pytest.raises(SaslException, match="server signature"):
        client.evaluate_challenge(forged)


def test_scram_extensions_and_authorization_id() -> None:
    mechanism = ScramMechanism.SCRAM_SHA_512
    credentials = {"alice": credential_from_password(mechanism, "pencil")}
    run(ScramClient(mechanism, "alice", "pencil", {"ext": "ignored"}), ScramServer(mechanism, credentials.get))
    with pytest.raises(SaslException):  # tokenauth: a delegation token, and this server knows none by that id
        run(ScramClient(mechanism, "alice", "pencil", {"tokenauth": "true"}), ScramServer(mechanism, credentials.get))
    with pytest.raises(SaslAuthenticationError, match="authorization id that is different"):
        ScramServer(mechanism, credentials.get).evaluate_response(b"n,a=bob,n=alice,r=abc")
    with pytest.raises(SaslException, match="client first message"):
        ScramServer(mechanism, credentials.get).evaluate_response(b"p=tls-unique,,n=alice,r=abc")


@pytest.mark.parametrize("mechanism", SCRAM)
def test_scram_with_a_delegation_token(mechanism: ScramMechanism) -> None:
    """tokenauth=true: the user name is a token id, the password its HMAC; the principal becomes the token's owner,
    the session ends with the token, and a user's own credential is never used for it (nor the token's for a
    user)."""
    hmac_text = base64.b64encode(b"\x17" * 64).decode()
    tokens = {"tok1": TokenCredential(credential_from_password(mechanism, hmac_text, 4096), "alice", 1_900_000_000_000)}
    users = {"tok1": credential_from_password(mechanism, "a user's password")}
    server = ScramServer(mechanism, users.get, tokens.get)
    run(ScramClient(mechanism, "tok1", hmac_text, {"tokenauth": "true"}), server)
    assert server.complete and server.token_authenticated
    assert (server.authorization_id, server.credential_expiry_ms) == ("alice", 1_900_000_000_000)
    with pytest.raises(SaslException):  # the token's password is not the user's
        run(ScramClient(mechanism, "tok1", hmac_text), ScramServer(mechanism, users.get, tokens.get))
    with pytest.raises(SaslException, match="Invalid tokenId"):
        run(ScramClient(mechanism, "tok2", hmac_text, {"tokenauth": "true"}),
            ScramServer(mechanism, users.get, tokens.get))
    plain_user = ScramServer(mechanism, users.get, tokens.get)
    run(ScramClient(mechanism, "tok1", "a user's password"), plain_user)
    assert not plain_user.token_authenticated and plain_user.authorization_id == "tok1"


def test_scram_too_few_iterations_refused() -> None:
    mechanism = ScramMechanism.SCRAM_SHA_256
    weak = {"alice": credential_from_password(mechanism, "pencil", iterations=1000)}
    with pytest.raises(SaslException, match="less than the minimum"):
        run(ScramClient(mechanism, "alice", "pencil"), ScramServer(mechanism, weak.get))


def test_scram_credential_text_form_round_trips() -> None:
    credential = credential_from_password(ScramMechanism.SCRAM_SHA_256, "pencil", 8192, salt=b"salty")
    text = format_credential(credential)
    assert text.startswith("salt=c2FsdHk=,stored_key=") and text.endswith(",iterations=8192")
    assert parse_credential(text) == credential
    with pytest.raises(ValueError):
        parse_credential("salt=x,iterations=1")


def test_scram_credential_matches_rfc_7677() -> None:
    """RFC 7677's example: user "user", password "pencil", salt W22ZaJ0SNY7soEsUEjb6gQ==, 4096 iterations; its
    client proof checks against the stored key derived here."""
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = credential_from_password(ScramMechanism.SCRAM_SHA_256, "pencil", 4096, salt)
    client_first_bare = "n=user,r=rOprNGfwEbeRWgbNEkqO"
    server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    without_proof = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
    proof = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(credential.stored_key, auth_message, "sha256").digest()
    client_key = bytes(a ^ b for a, b in zip(proof, signature))
    assert hashlib.sha256(client_key).digest() == credential.stored_key
    server_signature = hmac.new(credential.server_key, auth_message, "sha256").digest()
    assert base64.b64encode(server_signature) == b"6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


# -- OAUTHBEARER -----------------------------------------------------------------------------------------------------

def test_client_response_round_trip() -> None:
    response = format_client_response("a.b.c", "alice", {"traceId": "42"})
    assert response == b"n,a=alice,\x01auth=Bearer a.b.c\x01traceId=42\x01\x01"
    assert parse_client_response(response) == ("alice", "Bearer a.b.c", {"traceId": "42"})
    with pytest.raises(SaslException):
        parse_client_response(b"n,,\x01user=alice\x01\x01")


def test_unsecured_tokens() -> None:
    now_ms = int(time.time() * 1000)
    server = OAuthBearerServer(UnsecuredJwsValidator())
    run(OAuthBearerClient(unsecured_token("alice", 60)), server)
    assert server.authorization_id == "alice" and abs(server.credential_expiry_ms - (now_ms + 60_000)) < 5_000
    expired = OAuthBearerServer(UnsecuredJwsValidator())
    assert expired.evaluate_response(format_client_response(unsecured_token("alice", -10))) \
        == b'{"status":"invalid_token"}'
    with pytest.raises(SaslAuthenticationError) as refused:
        expired.evaluate_response(b"\x01")  # the client's acknowledgement of the error
    assert refused.value.message == '{"status":"invalid_token"}'
    scoped = OAuthBearerServer(UnsecuredJwsValidator({"unsecuredValidatorRequiredScope": "write"}))
    assert json.loads(scoped.evaluate_response(format_client_response(unsecured_token("alice", 60, ["read"])))) \
        == {"status": "insufficient_scope", "scope": "write"}
    with pytest.raises(SaslAuthenticationError, match="different from the token's principal"):
        OAuthBearerServer(UnsecuredJwsValidator()).evaluate_response(
            format_client_response(unsecured_token("alice", 60), authorization_id="bob"))


@pytest.mark.parametrize("token", ["a.b", "e30.e30.c2ln", b64url_encode(b'{"alg":"none"}') + "." +
                                   b64url_encode(b'{"exp": 1e12}') + "."])
def test_unsecured_validator_refusals(token: str) -> None:
    with pytest.raises(TokenValidationError):
        UnsecuredJwsValidator().validate(token)


def _jws(algorithm: str, claims: dict, sign, kid: str | None = "k1") -> str:
    header = {"alg": algorithm, **({"kid": kid} if kid else {})}
    signing_input = f"{b64url_encode(json.dumps(header).encode())}.{b64url_encode(json.dumps(claims).encode())}"
    return f"{signing_input}.{b64url_encode(sign(signing_input.encode()))}"


def _claims(**overrides) -> dict:
    now = int(time.time())
    return {"sub": "alice", "iat": now, "exp": now + 600, "aud": ["kfk"], "iss": "idp", **overrides}


def _jwks(key, kid: str = "k1") -> dict:
    numbers = key.public_key().public_numbers()

    def encode(value: int, size: int | None = None) -> str:
        return b64url_encode(value.to_bytes(size or (value.bit_length() + 7) // 8, "big"))

    if isinstance(key, rsa.RSAPrivateKey):
        return {"kty": "RSA", "kid": kid, "n": encode(numbers.n), "e": encode(numbers.e)}
    return {"kty": "EC", "kid": kid, "crv": "P-256", "x": encode(numbers.x, 32), "y": encode(numbers.y, 32)}


def test_jwt_signatures() -> None:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())

    def es256(data: bytes) -> bytes:
        r, s = decode_dss_signature(ec_key.sign(data, ec.ECDSA(hashes.SHA256())))
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")

    keys = parse_jwks(json.dumps({"keys": [_jwks(rsa_key, "rsa"), _jwks(ec_key, "ec"), {"kty": "oct", "k": "x"}]}))
    validator = JwtValidator(lambda: keys, expected_audience=["kfk"], expected_issuer="idp")
    rs256 = _jws("RS256", _claims(), lambda data: rsa_key.sign(data, padding.PKCS1v15(), hashes.SHA256()), "rsa")
    ps256 = _jws("PS256", _claims(sub="bob"), lambda data: rsa_key.sign(
        data, padding.PSS(padding.MGF1(hashes.SHA256()), 32), hashes.SHA256()), "rsa")
    assert validator.validate(rs256).principal_name == "alice"
    assert validator.validate(ps256).principal_name == "bob"
    assert validator.validate(_jws("ES256", _claims(sub="carol"), es256, "ec")).principal_name == "carol"
    refused = {
        "tampered": rs256[:-4] + ("AAAA" if not rs256.endswith("AAAA") else "BBBB"),
        "unknown kid": _jws("ES256", _claims(), es256, "nobody"),
        "alg none": unsecured_token("alice"),
        "HMAC": _jws("HS256", _claims(), lambda data: b"\0" * 32, "rsa"),
        "no iat": _jws("ES256", {k: v for k, v in _claims().items() if k != "iat"}, es256, "ec"),
        "audience": _jws("ES256", _claims(aud="other"), es256, "ec"),
        "issuer": _jws("ES256", _claims(iss="other"), es256, "ec"),
        "no subject": _jws("ES256", _claims(sub=""), es256, "ec"),
        "key of another type": _jws("RS256", _claims(), es256, "ec"),
    }
    for case, token in refused.items():
        try:
            validator.validate(token)
        except TokenValidationError:
            continue
        pytest.fail(f"a JWT with {case} was accepted")


# -- JAAS --------------------------------------------------------------------------------------------------------

def test_jaas_config() -> None:
    (module,) = parse_jaas_config('org.apache.kafka.common.security.plain.PlainLoginModule required '
                                  'username="admin" password="a \\"b\\";c" user_admin="a \\"b\\";c" user_bob=bob-pw;')
    assert module.class_name == "org.apache.kafka.common.security.plain.PlainLoginModule"
    assert module.options["password"] == 'a "b";c'
    assert plain_users(module) == {"admin": 'a "b";c', "bob": "bob-pw"}
    for text, message in [("", "no login module"), ("x.Y", "control flag"), ("x.Y required a=b", "end with ';'"),
                          ("x.Y required a;", "not name=value")]:
        with pytest.raises(ValueError, match=message):
            parse_jaas_config(text)
