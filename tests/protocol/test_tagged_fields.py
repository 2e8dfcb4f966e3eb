"""Unknown tagged fields are skipped: the protocol lets a newer peer add tags an older reader must ignore."""

from __future__ import annotations

import pytest

from kfk.errors import ProtocolError
from kfk.protocol.headers import RequestHeader, decode_request, encode_request
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kfk.protocol.primitives import read_unsigned_varint, unsigned_varint

from .strategies import api_specs, data_specs, message_class, schema_default, versions_of

FLEXIBLE_CASES = [
    (spec, version)
    for spec in api_specs() + data_specs()
    for version in versions_of(spec)
    if spec.flexible_at(version)
]


def tagged_section(entries: list[tuple[int, bytes]]) -> bytes:
    out = [unsigned_varint(len(entries))]
    for tag, data in sorted(entries):
        out += [unsigned_varint(tag), unsigned_varint(len(data)), data]
    return b"".join(out)


def parse_tagged_section(data: bytes) -> list[tuple[int, bytes]]:
    count, position = read_unsigned_varint(data, 0)
    entries = []
    for _ in range(count):
        tag, position = read_unsigned_varint(data, position)
        size, position = read_unsigned_varint(data, position)
        entries.append((tag, data[position : position + size]))
        position += size
    assert position == len(data)
    return entries


def unknown_tags(known: set[int]) -> list[tuple[int, bytes]]:
    """Tags the schema does not define: a small one, a multi-byte one with a multi-byte length, an empty one."""
    candidates = [(0, b"\x01\x02"), (3, b""), (200, b"\xab" * 130), (70000, b"z")]
    return [(tag, data) for tag, data in candidates if tag not in known]


@pytest.mark.parametrize(
    ("spec", "version"), FLEXIBLE_CASES, ids=[f"{spec.name}-v{version}" for spec, version in FLEXIBLE_CASES]
)
def test_unknown_top_level_tags_are_skipped(spec, version) -> None:
    cls = message_class(spec)
    message = cls(**{f.attribute: schema_default(f, cls, spec) for f in spec.struct.fields})
    wire = message.encode(version)
    assert wire.endswith(b"\x00"), "a message whose tagged fields are all default ends with an empty tag section"
    known = {f.tag for f in spec.struct.fields if f.tagged_at(version)}
    injected = wire[:-1] + tagged_section(unknown_tags(known))
    decoded, end = cls.decode_from(injected + b"\xee", version)
    assert end == len(injected)
    assert decoded == message
    assert decoded.encode(version) == wire  # unknown tags are not kept, so they are not re-sent


def test_unknown_tags_between_known_ones() -> None:
    message = ApiVersionsResponse(finalized_features_epoch=7, zk_migration_ready=True)
    wire = message.encode(3)
    prefix = ApiVersionsResponse().encode(3)[:-1]
    entries = parse_tagged_section(wire[len(prefix) :])
    assert [tag for tag, _ in entries] == [1, 3]
    injected = prefix + tagged_section(entries + [(2000, b"junk"), (0x7FFFFFFF, b"")])
    assert ApiVersionsResponse.decode(injected, 3) == message


def test_unknown_tags_in_a_nested_struct() -> None:
    message = ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)])
    wire = message.encode(3)
    # error_code, compact array of 1 (0x02), api_key/min/max, the entry's empty tag section, throttle, top tags.
    assert wire == b"\x00\x00" + b"\x02" + b"\x00\x12\x00\x00\x00\x04" + b"\x00" + b"\x00\x00\x00\x00" + b"\x00"
    injected = wire[:9] + tagged_section([(5, b"hello"), (300, b"")]) + wire[10:]
    assert ApiVersionsResponse.decode(injected, 3) == message


def test_unknown_tags_in_request_header_v2() -> None:
    header = RequestHeader(request_api_key=ApiKey.API_VERSIONS, request_api_version=3, correlation_id=9, client_id="c")
    body = ApiVersionsRequest(client_software_name="kfk", client_software_version="1")
    frame = encode_request(header, body)[4:]
    header_end = 2 + 2 + 4 + 2 + 1  # key, version, correlation id, client id "c"
    assert frame[header_end] == 0
    injected = frame[:header_end] + tagged_section([(0, b"\xff" * 3), (9, b"")]) + frame[header_end + 1 :]
    decoded_header, decoded_body = decode_request(injected)
    assert decoded_header == header
    assert decoded_body == body


def test_tag_overrunning_the_buffer_is_a_protocol_error() -> None:
    prefix = ApiVersionsRequest().encode(3)[:-1]
    with pytest.raises(ProtocolError):
        ApiVersionsRequest.decode(prefix + b"\x01\x05\x10abc", 3)  # one tag of 16 bytes, 3 present
    with pytest.raises(ProtocolError):
        ApiVersionsResponse.decode(ApiVersionsResponse().encode(3)[:-1] + b"\x01\x01\x10abc", 3)
