"""A minimal blocking wire client for broker tests: send a frame, read the answer, using kfk's own codec."""

from __future__ import annotations

import socket

from kfk.protocol.headers import RequestHeader, decode_response, encode_request
from kfk.protocol.message import Message
from kfk.protocol.messages.api_versions import ApiVersionsRequest


def api_versions_request() -> ApiVersionsRequest:
    """An ApiVersions request for v3+, which must name the client software (Kafka refuses one that names none)."""
    return ApiVersionsRequest(client_software_name="kfk-tests", client_software_version="1.0")


def connect(bootstrap: str, timeout: float = 10.0) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=timeout)
    return sock


def read_frame(sock: socket.socket) -> bytes | None:
    """One response frame without its size prefix, or None if the broker closed the connection."""
    prefix = _read_exactly(sock, 4)
    if prefix is None:
        return None
    return _read_exactly(sock, int.from_bytes(prefix, "big"))


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def request(sock: socket.socket, message: Message, api_version: int, correlation_id: int = 1,
            client_id: str = "kfk-tests") -> Message:
    header = RequestHeader(request_api_key=message.API_KEY, request_api_version=api_version,
                           correlation_id=correlation_id, client_id=client_id)
    sock.sendall(encode_request(header, message))
    frame = read_frame(sock)
    assert frame is not None, "the broker closed the connection"
    answered, response = decode_response(frame, message.API_KEY, api_version)
    assert answered == correlation_id
    return response


def is_closed(sock: socket.socket) -> bool:
    """True when the broker closed the connection (recv returns EOF or the connection was reset)."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
