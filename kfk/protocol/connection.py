"""One Kafka connection, sans-I/O: bytes in, frames and responses out; it never touches a socket, a loop or a clock.

Like h11 for HTTP, the object holds the protocol state of one connection and the caller does the I/O: the broker's
socket server, the client's BrokerConnection and the inter-broker BrokerChannel are asyncio shells that feed it the
bytes they read and write the bytes it returns. Tests drive it with no transport at all.

Both roles share the receive side: every request and response is a 4-byte big-endian size and that many bytes. A
size outside [minimum, maximum] means the stream is out of step (or hostile); the connection then reports a
StreamError event after the frames before it and parses nothing more, and the shell closes the socket (the broker
after answering those frames). Nothing is allocated for a frame before its size has been checked. The two roles then
allocate differently, because they trust their peers differently:

- the broker's (ServerConnection): a large request's memory grows with the bytes that actually arrive
  (FIRST_FRAME_CHUNK_BYTES at first, then doubling up to its size), so that a client that announces 100 MB and sends
  ten bytes costs a megabyte, not a hundred;
- the client's (ClientConnection): a response's buffer is allocated once, whole, from its size prefix, and the kernel
  fills it with no copy on the way: a 1 MiB fetch response doubling from a smaller buffer cost a copy (and fresh
  pages) per doubling. The client's own bound (max_response_bytes, librdkafka's receive.message.max.bytes) is what
  keeps a broken or hostile broker from making it allocate more than that.

Receiving is allocation-light, for the produce and fetch hot paths: small frames are parsed out of one staging
buffer, and a frame of DIRECT_FRAME_BYTES or more gets a bytearray of its own that the caller fills directly
(get_buffer/buffer_updated, the shape of asyncio.BufferedProtocol), so the kernel writes a produce request's records
straight into the frame the log later writes to its file.

- ServerConnection: frames in (size prefix stripped, as bytearrays the dispatcher may edit in place), with
  socket.request.max.bytes as the maximum (the shell may lower it: a SASL listener's connection is held to
  sasl.server.max.receive.size until it is authenticated).
- ClientConnection: send_request() encodes a request with the next correlation id and remembers it; a broker answers
  one connection's requests in order, so the in-flight requests form a FIFO, and a response whose correlation id is
  not the oldest in-flight request's is a StreamError. A request that expects no response (Produce with acks=0)
  takes no place in the FIFO. Responses are decoded with the header and body versions of their request, including
  ApiVersions' rule: its response header is always v0, and a broker that does not know the requested version
  answers UNSUPPORTED_VERSION with a v0 body (KIP-511). A request with a `read_response(frame, version)` method (the
  producer's SingleProduceRequest) reads its own response first, and the generic decoder reads it when that gives
  None. They are decoded from a memoryview of their frame, so that
  their record sets (a Fetch response's records) are slices of the frame, not copies: the frame lives as long as
  one of them is referenced.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Generic, NamedTuple, TypeVar

from kfk.errors import ErrorCode, KafkaError, ProtocolError
from kfk.protocol.headers import decode_response, encode_request_frame
from kfk.protocol.message import Buffer, Message
from kfk.protocol.messages import ApiKey
from kfk.protocol.primitives import INT16, INT32

__all__ = [
    "ClientConnection",
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DIRECT_FRAME_BYTES",
    "FIRST_FRAME_CHUNK_BYTES",
    "InFlightRequest",
    "Response",
    "STAGING_BYTES",
    "ServerConnection",
    "StreamError",
]

_SIZE_PREFIX = 4
#: Unparsed bytes of small frames wait here; a frame of DIRECT_FRAME_BYTES or more is received into its own buffer.
STAGING_BYTES = 64 * 1024
DIRECT_FRAME_BYTES = 16 * 1024
#: A large request's first allocation on the broker: a whole ordinary produce request (librdkafka's message.max.bytes
#: is 1 MB), so the hot path allocates once; only larger requests grow, by doubling, as their bytes arrive.
FIRST_FRAME_CHUNK_BYTES = 1024 * 1024
#: The largest response a client accepts unless told otherwise: librdkafka's receive.message.max.bytes default (Java's
#: clients have no bound; a client that allocates a response whole from its announced size needs one).
DEFAULT_MAX_RESPONSE_BYTES = 100_000_000
#: A response starts with its correlation id (header v0); a request with api key, version and correlation id.
_RESPONSE_HEADER_V0_SIZE = 4
_REQUEST_HEADER_MIN_SIZE = 8
_INT32_MAX = 2**31 - 1

C = TypeVar("C")


class StreamError(NamedTuple):
    """The stream is out of step: the shell closes the connection. Always the last event a connection reports."""

    error: KafkaError


class _FrameReceiver:
    """The receive side of both roles: size-prefixed frames out of a byte stream, within [minimum, maximum] bytes."""

    __slots__ = ("_min_frame_bytes", "_max_frame_bytes", "_first_chunk_bytes", "_staging", "_staging_view", "_start",
                 "_end", "_frame", "_frame_view", "_frame_filled", "_frame_size", "_broken", "_what")

    def __init__(self, min_frame_bytes: int, max_frame_bytes: int, first_chunk_bytes: int, what: str) -> None:
        self._min_frame_bytes = min_frame_bytes
        self._max_frame_bytes = max_frame_bytes
        #: A large frame's first allocation (at most its size): it grows by doubling from there as its bytes arrive.
        self._first_chunk_bytes = first_chunk_bytes
        self._what = what  # "request" or "response", for error messages
        self._staging = bytearray(STAGING_BYTES)
        self._staging_view = memoryview(self._staging)
        self._start = 0  # unparsed bytes of the staging buffer: [_start, _end)
        self._end = 0
        self._frame: bytearray | None = None  # a large frame being received directly (may be shorter than its size)
        self._frame_view: memoryview | None = None
        self._frame_filled = 0
        self._frame_size = 0  # the size the large frame will have
        self._broken = False  # a StreamError was reported: nothing more is parsed

    def get_buffer(self) -> memoryview:
        """Where the next bytes received should go (never empty); report how many were written with buffer_updated."""
        if self._frame_view is not None:
            if self._frame_filled == len(self._frame_view):
                self._grow_frame()
            return self._frame_view[self._frame_filled:]
        if self._start and STAGING_BYTES - self._end < DIRECT_FRAME_BYTES:
            # Move the partial frame to the front so that a whole small frame always fits.
            pending = self._end - self._start
            self._staging[:pending] = self._staging_view[self._start:self._end]
            self._start, self._end = 0, pending
        return self._staging_view[self._end:]

    @property
    def receiving(self) -> bool:
        """Whether part of a frame has arrived and the rest has not (the peer is in the middle of a frame)."""
        return self._frame is not None or self._end > self._start

    @property
    def pending_frame_bytes(self) -> int:
        """The announced size of the large frame being received, 0 if none: what it will hold once complete."""
        return self._frame_size if self._frame is not None else 0

    def _grow_frame(self) -> None:
        """Double the large frame's buffer (up to its size) once the bytes received have filled it (the broker's role
        only: a client's first chunk is the whole frame). Called from get_buffer, never buffer_updated: the transport
        still holds the previous buffer's view until it asks anew."""
        frame = self._frame
        assert frame is not None
        grown = bytearray(min(self._frame_size, 2 * len(frame)))
        grown[:self._frame_filled] = frame
        self._frame, self._frame_view = grown, memoryview(grown)

    def _frames_received(self, nbytes: int) -> list:
        """The frames completed by `nbytes` more bytes in the buffer of get_buffer(), then a StreamError if the stream
        turned bad; an empty list while a frame is incomplete."""
        if self._frame is not None:
            self._frame_filled += nbytes
            if self._frame_filled < self._frame_size:
                return []
            frame, self._frame, self._frame_view = self._frame, None, None
            return [frame]
        self._end += nbytes
        return self._parse_staging()

    def _parse_staging(self) -> list:
        frames: list = []
        staging, view = self._staging, self._staging_view
        start, end = self._start, self._end
        while not self._broken and end - start >= _SIZE_PREFIX:
            size = INT32.unpack_from(staging, start)[0]
            if not self._min_frame_bytes <= size <= self._max_frame_bytes:
                self._broken = True
                frames.append(StreamError(ProtocolError(
                    f"{self._what} size {size} is outside {self._min_frame_bytes}..{self._max_frame_bytes}")))
                break
            body_start = start + _SIZE_PREFIX
            available = end - body_start
            if available >= size:
                frames.append(staging[body_start:body_start + size])
                start = body_start + size
            elif size >= DIRECT_FRAME_BYTES:
                frame = bytearray(min(size, self._first_chunk_bytes))  # > available: staging is smaller
                frame[:available] = view[body_start:end]
                self._frame, self._frame_view, self._frame_filled = frame, memoryview(frame), available
                self._frame_size = size
                start = end
                break
            else:
                break
        if start == end:
            start = end = 0
        self._start, self._end = start, end
        return frames

    def _feed(self, data: bytes) -> list:
        """_frames_received for bytes that were read elsewhere (one copy into the receive buffers)."""
        events: list = []
        position, length = 0, len(data)
        while position < length and not self._broken:
            buffer = self.get_buffer()
            count = min(len(buffer), length - position)
            buffer[:count] = data[position:position + count]
            position += count
            events.extend(self._frames_received(count))
        return events


