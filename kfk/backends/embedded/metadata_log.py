"""KafkaMetadataLog: the __cluster_metadata-0 partition, a kfk.storage Log of metadata record batches.

The log lives in the first log dir (Kafka's default for metadata.log.dir) under Kafka's own folder name, and is
written in Kafka's format: one v2 batch per controller write, its partitionLeaderEpoch the Raft epoch of the
leader that wrote it, each record's value one framed metadata record (record_serde), keys null. Each new leader
opens its epoch with a LEADER_CHANGE control batch, as KRaft does; a dynamic quorum's voter changes are
KRAFT_VOTERS control batches (one VotersRecord each); replays skip control batches.

The backend opens this log itself, not through the LogManager (which skips the folder): retention, compaction and
topic deletion never run on it, and its config keeps everything (retention.ms = retention.bytes = -1) in case
anything ever did. Like Kafka's KafkaMetadataLog it is always recovered from offset 0 on open, since it keeps no
recovery-point checkpoint; metadata logs are small.

It is the Raft state machine's RaftLog (kfk/backends/embedded/raft/log.py): the leader appends batches stamped with
its epoch, a follower appends the leader's batches as they are (offsets and epochs kept) and truncates where it
diverged, and `end_offset_for_epoch` answers from the Log's leader-epoch cache. A log emptied to start at a
snapshot's end (`truncate_fully_and_start_at`, or trimmed to it on load) reports that snapshot's epoch as its last
fetched epoch until it holds a batch again, as Kafka's does.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

from kfk.backends.embedded.raft.log import OffsetAndEpoch
from kfk.backends.embedded.raft.voter_set import VoterSet
from kfk.backends.embedded.voters_record import VotersRecord, from_voters_record, to_voters_record
from kfk.backends.embedded.record_serde import deserialize_record, metadata_version_after, serialize_record
from kfk.common.clock import Clock, system_time_ms
from kfk.common.internal_topics import CLUSTER_METADATA_TOPIC_ID, CLUSTER_METADATA_TOPIC_NAME
from kfk.common.structs import TopicPartition
from kfk.config import LogConfig
from kfk.controller.features import MINIMUM_METADATA_VERSION
from kfk.errors import CorruptRecordError
from kfk.protocol.message import Message
from kfk.records import (
    MAGIC_VALUE_V2,
    ControlRecordType,
    LeaderChangeMessage,
    MemoryRecordsBuilder,
    Voter,
    build_leader_change_batch,
    control_record_type,
    iter_batches,
)
from kfk.records.control import control_record_key
from kfk.storage.fetch_data_info import FetchIsolation
from kfk.storage.log import Log
from kfk.storage.log_files import log_dir_name
from kfk.storage.producer_state import AppendOrigin

METADATA_TOPIC_PARTITION = TopicPartition(CLUSTER_METADATA_TOPIC_NAME, 0)
#: Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES: the largest batch one controller write may produce.
MAX_BATCH_SIZE_BYTES = 8 * 1024 * 1024
_READ_CHUNK_BYTES = 1024 * 1024

METADATA_LOG_CONFIG = LogConfig.from_properties({
    "retention.ms": -1,
    "retention.bytes": -1,
    "max.message.bytes": MAX_BATCH_SIZE_BYTES,
    # Segments trimmed behind a snapshot go at once: no reader holds them (the metadata log is never fetched
    # by clients), and a restart must not find them again.
    "file.delete.delay.ms": 0,
})


@dataclass(frozen=True)
class MetadataBatch:
    """One batch of the metadata log: its offsets, the epoch of the leader that wrote it, its records (none for a
    control batch), its append time."""

    base_offset: int
    last_offset: int
    epoch: int
    records: list[Message]
    is_control: bool = False
    timestamp: int = -1


class KafkaMetadataLog:
    def __init__(self, log: Log, time_ms: Clock) -> None:
        self.log = log
        self._time_ms = time_ms
        #: Bytes of the batches appended since the log was opened, as leader or follower (what the snapshot policy
        #: counts; the log's size cannot tell, as trimming behind a snapshot shrinks it meanwhile).
        self.appended_bytes = 0
        #: The epoch of the snapshot the log starts at, for a log with no batch of its own (0: none).
        self.start_epoch = 0
        #: The metadata.version the leader writes records at: the committed image's, kept by the backend, and moved
        #: by a batch that finalizes a new one (kfk's oldest until the first, bootstrap, batch says).
        self.metadata_version_level = MINIMUM_METADATA_VERSION.level

    @classmethod
    def open(cls, log_dir: str, now_ms: int, segment_bytes: int | None = None, *,
             time_ms: Clock = system_time_ms) -> KafkaMetadataLog:
        """Open (or create, recovering) the log at `now_ms`; `segment_bytes` is metadata.log.segment.bytes
        (default: segment.bytes'), with no floor, so tests can roll small segments; `time_ms` stamps the batches
        it appends later."""
        directory = os.path.join(log_dir, log_dir_name(METADATA_TOPIC_PARTITION))
        config = METADATA_LOG_CONFIG if segment_bytes is None else dataclasses.replace(
            METADATA_LOG_CONFIG, internal_segment_bytes=segment_bytes)
        log = Log.open(directory, config, now_ms=now_ms, recovery_point=0, had_clean_shutdown=False)
        log.partition_metadata.write(CLUSTER_METADATA_TOPIC_ID)
        return cls(log, time_ms)

    @property
    def directory(self) -> str:
        return self.log.dir

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    def update_high_watermark(self, offset: int) -> None:
        self.log.update_high_watermark(offset)

    def latest_epoch(self) -> int | None:
        return self.log.latest_epoch()

    # -- RaftLog -----------------------------------------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def last_fetched_epoch(self) -> int:
        latest = self.log.latest_epoch()
        return self.start_epoch if latest is None else latest

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        found_epoch, end_offset = self.log.end_offset_for_epoch(epoch)
        if found_epoch < 0:  # above every epoch of this log (or an empty log): it ends with its latest one
            return OffsetAndEpoch(self.log.log_end_offset, self.last_fetched_epoch)
        return OffsetAndEpoch(end_offset, found_epoch)

    def append_as_leader(self, records: Sequence[Message], epoch: int) -> int:
        """Write one batch of `records` at the log end, stamped with `epoch`; returns its last offset. Not yet
        durable: call flush()."""
        now_ms = self._time_ms()
        builder = MemoryRecordsBuilder(base_offset=self.log.log_end_offset, partition_leader_epoch=epoch)
        level = self.metadata_version_level
        for record in records:
            level = metadata_version_after(record, level)
            builder.append(now_ms, None, serialize_record(record, level))
        self.metadata_version_level = level
        batch = builder.close()
        last_offset = self.log.append_as_leader(batch, epoch, now_ms, AppendOrigin.RAFT_LEADER).last_offset
        self.appended_bytes += len(batch)
        return last_offset

    def append_leader_change(self, epoch: int, leader_id: int, voters: Sequence[int]) -> int:
        """The LEADER_CHANGE control batch that opens `epoch`: its leader, the voters, and (as Kafka writes it)
        the leader alone as the voters that granted it (the others' votes are not tracked)."""
        message = LeaderChangeMessage(leader_id, [Voter(voter) for voter in voters], [Voter(leader_id)])
        batch = build_leader_change_batch(base_offset=self.log.log_end_offset, timestamp=self._time_ms(),
                                          partition_leader_epoch=epoch, message=message)
        return self.log.append_as_leader(batch, epoch, self._time_ms(), AppendOrigin.RAFT_LEADER).last_offset

    def append_voters(self, epoch: int, voters: VoterSet) -> int:
        """A KRAFT_VOTERS control batch: a dynamic quorum's new voter set (KIP-853)."""
        builder = MemoryRecordsBuilder(base_offset=self.log.log_end_offset, partition_leader_epoch=epoch,
                                       is_control_batch=True)
        builder.append(self._time_ms(), control_record_key(ControlRecordType.KRAFT_VOTERS),
                       to_voters_record(voters).encode(0))
        batch = builder.close()
        return self.log.append_as_leader(batch, epoch, self._time_ms(), AppendOrigin.RAFT_LEADER).last_offset

    def append_as_follower(self, records: bytes) -> list[tuple[int, VoterSet]]:
        self.log.append_as_follower(records, self._time_ms())
        self.appended_bytes += len(records)
        return _voter_sets(iter_batches(records))

    def voter_sets(self) -> list[tuple[int, VoterSet]]:
        """Every voter set a VotersRecord of this log sets, with its offset (read on start)."""
        found: list[tuple[int, VoterSet]] = []
        offset, end = self.log.log_start_offset, self.log.log_end_offset
        while offset < end:
            data = self.log.read(offset, _READ_CHUNK_BYTES, FetchIsolation.LOG_END).records.read_bytes()
            batches = [batch for batch in iter_batches(data) if batch.last_offset >= offset]
            if not batches:
                raise CorruptRecordError(f"No complete batch at offset {offset} of {self.directory}")
            found += _voter_sets(batches)
            offset = batches[-1].last_offset + 1
        return found

    def read(self, start_offset: int, max_bytes: int) -> bytes | None:
        """Whole batches from `start_offset` as bytes (a Fetch response's records); None at the log end."""
        if start_offset >= self.log.log_end_offset:
            return None
        data = self.log.read(start_offset, max_bytes, FetchIsolation.LOG_END).records.read_bytes()
        return data or None

    def truncate_to(self, offset: int) -> None:
        self.log.truncate_to(offset, self._time_ms())

    def truncate_fully_and_start_at(self, offset: int, epoch: int) -> None:
        """Empty the log to start at `offset`, the end of a snapshot of `epoch` (deleting every segment)."""
        self.log.truncate_fully_and_start_at(offset, self._time_ms())
        self.start_epoch = epoch
        self.log.flush()

    def flush(self) -> None:
        """fsync everything appended so far."""
        self.log.flush()

    def read_batches(self, start_offset: int = 0, end_offset: int | None = None) -> Iterator[MetadataBatch]:
        """The batches from `start_offset` up to `end_offset` (default: the log end), decoded and CRC-checked."""
        end = self.log.log_end_offset if end_offset is None else end_offset
        offset = max(start_offset, self.log.log_start_offset)
        while offset < end:
            data = self.log.read(offset, _READ_CHUNK_BYTES, FetchIsolation.LOG_END).records.read_bytes()
            progressed = False
            for batch in iter_batches(data):
                if batch.last_offset < offset:
                    continue
                if batch.base_offset >= end:
                    return
                if batch.magic != MAGIC_VALUE_V2:
                    raise CorruptRecordError(f"Magic {batch.magic} entry at offset {batch.base_offset} of the "
                                             f"metadata log {self.directory}")
                batch.validate()
                records = [] if batch.is_control else [_decode(record.value, batch.base_offset)
                                                       for record in batch.records()]
                yield MetadataBatch(batch.base_offset, batch.last_offset, batch.partition_leader_epoch, records,
                                    batch.is_control, batch.max_timestamp)
                offset = batch.last_offset + 1
                progressed = True
            if not progressed:
                raise CorruptRecordError(f"No complete batch at offset {offset} of {self.directory}")

    def close(self) -> None:
        self.log.flush()
        self.log.close()


def _voter_sets(batches: Iterable) -> list[tuple[int, VoterSet]]:
    return [(record.offset, from_voters_record(VotersRecord.decode(record.value, 0)))
            for batch in batches if batch.is_control for record in batch.records()
            if control_record_type(record.key) == ControlRecordType.KRAFT_VOTERS]


def _decode(value: bytes | None, base_offset: int) -> Message:
    if value is None:
        raise CorruptRecordError(f"Metadata record with a null value in the batch at offset {base_offset}")
    return deserialize_record(value)
