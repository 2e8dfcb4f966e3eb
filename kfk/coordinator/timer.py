"""CoordinatorTimer: keyed deadlines for a state machine that takes time in and hands deadlines out.

The coordinators schedule their timeouts here by key (the group coordinator: a member's session, a rebalance's
join and sync phases, the initial rebalance delay, offset expiry; the transaction coordinator: transaction
timeouts, transactional id expiration, marker and write retries); scheduling a key again replaces its deadline,
cancelling forgets it.
Nothing runs by itself: the owner calls `poll(now_ms)`, which runs what is due in deadline order, and arms a real
timer (or a test's manual clock) for `next_deadline_ms()`.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Hashable


class CoordinatorTimer:
    def __init__(self) -> None:
        self._entries: dict[Hashable, tuple[int, int, Callable[[int], None]]] = {}
        self._heap: list[tuple[int, int, Hashable]] = []
        self._sequence = itertools.count()

    def schedule(self, key: Hashable, deadline_ms: int, callback: Callable[[int], None]) -> None:
        """Run `callback(now_ms)` at `deadline_ms` (replacing what `key` had)."""
        sequence = next(self._sequence)
        self._entries[key] = (deadline_ms, sequence, callback)
        heapq.heappush(self._heap, (deadline_ms, sequence, key))

    def cancel(self, key: Hashable) -> None:
        self._entries.pop(key, None)

    def is_scheduled(self, key: Hashable) -> bool:
        return key in self._entries

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap:
            deadline_ms, sequence, key = heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry[1] == sequence:
                return
            heapq.heappop(heap)

    def next_deadline_ms(self) -> int | None:
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def poll(self, now_ms: int) -> int:
        """Run every callback due at `now_ms`; returns how many ran. A callback may schedule or cancel keys,
        including keys due now, which run in this same call."""
        ran = 0
        while True:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now_ms:
                return ran
            _, _, key = heapq.heappop(self._heap)
            _, _, callback = self._entries.pop(key)
            callback(now_ms)
            ran += 1