class ServerConnection(_FrameReceiver):
    """The broker's side of one client connection: request frames in, size prefix stripped.

    `max_request_bytes` is socket.request.max.bytes: a larger (or negative, or headerless) size is a StreamError."""

    __slots__ = ()

    def __init__(self, max_request_bytes: int) -> None:
        super().__init__(_REQUEST_HEADER_MIN_SIZE, max_request_bytes, FIRST_FRAME_CHUNK_BYTES, "request")

    @property
    def max_request_bytes(self) -> int:
        """The largest request accepted: each size prefix is checked against the bound in force when it is parsed
        (a SASL listener lowers it to sasl.server.max.receive.size until the connection is authenticated)."""
        return self._max_frame_bytes

    @max_request_bytes.setter
    def max_request_bytes(self, max_request_bytes: int) -> None:
        self._max_frame_bytes = max_request_bytes

    def buffer_updated(self, nbytes: int) -> list[bytearray | StreamError]:
        """The request frames completed by `nbytes` more bytes written into get_buffer(), in order."""
        return self._frames_received(nbytes)

    def receive_data(self, data: bytes) -> list[bytearray | StreamError]:
        """The request frames completed by `data`, in order."""
        return self._feed(data)


class InFlightRequest(NamedTuple, Generic[C]):
    """A request sent and not answered yet; `context` is the shell's own (a future, a deadline...)."""

    correlation_id: int
    api_key: int
    api_version: int
    context: C
    #: The request's own fast reader of its response (None: the generic decoder).
    read_response: Callable[[Buffer, int], Message | None] | None = None


