"""RaftLog: what the Raft state machine needs of the replicated log, and nothing more.

The state machine never reads files itself: the driver gives it a KafkaMetadataLog (the `__cluster_metadata-0`
partition) and the simulation tests an in-memory log, both behind this protocol. Batches leave the leader through
`read` and enter a follower through `append_as_follower` as an opaque value (record bytes for the real log), so the
state machine only ever reasons about offsets and epochs.

A write is not durable until `flush`: the leader counts its own log end offset towards the high watermark only once
flushed, and a follower flushes what it fetched before it reports the new offset in its next fetch.

RaftSnapshots is what the state machine needs of the snapshots beside the log (KIP-630): the newest one's id, chunks
of its bytes for the leader to send, and, on a follower whose fetch offset fell below the leader's log start, one
partial snapshot being fetched chunk by chunk, checked whole before it takes the final name. The snapshot package
(kfk/backends/embedded/snapshots/store.py) keeps them as files; the simulation in memory.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, Sequence

from kfk.backends.embedded.raft.voter_set import VoterSet


class OffsetAndEpoch(NamedTuple):
    """An end offset and the epoch of the batch before it (Kafka's OffsetAndEpoch)."""

    offset: int
    epoch: int


class RaftLog(Protocol):
    @property
    def log_end_offset(self) -> int: ...

    @property
    def log_start_offset(self) -> int:
        """The first offset still in the log: what is below it is only in a snapshot."""

    @property
    def last_fetched_epoch(self) -> int:
        """The epoch of the last batch; for a log empty from its start, the epoch of the snapshot it starts at (0
        for a log that never had anything)."""

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The end of the largest epoch <= `epoch` in this log and that epoch (Kafka's endOffsetForEpoch): the
        first offset of the next epoch, or the log end offset for the last one; (0, 0) if no epoch is that small."""

    def append_as_leader(self, records: Sequence[Any], epoch: int) -> int:
        """One batch of `records` at the log end stamped with `epoch`; its last offset. Not flushed."""

    def append_leader_change(self, epoch: int, leader_id: int, voters: Sequence[int]) -> int:
        """The control batch that opens a leader's epoch; its last offset. Not flushed."""

    def append_voters(self, epoch: int, voters: VoterSet) -> int:
        """A control batch with the VotersRecord of `voters` (a dynamic quorum's change); its offset. Not
        flushed."""

    def append_as_follower(self, records: Any) -> list[tuple[int, VoterSet]]:
        """Batches as `read` returned them from the leader's log, appended at this log's end; the voter sets of the
        VotersRecords among them, with their offsets. Not flushed."""

    def read(self, start_offset: int, max_bytes: int) -> Any:
        """Whole batches from `start_offset` (at most about `max_bytes`, at least one batch); None at the end."""

    def truncate_to(self, offset: int) -> None:
        """Drop everything from `offset` on (a follower whose log diverged from its leader's)."""

    def truncate_fully_and_start_at(self, offset: int, epoch: int) -> None:
        """Drop the whole log and start it empty at `offset`, the end of a snapshot of `epoch` (a follower that
        fetched the leader's snapshot). Durable when it returns."""

    def flush(self) -> None: ...


class RaftSnapshots(Protocol):
    @property
    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        """The newest complete snapshot (end offset, epoch), None if there is none."""

    def read_chunk(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> tuple[Any, int] | None:
        """Up to `max_bytes` of the snapshot `snapshot_id` from `position`, and the snapshot's whole size; None
        when there is no such snapshot (any more). The chunk may be empty only when `position` is past the end."""

    def begin_fetch(self, snapshot_id: OffsetAndEpoch) -> None:
        """Start fetching `snapshot_id` into a partial snapshot, dropping any partial one."""

    @property
    def fetched_size(self) -> int:
        """The size of the partial snapshot so far (the position the next chunk is asked from)."""

    def append_fetched(self, chunk: Any) -> None:
        """Add a chunk at the partial snapshot's end."""

    def complete_fetch(self) -> bool:
        """The partial snapshot is whole: check it and give it its final name (it becomes the latest snapshot);
        False, and the partial dropped, when it does not read as a whole snapshot."""

    @property
    def fetched_voters(self) -> VoterSet | None:
        """The voter set held by the snapshot `complete_fetch` last completed (a dynamic quorum's snapshots carry
        it, KIP-853), None when it holds none (a static quorum's)."""

    def abort_fetch(self) -> None:
        """Drop the partial snapshot (the leader no longer has it, or this replica stopped following)."""
