"""The socket server: asyncio listeners, ordered responses, limits, sendfile for fetch; an asyncio shell around the
sans-I/O kfk.protocol.connection.ServerConnection, which does the framing and the socket.request.max.bytes check.

Like Kafka's SocketServer, a connection is served one request at a time, so responses go out in request order while
clients pipeline requests. Reading runs a little ahead of serving (up to MAX_QUEUED_FRAMES frames or
MAX_QUEUED_BYTES, then the transport stops reading and later bytes wait in the socket buffer), so the next produce
request arrives while the previous one is being appended. A frame larger than socket.request.max.bytes closes the
connection (after the frames before it are answered) before anything is allocated for it; a connection idle for
connections.max.idle.ms is closed. A client that a request put over a client quota (kfk.security.quotas) gets its
response, then its connection is muted (neither read nor served) for the throttle time, as Kafka mutes channels.

Resources are bounded (issue 16): a large frame's memory grows only as its bytes arrive (ServerConnection); a frame
not complete socket.request.receive.timeout.ms after it began closes its connection (time the broker itself stopped
reading does not count); with queued.max.request.bytes > 0, every request held (being received, queued, being
handled) reserves its size in a MemoryPool and, while the pool is exhausted, connections not in the middle of a frame
stop reading until a handled request gives its memory back. New connections beyond the connection quotas
(kfk.server.connection_quotas) are closed as soon as they are accepted. Responses to a client that has gone are
dropped without writing: asyncio warns on every write to a lost socket.

Frames are received without intermediate copies: the connection is an asyncio BufferedProtocol that reads into the
buffers ServerConnection hands out (a staging buffer for small frames; a large one, a produce request, gets a
bytearray of its own that the kernel fills directly). The dispatcher decodes Produce from a writable view of that
bytearray, so the records field is a view too: the validator assigns offsets in place and the log writes those very
bytes (socket -> frame -> file).

The common request needs no task at all: a request of an API with a fast handler (the dispatcher's dispatch_fast;
today the one-partition produce) that arrives while its connection's task waits for work is served in the callback
that read it, and when its handler completes there (no disk executor, no acks=all wait) the response is written in
that callback too, those of one read's requests in one send. A request whose handler suspends or fails there, and
every request behind it, goes to the task, so responses keep request order; a quota throttle mutes the connection
after the response, as in the task.

On a SASL listener each connection has a SaslAuthenticator (kfk.server.sasl_authenticator) that takes the
dispatcher's place: it serves the authentication exchange itself and passes the other requests on with the
principal it established. While it authenticates, the connection's frames are bounded by sasl.server.max.receive.size
(512 KiB by default) instead of socket.request.max.bytes.

Response chunks are bytes, except file regions (kfk.storage FileRegion: an open segment file, a position and a
length), which fetch responses carry for record data: those go out with sendfile, straight from the segment file to
the socket, never through Python memory (os.sendfile at once when the socket takes it all, else the loop's sendfile).

TLS (SSL and SASL_SSL listeners, kfk.security.tls) wraps the transport: the listener accepts plain TCP, and the
connection's task runs the handshake (loop.start_tls) before it reads a request, so a failed handshake (a plaintext
client, garbage, an untrusted or missing client certificate) is logged at INFO and closes that connection alone. The
handshake gives the connection its principal (the client certificate's mapped DN, else User:ANONYMOUS), which every
request it sends carries. sendfile cannot encrypt: over TLS a file region is read and written through the TLS
transport in chunks, the next read only once the transport has drained, so a huge fetch response to a slow reader
holds a megabyte or two of the broker's memory, not the region (bench/bench_tls.py measures both paths,
bench/bench_fetch_memory.py the memory).
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections import deque
from collections.abc import Callable, Collection, Coroutine, Generator
from dataclasses import dataclass
from typing import Any

from kfk.protocol.connection import ServerConnection, StreamError
from kfk.security.principal import ANONYMOUS, KafkaPrincipal
from kfk.security.tls import ListenerTls, peer_principal
from kfk.server.connection_quotas import ConnectionQuotas, RateLimitedLog
from kfk.server.dispatch import NOT_SERVED, CloseConnection, Dispatcher
from kfk.server.memory_pool import MemoryPool
from kfk.server.network_channel import SendfileSource, set_socket_options
from kfk.server.network_processes import NetworkProcesses, ProxyTransport
from kfk.server.sasl_authenticator import SaslAuthenticator

log = logging.getLogger("kfk.server.network")

#: How far reading may run ahead of serving on one connection.
MAX_QUEUED_FRAMES = 4
MAX_QUEUED_BYTES = 8 * 1024 * 1024
#: Over TLS, file regions are read and written through the TLS transport this much at a time (_write_through_tls).
TLS_FILE_CHUNK_BYTES = 256 * 1024
#: Connections the kernel queues before they are accepted: Kafka's socket.listen.backlog.size default.
LISTEN_BACKLOG = 50


@dataclass(frozen=True)
class Listener:
    """One entry of `listeners`: NAME://host:port."""

    name: str
    host: str
    port: int

    @staticmethod
    def parse(text: str) -> Listener:
        name, sep, address = text.strip().partition("://")
        if not sep:
            raise ValueError(f"listener {text!r} is not NAME://host:port")
        host, colon, port = address.rpartition(":")
        if not colon or not port.isdigit():
            raise ValueError(f"listener {text!r} has no port")
        host = host.strip("[]")
        return Listener(name.upper(), host, int(port))

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


