"""The client's network thread: one asyncio event loop in a daemon thread per client object.

Why asyncio in a thread, and not threads per connection or a hand-written selector loop: a client multiplexes many
connections with pipelined requests and several timers (linger, retry backoff, reconnect backoff, heartbeats,
metadata refresh, request timeouts). An event loop gives all of that in straight-line coroutines with no locks
around connection state, which is what Java's NetworkClient builds by hand on a Selector. Keeping the loop in its
own thread (Java's Sender and heartbeat threads play the same role) lets the public API stay synchronous, as the
Java client and kafka-python are: user code never needs an event loop, a record is appended to its batch in the
caller's thread without crossing threads, and only whole batches, fetch responses and admin calls hop between the
two. The same coroutines are what kfk.client.aio awaits directly: there the loop is the caller's own (CallerLoop).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, Callable, TypeVar

from kfk.errors import KafkaTimeoutError

__all__ = ["CallerLoop", "ClientLoop", "LoopRunner", "resolve_waiter"]

T = TypeVar("T")


def resolve_waiter(waiter: asyncio.Future) -> None:
    """Wake whoever awaits ``waiter`` (a bare future used as a one-shot signal), once: for callbacks and timers
    that may fire after it was resolved or cancelled."""
    if not waiter.done():
        waiter.set_result(None)


class LoopRunner:
    """Runs the client's coroutines on one event loop for callers on other threads: ``run(coro, timeout)`` blocks
    for a coroutine's result, ``submit`` schedules one, ``call_soon`` a plain callback."""

    loop: asyncio.AbstractEventLoop
    _closed: bool

    @property
    def in_loop_thread(self) -> bool:
        raise NotImplementedError

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule a coroutine on the loop; the returned future can be waited on from any other thread."""
        if self._closed:
            coro.close()
            raise RuntimeError("the client is closed")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run a coroutine on the loop and wait for it. On timeout the coroutine is cancelled and
        KafkaTimeoutError raised; the coroutine's own exceptions propagate unchanged."""
        if self.in_loop_thread:
            coro.close()
            raise RuntimeError("a blocking client call was made from the client's own network thread "
                               "(for example inside a delivery callback)")
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise KafkaTimeoutError(f"timed out after {timeout:.3f}s") from None

    def call_soon(self, callback: Callable[..., Any], *args: Any) -> None:
        """Run a plain callback on the loop thread (thread-safe; wakes the loop)."""
        if not self._closed:
            self.loop.call_soon_threadsafe(callback, *args)

    def close(self, timeout: float = 10.0) -> None:
        raise NotImplementedError


class ClientLoop(LoopRunner):
    """Owns the thread and the loop."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._closed = False
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
        finally:
            pending = [task for task in asyncio.all_tasks(self.loop) if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    @property
    def in_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def close(self, timeout: float = 10.0) -> None:
        """Stop the loop (pending tasks are cancelled) and join the thread."""
        if self._closed:
            return
        self._closed = True
        if self.in_loop_thread:
            self.loop.stop()
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)


class CallerLoop(LoopRunner):
    """The asyncio clients' LoopRunner: the loop is the caller's own, running in the caller's thread. The client's
    network side runs there as tasks; its blocking calls (a group join, a position lookup) are made from a worker
    thread (asyncio.to_thread), which waits while the caller's loop does the work. Closing stops nothing: the loop
    is not the client's."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._closed = False

    @property
    def in_loop_thread(self) -> bool:
        try:
            return asyncio.get_running_loop() is self.loop
        except RuntimeError:
            return False

    def close(self, timeout: float = 10.0) -> None:
        self._closed = True
