"""The sans-I/O connection driven over an in-memory transport: a ClientConnection's bytes go into a
ServerConnection, whose frames are decoded and answered with the broker's response encoding, and the answers go back
into the ClientConnection, in whatever pieces a test chooses."""

from __future__ import annotations

import pytest

from kfk.errors import ErrorCode, ProtocolError
from kfk.protocol.connection import (
    DIRECT_FRAME_BYTES,
    FIRST_FRAME_CHUNK_BYTES,
    ClientConnection,
    Response,
    ServerConnection,
    StreamError,
)
from kfk.protocol.headers import (
    RequestHeader,
    decode_request,
    encode_request,
    encode_request_frame,
    encode_response,
)
from kfk.protocol.messages import ApiKey, request_class
from kfk.protocol.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kfk.protocol.messages.fetch import FetchRequest, FetchResponse
from kfk.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kfk.protocol.messages.produce import ProduceRequest, ProduceResponse
from kfk.protocol.primitives import INT32

METADATA_VERSION = 12  # flexible: request header v2, response header v1


def metadata_request(topic: str = "t") -> MetadataRequest:
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)])


def produce_request(acks: int, records: bytes = b"") -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name="t", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records)])])


def answer(frame: bytearray, response_for=None) -> bytes:
    """What the broker writes back for one request frame: a response of the request's api and version."""
    header, request = decode_request(bytes(frame))
    key, version = header.request_api_key, header.request_api_version
    if response_for is not None:
        response = response_for(header, request)
    elif key == ApiKey.METADATA:
        response = MetadataResponse(cluster_id=f"answer-to-{header.correlation_id}")
    elif key == ApiKey.PRODUCE:
        response = ProduceResponse(throttle_time_ms=header.correlation_id)
    else:
        response = ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(api_key=0, min_version=0,
                                                                                max_version=11)])
    return b"".join(encode_response(header.correlation_id, key, version, response))


def test_request_split_byte_by_byte_comes_out_whole_once() -> None:
    client: ClientConnection[str] = ClientConnection("c")
    server = ServerConnection(max_request_bytes=1 << 20)
    data = client.send_request(metadata_request(), METADATA_VERSION, "m")
    events = [server.receive_data(data[i:i + 1]) for i in range(len(data))]
    assert events[:-1] == [[]] * (len(data) - 1)
    assert events[-1] == [bytearray(data[4:])]
    header, request = decode_request(bytes(events[-1][0]))
    assert (header.request_api_key, header.request_api_version, header.client_id) == (ApiKey.METADATA, 12, "c")
    assert request.topics[0].name == "t"


def test_response_split_byte_by_byte_is_matched_to_its_request() -> None:
    client: ClientConnection[str] = ClientConnection("c")
    server = ServerConnection(max_request_bytes=1 << 20)
    (frame,) = server.receive_data(client.send_request(metadata_request(), METADATA_VERSION, "context"))
    reply = answer(frame)
    events = [client.receive_data(reply[i:i + 1]) for i in range(len(reply))]
    assert events[:-1] == [[]] * (len(reply) - 1)
    (response,) = events[-1]
    assert isinstance(response, Response)
    assert (response.api_key, response.api_version, response.context) == (ApiKey.METADATA, METADATA_VERSION,
                                                                           "context")
    assert response.message.cluster_id == f"answer-to-{response.correlation_id}"
    assert not client.in_flight


def test_pipelined_requests_and_several_frames_in_one_chunk() -> None:
    client: ClientConnection[int] = ClientConnection("c")
    server = ServerConnection(max_request_bytes=1 << 20)
    data = b"".join(client.send_request(metadata_request(f"t{i}"), METADATA_VERSION, i) for i in range(5))
    assert [pending.context for pending in client.in_flight] == [0, 1, 2, 3, 4]
    frames = server.receive_data(data)
    assert [decode_request(bytes(frame))[1].topics[0].name for frame in frames] == [f"t{i}" for i in range(5)]
    replies = b"".join(answer(frame) for frame in frames)
    # Three and a half responses in the first chunk, the rest in the second.
    cut = len(replies) * 7 // 10
    first, second = client.receive_data(replies[:cut]), client.receive_data(replies[cut:])
    assert [event.context for event in first + second] == [0, 1, 2, 3, 4]
    assert [event.correlation_id for event in first + second] == [0, 1, 2, 3, 4]
    assert 0 < len(first) < 5 and not client.in_flight


