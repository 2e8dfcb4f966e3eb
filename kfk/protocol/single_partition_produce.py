"""The producer's common request: a ProduceRequest carrying one partition's batch, encoded without message objects.

A producer writing to one partition (or one partition per broker) sends a request per batch; at 1 KiB records that
is a request per 15 records, and building the generic ProduceRequest, TopicProduceData and PartitionProduceData
objects and walking their encoders cost the producer's network thread more than the rest of the request did.
SingleProduceRequest stands in for that ProduceRequest wherever a request is encoded (it has the message's API_KEY
and encode_into): for the flexible versions that name topics (v9-v12) it writes the body straight from its six
fields; any other version goes through the generated codec, which stays the definition of the format
(tests/protocol/test_single_partition_produce.py checks that both write the same bytes for every version).
"""

from __future__ import annotations

from functools import lru_cache

from kfk.common.varint import SMALL_UNSIGNED_VARINTS
from kfk.protocol.message import Buffer
from kfk.protocol.messages.produce import ProduceRequest
from kfk.protocol.primitives import EMPTY_TAGGED_FIELDS, INT32, unsigned_varint, write_compact_nullable_string
from kfk.protocol.produce_fast import (
    ACKS_TIMEOUT,
    COMPACT_ONE,
    FIRST_FLEXIBLE_VERSION,
    HIGHEST_VERSION,
    SinglePartitionProduceResponse,
    read_single_partition_produce_response,
)

__all__ = ["SingleProduceRequest"]

_ONE = bytes([COMPACT_ONE])


@lru_cache(maxsize=256)
def _compact_nullable_string(value: str | None) -> bytes:
    """A topic name or transactional id as written, once per distinct value (the same few go into every request)."""
    out: list = []
    write_compact_nullable_string(value, out)
    return b"".join(out)


class SingleProduceRequest:
    """ProduceRequest(transactional_id, acks, timeout_ms, [topic: [partition: records]]), encodable at any version
    a ProduceRequest is."""

    API_KEY = ProduceRequest.API_KEY
    __slots__ = ("transactional_id", "acks", "timeout_ms", "topic", "partition", "records")

    def __init__(self, transactional_id: str | None, acks: int, timeout_ms: int, topic: str, partition: int,
                 records: Buffer) -> None:
        self.transactional_id = transactional_id
        self.acks = acks
        self.timeout_ms = timeout_ms
        self.topic = topic
        self.partition = partition
        self.records = records

    def __repr__(self) -> str:
        return (f"SingleProduceRequest(transactional_id={self.transactional_id!r}, acks={self.acks}, "
                f"{self.topic}-{self.partition}, {len(self.records)} bytes)")

    def to_message(self) -> ProduceRequest:
        """The same request as the generated codec's message."""
        return ProduceRequest(
            transactional_id=self.transactional_id, acks=self.acks, timeout_ms=self.timeout_ms,
            topic_data=[ProduceRequest.TopicProduceData(name=self.topic, partition_data=[
                ProduceRequest.PartitionProduceData(index=self.partition, records=self.records)])])

    def read_response(self, frame: Buffer, version: int) -> SinglePartitionProduceResponse | None:
        """This request's response read without the generic codec, when it has the common shape (else None).
        ClientConnection asks the request it sent, so only a sender of SingleProduceRequest gets this result."""
        return read_single_partition_produce_response(frame, version, self.topic, self.partition)

    def encode_into(self, out: list, version: int) -> None:
        if not FIRST_FLEXIBLE_VERSION <= version <= HIGHEST_VERSION:
            self.to_message().encode_into(out, version)
            return
        records_length = len(self.records) + 1
        out += (_compact_nullable_string(self.transactional_id), ACKS_TIMEOUT.pack(self.acks, self.timeout_ms),
                _ONE, _compact_nullable_string(self.topic), _ONE, INT32.pack(self.partition),
                SMALL_UNSIGNED_VARINTS[records_length] if records_length < 128 else unsigned_varint(records_length),
                self.records, EMPTY_TAGGED_FIELDS, EMPTY_TAGGED_FIELDS, EMPTY_TAGGED_FIELDS)
