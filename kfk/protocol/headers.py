"""Request and response headers, and the 4-byte size framing around them.

Which header version a message uses follows from its API and version:
- requests: header v2 for flexible versions, v1 otherwise, v0 only for ControlledShutdown v0;
- responses: header v1 for flexible versions, v0 otherwise, except ApiVersionsResponse, which always uses v0 so
  that a client can read the error of a version it asked for but the broker does not know.
The client id stays a classic int16-length string even in header v2 (older brokers must read any ApiVersions
header); the generated RequestHeader codec follows that field-level rule from the schema.
"""

from __future__ import annotations

from functools import lru_cache

from kfk.errors import ProtocolError
from kfk.protocol.message import Buffer, Message
from kfk.protocol.messages import API_SCHEMAS, ApiKey, request_class, response_class
from kfk.protocol.messages.request_header import RequestHeader
from kfk.protocol.messages.response_header import ResponseHeader
from kfk.protocol.primitives import INT16, INT32

__all__ = [
    "RequestHeader",
    "ResponseHeader",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_request_frame",
    "encode_response",
    "request_header_version",
    "response_header_version",
    "frame_size",
]


@lru_cache(maxsize=1024)
def request_header_version(api_key: int, api_version: int) -> int:
    schema = API_SCHEMAS.get(api_key)
    if schema is None:
        raise ProtocolError(f"unknown api key {api_key}")
    if api_key == ApiKey.CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if schema.is_flexible(api_version) else 1


@lru_cache(maxsize=1024)
def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == ApiKey.API_VERSIONS:
        return 0
    schema = API_SCHEMAS.get(api_key)
    if schema is None:
        raise ProtocolError(f"unknown api key {api_key}")
    return 1 if schema.is_flexible(api_version) else 0


def decode_request_header(frame: Buffer) -> tuple[RequestHeader, int]:
    """Decode the header of a request frame (size prefix stripped); returns it and where the body starts.

    The version need not be one this codec knows: a broker must still read the header of an ApiVersions request
    of a newer version, to answer it with UNSUPPORTED_VERSION and the versions it does support."""
    if len(frame) < 4:
        raise ProtocolError(f"request frame of {len(frame)} bytes is shorter than a request header")
    api_key = INT16.unpack_from(frame, 0)[0]
    api_version = INT16.unpack_from(frame, 2)[0]
    if api_version < 0:
        raise ProtocolError(f"negative api version {api_version}")
    return RequestHeader.decode_from(frame, request_header_version(api_key, api_version))


def decode_request(frame: Buffer) -> tuple[RequestHeader, Message]:
    """Decode a whole request frame. Bytes after the body are ignored (librdkafka sends some; see golden/)."""
    header, position = decode_request_header(frame)
    cls = request_class(header.request_api_key)
    version = header.request_api_version
    if not cls.LOWEST_VERSION <= version <= cls.HIGHEST_VERSION:
        raise ProtocolError(f"{cls.NAME} has no version {version}")
    return header, cls.decode(frame, version, position)


def encode_request(header: RequestHeader, message: Message) -> bytes:
    """A complete request frame, size prefix included."""
    version = header.request_api_version
    out: list = [b""]
    header.encode_into(out, request_header_version(header.request_api_key, version))
    message.encode_into(out, version)
    out[0] = INT32.pack(sum(map(len, out)))
    return b"".join(out)


@lru_cache(maxsize=1024)
def _request_header_around_correlation_id(api_key: int, api_version: int, client_id: str | None
                                          ) -> tuple[bytes, bytes]:
    """A request header's bytes before and after its correlation id, encoded once by the generated codec: every
    header version starts with api key, api version and correlation id (bytes 4-8), and the rest (client id, tagged
    fields) is the same for every request a client sends at that version."""
    out: list = []
    RequestHeader(request_api_key=api_key, request_api_version=api_version, correlation_id=0,
                  client_id=client_id).encode_into(out, request_header_version(api_key, api_version))
    header = b"".join(out)
    return header[:4], header[8:]


def encode_request_frame(api_key: int, api_version: int, correlation_id: int, client_id: str | None,
                         message: Message) -> bytes:
    """encode_request with a header of no tagged fields, for a client's requests: no RequestHeader built and encoded
    per request (the producer sends thousands a second), only its correlation id packed."""
    before, after = _request_header_around_correlation_id(api_key, api_version, client_id)
    out: list = [b"", before, INT32.pack(correlation_id), after]
    message.encode_into(out, api_version)
    out[0] = INT32.pack(sum(map(len, out)))
    return b"".join(out)


def encode_response(correlation_id: int, api_key: int, api_version: int, message: Message) -> list:
    """The chunks of a complete response frame, size prefix first; the caller writes them with writelines, so large
    record payloads are not copied into one buffer."""
    # Header v0 is the correlation id; v1 adds tagged fields, of which a response header has none (one 0 byte).
    header = INT32.pack(correlation_id)
    out: list = [b"", header if response_header_version(api_key, api_version) == 0 else header + b"\x00"]
    message.encode_into(out, api_version)
    out[0] = INT32.pack(sum(map(len, out)))
    return out


def decode_response(frame: Buffer, api_key: int, api_version: int) -> tuple[int, Message]:
    """Decode a response frame (size prefix stripped) to the request it answers; returns (correlation_id, body)."""
    header, position = ResponseHeader.decode_from(frame, response_header_version(api_key, api_version))
    return header.correlation_id, response_class(api_key).decode(frame, api_version, position)


def frame_size(buffer: Buffer, position: int = 0) -> int | None:
    """The size declared by the 4-byte prefix at `position`, or None while fewer than 4 bytes are buffered."""
    if len(buffer) - position < 4:
        return None
    size = INT32.unpack_from(buffer, position)[0]
    if size < 0:
        raise ProtocolError(f"negative frame size {size}")
    return size
