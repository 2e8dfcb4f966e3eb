"""Malformed input must raise kfk.errors.ProtocolError: never IndexError, struct.error, MemoryError, a hang or a
large allocation driven by a length the peer wrote."""

from __future__ import annotations

import struct
import tracemalloc

import pytest

from kfk.errors import ProtocolError, UnsupportedVersionError
from kfk.protocol.headers import (
    RequestHeader,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    frame_size,
)
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kfk.protocol.messages.create_topics import CreateTopicsRequest
from kfk.protocol.messages.fetch import FetchRequest
from kfk.protocol.messages.find_coordinator import FindCoordinatorRequest
from kfk.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kfk.protocol.messages.produce import ProduceRequest
from kfk.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kfk.protocol.primitives import unsigned_varint

from .golden import TRAILING_BYTES_REQUESTS, frame, request_entries, response_entries


def first_of_each(entries: list[dict], key: str) -> list[dict]:
    seen: dict[tuple, dict] = {}
    for entry in entries:
        if entry[key] not in TRAILING_BYTES_REQUESTS:
            seen.setdefault((entry["api_key"], entry["api_version"]), entry)
    return list(seen.values())


# One request per (API, version) the clients sent, one response per (API, version) tansu answered well.
TRUNCATION_REQUESTS = first_of_each(request_entries(), "request")
TRUNCATION_RESPONSES = [
    e for e in first_of_each(response_entries(), "response") if "OffsetFetch-v3" not in e["response"]
    and "ListOffsets-v0" not in e["response"] and "CreateAcls" not in e["response"]
    and "DescribeUserScram" not in e["response"]
]


def header_v1(api_key: int, version: int, client_id: bytes = b"c") -> bytes:
    return struct.pack(">hhih", api_key, version, 1, len(client_id)) + client_id


def header_v2(api_key: int, version: int) -> bytes:
    return header_v1(api_key, version) + b"\x00"


def test_every_truncated_request_is_a_protocol_error() -> None:
    assert len(TRUNCATION_REQUESTS) > 90
    for entry in TRUNCATION_REQUESTS:
        data = frame(entry["request"])
        decode_request(data)
        for end in range(len(data)):
            with pytest.raises(ProtocolError):
                decode_request(data[:end])
            with pytest.raises(ProtocolError):
                decode_request(memoryview(data)[:end])


def test_every_truncated_response_is_a_protocol_error() -> None:
    assert len(TRUNCATION_RESPONSES) > 60
    for entry in TRUNCATION_RESPONSES:
        data = frame(entry["response"])
        api_key, version = entry["api_key"], entry["api_version"]
        decode_response(data, api_key, version)
        for end in range(len(data)):
            with pytest.raises(ProtocolError):
                decode_response(data[:end], api_key, version)


