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
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Sequence

from kfk.backends.embedded.metadata_log import KafkaMetadataLog
from kfk.backends.embedded.quorum_state import ElectionState, FileQuorumStateStore
from kfk.common.clock import Clock, system_time_ms
from kfk.common.constants import NO_NODE
from kfk.controller.backend import MetadataListener
from kfk.errors import InvalidConfigurationError, KafkaStorageError, NotControllerError
from kfk.protocol.message import Message
from kfk.records import LeaderChangeMessage, Voter

log = logging.getLogger("kfk.backends.embedded")


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
                 time_ms: Clock = system_time_ms) -> None:
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

    # -- MetadataBackend ---------------------------------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    def add_listener(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    async def start(self) -> None:
        metadata_log = await self._blocking(KafkaMetadataLog.open, self.log_dir, self._time_ms())
        self._metadata_log = metadata_log
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
        batches = await self._blocking(lambda: list(metadata_log.read_batches()))
        for batch in batches:
            if batch.records:
                self._notify(batch.records, batch.last_offset)
        metadata_log.update_high_watermark(metadata_log.log_end_offset)
        log.info("metadata log %s loaded: %d batches up to offset %d, epoch %d", metadata_log.directory,
                 len(batches), metadata_log.log_end_offset - 1, epoch)

    async def stop(self) -> None:
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

            def write() -> int:
                last_offset = metadata_log.append_as_leader(records, controller_epoch, self._time_ms())
                metadata_log.flush()
                metadata_log.update_high_watermark(last_offset + 1)
                return last_offset

            last_offset = await self._blocking(write)
            self._notify(records, last_offset)
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

    def _notify(self, records: list[Message], last_offset: int) -> None:
        for listener in self._listeners:
            listener.handle_commit(records, last_offset)

    @staticmethod
    async def _blocking(function, *args):
        """File work (open, fsync) runs off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(None, function, *args)