class Response(NamedTuple, Generic[C]):
    """A decoded response and the context its request was sent with."""

    correlation_id: int
    api_key: int
    api_version: int
    message: Message
    context: C


class ClientConnection(_FrameReceiver, Generic[C]):
    """The client's side of one connection to a broker: requests out, responses in, matched by correlation id.

    `max_response_bytes` bounds a response frame; a response's buffer is allocated whole from its size prefix."""

    __slots__ = ("client_id", "_next_correlation_id", "_in_flight")

    def __init__(self, client_id: str | None, *, max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES) -> None:
        super().__init__(_RESPONSE_HEADER_V0_SIZE, max_response_bytes, max_response_bytes, "response")
        self.client_id = client_id
        self._next_correlation_id = 0
        self._in_flight: deque[InFlightRequest[C]] = deque()

    @property
    def in_flight(self) -> deque[InFlightRequest[C]]:
        """The requests awaiting a response, oldest first (the shell fails their contexts when it closes)."""
        return self._in_flight

    def send_request(self, request: Message, api_version: int, context: C, *,
                     expect_response: bool = True) -> bytes:
        """The frame to write for `request` at `api_version`, with the next correlation id. Unless no response is
        expected (acks=0 produce), the request joins the in-flight FIFO with `context`."""
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & _INT32_MAX
        api_key = request.API_KEY
        frame = encode_request_frame(api_key, api_version, correlation_id, self.client_id, request)
        if expect_response:
            self._in_flight.append(InFlightRequest(correlation_id, api_key, api_version, context,
                                                   getattr(request, "read_response", None)))
        return frame

    def receive_data(self, data: bytes) -> list[Response[C] | StreamError]:
        """The responses completed by `data`, in order, then a StreamError if the stream turned bad."""
        return self._responses(self._feed(data))

    def buffer_updated(self, nbytes: int) -> list[Response[C] | StreamError]:
        """As receive_data, for `nbytes` written into get_buffer()."""
        return self._responses(self._frames_received(nbytes))

    def _responses(self, frames: list) -> list:
        for index, frame in enumerate(frames):
            if frame.__class__ is StreamError:
                return frames
            frames[index] = event = self._response(frame)
            if event.__class__ is StreamError:
                self._broken = True
                del frames[index + 1:]
                return frames
        return frames

    def _response(self, frame: bytearray) -> Response[C] | StreamError:
        correlation_id = INT32.unpack_from(frame, 0)[0]
        if not self._in_flight:
            return StreamError(ProtocolError(f"a response (correlation id {correlation_id}) to no request"))
        pending = self._in_flight[0]
        if correlation_id != pending.correlation_id:
            return StreamError(ProtocolError(f"a response to correlation id {correlation_id} where "
                                             f"{pending.correlation_id} was expected"))
        api_key, version = pending.api_key, pending.api_version
        if (api_key == ApiKey.API_VERSIONS and len(frame) >= _RESPONSE_HEADER_V0_SIZE + 2
                and INT16.unpack_from(frame, _RESPONSE_HEADER_V0_SIZE)[0] == ErrorCode.UNSUPPORTED_VERSION):
            version = 0  # the broker answers a version it does not know with a v0 body (KIP-511)
        read = pending.read_response
        message = read(frame, version) if read is not None else None
        try:
            if message is None:
                _, message = decode_response(memoryview(frame), api_key, version)
        except KafkaError as error:
            return StreamError(error)  # the request stays in flight: the shell fails it with the others
        self._in_flight.popleft()
        return Response(correlation_id, api_key, pending.api_version, message, pending.context)
