"""OffsetIndex and TimeIndex: Kafka's entry layouts, lookups, truncation, trimming and sanity checks."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kfk.storage.index import (
    CorruptIndexError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    OffsetIndex,
    OffsetPosition,
    TimeIndex,
    TimestampOffset,
)


def test_offset_index_layout_is_kafkas(tmp_path) -> None:
    path = str(tmp_path / "00000000000000000100.index")
    index = OffsetIndex(path, 100, max_index_size=8 * 10 + 5)
    assert os.path.getsize(path) == 80  # pre-allocated, rounded down to whole 8-byte entries
    index.append(105, 0)
    index.append(130, 4096)
    index.close_and_trim()
    with open(path, "rb") as handle:
        data = handle.read()
    assert data == struct.pack(">ii", 5, 0) + struct.pack(">ii", 30, 4096)


def test_time_index_layout_is_kafkas(tmp_path) -> None:
    path = str(tmp_path / "00000000000000000100.timeindex")
    index = TimeIndex(path, 100, max_index_size=12 * 10)
    index.maybe_append(1_700_000_000_000, 104)
    index.maybe_append(1_700_000_000_000, 106)  # not a new maximum: no entry
    index.maybe_append(1_700_000_000_500, 110)
    index.close_and_trim()
    with open(path, "rb") as handle:
        data = handle.read()
    assert data == struct.pack(">qi", 1_700_000_000_000, 4) + struct.pack(">qi", 1_700_000_000_500, 10)


def test_offset_lookup_and_truncate(tmp_path) -> None:
    index = OffsetIndex(str(tmp_path / "a.index"), 0, max_index_size=800)
    for slot in range(50):
        index.append(slot * 10 + 9, slot * 1000)
    assert index.lookup(-5) == OffsetPosition(0, 0)
    assert index.lookup(8) == OffsetPosition(0, 0)
    assert index.lookup(9) == OffsetPosition(9, 0)
    assert index.lookup(25) == OffsetPosition(19, 1000)
    assert index.lookup(10_000) == OffsetPosition(499, 49_000)
    assert index.fetch_upper_bound_offset(1000, 2500) == OffsetPosition(49, 4000)
    assert index.fetch_upper_bound_offset(49_000, 1) is None
    index.truncate_to(29)
    assert index.entries == 2 and index.last_offset == 19
    index.truncate_to(25)
    assert index.entries == 2
    index.truncate_to(0)
    assert index.entries == 0 and index.last_offset == 0
    index.close()


def test_offset_append_rules(tmp_path) -> None:
    index = OffsetIndex(str(tmp_path / "a.index"), 10, max_index_size=16)
    index.append(12, 0)
    with pytest.raises(InvalidOffsetError):
        index.append(12, 10)
    with pytest.raises(IndexOffsetOverflowError):
        index.append(10 + 2**31, 20)
    index.append(13, 10)
    assert index.is_full()
    with pytest.raises(InvalidOffsetError):
        index.append(14, 20)
    assert not index.can_append_offset(9) and index.can_append_offset(10 + 2**31 - 1)
    index.close()


def test_time_lookup_truncate_and_reserved_slot(tmp_path) -> None:
    index = TimeIndex(str(tmp_path / "a.timeindex"), 0, max_index_size=12 * 4)
    assert index.last_entry == TimestampOffset(-1, 0)
    index.maybe_append(100, 5)
    index.maybe_append(200, 9)
    index.maybe_append(300, 15)
    assert index.is_full()  # one slot stays reserved for the entry written when the segment rolls
    index.maybe_append(400, 20, skip_full_check=True)
    assert index.lookup(50) == TimestampOffset(-1, 0)
    assert index.lookup(250) == TimestampOffset(200, 9)
    assert index.lookup(10**12) == TimestampOffset(400, 20)
    with pytest.raises(InvalidOffsetError):
        index.maybe_append(500, 19, skip_full_check=True)
    index.truncate_to(9)
    assert index.last_entry == TimestampOffset(100, 5)
    index.close()


def test_reopen_trimmed_counts_entries_and_resize_preallocates(tmp_path) -> None:
    path = str(tmp_path / "00000000000000000000.index")
    index = OffsetIndex(path, 0, max_index_size=8 * 100)
    for offset in range(10):
        index.append(offset, offset * 100)
    index.close_and_trim()
    reopened = OffsetIndex(path, 0, max_index_size=8 * 100)
    assert reopened.entries == 10 and reopened.is_full()
    reopened.resize(8 * 100)
    assert not reopened.is_full() and os.path.getsize(path) == 800
    reopened.append(10, 1000)
    assert reopened.lookup(10) == OffsetPosition(10, 1000)
    reopened.close()
    readonly = OffsetIndex(path, 0, writable=False)
    assert readonly.entries == 100  # untrimmed: the zeros count as entries until recovery or sanity check
    with pytest.raises(CorruptIndexError):
        readonly.sanity_check()
    readonly.close()


@pytest.mark.parametrize("damage", ["zeros", "garbage", "partial"])
def test_sanity_check_catches_damaged_files(tmp_path, damage: str) -> None:
    path = str(tmp_path / "00000000000000000050.index")
    index = OffsetIndex(path, 50, max_index_size=800)
    for slot in range(20):
        index.append(50 + slot * 3, slot * 500)
    index.close_and_trim()
    time_path = str(tmp_path / "00000000000000000050.timeindex")
    time_index = TimeIndex(time_path, 50, max_index_size=1200)
    for slot in range(20):
        time_index.maybe_append(1000 + slot, 50 + slot * 3)
    time_index.close_and_trim()
    for target in (path, time_path):
        size = os.path.getsize(target)
        with open(target, "r+b") as handle:
            if damage == "zeros":
                handle.write(b"\0" * size)
            elif damage == "garbage":
                handle.seek(size // 2)
                handle.write(os.urandom(24)[:size // 2])
                handle.seek(0)
                handle.write(struct.pack(">q", 2**62))
            else:
                handle.truncate(size - 3)
    for cls, target in ((OffsetIndex, path), (TimeIndex, time_path)):
        damaged = cls(target, 50, writable=False)
        with pytest.raises(CorruptIndexError):
            damaged.sanity_check()
        damaged.close()


@given(st.lists(st.integers(min_value=1, max_value=1000), min_size=1, max_size=200), st.integers(0, 300_000))
def test_lookup_matches_linear_scan(tmp_path_factory, gaps: list[int], target: int) -> None:
    path = str(tmp_path_factory.mktemp("idx") / "00000000000000001000.index")
    index = OffsetIndex(path, 1000, max_index_size=8 * len(gaps))
    entries = []
    offset = 1000
    for position, gap in enumerate(gaps):
        offset += gap
        index.append(offset, position * 10)
        entries.append(OffsetPosition(offset, position * 10))
    expected = max((entry for entry in entries if entry.offset <= target), default=OffsetPosition(1000, 0))
    assert index.lookup(target) == expected
    index.sanity_check()
    index.close()
