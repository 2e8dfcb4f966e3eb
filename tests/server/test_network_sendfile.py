"""Responses with file regions (a fetch response's records) on real sockets against a SocketServer in this process:
the region goes out with sendfile straight from a real file (over TLS: read and encrypted a chunk at a time), whole
and in order, whether the client's socket takes it at once or only as a slow reader drains it; a region the file no
longer holds closes the connection. Over TLS a region far larger than the chunks never sits in memory whole."""

from __future__ import annotations

import asyncio
import hashlib
import os
import socket
import ssl
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import pytest

from kfk.protocol.primitives import INT32
from kfk.security.principal import KafkaPrincipal
from kfk.security.tls import ListenerTls, PrincipalMapper
from kfk.server.dispatch import Dispatcher
from kfk.server.network import TLS_FILE_CHUNK_BYTES, Listener, SocketServer
from kfk.storage.fetch_data_info import FileRegion
from kfk.testing.certificates import Certificates, make_certificates

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


class Tls:
    """The two ends of TLS for one test: the listener's settings and the client's context (trusting the test CA)."""

    def __init__(self, certificates: Certificates) -> None:
        server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        server.load_cert_chain(certificates.broker.certificate, certificates.broker.key)
        self.listener = ListenerTls(server, PrincipalMapper(None))
        self.client = ssl.create_default_context(cafile=str(certificates.ca))

    def wrap(self, sock: socket.socket) -> ssl.SSLSocket:
        return self.client.wrap_socket(sock, server_hostname="localhost")


@pytest.fixture(params=["PLAINTEXT", "SSL"])
def tls(request: pytest.FixtureRequest) -> Tls | None:
    """None for a PLAINTEXT listener (sendfile), a Tls for an SSL listener (chunks through the TLS transport)."""
    return Tls(request.getfixturevalue("certificates")) if request.param == "SSL" else None


class RegionDispatcher(Dispatcher):
    """Answers every request with a frame of the request's correlation id, regions of one file with SEPARATOR between
    them, and a trailer: the shape of a fetch response (header bytes, each partition's records from a segment file
    after its own header bytes, the tagged fields at the end)."""

    def __init__(self, file: BinaryIO, regions: list[tuple[int, int]], trailer: bytes) -> None:
        super().__init__()
        self.parts: list = []
        for position, length in regions:
            self.parts += [SEPARATOR] if self.parts else []
            self.parts.append(FileRegion(file, position, length))
        self.parts.append(trailer)

    async def dispatch(self, frame: bytearray, client_host: str, client_port: int, listener_name: str,
                       principal: KafkaPrincipal, on_throttle: object = None) -> list:
        body = bytes(frame[4:8])  # the correlation id
        return [INT32.pack(len(body) + sum(len(part) for part in self.parts)), body, *self.parts]


SEPARATOR = b"<partition header>"


def expected_parts(data: bytes, regions: list[tuple[int, int]], trailer: bytes) -> bytes:
    """What RegionDispatcher's response holds after the correlation id."""
    return SEPARATOR.join(data[position:position + length] for position, length in regions) + trailer


def serve(path: Path, regions: list[tuple[int, int]], trailer: bytes, client: Callable[[int], None],
          tls: Tls | None = None) -> None:
    """Serve the regions of `path` to every request while `client` (in a thread) talks to the server's port (an SSL
    listener with `tls`)."""

    async def test(file: BinaryIO) -> None:
        server = SocketServer(RegionDispatcher(file, regions, trailer),
                              [Listener("PLAINTEXT" if tls is None else "SSL", "127.0.0.1", 0)],
                              max_request_bytes=1024 * 1024, connections_max_idle_ms=600000,
                              tls=lambda listener_name: tls.listener if tls is not None else None)
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


