"""kfk.protocol.produce_fast against the generated codec: every frame the fast reader reads decodes to the same
fields generically, damaged frames included, and the fast response frame is byte for byte the generic encoder's."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kfk.protocol.headers import (
    RequestHeader,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.produce import ProduceRequest, ProduceResponse
from kfk.protocol.produce_fast import (
    read_single_partition_produce,
    read_single_partition_produce_response,
    single_partition_produce_response,
)
from tests.protocol.strategies import message_strategy

VERSIONS = st.integers(3, 12)
INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
# Names across the one-byte/two-byte compact length boundary (126 bytes + 1 is the last one-byte varint).
NAMES = st.one_of(st.text(max_size=12), st.text(alphabet="abc", min_size=120, max_size=140))


def frame_of(message: ProduceRequest, version: int) -> bytes:
    header = RequestHeader(request_api_key=ApiKey.PRODUCE, request_api_version=version, correlation_id=7,
                           client_id="fast")
    return encode_request(header, message)[4:]


@st.composite
def single_partition_requests(draw: st.DrawFn) -> tuple[ProduceRequest, int]:
    version = draw(VERSIONS)
    records = draw(st.binary(max_size=300))
    message = ProduceRequest(
        transactional_id=draw(st.one_of(st.none(), st.just(None), st.text(max_size=5))),
        acks=draw(INT16), timeout_ms=draw(INT32),
        topic_data=[ProduceRequest.TopicProduceData(name=draw(NAMES), partition_data=[
            ProduceRequest.PartitionProduceData(index=draw(INT32), records=draw(st.one_of(st.just(records),
                                                                                           st.none())))])])
    return message, version


def assert_agrees(frame: bytes | bytearray, version: int) -> bool:
    """The fast reader's answer matches the generic decoder's whenever it gives one; True if it gave one."""
    _, position = decode_request_header(frame)
    fast = read_single_partition_produce(frame, position, version)
    if fast is None:
        return False
    request = ProduceRequest.decode(frame, version, position)  # must not fail where the fast reader succeeded
    assert request.transactional_id is None
    assert len(request.topic_data) == 1 and len(request.topic_data[0].partition_data) == 1
    topic = request.topic_data[0]
    partition = topic.partition_data[0]
    assert (fast.acks, fast.timeout_ms, fast.topic, fast.partition, bytes(fast.records)) == \
        (request.acks, request.timeout_ms, topic.name, partition.index, bytes(partition.records))
    return True


@settings(max_examples=400)
@given(single_partition_requests())
def test_the_common_shape_reads_as_the_generic_decoder_reads_it(drawn: tuple[ProduceRequest, int]) -> None:
    message, version = drawn
    frame = frame_of(message, version)
    read = assert_agrees(frame, version)
    partition = message.topic_data[0].partition_data[0]
    common = message.transactional_id is None and partition.records is not None and (
        version < 9 or len(message.topic_data[0].name.encode()) < 127)
    assert read == common


@settings(max_examples=300)
@given(st.data())
def test_any_generated_request_is_read_the_same_or_left_to_the_generic_path(data: st.DataObject) -> None:
    version = data.draw(VERSIONS)
    message = data.draw(message_strategy("ProduceRequest", version))
    assert_agrees(frame_of(message, version), version)


@settings(max_examples=400)
@given(single_partition_requests(), st.data())
def test_damaged_frames_are_read_the_same_or_left_to_the_generic_path(drawn: tuple[ProduceRequest, int],
                                                                      data: st.DataObject) -> None:
    message, version = drawn
    frame = bytearray(frame_of(message, version))
    _, body = decode_request_header(frame)
    if data.draw(st.booleans()):
        del frame[data.draw(st.integers(body, len(frame))):]
    else:
        for _ in range(data.draw(st.integers(1, 3))):
            frame[data.draw(st.integers(body, len(frame) - 1))] = data.draw(st.integers(0, 255))
    try:
        assert_agrees(frame, version)
    except Exception as error:  # only the generic decoder may refuse, and only where the fast reader said None
        raise AssertionError(f"the fast reader read a frame the generic decoder refuses: {error!r}") from error


@settings(max_examples=400)
@given(VERSIONS, NAMES, INT32, INT32, INT16, INT64, INT64, INT64, st.integers(0, 2**31 - 1))
def test_the_response_frame_is_the_generic_encoders(version: int, topic: str, correlation_id: int, partition: int,
                                                    error_code: int, base_offset: int, log_append_time_ms: int,
                                                    log_start_offset: int, throttle_time_ms: int) -> None:
    if version < 5:
        log_start_offset = -1  # not on the wire before v5: the generic encoder drops it
    response = ProduceResponse(throttle_time_ms=throttle_time_ms, responses=[ProduceResponse.TopicProduceResponse(
        name=topic, partition_responses=[ProduceResponse.PartitionProduceResponse(
            index=partition, error_code=error_code, base_offset=base_offset, log_append_time_ms=log_append_time_ms,
            log_start_offset=log_start_offset)])])
    expected = b"".join(encode_response(correlation_id, ApiKey.PRODUCE, version, response))
    assert single_partition_produce_response(correlation_id, version, topic, partition, error_code, base_offset,
                                             log_append_time_ms, log_start_offset, throttle_time_ms) == expected


def assert_response_agrees(frame: bytes | bytearray, version: int, topic: str, partition: int) -> bool:
    """The client's fast reader of a response matches the generic decoder whenever it gives an answer; True if it
    gave one."""
    fast = read_single_partition_produce_response(frame, version, topic, partition)
    if fast is None:
        return False
    _, response = decode_response(frame, ApiKey.PRODUCE, version)  # must not fail where the fast reader succeeded
    assert len(response.responses) == 1 and len(response.responses[0].partition_responses) == 1
    assert response.responses[0].name == topic
    result = response.responses[0].partition_responses[0]
    assert result.record_errors == [] and result.error_message is None
    assert (fast.topic, fast.index, fast.error_code, fast.base_offset, fast.log_append_time_ms,
            fast.log_start_offset, fast.throttle_time_ms, fast.error_message) == \
        (topic, result.index, result.error_code, result.base_offset, result.log_append_time_ms,
         result.log_start_offset, response.throttle_time_ms, None)
    return True


@settings(max_examples=400)
@given(VERSIONS, NAMES, INT32, INT32, INT16, INT64, INT64, INT64, st.integers(0, 2**31 - 1))
def test_the_common_response_is_read_back_by_the_client(version: int, topic: str, correlation_id: int,
                                                        partition: int, error_code: int, base_offset: int,
                                                        log_append_time_ms: int, log_start_offset: int,
                                                        throttle_time_ms: int) -> None:
    frame = single_partition_produce_response(correlation_id, version, topic, partition, error_code, base_offset,
                                              log_append_time_ms, log_start_offset, throttle_time_ms)[4:]
    assert assert_response_agrees(frame, version, topic, partition)
    assert read_single_partition_produce_response(frame, version, topic + "x", partition) is None
    assert read_single_partition_produce_response(frame, version, topic, partition ^ 1) is None


@settings(max_examples=300)
@given(st.data())
def test_any_generated_response_is_read_the_same_or_left_to_the_generic_path(data: st.DataObject) -> None:
    version = data.draw(VERSIONS)
    message = data.draw(message_strategy("ProduceResponse", version))
    frame = b"".join(encode_response(data.draw(INT32), ApiKey.PRODUCE, version, message))[4:]
    topic, partition = data.draw(NAMES), data.draw(INT32)
    if message.responses and message.responses[0].partition_responses and data.draw(st.booleans()):
        topic, partition = message.responses[0].name, message.responses[0].partition_responses[0].index
    assert_response_agrees(frame, version, topic, partition)


@settings(max_examples=400)
@given(VERSIONS, NAMES, INT32, INT16, INT64, st.data())
def test_damaged_responses_are_read_the_same_or_left_to_the_generic_path(
        version: int, topic: str, partition: int, error_code: int, base_offset: int, data: st.DataObject) -> None:
    frame = bytearray(single_partition_produce_response(9, version, topic, partition, error_code, base_offset, -1,
                                                        -1 if version < 5 else 0, 0)[4:])
    if data.draw(st.booleans()):
        del frame[data.draw(st.integers(4, len(frame))):]
    else:
        for _ in range(data.draw(st.integers(1, 3))):
            frame[data.draw(st.integers(4, len(frame) - 1))] = data.draw(st.integers(0, 255))
    try:
        assert_response_agrees(frame, version, topic, partition)
    except Exception as error:  # only the generic decoder may refuse, and only where the fast reader said None
        raise AssertionError(f"the fast reader read a frame the generic decoder refuses: {error!r}") from error
