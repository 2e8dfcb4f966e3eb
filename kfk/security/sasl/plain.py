"""SASL/PLAIN (RFC 4616): the client sends `authzid NUL authcid NUL password` in one token; the server checks the
password against the users it was configured with (the `user_<name>="<password>"` options of the JAAS config). Every
failure is a SaslAuthenticationError, a malformed token's too: Kafka tells a PLAIN client exactly what was wrong."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from kfk.errors import SaslAuthenticationError
from kfk.security.sasl import PLAIN


class PlainServer:
    mechanism = PLAIN
    token_authenticated = False

    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._authorization_id = ""
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def authorization_id(self) -> str:
        return self._authorization_id

    @property
    def credential_expiry_ms(self) -> int | None:
        return None

    def evaluate_response(self, response: bytes) -> bytes:
        # Kafka counts at most four tokens (it stops splitting after the third NUL), and the client sees the count.
        tokens = response.decode("utf-8", errors="replace").split("\0", 3)
        if len(tokens) != 3:
            raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
        authorization_id, username, password = tokens
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        # compare_digest even for an unknown user: the answer takes as long either way
        if not hmac.compare_digest(password.encode(), (expected if expected is not None else "\0" + password).encode()):
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username")
        self._authorization_id = username
        self._complete = True
        return b""


class PlainClient:
    mechanism = PLAIN

    def __init__(self, username: str, password: str) -> None:
        self._token = f"\0{username}\0{password}".encode()
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    def initial_response(self) -> bytes:
        return self._token

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        self._complete = True
        return None
