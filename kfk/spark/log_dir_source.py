"""Partitions and records straight from a stopped broker's log dir(s), through kfk.storage, read-only.

For disaster recovery and bulk history: no broker, no network, the segment files as Kafka laid them out
(`<log dir>/<topic>-<partition>/<base offset>.log`, `.index`, `.txnindex`). Nothing is written: segments are
opened O_RDONLY (FileRecords on a read-only descriptor), offset indexes are mapped read-only and only used as a
hint where a forward scan of batch headers may start, and no recovery runs (a broker does that at its next start).

The edges of a partition, as its broker would report them:
- log start offset: the log-start-offset-checkpoint entry if there is one (records deleted by DeleteRecords or
  retention inside the first segment), else the first segment's base offset;
- end: the log end offset of the complete batches on disk; after a clean shutdown, capped by the high watermark the
  broker checkpointed (replication-offset-checkpoint), so that an unreplicated tail a follower may still truncate is
  left out; under read_committed, the first offset of a transaction still open at that point (last stable offset,
  found by a header-only scan: a transactional batch opens its producer's transaction, a control batch closes it).

Records are decoded by the consumer's own CompletedFetch (CRC checks, control batches skipped, aborted transactions
from the segments' .txnindex dropped under read_committed): offline rows are exactly what a fetch would return.
A live broker would move the files under the reader, so a log dir whose kfk.pid names a running process is refused.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property

import pyarrow as pa

from kfk.client.consumer.fetcher import CompletedFetch
from kfk.common.internal_topics import CLUSTER_METADATA_TOPIC_NAME
from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode, InvalidConfigurationError, KafkaStorageError, UnknownTopicOrPartitionError
from kfk.records import RecordBatch
from kfk.spark.arrow_rows import RecordBatchBuilder
from kfk.spark.offsets import DataLossError, OffsetRange
from kfk.spark.options import SourceOptions, TopicSelection
from kfk.storage.checkpoint import OffsetCheckpointFile
from kfk.storage.file_records import FileRecords
from kfk.storage.index import OffsetIndex
from kfk.storage.log_files import (
    CLEAN_SHUTDOWN_FILE,
    DELETE_DIR_SUFFIX,
    FUTURE_DIR_SUFFIX,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    REPLICATION_CHECKPOINT_FILE,
    STRAY_DIR_SUFFIX,
    SWAP_FILE_SUFFIX,
    log_file,
    offset_from_file_name,
    offset_index_file,
    parse_topic_partition_name,
    transaction_index_file,
)
from kfk.storage.transaction_index import TransactionIndex

__all__ = ["LogDirCatalog", "read_log_dir_range", "check_broker_stopped"]

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
CHUNK_BYTES = 4 * 1024 * 1024
"""Whole batches are read and decoded this many bytes at a time."""
_SEGMENT_LOG = re.compile(r"^\d{20}\.log$")


def log_dirs(options: SourceOptions) -> list[str]:
    assert options.log_dir is not None
    return [path.strip() for path in options.log_dir.split(",") if path.strip()]


def check_broker_stopped(directory: str) -> None:
    """Refuse a log dir that a running broker owns (its pid file names a live process)."""
    from kfk.storage.log_files import BROKER_PID_FILE

    pid_path = os.path.join(directory, BROKER_PID_FILE)
    try:
        with open(pid_path, encoding="ascii") as handle:
            pid = int(handle.read().strip() or "0")
    except FileNotFoundError:
        return
    except (OSError, ValueError):
        pid = 0
    if pid <= 0:
        return
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return  # a stale pid file left by a killed broker
    except PermissionError:
        pass
    raise InvalidConfigurationError(
        f"a broker (pid {pid}) is running on the log dir {directory}: stop it first (kfk server stop --log-dir "
        f"{directory}); an offline export reads the segment files and needs them to hold still")


@dataclass
class PartitionFiles:
    """One partition's folder and what its log dir's checkpoints say about it."""

    topic_partition: TopicPartition
    directory: str
    checkpointed_log_start_offset: int | None
    checkpointed_high_watermark: int | None

    @cached_property
    def base_offsets(self) -> list[int]:
        names = os.listdir(self.directory)
        if any(name.endswith(SWAP_FILE_SUFFIX) for name in names):
            raise KafkaStorageError(f"{self.directory} holds an unfinished compaction (.swap files): start its "
                                    "broker once to recover the log, stop it, then export")
        return sorted(offset_from_file_name(name) for name in names if _SEGMENT_LOG.match(name))

    def open_segment(self, base_offset: int) -> FileRecords:
        path = log_file(self.directory, base_offset)
        fd = os.open(path, os.O_RDONLY)
        return FileRecords(path, fd, os.fstat(fd).st_size)

    @cached_property
    def log_end_offset(self) -> int:
        for base_offset in reversed(self.base_offsets):
            segment = self.open_segment(base_offset)
            try:
                last = None
                for _, header in segment.batch_headers():
                    last = header
                if last is not None:
                    return last.next_offset
            finally:
                segment.close()
        return self.base_offsets[-1] if self.base_offsets else 0

    @cached_property
    def log_start_offset(self) -> int:
        first = self.base_offsets[0] if self.base_offsets else self.log_end_offset
        if self.checkpointed_log_start_offset is not None:
            return min(max(first, self.checkpointed_log_start_offset), self.log_end_offset)
        return first

    @cached_property
    def high_watermark(self) -> int:
        if self.checkpointed_high_watermark is None:
            return self.log_end_offset
        return max(self.log_start_offset, min(self.log_end_offset, self.checkpointed_high_watermark))

    @cached_property
    def last_stable_offset(self) -> int:
        open_transactions: dict[int, int] = {}
        for base_offset in self.base_offsets:
            segment = self.open_segment(base_offset)
            try:
                for _, header in segment.batch_headers():
                    if header.base_offset >= self.high_watermark:
                        break
                    if not isinstance(header, RecordBatch) or not header.is_transactional:
                        continue
                    if header.is_control:
                        open_transactions.pop(header.producer_id, None)
                    else:
                        open_transactions.setdefault(header.producer_id, header.base_offset)
            finally:
                segment.close()
        return min([self.high_watermark, *open_transactions.values()])

    def aborted_transactions(self) -> list[tuple[int, int, int]]:
        """(producer_id, first_offset, last_offset) of every aborted transaction the segments indexed."""
        found = []
        for base_offset in self.base_offsets:
            path = transaction_index_file(self.directory, base_offset)
            if os.path.exists(path):
                index = TransactionIndex(base_offset, path)
                try:
                    found.extend((txn.producer_id, txn.first_offset, txn.last_offset)
                                 for txn in index.all_aborted_txns())
                finally:
                    index.close()
        return found

    def start_position(self, base_offset: int, target_offset: int, segment_size: int) -> int:
        """Where a forward header scan for ``target_offset`` may start: the offset index's hint, or 0."""
        path = offset_index_file(self.directory, base_offset)
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            return 0
        index = OffsetIndex(path, base_offset, writable=False)
        try:
            position = index.lookup(target_offset).position
        except (KafkaStorageError, IndexError):
            return 0
        finally:
            index.close()
        return position if 0 <= position < segment_size else 0