def test_trailing_bytes_request_decodes_from_every_long_enough_prefix() -> None:
    data = frame("frames/confluent-kafka/0006-Metadata-v12-req.bin")
    body_end = len(data) - TRAILING_BYTES_REQUESTS["frames/confluent-kafka/0006-Metadata-v12-req.bin"]
    expected = decode_request(data)
    for end in range(body_end, len(data) + 1):
        assert decode_request(data[:end]) == expected
    for end in range(body_end):
        with pytest.raises(ProtocolError):
            decode_request(data[:end])


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(b"\xff\xfe", id="string length -2"),
        pytest.param(b"\xff\xff", id="null where not nullable"),
        pytest.param(b"\x80\x00", id="string length int16 min"),
    ],
)
def test_negative_string_length(body: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_request(header_v1(ApiKey.FIND_COORDINATOR, 0) + body)


def test_negative_lengths_of_bytes_arrays_and_records() -> None:
    with pytest.raises(ProtocolError):  # SaslAuthenticate v0: auth_bytes (bytes) of length -5
        SaslAuthenticateRequest.decode(b"\xff\xff\xff\xfb", 0)
    with pytest.raises(ProtocolError):  # Metadata v1: nullable topics array, count -2
        MetadataRequest.decode(b"\xff\xff\xff\xfe", 1)
    assert MetadataRequest.decode(b"\xff\xff\xff\xff", 1).topics is None  # -1 is null, which v1 allows
    with pytest.raises(ProtocolError):  # Metadata v0: topics array not nullable
        MetadataRequest.decode(b"\xff\xff\xff\xff", 0)
    with pytest.raises(ProtocolError, match="null"):  # FindCoordinator v3: compact key string is not nullable
        FindCoordinatorRequest.decode(b"\x00\x00\x00", 3)
    assert FindCoordinatorRequest.decode(b"\x01\x00\x00", 3).key == ""
    # Produce v3: transactional_id null, acks, timeout, one topic "t", one partition, records length -2.
    produce = (b"\xff\xff" + b"\xff\xff" + b"\x00\x00\x03\xe8" + b"\x00\x00\x00\x01\x00\x01t"
               + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x00" + b"\xff\xff\xff\xfe")
    with pytest.raises(ProtocolError):
        ProduceRequest.decode(produce, 3)
    null_records = ProduceRequest.decode(produce[:-4] + b"\xff\xff\xff\xff", 3)
    assert null_records.topic_data[0].partition_data[0].records is None


@pytest.mark.parametrize(
    ("cls", "version", "data"),
    [
        pytest.param(FindCoordinatorRequest, 0, b"\x7f\xffabc", id="string 32767 in 5 bytes"),
        pytest.param(SaslAuthenticateRequest, 0, b"\x7f\xff\xff\xffabc", id="bytes 2**31-1"),
        pytest.param(SaslAuthenticateRequest, 2, b"\xff\xff\xff\xff\x0fabc\x00", id="compact bytes 2**32-2"),
        pytest.param(ApiVersionsRequest, 3, b"\x7fab\x01\x00", id="compact string 126 in 2"),
        pytest.param(ProduceRequest, 9, b"\x00\xff\xff\x00\x00\x03\xe8\x02\x02t\x02\x00\x00\x00\x00\xf0\x0fab",
                     id="compact records 2000"),
    ],
)
def test_length_beyond_the_buffer(cls: type, version: int, data: bytes) -> None:
    with pytest.raises(ProtocolError):
        cls.decode(data, version)


HUGE_COUNTS = [
    pytest.param(MetadataRequest, 1, b"\x7f\xff\xff\xff" + b"\x00" * 8, id="metadata v1 topics int32 max"),
    pytest.param(MetadataRequest, 12, b"\xff\xff\xff\xff\x0f" + b"\x00" * 8, id="metadata v12 compact 2**32-2"),
    pytest.param(MetadataResponse, 0, b"\x7f\xff\xff\xff", id="response brokers int32 max"),
    # Fetch v4: replica, max_wait, min_bytes, max_bytes, isolation, one topic "t", partitions count int32 max.
    pytest.param(FetchRequest, 4, b"\xff\xff\xff\xff" + bytes(12) + b"\x00" + b"\x00\x00\x00\x01\x00\x01t"
                 + b"\x7f\xff\xff\xff" + bytes(8), id="fetch nested partitions"),
    pytest.param(ApiVersionsResponse, 0, b"\x00\x00\x7f\xff\xff\xff" + bytes(10), id="api_keys int32 max"),
    # CreateTopics v0: one topic "t", num_partitions, replication factor, assignments count; then int32[] count.
    pytest.param(CreateTopicsRequest, 0, b"\x00\x00\x00\x01\x00\x01t" + bytes(6) + b"\x00\x00\x00\x01"
                 + bytes(4) + b"\x7f\xff\xff\xff" + bytes(8), id="int32 array int32 max"),
]


@pytest.mark.parametrize(("cls", "version", "data"), HUGE_COUNTS)
def test_huge_array_count_fails_without_allocating(cls: type, version: int, data: bytes) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(ProtocolError):
            cls.decode(data, version)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 256 * 1024, f"decoding a hostile count allocated {peak} bytes"


def test_huge_tag_count_fails_fast() -> None:
    prefix = ApiVersionsRequest().encode(3)[:-1]
    with pytest.raises(ProtocolError):
        ApiVersionsRequest.decode(prefix + b"\xff\xff\xff\xff\x0f" + b"\x01\x00" * 4, 3)
    with pytest.raises(ProtocolError):  # ApiVersionsResponse has known tags: the other tagged-section path
        ApiVersionsResponse.decode(ApiVersionsResponse().encode(3)[:-1] + b"\xff\xff\xff\xff\x0f\x09\x00", 3)


@pytest.mark.parametrize(
    "varint",
    [
        pytest.param(b"\x80\x80\x80\x80\x80\x01", id="6 bytes"),
        pytest.param(b"\xff" * 12 + b"\x01", id="13 bytes"),
        pytest.param(b"\x80\x80\x80\x80\x10", id="2**32 in 5 bytes"),
    ],
)
def test_overlong_varints(varint: bytes) -> None:
    with pytest.raises(ProtocolError):  # as a compact string length
        ApiVersionsRequest.decode(varint + b"\x01\x00" + bytes(8), 3)
    with pytest.raises(ProtocolError):  # as a compact array count
        MetadataRequest.decode(varint + bytes(8), 12)
    with pytest.raises(ProtocolError):  # as the tag count of a tagged section
        ApiVersionsRequest.decode(b"\x01\x01" + varint + bytes(8), 3)


def test_varint_cut_by_the_end_of_the_buffer() -> None:
    for data in (b"\x80", b"\xff\xff\xff\xff", b"\x01\x01\x80\x80"):
        with pytest.raises(ProtocolError):
            ApiVersionsRequest.decode(data, 3)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(header_v1(9999, 0), id="api key 9999"),
        pytest.param(header_v1(-1, 0), id="api key -1"),
        pytest.param(header_v1(ApiKey.PRODUCE, 13), id="produce v13"),  # one beyond Kafka 4.0
        pytest.param(header_v1(ApiKey.METADATA, 0x7FFF), id="metadata v32767"),
        pytest.param(header_v1(ApiKey.METADATA, -1), id="negative version"),
        pytest.param(header_v2(ApiKey.API_VERSIONS, 5) + b"\x01\x01\x00", id="api versions v5"),
        pytest.param(b"", id="empty"),
        pytest.param(b"\x00\x12\x00", id="3 bytes"),
    ],
)
def test_unknown_api_key_or_version(data: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_request(data)


def test_header_of_a_newer_api_versions_request_still_decodes() -> None:
    """A broker answers an ApiVersions request of a version it does not know with its own ranges (KIP-511)."""
    header, position = decode_request_header(header_v2(ApiKey.API_VERSIONS, 9) + b"garbage")
    assert (header.request_api_key, header.request_api_version, header.correlation_id) == (18, 9, 1)
    assert header.client_id == "c"
    assert position == 12


def test_unknown_response_api_key_or_version() -> None:
    with pytest.raises(ProtocolError):
        decode_response(b"\x00\x00\x00\x01", 9999, 0)
    with pytest.raises((ProtocolError, UnsupportedVersionError)):
        decode_response(b"\x00\x00\x00\x01\x00\x00", ApiKey.METADATA, 99)
    beyond = MetadataRequest.HIGHEST_VERSION + 1  # 13 when the schemas were Kafka 3.9's, 14 with Kafka 4.0's
    with pytest.raises(UnsupportedVersionError):
        MetadataRequest.decode(b"", beyond)
    with pytest.raises(UnsupportedVersionError):
        MetadataRequest.decode(b"", -1)
    with pytest.raises(UnsupportedVersionError):
        MetadataRequest().encode(beyond)


def test_invalid_utf8_is_replaced_as_java_does() -> None:
    # Kafka's Java reader decodes invalid UTF-8 with U+FFFD replacements instead of failing the request.
    assert FindCoordinatorRequest.decode(b"\x00\x02\xc3\x28", 0).key == "\ufffd("
    header, _ = decode_request(header_v1(ApiKey.API_VERSIONS, 0, b"\xff\xfe"))
    assert header.client_id == "\ufffd\ufffd"


def test_negative_frame_size() -> None:
    assert frame_size(b"\x00\x00") is None
    assert frame_size(b"\x00\x00\x01\x00") == 256
    with pytest.raises(ProtocolError):
        frame_size(b"\xff\xff\xff\xfe")


def test_values_that_do_not_fit_their_wire_type_fail_to_encode() -> None:
    with pytest.raises(ProtocolError):
        FindCoordinatorRequest(key="x" * 0x8000).encode(0)  # classic string: int16 length
    with pytest.raises(ProtocolError):
        # a null topic name at v1, where names are not nullable
        MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=None)]).encode(1)
    with pytest.raises(ProtocolError):
        ApiVersionsResponse(error_code=0x8000).encode(0)
    header = RequestHeader(request_api_key=18, request_api_version=0, correlation_id=2**31)
    with pytest.raises(ProtocolError):
        encode_request(header, ApiVersionsRequest())


# Kafka's generated readers and writers cap every string at 0x7fff bytes, compact ones included ("string field ...
# had invalid length" / "... is too long to be serialized").


def test_compact_string_longer_than_int16_is_refused_on_encode() -> None:
    with pytest.raises(ProtocolError):
        ApiVersionsRequest(client_software_name="x" * 0x8000).encode(3)


def test_compact_string_longer_than_int16_is_refused_on_decode() -> None:
    data = unsigned_varint(0x8000 + 1) + b"x" * 0x8000 + b"\x01" + b"\x00"  # name, empty version, no tags
    with pytest.raises(ProtocolError):
        ApiVersionsRequest.decode(data, 3)
