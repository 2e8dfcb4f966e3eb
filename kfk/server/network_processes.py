"""The broker's network processes (num.network.threads > 1): Kafka's network threads, as processes, since one
CPython process runs Python on one core at a time.

Kafka splits a broker's work between network threads (sockets: reading requests, writing responses) and request
handler threads (num.io.threads). kfk's request handling is one asyncio event loop that owns every partition, group
and transaction; what can leave it without sharing that state is the sockets' work, and that is where a broker
serving consumers spends most of its CPU: the kernel's TCP send and receive paths and sendfile (a profile of the
W8 consume in bench/README.md: about half the broker's time in sendfile, a sixth writing responses). With
num.network.threads=N (N > 1), N network processes (kfk.server.network_worker) accept the clients of the broker's
plaintext and SASL_PLAINTEXT listeners on the broker's own listening sockets and move their bytes over a local
channel (kfk.server.network_channel); a fetch response's records go to the network process as the segment file's
descriptor and a region, and it sends them with sendfile. The event loop keeps everything else, exactly as with one
process: each client is a _Connection of kfk.server.network whose transport is a _ProxyTransport here, so framing,
limits, SASL, quotas, muting, idle timeouts and request order are the same code.

Not proxied: TLS listeners (the TLS state would have to live in the network process, and encrypting is not
zero-copy anyway) and the controller listeners of a KRaft node, which the event loop serves itself; a listener added
at run time (a dynamic `listeners`) is served by the event loop too.

What it costs: a request crosses the channel once each way (a few microseconds of the event loop's CPU per
message, bulk bytes received straight into the request's frame), and each network process is a Python process of
its own (about 23 MB resident). A network process that dies is replaced; its clients' connections are lost, as
when a Kafka network thread's connections close, and they reconnect.
"""

from __future__ import annotations

import array
import asyncio
import logging
import os
import socket
import subprocess
import sys
from collections import deque
from collections.abc import Callable

from kfk.server.dispatch import CloseConnection
from kfk.server.network_channel import (
    ABORT, CLOSE, CLOSE_LISTENER, EOF, LOST, OPENED, PAUSE_READING, REGION, RESUME_READING, SENDFILE, WRITE,
    WRITE_PAUSED, WRITE_RESUMED, MessageReader, header, message, parse_opened,
)

log = logging.getLogger("kfk.server.network")

#: A region smaller than this is read by the event loop and sent as bytes: passing a descriptor costs more.
SENDFILE_MIN_BYTES = 16 * 1024
#: Bytes queued towards one network process beyond which its connections' responses wait (pause_writing).
CHANNEL_HIGH_WATER_BYTES = 8 * 1024 * 1024
CHANNEL_LOW_WATER_BYTES = 2 * 1024 * 1024
#: A RECEIVED payload this large goes straight from the channel into its request's frame.
DIRECT_RECEIVE_MIN_BYTES = 64 * 1024
STAGING_BYTES = 256 * 1024
#: A network process that died is replaced after this long (a crash loop costs one start a second, no more).
RESTART_DELAY_S = 1.0


