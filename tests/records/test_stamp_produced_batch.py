"""stamp_produced_batch, the produce path's one-step check and stamp of a batch: the C accelerator's against its
pure-Python reference (equal results and equal buffers, on produced batches and on damaged ones, the C one reading
from a guarded arena so that an overread faults), and what each accepts against what the general checks
(RecordBatch.validated_header and a leader's rules for a client's batch) accept."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kfk.errors import CorruptRecordError
from kfk.records import (  # type: ignore[attr-defined]
    ControlRecordType,
    EndTransactionMarker,
    MemoryRecordsBuilder,
    RecordBatch,
    _accel,
    build_end_transaction_marker_batch,
)
from kfk.records import batch as batch_module
from kfk.records.batch import stamp_produced_batch_python
from kfk.records.record import CompressionType
from tests.records.test_accelerator import ARENA, outcome

REPOSITORY = Path(__file__).resolve().parents[2]
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def produced_batches(draw: st.DrawFn) -> bytes:
    """A client's batch: any codec, with or without a producer id (idempotent or transactional)."""
    producer = draw(st.sampled_from(["none", "idempotent", "transactional"]))
    fields = {} if producer == "none" else {"producer_id": draw(st.integers(0, 2**40)), "producer_epoch": 3,
                                            "base_sequence": draw(st.integers(0, 1000)),
                                            "is_transactional": producer == "transactional"}
    builder = MemoryRecordsBuilder(compression_type=draw(st.sampled_from(list(CompressionType))), **fields)
    for index in range(draw(st.integers(1, 8))):
        builder.append(draw(st.integers(0, 2**42)), draw(st.one_of(st.none(), st.binary(max_size=8))),
                       draw(st.binary(max_size=40)), [("h", b"x")] if index % 2 else [])
    return bytes(builder.close())


def damaged(data: st.DataObject, payload: bytes) -> bytes:
    """`payload` with a few bytes changed, truncated, or extended."""
    buffer = bytearray(payload)
    kind = data.draw(st.sampled_from(["flip", "truncate", "extend", "header field"]))
    if kind == "flip":
        for _ in range(data.draw(st.integers(1, 3))):
            buffer[data.draw(st.integers(0, len(buffer) - 1))] ^= data.draw(st.integers(1, 255))
    elif kind == "truncate":
        del buffer[data.draw(st.integers(0, len(buffer) - 1)):]
    elif kind == "extend":
        buffer += data.draw(st.binary(min_size=1, max_size=70))
    else:  # a header field (outside or inside the CRC) set to an edge value
        position, size = data.draw(st.sampled_from([(8, 4), (16, 1), (21, 2), (23, 4), (43, 8), (51, 2), (53, 4),
                                                    (57, 4)]))
        value = data.draw(st.sampled_from([0, 1, -1, -2, 2**(8 * size - 1) - 1]))
        buffer[position:position + size] = value.to_bytes(size, "big", signed=True)
    return bytes(buffer)


def both_stamp(payload: bytes, base_offset: int, epoch: int) -> tuple:
    """Stamp copies of `payload` with both implementations; assert equal outcomes and equal buffers after. The C
    one also reads a read-only copy placed against the arena's guard page (refused or TypeError, never an
    overread)."""
    reference_buffer, accelerated_buffer = bytearray(payload), bytearray(payload)
    reference = outcome(lambda: stamp_produced_batch_python(reference_buffer, base_offset, epoch))
    accelerated = outcome(lambda: _accel.stamp_produced_batch(accelerated_buffer, base_offset, epoch))
    assert accelerated == reference
    assert accelerated_buffer == reference_buffer
    guarded = ARENA.place(payload)
    try:
        read_only = outcome(lambda: _accel.stamp_produced_batch(guarded, base_offset, epoch))
    finally:
        guarded.release()
    assert read_only == (("ok", None) if reference == ("ok", None) else
                         ("error", TypeError, "argument must be read-write bytes-like object"))
    return reference


def general_checks_accept(payload: bytes) -> bool:
    """What the general path accepts of a client's lone batch (validated_header and the leader's rules)."""
    if len(payload) < 61 or struct.unpack_from(">i", payload, 8)[0] + 12 != len(payload):
        return False
    try:
        header = RecordBatch(payload).validated_header()
    except CorruptRecordError:
        return False
    attributes, last_offset_delta, producer_id, base_sequence, records_count = (header[5], header[6], header[9],
                                                                                 header[11], header[12])
    return not attributes & 0x20 and records_count == last_offset_delta + 1 > 0 and not (
        producer_id > -1 and base_sequence < 0)


def test_the_produce_path_uses_the_accelerator_it_was_built_with() -> None:
    disabled = os.environ.get("KFK_NO_ACCELERATOR", "") not in ("", "0")
    assert (batch_module.stamp_produced_batch is _accel.stamp_produced_batch) is not disabled
    probe = "from kfk.records import batch; print(batch.stamp_produced_batch is batch.stamp_produced_batch_python)"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                            env={**os.environ, "PYTHONPATH": str(REPOSITORY), "KFK_NO_ACCELERATOR": "1"})
    assert result.stdout.strip() == "True"


@SETTINGS
@given(produced_batches(), INT64, INT32)
def test_a_produced_batch_is_stamped_alike_by_both(payload: bytes, base_offset: int, epoch: int) -> None:
    kind, stamped = both_stamp(payload, base_offset, epoch)
    assert kind == "ok" and stamped is not None
    header = RecordBatch(payload).header()
    assert stamped == (header[5], header[6], header[8], header[9], header[12])
    buffer = bytearray(payload)
    stamp_produced_batch_python(buffer, base_offset, epoch)
    stamped_batch = RecordBatch(buffer)
    assert (stamped_batch.base_offset, stamped_batch.partition_leader_epoch) == (base_offset, epoch)
    assert buffer[12 + 4:] == payload[12 + 4:] and stamped_batch.is_valid()


@SETTINGS
@given(produced_batches(), st.data())
def test_a_damaged_batch_gets_the_same_answer_from_both_and_only_if_the_general_checks_pass(
        payload: bytes, data: st.DataObject) -> None:
    broken = damaged(data, payload)
    kind, stamped = both_stamp(broken, 5, 7)
    assert kind == "ok"
    assert (stamped is not None) == general_checks_accept(broken)


@SETTINGS
@given(st.binary(max_size=120))
def test_random_bytes_get_the_same_answer_from_both(payload: bytes) -> None:
    assert both_stamp(payload, 0, 0) == ("ok", None) or general_checks_accept(payload)


def test_a_control_batch_two_batches_and_a_miscounted_batch_are_left_to_the_general_path() -> None:
    marker = bytes(build_end_transaction_marker_batch(
        base_offset=0, timestamp=1, partition_leader_epoch=0, producer_id=1, producer_epoch=0,
        marker=EndTransactionMarker(ControlRecordType.COMMIT, 0)))
    assert general_checks_accept(marker) is False  # valid, but a client may not write it
    assert both_stamp(marker, 0, 0) == ("ok", None)
    builder = MemoryRecordsBuilder()
    builder.append(1, None, b"v")
    single = bytes(builder.close())
    assert both_stamp(single + single, 0, 0) == ("ok", None)
    # recordsCount 0 with lastOffsetDelta 0: a header validated_header accepts, a client's batch must not have
    miscounted = bytearray(single)
    miscounted[57:61] = (0).to_bytes(4, "big")
    miscounted[17:21] = crc32c(bytes(miscounted[21:])).to_bytes(4, "big")
    RecordBatch(miscounted).validate()
    assert both_stamp(bytes(miscounted), 0, 0) == ("ok", None)
