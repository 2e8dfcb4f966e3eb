"""ClassicGroupMember: one member of a classic group (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) for any protocol
type, Java's AbstractCoordinator. The consumer (protocol type ``consumer``, kfk.client.consumer.coordinator) and
Kafka Connect's distributed workers (protocol type ``connect``, kfk.connect.distributed) are its subclasses.

The group coordinator never looks inside the protocol metadata a member sends with JoinGroup or the assignment the
leader hands out with SyncGroup: both are opaque bytes whose format belongs to the protocol type. So this class does
the membership (join and sync rounds, the member id of KIP-394, generations, heartbeats, leaving, finding the
coordinator again), and the subclass says what it offers and what an assignment means, through four hooks:

- ``_join_protocols()``: the (protocol name, metadata) pairs to join with, in order of preference;
- ``_perform_assignment(join)``: for the leader, every member's assignment as bytes;
- ``_on_join_prepare()`` and ``_on_join_complete(generation, member_id, protocol, assignment)``: run in the
  caller's thread (ensure_active_group) before a join round and after a successful one.

Threads: the join/sync round and the heartbeats run on the client's network loop; ensure_active_group() waits for
the round from the caller's thread and runs the hooks there, so a subclass's callbacks (the consumer's rebalance
listener, a Connect worker stopping its tasks) never run on the network thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import logging
import threading
import time

from kfk.client.event_loop import LoopRunner
from kfk.client.network_client import ExponentialBackoff, NetworkClient, monotonic_ms
from kfk.client.offsets import find_coordinator
from kfk.client.response_errors import response_error
from kfk.common.constants import NO_NODE
from kfk.errors import ErrorCode, KafkaError, KafkaTimeoutError, NetworkError
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.heartbeat import HeartbeatRequest, HeartbeatResponse
from kfk.protocol.messages.join_group import JoinGroupRequest, JoinGroupResponse
from kfk.protocol.messages.leave_group import LeaveGroupRequest, LeaveGroupResponse
from kfk.protocol.messages.sync_group import SyncGroupRequest, SyncGroupResponse

#: JoinGroupResponse is exported because the leader's hook (_perform_assignment) reads the members from it.
__all__ = ["ClassicGroupMember", "MemberState", "RejoinNeeded", "JoinGroupResponse", "NO_GENERATION",
           "UNKNOWN_MEMBER_ID"]

log = logging.getLogger("kfk.client.group")

NO_GENERATION = -1
UNKNOWN_MEMBER_ID = ""
JOIN_GROUP_EXTRA_TIMEOUT_MS = 5000  # Java gives JoinGroup rebalance.timeout.ms plus this much

COORDINATOR_ERRORS = frozenset({ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR})
MEMBER_LOST_ERRORS = frozenset({ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION,
                                ErrorCode.FENCED_INSTANCE_ID})


class MemberState(enum.Enum):
    UNJOINED = "unjoined"
    PREPARING_REBALANCE = "preparing_rebalance"
    COMPLETING_REBALANCE = "completing_rebalance"
    STABLE = "stable"


class RejoinNeeded(Exception):
    """The join/sync round must start over (with the reason for the log)."""


class ClassicGroupMember:
    #: The group's protocol type (``consumer``, ``connect``): JoinGroup fails with INCONSISTENT_GROUP_PROTOCOL when
    #: it differs from the group's.
    protocol_type: str = ""

    def __init__(self, network: NetworkClient, loop: LoopRunner, *, group_id: str, group_instance_id: str | None,
                 session_timeout_ms: int, rebalance_timeout_ms: int, heartbeat_interval_ms: int,
                 retry_backoff: ExponentialBackoff) -> None:
        self.network = network
        self.loop = loop
        self.group_id = group_id
        self.group_instance_id = group_instance_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.retry_backoff = retry_backoff
        self.coordinator_id = NO_NODE
        self.generation_id = NO_GENERATION
        self.member_id = UNKNOWN_MEMBER_ID
        self.protocol_name: str | None = None
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True
        self._needs_join_prepare = True
        self._last_heartbeat_ok_ms = monotonic_ms()
        self._heartbeat_task = None
        self._join_future: concurrent.futures.Future | None = None
        self._closed = False
        self._lock = threading.Lock()

    # --- what a subclass says ----------------------------------------------------------------------------------------

    def _join_protocols(self) -> list[tuple[str, bytes]]:
        raise NotImplementedError

    async def _perform_assignment(self, join: JoinGroupResponse) -> dict[str, bytes]:
        raise NotImplementedError

    def _on_join_prepare(self) -> None:
        """Before a join round (once per rebalance, not per retry)."""

    def _on_join_complete(self, generation: int, member_id: str, protocol: str, assignment: bytes) -> None:
        raise NotImplementedError

    async def _on_heartbeat_due(self) -> bool:
        """Before each heartbeat, on the network thread; True skips it (the consumer leaves the group there when
        poll() has not been called for max.poll.interval.ms)."""
        return False

    def _on_member_lost(self) -> None:
        """A heartbeat said the member is no longer in the group (its assignment may already be someone else's)."""
        self._reset_generation()

    # --- the caller's side -------------------------------------------------------------------------------------------

    def ensure_coordinator_ready(self, deadline_ms: float) -> None:
        if self.coordinator_id != NO_NODE and self.network.knows_node(self.coordinator_id):
            return
        remaining = max(deadline_ms - monotonic_ms(), 1)
        self.coordinator_id = self.loop.run(find_coordinator(self.network, self.group_id, timeout_ms=remaining),
                                            remaining / 1000 + 1)

    def ensure_active_group(self, deadline_ms: float) -> bool:
        """Drive the join/sync round; False if it is still running at the deadline. The round runs on the network
        thread and survives across calls: JoinGroup legitimately waits until every member has rejoined, which may
        take longer than one call's timeout (other members may even be driven from this very thread)."""
        self._start_heartbeats()
        while self.rejoin_needed or self.state != MemberState.STABLE:
            if self._join_future is None:
                if monotonic_ms() >= deadline_ms:
                    return False
                try:
                    self.ensure_coordinator_ready(deadline_ms)
                except KafkaTimeoutError:
                    return False
                if self._needs_join_prepare:
                    self._on_join_prepare()
                    self._needs_join_prepare = False
                self._join_future = self.loop.submit(self._join_and_sync())
            try:
                generation, member_id, protocol, assignment = self._join_future.result(
                    max(deadline_ms - monotonic_ms(), 0) / 1000)
            except concurrent.futures.TimeoutError:
                return False
            except RejoinNeeded as reason:
                log.info("group %s: rejoining (%s)", self.group_id, reason)
                continue
            except KafkaError as error:
                if not error.retriable:
                    raise
                log.info("group %s: rejoining after %s", self.group_id, error)
                time.sleep(self.retry_backoff.initial_ms / 1000)
                continue
            finally:
                if self._join_future is not None and self._join_future.done():
                    self._join_future = None
            with self._lock:
                self.generation_id, self.member_id, self.protocol_name = generation, member_id, protocol
                self.state = MemberState.STABLE
                self.rejoin_needed = False
                self._needs_join_prepare = True
                self._last_heartbeat_ok_ms = monotonic_ms()
            self._on_join_complete(generation, member_id, protocol, assignment)
        return True

    # --- join and sync (network thread) ------------------------------------------------------------------------------

    async def _join_and_sync(self) -> tuple[int, str, str, bytes]:
        with self._lock:
            self.state = MemberState.PREPARING_REBALANCE
        network = self.network
        coordinator = self.coordinator_id
        protocols = [JoinGroupRequest.JoinGroupRequestProtocol(name=name, metadata=metadata)
                     for name, metadata in self._join_protocols()]
        try:
            version = await network.api_version(coordinator, ApiKey.JOIN_GROUP)
            request = JoinGroupRequest(
                group_id=self.group_id, session_timeout_ms=self.session_timeout_ms,
                rebalance_timeout_ms=self.rebalance_timeout_ms if version >= 1 else -1,
                member_id=self.member_id, group_instance_id=self.group_instance_id if version >= 5 else None,
                protocol_type=self.protocol_type, protocols=protocols,
                reason="rebalance" if version >= 8 else None)
            join = await network.send(coordinator, request, version=version,
                                      timeout_ms=self.rebalance_timeout_ms + JOIN_GROUP_EXTRA_TIMEOUT_MS)
        except (NetworkError, KafkaTimeoutError) as error:
            self._coordinator_dead(f"JoinGroup failed: {error}")
            raise RejoinNeeded(str(error)) from None
        assert isinstance(join, JoinGroupResponse)
        await self._check_group_error(join.error_code, "JoinGroup", join.member_id)
        with self._lock:
            self.generation_id = join.generation_id
            self.member_id = join.member_id
            self.protocol_name = join.protocol_name
            self.state = MemberState.COMPLETING_REBALANCE
        assignments: list[SyncGroupRequest.SyncGroupRequestAssignment] = []
        if join.leader == join.member_id and not join.skip_assignment:
            computed = await self._perform_assignment(join)
            assignments = [SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=data)
                           for member, data in computed.items()]
        try:
            version = await network.api_version(coordinator, ApiKey.SYNC_GROUP)
            request = SyncGroupRequest(
                group_id=self.group_id, generation_id=join.generation_id, member_id=join.member_id,
                group_instance_id=self.group_instance_id if version >= 3 else None,
                protocol_type=self.protocol_type if version >= 5 else None,
                protocol_name=join.protocol_name if version >= 5 else None, assignments=assignments)
            sync = await network.send(coordinator, request, version=version)
        except (NetworkError, KafkaTimeoutError) as error:
            self._coordinator_dead(f"SyncGroup failed: {error}")
            raise RejoinNeeded(str(error)) from None
        assert isinstance(sync, SyncGroupResponse)
        await self._check_group_error(sync.error_code, "SyncGroup", join.member_id)
        return join.generation_id, join.member_id, join.protocol_name, sync.assignment

    async def _check_group_error(self, code: int, api: str, member_id: str) -> None:
        """Raise RejoinNeeded for errors a new join round fixes, the error itself for fatal ones."""
        if code == ErrorCode.NONE:
            return
        if code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = member_id  # KIP-394: join again with the id the coordinator gave us
            raise RejoinNeeded("the coordinator assigned a member id")
        if code in MEMBER_LOST_ERRORS and code != ErrorCode.FENCED_INSTANCE_ID:
            self._reset_generation()
            raise RejoinNeeded(f"{api}: {ErrorCode(code).name}")
        if code in COORDINATOR_ERRORS:
            self._coordinator_dead(f"{api}: {ErrorCode(code).name}")
            raise RejoinNeeded(f"{api}: {ErrorCode(code).name}")
        if code in (ErrorCode.REBALANCE_IN_PROGRESS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            await asyncio.sleep(self.retry_backoff.initial_ms / 1000)
            raise RejoinNeeded(f"{api}: {ErrorCode(code).name}")
        with self._lock:
            self.state = MemberState.UNJOINED
        raise response_error(code, f"{api} for group {self.group_id!r}")

    # --- membership changes ------------------------------------------------------------------------------------------

    def _reset_generation(self) -> None:
        with self._lock:
            self.generation_id = NO_GENERATION
            self.member_id = UNKNOWN_MEMBER_ID
            self.state = MemberState.UNJOINED
            self.rejoin_needed = True

    def _coordinator_dead(self, reason: str) -> None:
        if self.coordinator_id != NO_NODE:
            log.info("group %s: coordinator %d is unavailable or invalid (%s); will rediscover", self.group_id,
                     self.coordinator_id, reason)
            self.network.disconnect(self.coordinator_id)
        self.coordinator_id = NO_NODE

    def request_rejoin(self, reason: str) -> None:
        log.info("group %s: rejoin requested (%s)", self.group_id, reason)
        self.rejoin_needed = True

    # --- heartbeats (network thread) ---------------------------------------------------------------------------------

    def _start_heartbeats(self) -> None:
        if self._heartbeat_task is None:
            self._heartbeat_task = self.loop.submit(self._heartbeat_loop())

    def _stop_heartbeats(self) -> None:
        self._closed = True
        if self._heartbeat_task is not None:
            self._heartbeat_task.cancel()

    async def _heartbeat_loop(self) -> None:
        while not self._closed:
            await asyncio.sleep(self.heartbeat_interval_ms / 1000)
            if self.state != MemberState.STABLE or self.coordinator_id == NO_NODE:
                continue
            if await self._on_heartbeat_due():
                continue
            if monotonic_ms() - self._last_heartbeat_ok_ms > self.session_timeout_ms:
                self._coordinator_dead("no successful heartbeat within session.timeout.ms")
                continue
            await self._heartbeat()

    async def _heartbeat(self) -> None:
        coordinator, generation, member_id = self.coordinator_id, self.generation_id, self.member_id
        try:
            version = await self.network.api_version(coordinator, ApiKey.HEARTBEAT)
            request = HeartbeatRequest(group_id=self.group_id, generation_id=generation, member_id=member_id,
                                       group_instance_id=self.group_instance_id if version >= 3 else None)
            response = await self.network.send(coordinator, request, version=version)
        except (NetworkError, KafkaTimeoutError) as error:
            self._coordinator_dead(f"heartbeat failed: {error}")
            return
        assert isinstance(response, HeartbeatResponse)
        code = response.error_code
        if code == ErrorCode.NONE:
            self._last_heartbeat_ok_ms = monotonic_ms()
        elif code == ErrorCode.REBALANCE_IN_PROGRESS:
            self._last_heartbeat_ok_ms = monotonic_ms()
            if generation == self.generation_id:
                self.request_rejoin("the group is rebalancing")
        elif code in MEMBER_LOST_ERRORS:
            if generation == self.generation_id:
                log.info("group %s: heartbeat says %s; the member must rejoin", self.group_id,
                         ErrorCode(code).name)
                self._on_member_lost()
        elif code in COORDINATOR_ERRORS:
            self._coordinator_dead(f"heartbeat: {ErrorCode(code).name}")
        else:
            log.warning("group %s: heartbeat failed: %s", self.group_id, response_error(code, "heartbeat"))

    def leave(self, reason: str, timeout_ms: float) -> None:
        """Stop heartbeating and leave the group now (a closing member), so that the group rebalances without
        waiting for session.timeout.ms."""
        self._stop_heartbeats()
        try:
            self.loop.run(self._leave_group(reason), timeout_ms / 1000 + 1)
        except KafkaError as error:
            log.info("group %s: leaving failed: %s", self.group_id, error)

    async def _leave_group(self, reason: str) -> None:
        """Leave now (dynamic members only: a static member keeps its place for session.timeout.ms)."""
        coordinator, member_id = self.coordinator_id, self.member_id
        if coordinator == NO_NODE or member_id == UNKNOWN_MEMBER_ID or self.group_instance_id is not None:
            return
        try:
            version = await self.network.api_version(coordinator, ApiKey.LEAVE_GROUP)
            if version >= 3:
                request = LeaveGroupRequest(group_id=self.group_id, members=[LeaveGroupRequest.MemberIdentity(
                    member_id=member_id, group_instance_id=None, reason=reason if version >= 5 else None)])
            else:
                request = LeaveGroupRequest(group_id=self.group_id, member_id=member_id)
            response = await self.network.send(coordinator, request, version=version)
            assert isinstance(response, LeaveGroupResponse)
            if response.error_code != ErrorCode.NONE:
                log.info("group %s: LeaveGroup: %s", self.group_id, ErrorCode(response.error_code).name)
        except KafkaError as error:
            log.info("group %s: LeaveGroup failed: %s", self.group_id, error)
