"""LogLoader: open a partition folder, finish or undo interrupted operations, recover after a crash.

Order (Kafka's LogLoader):
1. Leftovers: `.deleted` files are removed (their deletion was already decided); `.cleaned` files are removed (a
   compaction that did not finish is simply redone later), and so is any `.swap` at or beyond the first `.cleaned`
   offset; index files whose `.log` is gone are removed.
2. Swaps: a `.swap` segment is a finished compaction result; the segments it replaces are removed and it is renamed
   into place.
3. Segments: every `.log` becomes a LogSegment (indexes opened lazily; a missing one is rebuilt by recovery).
4. Recovery, unless the broker shut down cleanly: each segment from the recovery point on is re-scanned (CRCs
   checked, indexes rebuilt, producer state and leader epochs replayed); at the first invalid or torn batch the
   segment is cut there and every later segment is deleted.
5. Producer state is brought to the log end offset from the newest snapshot plus a replay of batch headers.
"""

from __future__ import annotations

import dataclasses
import logging
import os

from kfk.config import LogConfig
from kfk.records import MAGIC_VALUE_V2
from kfk.storage.leader_epoch import LeaderEpochFileCache
from kfk.storage.log_files import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    offset_from_file_name,
)
from kfk.storage.log_segments import LogSegments
from kfk.storage.producer_state import AppendOrigin, ProducerStateManager
from kfk.storage.segment import LogSegment

logger = logging.getLogger(__name__)

_INDEX_SUFFIXES = (INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)


@dataclasses.dataclass
class LoadedLogOffsets:
    log_start_offset: int
    recovery_point: int
    log_end_offset: int


def open_segment(directory: str, base_offset: int, config: LogConfig, now_ms: int, *, exists: bool,
                 suffix: str = "", jitter_ms: int = 0) -> LogSegment:
    return LogSegment.open(
        directory, base_offset, index_interval_bytes=config.index_interval_bytes,
        max_index_size=config.segment_index_bytes, created_ms=now_ms, roll_jitter_ms=jitter_ms,
        file_already_exists=exists, init_file_size=config.init_file_size, preallocate=config.preallocate,
        file_suffix=suffix,
    )


def replay_producer_state(segments: LogSegments, producer_state: ProducerStateManager, end_offset: int) -> None:
    """Bring producer state from its map end offset up to `end_offset` by walking batch headers (control
    batches are read whole: their marker is a record)."""
    start_offset = producer_state.last_map_offset
    if start_offset >= end_offset:
        return
    for segment in segments.values_from(start_offset, end_offset):
        start = segment.translate_offset(start_offset)
        if start is None:
            continue
        for position, batch in segment.log.batch_headers(start.position):
            # A legacy wrapper's first offset needs decompression; its last offset tells as much here.
            first_offset = batch.base_offset if batch.magic >= MAGIC_VALUE_V2 else batch.last_offset
            if first_offset >= end_offset:
                return
            if batch.has_producer_id:
                if batch.is_control:
                    batch = segment.log.read_batch(position, batch.size_in_bytes)
                append_info = producer_state.prepare_update(batch.producer_id, AppendOrigin.REPLICATION)
                completed = append_info.append(batch)
                producer_state.update(append_info)
                if completed is not None:
                    producer_state.complete_txn(completed)
            producer_state.update_map_end_offset(batch.last_offset + 1)


