"""BrokerLifecycleManager: a KRaft broker's side of its registration and liveness (Kafka's BrokerLifecycleManager).

On start the broker registers with the active controller (a new incarnation id per process; its listeners, rack,
the metadata.version range it supports) and gets its broker epoch, fenced. It then heartbeats with the metadata
offset it has applied: every broker.heartbeat.interval.ms once unfenced, and sooner while fenced so it is unfenced as
soon as it has caught up with its own registration. start() returns once it is unfenced: the broker serves clients
only from then on. A heartbeat answered STALE_BROKER_EPOCH or BROKER_ID_NOT_REGISTERED (the controller lost or
replaced the registration) registers the broker again.

Controlled shutdown: the heartbeats ask want_shut_down; the controller moves the broker's leaderships to other
in-sync replicas and answers should_shut_down once the broker has applied that change, and the broker stops.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Sequence

from kfk.controller.features import supported_features
from kfk.errors import ErrorCode, KafkaError
from kfk.metadata.image import Endpoint
from kfk.protocol.messages.broker_heartbeat import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
)
from kfk.protocol.messages.broker_registration import (
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from kfk.server.controller_channel import ControllerChannel

log = logging.getLogger("kfk.server.lifecycle")

BROKER_REGISTRATION_VERSION = 4
BROKER_HEARTBEAT_VERSION = 1
#: How often a broker that waits for the controller asks again (fenced at start, or in a controlled shutdown).
FENCED_HEARTBEAT_INTERVAL_MS = 50
#: Errors after which the broker registers again.
_REREGISTER = {ErrorCode.STALE_BROKER_EPOCH, ErrorCode.BROKER_ID_NOT_REGISTERED}


class BrokerLifecycleManager:
    def __init__(self, node_id: int, cluster_id: str, channel: ControllerChannel, metadata_offset: Callable[[], int],
                 endpoints: Callable[[], Sequence[Endpoint]], rack: str | None, heartbeat_interval_ms: int,
                 log_dirs: Sequence[uuid.UUID] = (), previous_broker_epoch: int = -1,
                 registration_lacks_log_dirs: Callable[[], bool] = lambda: False) -> None:
        self.node_id = node_id
        #: The directory ids of the broker's log dirs, which a controller at metadata.version 3.7-IV2 or later
        #: records (and requires).
        self.log_dirs = list(log_dirs)
        #: Whether the metadata.version now records log dirs and this broker's registration has none (it registered
        #: before an upgrade to 3.7-IV2): the broker then registers again, amending its registration (Kafka's
        #: BrokerRegistrationTracker).
        self.registration_lacks_log_dirs = registration_lacks_log_dirs
        self.cluster_id = cluster_id
        self.channel = channel
        self.metadata_offset = metadata_offset
        self.endpoints = endpoints
        self.rack = rack
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.incarnation_id = uuid.uuid4()
        #: The last broker epoch this node had: from its clean-shutdown marker at first (-1 after a crash, which
        #: the controller takes as an unclean shutdown), then its latest registration's.
        self.broker_epoch = previous_broker_epoch
        self.is_fenced = True
        self._want_shut_down = False
        self._unfenced = asyncio.Event()
        self._should_shut_down = asyncio.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    async def start(self) -> None:
        """Register, then heartbeat in the background; returns once the controller has unfenced this broker."""
        await self._register()
        self._task = asyncio.get_running_loop().create_task(self._run())
        await self._unfenced.wait()

    async def _register(self) -> None:
        Listener = BrokerRegistrationRequest.Listener
        request = BrokerRegistrationRequest(
            broker_id=self.node_id, cluster_id=self.cluster_id, incarnation_id=self.incarnation_id,
            listeners=[Listener(name=e.listener_name, host=e.host, port=e.port, security_protocol=e.security_protocol)
                       for e in self.endpoints()],
            features=[BrokerRegistrationRequest.Feature(name=name, min_supported_version=low,
                                                        max_supported_version=high)
                      for name, (low, high) in supported_features().items()],
            rack=self.rack, log_dirs=self.log_dirs, previous_broker_epoch=self.broker_epoch)
        while True:
            response: BrokerRegistrationResponse = await self.channel.send(
                request, BROKER_REGISTRATION_VERSION, timeout_ms=2**31 - 1)
            if response.error_code == ErrorCode.NONE:
                self.broker_epoch = response.broker_epoch
                self.is_fenced = True
                log.debug("broker %d registered with broker epoch %d", self.node_id, self.broker_epoch)
                return
            if response.error_code == ErrorCode.INCONSISTENT_CLUSTER_ID:
                raise KafkaError(f"the controller's cluster id is not this broker's {self.cluster_id}")
            log.warning("registration of broker %d refused: %s; retrying", self.node_id,
                        ErrorCode(response.error_code).name)
            await asyncio.sleep(self.heartbeat_interval_ms / 1000)

    async def _heartbeat(self) -> None:
        request = BrokerHeartbeatRequest(broker_id=self.node_id, broker_epoch=self.broker_epoch,
                                         current_metadata_offset=self.metadata_offset(),
                                         want_fence=False, want_shut_down=self._want_shut_down)
        response: BrokerHeartbeatResponse = await self.channel.send(
            request, BROKER_HEARTBEAT_VERSION, timeout_ms=self.heartbeat_interval_ms)
        if response.error_code in _REREGISTER:
            log.warning("broker %d: heartbeat answered %s, registering again", self.node_id,
                        ErrorCode(response.error_code).name)
            await self._register()
            return
        if response.error_code != ErrorCode.NONE:
            log.warning("broker %d: heartbeat answered %s", self.node_id, ErrorCode(response.error_code).name)
            return
        if self.is_fenced != response.is_fenced:
            log.info("broker %d is %s", self.node_id, "fenced" if response.is_fenced else "unfenced")
        self.is_fenced = response.is_fenced
        if not response.is_fenced:
            self._unfenced.set()
        if response.should_shut_down:
            self._should_shut_down.set()

    async def _run(self) -> None:
        while not self._should_shut_down.is_set():
            self._wake.clear()
            try:
                if self.log_dirs and not self.is_fenced and not self._want_shut_down \
                        and self.registration_lacks_log_dirs():
                    log.info("broker %d: the metadata.version records log dirs: registering them", self.node_id)
                    await self._register()
                await self._heartbeat()
            except KafkaError as error:  # no controller within the interval: the next heartbeat tries again
                log.info("broker %d: heartbeat failed: %s", self.node_id, error)
            except Exception:
                log.exception("broker %d: heartbeat failed", self.node_id)
            # Waiting for something (to be unfenced the first time, to be let go in a controlled shutdown): ask often.
            waiting = (self.is_fenced and not self._unfenced.is_set()) or self._want_shut_down
            interval_ms = FENCED_HEARTBEAT_INTERVAL_MS if waiting else self.heartbeat_interval_ms
            try:
                await asyncio.wait_for(self._wake.wait(), interval_ms / 1000)
            except TimeoutError:
                pass

    async def controlled_shutdown(self, timeout_ms: int) -> bool:
        """Ask for a controlled shutdown and wait until the controller says the broker may stop (False: it did not
        within `timeout_ms`, the broker stops anyway)."""
        if self._task is None or self._task.done():
            return False
        self._want_shut_down = True
        self._wake.set()
        try:
            await asyncio.wait_for(self._should_shut_down.wait(), timeout_ms / 1000)
            return True
        except TimeoutError:
            return False

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
