"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka runs them.

The broker keeps, per user and mechanism, a ScramCredential (salt, StoredKey, ServerKey, iterations), never the
password; it is written into the cluster metadata (UserScramCredentialRecord in KRaft, `/config/users/<user>` in
ZooKeeper, whose text form `format_credential`/`parse_credential` read and write). Kafka's deviations from the RFC,
kept here: channel binding is never offered (the GS2 header is `n,,` or `n,a=<authzid>,`), the client-final nonce
need only end with the server's (librdkafka 2.0, Debian's kcat, repeats the client nonce), the client-first message
may carry extensions after the nonce (other than `tokenauth` they are ignored), and at least 4096 iterations.

Delegation tokens (KIP-48) authenticate over SCRAM too: the client sends `,tokenauth=true` with the token id as the user
name and the base64 of the token's HMAC as the password; the broker checks it against a credential it derives from
that HMAC, and the connection's principal is the token's owner, marked token-authenticated.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from kfk.errors import SaslAuthenticationError
from kfk.security.sasl import SCRAM_SHA_256, SCRAM_SHA_512, SaslException

log = logging.getLogger("kfk.security.sasl.scram")

MIN_ITERATIONS = 4096
#: The most iterations AlterUserScramCredentials accepts (Kafka's ScramMechanism max).
MAX_ITERATIONS = 16384
#: kafka-configs.sh's iterations when `SCRAM-SHA-256=[password=...]` gives none.
DEFAULT_ITERATIONS = 4096


