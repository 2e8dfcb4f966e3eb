"""The produce fast path (ProduceHandler.produce_fast) against the generic path, in process over real logs: two
brokers get the same request frames, one through a dispatcher with the fast handler and one whose Produce handler is
wrapped (which drops it); every response and the log files they leave are the same, byte for byte, refusals
included (corrupt batch, two batches, unknown partition, out-of-order and duplicate sequences, a timestamp beyond
the future bound, whose record errors the fast path answers through the generic encoder)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kfk.common.clock import ManualClock
from kfk.errors import ErrorCode
from kfk.protocol.headers import RequestHeader, decode_response, encode_request
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.produce import ProduceRequest
from kfk.server.dispatch import Dispatcher
from kfk.server.handlers.produce import ProduceHandler
from tests.replication.conftest import Broker, topic_records
from tests.storage.conftest import make_batch

TOPIC = "fast"


def produce_frame(version: int, records: bytes, *, partition: int = 0, acks: int = 1) -> bytes:
    header = RequestHeader(request_api_key=ApiKey.PRODUCE, request_api_version=version, correlation_id=version,
                           client_id="fast-path")
    request = ProduceRequest(acks=acks, timeout_ms=5_000, topic_data=[ProduceRequest.TopicProduceData(
        name=TOPIC, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=records)])])
    return encode_request(header, request)[4:]


def test_the_fast_path_answers_and_appends_as_the_generic_path_does(tmp_path: Path) -> None:
    clock = ManualClock()
    brokers, dispatchers = {}, {}
    generic_calls = {"fast": 0, "generic": 0}
    for name in ("fast", "generic"):
        broker = brokers[name] = Broker(str(tmp_path / name), clock)
        broker.commit(topic_records(TOPIC, 1))
        dispatcher = dispatchers[name] = Dispatcher()
        handler = ProduceHandler(broker.replica_manager)
        produce = handler.produce

        async def counted(context, request, name=name, produce=produce):
            generic_calls[name] += 1
            return await produce(context, request)

        handler.produce = counted  # type: ignore[method-assign]  # observed, not replaced
        handler.register(dispatcher)
    dispatchers["generic"].wrap(ApiKey.PRODUCE, lambda handler: handler)

    corrupt = bytearray(make_batch(0, [b"a", b"b"]))
    corrupt[-3] ^= 0xFF
    idempotent = make_batch(0, [b"i1", b"i2"], producer_id=7, producer_epoch=0, base_sequence=0)
    frames = [
        (9, produce_frame(9, make_batch(0, [b"v1", b"v2", b"v3"]))),
        (7, produce_frame(7, make_batch(0, [b"v4"]))),
        (9, produce_frame(9, idempotent)),
        (9, produce_frame(9, idempotent)),  # a retry: the first offsets again, nothing written
        (9, produce_frame(9, make_batch(0, [b"i3"], producer_id=7, producer_epoch=0, base_sequence=9))),
        (9, produce_frame(9, bytes(corrupt))),
        (9, produce_frame(9, make_batch(0, [b"x"]) + make_batch(0, [b"y"]))),
        (9, produce_frame(9, make_batch(0, [b"z"]), partition=3)),
        (9, produce_frame(9, make_batch(0, [b"future"], timestamp=clock() + 7_200_000))),
        (12, produce_frame(12, make_batch(0, [b"all"]), acks=-1)),
        (5, produce_frame(5, make_batch(0, [b"v5"]))),
    ]
    answers: dict[str, list] = {"fast": [], "generic": []}
    try:
        for version, frame in frames:
            for name, dispatcher in dispatchers.items():
                chunks = asyncio.run(dispatcher.dispatch(bytearray(frame), "127.0.0.1", 1, "PLAINTEXT"))
                data = b"".join(bytes(chunk) for chunk in chunks)
                answers[name].append((data, decode_response(data[4:], ApiKey.PRODUCE, version)[1]))
    finally:
        for broker in brokers.values():
            broker.close()
    assert generic_calls == {"fast": 0, "generic": len(frames)}
    assert [data for data, _ in answers["fast"]] == [data for data, _ in answers["generic"]]
    errors = [response.responses[0].partition_responses[0].error_code for _, response in answers["fast"]]
    assert errors == [ErrorCode.NONE, ErrorCode.NONE, ErrorCode.NONE, ErrorCode.NONE,
                      ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, ErrorCode.CORRUPT_MESSAGE, ErrorCode.INVALID_RECORD,
                      ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_TIMESTAMP, ErrorCode.NONE,
                      ErrorCode.NONE]
    assert answers["fast"][8][1].responses[0].partition_responses[0].record_errors  # named by the generic encoder
    logs = {name: sorted((tmp_path / name).glob(f"{TOPIC}-0/*.log")) for name in brokers}
    assert [path.name for path in logs["fast"]] == [path.name for path in logs["generic"]] != []
    assert [path.read_bytes() for path in logs["fast"]] == [path.read_bytes() for path in logs["generic"]]
    assert logs["fast"][0].stat().st_size > 0
