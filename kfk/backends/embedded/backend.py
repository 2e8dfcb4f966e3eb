"""EmbeddedMetadataBackend: metadata kept in the local __cluster_metadata log, KRaft-style (the default backend).

Today the quorum has one voter, this node (`process.roles=broker,controller`), so a record is committed as soon as
it is fsynced to this node's log. The shape is Raft's, so that the multi-voter quorum (Vote, BeginQuorumEpoch,
Fetch...) can come in behind the same interface:
- an epoch and a leader (ElectionState), persisted in `quorum-state` before they are acted on. A node always
  starts unattached: even a node that led epoch N before a restart must win epoch N+1 (it cannot know what it
  appended in N before crashing, so N is closed for it, as in Kafka's QuorumState);
- every leader opens its epoch with a LEADER_CHANGE control batch, and stamps its batches with its epoch;
- a committed offset (the high watermark): the end of what is durable on a majority, here after the fsync;
- listeners, called with each committed batch in log order: the whole log on start(), then every append.
  With one voter, everything found in the log on start is committed: a batch written before a crash but never
  acknowledged may survive, which is the "outcome unknown" case every Raft client already has to live with.

An append carries the controller epoch its writer won; a stale epoch is refused with NotControllerError, so a
deposed controller can never write behind its successor's back.

Snapshots (snapshots/): the backend keeps the committed MetadataImage. Once
`metadata.log.max.record.bytes.between.snapshots` bytes were appended since the last snapshot, or
`metadata.log.max.snapshot.interval.ms` passed with anything appended, it writes the image as
`<end offset>-<epoch>.checkpoint` in the background, then trims the log behind it (log start offset advanced,
whole segments and older snapshots deleted). start() loads the newest snapshot that reads and replays only the
log after it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Sequence

from kfk.backends.embedded.metadata_log import KafkaMetadataLog
from kfk.backends.embedded.quorum_state import ElectionState, FileQuorumStateStore
from kfk.backends.embedded.snapshots import (
    SnapshotId,
    delete_snapshots_before,
    image_records,
    latest_valid_snapshot,
    write_snapshot,
)
from kfk.backends.embedded.snapshots.snapshot_file import delete_partial_snapshots
from kfk.common.clock import Clock, system_time_ms
from kfk.common.constants import NO_NODE
from kfk.controller.backend import MetadataListener
from kfk.errors import InvalidConfigurationError, KafkaStorageError, NotControllerError
from kfk.metadata.image import MetadataImage
from kfk.protocol.message import Message
from kfk.records import LeaderChangeMessage, Voter

log = logging.getLogger("kfk.backends.embedded")

#: Kafka's defaults for metadata.log.max.record.bytes.between.snapshots and metadata.log.max.snapshot.interval.ms.
DEFAULT_SNAPSHOT_MAX_NEW_RECORD_BYTES = 20 * 1024 * 1024
DEFAULT_SNAPSHOT_MAX_INTERVAL_MS = 60 * 60 * 1000


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """One replica of the metadata log as its leader sees it (DescribeQuorum's ReplicaState)."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """The metadata quorum as its leader describes it: epoch, committed offset, voters and observers."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...] = ()


class EmbeddedMetadataBackend:
    def __init__(self, log_dir: str, node_id: int, cluster_id: str, voters: Sequence[int] = (), *,
                 time_ms: Clock = system_time_ms,
                 snapshot_max_new_record_bytes: int = DEFAULT_SNAPSHOT_MAX_NEW_RECORD_BYTES,
                 snapshot_max_interval_ms: int = DEFAULT_SNAPSHOT_MAX_INTERVAL_MS,
                 segment_bytes: int | None = None) -> None:
        voters = tuple(sorted(set(voters))) or (node_id,)
        if len(voters) > 1:
            raise InvalidConfigurationError(
                f"controller.quorum.voters lists {len(voters)} voters: the embedded backend runs a single-voter "
                "quorum for now (the Raft election between voters is not implemented yet)"
            )
        self.log_dir = log_dir
        self.node_id = node_id
        self.voters = voters
        self._cluster_id = cluster_id
        self._time_ms = time_ms
        self._listeners: list[MetadataListener] = []
        self._metadata_log: KafkaMetadataLog | None = None
        self._quorum_store: FileQuorumStateStore | None = None
        self.election_state = ElectionState(voters=voters)
        self._write_lock = asyncio.Lock()
        self._segment_bytes = segment_bytes
        #: The committed image, what a snapshot writes; the epoch and append time of the batch that holds its last
        #: record (the snapshot's id epoch and its header's lastContainedLogTimestamp).
        self.image = MetadataImage(cluster_id=cluster_id)
        self._image_epoch = 0
        self._image_timestamp = 0
        self._snapshot_max_new_record_bytes = snapshot_max_new_record_bytes
        self._snapshot_max_interval_ms = snapshot_max_interval_ms
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = 0
        self._snapshot_task: asyncio.Task | None = None
        self._stopping = False
        #: The newest snapshot on disk (loaded or written), None if there is none.
        self.latest_snapshot_id: SnapshotId | None = None

    # -- MetadataBackend ---------------------------------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    def add_listener(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    async def start(self) -> None:
        metadata_log = await self._blocking(KafkaMetadataLog.open, self.log_dir, self._time_ms(),
                                            self._segment_bytes)
        self._metadata_log = metadata_log
        self._stopping = False
        self._last_snapshot_ms = self._time_ms()  # the interval between snapshots counts from the start
        await self._load_snapshot(metadata_log)
        self._quorum_store = FileQuorumStateStore(metadata_log.directory)
        stored = await self._blocking(self._quorum_store.read)
        epoch = 0 if stored is None else stored.epoch
        latest_logged_epoch = metadata_log.latest_epoch()
        if latest_logged_epoch is not None and latest_logged_epoch > epoch:
            raise KafkaStorageError(
                f"The metadata log {metadata_log.directory} holds epoch {latest_logged_epoch}, beyond the epoch "
                f"{epoch} of its quorum-state file"
            )
        # Unattached in the stored epoch: whatever this node was before, it must win a new epoch to write.
        self.election_state = ElectionState(epoch, NO_NODE, NO_NODE if stored is None else stored.voted_id,
                                            self.voters)
        start_offset = 0 if self.latest_snapshot_id is None else self.latest_snapshot_id.end_offset
        batches = await self._blocking(lambda: list(metadata_log.read_batches(start_offset)))
        for batch in batches:
            if batch.records:
                self._notify(batch.records, batch.last_offset, batch.epoch, batch.timestamp)
        metadata_log.update_high_watermark(metadata_log.log_end_offset)
        log.info("metadata log %s loaded: %d batches up to offset %d, epoch %d", metadata_log.directory,
                 len(batches), metadata_log.log_end_offset - 1, epoch)

    async def stop(self) -> None:
        self._stopping = True
        if self._snapshot_task is not None:
            await asyncio.gather(self._snapshot_task, return_exceptions=True)
            self._snapshot_task = None
        async with self._write_lock:
            if self._metadata_log is not None:
                await self._blocking(self._metadata_log.close)
                self._metadata_log = None
            self.election_state = ElectionState(self.election_state.epoch, NO_NODE, self.election_state.voted_id,
                                                self.voters)

    async def elect_controller(self, node_id: int) -> int | None:
        """Run this node's election: with one voter, voting for itself is a majority. The candidate's vote and then
        its leadership are made durable before the first record of the new epoch (a LEADER_CHANGE batch)."""
        if node_id != self.node_id or node_id not in self.voters:
            return None
        async with self._write_lock:
            metadata_log = self._require_started()
            epoch = self.election_state.epoch + 1
            candidate = ElectionState(epoch, NO_NODE, node_id, self.voters)
            await self._blocking(self._quorum_store.write, candidate)
            self.election_state = candidate
            leader = ElectionState(epoch, node_id, node_id, self.voters)
            await self._blocking(self._quorum_store.write, leader)
            self.election_state = leader
            voters = [Voter(voter) for voter in self.voters]
            message = LeaderChangeMessage(node_id, voters, [Voter(node_id)])

            def write_leader_change() -> None:
                metadata_log.append_leader_change(message, epoch, self._time_ms())
                metadata_log.flush()
                metadata_log.update_high_watermark(metadata_log.log_end_offset)

            await self._blocking(write_leader_change)
        log.info("node %d is the metadata quorum leader (active controller) in epoch %d", node_id, epoch)
        return epoch

    def active_controller(self) -> tuple[int, int] | None:
        state = self.election_state
        return (state.leader_id, state.epoch) if state.has_leader else None

    async def append(self, records: Sequence[Message], controller_epoch: int) -> int:
        if not records:
            raise ValueError("nothing to append")
        async with self._write_lock:
            metadata_log = self._require_started()
            state = self.election_state
            if state.leader_id != self.node_id or controller_epoch != state.epoch:
                raise NotControllerError(
                    f"Controller epoch {controller_epoch} is not the current epoch {state.epoch} of leader "
                    f"{state.leader_id}"
                )
            records = list(records)

            now_ms = self._time_ms()

            def write() -> tuple[int, int]:
                appended_before = metadata_log.appended_bytes
                last_offset = metadata_log.append_as_leader(records, controller_epoch, now_ms)
                metadata_log.flush()
                metadata_log.update_high_watermark(last_offset + 1)
                return last_offset, metadata_log.appended_bytes - appended_before

            last_offset, appended_bytes = await self._blocking(write)
            self._notify(records, last_offset, controller_epoch, now_ms)
            self._bytes_since_snapshot += appended_bytes
            self._maybe_snapshot()
            return last_offset

    # -- Raft state, for tests and tools ----------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        """The committed offset: every offset below it is durable on a majority of voters."""
        return self._require_started().high_watermark

    @property
    def metadata_log(self) -> KafkaMetadataLog:
        return self._require_started()

    def describe_quorum(self) -> QuorumDescription | None:
        """What DescribeQuorum answers; None unless this node leads the quorum (only the leader knows the others).
        With one voter the leader is the whole quorum: its log end offset is committed as soon as it is written,
        and it is caught up with itself now. Brokers do not fetch the log from it, so there are no observers."""
        state = self.election_state
        if self._metadata_log is None or state.leader_id != self.node_id:
            return None
        now_ms = self._time_ms()
        log_end_offset = self._metadata_log.log_end_offset
        return QuorumDescription(
            leader_id=state.leader_id, leader_epoch=state.epoch, high_watermark=self._metadata_log.high_watermark,
            voters=tuple(ReplicaState(voter, log_end_offset, now_ms, now_ms) for voter in self.voters))

    # -- internals ---------------------------------------------------------------------------------------------------

    def _require_started(self) -> KafkaMetadataLog:
        if self._metadata_log is None:
            raise NotControllerError("The metadata backend is not running")
        return self._metadata_log

    def _notify(self, records: list[Message], last_offset: int, epoch: int, timestamp: int) -> None:
        self.image = self.image.apply(records, last_offset)
        self._image_epoch, self._image_timestamp = epoch, timestamp
        for listener in self._listeners:
            listener.handle_commit(records, last_offset)

    # -- snapshots ---------------------------------------------------------------------------------------------------

    async def _load_snapshot(self, metadata_log: KafkaMetadataLog) -> None:
        """Load the newest valid snapshot, if any, into the image and the listeners (as one commit of its
        records). A log that ends before the snapshot (a crash between the snapshot and the log's flush) starts
        empty at its end offset; a log trimmed past every readable snapshot cannot be loaded at all."""
        directory = metadata_log.directory
        await self._blocking(delete_partial_snapshots, directory)
        snapshot = await self._blocking(latest_valid_snapshot, directory)
        if snapshot is None:
            if metadata_log.log.log_start_offset > 0:
                raise KafkaStorageError(
                    f"The metadata log {directory} starts at offset {metadata_log.log.log_start_offset} and no "
                    "snapshot below it reads: the metadata before it is lost")
            return
        end_offset = snapshot.snapshot_id.end_offset
        if metadata_log.log_end_offset < end_offset or metadata_log.log.log_start_offset > end_offset:
            await self._blocking(metadata_log.log.truncate_fully_and_start_at, end_offset, self._time_ms())
        self.latest_snapshot_id = snapshot.snapshot_id
        if snapshot.records:
            self._notify(snapshot.records, end_offset - 1, snapshot.snapshot_id.epoch,
                         snapshot.last_contained_log_timestamp)
        log.info("metadata snapshot %s loaded: %d records", snapshot.snapshot_id, len(snapshot.records))

    def _maybe_snapshot(self) -> None:
        """Start snapshotting in the background when enough was appended or enough time passed since the last."""
        if (self._snapshot_task is None or self._snapshot_task.done()) and self._snapshot_due():
            self._snapshot_task = asyncio.get_running_loop().create_task(self._snapshot_while_due())

    def _snapshot_due(self) -> bool:
        if self._metadata_log is None or self._stopping:
            return False
        return (self._bytes_since_snapshot >= self._snapshot_max_new_record_bytes
                or (self._bytes_since_snapshot > 0
                    and self._time_ms() - self._last_snapshot_ms >= self._snapshot_max_interval_ms))

    async def _snapshot_while_due(self) -> None:
        """Snapshot, and again while what was appended during the last one makes another due (no later append
        may come to ask for it)."""
        await self.snapshot()
        while self._snapshot_due():
            await self.snapshot()

    async def snapshot(self) -> SnapshotId | None:
        """Write the committed image as a snapshot now and trim the log behind it; its id, or None when the
        image is already the newest snapshot's. The image is immutable, so it is written off the event loop while
        appends go on."""
        image, epoch, timestamp = self.image, self._image_epoch, self._image_timestamp
        metadata_log = self._require_started()
        snapshot_id = SnapshotId(image.offset + 1, epoch)
        if image.offset < 0 or (self.latest_snapshot_id is not None and snapshot_id <= self.latest_snapshot_id):
            return None
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = now_ms = self._time_ms()

        def write_and_trim() -> None:
            write_snapshot(metadata_log.directory, snapshot_id, image_records(image),
                           last_contained_log_timestamp=timestamp, now_ms=now_ms)
            metadata_log.log.maybe_increment_log_start_offset(snapshot_id.end_offset)
            metadata_log.log.delete_old_segments(self._time_ms())
            delete_snapshots_before(metadata_log.directory, snapshot_id)

        await self._blocking(write_and_trim)
        self.latest_snapshot_id = snapshot_id
        log.info("metadata snapshot %s written; the log now starts at %d", snapshot_id,
                 metadata_log.log.log_start_offset)
        return snapshot_id

    @staticmethod
    async def _blocking(function, *args):
        """File work (open, fsync) runs off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(None, function, *args)