def connect(port: int, tls: Tls | None, receive_buffer: int | None = None) -> socket.socket:
    """A connection to the server, through TLS with `tls`; `receive_buffer` sets a small SO_RCVBUF (a slow reader)."""
    sock = socket.socket()
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    sock.settimeout(30)
    sock.connect(("127.0.0.1", port))
    return tls.wrap(sock) if tls is not None else sock


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
def test_regions_arrive_whole_and_in_order_at_a_reader_fast_or_slow(tmp_path: Path, length: int,
                                                                    tls: Tls | None) -> None:
    data = os.urandom(12 * 1024 * 1024)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    position, trailer = 1000, b"\x00\x01\x02"
    expected = data[position:position + length] + trailer

    def client(port: int) -> None:
        for slow in (False, True):
            # slow: a small receive buffer, not read at first: the server cannot send it all at once
            with connect(port, tls, 64 * 1024 if slow else None) as sock:
                sock.sendall(request(1) + request(2))  # pipelined: answered one after the other
                if slow:
                    time.sleep(0.3)
                for correlation_id in (1, 2):
                    size = INT32.unpack(read_exactly(sock, 4))[0]
                    assert size == 4 + len(expected)
                    assert read_exactly(sock, 4) == INT32.pack(correlation_id)
                    assert read_exactly(sock, len(expected)) == expected, f"slow={slow} response {correlation_id}"

    serve(path, [(position, length)], trailer, client, tls)


def test_a_response_of_many_regions_large_and_small_arrives_in_order(tmp_path: Path, tls: Tls | None) -> None:
    data = os.urandom(4 * MIB)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    regions = [(0, 100), (5000, 300_000), (10, 7), (1000, 0), (MIB, 2 * MIB), (7, 3)]
    expected = expected_parts(data, regions, b"\x00")

    def client(port: int) -> None:
        with connect(port, tls) as sock:
            sock.sendall(request(5))
            assert INT32.unpack(read_exactly(sock, 4))[0] == 4 + len(expected)
            assert read_exactly(sock, 4 + len(expected)) == INT32.pack(5) + expected

    serve(path, regions, b"\x00", client, tls)


def test_a_region_beyond_the_end_of_its_file_closes_the_connection(tmp_path: Path, tls: Tls | None) -> None:
    path = tmp_path / "segment.log"
    path.write_bytes(b"x" * 1000)  # the region says 5000 bytes: the segment was truncated under the fetch

    def client(port: int) -> None:
        with connect(port, tls) as sock:
            sock.sendall(request(7))
            size = INT32.unpack(read_exactly(sock, 4))[0]
            assert size == 4 + 5000 + 1
            received = read_exactly(sock, size)
            assert received == INT32.pack(7) + b"x" * 1000  # what the file held, then the connection ends

    serve(path, [(0, 5000)], b"\x00", client, tls)


def test_over_tls_a_huge_region_passes_through_memory_a_chunk_at_a_time(tmp_path: Path,
                                                                         certificates: Certificates) -> None:
    """A 32 MiB region to a reader that lets the server's buffers fill first: the server holds a few chunks of it
    at a time (Python's allocations traced while it serves), never the region, and the reader gets every byte."""
    length, trailer = 32 * MIB, b"\x00"
    data = os.urandom(length)
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    expected = hashlib.sha256(INT32.pack(3) + data + trailer).hexdigest()
    del data
    received = hashlib.sha256()
    buffer = memoryview(bytearray(MIB))  # the client reads into this one buffer: it allocates nothing as it reads
    tls = Tls(certificates)

    def client(port: int) -> None:
        with connect(port, tls, 64 * 1024) as sock:
            sock.sendall(request(3))
            time.sleep(0.3)  # the server writes until its transport pauses it
            remaining = INT32.unpack(read_exactly(sock, 4))[0]
            while remaining:
                count = sock.recv_into(buffer, min(remaining, len(buffer)))
                assert count, "the server closed the connection mid-response"
                received.update(buffer[:count])
                remaining -= count

    tracemalloc.start()
    try:
        serve(path, [(0, length)], trailer, client, tls)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert received.hexdigest() == expected
    # About 1.5 MiB (a chunk read, the encrypted bytes the transports hold); reading the region whole held 120 MiB.
    assert peak < length // 4, f"{peak} bytes held at the peak ({TLS_FILE_CHUNK_BYTES}-byte chunks)"
