"""SingleProduceRequest, the producer's one-partition ProduceRequest, writes exactly the bytes the generated codec
writes for the same request, at every Produce version the client sends (its own encoder for v9-v12, the codec's for
the others), and the broker's generic decoder reads them back as that request."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kfk.protocol.apis import SUPPORTED_VERSIONS, ApiKey
from kfk.protocol.headers import decode_request, encode_request
from kfk.protocol.messages.produce import ProduceRequest
from kfk.protocol.messages.request_header import RequestHeader
from kfk.protocol.single_partition_produce import SingleProduceRequest

names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=40)


def frame(request: object, version: int, correlation_id: int = 7) -> bytes:
    header = RequestHeader(request_api_key=ProduceRequest.API_KEY, request_api_version=version,
                           correlation_id=correlation_id, client_id="producer-1")
    return encode_request(header, request)  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(version=st.integers(ProduceRequest.LOWEST_VERSION, SUPPORTED_VERSIONS[ApiKey.PRODUCE].highest),
       transactional_id=st.none() | names, acks=st.sampled_from([-1, 0, 1]),
       timeout_ms=st.integers(0, 2**31 - 1), topic=names, partition=st.integers(0, 2**31 - 1),
       records=st.binary(max_size=300) | st.integers(120, 20_000).map(lambda n: bytes(range(256)) * (n // 256)))
def test_the_same_bytes_as_the_generated_codec(version: int, transactional_id: str | None, acks: int,
                                               timeout_ms: int, topic: str, partition: int, records: bytes) -> None:
    assume(version >= 3 or transactional_id is None)  # Produce v0-v2 have no transactional id
    single = SingleProduceRequest(transactional_id, acks, timeout_ms, topic, partition, records)
    generic = ProduceRequest(transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=records)])])
    encoded = frame(single, version)
    assert encoded == frame(generic, version)
    _, decoded = decode_request(encoded[4:])
    assert decoded == generic


def test_a_long_record_set_and_a_transactional_id() -> None:
    records = b"r" * 70_000  # a multi-byte varint length
    single = SingleProduceRequest("tx-1", -1, 30_000, "events", 3, records)
    for version in (3, 8, 9, 12):
        assert frame(single, version) == frame(single.to_message(), version)
    assert "events-3" in repr(single) and "70000 bytes" in repr(single)
