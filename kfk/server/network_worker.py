"""A network process of the broker (num.network.threads > 1; kfk.server.network_processes starts them): Kafka's
network threads as processes. It accepts clients on the broker's listening sockets (inherited: the kernel hands
each new connection to one of the processes waiting on them), and moves bytes, no more: what a client sends goes to
the broker's event loop over the local channel (kfk.server.network_channel), and what the broker answers comes back
and goes out to the client, fetched records with sendfile from the segment file whose descriptor came with the
answer. The protocol, the state and every decision stay in the broker; what moves here is the work of the sockets,
the kernel's TCP and sendfile time, which is most of a consumer's cost to the broker.

It exits when the broker's end of the channel closes (the broker stopped, or died), closing its clients.
SIGINT is ignored: a terminal's Ctrl-C reaches the whole process group, and the broker stops its network processes
itself once it has shut down in order.

    python -m kfk.server.network_worker --index N --from-broker FD --to-broker FD --listener NAME=FD ...
"""

from __future__ import annotations

import argparse
import array
import asyncio
import logging
import os
import signal
import socket
from collections import deque

from kfk.server.network_channel import (
    ABORT, CLOSE, CLOSE_LISTENER, EOF, LOST, OPENED, PAUSE_READING, RECEIVED, REGION, RESUME_READING, SENDFILE, WRITE,
    WRITE_PAUSED, WRITE_RESUMED, MessageReader, SendfileSource, header, message, opened_payload, set_socket_options,
)

log = logging.getLogger("kfk.server.network_worker")

#: Bytes read from the broker's channel per system call, and the descriptors that may arrive with them.
CHANNEL_READ_BYTES = 1024 * 1024
MAX_DESCRIPTORS_PER_READ = 64


class _Client(asyncio.Protocol):
    """One client's TCP connection: its bytes to the broker, the broker's answers to it, in the order they came."""

    def __init__(self, worker: _Worker, listener: str) -> None:
        self._worker = worker
        self._listener = listener
        self.connection_id = worker.next_connection_id()
        self.transport: asyncio.Transport | None = None
        self._socket_fd = -1
        #: Answers not yet handed to the transport, because a sendfile before them is still under way.
        self._pending: deque[bytes | tuple[int, int, int]] = deque()
        self._sending: asyncio.Task | None = None
        self._closing = False  # the broker closed it: close once the pending answers are out
        self.paused_by_broker = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        sock = transport.get_extra_info("socket")
        set_socket_options(sock, self._worker.send_buffer_bytes)
        self._socket_fd = sock.fileno()
        host, port = (transport.get_extra_info("peername") or ("?", 0))[:2]
        self._worker.clients[self.connection_id] = self
        self._worker.send(OPENED, self.connection_id, opened_payload(self._listener, host, port))
        if self._worker.channel_paused:
            transport.pause_reading()

    def data_received(self, data: bytes) -> None:
        self._worker.send(RECEIVED, self.connection_id, data)

    def eof_received(self) -> bool:
        self._worker.send(EOF, self.connection_id)
        return True  # the broker decides when to close (after its answers)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._worker.clients.pop(self.connection_id, None) is not None:
            self._worker.send(LOST, self.connection_id)
        self._discard_pending()

    def pause_writing(self) -> None:
        self._worker.send(WRITE_PAUSED, self.connection_id)

    def resume_writing(self) -> None:
        self._worker.send(WRITE_RESUMED, self.connection_id)

    # -- what the broker sends ---------------------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self._pending or self._sending is not None:
            self._pending.append(data)
        elif self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def sendfile(self, fd: int, position: int, length: int) -> None:
        self._pending.append((fd, position, length))
        if self._sending is None:
            self._sending = asyncio.get_running_loop().create_task(self._send_pending())

    def close(self, abort: bool) -> None:
        transport = self.transport
        if transport is None:
            return
        if abort:
            self._discard_pending()
            transport.abort()
        elif self._sending is not None:
            self._closing = True
        else:
            transport.close()

    def set_reading(self) -> None:
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if self.paused_by_broker or self._worker.channel_paused:
            transport.pause_reading()
        else:
            transport.resume_reading()

    async def _send_pending(self) -> None:
        transport = self.transport
        assert transport is not None
        loop = asyncio.get_running_loop()
        try:
            while self._pending:
                item = self._pending.popleft()
                if isinstance(item, bytes):
                    transport.write(item)
                    continue
                fd, position, length = item
                try:
                    sent = await self._sendfile(loop, fd, position, length)
                finally:
                    os.close(fd)
                if sent != length:  # the segment shrank (a follower truncated it): the answer cannot be completed
                    log.info("closing connection %d: sent %d of %d bytes of a fetch response; segment truncated",
                             self.connection_id, sent, length)
                    self.close(abort=True)
                    return
            if self._closing:
                transport.close()
        except ConnectionError:
            self.close(abort=True)
        finally:
            self._sending = None

    async def _sendfile(self, loop: asyncio.AbstractEventLoop, fd: int, position: int, length: int) -> int:
        """As the broker's own sendfile (kfk.server.network): straight to the socket when nothing is queued before
        it, the rest with the loop's sendfile, which waits for the socket to take more."""
        transport = self.transport
        assert transport is not None
        if transport.is_closing():
            raise ConnectionError("connection closing")
        sent = 0
        if not transport.get_write_buffer_size():
            try:
                sent = os.sendfile(self._socket_fd, fd, position, length)
            except BlockingIOError:
                pass
            except OSError as error:
                raise ConnectionError(f"sendfile failed: {error}") from error
            else:
                if sent == length or sent == 0:
                    return sent
        try:
            return sent + await loop.sendfile(transport, SendfileSource(fd), position + sent, length - sent,
                                              fallback=False)
        except (OSError, RuntimeError) as error:
            raise ConnectionError(f"sendfile failed: {error}") from error

    def _discard_pending(self) -> None:
        while self._pending:
            item = self._pending.popleft()
            if not isinstance(item, bytes):
                os.close(item[0])


