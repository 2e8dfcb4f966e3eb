"""BrokerConnection: one TCP connection to one broker, speaking Kafka's framed request/response protocol.

- Framing: every request and response is a 4-byte big-endian size followed by that many bytes (kfk.protocol.headers
  writes and reads the headers; the generated codecs do the bodies).
- Correlation ids: each request gets the next id; a broker answers the requests of one connection in the order it
  received them, so the in-flight requests wait in a FIFO and each response must carry the id at its head. A
  response with any other id means the stream is out of step, and the connection is closed.
- Pipelining: many requests may be in flight at once (the producer's max.in.flight.requests.per.connection); a
  request sent with ``expect_response=False`` (Produce with acks=0) takes no place in the FIFO, as the broker sends
  nothing back.
- ApiVersions negotiation: the first request on a connection is ApiVersions at the highest version kfk knows. A
  broker that does not know that version answers UNSUPPORTED_VERSION with a v0 body that lists its own ApiVersions
  range (KIP-511); the client retries with the highest version both know. After that, every API is sent at the
  highest version both sides support (kfk.protocol.apis.highest_common_version) unless the caller caps it.
- Timeouts: a request unanswered after request.timeout.ms fails with KafkaTimeoutError and closes the connection,
  as in the Java client (the responses behind it can no longer be matched safely); so does a connect or handshake
  slower than socket.connection.setup.timeout.ms. One watchdog task per connection checks the deadlines, rather
  than a timer per request: the producer sends thousands of requests a second.
When the connection closes, for whatever reason, every in-flight request fails with the same error.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections import deque
from typing import NamedTuple

from kfk.errors import (
    ErrorCode,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    ProtocolError,
    UnsupportedVersionError,
    raise_for_code,
)
from kfk.protocol.apis import SUPPORTED_VERSIONS, VersionRange, highest_common_version
from kfk.protocol.headers import RequestHeader, decode_response, encode_request
from kfk.protocol.message import Message
from kfk.protocol.messages import API_SCHEMAS, ApiKey
from kfk.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kfk.protocol.primitives import INT16, INT32

__all__ = ["BrokerConnection"]

log = logging.getLogger("kfk.client.connection")

_RESPONSE_HEADER_V0_SIZE = 4  # correlation id; the ApiVersions error code follows it
_WRITE_BUFFER_LIMIT = 4 * 1024 * 1024  # acks=0 sends wait for the socket past this many unsent bytes
_IDLE_WATCH_S = 1.0  # how often the timeout watchdog looks when nothing is close to its deadline


class _InFlight(NamedTuple):
    correlation_id: int
    api_key: int
    api_version: int
    future: asyncio.Future
    deadline: float
    timeout_ms: int


class BrokerConnection:
    """A connection to ``host:port``. ``node_id`` is the broker's id, or a negative id for a bootstrap address
    whose broker id is not known yet (as Java's NetworkClient numbers them)."""

    def __init__(self, host: str, port: int, *, node_id: int, client_id: str, client_software_name: str,
                 client_software_version: str, request_timeout_ms: int, connection_setup_timeout_ms: int) -> None:
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.client_software_name = client_software_name
        self.client_software_version = client_software_version
        self.request_timeout_ms = request_timeout_ms
        self.connection_setup_timeout_ms = connection_setup_timeout_ms
        self.api_versions: dict[int, VersionRange] = {}
        self.finalized_features: dict[str, int] = {}
        """The cluster's finalized feature levels as this broker last knew them (ApiVersions v3+), by feature name:
        the producer reads ``transaction.version`` from them (KIP-890 part 2)."""
        self.finalized_features_epoch = -1
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._read_task: asyncio.Task | None = None
        self._in_flight: deque[_InFlight] = deque()
        self._next_correlation_id = 0
        self._closed_error: KafkaError | None = None
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
        return len(self._in_flight)

    # --- setup ---------------------------------------------------------------------------------------------------

    async def connect(self) -> None:
        """Open the socket and negotiate versions; raises NetworkError (or KafkaTimeoutError) on failure."""
        timeout = self.connection_setup_timeout_ms / 1000
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port), timeout)
        except asyncio.TimeoutError:
            raise KafkaTimeoutError(f"connecting to {self.address} took longer than "
                                    f"{self.connection_setup_timeout_ms} ms") from None
        except OSError as error:
            reason = os.strerror(error.errno) if error.errno else str(error)
            raise NetworkError(f"cannot connect to {self.address}: {reason}") from None
        sock = self._writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._read_task = asyncio.get_running_loop().create_task(self._read_responses())
        try:
            await asyncio.wait_for(self._negotiate_versions(), timeout)
        except asyncio.TimeoutError:
            error = KafkaTimeoutError(f"ApiVersions handshake with {self.address} took longer than "
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

    # --- versions ----------------------------------------------------------------------------------------------------

    def supports(self, api_key: int) -> bool:
        broker = self.api_versions.get(api_key)
        return broker is not None and highest_common_version(ApiKey(api_key), broker.lowest, broker.highest) is not None

    def version(self, api_key: int, highest: int | None = None, lowest: int = 0) -> int:
        """The highest version of ``api_key`` both sides support, within [lowest, highest] when given."""
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
            if self._writer is not None and self._writer.transport.get_write_buffer_size() > _WRITE_BUFFER_LIMIT:
                await self._writer.drain()
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

    def _write(self, request: Message, version: int, expect_response: bool, timeout_ms: int) -> asyncio.Future | None:
        assert self._writer is not None
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        header = RequestHeader(request_api_key=request.API_KEY, request_api_version=version,
                               correlation_id=correlation_id, client_id=self.client_id)
        frame = encode_request(header, request)
        future: asyncio.Future | None = None
        if expect_response:
            loop = asyncio.get_running_loop()
            future = loop.create_future()
            self._in_flight.append(_InFlight(correlation_id, request.API_KEY, version, future,
                                             loop.time() + timeout_ms / 1000, timeout_ms))
            if self._watchdog is None:
                self._watchdog = loop.create_task(self._expire_requests())
        try:
            self._writer.write(frame)
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
            earliest = min((pending.deadline for pending in self._in_flight), default=now + _IDLE_WATCH_S)
            if earliest <= now:
                late = min(self._in_flight, key=lambda pending: pending.deadline)
                name = API_SCHEMAS[late.api_key].name
                self.close(KafkaTimeoutError(f"{name} request to {self.address} got no response within "
                                             f"{late.timeout_ms} ms"))
                return
            await asyncio.sleep(min(earliest - now, _IDLE_WATCH_S))

    async def _read_responses(self) -> None:
        reader = self._reader
        assert reader is not None
        try:
            while True:
                prefix = await reader.readexactly(4)
                size = INT32.unpack(prefix)[0]
                if size < _RESPONSE_HEADER_V0_SIZE:
                    raise ProtocolError(f"response frame of {size} bytes from {self.address}")
                frame = await reader.readexactly(size)
                correlation_id = INT32.unpack_from(frame, 0)[0]
                if not self._in_flight:
                    raise ProtocolError(f"{self.address} sent a response (correlation id {correlation_id}) "
                                        "to no request")
                pending = self._in_flight[0]
                if correlation_id != pending.correlation_id:
                    raise ProtocolError(f"{self.address} answered correlation id {correlation_id} where "
                                        f"{pending.correlation_id} was expected")
                self._in_flight.popleft()
                version = pending.api_version
                if (pending.api_key == ApiKey.API_VERSIONS and len(frame) >= 6
                        and INT16.unpack_from(frame, _RESPONSE_HEADER_V0_SIZE)[0] == ErrorCode.UNSUPPORTED_VERSION):
                    version = 0  # the broker answers a version it does not know with a v0 body (KIP-511)
                try:
                    _, response = decode_response(frame, pending.api_key, version)
                except KafkaError as error:
                    if not pending.future.done():
                        pending.future.set_exception(error)
                    raise
                if not pending.future.done():
                    pending.future.set_result(response)
        except asyncio.IncompleteReadError:
            self.close(NetworkError(f"{self.address} closed the connection"))
        except (OSError, ConnectionError) as error:
            self.close(NetworkError(f"connection to {self.address} failed: {error}"))
        except KafkaError as error:
            log.warning("closing the connection to %s: %s", self.address, error)
            self.close(error)
        except asyncio.CancelledError:
            self.close(NetworkError(f"connection to {self.address} was closed"))
            raise

    # --- teardown ----------------------------------------------------------------------------------------------------

    def close(self, error: KafkaError | None = None) -> None:
        """Close the socket and fail every in-flight request with ``error`` (NetworkError by default)."""
        if self._closed_error is not None:
            return
        self._closed_error = error or NetworkError(f"connection to {self.address} was closed")
        self._connected = False
        while self._in_flight:
            pending = self._in_flight.popleft()
            if not pending.future.done():
                pending.future.set_exception(self._closed_error)
        if self._writer is not None:
            self._writer.close()
        if self._read_task is not None and self._read_task is not asyncio.current_task():
            self._read_task.cancel()
        if self._watchdog is not None and self._watchdog is not asyncio.current_task():
            self._watchdog.cancel()