@pytest.mark.parametrize("chunk", [1, 5000])
def test_large_frames_are_received_into_their_own_buffer(chunk: int) -> None:
    client: ClientConnection[str] = ClientConnection("c")
    server = ServerConnection(max_request_bytes=1 << 20)
    records = bytes(range(256)) * (3 * DIRECT_FRAME_BYTES // 256)
    parts = [client.send_request(metadata_request("before"), METADATA_VERSION, "a"),
             client.send_request(produce_request(1, records), 9, "b"),
             client.send_request(metadata_request("after"), METADATA_VERSION, "c")]
    data = b"".join(parts)
    frames: list = []
    position = 0
    while position < len(data):  # as asyncio's BufferedProtocol does it: into the buffer the connection gives
        buffer = server.get_buffer()
        count = min(len(buffer), len(data) - position, chunk)
        buffer[:count] = data[position:position + count]
        position += count
        frames.extend(server.buffer_updated(count))
    assert [len(frame) for frame in frames] == [len(data) - 4 for data in parts]
    assert decode_request(bytes(frames[1]))[1].topic_data[0].partition_data[0].records == records
    assert decode_request(bytes(frames[2]))[1].topics[0].name == "after"


def test_a_large_frame_grows_with_the_bytes_that_arrive_not_its_announced_size() -> None:
    server = ServerConnection(max_request_bytes=100 * 1024 * 1024)
    size = 100 * 1024 * 1024
    assert server.receive_data(INT32.pack(size) + b"head") == []
    assert server.receiving and server.pending_frame_bytes == size
    assert len(server.get_buffer()) == FIRST_FRAME_CHUNK_BYTES - 4  # a megabyte, not the hundred announced
    body = bytes(range(256)) * (3 * FIRST_FRAME_CHUNK_BYTES // 256)  # three chunks' worth: two doublings
    assert server.receive_data(body) == []
    assert len(server.get_buffer()) == 4 * FIRST_FRAME_CHUNK_BYTES - 4 - len(body)
    rest = b"\x07" * (size - 4 - len(body))
    (frame,) = server.receive_data(rest)
    assert len(frame) == size and frame[:4] == b"head" and frame[4:4 + len(body)] == body and frame[-1] == 7
    assert not server.receiving and server.pending_frame_bytes == 0


def test_a_response_is_received_whole_into_one_buffer_and_its_records_are_slices_of_it() -> None:
    client: ClientConnection[str] = ClientConnection("c", max_response_bytes=8 * FIRST_FRAME_CHUNK_BYTES)
    client.send_request(FetchRequest(max_wait_ms=0, min_bytes=1, topics=[]), 12, "fetch")
    records = bytes(range(256)) * (5 * FIRST_FRAME_CHUNK_BYTES // 512)  # 2.5 first chunks: the server would double
    reply = b"".join(encode_response(0, ApiKey.FETCH, 12, FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
        topic="t", partitions=[FetchResponse.PartitionData(partition_index=0, records=records)])])))
    head = client.get_buffer()
    head[:100] = reply[:100]
    assert client.buffer_updated(100) == []
    buffer = client.get_buffer()
    assert len(buffer) == len(reply) - 100  # the rest of the frame at once: allocated from the size prefix
    buffer[:] = reply[100:]
    (event,) = client.buffer_updated(len(buffer))
    received = event.message.responses[0].partitions[0].records
    assert isinstance(received, memoryview) and received.obj is buffer.obj  # no copy of the records
    assert received == records and event.context == "fetch"


def test_a_partial_small_frame_counts_as_receiving() -> None:
    server = ServerConnection(max_request_bytes=1000)
    assert not server.receiving
    assert server.receive_data(INT32.pack(100) + b"x" * 10) == []
    assert server.receiving and server.pending_frame_bytes == 0
    assert len(server.receive_data(b"y" * 90)) == 1 and not server.receiving


