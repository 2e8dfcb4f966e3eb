"""BrokerChannel: one connection from this broker to another, for inter-broker requests (follower fetches,
OffsetForLeaderEpoch, ControlledShutdown). Kafka's NetworkClient reduced to what a replica fetcher needs: one request
in flight at a time, a timeout per request, and a reconnect on the next request after any failure. An asyncio shell
around kfk.protocol.connection's ClientConnection, which frames, numbers and matches the requests. When the
inter-broker listener (or, for a node's connections to the controllers, the controller listener) is SSL or SASL_SSL,
the broker hands in its client-side SSLContext and the connection runs TLS (the other node's certificate checked
against the broker's trust store, its host name too unless ssl.endpoint.identification.algorithm is empty). When it uses SASL (`sasl`: a factory of the mechanism's clients),
each new connection authenticates first (kfk.security.sasl.exchange). A refused authentication or TLS handshake is
logged as an error (once until a connection succeeds again: the caller retries), since only the operator can fix it."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable

from kfk.errors import KafkaError, NetworkError, SaslAuthenticationError, UnsupportedSaslMechanismError
from kfk.protocol.connection import ClientConnection, StreamError
from kfk.protocol.message import Message
from kfk.security.sasl import SaslClient
from kfk.security.sasl.exchange import authenticate

#: The SaslAuthenticate version brokers use between themselves (KIP-368's session lifetime, not flexible).
SASL_AUTHENTICATE_VERSION = 1

_READ_BYTES = 256 * 1024  # what one read of the socket asks for

log = logging.getLogger("kfk.replication.broker_channel")


class BrokerChannel:
    def __init__(self, host: str, port: int, client_id: str, request_timeout_ms: int = 30_000,
                 ssl_context: ssl.SSLContext | None = None, sasl: Callable[[], SaslClient] | None = None) -> None:
        self.host = host
        self.ssl_context = ssl_context
        self.port = port
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._protocol: ClientConnection[None] | None = None
        self._lock = asyncio.Lock()
        self._sasl = sasl
        self._authentication_failed = False  # logged since the last request that succeeded
        self._answered = False  # the current connection had an answer

    def __repr__(self) -> str:
        return f"BrokerChannel({self.host}:{self.port})"

    async def request(self, message: Message, api_version: int, timeout_ms: int | None = None) -> Message:
        """Send one request and wait for its response; NetworkError (and a closed connection) on any failure."""
        timeout = (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
        async with self._lock:
            try:
                # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancellation that arrives as
                # the response does, and a fetcher being stopped would then go on fetching.
                async with asyncio.timeout(timeout):
                    return await self._round_trip(message, api_version)
            except (OSError, asyncio.TimeoutError, KafkaError) as error:
                refusal = self._refusal(error)
                if refusal is not None and not self._authentication_failed:
                    self._authentication_failed = True
                    log.error("connection to %s:%d (client id %s) failed authentication: %s", self.host, self.port,
                              self.client_id, refusal)
                self._close()
                raise NetworkError(f"request {message.NAME} to {self.host}:{self.port} failed: {error!r}") from error

    def _refusal(self, error: BaseException) -> str | None:
        """Why the other node refused this one, if `error` says so: a SASL failure, a failed TLS handshake, or a TLS
        connection closed before its first answer (in TLS 1.3 a server checks the client's certificate after the
        client's side of the handshake is done, and its alert is often lost when it closes the connection)."""
        if isinstance(error, (SaslAuthenticationError, UnsupportedSaslMechanismError, ssl.SSLError)):
            return str(error)
        if self.ssl_context is not None and not self._answered and isinstance(error, ConnectionResetError):
            return (f"the TLS connection was closed before any answer ({error}): the other node may have refused "
                    f"this node's certificate (ssl.keystore.*) or TLS settings")
        return None

    async def _round_trip(self, message: Message, api_version: int) -> Message:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(
                self.host, self.port, ssl=self.ssl_context, server_hostname=self.host if self.ssl_context else None)
            self._protocol = ClientConnection(self.client_id)
            self._answered = False
            if self._sasl is not None:
                await authenticate(self._send, self._sasl(), SASL_AUTHENTICATE_VERSION)
        response = await self._send(message, api_version)
        self._authentication_failed = False
        return response

    async def _send(self, message: Message, api_version: int) -> Message:
        assert self._reader is not None and self._writer is not None and self._protocol is not None
        self._writer.write(self._protocol.send_request(message, api_version, None))
        await self._writer.drain()
        while True:
            data = await self._reader.read(_READ_BYTES)
            if not data:
                raise ConnectionResetError("the broker closed the connection")
            for event in self._protocol.receive_data(data):
                if event.__class__ is StreamError:
                    raise event.error
                self._answered = True
                return event.message

    def _close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = self._protocol = None

    async def close(self) -> None:
        async with self._lock:
            self._close()
