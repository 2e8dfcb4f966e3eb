"""queued.max.request.bytes: the memory all connections' requests may hold at once, as Kafka's SimpleMemoryPool.

A connection reserves a request's announced size when its frame starts and gives it back when the request has been
handled. Reservations are not strict (Kafka's broker pool is not either): one succeeds while any memory is left, so
the pool overshoots by at most one request, and a connection that has begun a frame can always finish it. Once the
pool is exhausted, connections stop reading new requests until enough is released (the socket server pauses and
resumes them; this module only keeps the count).

With queued.max.request.bytes = -1 (Kafka's default) there is no pool: the socket server then never consults one, and
memory is bounded by frames growing only as their bytes arrive and by socket.request.receive.timeout.ms.
"""

from __future__ import annotations

__all__ = ["MemoryPool"]


class MemoryPool:
    """Bytes of requests held, against `capacity`."""

    __slots__ = ("capacity", "available")

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError("a memory pool needs a positive capacity (no pool: queued.max.request.bytes = -1)")
        self.capacity = capacity
        self.available = capacity

    @property
    def exhausted(self) -> bool:
        """No reservation would succeed now: connections should stop reading new requests."""
        return self.available <= 0

    def adjust(self, delta: int) -> None:
        """Reserve `delta` more bytes (release, if negative). The socket server reserves only while not exhausted."""
        self.available -= delta