class ScramMechanism(IntEnum):
    """The mechanism type of DescribeUserScramCredentials / AlterUserScramCredentials and the metadata record."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return {ScramMechanism.SCRAM_SHA_256: "sha256", ScramMechanism.SCRAM_SHA_512: "sha512"}[self]

    @staticmethod
    def from_mechanism_name(name: str) -> ScramMechanism:
        """SCRAM-SHA-256 -> SCRAM_SHA_256; UNKNOWN for any other name."""
        return {SCRAM_SHA_256: ScramMechanism.SCRAM_SHA_256,
                SCRAM_SHA_512: ScramMechanism.SCRAM_SHA_512}.get(name, ScramMechanism.UNKNOWN)


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def salted_password(mechanism: ScramMechanism, password: bytes, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i): PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password, salt, iterations)


def _hmac(mechanism: ScramMechanism, key: bytes, message: bytes) -> bytes:
    return hmac.new(key, message, mechanism.hash_name).digest()


def _hash(mechanism: ScramMechanism, data: bytes) -> bytes:
    return hashlib.new(mechanism.hash_name, data).digest()


def credential_from_salted_password(mechanism: ScramMechanism, salted: bytes, salt: bytes,
                                    iterations: int) -> ScramCredential:
    client_key = _hmac(mechanism, salted, b"Client Key")
    return ScramCredential(salt, _hash(mechanism, client_key), _hmac(mechanism, salted, b"Server Key"), iterations)


def credential_from_password(mechanism: ScramMechanism, password: str, iterations: int = DEFAULT_ITERATIONS,
                             salt: bytes | None = None) -> ScramCredential:
    """What the broker stores for `password` (a fresh random salt unless one is given)."""
    salt = os.urandom(32) if salt is None else salt
    return credential_from_salted_password(mechanism, salted_password(mechanism, password.encode(), salt, iterations),
                                           salt, iterations)


def format_credential(credential: ScramCredential) -> str:
    """Kafka's text form (ZooKeeper's /config/users/<user> entry): salt=<b64>,stored_key=<b64>,server_key=<b64>,
    iterations=<n>."""
    b64 = base64.b64encode
    return (f"salt={b64(credential.salt).decode()},stored_key={b64(credential.stored_key).decode()},"
            f"server_key={b64(credential.server_key).decode()},iterations={credential.iterations}")


def parse_credential(text: str) -> ScramCredential:
    """The inverse of format_credential; ValueError for anything else."""
    fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
    try:
        return ScramCredential(base64.b64decode(fields["salt"], validate=True),
                               base64.b64decode(fields["stored_key"], validate=True),
                               base64.b64decode(fields["server_key"], validate=True), int(fields["iterations"]))
    except (KeyError, ValueError) as error:
        raise ValueError(f"not a SCRAM credential: {error}") from None


def _nonce() -> str:
    """130 random bits in base 36, as Kafka makes its nonces."""
    value, digits = secrets.randbits(130), []
    while value:
        value, digit = divmod(value, 36)
        digits.append("0123456789abcdefghijklmnopqrstuvwxyz"[digit])
    return "".join(reversed(digits)) or "0"


def _sasl_name(text: str) -> str:
    """RFC 5802 saslname: ',' and '=' escaped as =2C and =3D."""
    return text.replace("=", "=3D").replace(",", "=2C")


def _username(saslname: str) -> str:
    if re.search(r"=(?!2C|3D)", saslname):
        raise SaslException(f"Invalid SCRAM user name {saslname!r}")
    return saslname.replace("=2C", ",").replace("=3D", "=")


_CLIENT_FIRST = re.compile(r"n,(?:a=(?P<authzid>[^,]*))?,(?P<bare>(?:m=[^,]*,)?n=(?P<saslname>[^,]+),"
                           r"r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)(?P<extensions>(?:,[A-Za-z]+=[^,]*)*))")
_CLIENT_FINAL = re.compile(r"(?P<without_proof>c=(?P<binding>[A-Za-z0-9+/=]*),r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+)"
                           r"(?:,[A-Za-z]+=[^,]*)*),p=(?P<proof>[A-Za-z0-9+/=]+)")
_SERVER_FIRST = re.compile(r"(?:m=[^,]*,)?r=(?P<nonce>[^,]+),s=(?P<salt>[A-Za-z0-9+/=]+),i=(?P<iterations>\d+)"
                           r"(?:,.*)?")


@dataclass(frozen=True)
class TokenCredential:
    """What a SCRAM server checks a delegation token against: the credential derived from its HMAC, its owner (who
    the connection becomes) and when it expires (epoch ms: the session ends then, KIP-368)."""

    credential: ScramCredential
    owner_name: str
    expiry_timestamp_ms: int


class ScramServer:
    """The broker side: client-first -> server-first, client-final -> server-final. `credentials(user)` looks the
    user's credential for this mechanism up (None: no such user); `token_credentials(token_id)` a delegation token's
    (None: no such token, or tokens are disabled)."""

    def __init__(self, mechanism: ScramMechanism, credentials: Callable[[str], ScramCredential | None],
                 token_credentials: Callable[[str], TokenCredential | None] = lambda token_id: None) -> None:
        self.mechanism = mechanism.mechanism_name
        self._scram = mechanism
        self._credentials = credentials
        self._token_credentials = token_credentials
        #: Whether the client authenticated with a delegation token (its principal is then the token's owner).
        self.token_authenticated = False
        self._authorization_id = ""
        self._token_expiry_ms: int | None = None
        self._state = "first"
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._credential: ScramCredential | None = None

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    @property
    def authorization_id(self) -> str:
        return self._authorization_id

    @property
    def credential_expiry_ms(self) -> int | None:
        return self._token_expiry_ms

    def evaluate_response(self, response: bytes) -> bytes:
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslException("SCRAM message is not UTF-8") from None
        if self._state == "first":
            return self._client_first(text)
        if self._state == "final":
            return self._client_final(text)
        raise SaslException(f"Unexpected SCRAM message in state {self._state}")

    def _client_first(self, text: str) -> bytes:
        match = _CLIENT_FIRST.fullmatch(text)
        if match is None:
            raise SaslException("Invalid SCRAM client first message format")
        username = _username(match["saslname"])
        extensions = dict(item.split("=", 1) for item in match["extensions"].split(",") if item)
        token_authenticated = extensions.pop("tokenauth", "").lower() == "true"
        if extensions:
            log.debug("ignoring SCRAM extensions %s", sorted(extensions))
        authorization_id = match["authzid"]
        if authorization_id and _username(authorization_id) != username:
            raise SaslAuthenticationError("Authentication failed: Client requested an authorization id that is "
                                          "different from username")
        if token_authenticated:
            token = self._token_credentials(username)
            if token is None:
                raise SaslException(f"Token Authentication failed: Invalid tokenId : {username}")
            credential, self._authorization_id = token.credential, token.owner_name
            self.token_authenticated, self._token_expiry_ms = True, token.expiry_timestamp_ms
        else:
            credential, self._authorization_id = self._credentials(username), username
        if credential is None:
            raise SaslException("Authentication failed: Invalid user credentials")
        if credential.iterations < MIN_ITERATIONS:
            raise SaslException(f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} "
                                f"for {self.mechanism}")
        self._credential = credential
        self._client_first_bare = match["bare"]
        self._nonce = match["nonce"] + _nonce()
        self._server_first = (f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},"
                              f"i={credential.iterations}")
        self._state = "final"
        return self._server_first.encode()

    def _client_final(self, text: str) -> bytes:
        match = _CLIENT_FINAL.fullmatch(text)
        if match is None:
            raise SaslException("Invalid SCRAM client final message format")
        # Kafka only checks that the nonce ends with the server's: librdkafka 2.0 (kcat) sends the client nonce twice
        if not match["nonce"].endswith(self._nonce):
            raise SaslException("Invalid client nonce in the final client message.")
        credential = self._credential
        assert credential is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{match['without_proof']}".encode()
        client_signature = _hmac(self._scram, credential.stored_key, auth_message)
        proof = base64.b64decode(match["proof"])
        if len(proof) != len(client_signature):
            raise SaslException("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature))
        if not hmac.compare_digest(_hash(self._scram, client_key), credential.stored_key):
            raise SaslException("Invalid client credentials")
        self._state = "complete"
        server_signature = _hmac(self._scram, credential.server_key, auth_message)
        return f"v={base64.b64encode(server_signature).decode()}".encode()


class ScramClient:
    """The client side: client-first, then client-final from the server-first, then the server's signature
    checked (a broker that does not know the password cannot forge it)."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str,
                 extensions: dict[str, str] | None = None) -> None:
        self.mechanism = mechanism.mechanism_name
        self._scram = mechanism
        self._password = password.encode()
        extra = "".join(f",{key}={value}" for key, value in (extensions or {}).items())
        self._client_first_bare = f"n={_sasl_name(username)},r={_nonce()}{extra}"
        self._server_signature = b""
        self._state = "first"

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def initial_response(self) -> bytes:
        return f"n,,{self._client_first_bare}".encode()

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        text = challenge.decode("utf-8", errors="replace")
        if self._state == "first":
            match = _SERVER_FIRST.fullmatch(text)
            client_nonce = self._client_first_bare.split(",r=", 1)[1].split(",", 1)[0]
            if match is None or not match["nonce"].startswith(client_nonce):
                raise SaslException(f"Invalid SCRAM server first message {text!r}")
            iterations = int(match["iterations"])
            if iterations < MIN_ITERATIONS:
                raise SaslException(f"Requested iterations {iterations} is less than the minimum {MIN_ITERATIONS}")
            salted = salted_password(self._scram, self._password, base64.b64decode(match["salt"]), iterations)
            without_proof = f"c=biws,r={match['nonce']}"
            auth_message = f"{self._client_first_bare},{text},{without_proof}".encode()
            client_key = _hmac(self._scram, salted, b"Client Key")
            client_signature = _hmac(self._scram, _hash(self._scram, client_key), auth_message)
            proof = bytes(a ^ b for a, b in zip(client_key, client_signature))
            self._server_signature = _hmac(self._scram, _hmac(self._scram, salted, b"Server Key"), auth_message)
            self._state = "final"
            return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
        if self._state == "final":
            if text.startswith("e="):
                raise SaslAuthenticationError(f"Authentication failed: {text[2:]}")
            if not text.startswith("v=") or not hmac.compare_digest(base64.b64decode(text[2:]),
                                                                     self._server_signature):
                raise SaslException("Invalid server signature in the SCRAM server final message")
            self._state = "complete"
            return None
        raise SaslException(f"Unexpected SCRAM challenge in state {self._state}")
