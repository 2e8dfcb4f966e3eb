"""ZooKeeperMetadataBackend: cluster metadata in a real ZooKeeper ensemble, in Kafka's znode layout (kazoo).

kazoo is imported only in this package (DESIGN.md). This class is the facade that implements MetadataBackend and
owns the state shared between the concerns (the session's client, the controller epoch, the image delivered); the
blocking ZooKeeper work lives beside it: session.py (open, close, expire; the cluster id), election.py (the
controller election), reader.py (reading the znodes with watches), writes.py (multi-op commits),
registration.py (the broker's ephemeral znode), producer_ids.py (producer-id blocks) and admin_requests.py
(the requests tools leave under /admin). What it does for the MetadataBackend protocol:
- `start` reads Kafka's znodes (setting a watch on each) and gives every listener the records that build that state
  (translation.records_for); afterwards every watch that fires marks its path dirty and one refresh task re-reads
  the dirty paths and delivers the difference. A refresh reads in an executor thread (kazoo's calls block) and
  delivers on the event loop, so listeners see changes in the order they were read.
- `elect_controller` is Kafka's ZooKeeper election: create the ephemeral /controller znode (the first broker to do
  so wins; the others see it through their watch), then increment /controller_epoch with a conditional set. The
  epoch's zkVersion fences: every write of this controller is one multi-op that starts with a version check on
  /controller_epoch, so a deposed controller's write fails whole (NotControllerError).
- `append` turns records into that multi-op (translation.operations_for), commits it, re-reads what it touched and
  delivers it to the listeners before returning. The offsets are ZooKeeper zxids: the largest zxid seen in what was
  read, so they only grow.
- Broker registration is the broker's own ephemeral /brokers/ids/<id> (its czxid is the broker epoch): it vanishes
  when the broker's session ends (crash, kill -9, network partition), which is how the controller learns of a
  broker failure; listeners see the broker fenced.
- Leaders persist ISR changes themselves (`alter_partition`): a conditional set of the partition's state znode on
  the partition epoch (its zkVersion) plus an /isr_change_notification znode, as Kafka's ZooKeeper-mode leaders do.
- Session expiry: kazoo reports the session LOST; the backend forgets that it was controller (the ephemeral
  /controller is gone with the session) and tells its session listeners, and when the new session is established it
  re-creates the broker's registration and re-reads everything (watches do not survive a session).

Why brokers watch ZooKeeper instead of receiving LeaderAndIsr/UpdateMetadata/StopReplica requests from the
controller: kfk's brokers already act on metadata through one path, the MetadataImage (the replica manager makes
partitions leader/follower/stopped from image changes, the group coordinator follows it too). Watching the znodes
feeds that same path with the same records as the embedded backend, whereas controller-to-broker requests would need
a second, push-based path with its own retries and ordering. Fencing is unchanged: every state znode carries the
leader epoch and the controller epoch, and the zkVersion checks make stale writers fail. The cost is ZooKeeper
reads on every broker per change (Kafka 0.8 brokers did the same for a while); for clusters of the size a Python
broker serves that is a few milliseconds per change.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Callable, Iterable, Sequence

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, NoNodeError, SessionExpiredError

from kfk.backends.zookeeper import znodes
from kfk.backends.zookeeper.admin_requests import AdminRequestHandler, delete_served_requests
from kfk.backends.zookeeper.election import elect
from kfk.backends.zookeeper.producer_ids import claim_producer_id_block
from kfk.backends.zookeeper.reader import ZnodeReader, paths_to_reread
from kfk.backends.zookeeper.registration import create_registration
from kfk.backends.zookeeper.session import close_session, expire_session, open_session, split_chroot
from kfk.backends.zookeeper.translation import Operation, ZooKeeperSnapshot, operations_for, records_for
from kfk.backends.zookeeper.writes import commit
from kfk.common.clock import Clock, system_time_ms
from kfk.controller.backend import MetadataListener
from kfk.controller.features import zookeeper_supported_features
from kfk.controller.producer_ids import ProducerIdsBlock
from kfk.errors import KafkaTimeoutError, NotControllerError
from kfk.metadata.image import Endpoint, MetadataImage
from kfk.protocol.message import Message

log = logging.getLogger("kfk.backends.zookeeper")

__all__ = ["ZooKeeperMetadataBackend", "AdminRequestHandler"]

#: What kazoo raises while the connection or the session is down: an expected, recovered state, not a bug.
_SESSION_ERRORS = (ConnectionLoss, SessionExpiredError, ConnectionClosedError)


class ZooKeeperMetadataBackend:
    def __init__(self, connect: str, node_id: int, cluster_id: str | None = None, *,
                 expected_cluster_id: str | None = None, session_timeout_ms: int = 18_000,
                 connection_timeout_ms: int | None = None, time_ms: Clock = system_time_ms) -> None:
        """`cluster_id`: the id of this cluster (a new ZooKeeper store is created with it; one with another id
        is refused). `expected_cluster_id`: the id of a broker's log dirs, which must be ZooKeeper's; a new store
        gets a new random id then, as Kafka does, so log dirs of another cluster are refused, not adopted."""
        self.connect_string = connect
        self._expected_cluster_id = expected_cluster_id
        self.node_id = node_id
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self._cluster_id = cluster_id
        self._time_ms = time_ms
        self._client: KazooClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listeners: list[MetadataListener] = []
        self._controller_listeners: list[Callable[[], None]] = []
        self._session_listeners: list[Callable[[str], None]] = []
        self._admin_request_handler: AdminRequestHandler | None = None
        self._admin_requests_in_flight = False
        self._reader = ZnodeReader(self._on_watch)
        self._read_lock = threading.Lock()
        self._image = MetadataImage(cluster_id=cluster_id)
        self._snapshot = ZooKeeperSnapshot()
        #: Paths whose watch fired since the last refresh; None: read everything (start, new session).
        self._dirty: set[str] | None = None
        self._refresh_lock = asyncio.Lock()
        self._refresher: asyncio.Task | None = None
        self._write_lock = asyncio.Lock()
        self._controller_epoch: int | None = None  # the epoch this node won, while it is the controller
        self._controller_epoch_version = -1
        #: Elections won so far: a snapshot read before the latest win must not make this node resign.
        self._elections = 0
        self._registration: tuple[bytes, int] | None = None  # (broker znode data, broker epoch)
        self._session_lost = False
        self._started = False
        self._stopping = False

    # -- connection --------------------------------------------------------------------------------------------------

    @property
    def cluster_id(self) -> str:
        return self._cluster_id or ""

    async def connect(self) -> str:
        """Open the session (creating the chroot and Kafka's persistent znodes if missing) and read or create
        /cluster/id; returns the cluster id. The broker calls this before it opens its logs: the id given to the
        constructor (its meta.properties') must be ZooKeeper's, else InconsistentClusterIdError. `start` calls
        this if nobody did."""
        if self._client is not None:
            return self.cluster_id
        self._loop = asyncio.get_running_loop()
        self._cluster_id = await self._blocking(self._connect)
        self._image = MetadataImage(cluster_id=self._cluster_id)
        return self._cluster_id

    def _connect(self) -> str:
        client, stored = open_session(self.connect_string, self.session_timeout_ms, self.connection_timeout_ms,
                                      self._cluster_id, self._expected_cluster_id)
        client.add_listener(self._on_session_state)
        self._client = client
        return stored

    # -- MetadataBackend ---------------------------------------------------------------------------------------------

    def add_listener(self, listener: MetadataListener) -> None:
        self._listeners.append(listener)

    def add_controller_listener(self, listener: Callable[[], None]) -> None:
        """Called (on the loop) whenever the active controller or its epoch changes, or this node loses it."""
        self._controller_listeners.append(listener)

    def set_admin_request_handler(self, handler: AdminRequestHandler) -> None:
        """While this node is the controller, `handler` gets the topic deletions and the reassignment plan that
        Kafka's ZooKeeper-based tools write under /admin; their znodes are removed once it returns (the
        reassignment then goes on through the partitions' adding/removing replicas)."""
        self._admin_request_handler = handler

    def add_session_listener(self, listener: Callable[[str], None]) -> None:
        """Called with "expired" when the ZooKeeper session is lost and "reconnected" once a new one is up."""
        self._session_listeners.append(listener)

    async def start(self) -> None:
        await self.connect()
        self._started = True
        self._dirty = None
        await self._refresh()

    async def stop(self) -> None:
        self._stopping = True
        if self._refresher is not None:
            self._refresher.cancel()
        async with self._write_lock:
            self._controller_epoch = None
            client, self._client = self._client, None
            if client is not None:
                await self._blocking(close_session, client)

    async def elect_controller(self, node_id: int) -> int | None:
        if node_id != self.node_id:
            return None
        async with self._write_lock:
            won = await self._blocking(self._elect_under_read_lock)
            if won is None:
                await self._refresh()
                return None
            self._controller_epoch, self._controller_epoch_version = won
        log.info("broker %d is the controller in epoch %d", node_id, won[0])
        self._mark_dirty([znodes.CONTROLLER_PATH, znodes.CONTROLLER_EPOCH_PATH])
        await self._refresh()
        return won[0]

    def _elect_under_read_lock(self) -> tuple[int, int] | None:
        with self._read_lock:
            won = elect(self._require_client(), self.node_id, self._time_ms())
            if won is not None:
                self._elections += 1
            return won

    def active_controller(self) -> tuple[int, int] | None:
        if self._controller_epoch is not None:
            return self.node_id, self._controller_epoch
        snapshot = self._snapshot
        if snapshot.controller_id is None:
            return None
        return snapshot.controller_id, snapshot.controller_epoch

    @property
    def is_controller(self) -> bool:
        return self._controller_epoch is not None

    async def append(self, records: Sequence[Message], controller_epoch: int) -> int:
        if not records:
            raise ValueError("nothing to append")
        async with self._write_lock:
            if self._controller_epoch is None or controller_epoch != self._controller_epoch:
                raise NotControllerError(f"Controller epoch {controller_epoch} is not the current epoch "
                                         f"{self._controller_epoch} of broker {self.node_id}")
            async with self._refresh_lock:
                before = self._image
                after = before.apply(records, before.offset)
                operations = operations_for(before, after, records, controller_epoch,
                                            self._controller_epoch_version, self._reader.known_path,
                                            self._reader.config_of)
                await self._blocking(self._commit, operations)
            self._mark_dirty(paths_to_reread(operations))
            await self._refresh()
            return self._image.offset

    def _commit(self, operations: list[Operation]) -> list:
        try:
            return commit(self._require_client(), operations, self.node_id)
        except NotControllerError:
            self._controller_epoch = None  # fenced by a newer controller's epoch
            raise

    # -- broker registration and leaders' ISR changes ---------------------------------------------------------------

    async def register_broker(self, endpoints: Sequence[Endpoint], rack: str | None) -> int:
        """Create this broker's ephemeral /brokers/ids/<id>; returns its broker epoch (the znode's czxid). A znode
        left by this broker's previous session (a crash moments ago) is waited out until that session expires."""
        data = znodes.encode_broker(endpoints, rack, self._time_ms(), zookeeper_supported_features())
        broker_epoch = await self._blocking(self._create_registration, data)
        self._registration = (data, broker_epoch)
        self._mark_dirty([znodes.BROKER_IDS_PATH, znodes.broker_path(self.node_id)])
        await self._refresh()
        log.info("broker %d registered in ZooKeeper (broker epoch %d)", self.node_id, broker_epoch)
        return broker_epoch

    async def update_registration(self, endpoints: Sequence[Endpoint], rack: str | None) -> None:
        """Rewrite this broker's /brokers/ids/<id> with new endpoints (a dynamic `listeners`), as Kafka's
        updateBrokerInfo does; the znode, and so the broker epoch, stay. Every broker's watch sees the change."""
        if self._registration is None:
            return
        data = znodes.encode_broker(endpoints, rack, self._time_ms(), zookeeper_supported_features())
        await self._blocking(self._require_client().set, znodes.broker_path(self.node_id), data)
        self._registration = (data, self._registration[1])
        self._mark_dirty([znodes.broker_path(self.node_id)])
        await self._refresh()

    def _create_registration(self, data: bytes) -> int:
        return create_registration(self._require_client(), self.node_id, data, self.session_timeout_ms)

    async def alter_partition(self, topic: str, partition: int, leader: int, leader_epoch: int,
                              isr: Sequence[int], partition_epoch: int) -> int:
        """A leader's ISR change: rewrite the state znode if its zkVersion is still `partition_epoch` (else
        InvalidUpdateVersionError: the controller or an earlier write changed it first), and leave an ISR change
        notification. Returns the new partition epoch once this node's listeners have seen it."""
        state = self._snapshot.partition_states.get((topic, partition))
        controller_epoch = state.controller_epoch if state is not None else self._snapshot.controller_epoch
        path = znodes.partition_state_path(topic, partition)
        operations = [
            Operation("set", path, znodes.encode_partition_state(leader, leader_epoch, isr, controller_epoch),
                      version=partition_epoch),
            Operation("create", f"{znodes.ISR_CHANGE_NOTIFICATION_PATH}/{znodes.ISR_CHANGE_PREFIX}",
                      znodes.encode_isr_change_notification([(topic, partition)]), sequential=True),
        ]
        await self._blocking(self._commit, operations)
        self._mark_dirty([path])
        await self._refresh()
        return partition_epoch + 1

    async def allocate_producer_ids(self, broker_id: int) -> ProducerIdsBlock:
        """The next block of producer ids for a broker (Kafka's ZkProducerIdManager: every broker claims its blocks
        itself with a conditional write of /latest_producer_id_block, so a block is never handed out twice)."""
        return await self._blocking(claim_producer_id_block, self._require_client(), broker_id)

    # -- reading -----------------------------------------------------------------------------------------------------

    def _on_watch(self, event) -> None:
        """kazoo's thread: a watch fired (event.path None: the connection state changed, every watch is gone)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        path = event.path
        if path is not None:
            _, chroot = split_chroot(self.connect_string)
            if chroot and path.startswith(chroot):
                path = path[len(chroot):] or "/"
        try:
            loop.call_soon_threadsafe(self._mark_dirty, None if path is None else [path])
        except RuntimeError:
            pass  # the loop closed

    def _mark_dirty(self, paths: Iterable[str] | None) -> None:
        if paths is None:
            self._dirty = None
        elif self._dirty is not None:
            self._dirty.update(paths)
        if self._started and not self._stopping and (self._refresher is None or self._refresher.done()):
            self._refresher = asyncio.get_running_loop().create_task(self._refresh_soon())

    async def _refresh_soon(self) -> None:
        """The watch-driven refresher. A failed read is retried here, reading everything again: this task is the
        refresher until it returns, so marking the paths dirty would not start another one, and without a later
        watch event the image would stay stale (a broker that never learns of another's registration)."""
        while self._started and not self._stopping:
            try:
                await self._refresh(until_clean=True)
                return
            except asyncio.CancelledError:
                raise
            except KafkaTimeoutError as error:
                # The connection or the session is down (_blocking): that was logged once as a state change; read
                # again until the session is back (each attempt fails at once while kazoo is reconnecting).
                log.debug("reading ZooKeeper failed: %s", error)
            except Exception:  # noqa: BLE001 - retried below
                log.exception("reading ZooKeeper failed")
            await asyncio.sleep(0.5)
            self._dirty = None

    async def _refresh(self, until_clean: bool = False) -> None:
        """Re-read the dirty znodes and deliver what changed to the listeners: one pass (enough for a caller that
        marked its paths dirty before calling: a pass that took them finished before this one got the lock), or,
        for the watch-driven refresher, passes until nothing is dirty. The lock is released between passes, so
        that under a stream of changes a writer waiting for its own change is served in turn."""
        while True:
            async with self._refresh_lock:
                if self._client is None or (self._dirty is not None and not self._dirty):
                    return
                dirty, self._dirty = self._dirty, set()
                snapshot, elections = await self._blocking(self._read, dirty)
                self._deliver(snapshot, elections)
            if not until_clean:
                return

    def _deliver(self, snapshot: ZooKeeperSnapshot, elections: int) -> None:
        previous = self._snapshot
        self._snapshot = snapshot
        records = records_for(self._image, snapshot)
        if records:
            offset = max(snapshot.offset, self._image.offset + 1)
            self._image = self._image.apply(records, offset)
            for listener in self._listeners:
                listener.handle_commit(records, offset)
        if (previous.controller_id, previous.controller_epoch) != (snapshot.controller_id,
                                                                   snapshot.controller_epoch):
            if self._controller_epoch is not None and elections == self._elections and (
                    snapshot.controller_id != self.node_id or snapshot.controller_epoch > self._controller_epoch):
                log.warning("broker %d is no longer the controller (now %s, epoch %d)", self.node_id,
                            snapshot.controller_id, snapshot.controller_epoch)
                self._controller_epoch = None
            for listener in self._controller_listeners:
                listener()
        if (snapshot.delete_topic_requests or snapshot.reassignment_request) and self._controller_epoch is not None \
                and self._admin_request_handler is not None and not self._admin_requests_in_flight:
            self._admin_requests_in_flight = True
            asyncio.get_running_loop().create_task(self._serve_admin_requests(
                list(snapshot.delete_topic_requests), dict(snapshot.reassignment_request)))

    async def _serve_admin_requests(self, deletions: list[str],
                                    reassignment: dict[tuple[str, int], list[int]]) -> None:
        try:
            await self._admin_request_handler(deletions, reassignment)
            await self._blocking(delete_served_requests, self._require_client(), deletions, reassignment)
        except Exception:  # noqa: BLE001 - retried on the next change
            log.exception("serving the requests under /admin failed")
        finally:
            self._admin_requests_in_flight = False

    def _read(self, dirty: set[str] | None) -> tuple[ZooKeeperSnapshot, int]:
        """In the executor: the reader's snapshot, and how many elections this node had won when the read
        started."""
        with self._read_lock:
            elections = self._elections
            snapshot = self._reader.read(self._require_client(), dirty,
                                         consume_isr_changes=self._controller_epoch is not None)
            return snapshot, elections

    # -- sessions ----------------------------------------------------------------------------------------------------

    def _on_session_state(self, state: str) -> None:
        """kazoo's thread: must not block."""
        loop = self._loop
        if loop is None or loop.is_closed() or self._stopping:
            return
        try:
            loop.call_soon_threadsafe(self._session_state_changed, state)
        except RuntimeError:
            pass

    def _session_state_changed(self, state: str) -> None:
        if self._stopping:
            return
        if state == KazooState.SUSPENDED:
            log.warning("broker %d lost its connection to ZooKeeper; reconnecting (the session lasts %d ms)",
                        self.node_id, self.session_timeout_ms)
        elif state == KazooState.LOST:
            log.warning("ZooKeeper session of broker %d expired", self.node_id)
            self._session_lost = True
            if self._controller_epoch is not None:
                log.warning("broker %d resigns as controller (session expired)", self.node_id)
                self._controller_epoch = None
                for listener in self._controller_listeners:
                    listener()
            for listener in self._session_listeners:
                listener("expired")
        elif state == KazooState.CONNECTED:
            if self._session_lost:
                self._session_lost = False
                asyncio.get_running_loop().create_task(self._reestablish())
            else:
                log.info("broker %d reconnected to ZooKeeper in the same session", self.node_id)
                self._mark_dirty(None)

    async def _reestablish(self) -> None:
        """A new session: register again, read everything again (the old session's watches are gone)."""
        try:
            if self._registration is not None:
                data, _ = self._registration
                broker_epoch = await self._blocking(self._create_registration, data)
                self._registration = (data, broker_epoch)
                log.info("broker %d registered again in a new ZooKeeper session (broker epoch %d)", self.node_id,
                         broker_epoch)
            self._mark_dirty(None)
            await self._refresh()
        except KafkaTimeoutError as error:
            # Lost again before re-registering: the next session's CONNECTED starts over.
            log.warning("re-registering broker %d in ZooKeeper failed: %s", self.node_id, error)
        except Exception:  # noqa: BLE001
            log.exception("re-registering broker %d in ZooKeeper failed", self.node_id)
        for listener in self._session_listeners:
            listener("reconnected")

    def expire_session_for_testing(self) -> None:
        """Make ZooKeeper expire this backend's session, the way ZooKeeper's own tests do it: a second client that
        joins the session with its id and password, then closes it."""
        expire_session(self._require_client(), self.connect_string, self.session_timeout_ms,
                       self.connection_timeout_ms)

    async def read_znode(self, path: str) -> bytes | None:
        """The data of one znode (None if absent), for tools and tests that look at Kafka's layout."""
        def get() -> bytes | None:
            try:
                return self._require_client().get(path)[0]
            except NoNodeError:
                return None

        return await self._blocking(get)

    async def create_znode(self, path: str, data: bytes = b"") -> None:
        """Create a persistent znode (and its parents), as Kafka's ZooKeeper-based tools write requests under
        /admin."""
        await self._blocking(lambda: self._require_client().create(path, data, makepath=True))

    async def znode_children(self, path: str) -> list[str]:
        def children() -> list[str]:
            try:
                return sorted(self._require_client().get_children(path))
            except NoNodeError:
                return []

        return await self._blocking(children)

    # -- internals ---------------------------------------------------------------------------------------------------

    @property
    def image(self) -> MetadataImage:
        """What this backend's listeners have been given."""
        return self._image

    def _require_client(self) -> KazooClient:
        if self._client is None:
            raise NotControllerError("The ZooKeeper backend is not connected")
        return self._client

    async def _blocking(self, function, *args):
        """Run kazoo's blocking work in an executor. While the connection or the session is down kazoo raises its
        own errors; callers (the controller, a leader's ISR change, the replica manager) get the retriable
        REQUEST_TIMED_OUT instead, as for any metadata write that could not be made in time."""
        try:
            return await asyncio.get_running_loop().run_in_executor(None, function, *args)
        except _SESSION_ERRORS as error:
            raise KafkaTimeoutError(f"ZooKeeper is unreachable ({type(error).__name__}); broker {self.node_id} "
                                    f"retries once its session is back") from error
