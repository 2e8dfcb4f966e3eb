"""ConsumerProtocolCoordinator: the consumer's group membership under group.protocol=consumer (KIP-848), the
I/O around kfk.client.consumer.membership's state machine.

The coordinator assigns; there is no JoinGroup/SyncGroup round and no client-side assignor. A heartbeat task on the
network thread sends ConsumerGroupHeartbeat when the state machine says one is due (at once while joining,
acknowledging or leaving; else every heartbeat interval the coordinator gave). poll() (the caller's thread) does
what the rebalance listener must see, as Java's consumer does in poll():
- a new target assignment: commit what was consumed (enable.auto.commit), on_partitions_revoked for the partitions
  taken away, then on_partitions_assigned for the new ones, then acknowledge (the next heartbeat lists the partitions
  now owned, which lets the coordinator give the revoked ones to their next owner);
- fenced (FENCED_MEMBER_EPOCH, UNKNOWN_MEMBER_ID) or poll() too late (max.poll.interval.ms, the member left):
  on_partitions_lost (the partitions may already be someone else's: no commit), then join again with epoch 0.
Commits carry the member epoch (OffsetCommit v9); a commit answered STALE_MEMBER_EPOCH is retried with the epoch the
latest heartbeat brought while the member is still in the group. Offsets, auto-commit and the listener calls are the
classic coordinator's (ConsumerCoordinator), which this class extends.
"""

from __future__ import annotations

import asyncio
import logging

from kfk.client.consumer.coordinator import ConsumerCoordinator
from kfk.client.consumer.membership import ConsumerMembership, MemberState, TopicIdPartition
from kfk.client.network_client import monotonic_ms
from kfk.client.offsets import find_coordinator
from kfk.common.constants import NO_NODE
from kfk.common.structs import TopicPartition
from kfk.errors import KafkaError, KafkaTimeoutError, NetworkError, RebalanceInProgressError
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse

__all__ = ["ConsumerProtocolCoordinator", "DEFAULT_HEARTBEAT_INTERVAL_MS"]

log = logging.getLogger("kfk.client.consumer")

#: Kafka's group.consumer.heartbeat.interval.ms default: how often poll() looks at the group before the coordinator
#: has told its own interval.
DEFAULT_HEARTBEAT_INTERVAL_MS = 5000
#: How long poll() waits at least for the metadata naming a new assignment's topics (the assignment names topic ids),
#: even in a poll(0), so that the member does not acknowledge a part of its assignment only for want of names.
METADATA_WAIT_MS = 1000
#: The OffsetCommit version that carries member epochs.
OFFSET_COMMIT_MEMBER_EPOCH_VERSION = 9


