"""Log: one partition's log — its segments, its offsets, appends, reads, rolls, truncation and retention.

The offsets (Kafka's UnifiedLog vocabulary):
- log_start_offset: the first offset a consumer may read. Moves forward by retention, DeleteRecords and
  truncate_fully_and_start_at; never backwards except by that last one.
- log_end_offset: the offset the next appended record gets.
- recovery_point: everything before it is fsynced; after a crash only segments from here on are re-scanned.
- high_watermark: set by replication (everything below it is on every in-sync replica); reads by consumers stop
  there. last_stable_offset: the high watermark or the first offset of the oldest open transaction, if lower;
  READ_COMMITTED reads stop there.

A leader's append is validated and gets its offsets here, from the log end and under the log's lock, by the
LogValidator the log's config calls for (as Kafka's UnifiedLog.appendAsLeader); a follower's keeps the offsets its
leader assigned, which must not go back. Both then apply the idempotence and transaction rules, roll a new segment
when needed and write. All methods are synchronous and take the time from the caller (`now_ms`), so the broker runs
them in an executor and tests drive them with a manual clock. A re-entrant lock, taken by the methods themselves,
serialises mutations and makes each method's reads consistent; callers never hold it.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import random
import shutil
import threading
from collections import deque
from collections.abc import Callable, Mapping
from types import MappingProxyType

from kfk.common.constants import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_PENDING_UPLOAD_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
)
from kfk.config import LogConfig
from kfk.errors import (
    CorruptRecordError,
    KafkaError,
    InvalidTxnStateError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
)
from kfk.records import MAGIC_VALUE_V2, NO_PRODUCER_ID, NO_TIMESTAMP, iter_batches
from kfk.records.batch import TIMESTAMP_TYPE_MASK
from kfk.storage.fetch_data_info import (
    FetchDataInfo,
    FetchIsolation,
    LogOffsetMetadata,
    LogOffsetSnapshot,
    TimestampAndOffset,
)
from kfk.storage.file_records import Batch
from kfk.storage.leader_epoch import LeaderEpochFileCache
from kfk.storage.log_dir_move import ReplicaCopy
from kfk.storage.log_files import (
    DELETED_FILE_SUFFIX,
    LEADER_EPOCH_CHECKPOINT_FILE,
    log_file,
    offset_index_file,
    parse_topic_partition_name,
    time_index_file,
    transaction_index_file,
)
from kfk.storage.log_loader import LogLoader, open_segment, replay_producer_state
from kfk.storage.log_segments import LogSegments
from kfk.storage.log_validator import LogAppendInfo, LogValidator
from kfk.storage.partition_metadata import PartitionMetadataFile
from kfk.storage.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS,
    AppendOrigin,
    BatchMetadata,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateEntry,
    ProducerStateManager,
)
from kfk.storage.segment import LogSegment
from kfk.storage.transaction_index import AbortedTxn

logger = logging.getLogger(__name__)


#: What an append without producer ids changes in the producer state: nothing (shared, read-only).
_NO_PRODUCER_UPDATES: Mapping[int, ProducerAppendInfo] = MappingProxyType({})
_NO_COMPLETED_TXNS: tuple[CompletedTxn, ...] = ()


class VerificationGuard:
    """The token of one transaction verification (see Log.start_transaction_verification): compared by identity."""

    __slots__ = ()


#: The guard of a producer whose transaction is already open on the partition: nothing to verify.
ONGOING_TRANSACTION = VerificationGuard()


class UnexpectedAppendOffsetError(KafkaError):
    """A follower append whose first offset is below the log end (a leader's offsets are assigned, never checked)."""


class SegmentDeletionQueue:
    """Segments renamed `.deleted` wait here for `file.delete.delay.ms` before their files are removed, so that
    a read that already holds a region of them (a fetch in flight) can finish."""

    def __init__(self) -> None:
        self._pending: list[tuple[int, Callable[[], None]]] = []
        self._lock = threading.Lock()

    def schedule(self, due_ms: int, delete: Callable[[], None]) -> None:
        with self._lock:
            self._pending.append((due_ms, delete))

    def run_due(self, now_ms: int) -> int:
        with self._lock:
            due = [item for item in self._pending if item[0] <= now_ms]
            self._pending = [item for item in self._pending if item[0] > now_ms]
        for _, delete in due:
            delete()
        return len(due)

    def run_all(self) -> int:
        with self._lock:
            due, self._pending = self._pending, []
        for _, delete in due:
            delete()
        return len(due)

    def __len__(self) -> int:
        return len(self._pending)


class Log:
    def __init__(self, directory: str, config: LogConfig, segments: LogSegments, log_start_offset: int,
                 recovery_point: int, log_end_offset: int, leader_epoch_cache: LeaderEpochFileCache,
                 producer_state: ProducerStateManager, deletion_queue: SegmentDeletionQueue, now_ms: int) -> None:
        self.dir = directory
        self.topic_partition = parse_topic_partition_name(os.path.basename(directory))
        self.config = config
        self.segments = segments
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self.leader_epoch_cache = leader_epoch_cache
        self.producer_state = producer_state
        self.deletion_queue = deletion_queue
        self.lock = threading.RLock()
        #: The validators of leader appends by origin, built from `config` when first needed.
        self._validators: dict[AppendOrigin, LogValidator] = {}
        #: The latest transaction verification of each producer, until its next marker (KIP-890 part 1).
        self._verification_guards: dict[int, VerificationGuard] = {}
        self.last_flush_ms = now_ms
        self._log_end_offset = log_end_offset
        self._high_watermark = log_start_offset
        self._high_watermark_metadata: LogOffsetMetadata | None = None
        self._flush_pending_upto: int | None = None
        self.partition_metadata = PartitionMetadataFile(directory)
        self.closed = False
        self.recovered_segments = 0
        self.truncations = 0  # how often the log was truncated: a copy into another log dir must start over then

    # -- opening -------------------------------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: str, config: LogConfig, *, now_ms: int, recovery_point: int = 0,
             log_start_offset: int = 0, had_clean_shutdown: bool = False,
             deletion_queue: SegmentDeletionQueue | None = None,
             producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS) -> Log:
        """Open (or create) the partition folder `<log dir>/<topic>-<partition>` and load it (see LogLoader)."""
        os.makedirs(directory, exist_ok=True)
        topic_partition = str(parse_topic_partition_name(os.path.basename(directory)))
        leader_epoch_cache = LeaderEpochFileCache(os.path.join(directory, LEADER_EPOCH_CHECKPOINT_FILE))
        producer_state = ProducerStateManager(topic_partition, directory, producer_id_expiration_ms)
        loader = LogLoader(directory, topic_partition, config, now_ms, had_clean_shutdown, log_start_offset,
                           recovery_point, leader_epoch_cache, producer_state)
        offsets = loader.load()
        log = cls(directory, config, loader.segments, offsets.log_start_offset, offsets.recovery_point,
                  offsets.log_end_offset, leader_epoch_cache, producer_state,
                  deletion_queue if deletion_queue is not None else SegmentDeletionQueue(), now_ms)
        log.recovered_segments = loader.recovered_segments
        return log

    # -- offsets ---------------------------------------------------------------------------------------------------

    @property
    def active_segment(self) -> LogSegment:
        segment = self.segments.last_segment
        assert segment is not None
        return segment

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        active = self.active_segment
        return LogOffsetMetadata(self._log_end_offset, active.base_offset, active.size)

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    def maybe_increment_high_watermark(self, high_watermark: int) -> bool:
        """A leader's high watermark only moves forward: set it if `high_watermark` is above it (clamped to the
        log end). Returns whether it moved."""
        with self.lock:
            if high_watermark <= self._high_watermark:
                return False
            self.update_high_watermark(high_watermark)
            return True

    def fetch_offset_snapshot(self) -> LogOffsetSnapshot:
        """The log start, log end, high watermark and last stable offset, read together."""
        with self.lock:
            return LogOffsetSnapshot(self.log_start_offset, self._log_end_offset, self._high_watermark,
                                     self.last_stable_offset)

    def update_high_watermark(self, high_watermark: int) -> int:
        """Set the high watermark (clamped to [log_start_offset, log_end_offset]); returns the value set."""
        with self.lock:
            new_value = min(max(high_watermark, self.log_start_offset), self._log_end_offset)
            self._high_watermark = new_value
            self._high_watermark_metadata = None
            self.producer_state.on_high_watermark_updated(new_value)
            return new_value

    def _offset_metadata(self, offset: int) -> LogOffsetMetadata:
        """An offset with the segment and position of its batch (the log end if it is the end)."""
        if offset >= self._log_end_offset:
            return self.log_end_offset_metadata
        segment = self.segments.floor_segment(offset)
        while segment is not None:
            found = segment.translate_offset(offset)
            if found is not None:
                return LogOffsetMetadata(offset, segment.base_offset, found.position)
            segment = self.segments.higher_segment(segment.base_offset)
        return self.log_end_offset_metadata

    def on_segments_replaced(self) -> None:
        """The cleaner swapped cleaned segments in (under the lock): a cached position, the high watermark's, may
        point into a replaced file, so it is looked up again when next needed."""
        with self.lock:
            self._high_watermark_metadata = None

    def _high_watermark_offset_metadata(self) -> LogOffsetMetadata:
        if self._high_watermark_metadata is None:
            self._high_watermark_metadata = self._offset_metadata(self._high_watermark)
        return self._high_watermark_metadata

    def active_producers(self) -> list[ProducerStateEntry]:
        """A copy of the producer state's entries (DescribeProducers), taken under the append lock so that an append
        running in an executor cannot change the table while it is read."""
        with self.lock:
            return [dataclasses.replace(entry, batch_metadata=deque(entry.batch_metadata))
                    for entry in self.producer_state.producers.values()]

    def _has_ongoing_transaction(self, producer_id: int, producer_epoch: int | None = None) -> bool:
        """Has this producer (at this epoch, if given) a transaction open here: a transactional batch since its last
        marker? The caller holds the lock."""
        entry = self.producer_state.last_entry(producer_id)
        return entry is not None and entry.current_txn_first_offset is not None \
            and (producer_epoch is None or entry.producer_epoch == producer_epoch)

    def start_transaction_verification(self, producer_id: int, producer_epoch: int) -> VerificationGuard:
        """Before a transactional produce asks the coordinator (KIP-890 part 1): a guard that the append must present.
        A producer whose transaction is already open here needs no question (ONGOING_TRANSACTION); otherwise a new
        guard, replaced by the next verification and dropped by the producer's next marker, so that an append
        verified before a marker that landed while the question was out is refused instead of opening a transaction
        no coordinator knows (Kafka's VerificationGuard)."""
        with self.lock:
            if self._has_ongoing_transaction(producer_id, producer_epoch):
                return ONGOING_TRANSACTION
            guard = VerificationGuard()
            self._verification_guards[producer_id] = guard
            return guard

    def _check_verification(self, batches: list[Batch], guard: VerificationGuard) -> None:
        """A transactional batch that would open a transaction needs the guard its verification started with."""
        for batch in batches:
            if batch.is_transactional and not batch.is_control and batch.has_producer_id \
                    and not self._has_ongoing_transaction(batch.producer_id) \
                    and self._verification_guards.get(batch.producer_id) is not guard:
                raise InvalidTxnStateError(
                    f"The transaction of producer {batch.producer_id} on {self.topic_partition} was not verified "
                    "with its coordinator, or ended while it was verified")

    @property
    def first_unstable_offset(self) -> int | None:
        return self.producer_state.first_unstable_offset()

    @property
    def last_stable_offset(self) -> int:
        first_unstable = self.producer_state.first_unstable_offset()
        if first_unstable is not None and first_unstable < self._high_watermark:
            return first_unstable
        return self._high_watermark

    @property
    def size(self) -> int:
        return self.segments.size_in_bytes()

    @property
    def number_of_segments(self) -> int:
        return len(self.segments)

    @property
    def unflushed_messages(self) -> int:
        return self._log_end_offset - self.recovery_point

    def latest_epoch(self) -> int | None:
        return self.leader_epoch_cache.latest_epoch

    def end_offset_for_epoch(self, leader_epoch: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (epoch, end offset) as the leader answers it."""
        with self.lock:
            return self.leader_epoch_cache.end_offset_for(leader_epoch, self._log_end_offset)

    def maybe_assign_epoch_start_offset(self, leader_epoch: int) -> int:
        """Becoming leader in `leader_epoch`: the epoch starts at the log end offset, which is returned (and
        recorded in the leader-epoch cache unless the epoch is unknown, -1)."""
        with self.lock:
            start_offset = self._log_end_offset
            if leader_epoch >= 0:
                self.leader_epoch_cache.assign(leader_epoch, start_offset)
            return start_offset

    # -- appends ---------------------------------------------------------------------------------------------------

    def append_as_leader(self, records: bytes | bytearray | memoryview, leader_epoch: int, now_ms: int,
                         origin: AppendOrigin = AppendOrigin.CLIENT,
                         verification_guard: VerificationGuard | None = None) -> LogAppendInfo:
        """A leader's append (Kafka's UnifiedLog.appendAsLeader): validate `records` as this log's config says
        (LogValidator: CRCs, sizes, compression, timestamps, keys; control batches only from a coordinator or the
        metadata log's leader), stamp them with offsets from `log_end_offset` and with `leader_epoch`, apply the
        idempotence/transaction rules and write, all under the log's lock, so the offsets assigned are the ones
        written. A writable buffer is edited in place. A retried idempotent batch is not written again and its earlier
        offsets are returned (`duplicate=True`); an empty message set (old produce versions allow one) writes nothing
        and returns offsets -1. With a `verification_guard` (transaction.partition.verification.enable), a
        transactional batch may open a transaction only with the guard start_transaction_verification gave."""
        with self.lock:
            self._check_open()
            validator = self._validators.get(origin)
            if validator is None:
                validator = LogValidator.for_config(self.config, origin, self.topic_partition)
                self._validators[origin] = validator
            info = validator.validate_and_assign_offsets(records, self._log_end_offset, now_ms, leader_epoch)
            info.log_start_offset = self.log_start_offset
            if info.valid_bytes == 0:
                return LogAppendInfo(-1, -1, log_start_offset=self.log_start_offset)
            self._check_segment_size(info.valid_bytes)
            batches: list[Batch] = info.batches  # type: ignore[assignment]  # set for every non-empty append
            if verification_guard is not None and info.has_producer_ids:
                self._check_verification(batches, verification_guard)
            updated, completed, duplicate = self._analyze_producer_state(batches, origin) if info.has_producer_ids \
                else (_NO_PRODUCER_UPDATES, _NO_COMPLETED_TXNS, None)
            if duplicate is not None:
                return LogAppendInfo(duplicate.first_offset, duplicate.last_offset,
                                     log_start_offset=self.log_start_offset, duplicate=True)
            # Every batch carries `leader_epoch` now (legacy ones were converted to v2): one cache entry at most.
            if leader_epoch >= 0:
                latest = self.leader_epoch_cache.latest_epoch
                if latest is None or leader_epoch > latest:
                    self.leader_epoch_cache.assign(leader_epoch, info.first_offset)
            self._write(info, updated, completed, now_ms)
            return info

    def append_as_follower(self, records: bytes | bytearray | memoryview, now_ms: int) -> LogAppendInfo:
        """Append batches copied from the leader, keeping its offsets (gaps allowed, e.g. from compaction).
        Every batch's CRC is checked; the first offset must not be below the log end offset."""
        with self.lock:
            self._check_open()
            info = self._analyze_follower_records(records)
            batches: list[Batch] = info.batches  # type: ignore[assignment]
            updated, completed, _ = self._analyze_producer_state(batches, AppendOrigin.REPLICATION) \
                if info.has_producer_ids else (_NO_PRODUCER_UPDATES, _NO_COMPLETED_TXNS, None)
            for batch in batches:
                if batch.magic >= MAGIC_VALUE_V2:
                    epoch = batch.partition_leader_epoch
                    if epoch >= 0:
                        latest = self.leader_epoch_cache.latest_epoch
                        if latest is None or epoch > latest:
                            self.leader_epoch_cache.assign(epoch, batch.base_offset)
                elif self.leader_epoch_cache.entries:
                    logger.warning("Clearing leader epoch cache of %s: a legacy batch was appended",
                                   self.topic_partition)
                    self.leader_epoch_cache.clear_and_flush()
            self._write(info, updated, completed, now_ms)
            return info

    def _analyze_follower_records(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        """One pass over a follower append's batch headers: offsets, timestamps and CRCs. The first offset must be
        at or after the log end (for a legacy wrapper, whose first offset is only known by decompressing, its last
        offset), and offsets must increase."""
        size = len(records)
        batches: list[Batch] = list(iter_batches(records))
        if not batches or batches[-1].position + batches[-1].size_in_bytes != size:
            raise CorruptRecordError(f"Append to {self.topic_partition} holds no batch or ends with an incomplete one")
        info = LogAppendInfo(-1, -1, validated_records=records, batches=batches,
                             log_start_offset=self.log_start_offset)
        previous_last_offset = -1
        for batch in batches:
            if batch.magic >= MAGIC_VALUE_V2:
                (base_offset, _, partition_leader_epoch, _, _, attributes, last_offset_delta, _, max_timestamp,
                 producer_id, _, _, _) = batch.validated_header()
                info.has_producer_ids = info.has_producer_ids or producer_id > NO_PRODUCER_ID
                last_offset = base_offset + last_offset_delta
                info.last_leader_epoch = partition_leader_epoch
                if attributes & TIMESTAMP_TYPE_MASK:
                    info.log_append_time = max_timestamp
            else:
                batch.validate()
                last_offset = base_offset = batch.last_offset
                max_timestamp = batch.max_timestamp
            if previous_last_offset < 0:
                info.first_offset = base_offset
                if base_offset < self._log_end_offset:
                    raise UnexpectedAppendOffsetError(
                        f"Unexpected offset in append to {self.topic_partition}. First offset {base_offset} "
                        f"does not continue the log, whose next offset is {self._log_end_offset}."
                    )
            elif last_offset <= previous_last_offset:
                raise CorruptRecordError(
                    f"Out of order offsets in the append to {self.topic_partition}: {last_offset} after "
                    f"{previous_last_offset}"
                )
            previous_last_offset = last_offset
            if max_timestamp > info.max_timestamp:
                info.max_timestamp = max_timestamp
                info.shallow_offset_of_max_timestamp = last_offset
        info.last_offset = previous_last_offset
        self._check_segment_size(size)
        return info

    def _check_segment_size(self, size: int) -> None:
        if size > self.config.segment_size:
            raise RecordBatchTooLargeError(
                f"Message batch size is {size} bytes in append to partition {self.topic_partition} which exceeds "
                f"the maximum configured segment size of {self.config.segment_size}."
            )

    def _write(self, info: LogAppendInfo, updated: Mapping[int, ProducerAppendInfo],
               completed: tuple[CompletedTxn, ...] | list[CompletedTxn], now_ms: int) -> None:
        """The part of an append shared by leader and follower, under the lock: roll if needed, write the
        records, move the log end, then the producer state and the transaction index."""
        records = info.validated_records
        segment = self._maybe_roll(len(records), info, now_ms)
        segment.append(info.last_offset, info.max_timestamp, info.shallow_offset_of_max_timestamp, records)
        self._log_end_offset = info.last_offset + 1
        for append_info in updated.values():
            self.producer_state.update(append_info)
        for completed_txn in completed:
            last_stable_offset = self.producer_state.last_stable_offset(completed_txn)
            segment.update_txn_index(completed_txn, last_stable_offset)
            self.producer_state.complete_txn(completed_txn)
            self._verification_guards.pop(completed_txn.producer_id, None)
        self.producer_state.update_map_end_offset(info.last_offset + 1)
        if self.unflushed_messages >= self.config.flush_messages:
            self.flush()

    def _analyze_producer_state(
        self, batches: list[Batch], origin: AppendOrigin
    ) -> tuple[dict[int, ProducerAppendInfo], list[CompletedTxn], BatchMetadata | None]:
        updated: dict[int, ProducerAppendInfo] = {}
        completed: list[CompletedTxn] = []
        for batch in batches:
            if not batch.has_producer_id:
                continue
            if origin is AppendOrigin.CLIENT:
                entry = self.producer_state.last_entry(batch.producer_id)
                duplicate = entry.find_duplicate_batch(batch) if entry is not None else None
                if duplicate is not None:
                    return updated, completed, duplicate
            append_info = updated.get(batch.producer_id)
            if append_info is None:
                append_info = self.producer_state.prepare_update(batch.producer_id, origin)
                updated[batch.producer_id] = append_info
            completed_txn = append_info.append(batch)
            if completed_txn is not None:
                completed.append(completed_txn)
        return updated, completed, None

    # -- rolling ---------------------------------------------------------------------------------------------------

    def _maybe_roll(self, messages_size: int, info: LogAppendInfo, now_ms: int) -> LogSegment:
        segment = self.active_segment
        if segment.should_roll(max_segment_bytes=self.config.segment_size, max_segment_ms=self.config.max_segment_ms,
                               messages_size=messages_size, max_timestamp_in_messages=info.max_timestamp,
                               max_offset_in_messages=info.last_offset, now_ms=now_ms):
            logger.debug("Rolling new log segment for %s (log_size = %d/%d)", self.topic_partition, segment.size,
                         self.config.segment_size)
            return self.roll(now_ms, info.first_offset)
        return segment

    def roll(self, now_ms: int, expected_next_offset: int | None = None) -> LogSegment:
        """Start a new active segment at max(expected_next_offset, log_end_offset). The old one is trimmed and
        flushed later (by `flush_rolled_segments`, run by the LogManager), as Kafka flushes it asynchronously."""
        with self.lock:
            new_offset = max(expected_next_offset or 0, self._log_end_offset)
            active = self.active_segment
            if new_offset in self.segments:
                if active.base_offset == new_offset and active.size == 0:
                    # Kafka deletes and re-creates the empty active segment here; keeping it is the same log.
                    logger.debug("Not rolling %s: the active segment at %d is empty", self.topic_partition,
                                 new_offset)
                    return active
                else:
                    raise KafkaStorageError(
                        f"Trying to roll a new log segment for topic partition {self.topic_partition} with start "
                        f"offset {new_offset} while it already exists."
                    )
            elif new_offset < active.base_offset:
                raise KafkaStorageError(
                    f"Trying to roll a new log segment for topic partition {self.topic_partition} with start offset "
                    f"{new_offset} lower than start offset of the active segment {active}"
                )
            else:
                for path in (log_file(self.dir, new_offset), offset_index_file(self.dir, new_offset),
                             time_index_file(self.dir, new_offset), transaction_index_file(self.dir, new_offset)):
                    if os.path.exists(path):
                        logger.warning("Newly rolled segment file %s already exists; deleting it first", path)
                        os.unlink(path)
                active.on_become_inactive_segment()
            segment = open_segment(self.dir, new_offset, self.config, now_ms, exists=False,
                                   jitter_ms=self._random_segment_jitter())
            self.segments.add(segment)
            self.producer_state.update_map_end_offset(new_offset)
            self.producer_state.take_snapshot()
            self._flush_pending_upto = new_offset
            return segment

    def _random_segment_jitter(self) -> int:
        jitter = self.config.segment_jitter_ms
        return 0 if jitter == 0 else random.randrange(min(jitter, self.config.segment_ms))

    # -- reads -----------------------------------------------------------------------------------------------------

    def read_with_offset_snapshot(self, start_offset: int, max_length: int, isolation: FetchIsolation,
                                  min_one_message: bool) -> tuple[LogOffsetSnapshot, FetchDataInfo]:
        """A fetch's read and the offsets it reports, under one lock: the data never runs past the high watermark
        reported with it."""
        with self.lock:
            return self.fetch_offset_snapshot(), self.read(start_offset, max_length, isolation, min_one_message)

    def read(self, start_offset: int, max_length: int, isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK,
             min_one_message: bool = True) -> FetchDataInfo:
        """Where the batches from `start_offset` are (at most `max_length` bytes, or the whole first batch with
        `min_one_message`), stopping at the bound of `isolation`. Raises OffsetOutOfRangeError outside
        [log_start_offset, log_end_offset]. Returns file regions only: nothing is read into memory."""
        with self.lock:
            self._check_open()
            if isolation is FetchIsolation.LOG_END:
                max_offset_metadata = self.log_end_offset_metadata
            elif isolation is FetchIsolation.HIGH_WATERMARK:
                max_offset_metadata = self._high_watermark_offset_metadata()
            else:
                max_offset_metadata = self._offset_metadata(self.last_stable_offset)
            include_aborted = isolation is FetchIsolation.TXN_COMMITTED
            if start_offset > self._log_end_offset or start_offset < self.log_start_offset:
                raise OffsetOutOfRangeError(
                    f"Received request for offset {start_offset} for partition {self.topic_partition}, but we only "
                    f"have log segments in the range {self.log_start_offset} to {self._log_end_offset}."
                )
            if start_offset >= max_offset_metadata.message_offset:
                metadata = (max_offset_metadata if start_offset == max_offset_metadata.message_offset
                            else self._offset_metadata(start_offset))
                return FetchDataInfo(metadata, aborted_transactions=[] if include_aborted else None)
            segment = self.segments.floor_segment(start_offset)
            while segment is not None:
                if segment.base_offset == max_offset_metadata.segment_base_offset:
                    max_position = max_offset_metadata.relative_position_in_segment
                else:
                    max_position = segment.size
                fetch_info = segment.read(start_offset, max_length, max_position, min_one_message)
                if fetch_info is not None:
                    if include_aborted:
                        return self._add_aborted_transactions(start_offset, segment, fetch_info)
                    return fetch_info
                segment = self.segments.higher_segment(segment.base_offset)
            return FetchDataInfo(self.log_end_offset_metadata, aborted_transactions=[] if include_aborted else None)

    def _add_aborted_transactions(self, start_offset: int, segment: LogSegment,
                                  fetch_info: FetchDataInfo) -> FetchDataInfo:
        fetch_size = fetch_info.records.length
        start_position = fetch_info.fetch_offset_metadata.relative_position_in_segment
        upper_bound = segment.fetch_upper_bound_offset(start_position, fetch_size)
        if upper_bound is None:
            next_segment = self.segments.higher_segment(segment.base_offset)
            upper_bound = next_segment.base_offset if next_segment is not None else self._log_end_offset
        aborted: list[AbortedTxn] = []
        for candidate in self.segments.values_from(segment.base_offset):
            result = candidate.collect_aborted_txns(start_offset, upper_bound)
            aborted.extend(result.aborted_transactions)
            if result.is_complete:
                break
        return dataclasses.replace(fetch_info, aborted_transactions=aborted)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound_offset): an abort is indexed in the segment
        of its marker, so the search goes on into later segments until an entry's LSO passes the bound."""
        with self.lock:
            aborted: list[AbortedTxn] = []
            for segment in self.segments.values_from(start_offset):
                result = segment.collect_aborted_txns(start_offset, upper_bound_offset)
                aborted.extend(result.aborted_transactions)
                if result.is_complete:
                    break
            return aborted

    def offset_for_timestamp(self, target_timestamp: int) -> TimestampAndOffset | None:
        """ListOffsets: the first offset whose record timestamp is >= target, or the sentinels' answers
        (EARLIEST -2, LATEST -1, MAX_TIMESTAMP -3, EARLIEST_LOCAL -4, LATEST_TIERED -5, EARLIEST_PENDING_UPLOAD -6:
        -1 for the last two, nothing being tiered). None if no record is that recent."""
        with self.lock:
            if target_timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
                return TimestampAndOffset(NO_TIMESTAMP, self.log_start_offset,
                                          self.leader_epoch_cache.epoch_for_offset(self.log_start_offset))
            if target_timestamp == LATEST_TIMESTAMP:
                return TimestampAndOffset(NO_TIMESTAMP, self._log_end_offset, self.leader_epoch_cache.latest_epoch)
            if target_timestamp in (LATEST_TIERED_TIMESTAMP, EARLIEST_PENDING_UPLOAD_TIMESTAMP):
                return TimestampAndOffset(NO_TIMESTAMP, -1, -1)
            if target_timestamp == MAX_TIMESTAMP:
                best: LogSegment | None = None
                for segment in self.segments:
                    if best is None or segment.max_timestamp_so_far > best.max_timestamp_so_far:
                        best = segment
                if best is None or best.max_timestamp_so_far < 0:
                    return None
                found = best.find_offset_by_timestamp(best.max_timestamp_so_far, self.log_start_offset)
                return found
            for segment in self.segments:
                if segment.largest_timestamp >= target_timestamp and segment.size > 0:
                    found = segment.find_offset_by_timestamp(target_timestamp, self.log_start_offset)
                    if found is not None:
                        return found
            return None

    def legacy_fetch_offsets_before(self, timestamp: int, max_num_offsets: int, now_ms: int) -> list[int]:
        """ListOffsets v0: up to `max_num_offsets` segment base offsets (and the log end, if the active segment
        holds data) from segments last modified at or before `timestamp`, newest first (LATEST: the log end first,
        EARLIEST: the log start only)."""
        with self.lock:
            segments = list(self.segments)
            offsets_and_times: list[tuple[int, float]] = []
            for segment in segments:
                try:
                    modified_ms = os.stat(segment.log.path).st_mtime * 1000
                except OSError:
                    modified_ms = 0
                offsets_and_times.append((max(segment.base_offset, self.log_start_offset), modified_ms))
            if segments and segments[-1].size > 0:
                offsets_and_times.append((self._log_end_offset, now_ms))
        if timestamp == LATEST_TIMESTAMP:
            start = len(offsets_and_times) - 1
        elif timestamp == EARLIEST_TIMESTAMP:
            start = 0
        else:
            start = len(offsets_and_times) - 1
            while start >= 0 and offsets_and_times[start][1] > timestamp:
                start -= 1
        count = min(max_num_offsets, start + 1)
        return sorted((offsets_and_times[start - j][0] for j in range(count)), reverse=True)

    # -- flushing --------------------------------------------------------------------------------------------------

    def flush(self, offset: int | None = None) -> None:
        """fsync the segments holding offsets below `offset` (default: everything) and move the recovery point."""
        with self.lock:
            target = self._log_end_offset if offset is None else min(offset, self._log_end_offset)
            if target <= self.recovery_point:
                return
            for segment in self.segments.values_from(self.recovery_point, target):
                segment.flush()
            self.recovery_point = target
            if self._flush_pending_upto is not None and self._flush_pending_upto <= target:
                self._flush_pending_upto = None

    def flush_rolled_segments(self) -> None:
        """Flush the segments behind the active one after a roll (Kafka schedules this right after rolling)."""
        with self.lock:
            if self._flush_pending_upto is not None:
                self.flush(self._flush_pending_upto)

    def maybe_flush(self, now_ms: int) -> bool:
        """flush.ms: fsync when data has waited that long since the last flush."""
        with self.lock:
            self.flush_rolled_segments()
            if self.unflushed_messages > 0 and now_ms - self.last_flush_ms >= self.config.flush_ms:
                self.flush()
                self.last_flush_ms = now_ms
                return True
            return False

    # -- truncation ------------------------------------------------------------------------------------------------

    def truncate_to(self, target_offset: int, now_ms: int) -> bool:
        """Follower truncation: remove every offset >= target_offset (a batch holding the target goes whole, and
        the log then ends before it). Returns whether anything was removed."""
        if target_offset < 0:
            raise ValueError(f"Cannot truncate partition {self.topic_partition} to a negative offset "
                             f"({target_offset}).")
        with self.lock:
            self._check_open()
            if target_offset >= self._log_end_offset:
                return False
            first = self.segments.first_segment
            assert first is not None
            if first.base_offset > target_offset:
                self.truncate_fully_and_start_at(target_offset, now_ms)
                return True
            to_delete = [segment for segment in self.segments if segment.base_offset > target_offset]
            self._remove_and_delete_segments(to_delete, now_ms, asynchronous=True)
            active = self.active_segment
            active.truncate_to(target_offset)
            # A batch straddling the target goes whole, so the log may end below it: the end offset is where the
            # data ends (Kafka sets it to the target and leaves a hole; re-fetching from the boundary is cleaner).
            new_end = min(target_offset, active.read_next_offset())
            self._log_end_offset = new_end
            self.recovery_point = min(self.recovery_point, new_end)
            self.leader_epoch_cache.truncate_from_end(new_end)
            self.log_start_offset = min(new_end, self.log_start_offset)
            self.truncations += 1
            self._rebuild_producer_state(now_ms)
            if self._high_watermark >= self._log_end_offset:
                self._high_watermark = self._log_end_offset
            self._high_watermark_metadata = None
            if self._flush_pending_upto is not None and self._flush_pending_upto > target_offset:
                self._flush_pending_upto = None
            return True

    def truncate_fully_and_start_at(self, new_offset: int, now_ms: int) -> None:
        """Delete everything and start empty at `new_offset` (a follower far behind a leader's log start)."""
        with self.lock:
            self._check_open()
            self.truncations += 1
            self._remove_and_delete_segments(list(self.segments), now_ms, asynchronous=True)
            self.segments.add(open_segment(self.dir, new_offset, self.config, now_ms, exists=False,
                                           jitter_ms=self._random_segment_jitter()))
            self._log_end_offset = new_offset
            self.leader_epoch_cache.clear_and_flush()
            self.producer_state.truncate_fully_and_start_at(new_offset)
            self.log_start_offset = new_offset
            self.recovery_point = new_offset
            self._high_watermark = new_offset
            self._high_watermark_metadata = None
            self._flush_pending_upto = None

    def _rebuild_producer_state(self, now_ms: int) -> None:
        self.producer_state.truncate_and_reload(self.log_start_offset, self._log_end_offset, now_ms)
        replay_producer_state(self.segments, self.producer_state, self._log_end_offset)

    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> bool:
        """DeleteRecords (and retention): move the log start forward; whole segments below it go at the next
        retention pass. Raises OffsetOutOfRangeError beyond the high watermark."""
        with self.lock:
            self._check_open()
            if new_log_start_offset > self._high_watermark:
                raise OffsetOutOfRangeError(
                    f"Cannot increment the log start offset to {new_log_start_offset} of partition "
                    f"{self.topic_partition} since it is larger than the high watermark {self._high_watermark}"
                )
            if new_log_start_offset <= self.log_start_offset:
                return False
            self.log_start_offset = new_log_start_offset
            self.leader_epoch_cache.truncate_from_start(new_log_start_offset)
            self.producer_state.on_log_start_offset_incremented(new_log_start_offset)
            return True

    # -- retention -------------------------------------------------------------------------------------------------

    def delete_old_segments(self, now_ms: int) -> int:
        """Retention: delete segments past retention.ms or beyond retention.bytes (delete policy) and those
        wholly below the log start offset. Only segments below the high watermark go; if every segment qualifies
        a new one is rolled first, so the active segment is never the one deleted. Returns segments deleted."""
        with self.lock:
            if self.closed:
                return 0
            deleted = 0
            if self.config.delete:
                deleted += self._delete_retention_ms_breached(now_ms)
                deleted += self._delete_retention_size_breached(now_ms)
            deleted += self._delete_segments(
                lambda segment, following: following is not None and following.base_offset <= self.log_start_offset,
                now_ms,
            )
            return deleted

    def _delete_retention_ms_breached(self, now_ms: int) -> int:
        retention_ms = self.config.retention_ms
        if retention_ms < 0:
            return 0
        return self._delete_segments(lambda segment, _: now_ms - segment.largest_timestamp > retention_ms, now_ms)

    def _delete_retention_size_breached(self, now_ms: int) -> int:
        retention_bytes = self.config.retention_bytes
        if retention_bytes < 0:
            return 0
        excess = self.size - retention_bytes
        if excess <= 0:
            return 0

        def should_delete(segment: LogSegment, _: LogSegment | None) -> bool:
            nonlocal excess
            if excess - segment.size >= 0:
                excess -= segment.size
                return True
            return False

        return self._delete_segments(should_delete, now_ms)

    def _delete_segments(self, predicate: Callable[[LogSegment, LogSegment | None], bool], now_ms: int) -> int:
        deletable: list[LogSegment] = []
        segments = list(self.segments)
        for index, segment in enumerate(segments):
            following = segments[index + 1] if index + 1 < len(segments) else None
            upper_bound = following.base_offset if following is not None else self._log_end_offset
            is_last_and_empty = following is None and segment.size == 0
            if predicate(segment, following) and not is_last_and_empty and self._high_watermark >= upper_bound:
                deletable.append(segment)
            else:
                break
        if not deletable:
            return 0
        if len(deletable) == len(segments):
            self.roll(now_ms)
        self._remove_and_delete_segments(deletable, now_ms, asynchronous=True)
        new_start = self.segments.first_segment.base_offset if self.segments.first_segment else self._log_end_offset
        if new_start > self.log_start_offset:
            self.log_start_offset = new_start
            self.leader_epoch_cache.truncate_from_start(new_start)
            self.producer_state.on_log_start_offset_incremented(new_start)
        return len(deletable)

    def _remove_and_delete_segments(self, segments: list[LogSegment], now_ms: int, asynchronous: bool) -> None:
        """Take segments out of the log, rename their files `.deleted` (with their producer snapshots) and
        remove them now or after file.delete.delay.ms."""
        snapshot_paths: list[str] = []
        for segment in segments:
            self.segments.remove(segment.base_offset)
            segment.change_file_suffixes("", DELETED_FILE_SUFFIX)
            snapshot = self.producer_state.remove_and_mark_snapshot_for_deletion(segment.base_offset)
            if snapshot is not None:
                snapshot_paths.append(snapshot)

        def delete_files() -> None:
            for segment in segments:
                logger.info("Deleting segment files %s", segment.log.path)
                segment.delete_if_exists()
            for path in snapshot_paths:
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass

        if asynchronous and self.config.file_delete_delay_ms > 0:
            self.deletion_queue.schedule(now_ms + self.config.file_delete_delay_ms, delete_files)
        else:
            delete_files()
        self._high_watermark_metadata = None

    # -- configuration and lifecycle -------------------------------------------------------------------------------

    def update_config(self, config: LogConfig) -> None:
        with self.lock:
            self.config = config
            self._validators = {}

    def _check_open(self) -> None:
        if self.closed:
            raise KafkaStorageError(f"The log of {self.topic_partition} is closed")

    def close(self) -> None:
        """Clean close: producer snapshot at the log end offset, indexes trimmed, files closed."""
        with self.lock:
            if self.closed:
                return
            self.producer_state.update_map_end_offset(self._log_end_offset)
            self.producer_state.take_snapshot()
            for segment in self.segments:
                segment.close()
            self.closed = True

    def close_handlers(self) -> None:
        """Close file handles without writing anything (the disk may be failing)."""
        with self.lock:
            for segment in self.segments:
                segment.close_handlers()
            self.closed = True

    def delete(self) -> None:
        """Remove the whole partition folder (topic deletion, after the LogManager renamed it `-delete`)."""
        with self.lock:
            for segment in self.segments.clear():
                segment.close_handlers()
            self.closed = True
            shutil.rmtree(self.dir, ignore_errors=True)

    def rename_dir(self, new_directory: str) -> None:
        """Move the partition folder (e.g. to its `-delete` name); open files follow the rename."""
        with self.lock:
            os.replace(self.dir, new_directory)
            for segment in self.segments:
                segment.update_parent_dir(new_directory)
            self._moved_to(new_directory)

    def _moved_to(self, new_directory: str) -> None:
        self.dir = new_directory
        self.leader_epoch_cache.checkpoint.path = os.path.join(new_directory, LEADER_EPOCH_CHECKPOINT_FILE)
        self.producer_state.update_parent_dir(new_directory)
        self.partition_metadata = PartitionMetadataFile(new_directory)

    # -- moving to another log dir ---------------------------------------------------------------------------------

    def start_copy(self, future_directory: str) -> ReplicaCopy:
        """A copy of this log into `future_directory` (see kfk/storage/log_dir_move.py), its first step to be run
        without the lock."""
        with self.lock:
            self._check_open()
            return ReplicaCopy(future_directory, self.active_segment.base_offset, self.truncations)

    def swap_in_copy(self, copy: ReplicaCopy, directory: str, retired_directory: str) -> list[int]:
        """The move's last step, under the lock (appends and reads wait): flush, complete the copy, rename it
        `directory` and the old folder `retired_directory`, and reopen every file in the new folder. This object
        stays the partition's log, so its offsets, producer state, leader epoch cache and high watermark are kept.
        Returns the old segments' descriptors (see LogSegment.move_to)."""
        with self.lock:
            self._check_open()
            self.flush()
            copy.finish(self.dir, recopy_all=self.truncations != copy.truncations)
            os.replace(copy.future_directory, directory)
            os.replace(self.dir, retired_directory)
            old_fds = [segment.move_to(directory) for segment in self.segments]
            self._moved_to(directory)
            return old_fds

    def __repr__(self) -> str:
        return (f"Log(dir={self.dir}, log_start_offset={self.log_start_offset}, "
                f"log_end_offset={self._log_end_offset}, segments={len(self.segments)})")

