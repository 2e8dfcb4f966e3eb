"""Delayed operations and their purgatory: requests that wait for a condition or a timeout (Kafka's
DelayedOperation / DelayedOperationPurgatory).

A produce with acks=all waits until the high watermark passes its records; a fetch with min_bytes waits until enough
data is readable. Neither polls: the request is parked under the keys (partitions) whose change may complete it,
and the code that changes a partition (an append, a high-watermark move, a leadership change) calls
`check_and_complete(key)`. Every operation also has a deadline, after which it completes anyway (with whatever its
`on_complete` makes of an unmet condition: a timeout error for produce, the data there is for fetch).

The purgatory is plain state: it takes the time as an argument and returns the next deadline, so tests drive it
with a manual clock, and the broker wraps it in one asyncio timer (`AsyncioExpirationTimer`). Everything runs on the
event loop, so there are no locks; an operation completes exactly once, whichever of condition and deadline comes
first.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Callable, Hashable, Iterable
from typing import Generic, TypeVar

from kfk.common.clock import Clock

Key = Hashable

logger = logging.getLogger(__name__)


class DelayedOperation:
    """A request waiting for a condition. Subclasses implement `try_complete` (check; on success call
    `force_complete` and return its result) and `on_complete` (build the outcome, called exactly once)."""

    def __init__(self, deadline_ms: int) -> None:
        self.deadline_ms = deadline_ms
        self.completed = False
        self.expired = False

    def try_complete(self) -> bool:
        raise NotImplementedError

    def on_complete(self) -> None:
        raise NotImplementedError

    def on_expiration(self) -> None:
        """Called after `on_complete` when the deadline, not the condition, completed the operation."""

    def force_complete(self) -> bool:
        """Complete now; False if the operation was already completed (by the condition or the deadline)."""
        if self.completed:
            return False
        self.completed = True
        try:
            self.on_complete()
        except Exception:  # noqa: BLE001 - whoever completed it (an append, the timer) must not fail with it
            logger.exception("Error completing %r", self)
        return True


Operation = TypeVar("Operation", bound=DelayedOperation)


class DelayedOperationPurgatory(Generic[Operation]):
    #: When more than this many completed operations wait in the deadline heap, it is rebuilt without them.
    PURGE_THRESHOLD = 1000

    def __init__(self, name: str, on_new_deadline: Callable[[int], None] | None = None) -> None:
        self.name = name
        self._watchers: dict[Key, list[Operation]] = {}
        self._deadlines: list[tuple[int, int, Operation]] = []
        self._sequence = itertools.count()
        self._on_new_deadline = on_new_deadline

    def try_complete_else_watch(self, operation: Operation, keys: Iterable[Key]) -> bool:
        """Complete the operation now if it can, else park it under `keys` until one of them is checked or its
        deadline passes. Returns whether it completed now."""
        if operation.try_complete():
            return True
        for key in keys:
            self._watchers.setdefault(key, []).append(operation)
        heapq.heappush(self._deadlines, (operation.deadline_ms, next(self._sequence), operation))
        if len(self._deadlines) > self.PURGE_THRESHOLD and self._completed_in_heap() > len(self._deadlines) // 2:
            self._deadlines = [entry for entry in self._deadlines if not entry[2].completed]
            heapq.heapify(self._deadlines)
        if self._on_new_deadline is not None and self._deadlines[0][2] is operation:
            self._on_new_deadline(operation.deadline_ms)
        return False

    def _completed_in_heap(self) -> int:
        return sum(1 for entry in self._deadlines if entry[2].completed)

    def check_and_complete(self, key: Key) -> int:
        """Try to complete the operations watching `key` (its partition changed); returns how many completed."""
        watchers = self._watchers.get(key)
        if not watchers:
            return 0
        completed = 0
        remaining: list[Operation] = []
        for operation in watchers:
            if operation.completed:
                continue
            if operation.try_complete():
                completed += 1
            else:
                remaining.append(operation)
        if remaining:
            self._watchers[key] = remaining
        else:
            del self._watchers[key]
        return completed

    def expire(self, now_ms: int) -> int | None:
        """Complete every operation whose deadline has passed; returns the next deadline (None if nothing waits)."""
        deadlines = self._deadlines
        while deadlines and deadlines[0][0] <= now_ms:
            _, _, operation = heapq.heappop(deadlines)
            if operation.force_complete():
                operation.expired = True
                operation.on_expiration()
        while deadlines and deadlines[0][2].completed:
            heapq.heappop(deadlines)
        self._purge_completed_watchers()
        return deadlines[0][0] if deadlines else None

    def _purge_completed_watchers(self) -> None:
        for key in [key for key, ops in self._watchers.items() if all(op.completed for op in ops)]:
            del self._watchers[key]

    def watched(self, key: Key) -> int:
        """How many operations still wait on `key`."""
        return sum(1 for operation in self._watchers.get(key, ()) if not operation.completed)

    @property
    def delayed(self) -> int:
        """How many operations wait (Kafka's purgatory size metric)."""
        return sum(1 for entry in self._deadlines if not entry[2].completed)

    def complete_all(self) -> None:
        """Shutdown: complete every waiting operation now (as if expired), so no request hangs."""
        for _, _, operation in sorted(self._deadlines, key=lambda entry: entry[:2]):
            if operation.force_complete():
                operation.expired = True
                operation.on_expiration()
        self._deadlines.clear()
        self._watchers.clear()


class AsyncioExpirationTimer:
    """The purgatory's clock on the event loop: one timer handle armed for the earliest deadline of the purgatories
    it serves, re-armed after each expiry pass. Deadlines are wall-clock ms (the broker's `now_ms`)."""

    def __init__(self, purgatories: list[DelayedOperationPurgatory], now_ms: Clock) -> None:
        self._purgatories = purgatories
        self._now_ms = now_ms
        self._handle: asyncio.TimerHandle | None = None
        self._armed_for: int | None = None

    def arm(self, deadline_ms: int) -> None:
        """Make sure an expiry pass runs at `deadline_ms` (or earlier)."""
        if self._armed_for is not None and self._armed_for <= deadline_ms:
            return
        if self._handle is not None:
            self._handle.cancel()
        loop = asyncio.get_running_loop()
        delay = max(deadline_ms - self._now_ms(), 0) / 1000
        self._handle = loop.call_later(delay, self._run)
        self._armed_for = deadline_ms

    def _run(self) -> None:
        self._handle = None
        self._armed_for = None
        now = self._now_ms()
        next_deadlines = [deadline for deadline in (p.expire(now) for p in self._purgatories) if deadline is not None]
        if next_deadlines:
            self.arm(min(next_deadlines))

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle = None
        self._armed_for = None
