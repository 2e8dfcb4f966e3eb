"""What send() returns: a future per record that resolves when its batch is acknowledged (Java's
FutureRecordMetadata over a per-batch ProduceRequestResult).

One ProduceRequestResult per batch carries the outcome (base offset, log append time, or the error); each record's
future only knows its offset within the batch. So completing a batch of 500 records sets one flag and builds
RecordMetadata lazily when someone asks, instead of resolving 500 concurrent.futures.Future objects. The asyncio
producer's futures (kfk.client.aio.RecordFuture) are a subclass of the same per-record future, made by the same
accumulator: no asyncio future, and no event-loop turn, per record.

Callbacks (``send(..., callback=...)`` or ``future.add_callback``) run on the producer's network thread, in send
order within a partition, as the Java client runs them on its I/O thread: they should be quick and must not call
blocking producer methods (flush, close).
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

from kfk.client.structs import RecordMetadata
from kfk.common.structs import TopicPartition
from kfk.errors import KafkaTimeoutError
from kfk.records import NO_TIMESTAMP

__all__ = ["ProduceRequestResult", "FutureRecordMetadata", "RecordRun", "Callback", "RunCallback"]

log = logging.getLogger("kfk.client.producer")

Callback = Callable[["RecordMetadata | None", "BaseException | None"], None]
RunCallback = Callable[["RecordMetadata | None", int, "BaseException | None"], None]
"""produce_batch's callback: ``(metadata of the run's first record, how many records the run holds, error)``."""


class ProduceRequestResult:
    """The outcome of one batch, set once by the sender.

    ``done`` is a plain attribute and the threading.Event that blocking waiters need is made only when one waits:
    a batch is created for every 15 records of 1 KiB, and an Event (a Condition and two locks) cost more than
    the rest of the batch's bookkeeping; the asyncio producer never blocks on it at all.
    """

    __slots__ = ("topic_partition", "base_offset", "log_append_time", "error", "done", "_event", "_callbacks",
                 "_lock")

    def __init__(self, topic_partition: TopicPartition) -> None:
        self.topic_partition = topic_partition
        self.base_offset = -1
        self.log_append_time = NO_TIMESTAMP
        self.error: BaseException | None = None
        self.done = False
        self._event: threading.Event | None = None
        self._callbacks: list[tuple[Callable, object, Callable]] = []
        """(runner, subject, callback) entries, completed as ``runner(subject, callback)``: no closure per record."""
        self._lock = threading.Lock()

    def wait(self, timeout: float | None = None) -> bool:
        if self.done:
            return True
        with self._lock:
            if self.done:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def complete(self, base_offset: int, log_append_time: int, error: BaseException | None) -> None:
        """Set the outcome, wake waiters and run the callbacks (in the order they were added)."""
        with self._lock:
            if self.done:
                return
            self.base_offset = base_offset
            self.log_append_time = log_append_time
            self.error = error
            self.done = True
            if self._event is not None:
                self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for runner, subject, callback in callbacks:
            runner(subject, callback)

    def add_callback_while_open(self, runner: Callable, subject: object, callback: Callable) -> None:
        """Register ``runner(subject, callback)`` from send(): the batch is still open in the accumulator (whose
        lock the caller holds), so it cannot be completing and the lock is not needed."""
        self._callbacks.append((runner, subject, callback))

    def add_done_listener(self, callback: Callable[[], None]) -> bool:
        """``callback()`` once the batch completes (the asyncio producer's flush); False if it already has."""
        return self.add_callback(_call, None, callback)

    def add_callback(self, runner: Callable, subject: object, callback: Callable) -> bool:
        """Register ``runner(subject, callback)`` for completion; False if the batch is already complete (the
        caller runs it itself)."""
        with self._lock:
            if self.done:
                return False
            self._callbacks.append((runner, subject, callback))
            return True


def _call(_subject: None, callback: Callable[[], None]) -> None:
    callback()


class FutureRecordMetadata:
    """The future of one record: ``result(timeout)`` (alias ``get``) blocks for its RecordMetadata or raises the
    batch's error; ``add_callback(fn(metadata, error))`` and ``add_done_callback(fn(future))`` run on completion."""

    __slots__ = ("_result", "_relative_offset", "_timestamp", "_key_size", "_value_size")

    def __init__(self, result: ProduceRequestResult, relative_offset: int, timestamp: int, key_size: int,
                 value_size: int) -> None:
        self._result = result
        self._relative_offset = relative_offset
        self._timestamp = timestamp
        self._key_size = key_size
        self._value_size = value_size

    def done(self) -> bool:
        return self._result.done

    def result(self, timeout: float | None = None) -> RecordMetadata:
        if not self._result.done and not self._result.wait(timeout):
            raise KafkaTimeoutError(f"no acknowledgement for a record of {self._result.topic_partition} "
                                    f"within {timeout}s")
        if self._result.error is not None:
            raise self._result.error
        return self._metadata()

    get = result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self._result.done and not self._result.wait(timeout):
            raise KafkaTimeoutError(f"no acknowledgement within {timeout}s")
        return self._result.error

    def _metadata(self) -> RecordMetadata:
        result = self._result
        offset = result.base_offset + self._relative_offset if result.base_offset >= 0 else -1
        timestamp = result.log_append_time if result.log_append_time != NO_TIMESTAMP else self._timestamp
        return RecordMetadata(result.topic_partition.topic, result.topic_partition.partition, offset, timestamp,
                              self._key_size, self._value_size)

    def add_callback(self, callback: Callback) -> None:
        """``callback(metadata, None)`` on success, ``callback(None, error)`` on failure."""
        if not self._result.add_callback(FutureRecordMetadata._run_callback, self, callback):
            self._run_callback(callback)

    def add_done_callback(self, callback: Callable[[FutureRecordMetadata], object]) -> None:
        """concurrent.futures style: ``callback(future)``."""
        if not self._result.add_callback(FutureRecordMetadata._run_done_callback, self, callback):
            self._run_done_callback(callback)

    def _run_done_callback(self, callback: Callable[[FutureRecordMetadata], object]) -> None:
        try:
            callback(self)
        except Exception:  # a user callback must not kill the network thread
            log.exception("a producer callback raised")

    def _run_callback(self, callback: Callable) -> None:
        error = self._result.error
        try:
            if error is None:
                callback(self._metadata(), None)
            else:
                callback(None, error)
        except Exception:  # a user callback must not kill the network thread
            log.exception("a producer callback raised")


class RecordRun:
    """Consecutive records of one produce_batch call that landed in one batch: one callback for all of them,
    ``callback(metadata, count, None)`` with the first record's metadata (the others follow it at the next offsets,
    with the same timestamp), or ``callback(None, count, error)``."""

    __slots__ = ("_first", "count")

    def __init__(self, first: FutureRecordMetadata, count: int) -> None:
        self._first = first
        self.count = count

    def _run_callback(self, callback: Callable) -> None:
        first = self._first
        error = first._result.error
        try:
            if error is None:
                callback(first._metadata(), self.count, None)
            else:
                callback(None, self.count, error)
        except Exception:  # a user callback must not kill the network thread
            log.exception("a producer callback raised")
