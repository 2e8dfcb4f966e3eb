"""Frames real clients sent (and a peer broker answered): requests decode and re-encode byte for byte; responses
decode, except the malformed ones, which must fail with ProtocolError and nothing else."""

from __future__ import annotations

import pytest

from kfk.errors import ProtocolError
from kfk.protocol.headers import (
    decode_request,
    decode_response,
    encode_request,
    request_header_version,
    response_header_version,
)
from kfk.protocol.messages import response_class

from .golden import (
    GOLDEN,
    MALFORMED_RESPONSES,
    TRAILING_BYTES_REQUESTS,
    frame,
    index,
    request_entries,
    response_entries,
)

REQUESTS = request_entries()
RESPONSES = response_entries()


def test_the_copy_is_complete() -> None:
    assert len(REQUESTS) == 453
    assert len(RESPONSES) == 422
    files = {path.relative_to(GOLDEN).as_posix() for path in (GOLDEN / "frames").rglob("*.bin")}
    assert files == {e["request"] for e in REQUESTS} | {e["response"] for e in RESPONSES}
    assert set(TRAILING_BYTES_REQUESTS) <= files and MALFORMED_RESPONSES <= files


@pytest.mark.parametrize("entry", REQUESTS, ids=[e["request"].removeprefix("frames/") for e in REQUESTS])
def test_request(entry: dict) -> None:
    data = frame(entry["request"])
    header, body = decode_request(data)
    assert header.request_api_key == entry["api_key"]
    assert header.request_api_version == entry["api_version"]
    assert header.correlation_id == entry["correlation_id"]
    assert header.client_id == entry["client_id"]
    assert request_header_version(entry["api_key"], entry["api_version"]) == entry["request_header_version"]
    assert body.API_KEY == entry["api_key"]
    reencoded = encode_request(header, body)
    assert int.from_bytes(reencoded[:4], "big") == len(reencoded) - 4
    trailing = TRAILING_BYTES_REQUESTS.get(entry["request"])
    if trailing is None:
        assert reencoded[4:] == data
    else:
        # The codec reads the body the schema defines and ignores what follows; re-encoding writes that body only.
        assert reencoded[4:] == data[:-trailing]
        assert reencoded[4:] != data
    # A memoryview frame decodes to the same message (the broker hands the codec views of its read buffer).
    assert decode_request(memoryview(data)) == (header, body)


@pytest.mark.parametrize("entry", RESPONSES, ids=[e["response"].removeprefix("frames/") for e in RESPONSES])
def test_response(entry: dict) -> None:
    data = frame(entry["response"])
    api_key, version = entry["api_key"], entry["api_version"]
    assert response_header_version(api_key, version) == entry["response_header_version"]
    if entry["response"] in MALFORMED_RESPONSES:
        with pytest.raises(ProtocolError):
            decode_response(data, api_key, version)
        return
    correlation_id, body = decode_response(data, api_key, version)
    assert correlation_id == entry["correlation_id"]
    cls = response_class(api_key)
    assert type(body) is cls
    # tansu writes some tagged fields at their default value, which kfk (like Kafka) leaves out, so the bytes
    # may differ; the decoded message must survive kfk's own round trip.
    assert cls.decode(body.encode(version), version) == body


def test_known_quirky_requests_carry_the_documented_trailing_bytes() -> None:
    metadata = frame("frames/confluent-kafka/0006-Metadata-v12-req.bin")
    assert metadata.endswith(b"\x00\x00\x00\x00\x01\x00\x00")
    _, body = decode_request(metadata)
    assert body.topics is None
    assert body.allow_auto_topic_creation is False
    assert body.include_topic_authorized_operations is False
    scram = frame("frames/confluent-kafka/0168-AlterUserScramCredentials-v0-req.bin")
    assert scram.endswith(b"\x00\x00")


def test_the_index_covers_every_client() -> None:
    assert {e["client"] for e in index()} == {"confluent-kafka", "kafka-python", "aiokafka", "kcat"}


def test_produce_records_are_slices_of_the_frame() -> None:
    """Zero copy: decoding a memoryview frame yields record data that is a view into that same frame."""
    produce = [e for e in REQUESTS if e["api_name"] == "Produce"]
    assert len(produce) > 30
    for entry in produce:
        data = frame(entry["request"])
        view = memoryview(data)
        _, body = decode_request(view)
        for topic in body.topic_data:
            for partition in topic.partition_data:
                records = partition.records
                assert isinstance(records, memoryview) and records.obj is data
        _, from_bytes = decode_request(data)
        assert isinstance(from_bytes.topic_data[0].partition_data[0].records, bytes)
