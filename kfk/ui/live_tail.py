"""The message browser's live tail: records appended to a topic after the page opened, pushed to the page as
server-sent events (one ``data:`` line of JSON per batch) by a Consumer without a group that lives exactly as long as
the page's connection.

Why server-sent events: the browser's EventSource keeps one plain HTTP response open, which passes the console's
login, session cookie and TLS unchanged, and the server learns at once that the page closed (the connection drops),
so the tail's Consumer is closed then rather than after a polling timeout. Every tail is bounded: at most
MAX_CONCURRENT_TAILS open at once in the console (a further one is refused with 429, not queued), each sends at
most MAX_TAIL_RECORDS records and lives at most MAX_TAIL_SECONDS, after which an ``end`` event says why; the page
keeps only its last few hundred rows.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from starlette.concurrency import run_in_threadpool
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from kfk.common.structs import TopicPartition
from kfk.ui.message_search import RecordFilter, rendered

__all__ = ["TailSlots", "TailResponse", "tail_events", "MAX_CONCURRENT_TAILS", "MAX_TAIL_RECORDS", "MAX_TAIL_SECONDS"]

MAX_CONCURRENT_TAILS = 4
MAX_TAIL_RECORDS = 10_000
MAX_TAIL_SECONDS = 30 * 60
#: Records per poll, and so at most per event.
_BATCH = 100


class TailSlots:
    """How many tails are open; ``acquire`` refuses (False) beyond the limit."""

    def __init__(self, limit: int = MAX_CONCURRENT_TAILS) -> None:
        self.limit = limit
        self._open = 0
        self._lock = threading.Lock()

    def acquire(self) -> bool:
        with self._lock:
            if self._open >= self.limit:
                return False
            self._open += 1
            return True

    def release(self) -> None:
        with self._lock:
            self._open -= 1

    @property
    def open(self) -> int:
        return self._open


class TailResponse(StreamingResponse):
    """An event stream that gives its slot back however it ends: finished, failed, or the page gone before the first
    event (when the stream's generator never runs its own cleanup)."""

    def __init__(self, events: AsyncIterator[str], release: Callable[[], None]) -> None:
        super().__init__(events, media_type="text/event-stream",
                         headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


def _event(data: Any, name: str | None = None) -> str:
    return (f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n"


async def tail_events(new_consumer: Callable[[], Any], topic: str, start_offsets: dict[int, int],
                      record_filter: RecordFilter, *, max_records: int = MAX_TAIL_RECORDS,
                      max_seconds: float = MAX_TAIL_SECONDS) -> AsyncIterator[str]:
    """The tail's events: ``{"records": [...], "scanned": n}`` batches from ``start_offsets`` (partition -> offset)
    on (after a ``ready`` event with those offsets), a comment line when nothing came (so a closed page is
    noticed), and a final ``end`` event at a limit."""
    consumer = await run_in_threadpool(new_consumer)
    try:
        tps = [TopicPartition(topic, partition) for partition in start_offsets]
        await run_in_threadpool(consumer.assign, tps)
        for tp in tps:
            await run_in_threadpool(consumer.seek, tp, start_offsets[tp.partition])
        yield _event({str(partition): offset for partition, offset in start_offsets.items()}, "ready")
        sent, deadline = 0, time.monotonic() + max_seconds
        while True:
            batch = await run_in_threadpool(consumer.poll, 1.0, min(_BATCH, max_records - sent))
            matched = [rendered(record) for record in batch
                       if record_filter.matches(record.key, record.value, record.headers)]
            sent += len(matched)
            yield _event({"records": matched, "scanned": len(batch)}) if matched else ": waiting\n\n"
            if sent >= max_records:
                yield _event(f"the tail's limit of {max_records} records was reached", "end")
                return
            if time.monotonic() >= deadline:
                yield _event(f"the tail's limit of {max_seconds:g} s was reached", "end")
                return
    finally:
        with anyio.CancelScope(shield=True):  # the page may be gone (the stream cancelled): close all the same
            await run_in_threadpool(consumer.close, 1.0)
