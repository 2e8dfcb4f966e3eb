"""The protocol guide's primitive types against hand-written bytes."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kfk.errors import ProtocolError
from kfk.protocol import primitives as p

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def written(writer, value, *args) -> bytes:
    out: list = []
    writer(value, out, *args)
    return b"".join(out)


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (-2, b"\x03"),
        (63, b"\x7e"),
        (-64, b"\x7f"),
        (64, b"\x80\x01"),
        (INT32_MAX, b"\xfe\xff\xff\xff\x0f"),
        (INT32_MIN, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_varint_zigzag(value: int, wire: bytes) -> None:
    assert p.varint(value) == wire
    assert p.read_varint(wire + b"\x55", 0) == (value, len(wire))
    assert p.read_varlong(wire, 0) == (value, len(wire))  # same zig-zag, wider limit


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, b"\x00"),
        (-1, b"\x01"),
        (1, b"\x02"),
        (INT32_MAX, b"\xfe\xff\xff\xff\x0f"),
        (INT32_MIN, b"\xff\xff\xff\xff\x0f"),
        (INT64_MAX, b"\xfe" + b"\xff" * 8 + b"\x01"),
        (INT64_MIN, b"\xff" * 9 + b"\x01"),
    ],
)
def test_varlong_zigzag(value: int, wire: bytes) -> None:
    assert p.varlong(value) == wire
    assert p.read_varlong(b"\x09" + wire, 1) == (value, len(wire) + 1)


@pytest.mark.parametrize("value", [INT32_MAX + 1, INT32_MIN - 1, 2**40])
def test_varint_out_of_range(value: int) -> None:
    with pytest.raises(ProtocolError):
        p.varint(value)


@pytest.mark.parametrize("value", [INT64_MAX + 1, INT64_MIN - 1])
def test_varlong_out_of_range(value: int) -> None:
    with pytest.raises(ProtocolError):
        p.varlong(value)


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (300, b"\xac\x02"),
        (16383, b"\xff\x7f"),
        (16384, b"\x80\x80\x01"),
        (2**21 - 1, b"\xff\xff\x7f"),
        (2**21, b"\x80\x80\x80\x01"),
        (2**28, b"\x80\x80\x80\x80\x01"),
        (2**32 - 1, b"\xff\xff\xff\xff\x0f"),
    ],
)
def test_unsigned_varint_boundaries(value: int, wire: bytes) -> None:
    assert p.unsigned_varint(value) == wire
    assert p.read_unsigned_varint(wire, 0) == (value, len(wire))
    assert p.read_unsigned_varlong(wire, 0) == (value, len(wire))


def test_unsigned_varint_limits() -> None:
    with pytest.raises(ProtocolError):
        p.unsigned_varint(-1)
    with pytest.raises(ProtocolError):  # 2**32 fits 5 bytes but not 32 bits
        p.read_unsigned_varint(b"\x80\x80\x80\x80\x10", 0)
    with pytest.raises(ProtocolError):
        p.read_unsigned_varint(b"\x80" * 5 + b"\x00", 0)
    assert p.read_unsigned_varlong(b"\x80\x80\x80\x80\x10", 0) == (2**32, 5)
    assert p.read_unsigned_varlong(b"\xff" * 9 + b"\x01", 0) == (2**64 - 1, 10)
    with pytest.raises(ProtocolError):  # 2**64 in 10 bytes
        p.read_unsigned_varlong(b"\x80" * 9 + b"\x02", 0)
    with pytest.raises(ProtocolError):
        p.read_unsigned_varlong(b"\x80" * 10 + b"\x00", 0)


@settings(max_examples=200, deadline=None, database=None)
@given(st.integers(INT64_MIN, INT64_MAX))
def test_varlong_round_trip(value: int) -> None:
    wire = p.varlong(value)
    assert p.read_varlong(wire, 0) == (value, len(wire))
    if INT32_MIN <= value <= INT32_MAX:
        assert p.varint(value) == wire
        assert p.read_varint(wire, 0) == (value, len(wire))


@pytest.mark.parametrize(
    ("writer", "value", "wire"),
    [
        (p.write_string, "abc", b"\x00\x03abc"),
        (p.write_string, "", b"\x00\x00"),
        (p.write_string, "é", b"\x00\x02\xc3\xa9"),
        (p.write_nullable_string, None, b"\xff\xff"),
        (p.write_nullable_string, "abc", b"\x00\x03abc"),
        (p.write_compact_string, "abc", b"\x04abc"),
        (p.write_compact_string, "", b"\x01"),
        (p.write_compact_nullable_string, None, b"\x00"),
        (p.write_compact_nullable_string, "", b"\x01"),
        (p.write_compact_string, "x" * 127, b"\x80\x01" + b"x" * 127),
        (p.write_bytes, b"ab", b"\x00\x00\x00\x02ab"),
        (p.write_bytes, b"", b"\x00\x00\x00\x00"),
        (p.write_nullable_bytes, None, b"\xff\xff\xff\xff"),
        (p.write_compact_bytes, b"ab", b"\x03ab"),
        (p.write_compact_bytes, b"", b"\x01"),
        (p.write_compact_nullable_bytes, None, b"\x00"),
        (p.write_uuid, uuid.UUID(int=1), b"\x00" * 15 + b"\x01"),
    ],
)
def test_variable_length_writers(writer, value, wire: bytes) -> None:
    assert written(writer, value) == wire


@pytest.mark.parametrize(
    ("reader", "wire", "value"),
    [
        (p.read_string, b"\x00\x03abc", "abc"),
        (p.read_string, b"\x00\x02\xc3\xa9", "é"),
        (p.read_nullable_string, b"\xff\xff", None),
        (p.read_compact_string, b"\x04abc", "abc"),
        (p.read_compact_string, b"\x01", ""),
        (p.read_compact_nullable_string, b"\x00", None),
        (p.read_bytes, b"\x00\x00\x00\x02ab", b"ab"),
        (p.read_nullable_bytes, b"\xff\xff\xff\xff", None),
        (p.read_compact_bytes, b"\x03ab", b"ab"),
        (p.read_compact_nullable_bytes, b"\x00", None),
        (p.read_uuid, b"\x00" * 15 + b"\x01", uuid.UUID(int=1)),
    ],
)
def test_variable_length_readers(reader, wire: bytes, value) -> None:
    assert reader(wire + b"\xee", 0) == (value, len(wire))


@pytest.mark.parametrize(
    ("reader", "wire"),
    [
        (p.read_string, b"\xff\xff"),  # null where not nullable
        (p.read_string, b"\xff\xfe"),
        (p.read_nullable_string, b"\xff\xfe"),
        (p.read_string, b"\x00\x05ab"),  # runs past the end
        (p.read_compact_string, b"\x00"),
        (p.read_compact_string, b"\x05ab"),
        (p.read_compact_nullable_string, b"\x05ab"),
        (p.read_bytes, b"\xff\xff\xff\xff"),
        (p.read_nullable_bytes, b"\xff\xff\xff\xfe"),
        (p.read_bytes, b"\x7f\xff\xff\xffab"),
        (p.read_compact_bytes, b"\x00"),
        (p.read_compact_nullable_bytes, b"\xff\xff\xff\xff\x0fab"),
        (p.read_uuid, b"\x00" * 15),
    ],
)
def test_malformed_variable_length_values(reader, wire: bytes) -> None:
    with pytest.raises(ProtocolError):
        reader(wire, 0)


def test_classic_string_longer_than_int16_is_refused() -> None:
    assert len(written(p.write_string, "x" * 0x7FFF)) == 2 + 0x7FFF
    with pytest.raises(ProtocolError):
        written(p.write_string, "x" * 0x8000)
    with pytest.raises(ProtocolError):
        written(p.write_string, "é" * 0x4000)  # 16384 characters, 32768 bytes


def test_records_are_slices_of_the_input() -> None:
    data = b"\x00\x00\x00\x03abcXYZ"
    view = memoryview(data)
    records, end = p.read_records(view, 0, compact=False)
    assert end == 7 and isinstance(records, memoryview) and records.obj is data and bytes(records) == b"abc"
    records, end = p.read_records(memoryview(b"\x04abc"), 0, compact=True)
    assert (bytes(records), end) == (b"abc", 4)
    assert p.read_records(b"\xff\xff\xff\xff", 0, compact=False) == (None, 4)
    assert p.read_records(b"\x00", 0, compact=True) == (None, 1)
    with pytest.raises(ProtocolError):
        p.read_records(b"\xff\xff\xff\xfe", 0, compact=False)
    with pytest.raises(ProtocolError):
        p.read_records(b"\x00\x00\x00\x09abc", 0, compact=False)
    assert written(p.write_records, None, False) == b"\xff\xff\xff\xff"
    assert written(p.write_records, None, True) == b"\x00"
    assert written(p.write_records, b"ab", True) == b"\x03ab"


def test_array_lengths() -> None:
    assert written(p.write_array_length, 2, False) == b"\x00\x00\x00\x02"
    assert written(p.write_array_length, None, False) == b"\xff\xff\xff\xff"
    assert written(p.write_array_length, 2, True) == b"\x03"
    assert written(p.write_array_length, None, True) == b"\x00"
    assert p.read_array_length(b"\x00\x00\x00\x02ab", 0, False) == (2, 4)
    assert p.read_array_length(b"\x00", 0, True) == (-1, 1)
    assert p.read_array_length(b"\xff\xff\xff\xff", 0, False) == (-1, 4)
    with pytest.raises(ProtocolError):
        p.read_array_length(b"\xff\xff\xff\xfe", 0, False)
    with pytest.raises(ProtocolError):  # 2 elements of at least 4 bytes do not fit in 5 bytes
        p.read_array_length(b"\x03" + bytes(5), 0, True, element_size=4)
    with pytest.raises(ProtocolError):
        p.read_array_length(b"\x7f\xff\xff\xff", 0, False)


def test_skip_tagged_fields() -> None:
    section = b"\x02" + b"\x00\x02ab" + b"\x81\x01\x00"  # tag 0 (2 bytes), tag 129 (empty)
    assert p.skip_tagged_fields(section + b"\xee", 0) == len(section)
    assert p.skip_tagged_fields(p.EMPTY_TAGGED_FIELDS, 0) == 1
    with pytest.raises(ProtocolError):
        p.skip_tagged_fields(b"\x01\x00\x05ab", 0)


@pytest.mark.parametrize(
    ("reader", "writer", "value", "wire"),
    [
        (p.read_boolean, p.write_boolean, True, b"\x01"),
        (p.read_int8, p.write_int8, -128, b"\x80"),
        (p.read_int16, p.write_int16, -2, b"\xff\xfe"),
        (p.read_uint16, p.write_uint16, 65535, b"\xff\xff"),
        (p.read_int32, p.write_int32, INT32_MIN, b"\x80\x00\x00\x00"),
        (p.read_uint32, p.write_uint32, 2**32 - 1, b"\xff\xff\xff\xff"),
        (p.read_int64, p.write_int64, INT64_MAX, b"\x7f" + b"\xff" * 7),
        (p.read_float64, p.write_float64, 1.5, b"\x3f\xf8" + bytes(6)),
    ],
)
def test_fixed_width(reader, writer, value, wire: bytes) -> None:
    assert written(writer, value) == wire
    assert reader(b"\x00" + wire, 1) == (value, len(wire) + 1)
