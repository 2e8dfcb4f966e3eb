"""The common shape of a ProduceRequest, read and answered without the generic message objects.

Most produce requests carry one partition of one topic (librdkafka sends one partition per request when it produces
to many), no transactional id, and no tagged fields. For that shape (Produce v3-v12) `read_single_partition_produce`
reads the few fields straight from the frame and `single_partition_produce_response` writes the whole response frame
from a layout cached per (version, topic): the broker's produce fast path (kfk/server/handlers/produce.py) spends on
them a fraction of what building, decoding and encoding ProduceRequest/ProduceResponse objects costs.

Anything else -- several topics or partitions, a transactional id, null records, tagged fields, a truncated or odd
frame -- reads as None, and the generic codec (kfk/protocol/messages/produce.py) serves the request, with its own
errors. Both give the same result for every frame this reads (tests/protocol/test_produce_fast.py checks them against
each other); the generated codec stays the definition of the wire format.

The client reads the answer to its own one-partition request (kfk/protocol/single_partition_produce.py) with
`read_single_partition_produce_response`, from the same layout the broker writes: at 1 KiB records the producer gets
a response per 15 records, and decoding it into ProduceResponse objects was a tenth of its network thread's work. A
response of any other shape (an error message, record errors, tagged fields, another partition) reads as None and
goes to the generic decoder.
"""

from __future__ import annotations

import struct
from functools import lru_cache
from typing import NamedTuple

from kfk.errors import ProtocolError
from kfk.protocol.message import Buffer
from kfk.protocol.messages.produce import ProduceRequest
from kfk.protocol.primitives import INT16, INT32, read_unsigned_varint, unsigned_varint

#: The first Produce version whose records must be one magic-2 batch, the first flexible one, and the last that
#: names topics (v13, KIP-516, names them by id). The facts of this shape's layout live here; the client's writer of
#: the same request (kfk/protocol/single_partition_produce.py) takes them from this module.
FIRST_SINGLE_BATCH_VERSION = 3
FIRST_FLEXIBLE_VERSION = ProduceRequest.FIRST_FLEXIBLE_VERSION
HIGHEST_VERSION = 12

#: acks and timeout_ms, after the transactional id.
ACKS_TIMEOUT = struct.Struct(">hi")
#: A compact array of one element (its length + 1): the one topic, the one partition.
COMPACT_ONE = 2
_ONE_TOPIC_HEADER = struct.Struct(">hhi")  # v3-v8: null transactional id, then acks and timeout_ms
_FIXED_ONE_PARTITION = struct.Struct(">ii")  # v3-v8: the partitions array's length (1) and the partition index
_FRAME_HEADER = struct.Struct(">ii")  # size prefix and correlation id


class SinglePartitionProduceResponse(NamedTuple):
    """A one-partition ProduceResponse without record errors, an error message or tagged fields: the fields of its
    partition's result (named as in ProduceResponse.PartitionProduceResponse, so the producer reads either)."""

    topic: str
    index: int
    error_code: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    throttle_time_ms: int
    error_message: None = None


class SingleProduce(NamedTuple):
    """The fields of a one-partition ProduceRequest without a transactional id."""

    acks: int
    timeout_ms: int
    topic: str
    partition: int
    #: A slice of the frame (a view of it when the frame is a memoryview, so the validator edits it in place).
    records: Buffer


def read_single_partition_produce(frame: Buffer, position: int, version: int) -> SingleProduce | None:
    """The request body at `position` when it has the common shape, else None (the generic decoder serves it)."""
    if not FIRST_SINGLE_BATCH_VERSION <= version <= HIGHEST_VERSION:
        return None
    size = len(frame)
    try:
        if version >= FIRST_FLEXIBLE_VERSION:
            if frame[position] != 0:  # a transactional id (its compact length + 1), or a multi-byte varint
                return None
            acks, timeout_ms = ACKS_TIMEOUT.unpack_from(frame, position + 1)
            position += 7
            if frame[position] != COMPACT_ONE:  # one topic
                return None
            name_length = frame[position + 1] - 1
            if name_length < 0 or name_length >= 127:  # null, or a name whose length needs two varint bytes
                return None
            position += 2
            topic = str(frame[position:position + name_length], "utf-8", "replace")
            position += name_length
            if frame[position] != COMPACT_ONE:  # one partition
                return None
            partition = INT32.unpack_from(frame, position + 1)[0]
            records_length, position = read_unsigned_varint(frame, position + 5)
            records_length -= 1
            end = position + records_length
            # Null records; or not enough bytes for the records and the three empty tagged-field sections.
            if records_length < 0 or end + 3 > size or frame[end] or frame[end + 1] or frame[end + 2]:
                return None
        else:
            transactional_id_length, acks, timeout_ms = _ONE_TOPIC_HEADER.unpack_from(frame, position)
            if transactional_id_length != -1 or INT32.unpack_from(frame, position + 8)[0] != 1:
                return None
            name_length = INT16.unpack_from(frame, position + 12)[0]
            if name_length < 0:
                return None
            position += 14
            topic = str(frame[position:position + name_length], "utf-8", "replace")
            position += name_length
            partitions, partition = _FIXED_ONE_PARTITION.unpack_from(frame, position)
            records_length = INT32.unpack_from(frame, position + 8)[0]
            position += 12
            end = position + records_length
            if partitions != 1 or records_length < 0 or end > size:
                return None
    except (IndexError, struct.error, ProtocolError):  # truncated, or a malformed varint: the generic path says what
        return None
    return SingleProduce(acks, timeout_ms, topic, partition, frame[position:end])