def test_oversized_request_ends_the_stream_after_the_frames_before_it() -> None:
    client: ClientConnection[None] = ClientConnection("c")
    server = ServerConnection(max_request_bytes=1000)
    small = client.send_request(metadata_request(), METADATA_VERSION, None)
    large = client.send_request(produce_request(1, b"x" * 1000), 9, None)
    events = server.receive_data(small + large + small)
    assert events[0] == bytearray(small[4:])
    assert len(events) == 2 and isinstance(events[1], StreamError)
    assert isinstance(events[1].error, ProtocolError) and "1000" in str(events[1].error)
    assert server.receive_data(small) == []  # nothing is parsed after a StreamError


def test_the_request_bound_in_force_when_a_size_is_read_decides() -> None:
    """The broker lowers the bound while a SASL connection authenticates and raises it after: a size prefix is
    checked against the bound of the moment it is parsed, before anything is allocated for its frame."""
    client: ClientConnection[None] = ClientConnection("c")
    server = ServerConnection(max_request_bytes=100 * 1024 * 1024)
    small = client.send_request(metadata_request(), METADATA_VERSION, None)
    large = client.send_request(produce_request(1, b"x" * 1000), 9, None)
    server.max_request_bytes = 1000
    assert server.receive_data(small) == [bytearray(small[4:])]
    server.max_request_bytes = 100 * 1024 * 1024
    assert server.receive_data(large) == [bytearray(large[4:])]
    server.max_request_bytes = 1000
    (event,) = server.receive_data(large[:4])
    assert isinstance(event, StreamError) and "1000" in str(event.error) and server.pending_frame_bytes == 0


@pytest.mark.parametrize("size", [-1, 3, 2**31 - 1])
def test_impossible_request_sizes_end_the_stream(size: int) -> None:
    server = ServerConnection(max_request_bytes=100 * 1024 * 1024)
    (event,) = server.receive_data(INT32.pack(size) + b"\x00" * 16)
    assert isinstance(event, StreamError)


def test_oversized_response_ends_the_stream() -> None:
    client: ClientConnection[None] = ClientConnection("c", max_response_bytes=64)
    server = ServerConnection(max_request_bytes=1 << 20)
    (frame,) = server.receive_data(client.send_request(metadata_request(), METADATA_VERSION, None))
    reply = b"".join(encode_response(0, ApiKey.METADATA, METADATA_VERSION, MetadataResponse(cluster_id="x" * 100)))
    (event,) = client.receive_data(reply)
    assert isinstance(event, StreamError) and "64" in str(event.error)
    assert len(client.in_flight) == 1


def test_correlation_id_mismatch_is_a_stream_error() -> None:
    client: ClientConnection[str] = ClientConnection("c")
    server = ServerConnection(max_request_bytes=1 << 20)
    frames = server.receive_data(client.send_request(metadata_request(), METADATA_VERSION, "first")
                                 + client.send_request(metadata_request(), METADATA_VERSION, "second"))
    # The answers swapped: the second request's response arrives first.
    events = client.receive_data(answer(frames[1]) + answer(frames[0]))
    assert len(events) == 1 and isinstance(events[0], StreamError)
    assert "correlation id 1 where 0 was expected" in str(events[0].error)
    assert [pending.context for pending in client.in_flight] == ["first", "second"]  # for the shell to fail
    assert client.receive_data(answer(frames[0])) == []


def test_responses_before_a_mismatch_are_delivered() -> None:
    client: ClientConnection[str] = ClientConnection("c")
    server = ServerConnection(max_request_bytes=1 << 20)
    frames = server.receive_data(b"".join(client.send_request(metadata_request(), METADATA_VERSION, name)
                                          for name in ("a", "b", "c")))
    events = client.receive_data(answer(frames[0]) + answer(frames[2]) + answer(frames[1]))
    assert events[0].context == "a"
    assert isinstance(events[1], StreamError) and len(events) == 2


def test_response_to_no_request_is_a_stream_error() -> None:
    client: ClientConnection[None] = ClientConnection("c")
    reply = b"".join(encode_response(0, ApiKey.METADATA, METADATA_VERSION, MetadataResponse()))
    (event,) = client.receive_data(reply)
    assert isinstance(event, StreamError) and "to no request" in str(event.error)