class _Started:
    """A request begun in the callback that received it (_Connection._serve_inline) whose handler suspended there (or
    failed): the connection's task finishes it in its turn, so its response still follows those before it."""

    __slots__ = ("frame", "coroutine", "yielded", "error")

    def __init__(self, frame: bytearray, coroutine: Coroutine[Any, Any, list | None] | None, yielded: Any = None,
                 error: BaseException | None = None) -> None:
        """`coroutine` None: a request answered already, queued for what follows its response (a quota's mute)."""
        self.frame = frame
        self.coroutine = coroutine
        self.yielded = yielded
        self.error = error

    def __len__(self) -> int:
        return len(self.frame)

    def __await__(self) -> Generator[Any, Any, list | None]:
        """Run the handler on from where it suspended: hand its task what it waits for, and it what the task got."""
        if self.error is not None:
            raise self.error
        coroutine, yielded = self.coroutine, self.yielded
        if coroutine is None:
            return None
        while True:
            try:
                value, error = (yield yielded), None
            except BaseException as thrown:  # noqa: BLE001 - cancellation and all: passed on to the handler
                value, error = None, thrown
            try:
                yielded = coroutine.send(value) if error is None else coroutine.throw(error)
            except StopIteration as stop:
                return stop.value


class _Connection(asyncio.BufferedProtocol):
    """One client connection: the socket side of its ServerConnection, flow control on both sides, and the task that
    serves its requests one after the other."""

    def __init__(self, server: SocketServer, listener_name: str, tls: ListenerTls | None = None) -> None:
        self._server = server
        self._listener_name = listener_name
        self._tls = tls
        #: Who sends the requests: set by the TLS handshake (a client certificate's DN), User:ANONYMOUS until then.
        self.principal: KafkaPrincipal = ANONYMOUS
        self._loop = asyncio.get_running_loop()
        self._transport: asyncio.Transport | None = None
        self._socket_fd = -1  # the TCP socket's descriptor, for os.sendfile (see _sendfile)
        self.client_host = "?"
        self.client_port = 0
        self._protocol = ServerConnection(server.max_request_bytes)
        self._frames: deque[bytearray | _Started | StreamError | None] = deque()
        self._arrivals: deque[float] = deque()  # monotonic time each queued frame was complete
        self.arrival = 0.0  # ... and that of the frame _next_frame returned last
        self._queued_bytes = 0
        self._frame_waiter: asyncio.Future | None = None
        self._reading_paused = False
        self._stopped = False  # a StreamError or the end of the stream is queued: nothing more is parsed
        self._writing_paused = False
        self._drain_waiter: asyncio.Future | None = None
        self._lost = False
        self.admitted = False  # counted by the connection quotas (released when the connection is lost)
        self.frame_started: float | None = None  # monotonic time the frame being received began, None between frames
        self.memory_paused = False  # reading stopped because the memory pool is exhausted
        self._serving_bytes = 0  # the frame being handled
        self._reserved = 0  # bytes reserved in the memory pool
        self.muted = False  # reading stopped while a quota throttles the client
        self._throttle_ms = 0  # set by the dispatcher when the request just handled put the client over a quota
        self._on_throttle = self._set_throttle
        self.authenticator = server.authenticator(listener_name) if server.authenticator is not None else None
        self._bound_requests()
        #: The listener's dispatcher, once the task serves (after a TLS handshake): requests of an API with a fast
        #: handler are served inline from then on, while nothing is queued before them (_serve_inline).
        self._dispatcher: Dispatcher | None = None

    # -- asyncio protocol callbacks ------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.client_host, self.client_port = peer[0], peer[1]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            set_socket_options(sock, self._server.send_buffer_bytes)
            self._socket_fd = sock.fileno()
        if self._tls is not None:
            transport.pause_reading()  # the handshake reads first (serve -> _start_tls)
        if not self._server._register(self):
            transport.abort()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._protocol.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        protocol = self._protocol
        frames = protocol.buffer_updated(nbytes)
        if protocol.receiving:
            if frames or self.frame_started is None:
                self.frame_started = time.monotonic()
        else:
            self.frame_started = None
        dispatcher = self._dispatcher
        replies: list[bytes] | None = [] if dispatcher is not None else None
        arrival = time.monotonic() if replies is not None and frames else 0.0  # when this read's frames were complete
        for frame in frames:
            if frame.__class__ is StreamError:
                if self.authenticator is not None and self.authenticator.authenticating:  # Kafka's words, at INFO
                    log.info("failed authentication with /%s (Failing SASL authentication due to invalid receive "
                             "size: %s)", self.client_host, frame.error)
                else:
                    log.warning("closing connection from %s:%s: %s", self.client_host, self.client_port, frame.error)
            elif replies is not None and self._frame_waiter is not None and not self._frames \
                    and dispatcher.serves_fast(frame) \
                    and self._serve_inline(dispatcher, frame, replies, arrival):
                continue
            self._push(frame)
        if replies:  # the responses of the requests answered in this read, in one send
            self._transport.write(b"".join(replies))
        if self._server.memory_pool is not None:
            self._server._reserve(self)

    def _serve_inline(self, dispatcher: Dispatcher, frame: bytearray, replies: list[bytes], arrival: float) -> bool:
        """Serve a request of the common kind (one its API's fast handler serves: a one-partition acks=1 produce)
        right here, in the callback that received it, while the connection's task waits for work (nothing queued
        or being served before it: responses stay in request order): no task switch or future per request; its
        response joins `replies`, sent when the read is handled. False, with nothing done, for a request the fast
        handler does not serve or while the connection cannot take a response (its write buffer full, closing,
        muted). A handler that suspends (a disk append off the loop, an acks=all wait) or fails is queued as a
        _Started request for the task to finish."""
        transport = self._transport
        if self.muted or self._throttle_ms or self._writing_paused or self._stopped or transport is None \
                or transport.is_closing():
            return False
        coroutine = dispatcher.dispatch_fast(frame, self.client_host, self.client_port, self._listener_name,
                                             self.principal, self._on_throttle)
        try:
            yielded = coroutine.send(None)
        except StopIteration as stop:
            chunks = stop.value
            if chunks is NOT_SERVED:
                return False
        except CloseConnection as error:  # the task closes the connection, after the responses before this one
            self._push(_Started(frame, coroutine, error=error))
            return True
        else:
            self._push(_Started(frame, coroutine, yielded))
            return True
        self._server._touch(self)
        if chunks is not None:
            replies.extend(chunks)
        if self._throttle_ms:  # the task mutes the connection once this response is out (and observes it)
            self._push(_Started(frame, None))
            return True
        observer = self._server.request_observer
        if observer is not None:
            # No queue time (served as it arrived); its total time ends with its handler: the read's one send follows.
            observer((frame[0] << 8) | frame[1], 0.0, time.monotonic() - arrival)
        return True

    def eof_received(self) -> bool:
        self._push(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if self._lost:
            return  # a failed TLS handshake reports it itself (asyncio does not always)
        self._lost = True
        self._push(None)
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_exception(ConnectionError("connection lost"))
        self._server._unregister(self)

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        if self._drain_waiter is not None and not self._drain_waiter.done():
            self._drain_waiter.set_result(None)

    # -- flow control ----------------------------------------------------------------------------------------------

    def _push(self, item: bytearray | _Started | StreamError | None) -> None:
        if self._stopped:
            return
        if item is None or item.__class__ is StreamError:
            self._stopped = True
        else:
            self._queued_bytes += len(item)
            self._arrivals.append(time.monotonic())
        self._frames.append(item)
        waiter = self._frame_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        if (len(self._frames) >= MAX_QUEUED_FRAMES or self._queued_bytes >= MAX_QUEUED_BYTES or self._stopped) \
                and not self._reading_paused:
            self._update_reading()

    async def _next_frame(self) -> bytearray | _Started | StreamError | None:
        while not self._frames:
            self._frame_waiter = self._loop.create_future()
            await self._frame_waiter
            self._frame_waiter = None
        item = self._frames.popleft()
        if item is not None and item.__class__ is not StreamError:
            self._queued_bytes -= len(item)
            self.arrival = self._arrivals.popleft()
        if self._reading_paused and not self._stopped and not self.memory_paused and not self.muted \
                and len(self._frames) < MAX_QUEUED_FRAMES and self._queued_bytes < MAX_QUEUED_BYTES:
            self._update_reading()
        return item

    def _update_reading(self) -> None:
        """Pause or resume reading: paused while the queue is full, the stream has ended, memory is short or a quota
        throttles the client."""
        pause = (self._stopped or self.memory_paused or self.muted or len(self._frames) >= MAX_QUEUED_FRAMES
                 or self._queued_bytes >= MAX_QUEUED_BYTES)
        transport = self._transport
        if pause == self._reading_paused or self._lost or transport is None or transport.is_closing():
            return
        self._reading_paused = pause
        if pause:
            transport.pause_reading()
        else:
            transport.resume_reading()
            if self.frame_started is not None:
                self.frame_started = time.monotonic()  # the time the broker did not read is not the client's

    def _bound_requests(self) -> None:
        """The largest request this connection accepts next: sasl.server.max.receive.size while its authenticator
        authenticates it, else socket.request.max.bytes."""
        authenticator = self.authenticator
        self._protocol.max_request_bytes = (authenticator.max_receive_size
                                            if authenticator is not None and authenticator.authenticating
                                            else self._server.max_request_bytes)

    @property
    def reading_paused(self) -> bool:
        return self._reading_paused

    @property
    def receiving(self) -> bool:
        """In the middle of a frame: it may finish even while the memory pool is exhausted (its size is reserved)."""
        return self._protocol.receiving

    @property
    def held_bytes(self) -> int:
        """What this connection's requests hold: the frame being received (its announced size), those queued, the
        one being handled."""
        return self._queued_bytes + self._serving_bytes + self._protocol.pending_frame_bytes

    def set_memory_paused(self, paused: bool) -> None:
        if paused != self.memory_paused:
            self.memory_paused = paused
            self._update_reading()

    def _set_throttle(self, throttle_ms: int) -> None:
        self._throttle_ms = throttle_ms

    async def _mute(self) -> None:
        """Kafka's channel muting for a throttled client (KIP-219): the response is out; nothing more is read from
        the connection, nor served from it, until the throttle time has passed."""
        throttle_ms, self._throttle_ms = self._throttle_ms, 0
        self.muted = True
        self._update_reading()
        try:
            await asyncio.sleep(throttle_ms / 1000)
        finally:
            self.muted = False
            self._update_reading()

    # -- serving ---------------------------------------------------------------------------------------------------

    async def _start_tls(self) -> bool:
        """Run the TLS handshake and take the principal it authenticated; False (the connection closed, the failure
        logged at INFO) if it fails."""
        assert self._tls is not None and self._transport is not None
        raw = self._transport
        try:
            transport = await self._loop.start_tls(raw, self, self._tls.context, server_side=True)
            assert transport is not None
            self._transport = transport
            self.principal = peer_principal(transport.get_extra_info("ssl_object"), self._tls.mapper)
            log.debug("TLS connection from %s:%s on %s (%s): principal %s", self.client_host, self.client_port,
                      self._listener_name, transport.get_extra_info("ssl_object").version(), self.principal)
            return True
        except (OSError, asyncio.TimeoutError, ValueError) as error:
            reason = getattr(error, "reason", None) or str(error) or type(error).__name__
            if reason in ("WRONG_VERSION_NUMBER", "HTTP_REQUEST"):
                reason += " (not a TLS client: plaintext on a TLS listener?)"
            log.info("TLS handshake with %s:%s on %s failed: %s", self.client_host, self.client_port,
                     self._listener_name, reason)
            self._transport.abort()  # the raw transport if the handshake failed, else the TLS one
            self.connection_lost(error)
            return False

    async def serve(self) -> None:
        server = self._server
        dispatcher = server.listener_dispatchers.get(self._listener_name, server.dispatcher)
        if self._tls is not None and not await self._start_tls():
            return
        authenticator = self.authenticator
        transport = self._transport
        assert transport is not None
        if authenticator is None:
            self._dispatcher = dispatcher
        try:
            while True:
                item = await self._next_frame()
                if item is None:
                    return  # the client went away
                if item.__class__ is StreamError:
                    return
                frame = item.frame if item.__class__ is _Started else item
                server._touch(self)
                self._serving_bytes = len(frame)
                started = time.monotonic()
                try:
                    if item is not frame:
                        chunks = await item
                        if chunks is NOT_SERVED:  # declined after all (nothing done): the generic path serves it
                            chunks = await dispatcher.dispatch(frame, self.client_host, self.client_port,
                                                               self._listener_name, self.principal, self._on_throttle)
                    elif authenticator is not None:
                        chunks = await authenticator.handle(frame, self.client_host, self.client_port,
                                                            self._listener_name, self._on_throttle)
                        self._bound_requests()
                    else:
                        chunks = await dispatcher.dispatch(frame, self.client_host, self.client_port,
                                                           self._listener_name, self.principal, self._on_throttle)
                finally:
                    self._serving_bytes = 0
                    if server.memory_pool is not None:
                        server._reserve(self)
                if chunks is not None and not transport.is_closing():  # else the client went: drop the response
                    await self._write(chunks)
                server._touch(self)
                observer = server.request_observer
                if observer is not None:  # the api key: the frame's first two bytes (the header parsed)
                    arrival = self.arrival
                    observer((frame[0] << 8) | frame[1], started - arrival, time.monotonic() - arrival)
                if self._throttle_ms:
                    await self._mute()
        except CloseConnection as reason:
            log.info("closing connection from %s:%s: %s", self.client_host, self.client_port, reason)
            if reason.response is not None and not transport.is_closing():
                try:
                    await self._write(reason.response)
                    await asyncio.sleep(reason.close_delay_ms / 1000)
                except ConnectionError:
                    pass
        except ConnectionError:
            pass  # the client went away
        finally:
            transport.close()
            for listener in server.disconnect_listeners:
                listener(self._listener_name, self.client_host, self.client_port)

    async def _write(self, chunks: list) -> None:
        transport = self._transport
        assert transport is not None
        try:
            data = b"".join(chunks)  # the usual response: bytes only (writelines would join them too)
        except TypeError:  # a fetch response with file regions to sendfile
            pass
        else:
            transport.write(data)
            await self._drain()
            return
        if isinstance(transport, ProxyTransport):  # a network process sends the regions (network_processes)
            transport.write_response(chunks)
            await self._drain()
            return
        if self._tls is not None:  # sendfile cannot encrypt
            await self._write_through_tls(chunks)
            return
        pending: list = []
        for chunk in chunks:
            if isinstance(chunk, (bytes, bytearray, memoryview)):
                pending.append(chunk)
                continue
            if pending:
                transport.writelines(pending)
                pending = []
            length = len(chunk)
            if length:
                sent = await self._sendfile(chunk.fileno(), chunk.position, length)
                if sent != length:
                    # The segment shrank under us (a follower truncation): the frame cannot be completed.
                    raise CloseConnection(f"sent {sent} of {length} bytes of a fetch response; segment truncated")
        if pending:
            transport.writelines(pending)
        await self._drain()

    async def _write_through_tls(self, chunks: list) -> None:
        """Write a response with file regions through the TLS transport: the regions are read into memory
        TLS_FILE_CHUNK_BYTES at a time, with the bytes around them, and each chunk's worth is written before the next is
        read, once the transport has drained below its high-water mark (pause_writing/resume_writing). A response then
        holds about a chunk and that mark in memory however large its regions (reading them whole held all of them,
        twice: the bytes read, then the same encrypted in the transport), and a response of many small regions still
        goes out in one write."""
        transport = self._transport
        assert transport is not None
        pending: list = []
        pending_bytes = 0
        for chunk in chunks:
            if isinstance(chunk, (bytes, bytearray, memoryview)):
                pending.append(chunk)
                pending_bytes += len(chunk)
                continue
            length = len(chunk)
            position = chunk.position
            end = position + length
            while position < end:
                if pending_bytes >= TLS_FILE_CHUNK_BYTES:
                    transport.writelines(pending)
                    pending, pending_bytes = [], 0
                    await self._drain()
                    if transport.is_closing():
                        raise ConnectionError("connection closing")
                data = os.pread(chunk.fileno(), min(end - position, TLS_FILE_CHUNK_BYTES - pending_bytes), position)
                if not data:  # the segment shrank under us (a follower truncation): the frame cannot be completed
                    transport.writelines(pending)
                    raise CloseConnection(f"read {length - (end - position)} of {length} bytes of a fetch response; "
                                          "segment truncated")
                pending.append(data)
                pending_bytes += len(data)
                position += len(data)
        if pending:
            transport.writelines(pending)
        await self._drain()

    async def _sendfile(self, fd: int, position: int, length: int) -> int:
        """Send `length` bytes of file `fd` from `position` to the socket; the bytes sent (fewer only if the file is
        shorter now: a follower truncated the segment).

        With nothing left in the transport's buffer, os.sendfile goes straight to the socket: a fetch response's 1 MiB
        usually fits in the socket's send buffer and leaves in that one system call, and the next request is read
        without the loop turning first. loop.sendfile alone costs every fetch four epoll_ctl (it stops reading, takes
        the transport off the loop, waits for writability even once all is sent, reads again), an fstat, an lseek
        and two turns of the loop. What did not fit goes on with loop.sendfile, which waits for the socket to take
        more: a slow reader is never busy-polled, nor anything buffered in memory."""
        transport = self._transport
        assert transport is not None
        if transport.is_closing():  # its socket may be closed: the descriptor could be another file's by now
            raise ConnectionError("connection closing")
        sent = 0
        if not transport.get_write_buffer_size():  # else the header is still queued: bytes must not overtake it
            try:
                sent = os.sendfile(self._socket_fd, fd, position, length)
            except BlockingIOError:
                pass  # the send buffer is full: wait for it below
            except OSError as error:  # the peer went away (EPIPE, ECONNRESET...)
                raise ConnectionError(f"sendfile failed: {error}") from error
            else:
                if sent == length or sent == 0:  # all of it, or the file ends here
                    return sent
        try:  # loop.sendfile waits for the transport's buffer to empty first, then sends from the file
            return sent + await self._loop.sendfile(transport, SendfileSource(fd), position + sent, length - sent,
                                                    fallback=False)
        except (OSError, RuntimeError) as error:  # the peer went away (EPIPE...), or the transport closed
            raise ConnectionError(f"sendfile failed: {error}") from error

    async def _drain(self) -> None:
        if self._lost:
            raise ConnectionError("connection lost")
        if self._writing_paused:
            self._drain_waiter = self._loop.create_future()
            try:
                await self._drain_waiter
            finally:
                self._drain_waiter = None

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


class SocketServer:
    def __init__(
        self,
        dispatcher: Dispatcher,
        listeners: list[Listener],
        max_request_bytes: int,
        connections_max_idle_ms: int,
        *,
        request_receive_timeout_ms: int = 30000,
        queued_max_request_bytes: int = -1,
        quotas: ConnectionQuotas | None = None,
        authenticator: Callable[[str], SaslAuthenticator | None] | None = None,
        tls: Callable[[str], ListenerTls | None] = lambda listener_name: None,
        network_threads: int = 1,
        send_buffer_bytes: int = -1,
    ) -> None:
        self.dispatcher = dispatcher
        #: socket.send.buffer.bytes: SO_SNDBUF of every client connection (-1: the kernel's autotuning).
        self.send_buffer_bytes = send_buffer_bytes
        #: num.network.threads: above 1, that many network processes serve the clients of the listeners that are
        #: not TLS and not served before the broker is up (kfk.server.network_processes).
        self.network_threads = network_threads
        self.network_processes: NetworkProcesses | None = None
        #: The TLS settings of a listener by name (None for PLAINTEXT and SASL_PLAINTEXT), asked when it is bound.
        self.tls = tls
        #: Listeners served by a dispatcher of their own (a controller listener serves the controller's APIs only).
        self.listener_dispatchers: dict[str, Dispatcher] = {}
        self.listeners = listeners
        self.max_request_bytes = max_request_bytes
        self.connections_max_idle_ms = connections_max_idle_ms
        self.request_receive_timeout_ms = request_receive_timeout_ms
        self.memory_pool = MemoryPool(queued_max_request_bytes) if queued_max_request_bytes > 0 else None
        self.quotas = quotas or ConnectionQuotas()
        #: A new connection's authenticator, by listener name (None: the listener does not authenticate).
        self.authenticator = authenticator
        self._memory_paused: set[_Connection] = set()
        self._timeouts = RateLimitedLog()
        self.bound: list[Listener] = []  # the listeners with the ports actually bound (port 0 = ephemeral)
        self._servers: list[asyncio.AbstractServer] = []
        self._serving = False
        self._connections: dict[_Connection, float] = {}  # connection -> last activity (monotonic seconds)
        self._tasks: set[asyncio.Task] = set()
        self._idle_task: asyncio.Task | None = None
        #: Called after each answered request with (api key, seconds queued, seconds from arrival to the response
        #: written): the metrics endpoint's request metrics (kfk.server.metrics), None when it is off.
        self.request_observer: Callable[[int, float, float], None] | None = None
        #: Called with (listener name, client host, client port) once a client's connection has closed, however it
        #: closed (Kafka's ConnectionDisconnectListener: a share consumer's share session ends with its connection).
        self.disconnect_listeners: list[Callable[[str, str, int], None]] = []

    async def bind(self) -> None:
        """Bind every listener (port 0 gets an ephemeral port, recorded in `bound`) without accepting yet: the broker
        registers the real ports, and serves only once every layer is up (Kafka's enableRequestProcessing)."""
        for listener in self.listeners:
            await self._bind(listener)

    async def _bind(self, listener: Listener) -> asyncio.AbstractServer:
        tls = self.tls(listener.name)
        server = await asyncio.get_running_loop().create_server(
            lambda name=listener.name: _Connection(self, name, tls),
            host=listener.host or None,
            port=listener.port,
            reuse_address=True,
            backlog=LISTEN_BACKLOG,
            start_serving=False,
        )
        # Listen now, accept later: a bound socket that does not listen yet keeps no other SO_REUSEADDR socket off
        # its port, so a second process could bind it too and the one that listened first would win it, failing
        # the other only once it is up. Kafka's acceptor listens as it binds as well.
        for transport_socket in server.sockets:
            with transport_socket.dup() as listening:
                listening.listen(LISTEN_BACKLOG)
        port = server.sockets[0].getsockname()[1]
        self.bound.append(Listener(listener.name, listener.host, port))
        self._servers.append(server)
        return server

    async def start_serving(self, names: Collection[str] | None = None) -> None:
        """Accept connections (those that arrived since bind() waited in the listen backlog): on every listener, or
        first on the listeners `names` only (a controller listener serves the quorum before the broker is up)."""
        proxied: list[tuple[str, socket.socket]] = []
        for listener, server in zip(self.bound, self._servers):
            if server.is_serving() or (names is not None and listener.name not in names):
                continue
            if names is None and self.network_threads > 1 and self.tls(listener.name) is None:
                proxied += [(listener.name, sock) for sock in server.sockets]
            else:
                await server.start_serving()
        if proxied:
            self.network_processes = NetworkProcesses(
                self.network_threads, proxied, lambda name: _Connection(self, name, None), self.send_buffer_bytes)
            await self.network_processes.start()
        if names is None:
            self._serving = True
            self._idle_task = asyncio.create_task(self._close_idle_connections())

    def resize_network_processes(self, count: int) -> None:
        """A dynamic num.network.threads: network processes are added or stopped at once (a stopped one's clients
        reconnect to the others). Between one process and several, the listeners change hands at the next start."""
        self.network_threads = count
        if self.network_processes is not None and count > 1:
            asyncio.get_running_loop().create_task(self.network_processes.resize(count))
        elif self._serving and (self.network_processes is not None) != (count > 1):
            log.warning("num.network.threads=%d takes effect at the broker's next start (between the event loop "
                        "alone and network processes the listeners cannot change hands while they serve)", count)

    async def add_listener(self, listener: Listener) -> Listener:
        """Bind one more listener at run time (a dynamic `listeners`), accepting at once if the broker already
        serves; returns it with its bound port. OSError if the address cannot be bound."""
        server = await self._bind(listener)
        if self._serving:
            await server.start_serving()
        return self.bound[-1]

    async def remove_listener(self, name: str) -> None:
        """Stop accepting on a listener and close its connections."""
        for index, listener in enumerate(self.bound):
            if listener.name == name:
                server = self._servers.pop(index)
                del self.bound[index]
                server.close()
                if self.network_processes is not None:
                    self.network_processes.close_listener(name)
                for connection in [c for c in self._connections if c._listener_name == name]:
                    connection.close()
                await server.wait_closed()
                return

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        if self.network_processes is not None:
            await self.network_processes.stop()
            self.network_processes = None
        if self._idle_task is not None:
            self._idle_task.cancel()
        for connection in list(self._connections):
            connection.close()
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()

    def _register(self, connection: _Connection) -> bool:
        """Admit a new connection and start serving it; False if the quotas refuse it (the caller closes it)."""
        accepted, evict = self.quotas.admit(connection._listener_name, connection.client_host)
        if not accepted:
            return False
        connection.admitted = True
        if evict:  # an inter-broker connection at max.connections: the least recently active other one makes room
            others = [(active, other) for other, active in self._connections.items()
                      if other._listener_name != connection._listener_name]
            if others:
                victim = min(others, key=lambda pair: pair[0])[1]
                log.info("closing connection from %s:%s on %s for an inter-broker connection (max.connections)",
                         victim.client_host, victim.client_port, victim._listener_name)
                victim.close()
        self._connections[connection] = time.monotonic()
        if self.memory_pool is not None and self.memory_pool.exhausted:
            self._memory_paused.add(connection)
            connection.set_memory_paused(True)
        task = asyncio.get_running_loop().create_task(connection.serve())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    def _unregister(self, connection: _Connection) -> None:
        self._connections.pop(connection, None)
        self._memory_paused.discard(connection)
        if connection.admitted:
            connection.admitted = False
            self.quotas.release(connection._listener_name, connection.client_host)
        if self.memory_pool is not None:
            self._reserve(connection)  # lost: gives back all it held

    def _reserve(self, connection: _Connection) -> None:
        """Bring the memory pool up to date with what `connection` holds now (nothing once it is lost), and pause or
        resume reading: on exhaustion every connection not in the middle of a frame stops reading new requests."""
        pool = self.memory_pool
        assert pool is not None
        held = 0 if connection._lost else connection.held_bytes
        was_exhausted = pool.exhausted
        pool.adjust(held - connection._reserved)
        connection._reserved = held
        if was_exhausted and not pool.exhausted:
            self._resume_memory_paused()
        elif pool.exhausted:
            if not was_exhausted:
                log.debug("queued.max.request.bytes (%d) exhausted: connections stop reading new requests",
                          pool.capacity)
            for other in self._connections if not was_exhausted else (connection,):
                if not other.receiving and not other.memory_paused and not other._lost:
                    self._memory_paused.add(other)
                    other.set_memory_paused(True)

    def _resume_memory_paused(self) -> None:
        paused, self._memory_paused = self._memory_paused, set()
        for connection in paused:
            connection.set_memory_paused(False)

    def _touch(self, connection: _Connection) -> None:
        if connection in self._connections:
            self._connections[connection] = time.monotonic()

    async def _close_idle_connections(self) -> None:
        """Close connections idle for connections.max.idle.ms, and those whose frame is not complete
        socket.request.receive.timeout.ms after it began (while the broker was reading)."""
        idle_seconds = self.connections_max_idle_ms / 1000
        receive_seconds = self.request_receive_timeout_ms / 1000
        while True:
            await asyncio.sleep(max(min(idle_seconds, receive_seconds) / 10, 0.05))
            now = time.monotonic()
            for connection, last_active in list(self._connections.items()):
                started = connection.frame_started
                if started is not None and not connection.reading_paused and now - started > receive_seconds:
                    self._timeouts.warning("receive", "closing connection from %s:%s: its request did not arrive "
                                           "within %d ms (socket.request.receive.timeout.ms)", connection.client_host,
                                           connection.client_port, self.request_receive_timeout_ms)
                    connection.close()
                elif last_active < now - idle_seconds:
                    log.debug("closing connection idle for more than %d ms", self.connections_max_idle_ms)
                    connection.close()