class ProxyTransport(asyncio.Transport):
    """A client connection held by a network process, as its _Connection in the event loop sees it."""

    def __init__(self, worker: _NetworkProcess, connection_id: int, host: str, port: int) -> None:
        super().__init__()
        self._worker = worker
        self.connection_id = connection_id
        self._peername = (host, port)
        self._closing = False
        self.protocol: asyncio.BufferedProtocol | None = None
        self.tcp_paused = False  # the network process says the client's send buffer is full

    def get_extra_info(self, name: str, default=None):
        return self._peername if name == "peername" else default

    def is_closing(self) -> bool:
        return self._closing

    def write(self, data) -> None:
        if not self._closing and data:
            self._worker.send(WRITE, self.connection_id, data)

    def writelines(self, list_of_data) -> None:
        self.write(b"".join(list_of_data))

    def write_response(self, chunks: list) -> None:
        """A response of bytes and file regions (kfk.storage FileRegion): the bytes in order, each large region as
        its file's descriptor for the network process to sendfile, a small one read here."""
        if self._closing:
            return
        pending: list = []
        for chunk in chunks:
            if isinstance(chunk, (bytes, bytearray, memoryview)):
                pending.append(chunk)
            elif len(chunk) < SENDFILE_MIN_BYTES:
                data = chunk.read_bytes()
                if len(data) != len(chunk):  # a follower truncated the segment: the frame cannot be completed
                    self.write(b"".join(pending))
                    raise CloseConnection(f"read {len(data)} of {len(chunk)} bytes of a fetch response; "
                                          "segment truncated")
                pending.append(data)
            else:  # the bytes before the region travel with it: one message, one system call
                self._worker.send(SENDFILE, self.connection_id,
                                  REGION.pack(chunk.position, len(chunk)) + b"".join(pending), chunk.fileno())
                pending = []
        if pending:
            self.write(b"".join(pending))

    def pause_reading(self) -> None:
        if not self._closing:
            self._worker.send(PAUSE_READING, self.connection_id)

    def resume_reading(self) -> None:
        if not self._closing:
            self._worker.send(RESUME_READING, self.connection_id)

    def get_write_buffer_size(self) -> int:
        return 0

    def close(self) -> None:
        self._end(CLOSE)

    def abort(self) -> None:
        self._end(ABORT)

    def _end(self, kind: int) -> None:
        if self._closing:
            return
        self._closing = True
        self._worker.send(kind, self.connection_id)
        self._worker.forget(self)


class _FromWorker(asyncio.BufferedProtocol):
    """The channel from one network process: its messages, the bulk of a client's bytes received straight into that
    client's request frame."""

    def __init__(self, worker: _NetworkProcess) -> None:
        self._worker = worker
        self._reader = MessageReader(worker.on_message, worker.on_received)
        self._staging = memoryview(bytearray(STAGING_BYTES))
        self._direct: asyncio.BufferedProtocol | None = None

    def get_buffer(self, sizehint: int) -> memoryview:
        connection_id = self._reader.receiving_for
        if connection_id is not None and self._reader.remaining >= DIRECT_RECEIVE_MIN_BYTES:
            transport = self._worker.connections.get(connection_id)
            if transport is not None and transport.protocol is not None:
                buffer = transport.protocol.get_buffer(-1)
                if len(buffer) >= DIRECT_RECEIVE_MIN_BYTES:
                    self._direct = transport.protocol
                    return buffer[:self._reader.remaining]
        return self._staging

    def buffer_updated(self, nbytes: int) -> None:
        protocol, self._direct = self._direct, None
        if protocol is not None:
            self._reader.advanced(nbytes)
            protocol.buffer_updated(nbytes)
        else:
            self._reader.feed(self._staging[:nbytes])

    def connection_lost(self, exc: Exception | None) -> None:
        self._worker.channel_lost()


