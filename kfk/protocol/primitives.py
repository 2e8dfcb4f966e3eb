"""The primitive types of the Kafka protocol guide, as readers and writers.

Readers take `(buffer, position)` and return `(value, new_position)`; writers append bytes to a list of chunks, the
shape every encoder in kfk uses (the chunks are joined once, or handed to writelines). The generated codec in
messages/ inlines the fixed-width cases with precompiled `struct.Struct` objects and calls the variable-length
helpers below; hand-written code (framing, fast paths, tests) uses the same functions, so there is one definition
of each wire rule.

Malformed input raises `ProtocolError` (varints that are truncated or longer than 5 or 10 bytes, negative or
out-of-buffer lengths); plain truncation inside a fixed-width read surfaces as `struct.error`/`IndexError`, which the message decoders turn
into `ProtocolError` at their entry point.
"""

from __future__ import annotations

import struct
import uuid
from typing import Callable

from kfk.common.varint import varint_codec
from kfk.errors import ProtocolError

Buffer = bytes | bytearray | memoryview
Chunks = list[bytes]

BOOLEAN = struct.Struct(">?")
INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")
FLOAT64 = struct.Struct(">d")

ZERO_UUID = uuid.UUID(int=0)
NULL_INT16_LENGTH = b"\xff\xff"
NULL_INT32_LENGTH = b"\xff\xff\xff\xff"
#: An empty tagged-field section: zero tags.
EMPTY_TAGGED_FIELDS = b"\x00"

#: The varint codec (kfk.common.varint), raising ProtocolError on malformed input. The generated codec imports
#: read_unsigned_varint and unsigned_varint from here.
(read_unsigned_varint, read_unsigned_varlong, read_varint, read_varlong,
 unsigned_varint, varint, varlong) = varint_codec(ProtocolError)


def _fixed_reader(codec: struct.Struct) -> Callable[[Buffer, int], tuple]:
    unpack_from = codec.unpack_from
    size = codec.size

    def read(buffer: Buffer, position: int) -> tuple:
        return unpack_from(buffer, position)[0], position + size

    return read


def _fixed_writer(codec: struct.Struct) -> Callable[[object, Chunks], None]:
    pack = codec.pack

    def write(value: object, out: Chunks) -> None:
        out.append(pack(value))

    return write


read_boolean = _fixed_reader(BOOLEAN)
read_int8 = _fixed_reader(INT8)
read_int16 = _fixed_reader(INT16)
read_uint16 = _fixed_reader(UINT16)
read_int32 = _fixed_reader(INT32)
read_uint32 = _fixed_reader(UINT32)
read_int64 = _fixed_reader(INT64)
read_float64 = _fixed_reader(FLOAT64)
write_boolean = _fixed_writer(BOOLEAN)
write_int8 = _fixed_writer(INT8)
write_int16 = _fixed_writer(INT16)
write_uint16 = _fixed_writer(UINT16)
write_int32 = _fixed_writer(INT32)
write_uint32 = _fixed_writer(UINT32)
write_int64 = _fixed_writer(INT64)
write_float64 = _fixed_writer(FLOAT64)


def read_uuid(buffer: Buffer, position: int) -> tuple[uuid.UUID, int]:
    end = position + 16
    if end > len(buffer):
        raise ProtocolError("uuid runs past the end of the buffer")
    return uuid.UUID(bytes=bytes(buffer[position:end])), end


def write_uuid(value: uuid.UUID, out: Chunks) -> None:
    out.append(value.bytes)


def _span(buffer: Buffer, position: int, length: int) -> int:
    end = position + length
    if end > len(buffer):
        raise ProtocolError(f"length {length} runs past the end of the buffer")
    return end


def _read_compact_length(buffer: Buffer, position: int) -> tuple[int, int]:
    """Compact strings, bytes and arrays store length+1 as an unsigned varint, so 0 means null (-1 here)."""
    raw, position = read_unsigned_varint(buffer, position)
    return raw - 1, position


def read_string(buffer: Buffer, position: int) -> tuple[str, int]:
    """int16 length + UTF-8 bytes; a negative length is an error here."""
    length = INT16.unpack_from(buffer, position)[0]
    if length < 0:
        raise ProtocolError("non-nullable string has a negative length")
    end = _span(buffer, position + 2, length)
    return str(buffer[position + 2 : end], "utf-8", "replace"), end


def read_nullable_string(buffer: Buffer, position: int) -> tuple[str | None, int]:
    length = INT16.unpack_from(buffer, position)[0]
    if length == -1:
        return None, position + 2
    if length < 0:
        raise ProtocolError(f"string length {length} is negative")
    end = _span(buffer, position + 2, length)
    return str(buffer[position + 2 : end], "utf-8", "replace"), end


def read_compact_string(buffer: Buffer, position: int) -> tuple[str, int]:
    length, position = _read_compact_length(buffer, position)
    if length < 0:
        raise ProtocolError("non-nullable compact string is null")
    if length > 0x7FFF:
        raise ProtocolError(f"string of {length} bytes is longer than 32767")
    end = _span(buffer, position, length)
    return str(buffer[position:end], "utf-8", "replace"), end