class ConsumerProtocolCoordinator(ConsumerCoordinator):
    def __init__(self, *args, server_assignor: str | None, **kwargs) -> None:
        super().__init__(*args, assignors=[], session_timeout_ms=0, heartbeat_interval_ms=DEFAULT_HEARTBEAT_INTERVAL_MS,
                         **kwargs)
        self.offset_commit_highest_version = OFFSET_COMMIT_MEMBER_EPOCH_VERSION
        self.membership = ConsumerMembership(
            group_id=self.group_id, group_instance_id=self.group_instance_id, rack_id=self.client_rack,
            rebalance_timeout_ms=self.rebalance_timeout_ms, server_assignor=server_assignor, clock=monotonic_ms,
            backoff_ms=self.retry_backoff.backoff_ms)
        self.member_id = self.membership.member_id
        self.rejoin_needed = False
        self._wakeup: asyncio.Event | None = None
        self._leave_answered: asyncio.Event | None = None

    # --- the caller's side: poll -------------------------------------------------------------------------------------

    def poll(self, deadline_ms: float) -> bool:
        self._last_poll_ms = monotonic_ms()
        self.invoke_completed_commit_callbacks()
        if self.subscriptions.has_auto_assigned_partitions:
            self._start_heartbeats()
            with self._lock:
                state, fatal = self.membership.state, self.membership.fatal_error
            if state == MemberState.FATAL:
                assert fatal is not None
                raise fatal
            if state == MemberState.FENCED:
                self._lose_partitions()
                with self._lock:
                    self.membership.on_partitions_lost()
                self._wake_heartbeats()
            elif state == MemberState.UNSUBSCRIBED:
                self.subscription_changed()
            self._reconcile(deadline_ms)
            self._update_rejoin_needed()
        self.maybe_auto_commit()
        return True

    def join_pending(self) -> bool:
        if not self.subscriptions.has_auto_assigned_partitions:
            return False
        with self._lock:
            return self.membership.state in (MemberState.FENCED, MemberState.FATAL, MemberState.UNSUBSCRIBED) or (
                self.membership.assignment_to_reconcile() is not None)

    def _reconcile(self, deadline_ms: float) -> None:
        """Revoke, then assign, then acknowledge (see the module's docstring). Partitions of topics whose ids the
        metadata does not know yet are left for a later poll, after a metadata refresh."""
        with self._lock:
            target = self.membership.assignment_to_reconcile()
        if target is None:
            return
        cluster = self.network.cluster
        if any(cluster.topic_name(topic_id) is None for topic_id, _ in target):
            self.network.request_metadata_update()
            wait_ms = max(deadline_ms - monotonic_ms(), METADATA_WAIT_MS)
            try:
                cluster = self.loop.run(self.network.refresh_metadata(timeout_ms=wait_ms), wait_ms / 1000)
            except KafkaError as error:
                log.info("group %s: metadata for the assignment not fetched yet: %s", self.group_id, error)
        resolved: dict[TopicPartition, TopicIdPartition] = {}
        for topic_id, partition in target:
            name = cluster.topic_name(topic_id)
            if name is not None:
                resolved[TopicPartition(name, partition)] = (topic_id, partition)
        owned = self.subscriptions.assigned_partitions()
        revoked = sorted(tp for tp in owned if tp not in resolved)
        added = sorted(tp for tp in resolved if tp not in set(owned))
        if revoked:
            self.maybe_auto_commit_sync()
            self._invoke_revoked(revoked)
        self.subscriptions.assign_from_subscribed(sorted(resolved))
        self.fetcher.clear_buffered(set(resolved))
        log.info("group %s: member %s epoch %d reconciled: revoked %s, assigned %s", self.group_id,
                 self.membership.member_id, self.membership.member_epoch,
                 ", ".join(map(str, revoked)) or "nothing", ", ".join(map(str, added)) or "nothing")
        self._invoke_assigned(added)
        with self._lock:
            self.membership.on_reconciled(resolved.values())
        self._wake_heartbeats()
        self.loop.call_soon(self.fetcher.wakeup)

    def _update_rejoin_needed(self) -> None:
        """Consumer.poll() loops straight back into poll() while this is set, instead of waiting for data."""
        with self._lock:
            self.rejoin_needed = self.membership.state in (MemberState.FENCED, MemberState.FATAL) or (
                self.membership.assignment_to_reconcile() is not None)
            self.generation_id = self.membership.member_epoch
            self.member_id = self.membership.member_id
            self.heartbeat_interval_ms = self.membership.heartbeat_interval_ms or DEFAULT_HEARTBEAT_INTERVAL_MS
        if self.rejoin_needed:
            self.fetcher.notify()

    def _member_ready(self) -> bool:
        with self._lock:
            return self.membership.in_group

    def _latest_commit_identity(self) -> tuple[int, str] | None:
        with self._lock:
            if not self.membership.in_group:
                return None
            return self.membership.member_epoch, self.membership.member_id

    def _fetch_identity(self) -> tuple[str, int] | None:
        """The member fetches its group's offsets as itself while it is in the group (the Java consumer's
        OffsetFetch v9 with member id and epoch), else as a tool."""
        latest = self._latest_commit_identity()
        return None if latest is None else (latest[1], latest[0])

    def _commit_identity(self) -> tuple[int, str]:
        if self.subscriptions.has_auto_assigned_partitions:
            latest = self._latest_commit_identity()
            if latest is None:
                raise RebalanceInProgressError(f"group {self.group_id!r}: the member is joining the group; the "
                                               "commit can be retried after the next poll()")
            return latest
        return -1, ""

    # --- subscription changes (caller's thread) ----------------------------------------------------------------------

    def subscription_changed(self) -> None:
        pattern = self.subscriptions.pattern
        with self._lock:
            if pattern is not None:
                self.membership.subscribe(regex=pattern.pattern)
            else:
                self.membership.subscribe(self.subscriptions.subscription)
        self._wake_heartbeats()

    def request_rejoin(self, reason: str) -> None:
        log.info("group %s: heartbeat now (%s)", self.group_id, reason)
        self._wake_heartbeats()

    def _on_metadata(self, cluster) -> None:
        """The coordinator matches regular expressions itself; only subscription() is kept up to date here."""
        if self.subscriptions.pattern is not None:
            self.subscriptions.match_pattern(name for name, topic in cluster.topics.items() if not topic.is_internal)

    def _reset_generation(self) -> None:
        with self._lock:
            self.generation_id = self.membership.member_epoch

    # --- heartbeats (network thread) ---------------------------------------------------------------------------------

    def _wake_heartbeats(self) -> None:
        self.loop.call_soon(self._set_wakeup)

    def _set_wakeup(self) -> None:
        if self._wakeup is not None:
            self._wakeup.set()

    async def _heartbeat_loop(self) -> None:
        try:
            await self._heartbeats()
        except Exception as error:  # a bug must not silently stop the membership: poll() raises it
            log.exception("group %s: the heartbeat task failed", self.group_id)
            with self._lock:
                self.membership.state = MemberState.FATAL
                self.membership.fatal_error = KafkaError(f"group {self.group_id!r}: the heartbeat task failed: "
                                                         f"{error!r}")
            self._after_heartbeat()

    async def _heartbeats(self) -> None:
        self._wakeup = asyncio.Event()
        while not self._closed:
            with self._lock:
                wait_ms = self.membership.time_to_next_heartbeat()
            if wait_ms > 0:
                self._wakeup.clear()
                try:
                    await asyncio.wait_for(self._wakeup.wait(), None if wait_ms == float("inf") else wait_ms / 1000)
                except asyncio.TimeoutError:
                    pass
                continue
            if self._poll_timer_expired():
                continue
            await self._heartbeat()

    def _poll_timer_expired(self) -> bool:
        """poll() not called for max.poll.interval.ms: leave, so that the stuck member's partitions move on; the
        next poll() loses them and joins again (Java's consumer does the same)."""
        with self._lock:
            if (self.membership.state == MemberState.LEAVING
                    or monotonic_ms() - self._last_poll_ms <= self.max_poll_interval_ms):
                return False
            log.warning("group %s: poll() was not called for more than max.poll.interval.ms (%d ms); leaving the "
                        "group so that its partitions can be reassigned", self.group_id, self.max_poll_interval_ms)
            return not self.membership.leave(then=MemberState.FENCED)

    async def _heartbeat(self) -> None:
        try:
            if self.coordinator_id == NO_NODE or not self.network.knows_node(self.coordinator_id):
                self.coordinator_id = await find_coordinator(self.network, self.group_id,
                                                             timeout_ms=self.network.config.request_timeout_ms)
            coordinator = self.coordinator_id
            with self._lock:
                needs_regex = self.membership.subscribed_regex is not None
            version = await self.network.api_version(coordinator, ApiKey.CONSUMER_GROUP_HEARTBEAT,
                                                     lowest=1 if needs_regex else 0)
            with self._lock:
                request = self.membership.build_heartbeat(version)
            response = await self.network.send(coordinator, request, version=version)
        except (NetworkError, KafkaTimeoutError) as error:
            self._coordinator_dead(f"heartbeat failed: {error}")
            with self._lock:
                self.membership.on_heartbeat_failed()
            self._after_heartbeat()
            return
        except KafkaError as error:
            if error.retriable:
                with self._lock:
                    self.membership.on_heartbeat_failed()
                return
            with self._lock:  # the broker does not speak the protocol, or a bad request: poll() raises it
                self.membership.state = MemberState.FATAL
                self.membership.fatal_error = type(error)(
                    f"group {self.group_id!r} cannot use group.protocol=consumer: {error}")
            self._after_heartbeat()
            return
        assert isinstance(response, ConsumerGroupHeartbeatResponse)
        with self._lock:
            state_before = self.membership.state
            coordinator_lost = self.membership.on_heartbeat_response(response)
            state = self.membership.state
        if coordinator_lost:
            self._coordinator_dead(f"ConsumerGroupHeartbeat: error {response.error_code}")
        if state != state_before:
            log.info("group %s: member %s epoch %d: %s -> %s", self.group_id, self.membership.member_id,
                     self.membership.member_epoch, state_before.value, state.value)
        self._after_heartbeat()

    def _after_heartbeat(self) -> None:
        self._update_rejoin_needed()
        if self._leave_answered is not None and self.membership.state != MemberState.LEAVING:
            self._leave_answered.set()

    async def _leave_group(self, reason: str) -> None:
        """Leave now, static members included (epoch -2 keeps a static member's assignment for its return within
        the session timeout); waits for the coordinator's answer, which the caller bounds."""
        with self._lock:
            leaving = self.membership.leave()
        if not leaving:
            return
        log.info("group %s: member %s leaving the group (%s)", self.group_id, self.membership.member_id, reason)
        self._leave_answered = asyncio.Event()
        self._start_heartbeats()
        self._set_wakeup()
        await self._leave_answered.wait()

    # --- closing -----------------------------------------------------------------------------------------------------

    def close(self, timeout_ms: float) -> None:
        """Commit (auto-commit), revoke, leave the group (answered or timed out), stop heartbeats."""
        try:
            if self.subscriptions.has_auto_assigned_partitions:
                with self._lock:
                    fenced = self.membership.state == MemberState.FENCED
                if fenced:
                    self._lose_partitions()
                else:
                    self.maybe_auto_commit_sync(timeout_ms)
                    self._invoke_revoked(self.subscriptions.assigned_partitions())
            else:
                self.maybe_auto_commit_sync(timeout_ms)
            self.invoke_completed_commit_callbacks()
            try:
                self.loop.run(self._leave_group("the consumer is being closed"), timeout_ms / 1000)
            except KafkaError as error:
                log.info("group %s: leaving failed: %s", self.group_id, error)
        finally:
            self._closed = True
            self._wake_heartbeats()
            if self._heartbeat_task is not None:
                self._heartbeat_task.cancel()
