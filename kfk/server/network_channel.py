"""The local channel between the broker's event loop and its network processes (kfk.server.network_processes): the
messages both sides send, framed on a Unix stream socket.

A message is a 9-byte header (kind, connection id, payload length; big-endian) and its payload. A network process
sends what its clients' TCP connections do (opened, bytes received, ended, can take no more for now); the broker
sends what it does to them (bytes to write, a segment file region to sendfile, pause or resume reading, close).
A SENDFILE message carries the segment file's descriptor as SCM_RIGHTS ancillary data on the sendmsg that writes
its first byte: the kernel hands the network process its own descriptor of the same open file, so a segment deleted
or rolled meanwhile is still read whole, as the broker's own sendfile would read it.
"""

from __future__ import annotations

import json
import socket
import struct

#: kind (u8), connection id (u32), payload length (u32).
HEADER = struct.Struct(">BII")
#: A SENDFILE payload's start: the region's position and length in the file whose descriptor the message carries.
REGION = struct.Struct(">QQ")

# A network process to the broker.
OPENED = 1  # payload: JSON {"listener", "host", "port"}
RECEIVED = 2  # payload: bytes the client sent
EOF = 3  # the client shut down its sending side
LOST = 4  # the connection is gone
WRITE_PAUSED = 5  # the connection's send buffer is full: hold further responses
WRITE_RESUMED = 6

# The broker to a network process.
WRITE = 10  # payload: bytes to send
SENDFILE = 11  # payload: REGION, then bytes to send before the region; one descriptor attached
PAUSE_READING = 12
RESUME_READING = 13
CLOSE = 14  # after what is queued has been sent
ABORT = 15  # at once
CLOSE_LISTENER = 16  # connection id 0, payload: the listener's name; stop accepting on it

#: The most a network process reads from a client at once, so one connection's bytes cannot monopolize the channel.
RECEIVE_CHUNK_BYTES = 1024 * 1024


def message(kind: int, connection_id: int, payload: bytes = b"") -> bytes:
    return HEADER.pack(kind, connection_id, len(payload)) + payload


def header(kind: int, connection_id: int, payload_length: int) -> bytes:
    """The header alone, for a large payload sent after it without copying the two together."""
    return HEADER.pack(kind, connection_id, payload_length)


def opened_payload(listener: str, host: str, port: int) -> bytes:
    return json.dumps({"listener": listener, "host": host, "port": port}).encode()


def parse_opened(payload: bytes) -> tuple[str, str, int]:
    fields = json.loads(payload)
    return fields["listener"], fields["host"], int(fields["port"])


class MessageReader:
    """Splits a byte stream into (kind, connection id, payload) messages. A RECEIVED payload is handed on in the
    pieces it arrives in (`on_received(connection_id, piece)`), never waiting for the whole: a 1 MiB produce request
    goes into its frame as it comes; the other messages are small and handed on whole (`on_message`)."""

    __slots__ = ("_on_message", "_on_received", "_header", "_kind", "_connection_id", "_remaining", "_payload")

    def __init__(self, on_message, on_received) -> None:
        self._on_message = on_message
        self._on_received = on_received
        self._header = bytearray()
        self._kind = 0
        self._connection_id = 0
        self._remaining = 0  # payload bytes still to come for the message whose header was read
        self._payload = bytearray()

    @property
    def receiving_for(self) -> int | None:
        """The connection whose RECEIVED payload comes next, and how much of it is due, or None: lets the reader
        receive the bulk straight into that connection's buffer."""
        return self._connection_id if self._remaining and self._kind == RECEIVED else None

    @property
    def remaining(self) -> int:
        return self._remaining

    def feed(self, data: memoryview) -> None:
        offset, end = 0, len(data)
        while offset < end:
            if self._remaining:
                take = min(self._remaining, end - offset)
                piece = data[offset:offset + take]
                offset += take
                self._remaining -= take
                if self._kind == RECEIVED:
                    self._on_received(self._connection_id, piece)
                else:
                    self._payload += piece
                    if not self._remaining:
                        payload, self._payload = bytes(self._payload), bytearray()
                        self._on_message(self._kind, self._connection_id, payload)
                continue
            need = HEADER.size - len(self._header)
            if need == HEADER.size and end - offset >= need:
                kind, connection_id, length = HEADER.unpack_from(data, offset)
                offset += need
            else:
                take = min(need, end - offset)
                self._header += data[offset:offset + take]
                offset += take
                if len(self._header) < HEADER.size:
                    return
                kind, connection_id, length = HEADER.unpack(self._header)
                self._header.clear()
            self._kind, self._connection_id, self._remaining = kind, connection_id, length
            if not length:
                self._on_message(kind, connection_id, b"")

    def advanced(self, nbytes: int) -> None:
        """`nbytes` of the current RECEIVED payload went straight into its connection (see receiving_for)."""
        self._remaining -= nbytes


def set_socket_options(sock: socket.socket, send_buffer_bytes: int) -> None:
    """A client connection's options, on the event loop's sockets and the network processes' alike: no Nagle delay,
    and Kafka's socket.send.buffer.bytes (100 KiB by default; -1 leaves it to the kernel's autotuning). A bounded
    send buffer costs the kernel less: sendfile of 10 MiB fetch responses into loopback connections whose send
    buffer autotuned to megabytes took 450-530 µs of system time per MB here, 155 µs with Kafka's 100 KiB."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if send_buffer_bytes != -1:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer_bytes)


class SendfileSource:
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
