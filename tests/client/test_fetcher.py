"""CompletedFetch, the fetcher's decoding of one partition's fetched bytes: positions inside batches, control
batches, read_committed filtering of aborted transactions, CRC checks and partial takes (no broker: the bytes are
built with kfk.records exactly as a broker would return them)."""

from __future__ import annotations

import pytest

from kfk.client.consumer.fetcher import CompletedFetch
from kfk.common.structs import TopicPartition
from kfk.errors import CorruptRecordError
from kfk.records import (
    CompressionType,
    ControlRecordType,
    EndTransactionMarker,
    LegacyRecordsBuilder,
    MemoryRecordsBuilder,
    build_end_transaction_marker_batch,
)
from kfk.records import _accel  # type: ignore[attr-defined]
from kfk.records import batch as batch_module
from kfk.records.batch import decode_records_python

TP = TopicPartition("t", 0)


def batch(base_offset: int, values: list[bytes], *, producer_id: int = -1, transactional: bool = False,
          compression: CompressionType = CompressionType.NONE) -> bytes:
    builder = MemoryRecordsBuilder(base_offset=base_offset, producer_id=producer_id,
                                   producer_epoch=0 if producer_id >= 0 else -1,
                                   base_sequence=0 if producer_id >= 0 else -1, is_transactional=transactional,
                                   compression_type=compression, partition_leader_epoch=3)
    for value in values:
        builder.append(1000 + base_offset, None, value)
    return bytes(builder.close())


def marker(offset: int, producer_id: int, kind: ControlRecordType) -> bytes:
    return build_end_transaction_marker_batch(base_offset=offset, timestamp=2000, partition_leader_epoch=3,
                                              producer_id=producer_id, producer_epoch=0,
                                              marker=EndTransactionMarker(kind, 0))


TRANSACTIONS = b"".join([
    batch(0, [b"aborted-0", b"aborted-1"], producer_id=7, transactional=True),
    marker(2, 7, ControlRecordType.ABORT),
    batch(3, [b"plain-3", b"plain-4"]),
    batch(5, [b"committed-5", b"committed-6"], producer_id=8, transactional=True),
    marker(7, 8, ControlRecordType.COMMIT),
    batch(8, [b"plain-8"]),
])


def take_all(fetch: CompletedFetch, read_committed: bool, max_records: int = 1000) -> list:
    return fetch.take(max_records, True, read_committed, None, None)


def test_read_committed_skips_aborted_transactions_and_control_batches() -> None:
    fetch = CompletedFetch(TP, 0, 0, 9, 9, 0, TRANSACTIONS, [(7, 0)])
    records = take_all(fetch, read_committed=True)
    assert [(r.offset, r.value) for r in records] == [(3, b"plain-3"), (4, b"plain-4"), (5, b"committed-5"),
                                                       (6, b"committed-6"), (8, b"plain-8")]
    assert fetch.next_fetch_offset == 9 and fetch.consumed_all
    assert records[0].leader_epoch == 3 and records[0].timestamp == 1003


def test_read_uncommitted_returns_every_data_record_but_no_markers() -> None:
    fetch = CompletedFetch(TP, 0, 0, 9, 9, 0, TRANSACTIONS, None)
    assert [r.offset for r in take_all(fetch, read_committed=False)] == [0, 1, 3, 4, 5, 6, 8]


def test_a_fetch_that_ends_on_a_marker_moves_the_position_past_it() -> None:
    data = batch(0, [b"x"], producer_id=7, transactional=True) + marker(1, 7, ControlRecordType.ABORT)
    fetch = CompletedFetch(TP, 0, 0, 2, 2, 0, data, [(7, 0)])
    assert take_all(fetch, read_committed=True) == [] and fetch.next_fetch_offset == 2


def test_records_before_the_position_inside_a_compressed_batch_are_skipped() -> None:
    data = batch(10, [f"v{n}".encode() for n in range(10)], compression=CompressionType.LZ4)
    fetch = CompletedFetch(TP, 14, 0, 20, 20, 0, data, None)
    assert [r.offset for r in take_all(fetch, read_committed=False)] == list(range(14, 20))