class LogLoader:
    def __init__(self, directory: str, topic_partition: str, config: LogConfig, now_ms: int,
                 had_clean_shutdown: bool, log_start_offset_checkpoint: int, recovery_point_checkpoint: int,
                 leader_epoch_cache: LeaderEpochFileCache, producer_state: ProducerStateManager) -> None:
        self.directory = directory
        self.topic_partition = topic_partition
        self.config = config
        self.now_ms = now_ms
        self.had_clean_shutdown = had_clean_shutdown
        self.log_start_offset_checkpoint = log_start_offset_checkpoint
        self.recovery_point_checkpoint = recovery_point_checkpoint
        self.leader_epoch_cache = leader_epoch_cache
        self.producer_state = producer_state
        self.segments = LogSegments()
        self.recovered_segments = 0

    def load(self) -> LoadedLogOffsets:
        swap_bases = self._remove_temp_files_and_collect_swap_files()
        for base in swap_bases:
            self._complete_swap(base)
        self._load_segment_files()
        recovery_point = self.recovery_point_checkpoint
        if not self.had_clean_shutdown and self.segments:
            recovery_point = self._recover_log()
        if not self.segments:
            self.segments.add(open_segment(self.directory, self.log_start_offset_checkpoint, self.config,
                                           self.now_ms, exists=False))
        active = self.segments.last_segment
        assert active is not None
        log_end_offset = active.read_next_offset()
        first = self.segments.first_segment
        assert first is not None
        log_start_offset = max(self.log_start_offset_checkpoint, first.base_offset)
        log_start_offset = min(log_start_offset, log_end_offset)
        recovery_point = min(recovery_point, log_end_offset)
        active.resize_indexes(self.config.segment_index_bytes)
        active.restore_index_interval_count()
        self.leader_epoch_cache.truncate_from_end(log_end_offset)
        self.leader_epoch_cache.truncate_from_start(log_start_offset)
        self.producer_state.remove_stray_snapshots(self.segments.base_offsets)
        self.producer_state.truncate_and_reload(log_start_offset, log_end_offset, self.now_ms)
        replay_producer_state(self.segments, self.producer_state, log_end_offset)
        return LoadedLogOffsets(log_start_offset, recovery_point, log_end_offset)

    # -- leftovers and swaps -------------------------------------------------------------------------------------

    def _remove_temp_files_and_collect_swap_files(self) -> list[int]:
        names = os.listdir(self.directory)
        swap_bases: set[int] = set()
        min_cleaned_offset: int | None = None
        log_bases: set[int] = set()
        for name in names:
            path = os.path.join(self.directory, name)
            if not os.path.isfile(path):
                continue
            if name.endswith(DELETED_FILE_SUFFIX):
                logger.debug("Deleting stray temporary file %s", path)
                os.unlink(path)
            elif name.endswith(CLEANED_FILE_SUFFIX):
                offset = _safe_offset(name)
                if offset is not None:
                    min_cleaned_offset = offset if min_cleaned_offset is None else min(min_cleaned_offset, offset)
                logger.debug("Deleting stray temporary file %s", path)
                os.unlink(path)
            elif name.endswith(SWAP_FILE_SUFFIX):
                offset = _safe_offset(name)
                if offset is not None and name.endswith(LOG_FILE_SUFFIX + SWAP_FILE_SUFFIX):
                    swap_bases.add(offset)
            elif name.endswith(LOG_FILE_SUFFIX):
                offset = _safe_offset(name)
                if offset is not None:
                    log_bases.add(offset)
        valid_swaps = []
        for base in sorted(swap_bases):
            if min_cleaned_offset is not None and base >= min_cleaned_offset:
                logger.info("Deleting invalid swap file for segment %d (an unfinished cleaning)", base)
                for suffix in (LOG_FILE_SUFFIX,) + _INDEX_SUFFIXES:
                    _unlink_if_exists(os.path.join(self.directory, _name(base, suffix + SWAP_FILE_SUFFIX)))
            else:
                valid_swaps.append(base)
        # Index files whose .log is gone (and that are not part of a swap) are orphans.
        for name in os.listdir(self.directory):
            for suffix in _INDEX_SUFFIXES:
                if name.endswith(suffix):
                    offset = _safe_offset(name)
                    if offset is not None and offset not in log_bases:
                        logger.info("Found an orphaned index file %s, with no corresponding log file", name)
                        os.unlink(os.path.join(self.directory, name))
        return valid_swaps

    def _complete_swap(self, base: int) -> None:
        """Finish a compaction that wrote its `.swap` files: remove the segments it replaces, rename it in."""
        swap = open_segment(self.directory, base, self.config, self.now_ms, exists=True, suffix=SWAP_FILE_SUFFIX)
        swap.rebuild_indexes()
        next_offset = swap.read_next_offset()
        for name in os.listdir(self.directory):
            if not name.endswith(LOG_FILE_SUFFIX):
                continue
            offset = _safe_offset(name)
            if offset is not None and base <= offset < next_offset:
                logger.info("Deleting segment %d replaced by the completed swap of segment %d", offset, base)
                for suffix in (LOG_FILE_SUFFIX,) + _INDEX_SUFFIXES:
                    _unlink_if_exists(os.path.join(self.directory, _name(offset, suffix)))
        swap.change_file_suffixes(SWAP_FILE_SUFFIX, "")
        swap.close()

    # -- segments and recovery -----------------------------------------------------------------------------------

    def _load_segment_files(self) -> None:
        bases = sorted(
            offset for name in os.listdir(self.directory)
            if name.endswith(LOG_FILE_SUFFIX) and (offset := _safe_offset(name)) is not None
        )
        for base in bases:
            # A missing or damaged index is found and rebuilt when the segment's indexes are first opened.
            self.segments.add(open_segment(self.directory, base, self.config, self.now_ms, exists=True))

    def _recover_log(self) -> int:
        """Recover the segments holding offsets at or after the recovery point; returns the new recovery point."""
        recovery_point = self.recovery_point_checkpoint
        first = self.segments.first_segment
        assert first is not None
        if recovery_point < first.base_offset:
            recovery_point = first.base_offset
        unflushed = self.segments.values_from(recovery_point)
        if not unflushed:
            return recovery_point
        # Producer state must stand at the first recovered segment's base offset before recovering it.
        log_start = max(self.log_start_offset_checkpoint, first.base_offset)
        self.producer_state.truncate_and_reload(log_start, unflushed[0].base_offset, self.now_ms)
        replay_producer_state(self.segments, self.producer_state, unflushed[0].base_offset)
        for position, segment in enumerate(unflushed):
            logger.info("Recovering unflushed segment %d of %s", segment.base_offset, self.topic_partition)
            truncated = segment.recover(self.producer_state, self.leader_epoch_cache)
            self.recovered_segments += 1
            if truncated > 0:
                for later in unflushed[position + 1:]:
                    logger.warning("Deleting segment %d after the invalid data found in segment %d",
                                   later.base_offset, segment.base_offset)
                    self.segments.remove(later.base_offset)
                    later.delete_if_exists()
                break
        # Recovered data was checked but is not known to be on disk: the recovery point stays where it was.
        return recovery_point


def _name(offset: int, suffix: str) -> str:
    return f"{offset:020d}{suffix}"


def _safe_offset(name: str) -> int | None:
    try:
        return offset_from_file_name(name)
    except ValueError:
        return None


def _unlink_if_exists(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
