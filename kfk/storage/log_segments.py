"""LogSegments: a partition's segments ordered by base offset (Kafka's LogSegments), found by bisection."""

from __future__ import annotations

import bisect
from collections.abc import Iterator

from kfk.storage.segment import LogSegment


class LogSegments:
    def __init__(self) -> None:
        self._base_offsets: list[int] = []
        self._segments: dict[int, LogSegment] = {}

    def __len__(self) -> int:
        return len(self._base_offsets)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter([self._segments[base] for base in self._base_offsets])

    def __contains__(self, base_offset: int) -> bool:
        return base_offset in self._segments

    def add(self, segment: LogSegment) -> None:
        """Add (or replace) the segment with this base offset."""
        if segment.base_offset not in self._segments:
            bisect.insort(self._base_offsets, segment.base_offset)
        self._segments[segment.base_offset] = segment

    def remove(self, base_offset: int) -> LogSegment | None:
        segment = self._segments.pop(base_offset, None)
        if segment is not None:
            self._base_offsets.remove(base_offset)
        return segment

    def clear(self) -> list[LogSegment]:
        segments = list(self)
        self._base_offsets.clear()
        self._segments.clear()
        return segments

    def get(self, base_offset: int) -> LogSegment | None:
        return self._segments.get(base_offset)

    @property
    def base_offsets(self) -> list[int]:
        return list(self._base_offsets)

    @property
    def first_segment(self) -> LogSegment | None:
        return self._segments[self._base_offsets[0]] if self._base_offsets else None

    @property
    def last_segment(self) -> LogSegment | None:
        return self._segments[self._base_offsets[-1]] if self._base_offsets else None

    def floor_segment(self, offset: int) -> LogSegment | None:
        """The segment with the largest base offset <= offset: the one that would hold it."""
        index = bisect.bisect_right(self._base_offsets, offset) - 1
        return self._segments[self._base_offsets[index]] if index >= 0 else None

    def higher_segment(self, offset: int) -> LogSegment | None:
        """The first segment whose base offset is > offset."""
        index = bisect.bisect_right(self._base_offsets, offset)
        return self._segments[self._base_offsets[index]] if index < len(self._base_offsets) else None

    def values_from(self, from_offset: int, to_offset: int | None = None) -> list[LogSegment]:
        """Segments that may hold offsets in [from_offset, to_offset): from the floor segment of from_offset up
        to (not including) the first one based at or beyond to_offset."""
        start = max(0, bisect.bisect_right(self._base_offsets, from_offset) - 1)
        end = len(self._base_offsets) if to_offset is None else bisect.bisect_left(self._base_offsets, to_offset)
        return [self._segments[base] for base in self._base_offsets[start:max(start, end)]]

    def size_in_bytes(self) -> int:
        return sum(segment.size for segment in self._segments.values())