class LogDirCatalog:
    """PartitionCatalog on log dirs (see kfk.spark.offsets)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.partitions: dict[TopicPartition, PartitionFiles] = {}
        for directory in log_dirs(options):
            if not os.path.isdir(directory):
                raise InvalidConfigurationError(f"the log dir {directory} does not exist")
            check_broker_stopped(directory)
            self.partitions.update(scan_log_dir(directory))

    def close(self) -> None:
        pass

    def __enter__(self) -> LogDirCatalog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _topics(self) -> dict[str, list[int]]:
        topics: dict[str, list[int]] = {}
        for tp in sorted(self.partitions):
            topics.setdefault(tp.topic, []).append(tp.partition)
        return topics

    def topic_partitions(self, selection: TopicSelection, *, allow_empty: bool = False) -> list[TopicPartition]:
        topics = self._topics()
        where = ", ".join(log_dirs(self.options))
        if selection.assign:
            for tp in selection.assign:
                if tp not in self.partitions:
                    raise UnknownTopicOrPartitionError(f"partition {tp} in option 'assign' is not in {where}")
            return sorted(selection.assign)
        if selection.subscribe:
            for topic in selection.subscribe:
                if topic not in topics:
                    raise UnknownTopicOrPartitionError(f"topic {topic!r} does not exist in {where}")
            names = list(selection.subscribe)
        else:
            names = [name for name in topics if name not in INTERNAL_TOPICS and selection.matches(name)]
            if not names and not allow_empty:
                raise UnknownTopicOrPartitionError(f"no topic in {where} matches the pattern {selection.pattern!r}")
        return sorted(TopicPartition(name, partition) for name in names for partition in topics[name])

    def _files(self, tp: TopicPartition) -> PartitionFiles:
        files = self.partitions.get(tp)
        if files is None:
            raise UnknownTopicOrPartitionError(f"partition {tp} is not in {', '.join(log_dirs(self.options))}")
        return files

    def earliest_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._files(tp).log_start_offset for tp in partitions}

    def latest_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        if self.options.read_committed:
            return {tp: self._files(tp).last_stable_offset for tp in partitions}
        return {tp: self._files(tp).high_watermark for tp in partitions}

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        found: dict[TopicPartition, int | None] = {}
        for tp, timestamp in timestamps.items():
            files = self._files(tp)
            found[tp] = None
            for base_offset in files.base_offsets:
                segment = files.open_segment(base_offset)
                try:
                    hit = segment.search_for_timestamp(timestamp, 0, files.log_start_offset)
                finally:
                    segment.close()
                if hit is not None:
                    found[tp] = hit.offset if hit.offset < files.high_watermark else None
                    break
        return found


def scan_log_dir(directory: str) -> dict[TopicPartition, PartitionFiles]:
    log_start_offsets = OffsetCheckpointFile(os.path.join(directory, LOG_START_OFFSET_CHECKPOINT_FILE)).read()
    clean_shutdown = os.path.exists(os.path.join(directory, CLEAN_SHUTDOWN_FILE))
    high_watermarks = OffsetCheckpointFile(os.path.join(directory, REPLICATION_CHECKPOINT_FILE)).read() \
        if clean_shutdown else {}
    partitions = {}
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if not os.path.isdir(path) or name.endswith((DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)):
            continue
        try:
            storage_tp = parse_topic_partition_name(name)
        except ValueError:
            continue
        if storage_tp.topic == CLUSTER_METADATA_TOPIC_NAME:
            continue
        tp = TopicPartition(storage_tp.topic, storage_tp.partition)
        partitions[tp] = PartitionFiles(tp, path, log_start_offsets.get(storage_tp),
                                        high_watermarks.get(storage_tp))
    return partitions


def read_log_dir_range(options: SourceOptions, offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of ``offset_range`` from the segment files, as Arrow batches."""
    if offset_range.size == 0:
        return
    tp = offset_range.topic_partition
    files = None
    for directory in log_dirs(options):
        files = scan_log_dir(directory).get(tp) or files
    if files is None:
        raise UnknownTopicOrPartitionError(f"partition {tp} is not in {options.log_dir}")
    start, until = offset_range.from_offset, offset_range.until_offset
    if start < files.log_start_offset:
        if options.fail_on_data_loss:
            raise DataLossError(f"offsets from {start} of {tp} are no longer in {files.directory} (its log starts "
                                f"at {files.log_start_offset}); set failOnDataLoss=false to skip what is gone")
        start = min(files.log_start_offset, until)
    aborted = None
    if options.read_committed:
        aborted = [(producer_id, first) for producer_id, first, last in files.aborted_transactions()
                   if last >= start and first < until]
    builder = RecordBatchBuilder(tp.topic, tp.partition, options.include_headers)
    position = start
    for chunk in _chunks(files, start, until):
        fetch = CompletedFetch(tp, position, ErrorCode.NONE, files.high_watermark, files.high_watermark,
                               files.log_start_offset, chunk, aborted)
        while not fetch.consumed_all:
            records = fetch.take(10_000, True, options.read_committed, None, None)
            if records and records[-1].offset >= until:
                records = [record for record in records if record.offset < until]
            builder.add(records)
            if builder.full:
                yield builder.take()
        position = fetch.next_fetch_offset
        if position >= until:
            break
    if builder.pending:
        yield builder.take()


def _chunks(files: PartitionFiles, start: int, until: int) -> Iterator[bytes]:
    """Whole batches covering [start, until), about CHUNK_BYTES at a time."""
    bases = files.base_offsets
    for index, base_offset in enumerate(bases):
        if index + 1 < len(bases) and bases[index + 1] <= start:
            continue
        if base_offset >= until:
            return
        segment = files.open_segment(base_offset)
        try:
            first_position = files.start_position(base_offset, start, segment.size) if base_offset < start else 0
            chunk_start = chunk_end = -1
            for position, header in segment.batch_headers(first_position):
                if header.next_offset <= start:
                    continue
                if header.base_offset >= until:
                    break
                if chunk_start < 0:
                    chunk_start = position
                chunk_end = position + header.size_in_bytes
                if chunk_end - chunk_start >= CHUNK_BYTES:
                    yield segment.read(chunk_start, chunk_end - chunk_start)
                    chunk_start = -1
            if chunk_start >= 0:
                yield segment.read(chunk_start, chunk_end - chunk_start)
        finally:
            segment.close()