def read_compact_nullable_string(buffer: Buffer, position: int) -> tuple[str | None, int]:
    length, position = _read_compact_length(buffer, position)
    if length < 0:
        return None, position
    if length > 0x7FFF:
        raise ProtocolError(f"string of {length} bytes is longer than 32767")
    end = _span(buffer, position, length)
    return str(buffer[position:end], "utf-8", "replace"), end


def write_string(value: str, out: Chunks) -> None:
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ProtocolError(f"string of {len(data)} bytes does not fit an int16 length")
    out.append(INT16.pack(len(data)))
    out.append(data)


def write_nullable_string(value: str | None, out: Chunks) -> None:
    if value is None:
        out.append(NULL_INT16_LENGTH)
    else:
        write_string(value, out)


def write_compact_string(value: str, out: Chunks) -> None:
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise ProtocolError(f"string of {len(data)} bytes does not fit (at most 32767)")
    out.append(unsigned_varint(len(data) + 1))
    out.append(data)


def write_compact_nullable_string(value: str | None, out: Chunks) -> None:
    if value is None:
        out.append(b"\x00")
    else:
        write_compact_string(value, out)


def read_bytes(buffer: Buffer, position: int) -> tuple[bytes, int]:
    length = INT32.unpack_from(buffer, position)[0]
    if length < 0:
        raise ProtocolError("non-nullable bytes have a negative length")
    end = _span(buffer, position + 4, length)
    return bytes(buffer[position + 4 : end]), end


def read_nullable_bytes(buffer: Buffer, position: int) -> tuple[bytes | None, int]:
    length = INT32.unpack_from(buffer, position)[0]
    if length == -1:
        return None, position + 4
    if length < 0:
        raise ProtocolError(f"bytes length {length} is negative")
    end = _span(buffer, position + 4, length)
    return bytes(buffer[position + 4 : end]), end


def read_compact_bytes(buffer: Buffer, position: int) -> tuple[bytes, int]:
    length, position = _read_compact_length(buffer, position)
    if length < 0:
        raise ProtocolError("non-nullable compact bytes are null")
    end = _span(buffer, position, length)
    return bytes(buffer[position:end]), end


def read_compact_nullable_bytes(buffer: Buffer, position: int) -> tuple[bytes | None, int]:
    length, position = _read_compact_length(buffer, position)
    if length < 0:
        return None, position
    end = _span(buffer, position, length)
    return bytes(buffer[position:end]), end


def write_bytes(value: Buffer, out: Chunks) -> None:
    out.append(INT32.pack(len(value)))
    out.append(value)


def write_nullable_bytes(value: Buffer | None, out: Chunks) -> None:
    if value is None:
        out.append(NULL_INT32_LENGTH)
    else:
        write_bytes(value, out)


def write_compact_bytes(value: Buffer, out: Chunks) -> None:
    out.append(unsigned_varint(len(value) + 1))
    out.append(value)


def write_compact_nullable_bytes(value: Buffer | None, out: Chunks) -> None:
    if value is None:
        out.append(b"\x00")
    else:
        write_compact_bytes(value, out)


def read_records(buffer: Buffer, position: int, compact: bool) -> tuple[Buffer | None, int]:
    """RECORDS is nullable bytes holding record batches; returned as a slice of the input (a memoryview input is
    not copied, which is how the broker keeps produce payloads zero-copy)."""
    if compact:
        length, position = _read_compact_length(buffer, position)
    else:
        length = INT32.unpack_from(buffer, position)[0]
        position += 4
    if length < 0:
        if length == -1:
            return None, position
        raise ProtocolError(f"records length {length} is negative")
    end = _span(buffer, position, length)
    return buffer[position:end], end


def write_records(value: Buffer | None, out: Chunks, compact: bool) -> None:
    if compact:
        write_compact_nullable_bytes(value, out)
    else:
        write_nullable_bytes(value, out)


def read_array_length(buffer: Buffer, position: int, compact: bool, element_size: int = 1) -> tuple[int, int]:
    """An array count: int32 (-1 = null) or compact unsigned varint N+1 (0 = null). Returns -1 for null.

    A count that cannot possibly fit in the rest of the buffer (every element takes at least `element_size` bytes)
    is rejected here, before any loop or allocation: a hostile count of 2**31 must cost nothing."""
    if compact:
        count, position = _read_compact_length(buffer, position)
    else:
        count = INT32.unpack_from(buffer, position)[0]
        position += 4
    if count < -1:
        raise ProtocolError(f"array length {count} is negative")
    if count * element_size > len(buffer) - position:
        raise ProtocolError(f"array of {count} elements runs past the end of the buffer")
    return count, position


def write_array_length(count: int | None, out: Chunks, compact: bool) -> None:
    if compact:
        out.append(b"\x00" if count is None else unsigned_varint(count + 1))
    else:
        out.append(NULL_INT32_LENGTH if count is None else INT32.pack(count))


def skip_tagged_fields(buffer: Buffer, position: int) -> int:
    """Skip a tagged-field section whose tags the reader does not know (the protocol requires ignoring them)."""
    count, position = read_unsigned_varint(buffer, position)
    for _ in range(count):
        _, position = read_unsigned_varint(buffer, position)
        size, position = read_unsigned_varint(buffer, position)
        position = _span(buffer, position, size)
    return position
