"""Zig-zag varints as record batches use them (the protocol layer has its own; records may not import it).

Kafka writes the record fields with protobuf-style base-128 varints after a zig-zag mapping of the sign, limited to
5 bytes for an int32 ("varint") and 10 for an int64 ("varlong"). Readers take a buffer and a position and return
(value, next position), raising CorruptRecordError on a truncated or overlong encoding.
"""

from __future__ import annotations

from kfk.errors import CorruptRecordError

__all__ = ["encode_varint", "encode_unsigned_varint", "read_varint", "read_varlong", "read_unsigned_varint"]

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1


def encode_unsigned_varint(value: int) -> bytes:
    if value < 0x80:
        return _SMALL_UNSIGNED[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_UNSIGNED = [bytes((value,)) for value in range(0x80)]


def _encode_varint_uncached(value: int) -> bytes:
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"{value} does not fit in a signed 64-bit varlong")
    return encode_unsigned_varint((value << 1) ^ (value >> 63))


_CACHE_LOW, _CACHE_HIGH = -(1 << 13), 1 << 13  # every 1- and 2-byte value: lengths and deltas of ordinary records
_CACHED = [_encode_varint_uncached(value) for value in range(_CACHE_LOW, _CACHE_HIGH)]


def encode_varint(value: int) -> bytes:
    """Zig-zag varint/varlong bytes of a signed value (the encoding is the same; only the allowed range differs)."""
    if _CACHE_LOW <= value < _CACHE_HIGH:
        return _CACHED[value - _CACHE_LOW]
    return _encode_varint_uncached(value)


def read_unsigned_varint(data: bytes, position: int, max_bytes: int = 5) -> tuple[int, int]:
    """Read an unsigned base-128 varint of at most ``max_bytes`` bytes."""
    result = 0
    shift = 0
    end = position + max_bytes
    length = len(data)
    while position < end:
        if position >= length:
            raise CorruptRecordError("Record payload ends inside a varint")
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7
    raise CorruptRecordError(f"Varint is longer than {max_bytes} bytes")


def read_varint(data: bytes, position: int) -> tuple[int, int]:
    """Read a zig-zag int32 varint (at most 5 bytes)."""
    raw, position = read_unsigned_varint(data, position, 5)
    if raw > 0xFFFFFFFF:
        raise CorruptRecordError("Varint does not fit in 32 bits")
    return (raw >> 1) ^ -(raw & 1), position


def read_varlong(data: bytes, position: int) -> tuple[int, int]:
    """Read a zig-zag int64 varlong (at most 10 bytes)."""
    raw, position = read_unsigned_varint(data, position, 10)
    if raw > 0xFFFFFFFFFFFFFFFF:
        raise CorruptRecordError("Varlong does not fit in 64 bits")
    return (raw >> 1) ^ -(raw & 1), position
