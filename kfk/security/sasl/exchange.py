"""The client side of Kafka's SASL exchange over any connection (kfk's client library and the broker's inter-broker
channels): SaslHandshake v1 naming the mechanism, then SaslAuthenticate requests carrying the mechanism's tokens
until it completes (KIP-152). The caller passes its own request round trip, so this holds no socket."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from kfk.errors import ErrorCode, IllegalSaslStateError, SaslAuthenticationError, UnsupportedSaslMechanismError
from kfk.protocol.message import Message
from kfk.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from kfk.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from kfk.security.sasl import SaslClient, SaslException

#: The SaslHandshake version that announces SaslAuthenticate framing.
HANDSHAKE_VERSION = 1

RoundTrip = Callable[[Message, int], Awaitable[Message]]


async def authenticate(round_trip: RoundTrip, client: SaslClient, authenticate_version: int) -> int:
    """Authenticate with `client`'s mechanism; returns the session lifetime the broker gave (ms, 0 for none).
    UnsupportedSaslMechanismError or SaslAuthenticationError (with the broker's message) on failure."""
    handshake = await round_trip(SaslHandshakeRequest(mechanism=client.mechanism), HANDSHAKE_VERSION)
    assert isinstance(handshake, SaslHandshakeResponse)
    if handshake.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM:
        raise UnsupportedSaslMechanismError(f"Client SASL mechanism '{client.mechanism}' not enabled in the server, "
                                            f"enabled mechanisms are {list(handshake.mechanisms)}")
    if handshake.error_code != ErrorCode.NONE:
        raise IllegalSaslStateError(f"SaslHandshake failed: {ErrorCode(handshake.error_code).name}")
    token: bytes | None = client.initial_response()
    while True:
        response = await round_trip(SaslAuthenticateRequest(auth_bytes=token), authenticate_version)
        assert isinstance(response, SaslAuthenticateResponse)
        if response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED:
            raise SaslAuthenticationError(response.error_message or "SASL authentication failed")
        if response.error_code != ErrorCode.NONE:
            raise IllegalSaslStateError(response.error_message or ErrorCode(response.error_code).name)
        try:
            token = client.evaluate_challenge(bytes(response.auth_bytes))
        except SaslException as error:
            raise SaslAuthenticationError(f"SASL {client.mechanism}: {error}") from None
        if token is None:
            return response.session_lifetime_ms
