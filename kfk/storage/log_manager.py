"""LogManager: every partition log of a broker across its log dirs, and the periodic work on them.

- Startup opens each log dir (creating it if needed), reads its checkpoint files, and loads every partition folder.
  A `.kafka_cleanshutdown` marker in the dir means the last shutdown was clean and recovery is skipped; the marker is
  removed once the logs are loaded, so a crash from then on is seen as unclean at the next start.
- A new partition goes to the log dir that holds the fewest partitions (ties: the first listed), as Kafka does.
- `tick(now_ms)` runs what is due — retention (log.retention.check.interval.ms), flushes (flush.ms, and the segments
  left behind by a roll), checkpoints (recovery points, log start offsets, high watermarks every
  log.flush.offset.checkpoint.interval.ms), removal of `.deleted` segments and `-delete` folders — and returns the
  time of the next deadline. The broker calls it from a timer; tests call it with a manual clock.
- Shutdown flushes and closes every log, writes the checkpoints, then the clean-shutdown marker in each dir.

Checkpoints per log dir (Kafka's names and text format): recovery-point-offset-checkpoint,
log-start-offset-checkpoint, replication-offset-checkpoint (high watermarks) and, for compaction,
cleaner-offset-checkpoint (written by the cleaner).

A log the metadata has no place for (its topic deleted while the broker was down: kfk/replication/stray_replicas.py)
is set aside as `<topic>-<partition>.<id>-stray` (`mark_stray`) and never deleted: startup skips such folders.

A partition's log moves to another of the broker's log dirs (AlterReplicaLogDirs) by copying it into a
`<topic>-<partition>.<id>-future` folder there and swapping the copy in (kfk/storage/log_dir_move.py), its cleaning
paused meanwhile; the log object stays the same, so whoever holds it keeps serving from it. The old folder is
renamed `-delete` and removed after file.delete.delay.ms, when no fetch can still be sending from its files.

Compaction runs in log.cleaner.threads threads of their own (LogCleanerThreads) from startup to shutdown. Truncating
or deleting a log goes through the log manager, which pauses that partition's cleaning first (aborting and waiting
for a running one) and fixes its cleaner checkpoint.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import threading
import uuid

from kfk.common.clock import Clock, system_time_ms
from kfk.common.internal_topics import CLUSTER_METADATA_TOPIC_NAME
from kfk.common.structs import TopicPartition
from kfk.config import LogConfig
from kfk.errors import KafkaStorageError, LogDirNotFoundError
from kfk.storage.checkpoint import OffsetCheckpointFile, atomic_write
from kfk.storage.cleaner_manager import LogCleanerManager
from kfk.storage.cleaner_threads import CleanerConfig, LogCleanerThreads
from kfk.storage.format import format_log_dirs
from kfk.storage.log import Log, SegmentDeletionQueue
from kfk.storage.log_files import (
    CLEAN_SHUTDOWN_FILE,
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    REPLICATION_CHECKPOINT_FILE,
    STRAY_DIR_SUFFIX,
    log_delete_dir_name,
    log_dir_name,
    log_future_dir_name,
    log_stray_dir_name,
    parse_topic_partition_name,
)
from kfk.storage.producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS

logger = logging.getLogger(__name__)

DEFAULT_RETENTION_CHECK_INTERVAL_MS = 5 * 60 * 1000  # log.retention.check.interval.ms
DEFAULT_OFFSET_CHECKPOINT_INTERVAL_MS = 60_000  # log.flush.offset.checkpoint.interval.ms
DEFAULT_FLUSH_CHECK_INTERVAL_MS = 1000  # how often flush.ms and rolled segments are looked at
DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS = 600_000  # producer.id.expiration.check.interval.ms


class LogManager:
    def __init__(self, log_dirs: list[str], default_config: LogConfig | None = None, *,
                 retention_check_interval_ms: int = DEFAULT_RETENTION_CHECK_INTERVAL_MS,
                 offset_checkpoint_interval_ms: int = DEFAULT_OFFSET_CHECKPOINT_INTERVAL_MS,
                 flush_check_interval_ms: int = DEFAULT_FLUSH_CHECK_INTERVAL_MS,
                 producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 cleaner_config: CleanerConfig | None = None,
                 now_ms: Clock = system_time_ms) -> None:
        if not log_dirs:
            raise KafkaStorageError("At least one log dir is needed (log.dirs)")
        if len(set(map(os.path.abspath, log_dirs))) != len(log_dirs):
            raise KafkaStorageError(f"Duplicate log directory found: {', '.join(log_dirs)}")
        self.log_dirs = [os.path.abspath(path) for path in log_dirs]
        self.default_config = default_config or LogConfig()
        self.topic_configs: dict[str, LogConfig] = {}
        self.retention_check_interval_ms = retention_check_interval_ms
        self.offset_checkpoint_interval_ms = offset_checkpoint_interval_ms
        self.flush_check_interval_ms = flush_check_interval_ms
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.logs: dict[TopicPartition, Log] = {}
        #: The partitions being moved to another log dir, and the future folder each is being copied into.
        self.future_dirs: dict[TopicPartition, str] = {}
        #: The log dir AlterReplicaLogDirs asked for a partition this broker has no log of yet: its log goes there.
        self.preferred_log_dirs: dict[TopicPartition, str] = {}
        self._moves_aborted = threading.Event()
        self.deletion_queue = SegmentDeletionQueue()
        self.had_clean_shutdown: dict[str, bool] = {}
        self.lock = threading.RLock()
        self._next_retention_ms = 0
        self._next_checkpoint_ms = 0
        self._next_flush_ms = 0
        self._next_producer_expiration_ms = 0
        self._started = False
        #: The broker epoch of the last clean shutdown (-1: the last shutdown was not clean), read at start-up.
        self.previous_broker_epoch = -1
        self.cleaner_manager = LogCleanerManager()
        self.cleaner: LogCleanerThreads | None = None
        self._clock = now_ms
        self._cleaner_lock = threading.Lock()  # one reconfiguration of the cleaner threads at a time
        self._cleaner_stopped = False
        self._build_cleaner(cleaner_config or CleanerConfig())

    # -- startup -----------------------------------------------------------------------------------------------------

    def _clean_shutdown_broker_epoch(self) -> int:
        """The broker epoch the clean-shutdown markers recorded, -1 unless every log dir has one (an unclean
        shutdown): what the broker tells the controller as its previous broker epoch, as Kafka's does."""
        epochs = set()
        for log_dir in self.log_dirs:
            try:
                with open(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), "rb") as marker:
                    epochs.add(int(json.loads(marker.read())["brokerEpoch"]))
            except (OSError, ValueError, KeyError, TypeError):
                return -1
        return epochs.pop() if len(epochs) == 1 else -1

    def startup(self, now_ms: int, node_id: int | None = None, cluster_id: str | None = None) -> None:
        """Create missing log dirs, check meta.properties (when node and cluster ids are given), load every
        partition and remove the clean-shutdown markers."""
        with self.lock:
            for log_dir in self.log_dirs:
                os.makedirs(log_dir, exist_ok=True)
            if node_id is not None and cluster_id is not None:
                format_log_dirs(self.log_dirs, cluster_id, node_id, ignore_formatted=True)
            for log_dir in self.log_dirs:
                self._load_log_dir(log_dir, now_ms)
            self.previous_broker_epoch = self._clean_shutdown_broker_epoch()
            for log_dir in self.log_dirs:
                marker = os.path.join(log_dir, CLEAN_SHUTDOWN_FILE)
                if os.path.exists(marker):
                    os.unlink(marker)
            self._next_retention_ms = now_ms + self.retention_check_interval_ms
            self._next_checkpoint_ms = now_ms + self.offset_checkpoint_interval_ms
            self._next_flush_ms = now_ms + self.flush_check_interval_ms
            self._next_producer_expiration_ms = now_ms + DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS
            self._started = True
        if self.cleaner is not None:
            self.cleaner.startup()

    def _build_cleaner(self, cleaner_config: CleanerConfig) -> None:
        self.cleaner = None
        if cleaner_config.enable_cleaner and cleaner_config.num_threads > 0:
            self.cleaner = LogCleanerThreads(cleaner_config, self.cleaner_manager, self.all_logs, self._clock)

    def reconfigure_cleaner(self, cleaner_config: CleanerConfig) -> None:
        """A dynamic log.cleaner.threads, log.cleaner.backoff.ms or log.cleaner.io.max.bytes.per.second (Kafka's
        LogCleaner.reconfigure): stop the cleaner threads, aborting a cleaning in progress (its log is picked again
        later), and start them anew with the new settings. Blocks while the threads finish: not on the event loop."""
        with self._cleaner_lock:
            if self.cleaner is not None:
                self.cleaner.shutdown()
            self.cleaner = None
            if self._cleaner_stopped:
                return
            self.cleaner_manager.restart()
            self._build_cleaner(cleaner_config)
            if self.cleaner is not None and self._started:  # else startup() starts them
                self.cleaner.startup()
            logger.info("Log cleaner restarted with %d thread(s)", len(self.cleaner.cleaners) if self.cleaner else 0)

    def _load_log_dir(self, log_dir: str, now_ms: int) -> None:
        had_clean_shutdown = os.path.exists(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))
        self.had_clean_shutdown[log_dir] = had_clean_shutdown
        recovery_points = OffsetCheckpointFile(os.path.join(log_dir, RECOVERY_POINT_CHECKPOINT_FILE)).read()
        log_start_offsets = OffsetCheckpointFile(os.path.join(log_dir, LOG_START_OFFSET_CHECKPOINT_FILE)).read()
        high_watermarks = OffsetCheckpointFile(os.path.join(log_dir, REPLICATION_CHECKPOINT_FILE)).read()
        for name in sorted(os.listdir(log_dir)):
            path = os.path.join(log_dir, name)
            if not os.path.isdir(path):
                continue
            if name.endswith(DELETE_DIR_SUFFIX):
                logger.info("Removing partition folder %s left by a topic deletion", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            if name.endswith(FUTURE_DIR_SUFFIX):
                # a copy left by a move to this dir that did not finish (the original is intact): kfk does not
                # resume moves, AlterReplicaLogDirs starts one again
                logger.info("Removing partition folder %s left by an unfinished move between log dirs", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            if name.endswith(STRAY_DIR_SUFFIX):
                logger.info("Ignoring partition folder %s (stray replica)", path)
                continue
            try:
                topic_partition = parse_topic_partition_name(name)
            except ValueError:
                logger.warning("Ignoring folder %s in log dir %s: not a partition folder", name, log_dir)
                continue
            if topic_partition.topic == CLUSTER_METADATA_TOPIC_NAME:
                continue  # the metadata backend's own log
            if topic_partition in self.logs:
                raise KafkaStorageError(
                    f"Duplicate log directories for {topic_partition} are found in both "
                    f"{self.logs[topic_partition].dir} and {path}. It is likely because log directory failure "
                    f"happened while broker was replacing current replica with future replica."
                )
            log = Log.open(path, self.config_for(topic_partition.topic), now_ms=now_ms,
                           recovery_point=recovery_points.get(topic_partition, 0),
                           log_start_offset=log_start_offsets.get(topic_partition, 0),
                           had_clean_shutdown=had_clean_shutdown, deletion_queue=self.deletion_queue,
                           producer_id_expiration_ms=self.producer_id_expiration_ms)
            if topic_partition in high_watermarks:
                log.update_high_watermark(high_watermarks[topic_partition])
            self.logs[topic_partition] = log

    # -- configs -------------------------------------------------------------------------------------------------

    def config_for(self, topic: str) -> LogConfig:
        return self.topic_configs.get(topic, self.default_config)

    def update_topic_config(self, topic: str, config: LogConfig) -> None:
        with self.lock:
            self.topic_configs[topic] = config
            for topic_partition, log in self.logs.items():
                if topic_partition.topic == topic:
                    log.update_config(config)

    # -- partitions --------------------------------------------------------------------------------------------------

    def get_log(self, topic_partition: TopicPartition) -> Log | None:
        return self.logs.get(topic_partition)

    def all_logs(self) -> list[Log]:
        return list(self.logs.values())

    def partition_counts(self) -> dict[str, int]:
        counts = {log_dir: 0 for log_dir in self.log_dirs}
        for log in self.logs.values():
            counts[os.path.dirname(log.dir)] = counts.get(os.path.dirname(log.dir), 0) + 1
        return counts

    def next_log_dir(self) -> str:
        """The log dir with the fewest partitions (the first listed among equals)."""
        counts = self.partition_counts()
        return min(self.log_dirs, key=lambda log_dir: counts[log_dir])

    def get_or_create_log(self, topic_partition: TopicPartition, now_ms: int, topic_id: uuid.UUID | None = None,
                          config: LogConfig | None = None) -> Log:
        with self.lock:
            log = self.logs.get(topic_partition)
            if log is None:
                if config is not None:
                    self.topic_configs[topic_partition.topic] = config
                log_dir = self.preferred_log_dirs.pop(topic_partition, None) or self.next_log_dir()
                directory = os.path.join(log_dir, log_dir_name(topic_partition))
                log = Log.open(directory, self.config_for(topic_partition.topic), now_ms=now_ms,
                               deletion_queue=self.deletion_queue,
                               producer_id_expiration_ms=self.producer_id_expiration_ms)
                self.logs[topic_partition] = log
                logger.debug("Created log for partition %s in %s", topic_partition, directory)
        if topic_id is not None:
            # Outside the lock: its fsyncs (file and folder) are most of a new log's cost, and logs created
            # concurrently share the journal commits instead of queueing for the lock one fsync at a time.
            log.partition_metadata.write(topic_id)
        return log

    def delete_log(self, topic_partition: TopicPartition, now_ms: int) -> bool:
        """Topic deletion: stop cleaning it, rename the folder `<topic>-<partition>.<id>-delete` now, remove it
        after file.delete.delay.ms (a restart in between removes it at startup)."""
        with self.lock:
            log = self.logs.get(topic_partition)
            if log is None:
                return False
            self._remove_log(log, log_delete_dir_name(topic_partition))
            delay = log.config.file_delete_delay_ms
            if delay > 0:
                self.deletion_queue.schedule(now_ms + delay, log.delete)
            else:
                log.delete()
            return True

    def mark_stray(self, topic_partition: TopicPartition) -> str | None:
        """Set aside a log the metadata has no place for (its topic deleted, or re-created with a new id, while
        this broker was down): stop serving it and rename its folder `<topic>-<partition>.<id>-stray`, where it
        stays, its data intact, until the operator removes it (startup skips such folders). Returns the new
        folder, None if there was no such log."""
        with self.lock:
            log = self.logs.get(topic_partition)
            if log is None:
                return None
            old_dir = log.dir
            self._remove_log(log, log_stray_dir_name(topic_partition))
            log.close()
        logger.warning("Log in %s marked stray and renamed to %s", old_dir, log.dir)
        return log.dir

    def _remove_log(self, log: Log, new_dir_name: str) -> None:
        """Under the lock: stop managing a log (its cleaning aborted, its cleaner checkpoint dropped) and rename
        its folder `new_dir_name` in the same log dir; the checkpoints no longer list it."""
        topic_partition = log.topic_partition
        self.cleaner_manager.abort_and_pause_cleaning(topic_partition)
        try:
            del self.logs[topic_partition]
            log_dir = os.path.dirname(log.dir)
            log.rename_dir(os.path.join(log_dir, new_dir_name))
            self.cleaner_manager.remove_partition(log_dir, topic_partition)
            self._write_checkpoints()
        finally:
            self.cleaner_manager.resume_cleaning(topic_partition)

    def truncate_to(self, topic_partition: TopicPartition, target_offset: int, now_ms: int) -> bool:
        """Truncate a log to `target_offset` with its cleaning paused (a running one aborted and waited for), and
        its cleaner checkpoint lowered to the new end; returns whether anything was removed."""
        log = self._existing_log(topic_partition)
        self.cleaner_manager.abort_and_pause_cleaning(topic_partition)
        try:
            truncated = log.truncate_to(target_offset, now_ms)
            if truncated:
                self.cleaner_manager.maybe_truncate_checkpoint(os.path.dirname(log.dir), topic_partition,
                                                               log.log_end_offset)
            return truncated
        finally:
            self.cleaner_manager.resume_cleaning(topic_partition)

    def truncate_fully_and_start_at(self, topic_partition: TopicPartition, new_offset: int, now_ms: int) -> None:
        """Empty a log and restart it at `new_offset` (a follower far behind its leader's log start), cleaning
        paused meanwhile; the cleaner checkpoint restarts there too."""
        log = self._existing_log(topic_partition)
        self.cleaner_manager.abort_and_pause_cleaning(topic_partition)
        try:
            log.truncate_fully_and_start_at(new_offset, now_ms)
            self.cleaner_manager.remove_partition(os.path.dirname(log.dir), topic_partition)
        finally:
            self.cleaner_manager.resume_cleaning(topic_partition)

    def check_destination_log_dir(self, log_dir: str) -> str:
        """The absolute path of a move's destination, if it is one of this broker's log dirs (else
        LogDirNotFoundError) and still there (else KafkaStorageError)."""
        destination = os.path.abspath(log_dir)
        if destination not in self.log_dirs:
            raise LogDirNotFoundError(f"Log dir {log_dir} is not found in the config.")
        if not os.path.isdir(destination):
            raise KafkaStorageError(f"Log dir {log_dir} is offline")
        return destination

    def prefer_log_dir(self, topic_partition: TopicPartition, log_dir: str) -> None:
        """AlterReplicaLogDirs for a partition with no log here yet: create its log in `log_dir` (one of this
        broker's, checked by check_destination_log_dir) when it comes, instead of the dir with the fewest."""
        with self.lock:
            if topic_partition not in self.logs:
                self.preferred_log_dirs[topic_partition] = os.path.abspath(log_dir)

    def move_log(self, topic_partition: TopicPartition, log_dir: str, now_ms: int) -> bool:
        """Move a partition's log into another log dir while it keeps serving (blocking: run it in an executor).
        Returns False when there is nothing to do (already there, or already moving). A failure leaves the log
        where it was and removes the partial copy (KafkaStorageError)."""
        destination = self.check_destination_log_dir(log_dir)
        with self.lock:
            log = self._existing_log(topic_partition)
            source = os.path.dirname(log.dir)
            if source == destination or topic_partition in self.future_dirs:
                return False
            future_directory = os.path.join(destination, log_future_dir_name(topic_partition))
            self.future_dirs[topic_partition] = future_directory
        self.cleaner_manager.abort_and_pause_cleaning(topic_partition)
        try:
            copy = log.start_copy(future_directory)
            copy.copy_closed_segments(log.dir, self._moves_aborted)
            with self.lock:
                if self.logs.get(topic_partition) is not log:
                    raise KafkaStorageError(f"The log of {topic_partition} was deleted while it was being moved")
                cleaned_up_to = self.cleaner_manager.checkpointed_offset(log)
                retired = os.path.join(source, log_delete_dir_name(topic_partition))
                old_fds = log.swap_in_copy(copy, os.path.join(destination, log_dir_name(topic_partition)), retired)
                self.cleaner_manager.update_checkpoint(source, topic_partition, None)
                if cleaned_up_to is not None:
                    self.cleaner_manager.update_checkpoint(destination, topic_partition, cleaned_up_to)
                self._write_checkpoints()
        except (OSError, InterruptedError) as error:
            shutil.rmtree(future_directory, ignore_errors=True)
            raise KafkaStorageError(f"Moving the log of {topic_partition} to {destination} failed: {error}") from error
        except KafkaStorageError:
            shutil.rmtree(future_directory, ignore_errors=True)
            raise
        finally:
            self.cleaner_manager.resume_cleaning(topic_partition)
            with self.lock:
                self.future_dirs.pop(topic_partition, None)

        def remove_retired() -> None:
            for fd in old_fds:
                os.close(fd)
            shutil.rmtree(retired, ignore_errors=True)

        self.deletion_queue.schedule(now_ms + log.config.file_delete_delay_ms, remove_retired)
        logger.info("Moved the log of %s from %s to %s", topic_partition, source, destination)
        return True

    def future_log_sizes(self) -> dict[TopicPartition, tuple[str, int]]:
        """The partitions being moved: the log dir each goes to and the bytes copied there so far."""
        with self.lock:
            moving = dict(self.future_dirs)
        sizes = {}
        for topic_partition, future_directory in moving.items():
            try:
                size = sum(entry.stat().st_size for entry in os.scandir(future_directory))
            except OSError:  # not created yet, or just swapped in
                size = 0
            sizes[topic_partition] = (os.path.dirname(future_directory), size)
        return sizes

    def abort_log_dir_moves(self) -> None:
        """Shutdown: copies in progress stop at their next file and fail."""
        self._moves_aborted.set()

    def _existing_log(self, topic_partition: TopicPartition) -> Log:
        log = self.logs.get(topic_partition)
        if log is None:
            raise KafkaStorageError(f"No log for {topic_partition} on this broker")
        return log

    # -- periodic work -------------------------------------------------------------------------------------------

    def cleanup_logs(self, now_ms: int) -> int:
        """Retention on every log (delete policy; compacted-only logs only lose what is below their start)."""
        deleted = 0
        for log in self.all_logs():
            deleted += log.delete_old_segments(now_ms)
        return deleted

    def flush_dirty_logs(self, now_ms: int) -> None:
        for log in self.all_logs():
            if not log.closed:
                log.maybe_flush(now_ms)

    def checkpoint_log_recovery_offsets(self) -> None:
        self._write_checkpoints()

    def _logs_by_dir(self) -> dict[str, dict[TopicPartition, Log]]:
        by_dir: dict[str, dict[TopicPartition, Log]] = {log_dir: {} for log_dir in self.log_dirs}
        for topic_partition, log in self.logs.items():
            by_dir.setdefault(os.path.dirname(log.dir), {})[topic_partition] = log
        return by_dir

    def _write_checkpoints(self) -> None:
        for log_dir, logs in self._logs_by_dir().items():
            if log_dir not in self.log_dirs:
                continue
            OffsetCheckpointFile(os.path.join(log_dir, RECOVERY_POINT_CHECKPOINT_FILE)).write(
                {tp: log.recovery_point for tp, log in logs.items()})
            OffsetCheckpointFile(os.path.join(log_dir, LOG_START_OFFSET_CHECKPOINT_FILE)).write(
                {tp: log.log_start_offset for tp, log in logs.items()
                 if log.segments.first_segment is not None
                 and log.log_start_offset > log.segments.first_segment.base_offset})
            OffsetCheckpointFile(os.path.join(log_dir, REPLICATION_CHECKPOINT_FILE)).write(
                {tp: log.high_watermark for tp, log in logs.items()})

    def tick(self, now_ms: int) -> int:
        """Run the periodic tasks that are due; returns when the next one is."""
        with self.lock:
            if now_ms >= self._next_flush_ms:
                self.flush_dirty_logs(now_ms)
                self._next_flush_ms = now_ms + self.flush_check_interval_ms
            if now_ms >= self._next_retention_ms:
                self.cleanup_logs(now_ms)
                self._next_retention_ms = now_ms + self.retention_check_interval_ms
            if now_ms >= self._next_checkpoint_ms:
                self._write_checkpoints()
                self._next_checkpoint_ms = now_ms + self.offset_checkpoint_interval_ms
            if now_ms >= self._next_producer_expiration_ms:
                for log in self.all_logs():
                    with log.lock:
                        log.producer_state.remove_expired_producers(now_ms)
                self._next_producer_expiration_ms = now_ms + DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_INTERVAL_MS
            self.deletion_queue.run_due(now_ms)
            return min(self._next_flush_ms, self._next_retention_ms, self._next_checkpoint_ms,
                       self._next_producer_expiration_ms)

    # -- shutdown ----------------------------------------------------------------------------------------------------

    def shutdown(self, broker_epoch: int = -1) -> None:
        """Clean shutdown: stop the cleaner, flush and close every log, write checkpoints, leave the clean-shutdown
        marker."""
        with self._cleaner_lock:
            if self.cleaner is not None:
                self.cleaner.shutdown()
            self.cleaner = None
            self._cleaner_stopped = True  # a reconfiguration from now on starts none
        with self.lock:
            for log in self.all_logs():
                log.flush()
                log.close()
            self._write_checkpoints()
            self.deletion_queue.run_all()
            # Kafka's CleanShutdownFileHandler content, which its brokers read back as their previous broker epoch.
            marker = json.dumps({"version": 0, "brokerEpoch": broker_epoch}, separators=(",", ":")).encode("utf-8")
            for log_dir in self.log_dirs:
                atomic_write(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE), marker)
            self._started = False