def test_undecodable_response_is_a_stream_error_and_its_request_stays_in_flight() -> None:
    client: ClientConnection[str] = ClientConnection("c")
    client.send_request(metadata_request(), METADATA_VERSION, "m")
    (event,) = client.receive_data(INT32.pack(6) + INT32.pack(0) + b"\x00\x07")  # a body cut short
    assert isinstance(event, StreamError) and isinstance(event.error, ProtocolError)
    assert [pending.context for pending in client.in_flight] == ["m"]


def test_acks_0_produce_is_not_waited_for() -> None:
    client: ClientConnection[str] = ClientConnection("c")
    server = ServerConnection(max_request_bytes=1 << 20)
    data = (client.send_request(produce_request(0, b"r"), 9, "unused", expect_response=False)
            + client.send_request(metadata_request(), METADATA_VERSION, "metadata"))
    assert [pending.context for pending in client.in_flight] == ["metadata"]
    produce, metadata = server.receive_data(data)
    assert decode_request(bytes(produce))[0].correlation_id == 0
    # The broker answers only the metadata request; its response is the next one the client expects.
    (event,) = client.receive_data(answer(metadata))
    assert (event.correlation_id, event.context) == (1, "metadata")
    assert not client.in_flight


def test_api_versions_response_header_is_v0_even_for_flexible_versions() -> None:
    client: ClientConnection[None] = ClientConnection("c")
    server = ServerConnection(max_request_bytes=1 << 20)
    request = ApiVersionsRequest(client_software_name="kfk", client_software_version="1")
    (frame,) = server.receive_data(client.send_request(request, 3, None))
    reply = answer(frame)
    # Header v0: the correlation id, then straight away the body's error code (no tagged-fields byte).
    assert reply[4:8] == INT32.pack(0) and reply[8:10] == b"\x00\x00"
    (event,) = client.receive_data(reply)
    assert event.message.api_keys[0].max_version == 11


def test_api_versions_unsupported_version_is_read_as_a_v0_body() -> None:
    client: ClientConnection[None] = ClientConnection("c")
    server = ServerConnection(max_request_bytes=1 << 20)
    request = ApiVersionsRequest(client_software_name="kfk", client_software_version="1")
    (frame,) = server.receive_data(client.send_request(request, 3, None))
    # A broker that does not know v3 answers at v0, which v3's decoder could not read (KIP-511).
    unsupported = ApiVersionsResponse(error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=ApiKey.API_VERSIONS, min_version=0, max_version=2)])
    reply = answer(frame, lambda header, request: unsupported)
    assert reply != b"".join(encode_response(0, ApiKey.API_VERSIONS, 0, unsupported))
    (event,) = client.receive_data(b"".join(encode_response(0, ApiKey.API_VERSIONS, 0, unsupported)))
    assert event.message.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert event.api_version == 3 and event.message.api_keys[0].max_version == 2


def test_correlation_ids_wrap_at_int32_max() -> None:
    client: ClientConnection[None] = ClientConnection("c")
    client._next_correlation_id = 2**31 - 1
    client.send_request(metadata_request(), METADATA_VERSION, None)
    client.send_request(metadata_request(), METADATA_VERSION, None)
    assert [pending.correlation_id for pending in client.in_flight] == [2**31 - 1, 0]


@pytest.mark.parametrize("client_id", [None, "", "perf-producer-client", "clïent-é"])
def test_request_frames_are_the_bytes_encode_request_writes_for_every_api_and_version(client_id: str | None) -> None:
    """ClientConnection writes headers from bytes cached per api and version (encode_request_frame): the same frame,
    header v0, v1 and v2 alike, as a RequestHeader encoded per request."""
    for api_key in ApiKey:
        cls = request_class(api_key)
        for version in range(cls.LOWEST_VERSION, cls.HIGHEST_VERSION + 1):
            for correlation_id in (0, 1, 2**31 - 1):
                header = RequestHeader(request_api_key=api_key, request_api_version=version,
                                       correlation_id=correlation_id, client_id=client_id)
                assert encode_request_frame(api_key, version, correlation_id, client_id, cls()) == \
                    encode_request(header, cls()), (api_key, version)
