"""Kafka's MirrorMaker Scheduler: a connector's or task's background thread running jobs every interval (an
interval of None never repeats the job), logging and surviving a job that fails, as Kafka's does."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

log = logging.getLogger("kfk.connect.mirror")


class Scheduler:
    def __init__(self, name: str) -> None:
        self.name = name
        self.stopping = threading.Event()
        self.jobs: list[tuple[Callable[[], None], float, str]] = []
        self.next_runs: list[float] = []
        self.thread: threading.Thread | None = None

    def run_now(self, job: Callable[[], None], description: str) -> None:
        """Run `job` on the caller's thread (Kafka's execute: start() waits for its first steps)."""
        try:
            job()
        except Exception:
            log.exception("%s: failed %s", self.name, description)

    def schedule_repeating(self, job: Callable[[], None], interval_seconds: float | None, description: str,
                           delayed: bool = True) -> None:
        if interval_seconds is None or interval_seconds < 0:
            return
        self.jobs.append((job, interval_seconds, description))
        self.next_runs.append(time.monotonic() + (interval_seconds if delayed else 0))
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name=f"Scheduler for {self.name}", daemon=True)
            self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            now = time.monotonic()
            for index, (job, interval, description) in enumerate(list(self.jobs)):
                if now >= self.next_runs[index]:
                    self.run_now(job, description)
                    self.next_runs[index] = time.monotonic() + interval
            wait = min(self.next_runs) - time.monotonic() if self.next_runs else 1.0
            self.stopping.wait(max(0.05, min(wait, 1.0)))

    def close(self) -> None:
        self.stopping.set()
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(10)
