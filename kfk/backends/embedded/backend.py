"""EmbeddedMetadataBackend: metadata kept in the __cluster_metadata log, replicated by a Raft quorum (KRaft).

The voters are `controller.quorum.voters` (static, KIP-595): a mapping of node id to the VoterEndpoint its Raft
requests go to (kfk.backends.embedded.raft.parse_voters). With no voters, or this node alone, the quorum is this
node, which elects itself on start and commits each write as soon as it is flushed: `kfk server start` with no
configuration starts as fast as ever. With several, the Raft state machine (kfk/backends/embedded/raft/) decides who
leads, run by a RaftDriver (raft_driver.py) over channels from `channel_factory`. A sole voter is elected when the
controller calls `elect_controller` (nobody else could be); only then is its log, committed as a whole by its first
batch of the new epoch, replayed to the listeners.

How the broker wires it (kfk/server/broker.py, the composition root):
- `EmbeddedMetadataBackend(log_dir, node_id, cluster_id, parse_voters(config.controller_quorum_voters),
  raft_config=RaftConfig.from_values(config.values), channel_factory=BrokerChannel)`;
- the Raft RPCs other voters send (Vote, BeginQuorumEpoch, EndQuorumEpoch, and Fetch for `__cluster_metadata`)
  go to `handle_raft_request` (kfk/server/handlers/raft.py), DescribeQuorum to `describe_quorum`;
- the active controller is the Raft leader: `add_controller_listener` tells of every change of leader, and
  `elect_controller` returns the epoch once this node leads and has replayed the log up to its epoch's start.

The MetadataBackend contract: `append` writes one batch as leader and returns once the high watermark has passed
it (NotControllerError when this node does not lead `controller_epoch`, or loses the lead before the batch commits);
listeners get every committed batch in log order on every node, voters and observers alike. State that must
survive a crash (epoch, vote) is in `quorum-state` (quorum_state.py), written before it is acted on.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Sequence

from kfk.backends.embedded.metadata_log import KafkaMetadataLog
from kfk.backends.embedded.quorum_state import FileQuorumStateStore
from kfk.backends.embedded.raft import RaftConfig, RaftReplica, VoterEndpoint
from kfk.backends.embedded.raft.leader_state import ReplicaProgress
from kfk.backends.embedded.raft_driver import ChannelFactory, RaftDriver
from kfk.common.clock import Clock, system_time_ms
from kfk.common.constants import NO_NODE
from kfk.controller.backend import MetadataListener
from kfk.errors import InvalidConfigurationError, KafkaStorageError, NotControllerError
from kfk.protocol.message import Message

log = logging.getLogger("kfk.backends.embedded")

#: How long a resigning leader gives its EndQuorumEpoch requests to reach the other voters before it stops.
RESIGN_GRACE_S = 0.5


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


def _voter_map(node_id: int, voters: Mapping[int, VoterEndpoint] | Iterable[int]) -> dict[int, VoterEndpoint | None]:
    if isinstance(voters, Mapping):
        mapped: dict[int, VoterEndpoint | None] = dict(voters)
    else:
        mapped = {voter: None for voter in voters}
    mapped = mapped or {node_id: None}
    missing = [voter for voter, endpoint in mapped.items() if endpoint is None and voter != node_id]
    if missing:
        raise InvalidConfigurationError(
            f"controller.quorum.voters must give the host:port of every voter (id@host:port); missing for {missing}")
    return mapped


class EmbeddedMetadataBackend:
    def __init__(self, log_dir: str, node_id: int, cluster_id: str,
                 voters: Mapping[int, VoterEndpoint] | Iterable[int] = (), *, raft_config: RaftConfig = RaftConfig(),
                 channel_factory: ChannelFactory | None = None, time_ms: Clock = system_time_ms,
                 rng: random.Random | None = None) -> None:
        self.log_dir = log_dir
        self.node_id = node_id
        self.endpoints = _voter_map(node_id, voters)
        self.voters = tuple(sorted(self.endpoints))
        self.raft_config = raft_config
        self._cluster_id = cluster_id
        self._channel_factory = channel_factory
        self._time_ms = time_ms
        self._rng = rng or random.Random()
        self._listeners: list[MetadataListener] = []
        self._controller_listeners: list[Callable[[], None]] = []
        self._metadata_log: KafkaMetadataLog | None = None
        self._replica: RaftReplica | None = None
        self._driver: RaftDriver | None = None
        #: The next offset to hand to the listeners: everything below it has been applied.
        self._applied_offset = 0
        #: Appends waiting for their commit: (last offset, epoch, future).
        self._pending: list[tuple[int, int, asyncio.Future[int]]] = []
        self._leader: tuple[int, int] | None = None
        self._progress = asyncio.Event()

    # -- MetadataBackend ---------------------------------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    def add_listener(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    def add_controller_listener(self, callback: Callable[[], None]) -> None:
        """Called on every change of the quorum's leader (and so of the active controller)."""
        self._controller_listeners.append(callback)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        metadata_log = await loop.run_in_executor(
            None, lambda: KafkaMetadataLog.open(self.log_dir, self._time_ms(), time_ms=self._time_ms))
        store = FileQuorumStateStore(metadata_log.directory)
        stored = await loop.run_in_executor(None, store.read)
        epoch = 0 if stored is None else stored.epoch
        latest_logged_epoch = metadata_log.latest_epoch()
        if latest_logged_epoch is not None and latest_logged_epoch > epoch:
            raise KafkaStorageError(
                f"The metadata log {metadata_log.directory} holds epoch {latest_logged_epoch}, beyond the epoch "
                f"{epoch} of its quorum-state file")
        self._metadata_log = metadata_log
        self._applied_offset = 0
        self._replica = RaftReplica(self.node_id, self.voters, self.raft_config, metadata_log, store, self._rng,
                                    self._time_ms(), self._cluster_id)
        self._driver = RaftDriver(self._replica, self.endpoints, self._time_ms, self._after_step,
                                  self.raft_config.request_timeout_ms, self._channel_factory)
        self._driver.step(lambda now_ms: None)
        self._driver.start()
        log.info("metadata log %s opened up to offset %d (epoch %d), voters %s; node %d is %s",
                 metadata_log.directory, metadata_log.log_end_offset - 1, self._replica.epoch,
                 ",".join(map(str, self.voters)), self.node_id, self._replica.state.role.value.lower())

    async def resign(self) -> None:
        """A graceful shutdown's first step: a leader of several voters stops appending and sends EndQuorumEpoch
        (waiting briefly for it to go out), so that the most caught-up voter runs at once."""
        driver, replica = self._driver, self._replica
        if driver is not None and replica is not None and replica.is_leader and len(self.voters) > 1:
            driver.step(replica.resign)
            await driver.drain(RESIGN_GRACE_S)

    async def stop(self) -> None:
        driver = self._driver
        if driver is None:
            return
        await self.resign()
        await driver.stop()
        self._driver = None
        self._fail_pending("The metadata backend stopped")
        self._set_leader(None)
        self._progress.set()
        metadata_log, self._metadata_log = self._metadata_log, None
        self._replica = None
        if metadata_log is not None:
            await asyncio.get_running_loop().run_in_executor(None, metadata_log.close)

    async def elect_controller(self, node_id: int) -> int | None:
        """The controller epoch once this node leads the quorum and has applied the log up to its epoch's start
        (so the controller's image holds everything committed before); None if it does not lead."""
        if node_id != self.node_id or node_id not in self.voters:
            return None
        if self.voters == (self.node_id,) and self._driver is not None:
            # A sole voter runs when asked (in a new epoch each time, as any controller election does), and wins.
            self._driver.step(self._replica.run_election)
        while True:
            replica = self._replica
            if replica is None or not replica.is_leader:
                return None
            if self._applied_offset > replica.epoch_start_offset:
                return replica.epoch
            await self._progress.wait()

    def active_controller(self) -> tuple[int, int] | None:
        replica = self._replica
        if replica is None or replica.leader_id == NO_NODE:
            return None
        return replica.leader_id, replica.epoch

    @property
    def is_controller(self) -> bool:
        return self._replica is not None and self._replica.is_leader

    async def append(self, records: Sequence[Message], controller_epoch: int) -> int:
        if not records:
            raise ValueError("nothing to append")
        replica, driver = self._replica, self._driver
        if replica is None or driver is None:
            raise NotControllerError("The metadata backend is not running")
        if not replica.is_leader or controller_epoch != replica.epoch:
            raise NotControllerError(f"Controller epoch {controller_epoch} is not the current epoch {replica.epoch} "
                                     f"of leader {replica.leader_id}")
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        def write(now_ms: int) -> None:
            last_offset = replica.append(now_ms, list(records))
            self._pending.append((last_offset, controller_epoch, future))

        driver.step(write)
        return await future

    # -- Raft, for the handlers, tests and tools ---------------------------------------------------------------------

    async def handle_raft_request(self, request: Message) -> Message:
        """A Raft RPC from another replica (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch of __cluster_metadata)."""
        if self._driver is None:
            raise NotControllerError("The metadata quorum is not running on this node")
        return await self._driver.request(request)

    @property
    def high_watermark(self) -> int:
        """The committed offset: every offset below it is durable on a majority of voters."""
        return self._require_replica().high_watermark

    @property
    def applied_offset(self) -> int:
        """The offset up to which the listeners have been given the committed batches."""
        return self._applied_offset

    @property
    def metadata_log(self) -> KafkaMetadataLog:
        self._require_replica()
        return self._metadata_log

    @property
    def raft(self) -> RaftReplica:
        return self._require_replica()

    def describe_quorum(self) -> QuorumDescription | None:
        """What DescribeQuorum answers; None unless this node leads the quorum (only the leader knows the others)."""
        replica = self._replica
        described = replica.describe(self._time_ms()) if replica is not None else None
        if described is None:
            return None
        voters, observers = described
        return QuorumDescription(leader_id=replica.leader_id, leader_epoch=replica.epoch,
                                 high_watermark=replica.high_watermark,
                                 voters=tuple(_replica_state(progress) for progress in voters),
                                 observers=tuple(_replica_state(progress) for progress in observers))

    # -- internals ---------------------------------------------------------------------------------------------------

    def _require_replica(self) -> RaftReplica:
        if self._replica is None:
            raise NotControllerError("The metadata backend is not running")
        return self._replica

    def _after_step(self) -> None:
        """After every Raft step: hand newly committed batches to the listeners, complete the appends they hold,
        and tell of a change of leader."""
        replica, metadata_log = self._replica, self._metadata_log
        committed = min(replica.high_watermark, metadata_log.log_end_offset)
        if committed > self._applied_offset:
            for batch in metadata_log.read_batches(self._applied_offset, committed):
                if batch.records:
                    for listener in self._listeners:
                        listener.handle_commit(batch.records, batch.last_offset)
                self._applied_offset = batch.last_offset + 1
        if self._pending:
            still_pending = []
            for last_offset, epoch, future in self._pending:
                if last_offset < self._applied_offset:
                    if not future.done():
                        future.set_result(last_offset)
                elif replica.is_leader and replica.epoch == epoch:
                    still_pending.append((last_offset, epoch, future))
                elif not future.done():
                    future.set_exception(NotControllerError(
                        f"Leadership of epoch {epoch} was lost before offset {last_offset} was committed"))
            self._pending = still_pending
        leader = self.active_controller()
        if leader != self._leader:
            self._set_leader(leader)
        self._progress.set()
        self._progress = asyncio.Event()

    def _set_leader(self, leader: tuple[int, int] | None) -> None:
        if leader is not None:
            log.info("metadata quorum: node %d leads epoch %d%s", leader[0], leader[1],
                     " (this node: the active controller)" if leader[0] == self.node_id else "")
        self._leader = leader
        for callback in self._controller_listeners:
            callback()

    def _fail_pending(self, reason: str) -> None:
        for _, _, future in self._pending:
            if not future.done():
                future.set_exception(NotControllerError(reason))
        self._pending = []


def _replica_state(progress: ReplicaProgress) -> ReplicaState:
    return ReplicaState(progress.replica_id, progress.log_end_offset, progress.last_fetch_timestamp,
                        progress.last_caught_up_timestamp)
