"""RaftLog: what the Raft state machine needs of the replicated log, and nothing more.

The state machine never reads files itself: the driver gives it a KafkaMetadataLog (the `__cluster_metadata-0`
partition) and the simulation tests an in-memory log, both behind this protocol. Batches leave the leader through
`read` and enter a follower through `append_as_follower` as an opaque value (record bytes for the real log), so the
state machine only ever reasons about offsets and epochs.

A write is not durable until `flush`: the leader counts its own log end offset towards the high watermark only once
flushed, and a follower flushes what it fetched before it reports the new offset in its next fetch.
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
    def last_fetched_epoch(self) -> int:
        """The epoch of the last batch; 0 for an empty log."""

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

    def flush(self) -> None: ...
