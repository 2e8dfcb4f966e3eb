"""Where time comes from: wall-clock milliseconds, as a function the state machines are handed.

Coordinators, the replica manager, purgatories and metadata backends never read the time themselves; they are given
a Clock (any zero-argument callable returning epoch milliseconds). The broker passes system_time_ms; tests pass a
ManualClock, so lag times, session timeouts and expirations are driven step by step instead of slept through.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["Clock", "ManualClock", "system_time_ms"]


class Clock(Protocol):
    def __call__(self) -> int:
        """The current time in epoch milliseconds."""
        ...


def system_time_ms() -> int:
    """The wall clock in epoch milliseconds (Kafka's Time.SYSTEM.milliseconds())."""
    return time.time_ns() // 1_000_000


class ManualClock:
    """Time that moves only when a test says so."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now = now_ms

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms
