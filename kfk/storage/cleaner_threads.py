"""LogCleanerThreads: the broker's compaction workers (Kafka's LogCleaner and its CleanerThreads).

log.cleaner.threads daemon threads, off the event loop: each asks the LogCleanerManager for the dirtiest compacted
log, cleans it, and sleeps log.cleaner.backoff.ms when none needs cleaning. They share one Throttler
(log.cleaner.io.max.bytes.per.second is for all of them together). Shutdown aborts what is running (the cleaner sees
it at its next batch) and joins the threads.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable

from kfk.config import BrokerConfig
from kfk.storage.cleaner import CleanerStats, LogCleaner
from kfk.storage.cleaner_manager import UNLIMITED_IO_BYTES_PER_SECOND, LogCleanerManager, Throttler
from kfk.storage.log import Log

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class CleanerConfig:
    """The broker's log.cleaner.* settings (Kafka's defaults)."""

    num_threads: int = 1  # log.cleaner.threads
    backoff_ms: int = 15_000  # log.cleaner.backoff.ms
    max_io_bytes_per_second: float = UNLIMITED_IO_BYTES_PER_SECOND  # log.cleaner.io.max.bytes.per.second
    enable_cleaner: bool = True  # log.cleaner.enable

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> CleanerConfig:
        return cls(num_threads=config.log_cleaner_threads, backoff_ms=config.log_cleaner_backoff_ms,
                   max_io_bytes_per_second=config.log_cleaner_io_max_bytes_per_second,
                   enable_cleaner=config.log_cleaner_enable)


class LogCleanerThreads:
    def __init__(self, config: CleanerConfig, manager: LogCleanerManager, logs: Callable[[], list[Log]],
                 now_ms: Callable[[], int]) -> None:
        self.config = config
        self.manager = manager
        self.logs = logs
        self.now_ms = now_ms
        self._stopped = threading.Event()
        self.throttler = Throttler(config.max_io_bytes_per_second, sleep=self._stopped.wait)
        self.cleaners = [LogCleaner(manager, self.throttler) for _ in range(config.num_threads)]
        self._threads: list[threading.Thread] = []
        self._wakeup = threading.Condition()

    def startup(self) -> None:
        for index, cleaner in enumerate(self.cleaners):
            thread = threading.Thread(target=self._run, args=(cleaner,), name=f"kafka-log-cleaner-thread-{index}",
                                      daemon=True)
            self._threads.append(thread)
            thread.start()

    def shutdown(self) -> None:
        self._stopped.set()
        self.manager.abort_all()
        with self._wakeup:  # threads waiting out their backoff
            self._wakeup.notify_all()
        for thread in self._threads:
            thread.join()
        self._threads.clear()

    def _run(self, cleaner: LogCleaner) -> None:
        while not self._stopped.is_set():
            stats: CleanerStats | None = None
            try:
                stats = cleaner.clean_filthiest_log(self.logs(), self.now_ms())
            except Exception:  # a failed cleaning must not end the thread: the partition is retried next pass
                logger.exception("The log cleaner failed")
            if stats is not None:
                logger.info("Cleaned %d segments up to offset %d: %d of %d records kept, %d -> %d bytes",
                            stats.segments_cleaned, stats.end_offset, stats.records_retained, stats.records_read,
                            stats.bytes_read, stats.bytes_written)
                continue
            with self._wakeup:
                if not self._stopped.is_set():
                    self._wakeup.wait(self.config.backoff_ms / 1000)