class _ToBroker(asyncio.Protocol):
    """The channel towards the broker, as an asyncio transport: when the broker falls behind, every client's
    reading pauses until it has caught up."""

    def __init__(self, worker: _Worker) -> None:
        self._worker = worker

    def pause_writing(self) -> None:
        self._worker.set_channel_paused(True)

    def resume_writing(self) -> None:
        self._worker.set_channel_paused(False)

    def connection_lost(self, exc: Exception | None) -> None:
        self._worker.stop()


class _Worker:
    def __init__(self, index: int, from_broker: socket.socket, send_buffer_bytes: int) -> None:
        self.index = index
        self.send_buffer_bytes = send_buffer_bytes
        self.clients: dict[int, _Client] = {}
        self.channel_paused = False
        self._next_id = 0
        self._from_broker = from_broker
        self._to_broker: asyncio.Transport | None = None
        self._descriptors: deque[int] = deque()
        self._reader = MessageReader(self._on_message, None)
        self._stopped = asyncio.get_running_loop().create_future()
        self._servers: list[tuple[str, asyncio.AbstractServer]] = []

    def next_connection_id(self) -> int:
        self._next_id = (self._next_id + 1) & 0xFFFFFFFF
        return self._next_id

    async def run(self, to_broker: socket.socket, listeners: list[tuple[str, socket.socket]]) -> None:
        loop = asyncio.get_running_loop()
        self._to_broker, _ = await loop.create_unix_connection(lambda: _ToBroker(self), sock=to_broker)
        self._from_broker.setblocking(False)
        loop.add_reader(self._from_broker.fileno(), self._read_from_broker)
        for name, sock in listeners:
            server = await loop.create_server(lambda name=name: _Client(self, name), sock=sock)
            self._servers.append((name, server))
        try:
            await self._stopped
        finally:
            loop.remove_reader(self._from_broker.fileno())
            for _name, server in self._servers:
                server.close()
            for client in list(self.clients.values()):
                client.close(abort=True)
            while self._descriptors:
                os.close(self._descriptors.popleft())

    def stop(self) -> None:
        if not self._stopped.done():
            self._stopped.set_result(None)

    def send(self, kind: int, connection_id: int, payload: bytes = b"") -> None:
        transport = self._to_broker
        if transport is None or transport.is_closing():
            return
        if len(payload) > 4096:  # no copy of a large payload into one buffer with its header
            transport.write(header(kind, connection_id, len(payload)))
            transport.write(payload)
        else:
            transport.write(message(kind, connection_id, payload))

    def set_channel_paused(self, paused: bool) -> None:
        self.channel_paused = paused
        for client in self.clients.values():
            client.set_reading()

    def _read_from_broker(self) -> None:
        descriptor_space = socket.CMSG_SPACE(MAX_DESCRIPTORS_PER_READ * array.array("i").itemsize)
        try:
            data, ancillary, _flags, _address = self._from_broker.recvmsg(CHANNEL_READ_BYTES, descriptor_space)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, ancillary = b"", []
        for level, kind, payload in ancillary:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                descriptors = array.array("i")
                descriptors.frombytes(payload[:len(payload) - len(payload) % descriptors.itemsize])
                self._descriptors.extend(descriptors)
        if not data:  # the broker closed the channel: it stopped, or died
            self.stop()
            return
        self._reader.feed(memoryview(data))

    def _on_message(self, kind: int, connection_id: int, payload: bytes) -> None:
        if kind == CLOSE_LISTENER:
            name = payload.decode()
            for listener, server in [entry for entry in self._servers if entry[0] == name]:
                server.close()
                self._servers.remove((listener, server))
            return
        if kind == SENDFILE:
            fd = self._descriptors.popleft()
            client = self.clients.get(connection_id)
            if client is None:
                os.close(fd)
                return
            position, length = REGION.unpack_from(payload)
            if len(payload) > REGION.size:  # the response's bytes before the region
                client.write(payload[REGION.size:])
            client.sendfile(fd, position, length)
            return
        client = self.clients.get(connection_id)
        if client is None:
            return  # gone meanwhile: its LOST is on its way to the broker
        if kind == WRITE:
            client.write(payload)
        elif kind == PAUSE_READING:
            client.paused_by_broker = True
            client.set_reading()
        elif kind == RESUME_READING:
            client.paused_by_broker = False
            client.set_reading()
        elif kind in (CLOSE, ABORT):
            del self.clients[connection_id]
            client.close(abort=kind == ABORT)
        else:
            log.error("unknown channel message kind %d from the broker", kind)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kfk.server.network_worker")
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--from-broker", type=int, required=True)
    parser.add_argument("--to-broker", type=int, required=True)
    parser.add_argument("--listener", action="append", default=[], help="NAME=FD of a listening socket")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--send-buffer-bytes", type=int, default=-1)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    logging.basicConfig(level=args.log_level, format=f"%(asctime)s %(levelname)s [network process {args.index}] "
                                                      "%(message)s")
    listeners = []
    for entry in args.listener:
        name, _, fd = entry.partition("=")
        listeners.append((name, socket.socket(fileno=int(fd))))
    from_broker = socket.socket(fileno=args.from_broker)
    to_broker = socket.socket(fileno=args.to_broker)

    async def run() -> None:
        await _Worker(args.index, from_broker, args.send_buffer_bytes).run(to_broker, listeners)

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
