"""The broker's SASL authentication of one connection on a SASL_PLAINTEXT or SASL_SSL listener (Kafka's
SaslServerAuthenticator), in front of the dispatcher.

Until the connection is authenticated only ApiVersions, SaslHandshake and SaslAuthenticate are served; any other
request closes the connection, as Kafka does. SaslHandshake picks a mechanism among the listener's enabled ones
(UNSUPPORTED_SASL_MECHANISM, with the enabled list, then the connection closes); SaslAuthenticate v0-v2 carries the
mechanism's tokens (KIP-152). After a v0 SaslHandshake the tokens come as raw size-prefixed frames instead, as
clients from before KIP-152 send them. A failure is answered SASL_AUTHENTICATION_FAILED with Kafka's message at once,
and the connection closes connection.failed.authentication.delay.ms later (so the client reads the answer first).
Success sets the connection's principal, which every later request carries into the dispatcher.

While the connection authenticates (until it is authenticated, and from a re-authentication's SaslHandshake until
it completes) its frames are bounded by sasl.server.max.receive.size instead of socket.request.max.bytes: the socket
server checks each size prefix against `max_receive_size` while `authenticating`, and closes the connection on a
larger one before reading the frame (Kafka: "Failing SASL authentication due to invalid receive size"), so an
unauthenticated client cannot make the broker buffer 100 MB. The bound in force is the one when the size prefix is
read: a request pipelined behind the SaslAuthenticate that completes authentication, in the same read, is held to
it too (clients wait for that answer before they send anything else).

Re-authentication (KIP-368): with connections.max.reauth.ms > 0, or a credential that expires (an OAUTHBEARER
token), the session has a lifetime, sent to SaslAuthenticate v1+ clients; they authenticate again on the same
connection (SaslHandshake, SaslAuthenticate) before it ends, with the same mechanism and principal; other requests
that arrive meanwhile are served in the current session. A request other than SaslHandshake after the session ended
closes the connection (clients that cannot re-authenticate just reconnect).
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from kfk.errors import ErrorCode, KafkaError, ProtocolError, SaslAuthenticationError
from kfk.protocol.headers import decode_request_header, encode_response
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.sasl_authenticate import SaslAuthenticateRequest, SaslAuthenticateResponse
from kfk.protocol.messages.sasl_handshake import SaslHandshakeRequest, SaslHandshakeResponse
from kfk.protocol.primitives import INT32
from kfk.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from kfk.security.sasl import SaslException, SaslServer
from kfk.server.dispatch import CloseConnection, Dispatcher
from kfk.server.sasl_config import SaslListenerConfig

log = logging.getLogger("kfk.server.sasl")

_PRE_AUTHENTICATION_APIS = (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class SaslAuthenticator:
    """One connection's authentication state; `handle` takes the dispatcher's place for that connection."""

    def __init__(self, config: SaslListenerConfig, dispatcher: Dispatcher) -> None:
        self._config = config
        self._dispatcher = dispatcher
        self.principal: KafkaPrincipal = ANONYMOUS
        self.mechanism: str | None = None
        self._server: SaslServer | None = None
        self._state = "handshake"  # -> "authenticate" | "raw" -> "complete"; "complete" -> "authenticate" (KIP-368)
        self._reauthenticating = False
        self.session_expiry_ms: int | None = None  # monotonic ms

    @property
    def authenticating(self) -> bool:
        """Whether the authentication exchange reads the next frame (not yet authenticated, or re-authenticating)."""
        return self._state != "complete"

    @property
    def max_receive_size(self) -> int:
        """sasl.server.max.receive.size: the largest frame read while `authenticating`."""
        return self._config.max_receive_size

    async def handle(self, frame: bytearray | bytes, client_host: str, client_port: int,
                     listener_name: str, on_throttle: Callable[[int], None] | None = None) -> list | None:
        if self._state == "raw":
            return await self._raw_token(bytes(frame), client_host)
        try:
            header, position = decode_request_header(frame)
        except KafkaError as error:
            raise CloseConnection(f"unreadable request header: {error}") from error
        api_key = header.request_api_key
        if self._state == "complete":
            if api_key == ApiKey.SASL_HANDSHAKE and self.session_expiry_ms is not None:
                self._reauthenticating = True
                self._state = "handshake"
            else:
                if self.session_expiry_ms is not None and _now_ms() > self.session_expiry_ms:
                    raise CloseConnection(f"the SASL session of {self.principal} expired (connections.max.reauth.ms"
                                          f" or the credential's lifetime) without re-authentication")
                return await self._dispatcher.dispatch(frame, client_host, client_port, listener_name,
                                                       self.principal, on_throttle)
        if self._reauthenticating and api_key not in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
            # A request the client had in flight when it began to re-authenticate: the session it was sent in
            # serves it.
            return await self._dispatcher.dispatch(frame, client_host, client_port, listener_name, self.principal,
                                                   on_throttle)
        if api_key not in _PRE_AUTHENTICATION_APIS:
            raise CloseConnection(f"unexpected request {api_key} before SASL authentication completed")
        if api_key == ApiKey.API_VERSIONS:
            return await self._dispatcher.dispatch(frame, client_host, client_port, listener_name, self.principal)
        versions = self._dispatcher.served_versions[ApiKey(api_key)]
        version = header.request_api_version
        if version not in versions:
            raise CloseConnection(f"unsupported version {version} of {ApiKey(api_key).name}")
        if api_key == ApiKey.SASL_HANDSHAKE:
            if self._state != "handshake":
                raise CloseConnection("SaslHandshake received twice")
            request = self._decode(SaslHandshakeRequest, frame, version, position)
            return self._handshake(header.correlation_id, version, request.mechanism)
        if self._state != "authenticate":
            raise CloseConnection("SaslAuthenticate received before SaslHandshake")
        request = self._decode(SaslAuthenticateRequest, frame, version, position)
        return await self._authenticate(header.correlation_id, version, bytes(request.auth_bytes), client_host)

    @staticmethod
    def _decode(cls, frame, version: int, position: int):
        try:
            return cls.decode(bytes(frame), version, position)
        except ProtocolError as error:
            raise CloseConnection(f"malformed {cls.__name__} v{version}: {error}") from error

    def _handshake(self, correlation_id: int, version: int, mechanism: str) -> list:
        enabled = self._config.enabled_mechanisms
        if mechanism not in enabled:
            response = SaslHandshakeResponse(error_code=ErrorCode.UNSUPPORTED_SASL_MECHANISM, mechanisms=enabled)
            raise CloseConnection(f"unsupported SASL mechanism {mechanism!r} (enabled: {', '.join(enabled)})",
                                  encode_response(correlation_id, ApiKey.SASL_HANDSHAKE, version, response))
        if self._reauthenticating and (mechanism != self.mechanism or version == 0):
            response = SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=enabled)
            raise CloseConnection(f"re-authentication asked for {mechanism} at SaslHandshake v{version}; the "
                                  f"session was authenticated with {self.mechanism}",
                                  encode_response(correlation_id, ApiKey.SASL_HANDSHAKE, version, response))
        self.mechanism = mechanism
        self._server = self._config.new_server(mechanism)
        self._state = "raw" if version == 0 else "authenticate"
        return encode_response(correlation_id, ApiKey.SASL_HANDSHAKE, version,
                               SaslHandshakeResponse(error_code=ErrorCode.NONE, mechanisms=enabled))

    async def _evaluate(self, token: bytes) -> bytes:
        """The server's challenge; SaslAuthenticationError (with Kafka's message for the client) on failure."""
        server = self._server
        assert server is not None
        try:
            await self._config.prepare(server)
            return server.evaluate_response(token)
        except SaslAuthenticationError:
            raise
        except (SaslException, ValueError, UnicodeError) as error:
            log.debug("SASL %s failed: %s", self.mechanism, error)
            raise SaslAuthenticationError(f"Authentication failed during authentication due to invalid credentials "
                                          f"with SASL mechanism {self.mechanism}") from None

    def _complete(self) -> int:
        """Record the authenticated principal; returns the session lifetime in ms (0: none)."""
        server = self._server
        assert server is not None
        principal = KafkaPrincipal(USER_TYPE, server.authorization_id,
                                   token_authenticated=server.token_authenticated)
        if self._reauthenticating and principal != self.principal:
            raise SaslAuthenticationError(  # Kafka's words, principals as Type.name
                f"Cannot change principals during re-authentication from {self.principal.principal_type}."
                f"{self.principal.name}: {principal.principal_type}.{principal.name}")
        # The session ends with the credential (an OAUTHBEARER token's exp) or after connections.max.reauth.ms,
        # whichever comes first; neither: it never ends (lifetime 0).
        limits = [] if server.credential_expiry_ms is None else [
            max(server.credential_expiry_ms - int(time.time() * 1000), 0)]
        if self._config.connections_max_reauth_ms > 0:
            limits.append(self._config.connections_max_reauth_ms)
        lifetime = min(limits, default=0)
        if limits:
            self.session_expiry_ms = _now_ms() + lifetime
        self.principal = principal
        self._state = "complete"
        self._reauthenticating = False
        log.debug("authenticated %s with %s", principal, self.mechanism)
        return lifetime

    async def _authenticate(self, correlation_id: int, version: int, token: bytes, client_host: str) -> list:
        server = self._server
        assert server is not None
        try:
            challenge = await self._evaluate(token)
            lifetime = self._complete() if server.complete else 0
        except SaslAuthenticationError as error:
            log.info("failed authentication with /%s (%s)", client_host, error.message)
            response = SaslAuthenticateResponse(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED,
                                                error_message=error.message)
            raise CloseConnection(f"SASL authentication failed: {error.message}",
                                  encode_response(correlation_id, ApiKey.SASL_AUTHENTICATE, version, response),
                                  self._config.failed_authentication_delay_ms) from None
        response = SaslAuthenticateResponse(error_code=ErrorCode.NONE, auth_bytes=challenge,
                                            session_lifetime_ms=lifetime)
        return encode_response(correlation_id, ApiKey.SASL_AUTHENTICATE, version, response)

    async def _raw_token(self, token: bytes, client_host: str) -> list:
        """A token after SaslHandshake v0: no Kafka header; the challenge goes back as a bare size-prefixed frame.
        There is no way to tell such a client why it failed: the connection just closes."""
        server = self._server
        assert server is not None
        try:
            challenge = await self._evaluate(token)
            if server.complete:
                self._complete()
        except SaslAuthenticationError as error:
            log.info("failed authentication with /%s (%s)", client_host, error.message)
            raise CloseConnection(f"SASL authentication failed: {error.message}", [],
                                  self._config.failed_authentication_delay_ms) from None
        return [INT32.pack(len(challenge)), challenge]  # an empty frame too, as Kafka answers PLAIN's one token
