"""BrokerConnection: one TCP connection to one broker; an asyncio shell around kfk.protocol.connection's
ClientConnection, which does the framing, the correlation ids and the FIFO of in-flight requests (a response out of
step closes the connection). The socket is an asyncio BufferedProtocol reading into ClientConnection's buffers, so a
large fetch response is received into one buffer, allocated once from its size prefix (at most max_response_bytes:
receive.message.max.bytes), with no intermediate copies and no reader task; its records reach the fetcher as slices
of that buffer.

- Pipelining: many requests may be in flight at once (the producer's max.in.flight.requests.per.connection); a
  request sent with ``expect_response=False`` (Produce with acks=0) is not waited for, as the broker sends nothing
  back.
- ApiVersions negotiation: the first request on a connection is ApiVersions at the highest version kfk knows. A
  broker that does not know that version answers UNSUPPORTED_VERSION with a v0 body that lists its own ApiVersions
  range (KIP-511); the client retries with the highest version both know. After that, every API is sent at the
  highest version both sides support (kfk.protocol.apis.highest_common_version) unless the caller caps it.
- SASL: on a SASL_PLAINTEXT listener the connection authenticates right after ApiVersions (SaslHandshake, then
  SaslAuthenticate until the mechanism completes: kfk.security.sasl.exchange) before any other request; a refusal
  fails connect() with the broker's SaslAuthenticationError. The client does not re-authenticate (KIP-368): a broker
  with connections.max.reauth.ms closes the connection when the session ends and the client reconnects.
- Timeouts: a request unanswered after request.timeout.ms fails with KafkaTimeoutError and closes the connection,
  as in the Java client (the responses behind it can no longer be matched safely); so does a connect or handshake
  slower than socket.connection.setup.timeout.ms. One watchdog task per connection checks the deadlines, rather
  than a timer per request: the producer sends thousands of requests a second.
- TLS (security.protocol=SSL): the transport is wrapped in the client's SSLContext (kfk.security.tls), the
  handshake is part of the connection setup and its timeout; the broker's certificate is checked against the trust
  store, and its host name unless ssl.endpoint.identification.algorithm is empty.
- A broker that closes the connection before it has answered anything but ApiVersions is often a listener of
  another security protocol (a plaintext client on a SASL listener gets its ApiVersions answered, then the next
  request closes the connection; on a TLS listener the handshake fails at once): that NetworkError says so and names
  security.protocol, where a later close says only that the broker closed the connection.
When the connection closes, for whatever reason, every in-flight request fails with the same error.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import ssl
from collections.abc import Callable
from typing import NamedTuple

from kfk.errors import ErrorCode, KafkaError, KafkaTimeoutError, NetworkError, UnsupportedVersionError, raise_for_code
from kfk.protocol.apis import SUPPORTED_VERSIONS, VersionRange, highest_common_version
from kfk.protocol.connection import DEFAULT_MAX_RESPONSE_BYTES, ClientConnection, StreamError
from kfk.protocol.message import Message
from kfk.protocol.messages import API_SCHEMAS, ApiKey
from kfk.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kfk.security.sasl import SaslClient
from kfk.security.sasl.exchange import authenticate

__all__ = ["BrokerConnection"]

log = logging.getLogger("kfk.client.connection")

_WRITE_BUFFER_LIMIT = 4 * 1024 * 1024  # acks=0 sends wait for the socket past this many unsent bytes
_IDLE_WATCH_S = 1.0  # how often the timeout watchdog looks when nothing is close to its deadline


class _ResponseCallback:
    """Stands where an in-flight request's future would (the connection only asks done() and calls set_result or
    set_exception), running ``callback(response, error)`` at once: the producer's sender reacts to each Produce
    response straight from the receive path, without a future and a turn of the loop per response."""

    __slots__ = ("_callback", "_done")

    def __init__(self, callback: Callable[[Message | None, KafkaError | None], None]) -> None:
        self._callback = callback
        self._done = False

    def done(self) -> bool:
        return self._done

    def set_result(self, response: Message) -> None:
        self._run(response, None)

    def set_exception(self, error: KafkaError) -> None:
        self._run(None, error)

    def _run(self, response: Message | None, error: KafkaError | None) -> None:
        self._done = True
        try:
            self._callback(response, error)
        except Exception:  # noqa: BLE001 - one caller's bug must not break the receive path of the others
            log.exception("a response callback failed")


class _Waiting(NamedTuple):
    """What the connection keeps with each in-flight request (ClientConnection's context)."""

    future: asyncio.Future | _ResponseCallback
    deadline: float
    timeout_ms: int


class BrokerConnection:
    """A connection to ``host:port``. ``node_id`` is the broker's id, or a negative id for a bootstrap address
    whose broker id is not known yet (as Java's NetworkClient numbers them)."""

    def __init__(self, host: str, port: int, *, node_id: int, client_id: str, client_software_name: str,
                 client_software_version: str, request_timeout_ms: int, connection_setup_timeout_ms: int,
                 ssl_context: ssl.SSLContext | None = None, sasl: Callable[[], SaslClient] | None = None,
                 max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> None:
        self.host = host
        self.ssl_context = ssl_context
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.client_software_name = client_software_name
        self.client_software_version = client_software_version
        self.request_timeout_ms = request_timeout_ms
        self.connection_setup_timeout_ms = connection_setup_timeout_ms
        self._sasl = sasl
        self._api_versions: dict[int, VersionRange] = {}
        self._versions: dict[tuple[int, int | None, int], int] = {}
        """version()'s answers, by its arguments: the producer asks for Produce's version with every request."""
        self._socket: _Socket | None = None
        self._protocol: ClientConnection[_Waiting] = ClientConnection(client_id, max_response_bytes=max_response_bytes)
        self.finalized_features: dict[str, int] = {}
        """The cluster's finalized feature levels as this broker last knew them (ApiVersions v3+), by feature name:
        the producer reads ``transaction.version`` from them (KIP-890 part 2)."""
        self.finalized_features_epoch = -1
        self._closed_error: KafkaError | None = None
        #: Whether the broker answered a request other than ApiVersions (a close before then may be a listener of
        #: another security protocol: _peer_closed).
        self._answered = False
        self._connected = False
        self._watchdog: asyncio.Task | None = None

    def __repr__(self) -> str:
        return f"BrokerConnection(node {self.node_id} at {self.host}:{self.port})"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def connected(self) -> bool:
        return self._connected and self._closed_error is None

    @property
    def in_flight_count(self) -> int:
        return len(self._protocol.in_flight)

    # --- setup ---------------------------------------------------------------------------------------------------

    async def connect(self) -> None:
        """Open the socket and negotiate versions; raises NetworkError (or KafkaTimeoutError) on failure."""
        timeout = self.connection_setup_timeout_ms / 1000
        try:
            _, self._socket = await asyncio.wait_for(asyncio.get_running_loop().create_connection(
                lambda: _Socket(self), self.host, self.port, ssl=self.ssl_context,
                server_hostname=self.host if self.ssl_context is not None else None), timeout)
        except asyncio.TimeoutError:
            raise KafkaTimeoutError(f"connecting to {self.address} took longer than "
                                    f"{self.connection_setup_timeout_ms} ms") from None
        except socket.gaierror as error:  # its errno is getaddrinfo's (negative), not one os.strerror knows
            raise NetworkError(f"cannot resolve host {self.host}: {error.strerror}") from None
        except ssl.SSLError as error:  # an untrusted certificate, a wrong host name, a refused client certificate
            raise NetworkError(f"TLS handshake with {self.address} failed: "
                               f"{getattr(error, 'verify_message', None) or error.reason or error}") from None
        except OSError as error:
            reason = os.strerror(error.errno) if error.errno else str(error)
            raise NetworkError(f"cannot connect to {self.address}: {reason}") from None
        try:
            await asyncio.wait_for(self._negotiate_versions(), timeout)
            if self._sasl is not None:
                await asyncio.wait_for(self._authenticate(self._sasl()), timeout)
        except asyncio.TimeoutError:
            error = KafkaTimeoutError(f"ApiVersions and SASL handshake with {self.address} took longer than "
                                      f"{self.connection_setup_timeout_ms} ms")
            self.close(error)
            raise error from None
        except KafkaError as error:
            self.close(error)
            raise
        self._connected = True

    async def _negotiate_versions(self) -> None:
        version = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS].highest
        request = ApiVersionsRequest(client_software_name=self.client_software_name,
                                     client_software_version=self.client_software_version)
        for _ in range(2):
            response = await self._write(request, version, True, self.connection_setup_timeout_ms)
            assert isinstance(response, ApiVersionsResponse)
            if response.error_code == ErrorCode.UNSUPPORTED_VERSION:
                broker_range = {entry.api_key: entry for entry in response.api_keys}.get(ApiKey.API_VERSIONS)
                retry = (highest_common_version(ApiKey.API_VERSIONS, broker_range.min_version,
                                                broker_range.max_version) if broker_range else 0)
                if retry is None or retry >= version:
                    break
                version = retry
                continue
            raise_for_code(response.error_code)
            self.api_versions = {entry.api_key: VersionRange(entry.min_version, entry.max_version)
                                 for entry in response.api_keys}
            self.finalized_features = {feature.name: feature.max_version_level
                                       for feature in response.finalized_features}
            self.finalized_features_epoch = response.finalized_features_epoch
            return
        raise UnsupportedVersionError(f"{self.address} supports no ApiVersions version that kfk knows")

    async def _authenticate(self, client: SaslClient) -> None:
        def round_trip(request: Message, version: int) -> asyncio.Future:
            future = self._write(request, version, True, self.connection_setup_timeout_ms)
            assert future is not None
            return future

        await authenticate(round_trip, client, self.version(ApiKey.SASL_AUTHENTICATE))

    # --- versions ----------------------------------------------------------------------------------------------------

    @property
    def api_versions(self) -> dict[int, VersionRange]:
        """The broker's version range of each API it offers, from its ApiVersions answer."""
        return self._api_versions

    @api_versions.setter
    def api_versions(self, ranges: dict[int, VersionRange]) -> None:
        self._api_versions = ranges
        self._versions.clear()

    def supports(self, api_key: int) -> bool:
        broker = self.api_versions.get(api_key)
        return broker is not None and highest_common_version(ApiKey(api_key), broker.lowest, broker.highest) is not None

    def version(self, api_key: int, highest: int | None = None, lowest: int = 0) -> int:
        """The highest version of ``api_key`` both sides support, within [lowest, highest] when given."""
        chosen = self._versions.get((api_key, highest, lowest))
        if chosen is not None:
            return chosen
        broker = self.api_versions.get(api_key)
        chosen = None
        if broker is not None:
            ours = SUPPORTED_VERSIONS.get(ApiKey(api_key))
            if ours is not None:
                top = min(ours.highest, broker.highest, highest if highest is not None else ours.highest)
                if top >= max(ours.lowest, broker.lowest, lowest):
                    chosen = top
        if chosen is None:
            name = API_SCHEMAS[api_key].name if api_key in API_SCHEMAS else str(api_key)
            offered = f"v{broker.lowest}-v{broker.highest}" if broker is not None else "no version"
            raise UnsupportedVersionError(f"the broker at {self.address} does not support {name} in a version kfk "
                                          f"can use (it offers {offered})")
        self._versions[api_key, highest, lowest] = chosen
        return chosen

    # --- requests ----------------------------------------------------------------------------------------------------

    async def send(self, request: Message, version: int | None = None, *, expect_response: bool = True,
                   timeout_ms: int | None = None, highest: int | None = None) -> Message | None:
        """Send ``request`` (at ``version``, or the highest both sides know, capped at ``highest``) and return the
        decoded response (None when ``expect_response`` is False). ``timeout_ms`` extends the request timeout for
        requests the broker may legitimately hold (a long-poll fetch)."""
        future = self.send_request(request, version, expect_response=expect_response, timeout_ms=timeout_ms,
                                   highest=highest)
        if future is None:
            if self._socket is not None:
                await self._socket.drain(_WRITE_BUFFER_LIMIT)
            return None
        return await future

    def send_request(self, request: Message, version: int | None = None, *, expect_response: bool = True,
                     timeout_ms: int | None = None, highest: int | None = None) -> asyncio.Future | None:
        """Write ``request`` now and return the future of its response (None when none is expected). For callers
        on the hot path (the producer's sender) that react to the answer in a callback instead of a task."""
        if not self.connected:
            raise self._closed_error or NetworkError(f"connection to {self.address} is not open")
        if version is None:
            version = self.version(request.API_KEY, highest)
        return self._write(request, version, expect_response,
                           self.request_timeout_ms if timeout_ms is None else timeout_ms)

    def send_request_then(self, request: Message, callback: Callable[[Message | None, KafkaError | None], None]
                          ) -> None:
        """Write ``request`` now (at the highest version both sides know) and call ``callback(response, None)``
        when its response is read, or ``callback(None, error)`` once it cannot be (the write failed, the connection
        closed, the request timed out): exactly once, on the loop's thread, from inside the connection's receive or
        close -- for the producer's sender, which sends thousands of requests a second."""
        waiter = _ResponseCallback(callback)
        try:
            if not self.connected:
                raise self._closed_error or NetworkError(f"connection to {self.address} is not open")
            self._write(request, self.version(request.API_KEY), True, self.request_timeout_ms, waiter)
        except KafkaError as error:
            if not waiter.done():  # a failed write closes the connection, which may have failed it already
                waiter.set_exception(error)

    def _write(self, request: Message, version: int, expect_response: bool, timeout_ms: int,
               waiter: _ResponseCallback | None = None) -> asyncio.Future | None:
        assert self._socket is not None
        if self._closed_error is not None:  # the broker closed at once (e.g. right after a TLS handshake)
            raise self._closed_error
        future: asyncio.Future | _ResponseCallback | None = None
        waiting: _Waiting | None = None
        if expect_response:
            loop = asyncio.get_running_loop()
            future = waiter or loop.create_future()
            waiting = _Waiting(future, loop.time() + timeout_ms / 1000, timeout_ms)
            if self._watchdog is None:
                self._watchdog = loop.create_task(self._expire_requests())
        frame = self._protocol.send_request(request, version, waiting, expect_response=expect_response)
        try:
            self._socket.transport.write(frame)
        except (OSError, RuntimeError) as error:
            failure = NetworkError(f"connection to {self.address} failed while sending: {error}")
            self.close(failure)
            raise failure from None
        return future

    async def _expire_requests(self) -> None:
        """One timer per connection instead of one per request: wake at the earliest deadline of the requests in
        flight, and close the connection if one has passed (the responses behind it can no longer be matched)."""
        loop = asyncio.get_running_loop()
        while self._closed_error is None:
            now = loop.time()
            in_flight = self._protocol.in_flight
            earliest = min((pending.context.deadline for pending in in_flight), default=now + _IDLE_WATCH_S)
            if earliest <= now:
                late = min(in_flight, key=lambda pending: pending.context.deadline)
                name = API_SCHEMAS[late.api_key].name
                self.close(KafkaTimeoutError(f"{name} request to {self.address} got no response within "
                                             f"{late.context.timeout_ms} ms"))
                return
            await asyncio.sleep(min(earliest - now, _IDLE_WATCH_S))

    def _received(self, events: list) -> None:
        """Complete the futures of the responses ClientConnection decoded; close on a StreamError."""
        for event in events:
            if event.__class__ is StreamError:
                log.warning("closing the connection to %s: %s", self.address, event.error)
                self.close(event.error)
                return
            if not self._answered and event.api_key != ApiKey.API_VERSIONS:
                self._answered = True
            future = event.context.future
            if not future.done():
                future.set_result(event.message)

    # --- teardown ----------------------------------------------------------------------------------------------------

    def _peer_closed(self, exc: Exception | None) -> None:
        """The broker closed the connection (or reset it: `exc`). Before it has answered anything but ApiVersions,
        the likely cause is a listener that wants another security protocol, and the error says which to set."""
        closed = f"connection to {self.address} failed: {exc}" if exc is not None else \
            f"{self.address} closed the connection"
        if not self._answered:
            protocol = ("SASL_" if self._sasl is not None else "") + ("SSL" if self.ssl_context is not None
                                                                      else "PLAINTEXT")
            others = [name for name in ("SSL", "SASL_PLAINTEXT", "SASL_SSL") if name != protocol]
            closed += (f" before answering anything but ApiVersions: if its listener's security protocol is "
                       f"{', '.join(others[:-1])} or {others[-1]}, set that security.protocol (this client uses "
                       f"{protocol}) with its ssl.* or sasl.* settings in the client's config (kfk's tools: "
                       f"--command-config FILE)")
        self.close(NetworkError(closed))

    def close(self, error: KafkaError | None = None) -> None:
        """Close the socket and fail every in-flight request with ``error`` (NetworkError by default)."""
        if self._closed_error is not None:
            return
        self._closed_error = error or NetworkError(f"connection to {self.address} was closed")
        self._connected = False
        in_flight = self._protocol.in_flight
        while in_flight:
            future = in_flight.popleft().context.future
            if not future.done():
                future.set_exception(self._closed_error)
        if self._socket is not None:
            self._socket.transport.close()
        if self._watchdog is not None and self._watchdog is not asyncio.current_task():
            self._watchdog.cancel()


class _Socket(asyncio.BufferedProtocol):
    """The socket of a BrokerConnection: the kernel reads straight into the buffers its ClientConnection hands out
    (a large fetch response into a frame of its own), and the responses they complete go to the connection."""

    def __init__(self, connection: BrokerConnection) -> None:
        self._connection = connection
        self._protocol = connection._protocol
        self.transport: asyncio.Transport
        self._writing_paused = False
        self._drain_waiter: asyncio.Future | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._protocol.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._connection._received(self._protocol.buffer_updated(nbytes))

    def eof_received(self) -> bool:
        self._connection._peer_closed(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._connection._peer_closed(exc)
        self.resume_writing()

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    async def drain(self, limit: int) -> None:
        """Wait for the socket to take the bytes written, when more than `limit` of them wait (acks=0 sends, which
        no response paces)."""
        if self.transport.get_write_buffer_size() <= limit or not self._writing_paused:
            return
        self._drain_waiter = asyncio.get_running_loop().create_future()
        try:
            await self._drain_waiter
        finally:
            self._drain_waiter = None
