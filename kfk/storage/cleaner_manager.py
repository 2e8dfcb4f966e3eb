"""LogCleanerManager: which compacted logs are cleaned when, and the `cleaner-offset-checkpoint` of each log dir.

No threads and no clock of its own (time comes in): the cleaner threads ask it for the dirtiest log and report back;
the log manager asks it to stop cleaning a partition before truncating or deleting it. Per partition (Kafka's
LogCleaningState):

- absent: cleanable;
- IN_PROGRESS: a cleaner thread is cleaning it;
- ABORTED: truncation or deletion asked a running cleaning to stop; the cleaner sees it at its next check, drops its
  partial work and reports done, which turns ABORTED into PAUSED and wakes the waiter;
- PAUSED(n): not cleaned until resumed n times (pauses nest, as truncations of one partition may overlap).

Choosing (Kafka's grabFilthiestCompactedLog): among compacted logs not in any state, the one with the highest dirty
ratio at or above its min.cleanable.dirty.ratio, or else any whose dirty data is older than max.compaction.lag.ms.
What is dirty starts at the checkpointed offset (or the log start); what may be cleaned ends before the active
segment, the last stable offset and any segment younger than min.compaction.lag.ms.

The checkpoint file is Kafka's offset checkpoint (version 0, count, then `topic partition offset` lines), one per log
dir; an entry is the first dirty offset of its partition. Truncation below it lowers it, deletion removes it.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import threading
import time
from collections.abc import Callable, Iterable

from kfk.common.structs import TopicPartition
from kfk.config import DOUBLE_MAX
from kfk.errors import KafkaStorageError
from kfk.storage.checkpoint import OffsetCheckpointFile
from kfk.storage.log import Log
from kfk.storage.log_files import CLEANER_OFFSET_CHECKPOINT_FILE

UNLIMITED_IO_BYTES_PER_SECOND = DOUBLE_MAX  # log.cleaner.io.max.bytes.per.second's default: no throttle
THROTTLE_CHECK_INTERVAL_MS = 300  # how much I/O the throttler averages over (Kafka's Throttler check interval)


class LogCleaningAbortedError(KafkaStorageError):
    """A cleaning was aborted (its partition is being truncated or deleted); its partial work is dropped."""


class CleaningState(enum.Enum):
    IN_PROGRESS = "in-progress"
    ABORTED = "aborted"
    PAUSED = "paused"


@dataclasses.dataclass
class LogToClean:
    """A log chosen for cleaning: its dirty section [first_dirty_offset, first_uncleanable_offset)."""

    topic_partition: TopicPartition
    log: Log
    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    max_compaction_delay_ms: int

    @property
    def cleanable_ratio(self) -> float:
        total = self.clean_bytes + self.cleanable_bytes
        return self.cleanable_bytes / total if total else 0.0


def cleanable_offsets(log: Log, checkpointed: int | None, now_ms: int) -> LogToClean:
    """The dirty section of `log` (call under its lock): from the checkpoint (when it lies within the log) up to the
    first uncleanable offset, and how overdue its oldest dirty data is against max.compaction.lag.ms."""
    first_dirty = log.log_start_offset
    if checkpointed is not None and log.log_start_offset <= checkpointed <= log.log_end_offset:
        first_dirty = checkpointed
    first_uncleanable = min(log.last_stable_offset, log.active_segment.base_offset)
    dirty_segments = [segment for segment in log.segments.values_from(first_dirty, first_uncleanable)
                      if segment is not log.active_segment]
    min_lag = max(log.config.min_compaction_lag_ms, 0)
    if min_lag > 0:
        for segment in dirty_segments:
            if segment.largest_timestamp > now_ms - min_lag:
                first_uncleanable = min(first_uncleanable, segment.base_offset)
                break
    first_uncleanable = max(first_uncleanable, first_dirty)
    clean_bytes = sum(segment.size for segment in log.segments.values_from(log.log_start_offset, first_dirty))
    cleanable_bytes = sum(segment.size for segment in log.segments.values_from(first_dirty, first_uncleanable))
    max_lag = max(log.config.max_compaction_lag_ms, 0)
    first_batch_timestamps = [timestamp for segment in dirty_segments
                              if (timestamp := segment.first_batch_timestamp()) is not None and timestamp > 0]
    delay = 0
    if first_batch_timestamps:
        clean_until = now_ms - max_lag
        earliest = min(first_batch_timestamps)
        if earliest < clean_until:
            delay = clean_until - earliest
    return LogToClean(log.topic_partition, log, first_dirty, first_uncleanable, clean_bytes, cleanable_bytes,
                      delay)


class LogCleanerManager:
    """Cleaning states of partitions and the cleaner checkpoints; safe to call from any thread."""

    def __init__(self) -> None:
        self._states: dict[TopicPartition, tuple[CleaningState, int]] = {}
        self._lock = threading.Condition(threading.RLock())
        self._shutting_down = False
        # Per partition, the earliest delete horizon (ms) of the tombstones and markers its last cleaning kept: once
        # it passes, the log is cleaned again even with nothing dirty, so that they go (KIP-534).
        self._delete_horizons: dict[TopicPartition, int] = {}

    # -- checkpoints ---------------------------------------------------------------------------------------------

    @staticmethod
    def _checkpoint_file(log_dir: str) -> OffsetCheckpointFile:
        return OffsetCheckpointFile(os.path.join(log_dir, CLEANER_OFFSET_CHECKPOINT_FILE))

    def checkpointed_offset(self, log: Log) -> int | None:
        with self._lock:
            return self._checkpoint_file(os.path.dirname(log.dir)).read().get(log.topic_partition)

    def update_checkpoint(self, log_dir: str, topic_partition: TopicPartition, offset: int | None) -> None:
        """Set (or with None, remove) one partition's entry in `log_dir`'s checkpoint."""
        with self._lock:
            checkpoint = self._checkpoint_file(log_dir)
            offsets = checkpoint.read()
            if offset is None:
                if offsets.pop(topic_partition, None) is None:
                    return
            else:
                offsets[topic_partition] = offset
            checkpoint.write(offsets)

    def remove_partition(self, log_dir: str, topic_partition: TopicPartition) -> None:
        """The partition's log is gone (deleted, or emptied to start again elsewhere): forget what was cleaned."""
        with self._lock:
            self._delete_horizons.pop(topic_partition, None)
            self.update_checkpoint(log_dir, topic_partition, None)

    def maybe_truncate_checkpoint(self, log_dir: str, topic_partition: TopicPartition, offset: int) -> None:
        """After truncating to `offset`: a checkpoint beyond it would skip the records written there next."""
        with self._lock:
            checkpointed = self._checkpoint_file(log_dir).read().get(topic_partition)
            if checkpointed is not None and checkpointed > offset:
                self.update_checkpoint(log_dir, topic_partition, offset)

    # -- choosing ------------------------------------------------------------------------------------------------

    def grab_filthiest_compacted_log(self, logs: Iterable[Log], now_ms: int) -> LogToClean | None:
        """The log to clean next, marked IN_PROGRESS (None if no log needs cleaning). Each log's dirty section is
        measured under that log's lock, never while holding the manager's (a cleaner swapping segments holds a
        log's lock and then asks the manager whether it was aborted)."""
        with self._lock:
            if self._shutting_down:
                return None
            busy = set(self._states)
        logs = [log for log in logs if not log.closed and log.config.compact and log.topic_partition not in busy]
        checkpoints: dict[str, dict[TopicPartition, int]] = {}
        candidates: list[LogToClean] = []
        for log in logs:
            log_dir = os.path.dirname(log.dir)
            if log_dir not in checkpoints:
                with self._lock:
                    checkpoints[log_dir] = self._checkpoint_file(log_dir).read()
            with log.lock:
                if log.closed:
                    continue
                candidate = cleanable_offsets(log, checkpoints[log_dir].get(log.topic_partition), now_ms)
            horizon = self._delete_horizons.get(log.topic_partition)
            tombstones_expired = horizon is not None and horizon <= now_ms
            dirty = candidate.cleanable_bytes > 0 and (
                candidate.cleanable_ratio >= log.config.min_cleanable_dirty_ratio)
            if dirty or candidate.max_compaction_delay_ms > 0 or tombstones_expired:
                candidates.append(candidate)
        # Overdue logs first (max.compaction.lag.ms), then the dirtiest.
        candidates.sort(key=lambda candidate: (candidate.max_compaction_delay_ms > 0, candidate.cleanable_ratio),
                        reverse=True)
        with self._lock:
            for candidate in candidates:
                if candidate.topic_partition not in self._states and not self._shutting_down:
                    self._states[candidate.topic_partition] = (CleaningState.IN_PROGRESS, 0)
                    return candidate
        return None

    def start_cleaning(self, topic_partition: TopicPartition) -> bool:
        """Mark one partition IN_PROGRESS for a cleaning asked for directly; False if it is paused or busy."""
        with self._lock:
            if topic_partition in self._states:
                return False
            self._states[topic_partition] = (CleaningState.IN_PROGRESS, 0)
            return True

    # -- the cleaner's side --------------------------------------------------------------------------------------

    def check_cleaning_aborted(self, topic_partition: TopicPartition) -> None:
        """Raise LogCleaningAbortedError when the partition's cleaning was aborted, or the cleaner is shutting down
        (the cleaner calls this between batches)."""
        with self._lock:
            state = self._states.get(topic_partition)
            if self._shutting_down or (state is not None and state[0] is CleaningState.ABORTED):
                raise LogCleaningAbortedError(f"Cleaning of {topic_partition} was aborted")

    def done_cleaning(self, topic_partition: TopicPartition, log_dir: str, end_offset: int | None,
                      delete_horizon_ms: int | None = None) -> None:
        """A cleaning ended: with an end offset it completed (the checkpoint moves there, and the earliest delete
        horizon it left is remembered); an aborted one becomes PAUSED and wakes whoever aborted it."""
        with self._lock:
            state = self._states.get(topic_partition)
            if state is None:
                return
            if state[0] is CleaningState.ABORTED:
                self._states[topic_partition] = (CleaningState.PAUSED, 1)
                self._lock.notify_all()
                return
            if state[0] is CleaningState.IN_PROGRESS:
                if end_offset is not None:
                    self.update_checkpoint(log_dir, topic_partition, end_offset)
                    if delete_horizon_ms is None:
                        self._delete_horizons.pop(topic_partition, None)
                    else:
                        self._delete_horizons[topic_partition] = delete_horizon_ms
                del self._states[topic_partition]

    # -- truncation and deletion ----------------------------------------------------------------------------------

    def abort_and_pause_cleaning(self, topic_partition: TopicPartition) -> None:
        """Stop cleaning `topic_partition` until resume_cleaning: abort a running cleaning and wait for it to end."""
        with self._lock:
            while True:
                state = self._states.get(topic_partition)
                if state is None:
                    self._states[topic_partition] = (CleaningState.PAUSED, 1)
                    return
                if state[0] is CleaningState.PAUSED:
                    self._states[topic_partition] = (CleaningState.PAUSED, state[1] + 1)
                    return
                aborting = state[0] is CleaningState.IN_PROGRESS
                if aborting:
                    self._states[topic_partition] = (CleaningState.ABORTED, 0)
                while self._states.get(topic_partition, (None, 0))[0] is CleaningState.ABORTED:
                    self._lock.wait(0.1)
                if aborting:
                    return  # done_cleaning left it PAUSED(1): our pause
                # another caller's abort ended: pause on top of theirs

    def abort_all(self) -> None:
        """Shutdown: running cleanings stop at their next check and no new one starts."""
        with self._lock:
            self._shutting_down = True

    def restart(self) -> None:
        """After abort_all, for cleaner threads started anew (a reconfiguration): cleanings may start again."""
        with self._lock:
            self._shutting_down = False

    def resume_cleaning(self, topic_partition: TopicPartition) -> None:
        with self._lock:
            state = self._states.get(topic_partition)
            if state is None or state[0] is not CleaningState.PAUSED:
                return
            if state[1] <= 1:
                del self._states[topic_partition]
            else:
                self._states[topic_partition] = (CleaningState.PAUSED, state[1] - 1)

    def state(self, topic_partition: TopicPartition) -> tuple[CleaningState, int] | None:
        with self._lock:
            return self._states.get(topic_partition)


