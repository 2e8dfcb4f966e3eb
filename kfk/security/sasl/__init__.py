"""SASL mechanisms, sans-I/O: servers and clients that turn one token into the next and never touch a socket.

A server (`SaslServer`) is fed the client's tokens (SaslAuthenticate's auth_bytes, or raw frames after a v0
SaslHandshake) and returns its challenges until `complete`; then `authorization_id` names the authenticated user.
A client (`SaslClient`) produces the first token and answers each challenge. The broker's authenticator
(kfk.server.sasl_authenticator) and kfk's client connection drive them over the network.

Two kinds of failure, as Kafka distinguishes them: `SaslAuthenticationError` (kfk.errors) carries a message the client
may see ("Authentication failed: Invalid username or password"); `SaslException` is any other failure, which the
broker reports with its generic "Authentication failed during authentication due to invalid credentials with SASL
mechanism ..." so that a SCRAM client cannot tell an unknown user from a wrong password.
"""

from __future__ import annotations

from typing import Protocol

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
OAUTHBEARER = "OAUTHBEARER"
#: The mechanisms kfk implements (Kafka also has GSSAPI, Kerberos, which kfk does not).
SUPPORTED_MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512, OAUTHBEARER)


class SaslException(Exception):
    """A mechanism failure whose details stay on the broker (javax.security.sasl.SaslException)."""


class SaslServer(Protocol):
    mechanism: str
    #: Whether the client authenticated with a delegation token (SCRAM only).
    token_authenticated: bool

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str:
        """The authenticated user name, once complete."""
        ...

    @property
    def credential_expiry_ms(self) -> int | None:
        """When the credential presented stops being valid (an OAUTHBEARER token's exp), None if it never does."""
        ...

    def evaluate_response(self, response: bytes) -> bytes:
        """The challenge to send back; raises SaslAuthenticationError or SaslException on failure."""
        ...


class SaslClient(Protocol):
    mechanism: str

    @property
    def complete(self) -> bool: ...

    def initial_response(self) -> bytes: ...

    def evaluate_challenge(self, challenge: bytes) -> bytes | None:
        """The next token, or None when the exchange is over (nothing more to send)."""
        ...
