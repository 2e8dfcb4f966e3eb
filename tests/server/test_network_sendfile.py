"""Responses with file regions (a fetch response's records) on real sockets against a SocketServer in this process:
the region goes out with sendfile straight from a real file, whole and in order, whether the client's socket takes it
at once or only as a slow reader drains it; a region the file no longer holds closes the connection."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import pytest

from kfk.protocol.primitives import INT32
from kfk.security.principal import KafkaPrincipal
from kfk.server.dispatch import Dispatcher
from kfk.server.network import Listener, SocketServer
from kfk.storage.fetch_data_info import FileRegion


class RegionDispatcher(Dispatcher):
    """Answers every request with a frame of the request's correlation id, a region of one file and a trailer: the
    shape of a fetch response (header bytes, records from a segment file, the tagged fields after them)."""

    def __init__(self, file: BinaryIO, position: int, length: int, trailer: bytes) -> None:
        super().__init__()
        self.region = FileRegion(file, position, length)
        self.trailer = trailer

    async def dispatch(self, frame: bytearray, client_host: str, client_port: int, listener_name: str,
                       principal: KafkaPrincipal, on_throttle: object = None) -> list:
        body = bytes(frame[4:8])  # the correlation id
        return [INT32.pack(len(body) + len(self.region) + len(self.trailer)), body, self.region, self.trailer]


def serve(path: Path, position: int, length: int, trailer: bytes, client: Callable[[int], None]) -> None:
    """Serve the region of `path` to every request while `client` (in a thread) talks to the server's port."""

    async def test(file: BinaryIO) -> None:
        server = SocketServer(RegionDispatcher(file, position, length, trailer),
                              [Listener("PLAINTEXT", "127.0.0.1", 0)], max_request_bytes=1024 * 1024,
                              connections_max_idle_ms=600000)
        await server.bind()
        await server.start_serving()
        try:
            await asyncio.get_running_loop().run_in_executor(None, client, server.bound[0].port)
        finally:
            await server.stop()

    with open(path, "rb") as file:
        asyncio.run(test(file))


def request(correlation_id: int) -> bytes:
    return INT32.pack(8) + b"\x00\x01\x00\x0c" + INT32.pack(correlation_id)  # a Fetch v12 header's start


def read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, remaining = [], size
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


@pytest.mark.parametrize("length", [256 * 1024, 10 * 1024 * 1024])  # fits the socket's send buffer, or not
def test_regions_arrive_whole_and_in_order_at_a_reader_fast_or_slow(tmp_path: Path, length: int) -> None:
    data = os.urandom(12 * 1024 * 1024)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    position, trailer = 1000, b"\x00\x01\x02"
    expected = data[position:position + length] + trailer

    def client(port: int) -> None:
        for slow in (False, True):
            with socket.socket() as sock:
                if slow:  # a small receive buffer, not read at first: the server's sendfile cannot send it all
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
                sock.connect(("127.0.0.1", port))
                sock.settimeout(10)
                sock.sendall(request(1) + request(2))  # pipelined: answered one after the other
                if slow:
                    time.sleep(0.3)
                for correlation_id in (1, 2):
                    size = INT32.unpack(read_exactly(sock, 4))[0]
                    assert size == 4 + len(expected)
                    assert read_exactly(sock, 4) == INT32.pack(correlation_id)
                    assert read_exactly(sock, len(expected)) == expected, f"slow={slow} response {correlation_id}"

    serve(path, position, length, trailer, client)


def test_a_region_beyond_the_end_of_its_file_closes_the_connection(tmp_path: Path) -> None:
    path = tmp_path / "segment.log"
    path.write_bytes(b"x" * 1000)  # the region says 5000 bytes: the segment was truncated under the fetch

    def client(port: int) -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(request(7))
            size = INT32.unpack(read_exactly(sock, 4))[0]
            assert size == 4 + 5000 + 1
            received = read_exactly(sock, size)
            assert received == INT32.pack(7) + b"x" * 1000  # what the file held, then the connection ends

    serve(path, 0, 5000, b"\x00", client)
