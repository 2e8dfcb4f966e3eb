"""Time windows (Kafka's TimeWindows): tumbling (advance = size) and hopping (advance < size) windows, aligned to
the epoch, with a grace period after a window's end during which late records are still added to it.

A window [start, start + size) holds the records whose timestamp t satisfies start <= t < start + size; a record
belongs to every window whose start is a multiple of the advance in (t - size, t]. A window closes when stream time
(the largest timestamp the task has seen) reaches its end plus the grace period; records for a closed window are
dropped, as Kafka drops them ("Skipping record for expired window").
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = ["EmitStrategy", "JoinWindows", "SessionWindows", "SlidingWindows", "TimeWindows", "Window", "Windowed"]

#: Kafka's windowstore.changelog.additional.retention.ms default: a windowed changelog keeps a day more than the
#: store's retention, so restoration finds every window still open.
WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS = 24 * 60 * 60 * 1000


class EmitStrategy(enum.Enum):
    """When a windowed aggregation forwards its windows (Kafka's EmitStrategy, KIP-825): on every update of a window
    (Kafka's default), or once, with its final value, when it closes (stream time reaches its end plus the grace
    period) - final results without suppress()'s buffer: the aggregation's own store holds the windows until
    then."""

    ON_WINDOW_UPDATE = "ON_WINDOW_UPDATE"
    ON_WINDOW_CLOSE = "ON_WINDOW_CLOSE"

    @classmethod
    def on_window_update(cls) -> EmitStrategy:
        return cls.ON_WINDOW_UPDATE

    @classmethod
    def on_window_close(cls) -> EmitStrategy:
        return cls.ON_WINDOW_CLOSE


@dataclass(frozen=True, order=True)
class Window:
    start: int
    end: int


@dataclass(frozen=True)
class Windowed:
    """A windowed aggregate's key: the record key and its window."""

    key: Any
    window: Window


@dataclass(frozen=True)
class TimeWindows:
    size_ms: int
    advance_ms: int
    grace_ms: int

    @classmethod
    def of_size_with_no_grace(cls, size_ms: int) -> TimeWindows:
        return cls.of_size_and_grace(size_ms, 0)

    @classmethod
    def of_size_and_grace(cls, size_ms: int, grace_ms: int) -> TimeWindows:
        if size_ms <= 0:
            raise ValueError("Window size (sizeMs) must be larger than zero.")
        if grace_ms < 0:
            raise ValueError("Grace period must not be negative.")
        return cls(size_ms, size_ms, grace_ms)

    def advance_by(self, advance_ms: int) -> TimeWindows:
        if advance_ms <= 0 or advance_ms > self.size_ms:
            raise ValueError(f"Window advancement interval should be more than zero and less than window duration "
                             f"which is {self.size_ms} ms, but given advancement interval is: {advance_ms} ms")
        return TimeWindows(self.size_ms, advance_ms, self.grace_ms)

    def windows_for(self, timestamp: int) -> list[Window]:
        """The windows a record at `timestamp` falls in, earliest first."""
        start = max(0, timestamp - self.size_ms + self.advance_ms)
        start -= start % self.advance_ms
        windows = []
        while start <= timestamp:
            windows.append(Window(start, start + self.size_ms))
            start += self.advance_ms
        return windows

    def retention_ms(self) -> int:
        """How long the store keeps a window: its size plus the grace period (Kafka's default retention)."""
        return self.size_ms + self.grace_ms


@dataclass(frozen=True)
class SlidingWindows:
    """Sliding windows (Kafka's SlidingWindows, KIP-450): windows of ``time_difference_ms`` (both ends inclusive)
    that exist only where records are, so that each distinct set of a key's records at most the time difference
    apart is one window. A record at t opens its left window [t - difference, t] and, when later records of the key
    fall within the difference after it, its right window [t + 1, t + 1 + difference]. Unlike time windows they are
    not aligned to the epoch: a window's start is a record's time (or the time after one)."""

    time_difference_ms: int
    grace_ms: int

    @classmethod
    def of_time_difference_and_grace(cls, time_difference_ms: int, grace_ms: int) -> SlidingWindows:
        if time_difference_ms < 0:
            raise ValueError("Window time difference must not be negative.")
        if grace_ms < 0:
            raise ValueError("Window grace period must not be negative.")
        return cls(time_difference_ms, grace_ms)

    @classmethod
    def of_time_difference_with_no_grace(cls, time_difference_ms: int) -> SlidingWindows:
        return cls.of_time_difference_and_grace(time_difference_ms, 0)

    def retention_ms(self) -> int:
        """Kafka's default retention of a sliding window store: a new record may need the windows that start up
        to twice the difference before it (to build its own left and the previous record's right window), for as
        long as the grace period accepts it."""
        return self.grace_ms + 2 * self.time_difference_ms


@dataclass(frozen=True)
class JoinWindows:
    """How far apart in time two records of a KStream-KStream join may be: a record at t joins the other
    stream's records of the same key from t - before_ms to t + after_ms. Records are kept for before + after +
    grace (the stores' retention)."""

    before_ms: int
    after_ms: int
    grace_ms: int

    @classmethod
    def of_time_difference_and_grace(cls, difference_ms: int, grace_ms: int) -> JoinWindows:
        if difference_ms < 0 or grace_ms < 0:
            raise ValueError("Window time difference and grace period must not be negative.")
        return cls(difference_ms, difference_ms, grace_ms)

    @classmethod
    def of_time_difference_without_grace(cls, difference_ms: int) -> JoinWindows:
        return cls.of_time_difference_and_grace(difference_ms, 0)

    def before(self, before_ms: int) -> JoinWindows:
        return JoinWindows(before_ms, self.after_ms, self.grace_ms)

    def after(self, after_ms: int) -> JoinWindows:
        return JoinWindows(self.before_ms, after_ms, self.grace_ms)

    def retention_ms(self) -> int:
        return self.before_ms + self.after_ms + self.grace_ms


@dataclass(frozen=True)
class SessionWindows:
    """Sessions (Kafka's SessionWindows): a key's records at most ``gap_ms`` apart form one session [first, last]
    (both ends inclusive); a record that bridges two sessions merges them. A session closes when stream time
    passes its end plus the gap and the grace period."""

    gap_ms: int
    grace_ms: int

    @classmethod
    def of_inactivity_gap_and_grace(cls, gap_ms: int, grace_ms: int) -> SessionWindows:
        if gap_ms <= 0:
            raise ValueError("Gap time cannot be zero or negative.")
        if grace_ms < 0:
            raise ValueError("Grace period must not be negative.")
        return cls(gap_ms, grace_ms)

    @classmethod
    def of_inactivity_gap_with_no_grace(cls, gap_ms: int) -> SessionWindows:
        return cls.of_inactivity_gap_and_grace(gap_ms, 0)

    def retention_ms(self) -> int:
        return self.gap_ms + self.grace_ms
