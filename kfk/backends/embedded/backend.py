"""EmbeddedMetadataBackend: metadata kept in the __cluster_metadata log, replicated by a Raft quorum (KRaft).

The voters are `controller.quorum.voters` (static, KIP-595): a mapping of node id to the VoterEndpoint its Raft
requests go to (from kfk.config.parse_quorum_voters, the one parser of that setting); or, with `dynamic` (KIP-853,
`controller.quorum.bootstrap.servers`), whatever the log says: the VotersRecord of the newest snapshot (the
bootstrap 0-0.checkpoint `kfk storage format --standalone | --initial-controllers` writes) and those appended since,
changed by AddRaftVoter/RemoveRaftVoter (`handle_raft_request`). A node formatted with no voters starts as an observer
and finds the leader through the bootstrap servers. With no voters, or this node alone, the quorum is this
node, which elects itself on start and commits each write as soon as it is flushed: `kfk server start` with no
configuration starts as fast as ever. With several, the Raft state machine (kfk/backends/embedded/raft/) decides who
leads, run by a RaftDriver (raft_driver.py) over channels from `channel_factory`. A sole voter is elected when the
controller calls `elect_controller` (nobody else could be); only then is its log, committed as a whole by its first
batch of the new epoch, replayed to the listeners.

How the broker wires it (kfk/server/broker.py, the composition root):
- `EmbeddedMetadataBackend(log_dir, node_id, cluster_id, {id: VoterEndpoint(id, host, port) for id, (host, port) in
  config.quorum_voter_addresses.items()},
  raft_config=RaftConfig.from_values(config.values), channel_factory=BrokerChannel)`;
- the Raft RPCs other voters send (Vote, BeginQuorumEpoch, EndQuorumEpoch, and Fetch for `__cluster_metadata`)
  go to `handle_raft_request` (kfk/server/handlers/raft.py), DescribeQuorum to `describe_quorum`;
- the active controller is the Raft leader: `add_controller_listener` tells of every change of leader, and
  `elect_controller` returns the epoch once this node leads and has replayed the log up to its epoch's start.

The MetadataBackend contract: `append` writes one batch as leader and returns once the high watermark has passed
it (NotControllerError when this node does not lead `controller_epoch`, or loses the lead before the batch commits);
listeners get every committed batch in log order on every node, voters and observers alike. State that must
survive a crash (epoch, vote) is in `quorum-state` (quorum_state.py), written before it is acted on.

Snapshots (snapshots/): the backend keeps the committed MetadataImage. Once
`metadata.log.max.record.bytes.between.snapshots` bytes were appended (as leader or follower) since the last
snapshot, or `metadata.log.max.snapshot.interval.ms` passed with anything appended, it writes the image as
`<end offset>-<epoch>.checkpoint` in the background and trims its log behind it (log start offset advanced to the
snapshot's end, whole segments below it and older snapshots deleted): every node, voter or observer, so the metadata
log stays bounded. A replica whose fetch offset the leader's log no longer holds fetches the leader's snapshot
(FetchSnapshot, KIP-630: the Raft replica drives it, snapshots/store.py keeps the files); once it is whole the
backend replaces its image with it and hands the new image to the listeners (`handle_snapshot`). A dynamic quorum's
snapshots carry the voter set as of their end offset (kraft.version 1), so it trims too: a controller added later,
or one that was away, learns the voters from the leader's snapshot and the log after it, and its Raft replica
starts its voter set history again from the snapshot's. start() loads the newest snapshot that reads and replays
only the log after it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, Sequence

from kfk.backends.embedded.metadata_log import KafkaMetadataLog
from kfk.backends.embedded.quorum_state import FileQuorumStateStore
from kfk.backends.embedded.raft import RaftConfig, RaftReplica, VoterEndpoint
from kfk.backends.embedded.raft.leader_state import ReplicaProgress
from kfk.backends.embedded.raft.voter_set import ZERO_UUID, VoterSet, VoterSetHistory
from kfk.backends.embedded.raft_driver import ChannelFactory, RaftDriver
from kfk.backends.embedded.snapshots import (
    Snapshot,
    SnapshotId,
    SnapshotStore,
    delete_snapshots_before,
    image_records,
    latest_valid_snapshot,
    write_snapshot,
)
from kfk.backends.embedded.snapshots.snapshot_file import delete_partial_snapshots
from kfk.backends.embedded.voters_record import from_voters_record, to_voters_record
from kfk.common.clock import Clock, system_time_ms
from kfk.common.constants import NO_NODE
from kfk.common.features import METADATA_VERSION_FEATURE_NAME
from kfk.controller.backend import MetadataListener
from kfk.errors import InvalidConfigurationError, KafkaStorageError, NotControllerError
from kfk.metadata.image import MetadataImage
from kfk.protocol.message import Message

log = logging.getLogger("kfk.backends.embedded")

#: How long a resigning leader gives its EndQuorumEpoch requests to reach the other voters before it stops.
RESIGN_GRACE_S = 0.5
#: Kafka's defaults for metadata.log.max.record.bytes.between.snapshots and metadata.log.max.snapshot.interval.ms.
DEFAULT_SNAPSHOT_MAX_NEW_RECORD_BYTES = 20 * 1024 * 1024
DEFAULT_SNAPSHOT_MAX_INTERVAL_MS = 60 * 60 * 1000


@dataclass(frozen=True, slots=True)
class DynamicQuorum:
    """A dynamic quorum's settings for this node (KIP-853): where to look for the leader, the directory id of its
    metadata log dir, and its own controller listeners `(name, host, port)` (none on a broker-only node)."""

    bootstrap_servers: tuple[VoterEndpoint, ...]
    directory_id: uuid.UUID
    listeners: tuple[tuple[str, str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """One replica of the metadata log as its leader sees it (DescribeQuorum's ReplicaState)."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int
    directory_id: uuid.UUID = ZERO_UUID


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """The metadata quorum as its leader describes it: epoch, committed offset, voters and observers."""

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: tuple[ReplicaState, ...]
    observers: tuple[ReplicaState, ...] = ()
    #: Each voter's listeners `(name, host, port)` as the voter set has them (empty for a static sole voter).
    voter_listeners: Mapping[int, tuple[tuple[str, str, int], ...]] = field(default_factory=dict)


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
                 rng: random.Random | None = None,
                 snapshot_max_new_record_bytes: int = DEFAULT_SNAPSHOT_MAX_NEW_RECORD_BYTES,
                 snapshot_max_interval_ms: int = DEFAULT_SNAPSHOT_MAX_INTERVAL_MS,
                 segment_bytes: int | None = None, dynamic: DynamicQuorum | None = None,
                 listener_name: str | None = None) -> None:
        """`listener_name`: the controller listener the voters are reached on (controller.listener.names' first)."""
        self.log_dir = log_dir
        self.node_id = node_id
        self.dynamic = dynamic
        self.listener_name = listener_name
        self.endpoints = {} if dynamic is not None else _voter_map(node_id, voters)
        #: The static voters (a dynamic quorum's are the log's: `voters` once started).
        self._static_voters = tuple(sorted(self.endpoints))
        self._snapshot_voters: Message | None = None
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
        self._segment_bytes = segment_bytes
        #: The committed image, what a snapshot writes; the epoch and append time of the batch that holds its last
        #: record (the snapshot's id epoch and its header's lastContainedLogTimestamp).
        self.image = MetadataImage(cluster_id=cluster_id)
        self._image_epoch = 0
        self._image_timestamp = 0
        self._snapshot_max_new_record_bytes = snapshot_max_new_record_bytes
        self._snapshot_max_interval_ms = snapshot_max_interval_ms
        self._bytes_since_snapshot = 0
        self._appended_bytes_seen = 0
        self._last_snapshot_ms = 0
        self._snapshot_task: asyncio.Task | None = None
        self._stopping = False
        self._snapshots: SnapshotStore | None = None

    # -- MetadataBackend ---------------------------------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    @property
    def latest_snapshot_id(self) -> SnapshotId | None:
        """The newest snapshot on disk (loaded, written or fetched from the leader), None if there is none."""
        return self._snapshots.latest if self._snapshots is not None else None

    def add_listener(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    def add_controller_listener(self, callback: Callable[[], None]) -> None:
        """Called on every change of the quorum's leader (and so of the active controller)."""
        self._controller_listeners.append(callback)

    @property
    def kraft_version(self) -> int:
        """The quorum's finalized kraft.version: 1 for dynamic voters (KIP-853: formatted with a KRaftVersion 1
        control record), 0 for static controller.quorum.voters."""
        return 0 if self.dynamic is None else 1

    @property
    def voters(self) -> tuple[int, ...]:
        """The voters' ids: the static ones, or the newest voter set in the log of a running dynamic quorum."""
        if self._replica is not None:
            return tuple(sorted(self._replica.voters))
        return self._static_voters

    def endpoint_of(self, node_id: int) -> VoterEndpoint | None:
        """Where a voter's (or a known leader's) controller listener is."""
        if self._replica is not None:
            return self._replica.endpoint(node_id)
        return self.endpoints.get(node_id)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        metadata_log = await loop.run_in_executor(None, lambda: KafkaMetadataLog.open(
            self.log_dir, self._time_ms(), self._segment_bytes, time_ms=self._time_ms))
        store = FileQuorumStateStore(metadata_log.directory, data_version=0 if self.dynamic is None else 1)
        stored = await loop.run_in_executor(None, store.read)
        epoch = 0 if stored is None else stored.epoch
        latest_logged_epoch = metadata_log.latest_epoch()
        if latest_logged_epoch is not None and latest_logged_epoch > epoch:
            raise KafkaStorageError(
                f"The metadata log {metadata_log.directory} holds epoch {latest_logged_epoch}, beyond the epoch "
                f"{epoch} of its quorum-state file")
        self._metadata_log = metadata_log
        self._stopping = False
        self._last_snapshot_ms = self._time_ms()  # the interval between snapshots counts from the start
        self._appended_bytes_seen = metadata_log.appended_bytes
        self._applied_offset = 0
        self._snapshots = SnapshotStore(metadata_log.directory)
        await self._load_snapshot(metadata_log)
        self._replica = await self._new_replica(metadata_log, store)
        self._driver = RaftDriver(self._replica, self._time_ms, self._after_step,
                                  self.raft_config.request_timeout_ms, self._channel_factory)
        self._driver.step(lambda now_ms: None)
        self._driver.start()
        log.info("metadata log %s opened up to offset %d (epoch %d), voters %s; node %d is %s",
                 metadata_log.directory, metadata_log.log_end_offset - 1, self._replica.epoch,
                 ",".join(map(str, self.voters)), self.node_id, self._replica.state.role.value.lower())

    async def _new_replica(self, metadata_log: KafkaMetadataLog, store: FileQuorumStateStore) -> RaftReplica:
        listener_name = self.listener_name or "CONTROLLER"
        dynamic = self.dynamic
        if dynamic is None:
            history = VoterSetHistory(VoterSet.static(
                [endpoint or node_id for node_id, endpoint in self.endpoints.items()], listener_name))
            return RaftReplica(self.node_id, history, self.raft_config, metadata_log, store, self._rng,
                               self._time_ms(), self._cluster_id, snapshots=self._snapshots,
                               listener_name=listener_name)
        initial = VoterSet() if self._snapshot_voters is None else from_voters_record(self._snapshot_voters)
        changes = await self._blocking(metadata_log.voter_sets)
        return RaftReplica(self.node_id, VoterSetHistory(initial, changes), self.raft_config, metadata_log, store,
                           self._rng, self._time_ms(), self._cluster_id, snapshots=self._snapshots, dynamic=True,
                           directory_id=dynamic.directory_id, listeners=dynamic.listeners,
                           listener_name=listener_name, bootstrap_servers=dynamic.bootstrap_servers)

    async def resign(self) -> None:
        """A graceful shutdown's first step: a leader of several voters stops appending and sends EndQuorumEpoch
        (waiting briefly for it to go out), so that the most caught-up voter runs at once."""
        driver, replica = self._driver, self._replica
        if driver is not None and replica is not None and replica.is_leader and len(replica.voters) > 1:
            driver.step(replica.resign)
            await driver.drain(RESIGN_GRACE_S)

    async def stop(self) -> None:
        driver = self._driver
        if driver is None:
            return
        self._stopping = True
        if self._snapshot_task is not None:
            await asyncio.gather(self._snapshot_task, return_exceptions=True)
            self._snapshot_task = None
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
        if self.voters == (self.node_id,) and self._driver is not None and self.dynamic is None:
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
        if future.done():
            await asyncio.sleep(0)  # a sole voter commits at once: still let other tasks (a snapshot) run between appends
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
        voter_set = replica.voter_set
        return QuorumDescription(leader_id=replica.leader_id, leader_epoch=replica.epoch,
                                 high_watermark=replica.high_watermark,
                                 voters=tuple(_replica_state(progress, voter_set) for progress in voters),
                                 observers=tuple(_replica_state(progress, voter_set) for progress in observers),
                                 voter_listeners={voter.node_id: voter.listeners for voter in voter_set})

    # -- internals ---------------------------------------------------------------------------------------------------

    def _require_replica(self) -> RaftReplica:
        if self._replica is None:
            raise NotControllerError("The metadata backend is not running")
        return self._replica

    def _after_step(self) -> None:
        """After every Raft step: hand newly committed batches to the listeners, complete the appends they hold,
        and tell of a change of leader."""
        replica, metadata_log = self._replica, self._metadata_log
        installed = self._snapshots.take_installed()
        if installed is not None:
            self._install_snapshot(installed)
        committed = min(replica.high_watermark, metadata_log.log_end_offset)
        if committed > metadata_log.high_watermark:
            metadata_log.update_high_watermark(committed)  # the Log's own, which bounds trimming behind snapshots
        if committed > self._applied_offset:
            for batch in metadata_log.read_batches(self._applied_offset, committed):
                if batch.records:
                    self._notify(batch.records, batch.last_offset, batch.epoch, batch.timestamp)
                self._applied_offset = batch.last_offset + 1
            self._bytes_since_snapshot += metadata_log.appended_bytes - self._appended_bytes_seen
            self._appended_bytes_seen = metadata_log.appended_bytes
            self._maybe_snapshot()
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

    def _notify(self, records: list[Message], last_offset: int, epoch: int, timestamp: int) -> None:
        self.image = self.image.apply(records, last_offset)
        self._follow_metadata_version()
        self._image_epoch, self._image_timestamp = epoch, timestamp
        for listener in self._listeners:
            listener.handle_commit(records, last_offset)

    def _follow_metadata_version(self) -> None:
        """The log writes at the committed image's metadata.version (as a new leader must, whatever it wrote last)."""
        level = self.image.feature_level(METADATA_VERSION_FEATURE_NAME)
        if level and self._metadata_log is not None:
            self._metadata_log.metadata_version_level = level

    def _fail_pending(self, reason: str) -> None:
        for _, _, future in self._pending:
            if not future.done():
                future.set_exception(NotControllerError(reason))
        self._pending = []

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
            await self._blocking(metadata_log.truncate_fully_and_start_at, end_offset, snapshot.snapshot_id.epoch)
        metadata_log.start_epoch = snapshot.snapshot_id.epoch
        self._snapshots.added(snapshot.snapshot_id)
        self._snapshot_voters = snapshot.voters
        self._applied_offset = end_offset
        if snapshot.records:
            self._notify(snapshot.records, end_offset - 1, snapshot.snapshot_id.epoch,
                         snapshot.last_contained_log_timestamp)
        log.info("metadata snapshot %s loaded: %d records", snapshot.snapshot_id, len(snapshot.records))

    def _install_snapshot(self, snapshot: Snapshot) -> None:
        """A snapshot fetched from the leader (the Raft replica has emptied the log to start at its end): it
        replaces the image whole, since the records between the old image and it are gone, and the listeners get
        the new image whole too."""
        end_offset = snapshot.snapshot_id.end_offset
        self.image = MetadataImage(cluster_id=self._cluster_id).apply(snapshot.records, end_offset - 1)
        self._follow_metadata_version()
        self._image_epoch, self._image_timestamp = snapshot.snapshot_id.epoch, snapshot.last_contained_log_timestamp
        self._applied_offset = end_offset
        self._bytes_since_snapshot = 0
        self._appended_bytes_seen = self._metadata_log.appended_bytes
        for listener in self._listeners:
            listener.handle_snapshot(self.image)
        log.info("metadata snapshot %s fetched from the leader loaded: %d records; the log now starts at %d",
                 snapshot.snapshot_id, len(snapshot.records), end_offset)

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
        metadata_log = self.metadata_log
        snapshot_id = SnapshotId(image.offset + 1, epoch)
        if image.offset < 0 or (self.latest_snapshot_id is not None and snapshot_id <= self.latest_snapshot_id):
            return None
        self._bytes_since_snapshot = 0
        self._last_snapshot_ms = now_ms = self._time_ms()
        # A dynamic quorum's snapshots carry the voter set (kraft.version 1), as of the snapshot's end.
        voters = None if self.dynamic is None else to_voters_record(
            self.raft.voter_history.as_of(snapshot_id.end_offset))
        await self._blocking(lambda: write_snapshot(metadata_log.directory, snapshot_id, image_records(image),
                                                    last_contained_log_timestamp=timestamp, now_ms=now_ms,
                                                    voters=voters))
        # The snapshot is known, then the log start moves past what it covers, on the event loop between two Raft
        # steps: a step never finds the log start moved under it, and from then on a fetch below it is sent to the
        # snapshot. Only the files (segments wholly below the start, older snapshots) go in the background.
        self._snapshots.added(snapshot_id)
        metadata_log.log.maybe_increment_log_start_offset(snapshot_id.end_offset)

        def delete_files() -> None:
            metadata_log.log.delete_old_segments(self._time_ms())
            delete_snapshots_before(metadata_log.directory, snapshot_id)

        await self._blocking(delete_files)
        log.info("metadata snapshot %s written; the log now starts at %d", snapshot_id,
                 metadata_log.log.log_start_offset)
        return snapshot_id

    @staticmethod
    async def _blocking(function, *args):
        """File work (fsync, snapshot files) runs off the event loop."""
        return await asyncio.get_running_loop().run_in_executor(None, function, *args)



def _replica_state(progress: ReplicaProgress, voter_set: VoterSet) -> ReplicaState:
    voter = voter_set.get(progress.replica_id)
    return ReplicaState(progress.replica_id, progress.log_end_offset, progress.last_fetch_timestamp,
                        progress.last_caught_up_timestamp, voter.directory_id if voter is not None else ZERO_UUID)