def test_partial_takes_resume_where_they_stopped() -> None:
    data = batch(0, [b"a", b"b", b"c"]) + batch(3, [b"d", b"e"])
    fetch = CompletedFetch(TP, 0, 0, 5, 5, 0, data, None)
    assert [r.value for r in take_all(fetch, False, 2)] == [b"a", b"b"] and fetch.next_fetch_offset == 2
    assert [r.value for r in take_all(fetch, False, 2)] == [b"c", b"d"] and fetch.next_fetch_offset == 4
    assert [r.value for r in take_all(fetch, False, 2)] == [b"e"] and fetch.consumed_all


def test_a_corrupt_batch_is_reported_with_its_partition_and_offset() -> None:
    data = bytearray(batch(0, [b"a"]) + batch(1, [b"b"]))
    data[-3] ^= 0xFF
    fetch = CompletedFetch(TP, 0, 0, 2, 2, 0, bytes(data), None)
    with pytest.raises(CorruptRecordError, match="record batch of t-0 at offset 1 is invalid"):
        take_all(fetch, read_committed=False)


def test_deserializers_apply_to_keys_and_values() -> None:
    fetch = CompletedFetch(TP, 0, 0, 1, 1, 0, batch(0, [b"42"]), None)
    [record] = fetch.take(10, True, False, lambda key: key, lambda value: int(value))
    assert record.value == 42


def test_an_abort_marker_before_the_position_still_ends_its_transaction() -> None:
    # Producer 7 aborts a transaction (offsets 0-2), then commits one (3-5); the fetch starts at offset 3 but the
    # bytes begin at 0: the marker at 2 must still close the aborted transaction, or 3-4 would be dropped too.
    data = b"".join([
        batch(0, [b"aborted-0", b"aborted-1"], producer_id=7, transactional=True),
        marker(2, 7, ControlRecordType.ABORT),
        batch(3, [b"committed-3", b"committed-4"], producer_id=7, transactional=True),
        marker(5, 7, ControlRecordType.COMMIT),
    ])
    fetch = CompletedFetch(TP, 3, 0, 6, 6, 0, data, [(7, 0)])
    assert [(r.offset, r.value) for r in take_all(fetch, read_committed=True)] == \
        [(3, b"committed-3"), (4, b"committed-4")]
    assert fetch.next_fetch_offset == 6


@pytest.mark.parametrize("magic", [0, 1])
def test_a_legacy_compressed_message_set_is_read_from_the_position_inside_it(magic: int) -> None:
    builder = LegacyRecordsBuilder(magic, compression_type=CompressionType.GZIP, base_offset=10)
    for n in range(5):
        builder.append(1000 + n, None, f"v{n}".encode())
    fetch = CompletedFetch(TP, 12, 0, 15, 15, 0, builder.close(), None)
    records = take_all(fetch, read_committed=False)
    assert [(r.offset, r.value, r.leader_epoch) for r in records] == [(12, b"v2", -1), (13, b"v3", -1),
                                                                      (14, b"v4", -1)]
    assert fetch.next_fetch_offset == 15 and fetch.consumed_all


@pytest.mark.parametrize("codec", ["accelerator", "reference"])
def test_records_read_in_place_from_a_received_frame_are_bytes_with_either_codec(codec: str, monkeypatch) -> None:
    monkeypatch.setattr(batch_module, "decode_records",
                        _accel.decode_records if codec == "accelerator" else decode_records_python)
    frame = bytearray(b"header" + TRANSACTIONS)  # the connection hands the fetcher a slice of the frame it received
    fetch = CompletedFetch(TP, 0, 0, 9, 9, 0, memoryview(frame)[6:], None)
    records = take_all(fetch, read_committed=False)
    assert [(r.offset, r.value) for r in records] == [
        (0, b"aborted-0"), (1, b"aborted-1"), (3, b"plain-3"), (4, b"plain-4"), (5, b"committed-5"),
        (6, b"committed-6"), (8, b"plain-8")]
    assert all(type(record.value) is bytes for record in records)
    frame[:] = bytes(len(frame))  # the records own their bytes: reusing the frame changes none of them
    assert records[0].value == b"aborted-0"