@lru_cache(maxsize=4096)
def _response_layout(version: int, topic: str) -> tuple[bytes, struct.Struct, bytes, bool]:
    """What surrounds the partition's fields in the response: the bytes before (topic array, name, partition array),
    the partition's fixed fields, the bytes after them up to throttle_time_ms, and whether the version is flexible."""
    name = topic.encode("utf-8")
    if version >= FIRST_FLEXIBLE_VERSION:
        before = b"\x02" + unsigned_varint(len(name) + 1) + name + b"\x02"
        # record_errors (empty), error_message (null), the partition's and the topic's tagged fields (none).
        return before, struct.Struct(">ihqqq"), b"\x01\x00\x00\x00", True
    before = INT32.pack(1) + INT16.pack(len(name)) + name + INT32.pack(1)
    if version < 5:  # log_start_offset from v5
        return before, struct.Struct(">ihqq"), b"", False
    # v8: record_errors (empty), error_message (null)
    return before, struct.Struct(">ihqqq"), (INT32.pack(0) + INT16.pack(-1)) if version >= 8 else b"", False


def single_partition_produce_response(correlation_id: int, version: int, topic: str, partition: int, error_code: int,
                                      base_offset: int, log_append_time_ms: int, log_start_offset: int,
                                      throttle_time_ms: int) -> bytes:
    """The whole response frame (size prefix included) to a one-partition produce of Produce v3-v12, for a result
    without record_errors or an error message (KIP-467's fields are written empty)."""
    before, fields, after, flexible = _response_layout(version, topic)
    if version >= 5:
        partition_fields = fields.pack(partition, error_code, base_offset, log_append_time_ms, log_start_offset)
    else:
        partition_fields = fields.pack(partition, error_code, base_offset, log_append_time_ms)
    body = before + partition_fields + after + INT32.pack(throttle_time_ms)
    if flexible:  # header v1 (an empty tagged-field section after the correlation id); the body's tagged fields
        return _FRAME_HEADER.pack(len(body) + 6, correlation_id) + b"\x00" + body + b"\x00"
    return _FRAME_HEADER.pack(len(body) + 4, correlation_id) + body


def read_single_partition_produce_response(frame: Buffer, version: int, topic: str, partition: int
                                           ) -> SinglePartitionProduceResponse | None:
    """The response frame (size prefix stripped, correlation id first) to a one-partition produce of `topic` and
    `partition` when it is exactly what single_partition_produce_response writes, else None (the generic decoder
    reads it)."""
    if not FIRST_SINGLE_BATCH_VERSION <= version <= HIGHEST_VERSION:
        return None
    before, fields, after, flexible = _response_layout(version, topic)
    position = 5 if flexible else 4  # the correlation id, and header v1's empty tagged-field section
    try:
        if flexible and frame[4]:
            return None
        end = position + len(before)
        if frame[position:end] != before:
            return None
        values = fields.unpack_from(frame, end)
        position = end + fields.size
        end = position + len(after)
        if frame[position:end] != after:
            return None
        throttle_time_ms = INT32.unpack_from(frame, end)[0]
        end += 4
        if flexible:
            if frame[end]:
                return None
            end += 1
    except (IndexError, struct.error):
        return None
    if end != len(frame) or values[0] != partition:
        return None
    log_start_offset = values[4] if version >= 5 else -1
    return SinglePartitionProduceResponse(topic, partition, values[1], values[2], values[3], log_start_offset,
                                          throttle_time_ms)