class _NetworkProcess:
    """One network process: the child, its two channels, and the connections it holds."""

    def __init__(self, pool: NetworkProcesses, index: int) -> None:
        self._pool = pool
        self.index = index
        self.connections: dict[int, ProxyTransport] = {}
        self._process: subprocess.Popen | None = None
        self._to_worker: socket.socket | None = None
        self._from_worker: asyncio.Transport | None = None
        #: What could not be sent yet: [bytes left, descriptor to attach (a dup owned here) or -1].
        self._queue: deque[list] = deque()
        self._queued_bytes = 0
        self._channel_paused = False
        self._loop = asyncio.get_running_loop()

    async def start(self) -> None:
        to_worker, worker_reads = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        from_worker, worker_writes = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        listening = self._pool.listening
        args = [sys.executable, "-m", "kfk.server.network_worker", "--index", str(self.index),
                "--from-broker", str(worker_reads.fileno()), "--to-broker", str(worker_writes.fileno()),
                "--log-level", logging.getLevelName(logging.getLogger().getEffectiveLevel()),
                "--send-buffer-bytes", str(self._pool.send_buffer_bytes)]
        for name, sock in listening:
            args += ["--listener", f"{name}={sock.fileno()}"]
        try:
            self._process = subprocess.Popen(
                args, stdin=subprocess.DEVNULL,
                pass_fds=[worker_reads.fileno(), worker_writes.fileno(), *(sock.fileno() for _, sock in listening)])
        finally:
            worker_reads.close()
            worker_writes.close()
        to_worker.setblocking(False)
        self._to_worker = to_worker
        self._from_worker, _ = await self._loop.create_unix_connection(lambda: _FromWorker(self), sock=from_worker)
        log.info("network process %d started (pid %d)", self.index, self._process.pid)

    async def stop(self) -> None:
        """Close the channel (the process closes its clients and exits), then wait for the process."""
        self._close_channels()
        process = self._process
        if process is None:
            return
        for _ in range(50):
            if process.poll() is not None:
                return
            await asyncio.sleep(0.1)
        process.kill()
        await self._loop.run_in_executor(None, process.wait)

    # -- the event loop to the network process -------------------------------------------------------------------

    def send(self, kind: int, connection_id: int, payload=b"", fd: int = -1) -> None:
        sock = self._to_worker
        if sock is None:
            return
        # A large payload is not copied into one buffer with its header: sendmsg gathers the two.
        chunks = [header(kind, connection_id, len(payload)), payload] if len(payload) > 4096 \
            else [message(kind, connection_id, payload)]
        if not self._queue:
            try:
                if fd >= 0:
                    sent = sock.sendmsg(chunks, [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
                else:
                    sent = sock.sendmsg(chunks)
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError:  # the process is gone: channel_lost cleans up
                return
            else:
                fd = -1  # the descriptor went with the first byte
            total = sum(len(chunk) for chunk in chunks)
            if sent == total:
                return
            remainder = b"".join(chunks)[sent:]
        else:
            remainder = b"".join(chunks)
        # The descriptor must stay the same file until it is sent: the segment may be closed meanwhile.
        self._queue.append([memoryview(remainder), os.dup(fd) if fd >= 0 else -1])
        self._queued_bytes += len(remainder)
        if len(self._queue) == 1:
            self._loop.add_writer(sock.fileno(), self._flush)
        if self._queued_bytes > CHANNEL_HIGH_WATER_BYTES and not self._channel_paused:
            self._channel_paused = True
            for transport in self.connections.values():
                self._update_writing(transport)

    def _flush(self) -> None:
        sock = self._to_worker
        if sock is None:
            return
        while self._queue:
            entry = self._queue[0]
            data, fd = entry
            try:
                if fd >= 0:
                    sent = sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))])
                else:
                    sent = sock.send(data)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            if fd >= 0:
                os.close(fd)
                entry[1] = -1
            self._queued_bytes -= sent
            if sent < len(data):
                entry[0] = data[sent:]
                return
            self._queue.popleft()
        self._loop.remove_writer(sock.fileno())
        if self._channel_paused and self._queued_bytes < CHANNEL_LOW_WATER_BYTES:
            self._channel_paused = False
            for transport in self.connections.values():
                self._update_writing(transport)

    def _update_writing(self, transport: ProxyTransport) -> None:
        protocol = transport.protocol
        if protocol is None:
            return
        if transport.tcp_paused or self._channel_paused:
            protocol.pause_writing()
        else:
            protocol.resume_writing()

    # -- the network process to the event loop -------------------------------------------------------------------

    def on_received(self, connection_id: int, piece: memoryview) -> None:
        transport = self.connections.get(connection_id)
        if transport is None or transport.protocol is None:
            return
        protocol = transport.protocol
        while piece:
            buffer = protocol.get_buffer(-1)
            take = min(len(buffer), len(piece))
            buffer[:take] = piece[:take]
            piece = piece[take:]
            protocol.buffer_updated(take)
            if transport.is_closing():
                return

    def on_message(self, kind: int, connection_id: int, payload: bytes) -> None:
        if kind == OPENED:
            listener, host, port = parse_opened(payload)
            transport = ProxyTransport(self, connection_id, host, port)
            self.connections[connection_id] = transport
            protocol = self._pool.connection_factory(listener)
            transport.protocol = protocol
            protocol.connection_made(transport)
            return
        transport = self.connections.get(connection_id)
        if transport is None:
            return  # closed by the event loop meanwhile
        protocol = transport.protocol
        if kind == EOF:
            protocol.eof_received()
        elif kind == LOST:
            self.connections.pop(connection_id, None)
            transport._closing = True
            protocol.connection_lost(None)
        elif kind in (WRITE_PAUSED, WRITE_RESUMED):
            transport.tcp_paused = kind == WRITE_PAUSED
            self._update_writing(transport)
        else:
            log.error("unknown channel message kind %d from network process %d", kind, self.index)

    def forget(self, transport: ProxyTransport) -> None:
        """The event loop closed a connection: it is lost to its protocol now (asyncio tells protocols soon after
        close(), in a callback of its own)."""
        if self.connections.pop(transport.connection_id, None) is not None and transport.protocol is not None:
            self._loop.call_soon(transport.protocol.connection_lost, None)

    def channel_lost(self) -> None:
        """The channel closed: the process stopped or died. Its connections are lost; the pool replaces it."""
        connections, self.connections = self.connections, {}
        for transport in connections.values():
            transport._closing = True
            if transport.protocol is not None:
                transport.protocol.connection_lost(None)
        self._close_channels()
        self._pool.lost(self)

    def _close_channels(self) -> None:
        if self._to_worker is not None:
            if self._queue:
                self._loop.remove_writer(self._to_worker.fileno())
            for _data, fd in self._queue:
                if fd >= 0:
                    os.close(fd)
            self._queue.clear()
            self._queued_bytes = 0
            self._to_worker.close()
            self._to_worker = None
        if self._from_worker is not None:
            self._from_worker.close()
            self._from_worker = None

    @property
    def returncode(self) -> int | None:
        return self._process.poll() if self._process is not None else None


