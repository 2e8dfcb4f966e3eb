"""Just enough of the Produce request layout to pull out each partition's records field.

The captured files hold one request frame without its 4-byte size prefix. This reads the request header (v1, or
v2 for flexible versions) and walks the Produce body of versions 0-10 (flexible from 9) to the records bytes.
Written here on purpose: these tests must not depend on kfk.protocol.
"""

from __future__ import annotations

import struct

FIRST_FLEXIBLE_PRODUCE_VERSION = 9


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.position = 0

    def take(self, size: int) -> bytes:
        chunk = self.data[self.position:self.position + size]
        assert len(chunk) == size, "frame ends early"
        self.position += size
        return chunk

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self.take(4))[0]

    def unsigned_varint(self) -> int:
        shift = value = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if byte < 0x80:
                return value
            shift += 7

    def string(self, flexible: bool) -> bytes | None:
        length = self.unsigned_varint() - 1 if flexible else self.int16()
        return None if length < 0 else self.take(length)

    def bytes_field(self, flexible: bool) -> bytes | None:
        length = self.unsigned_varint() - 1 if flexible else self.int32()
        return None if length < 0 else self.take(length)

    def array_length(self, flexible: bool) -> int:
        return self.unsigned_varint() - 1 if flexible else self.int32()

    def skip_tagged_fields(self) -> None:
        for _ in range(self.unsigned_varint()):
            self.unsigned_varint()
            self.take(self.unsigned_varint())


def produce_records(frame: bytes) -> list[tuple[bytes, int, bytes]]:
    """(topic, partition, records) for every partition in a Produce request frame."""
    reader = _Reader(frame)
    api_key, api_version = reader.int16(), reader.int16()
    assert api_key == 0, "not a Produce request"
    flexible = api_version >= FIRST_FLEXIBLE_PRODUCE_VERSION
    reader.int32()  # correlation id
    reader.string(flexible=False)  # client id: never compact, even in header v2
    if flexible:
        reader.skip_tagged_fields()
    if api_version >= 3:
        reader.string(flexible)  # transactional id
    reader.int16()  # acks
    reader.int32()  # timeout
    found = []
    for _ in range(reader.array_length(flexible)):
        topic = reader.string(flexible)
        for _ in range(reader.array_length(flexible)):
            partition = reader.int32()
            records = reader.bytes_field(flexible)
            if flexible:
                reader.skip_tagged_fields()
            found.append((topic, partition, records or b""))
        if flexible:
            reader.skip_tagged_fields()
    if flexible:
        reader.skip_tagged_fields()
    return found
