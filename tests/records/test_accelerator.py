"""The C accelerator of the record codec (kfk.records._accel) against its pure-Python reference.

Both implementations run side by side on random records (equal results, byte for byte), on malformed payloads (the
same CorruptRecordError with the same message, never a crash) with the payload flush against an unreadable page, so
that a read one byte past the buffer kills the test; and the record tests run once more, in a child process, with
KFK_NO_ACCELERATOR=1 forcing the reference everywhere.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kfk.client.structs import ConsumerRecord
from kfk.errors import CorruptRecordError
from kfk.records import MemoryRecordsBuilder, RecordBatch, _accel  # type: ignore[attr-defined]
from kfk.records import batch as batch_module
from kfk.records import builder as builder_module
from kfk.records.batch import decode_records_python
from kfk.records.builder import encode_record_python, encode_values_python

REPOSITORY = Path(__file__).resolve().parents[2]
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PROT_NONE = 0  # <sys/mman.h>: no access at all (the mmap module names only PROT_READ and PROT_WRITE)
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)

payloads = st.one_of(st.none(), st.binary(max_size=200))
header_keys = st.text(max_size=8)
headers = st.lists(st.tuples(header_keys, payloads), max_size=3)
timestamp_deltas = st.one_of(st.integers(min_value=-200, max_value=200), INT64)
offset_deltas = st.one_of(st.integers(min_value=0, max_value=300), st.integers(min_value=0, max_value=2**31 - 1))
records = st.lists(st.tuples(offset_deltas, timestamp_deltas, payloads, payloads, headers), max_size=12)


def outcome(call: Callable[[], Any]) -> tuple:
    """What a call gives: ("ok", result) or ("error", the exception's type, its message)."""
    try:
        return ("ok", call())
    except (CorruptRecordError, ValueError, TypeError, OverflowError) as error:
        return ("error", type(error), str(error))


class GuardedArena:
    """Pages of anonymous memory followed by one that cannot be read: a payload copied to the end of the arena ends
    where the readable memory ends, so an overread faults instead of reading a neighbour's bytes."""

    PAGES = 16

    def __init__(self) -> None:
        self.size = self.PAGES * mmap.PAGESIZE
        self.memory = mmap.mmap(-1, self.size + mmap.PAGESIZE)
        anchor = ctypes.c_char.from_buffer(self.memory)
        address = ctypes.addressof(anchor)
        del anchor  # the export would keep the mmap from closing
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        if libc.mprotect(address + self.size, mmap.PAGESIZE, PROT_NONE) != 0:
            raise OSError(ctypes.get_errno(), "mprotect of the guard page failed")

    def place(self, payload: bytes) -> memoryview:
        """``payload`` at the very end of the readable memory, as a read-only view."""
        assert len(payload) <= self.size
        start = self.size - len(payload)
        self.memory[start:self.size] = payload
        return memoryview(self.memory)[start:self.size].toreadonly()


ARENA = GuardedArena()


def encode_all(items: list[tuple]) -> bytes:
    return b"".join(encode_record_python(*item) for item in items)


def both_decode(data: bytes, records_count: int, base_offset: int = 0, base_timestamp: int = 0,
                log_append_time: int | None = None, start: int = 0, end: int | None = None,
                **keywords: Any) -> tuple:
    """Decode with both implementations (the C one reading from the guarded arena); assert they agree."""
    reference = outcome(lambda: list(decode_records_python(data, records_count, base_offset, base_timestamp,
                                                           log_append_time, start, end, **keywords)))
    guarded = ARENA.place(data)
    try:
        accelerated = outcome(lambda: list(_accel.decode_records(guarded, records_count, base_offset, base_timestamp,
                                                                 log_append_time, start, end, **keywords)))
    finally:
        guarded.release()
    assert accelerated == reference
    if reference[0] == "ok":
        assert [type(record) for record in accelerated[1]] == [type(record) for record in reference[1]]
    return reference


# --- the build and the switch -----------------------------------------------------------------------------------------

def test_the_codec_uses_the_accelerator_it_was_built_with() -> None:
    # pip install (scripts/test.sh) compiles it wherever a C compiler exists, as on CI; in this process nothing
    # disabled it unless the environment says so.
    disabled = os.environ.get("KFK_NO_ACCELERATOR", "") not in ("", "0")
    assert (batch_module.decode_records is _accel.decode_records) is not disabled
    assert (builder_module.encode_values is _accel.encode_values) is not disabled
    assert (builder_module.encode_record is _accel.encode_record) is not disabled


def test_kfk_no_accelerator_forces_the_reference_codec() -> None:
    probe = ("from kfk.records import batch, builder; "
             "print(batch.decode_records is batch.decode_records_python, "
             "builder.encode_values is builder.encode_values_python, "
             "builder.encode_record is builder.encode_record_python)")
    environment = {**os.environ, "PYTHONPATH": str(REPOSITORY)}
    for value, expected in (("1", "True True True"), ("0", "False False False")):
        result = subprocess.run([sys.executable, "-c", probe], env={**environment, "KFK_NO_ACCELERATOR": value},
                                capture_output=True, text=True, check=True)
        assert result.stdout.split() == expected.split()


def test_the_record_tests_pass_on_the_reference_codec() -> None:
    """The record batch and builder tests, run with the accelerator off."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0",
         "tests/records/test_batch.py"],
        check=False, cwd=REPOSITORY, env={**os.environ, "PYTHONPATH": str(REPOSITORY), "KFK_NO_ACCELERATOR": "1"},
        capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert " passed" in result.stdout


# --- encoding ---------------------------------------------------------------------------------------------------------

@SETTINGS
@given(offset_deltas, timestamp_deltas, payloads, payloads, headers)
@example(0, 2**63 - 1, None, None, [])
@example(2**31 - 1, -(2**63), b"", b"", [("", None)])
@example(5, 0, b"k" * 10_000, b"v" * 70_000, [("h\udcff", b"x" * 200)])
def test_encode_record_equals_the_reference(offset_delta: int, timestamp_delta: int, key: bytes | None,
                                            value: bytes | None, record_headers: list) -> None:
    assert outcome(lambda: _accel.encode_record(offset_delta, timestamp_delta, key, value, record_headers)) == \
        outcome(lambda: encode_record_python(offset_delta, timestamp_delta, key, value, record_headers))


@pytest.mark.parametrize("arguments", [
    (0, 2**63, b"k", b"v", []),          # a timestamp delta past int64
    (0, -(2**63) - 1, None, b"v", []),
    (2**31, 0, b"k", b"v", []),          # an offset delta past int32
])
def test_encode_record_rejects_what_the_format_cannot_hold_as_the_reference_does(arguments: tuple) -> None:
    accelerated = outcome(lambda: _accel.encode_record(*arguments))
    assert accelerated[0] == "error" and accelerated[1] is CorruptRecordError
    assert accelerated == outcome(lambda: encode_record_python(*arguments))


@pytest.mark.parametrize("record_headers", [[(b"bytes key", b"v")], [("k", "text value")], [("k",)], [7]])
def test_encode_record_rejects_malformed_headers_with_the_reference_s_exception_type(record_headers: list) -> None:
    def raised(call: Callable[[], Any]) -> type:
        with pytest.raises(Exception) as caught:
            call()
        return caught.type

    assert raised(lambda: _accel.encode_record(0, 0, b"k", b"v", record_headers)) is \
        raised(lambda: encode_record_python(0, 0, b"k", b"v", record_headers))


def test_encode_record_encodes_the_headers_it_was_given_when_encoding_one_changes_them() -> None:
    record_headers: list = []

    class Meddling(str):
        def encode(self, *arguments: Any) -> bytes:  # type: ignore[override]
            record_headers.clear()  # what the C loop iterates must not shrink under it
            return str(self).encode(*arguments)

    record_headers.extend([(Meddling("first"), b"1"), ("second", None), ("third", b"333")])
    expected = encode_record_python(3, 4, b"k", b"v", [("first", b"1"), ("second", None), ("third", b"333")])
    assert _accel.encode_record(3, 4, b"k", b"v", record_headers) == expected
    assert record_headers == []


@SETTINGS
@given(st.lists(payloads, min_size=1, max_size=40), st.booleans(), st.data(), offset_deltas, timestamp_deltas,
       st.one_of(st.integers(min_value=-10, max_value=3_000), st.just(2**63 - 1)), st.booleans(),
       st.sampled_from([list, tuple]))
def test_encode_values_equals_the_reference(values: list, keyed: bool, data: st.DataObject, offset_delta: int,
                                            timestamp_delta: int, room: int, must_take_one: bool,
                                            sequence: type) -> None:
    keys = sequence(data.draw(st.lists(payloads, min_size=len(values), max_size=len(values)))) if keyed else None
    values = sequence(values)
    start = data.draw(st.integers(min_value=0, max_value=len(values) - 1))
    end = data.draw(st.integers(min_value=start + 1, max_value=len(values)))
    offset_delta = min(offset_delta, 2**31 - 1 - (end - start))
    reference_parts: list[bytes] = [b"before"]
    accelerated_parts: list[bytes] = [b"before"]
    reference = outcome(lambda: encode_values_python(reference_parts, values, keys, start, end, offset_delta,
                                                     timestamp_delta, room, must_take_one))
    accelerated = outcome(lambda: _accel.encode_values(accelerated_parts, values, keys, start, end, offset_delta,
                                                       timestamp_delta, room, must_take_one))
    assert accelerated == reference
    assert b"".join(accelerated_parts) == b"".join(reference_parts)


def test_append_values_builds_the_same_batch_as_appending_one_by_one() -> None:
    values = [b"v%d" % index * (index % 5) for index in range(300)] + [None, b""]
    keys = [None if index % 3 else b"k%d" % index for index in range(len(values))]
    whole = MemoryRecordsBuilder(write_limit=2_000)
    taken = whole.append_values(1_700_000_000_000, values, 0, keys)
    single = MemoryRecordsBuilder()
    for key, value in zip(keys[:taken], values[:taken]):
        single.append(1_700_000_000_000, key, value)
    assert 0 < taken < len(values)
    assert whole.close() == single.close()
    assert whole.estimated_size_in_bytes() <= 2_000


# --- decoding ---------------------------------------------------------------------------------------------------------

@SETTINGS
@given(records, INT64, INT64, st.one_of(st.none(), INT64), st.booleans())
def test_decode_records_equals_the_reference(items: list, base_offset: int, base_timestamp: int,
                                             log_append_time: int | None, labelled: bool) -> None:
    keywords: dict[str, Any] = {"record_type": ConsumerRecord, "labels": ("topic", 3, 1, 9)} if labelled else {}
    result = both_decode(encode_all(items), len(items), base_offset, base_timestamp, log_append_time, **keywords)
    assert result[0] == "ok" and len(result[1]) == len(items)
    assert [(record.key, record.value, record.headers) for record in result[1]] == \
        [(key, value, record_headers) for _, _, key, value, record_headers in items]


@SETTINGS
@given(records, st.data())
def test_decode_records_of_a_payload_inside_a_larger_buffer_equals_the_reference(items: list,
                                                                                  data: st.DataObject) -> None:
    payload = encode_all(items)
    before = data.draw(st.binary(max_size=20))
    after = data.draw(st.binary(max_size=20))
    count = data.draw(st.integers(min_value=0, max_value=len(items) + 2))
    both_decode(before + payload + after, count, 100, 1_000, None, len(before), len(before) + len(payload))


@SETTINGS
@given(records.filter(bool), st.data())
def test_decode_records_of_a_damaged_payload_fails_as_the_reference_does(items: list, data: st.DataObject) -> None:
    payload = bytearray(encode_all(items))
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        position = data.draw(st.integers(min_value=0, max_value=len(payload) - 1))
        payload[position] = data.draw(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFE, 0xFF,
                                                       data.draw(st.integers(0, 255))]))
    cut = data.draw(st.integers(min_value=0, max_value=len(payload)))
    count = data.draw(st.sampled_from([len(items), len(items) + 1, len(items) - 1, 0, -1, 2**31 - 1]))
    both_decode(bytes(payload[:cut]), count)


@SETTINGS
@given(st.binary(max_size=120), st.integers(min_value=-2, max_value=40))
def test_decode_records_of_random_bytes_fails_or_succeeds_as_the_reference_does(data: bytes, count: int) -> None:
    both_decode(data, count)


def truncations(payload: bytes) -> Iterator[bytes]:
    for cut in range(len(payload)):
        yield payload[:cut]


def test_every_truncation_of_a_batch_fails_the_same_way_without_reading_past_its_end() -> None:
    items = [(0, 0, b"key", b"value", [("header", b"h"), ("null", None)]),
             (1, 300_000, None, b"x" * 200, []),
             (2, -(2**40), b"", None, [("\u00e9t\u00e9", b"")])]
    payload = encode_all(items)
    for truncated in truncations(payload):
        result = both_decode(truncated, len(items))
        assert result[0] == "error" and result[1] is CorruptRecordError


@pytest.mark.parametrize(("payload", "count", "message"), [
    (b"\xff", 1, "Record payload ends inside a record"),                       # a varint cut after one byte
    (b"\xff\xff", 1, "buffer ends inside a varint"),                            # ... after two
    (b"\xff\xff\xff\xff\xff\x01", 1, "varint is longer than 5 bytes"),
    (b"\xfe\xff\xff\xff\x1f", 1, "varint does not fit in 32 bits"),
    (b"\x0c\x00" + b"\xff" * 10, 1, "varlong is longer than 10 bytes"),
    (b"\x7e", 1, "Record length 63 is impossible at payload position 1"),       # a length past the end
    (b"\x0a\x00\x00\x00\x01\x01", 1, "Record length 5 is impossible at payload position 1"),
    (b"\x0e\x00\x00\x00\x03\x00\x00\x00", 1, "Record key length -2 is negative"),
    (b"\x0e\x00\x00\x00\x01\x01\x00\x00", 1, "Record declares 7 bytes but its fields take 6"),
    (b"\x0c\x00\x00\x00\x01\x01\x01", 1, "Record header count -1 is impossible"),  # a negative count
    (b"\x0c\x00\x00\x00\x01\x01\x02", 1, "Record header count 1 is impossible"),
    (b"\x10\x00\x00\x00\x01\x01\x02\x06\x00", 1, "Record header key length 3 is impossible"),
    (b"\x0c\x00\x00\x00\x01\x01\x00", 2, "Record payload ends inside a record"),   # more records than there are
    (b"\x0c\x00\x00\x00\x01\x01\x00\x00", 1, "1 bytes are left after the last of 1 records"),
    (b"\x0c\x00\x00\x00\x01\x01\x00", -1, "7 bytes are left after the last of -1 records"),
])
def test_malformed_payloads_raise_the_same_corrupt_record_error(payload: bytes, count: int, message: str) -> None:
    assert both_decode(payload, count) == ("error", CorruptRecordError, message)


@pytest.mark.parametrize(("start", "end"), [(-1, None), (3, 2), (0, 99)])
def test_payload_bounds_outside_the_buffer_are_refused_by_both(start: int, end: int | None) -> None:
    result = both_decode(b"\x00" * 10, 1, start=start, end=end)
    assert result[0] == "error" and result[1] is ValueError


def test_offsets_and_timestamps_past_int64_are_python_ints_in_both() -> None:
    payload = encode_record_python(7, 2**62, None, b"v", [])
    [record] = both_decode(payload, 1, 2**63 - 3, 2**62, None)[1]
    assert (record.offset, record.timestamp) == (2**63 + 4, 2**63)


def test_a_batch_decodes_the_same_through_record_batch_with_either_implementation() -> None:
    builder = MemoryRecordsBuilder(base_offset=1_000)
    for index in range(50):
        builder.append(1_700_000_000_000 + index, b"k%d" % index if index % 2 else None, b"v" * index,
                       [("h", b"%d" % index)] if index % 3 == 0 else [])
    batch = RecordBatch(bytes(builder.close()))
    payload_start = batch.position + 61
    data = bytes(batch.buffer)
    reference = list(decode_records_python(data, batch.records_count, batch.base_offset, batch.base_timestamp, None,
                                           payload_start, len(data)))
    assert list(batch.records()) == reference
    assert list(_accel.decode_records(data, batch.records_count, batch.base_offset, batch.base_timestamp, None,
                                      payload_start, len(data))) == reference