class NetworkProcesses:
    """num.network.threads network processes serving the clients of `listening` ((listener name, a bound and
    listening socket of it) pairs) for the event loop, whose connection for a listener `connection_factory` builds."""

    def __init__(self, count: int, listening: list[tuple[str, socket.socket]],
                 connection_factory: Callable[[str], asyncio.BufferedProtocol], send_buffer_bytes: int = -1) -> None:
        self.count = count
        self.send_buffer_bytes = send_buffer_bytes  # socket.send.buffer.bytes of the clients' connections
        self.listening = listening
        self.connection_factory = connection_factory
        self._processes: list[_NetworkProcess] = []
        self._stopping = False
        self._restarts: set[asyncio.Task] = set()

    async def start(self) -> None:
        await self.resize(self.count)

    async def stop(self) -> None:
        self._stopping = True
        for task in self._restarts:
            task.cancel()
        await asyncio.gather(*(process.stop() for process in self._processes))
        self._processes.clear()

    async def resize(self, count: int) -> None:
        """Start more network processes, or stop the last ones (their clients' connections end; they reconnect)."""
        self.count = count
        while len(self._processes) < count:
            process = _NetworkProcess(self, len(self._processes))
            await process.start()
            self._processes.append(process)
        while len(self._processes) > count:
            process = self._processes.pop()
            await process.stop()

    def close_listener(self, name: str) -> None:
        """A listener removed at run time: no process accepts on it any more, nor will a replacement."""
        self.listening = [(listener, sock) for listener, sock in self.listening if listener != name]
        for process in self._processes:
            process.send(CLOSE_LISTENER, 0, name.encode())

    def lost(self, process: _NetworkProcess) -> None:
        if self._stopping or process not in self._processes:
            return
        log.error("network process %d exited (code %s); starting another in its place", process.index,
                  process.returncode)
        task = asyncio.get_running_loop().create_task(self._replace(process))
        self._restarts.add(task)
        task.add_done_callback(self._restarts.discard)

    async def _replace(self, process: _NetworkProcess) -> None:
        await asyncio.sleep(RESTART_DELAY_S)
        await process.stop()
        if self._stopping:
            return
        replacement = _NetworkProcess(self, process.index)
        await replacement.start()
        self._processes[self._processes.index(process)] = replacement