class Throttler:
    """log.cleaner.io.max.bytes.per.second: after each chunk of I/O, sleep as long as needed to keep the average
    over THROTTLE_CHECK_INTERVAL_MS windows at the rate. `sleep` may return early (shutdown); time comes in."""

    def __init__(self, bytes_per_second: float, clock_ms: Callable[[], float] = lambda: time.monotonic() * 1000,
                 sleep: Callable[[float], object] = time.sleep) -> None:
        self.bytes_per_second = bytes_per_second
        self.clock_ms = clock_ms
        self.sleep = sleep
        self._lock = threading.Lock()
        self._window_start_ms = clock_ms()
        self._bytes = 0.0

    def maybe_throttle(self, observed_bytes: int) -> float:
        """Account for `observed_bytes`; returns how long it slept, in milliseconds."""
        if self.bytes_per_second >= UNLIMITED_IO_BYTES_PER_SECOND:
            return 0.0
        with self._lock:
            self._bytes += observed_bytes
            now = self.clock_ms()
            elapsed = now - self._window_start_ms
            if elapsed < THROTTLE_CHECK_INTERVAL_MS:
                return 0.0
            needed_ms = self._bytes * 1000 / self.bytes_per_second
            sleep_ms = max(needed_ms - elapsed, 0.0)
            self._window_start_ms = now
            self._bytes = 0.0
        if sleep_ms > 0:
            self.sleep(sleep_ms / 1000)
            with self._lock:
                self._window_start_ms = self.clock_ms()
        return sleep_ms
