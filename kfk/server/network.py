"""The socket server: asyncio listeners, per-connection framing, ordered responses, limits, sendfile for fetch.

Like Kafka's SocketServer, a connection is served one request at a time: the next frame is read only after the
previous response was written, which is what keeps responses in request order while clients pipeline requests
(the bytes of later requests simply wait in the socket buffer). A frame larger than socket.request.max.bytes
closes the connection before anything is allocated for it; a connection idle for connections.max.idle.ms is closed.

Response chunks are bytes, except file regions (kfk.storage FileRegion: an open segment file, a position and a
length), which fetch responses carry for record data: those go out with the loop's sendfile, straight from the
segment file to the socket, never through Python memory.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from dataclasses import dataclass

from kfk.server.dispatch import CloseConnection, Dispatcher

log = logging.getLogger("kfk.server.network")

_SIZE_PREFIX = 4


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


class _SendfileSource:
    """What loop.sendfile wants of a file: a descriptor, and a seek it calls when done (a no-op here: segment files
    are read positionally, and several connections may send from one at once). Only the native os.sendfile path is
    used (fallback=False), so nothing ever reads through this object."""

    __slots__ = ("_fd",)

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = 0) -> int:
        return offset


class SocketServer:
    def __init__(
        self,
        dispatcher: Dispatcher,
        listeners: list[Listener],
        max_request_bytes: int,
        connections_max_idle_ms: int,
    ) -> None:
        self.dispatcher = dispatcher
        self.listeners = listeners
        self.max_request_bytes = max_request_bytes
        self.connections_max_idle_ms = connections_max_idle_ms
        self.bound: list[Listener] = []  # the listeners with the ports actually bound (port 0 = ephemeral)
        self._servers: list[asyncio.AbstractServer] = []
        self._connections: dict[asyncio.StreamWriter, float] = {}  # writer -> last activity (monotonic seconds)
        self._idle_task: asyncio.Task | None = None

    async def bind(self) -> None:
        """Bind every listener (port 0 gets an ephemeral port, recorded in `bound`) without accepting yet: the broker
        registers the real ports, and serves only once every layer is up (Kafka's enableRequestProcessing)."""
        for listener in self.listeners:
            server = await asyncio.start_server(
                lambda r, w, name=listener.name: self._serve(r, w, name),
                host=listener.host or None,
                port=listener.port,
                reuse_address=True,
                limit=1 << 20,
                start_serving=False,
            )
            port = server.sockets[0].getsockname()[1]
            self.bound.append(Listener(listener.name, listener.host, port))
            self._servers.append(server)

    async def start_serving(self) -> None:
        """Accept connections (those that arrived since bind() waited in the listen backlog)."""
        for server in self._servers:
            await server.start_serving()
        self._idle_task = asyncio.create_task(self._close_idle_connections())

    async def stop(self) -> None:
        for server in self._servers:
            server.close()
        if self._idle_task is not None:
            self._idle_task.cancel()
        for writer in list(self._connections):
            writer.close()
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()

    async def _close_idle_connections(self) -> None:
        idle_seconds = self.connections_max_idle_ms / 1000
        while True:
            await asyncio.sleep(max(idle_seconds / 10, 0.05))
            deadline = time.monotonic() - idle_seconds
            for writer, last_active in list(self._connections.items()):
                if last_active < deadline:
                    log.debug("closing connection idle for more than %d ms", self.connections_max_idle_ms)
                    writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, listener_name: str) -> None:
        peer = writer.get_extra_info("peername") or ("?", 0)
        client_host, client_port = peer[0], peer[1]
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        loop = asyncio.get_running_loop()
        connections = self._connections
        connections[writer] = time.monotonic()
        try:
            while True:
                prefix = await reader.readexactly(_SIZE_PREFIX)
                size = int.from_bytes(prefix, "big", signed=True)
                if size < 0 or size > self.max_request_bytes:
                    log.warning(
                        "closing connection from %s:%s: request size %d is outside 0..socket.request.max.bytes=%d",
                        client_host, client_port, size, self.max_request_bytes,
                    )
                    return
                frame = await reader.readexactly(size)
                connections[writer] = time.monotonic()
                chunks = await self.dispatcher.dispatch(frame, client_host, client_port, listener_name)
                if chunks is not None:
                    await self._write(loop, writer, chunks)
                connections[writer] = time.monotonic()
        except CloseConnection as reason:
            log.info("closing connection from %s:%s: %s", client_host, client_port, reason)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client went away
        finally:
            connections.pop(writer, None)
            writer.close()

    @staticmethod
    async def _write(loop: asyncio.AbstractEventLoop, writer: asyncio.StreamWriter, chunks: list) -> None:
        pending: list = []
        for chunk in chunks:
            if isinstance(chunk, (bytes, bytearray, memoryview)):
                pending.append(chunk)
                continue
            if pending:
                writer.writelines(pending)
                pending = []
                await writer.drain()
            length = len(chunk)
            if length:
                try:
                    sent = await loop.sendfile(
                        writer.transport, _SendfileSource(chunk.fileno()), chunk.position, length, fallback=False
                    )
                except (OSError, RuntimeError) as error:  # the peer went away (EPIPE...), or the transport closed
                    raise ConnectionError(f"sendfile failed: {error}") from error
                if sent != length:
                    # The segment shrank under us (a follower truncation): the frame cannot be completed.
                    raise CloseConnection(f"sent {sent} of {length} bytes of a fetch response; segment truncated")
        if pending:
            writer.writelines(pending)
        await writer.drain()
