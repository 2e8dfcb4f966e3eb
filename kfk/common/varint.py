"""Kafka's varints: protobuf-style base-128 groups, low group first, with a zig-zag mapping for signed values.

The protocol (compact lengths, tagged fields) and the record format (record fields, control records) use the same
encoding; only the exception a malformed varint raises differs: the protocol raises ProtocolError, the record
format CorruptRecordError, each the error its callers already handle. So this module writes each rule once and
varint_codec(error) binds it to one layer's exception; kfk.protocol.primitives and kfk.records.varint hold the
two bindings.

Limits are Kafka's: a varint (int32) is at most 5 bytes and its unsigned value fits 32 bits, a varlong (int64) at
most 10 bytes and 64 bits. Readers take (buffer, position) and return (value, next position); a truncated,
overlong or out-of-range encoding raises the bound error, as does encoding a value outside the type's range.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

__all__ = ["VarintCodec", "varint_codec", "size_of_varint", "SMALL_UNSIGNED_VARINTS", "ZIGZAG_CACHE", "ZIGZAG_CACHE_LOW",
           "ZIGZAG_CACHE_HIGH"]

Buffer = bytes | bytearray | memoryview

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

#: One-byte unsigned varints (lengths, counts, empty tag sections) are by far the most common: precomputed.
SMALL_UNSIGNED_VARINTS: tuple[bytes, ...] = tuple(bytes((n,)) for n in range(0x80))


def _encode_unsigned(value: int) -> bytes:
    if value < 0x80:
        return SMALL_UNSIGNED_VARINTS[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


#: Zig-zag encodings of every signed value of one or two bytes (-8192..8191): the lengths, offset deltas and
#: timestamp deltas of ordinary records. The record builder indexes it directly on its hot path.
ZIGZAG_CACHE_LOW, ZIGZAG_CACHE_HIGH = -(1 << 13), 1 << 13
ZIGZAG_CACHE: list[bytes] = [_encode_unsigned((value << 1) ^ (value >> 63))
                             for value in range(ZIGZAG_CACHE_LOW, ZIGZAG_CACHE_HIGH)]


def size_of_varint(value: int) -> int:
    """Encoded size in bytes of a signed (zig-zag) varint or varlong, without encoding it."""
    raw = (value << 1) ^ (value >> 63)
    size = 1
    while raw >= 0x80:
        raw >>= 7
        size += 1
    return size


class VarintCodec(NamedTuple):
    """The varint readers and writers, raising one layer's exception on malformed input."""

    read_unsigned_varint: Callable[[Buffer, int], tuple[int, int]]
    read_unsigned_varlong: Callable[[Buffer, int], tuple[int, int]]
    read_varint: Callable[[Buffer, int], tuple[int, int]]
    read_varlong: Callable[[Buffer, int], tuple[int, int]]
    encode_unsigned_varint: Callable[[int], bytes]
    encode_varint: Callable[[int], bytes]
    encode_varlong: Callable[[int], bytes]


def varint_codec(error: Callable[[str], Exception]) -> VarintCodec:
    """The codec raising ``error(message)`` on malformed input or out-of-range values.

    These functions run once per field on the hot paths (request decoding, record batches), so the int32 reader is
    unrolled, truncation is caught as IndexError rather than checked byte by byte, and the tables are closure
    variables rather than globals."""
    small_unsigned = SMALL_UNSIGNED_VARINTS
    cache, cache_low, cache_high = ZIGZAG_CACHE, ZIGZAG_CACHE_LOW, ZIGZAG_CACHE_HIGH

    def read_unsigned_varint(buffer: Buffer, position: int) -> tuple[int, int]:
        """An unsigned 32-bit varint: at most 5 bytes."""
        try:
            byte = buffer[position]
            if byte < 0x80:
                return byte, position + 1
            value = byte & 0x7F
            byte = buffer[position + 1]
            if byte < 0x80:
                return value | (byte << 7), position + 2
            value |= (byte & 0x7F) << 7
            byte = buffer[position + 2]
            if byte < 0x80:
                return value | (byte << 14), position + 3
            value |= (byte & 0x7F) << 14
            byte = buffer[position + 3]
            if byte < 0x80:
                return value | (byte << 21), position + 4
            value |= (byte & 0x7F) << 21
            byte = buffer[position + 4]
        except IndexError:
            raise error("buffer ends inside a varint") from None
        if byte >= 0x80:
            raise error("varint is longer than 5 bytes")
        value |= byte << 28
        if value > 0xFFFFFFFF:
            raise error("varint does not fit in 32 bits")
        return value, position + 5

    def read_unsigned_varlong(buffer: Buffer, position: int) -> tuple[int, int]:
        """An unsigned 64-bit varint: at most 10 bytes."""
        value = 0
        shift = 0
        try:
            while shift < 70:
                byte = buffer[position]
                position += 1
                if byte < 0x80:
                    value |= byte << shift
                    if value > 0xFFFFFFFFFFFFFFFF:
                        raise error("varlong does not fit in 64 bits")
                    return value, position
                value |= (byte & 0x7F) << shift
                shift += 7
        except IndexError:
            raise error("buffer ends inside a varlong") from None
        raise error("varlong is longer than 10 bytes")

    def read_varint(buffer: Buffer, position: int) -> tuple[int, int]:
        """A signed 32-bit zig-zag varint (0, -1, 1, -2, ... are 0, 1, 2, 3, ...)."""
        raw, position = read_unsigned_varint(buffer, position)
        return (raw >> 1) ^ -(raw & 1), position

    def read_varlong(buffer: Buffer, position: int) -> tuple[int, int]:
        """A signed 64-bit zig-zag varint."""
        raw, position = read_unsigned_varlong(buffer, position)
        return (raw >> 1) ^ -(raw & 1), position

    def encode_unsigned_varint(value: int) -> bytes:
        """An unsigned varint (32 or 64 bit: the bytes are the same, only the reader's limit differs)."""
        if value < 0x80:
            if value < 0:
                raise error(f"unsigned varint cannot hold {value}")
            return small_unsigned[value]
        return _encode_unsigned(value)

    def encode_varint(value: int) -> bytes:
        """A signed 32-bit zig-zag varint."""
        if cache_low <= value < cache_high:
            return cache[value - cache_low]
        if not _INT32_MIN <= value <= _INT32_MAX:
            raise error(f"varint out of range: {value}")
        return _encode_unsigned((value << 1) ^ (value >> 31))

    def encode_varlong(value: int) -> bytes:
        """A signed 64-bit zig-zag varint."""
        if cache_low <= value < cache_high:
            return cache[value - cache_low]
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise error(f"varlong out of range: {value}")
        return _encode_unsigned((value << 1) ^ (value >> 63))

    return VarintCodec(read_unsigned_varint, read_unsigned_varlong, read_varint, read_varlong,
                       encode_unsigned_varint, encode_varint, encode_varlong)
