"""ConsumerCoordinator: the consumer's side of a classic consumer group (JoinGroup/SyncGroup/Heartbeat/LeaveGroup,
OffsetCommit/OffsetFetch), Java's AbstractCoordinator + ConsumerCoordinator.

Who runs what:
- poll() (the caller's thread) drives rebalances, because the rebalance listener must run there, between two polls,
  as Java runs it: on_join_prepare (auto-commit, revoke), then JoinGroup and SyncGroup on the network thread, then
  on_join_complete (assign, listener). A member whose JoinGroup answer names it leader runs the assignor chosen by
  the coordinator (the first protocol every member supports, in the members' order of preference) over everyone's
  subscriptions and sends the result in SyncGroup.
- The heartbeat task (network thread) sends Heartbeat every heartbeat.interval.ms while the member is stable, so a
  slow poll loop does not lose the membership; it only flags what poll() must do: rejoin (REBALANCE_IN_PROGRESS),
  rejoin as a new member with its partitions lost (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, FENCED_INSTANCE_ID), or
  find the coordinator again. When poll() is not called for max.poll.interval.ms the task leaves the group, as
  Java's heartbeat thread does, so the stuck member's partitions go to someone else.

Rebalance protocols: EAGER (range, roundrobin, sticky) revokes every partition before joining. COOPERATIVE (when
every configured assignor supports it, i.e. only cooperative-sticky) keeps its partitions while rejoining, revokes
only those the new assignment takes away, and then rejoins once more so they can be handed over (KIP-429).
Errors that a retry fixes (the coordinator moved or is loading, a rebalance started under us) are retried inside
the poll's time budget; fatal ones (GROUP_AUTHORIZATION_FAILED, INCONSISTENT_GROUP_PROTOCOL,
INVALID_SESSION_TIMEOUT, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED) are raised from poll().
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable, Mapping
from typing import Protocol

from kfk.client.classic_group import (
    COORDINATOR_ERRORS,
    MEMBER_LOST_ERRORS,
    NO_GENERATION,
    UNKNOWN_MEMBER_ID,
    ClassicGroupMember,
    MemberState,
)
from kfk.client.consumer.assignors import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerPartitionAssignor,
    RebalanceProtocol,
    Subscription,
    decode_assignment,
    decode_assignment_user_data,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kfk.client.consumer.fetcher import Fetcher
from kfk.client.consumer.subscription_state import SubscriptionState
from kfk.client.event_loop import LoopRunner
from kfk.client.network_client import ExponentialBackoff, NetworkClient, monotonic_ms
from kfk.client.offsets import OFFSET_COMMIT_HIGHEST_VERSION, commit_offsets, fetch_committed, find_coordinator
from kfk.common.constants import NO_NODE
from kfk.common.structs import OffsetAndMetadata, TopicPartition
from kfk.errors import (
    ErrorCode,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    RebalanceInProgressError,
)
from kfk.protocol.messages.join_group import JoinGroupResponse

__all__ = ["ConsumerCoordinator", "ConsumerRebalanceListener", "MemberState"]

log = logging.getLogger("kfk.client.consumer")


class ConsumerRebalanceListener(Protocol):
    """Called from poll() in the caller's thread. ``on_partitions_lost`` (the member was fenced; the partitions
    may already belong to someone else, so do not commit) defaults to on_partitions_revoked in Java; callers of
    kfk may implement either."""

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None: ...

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None: ...


class ConsumerCoordinator(ClassicGroupMember):
    protocol_type = CONSUMER_PROTOCOL_TYPE

    def __init__(self, network: NetworkClient, loop: LoopRunner, subscriptions: SubscriptionState, fetcher: Fetcher,
                 *, group_id: str, group_instance_id: str | None, assignors: list[ConsumerPartitionAssignor],
                 session_timeout_ms: int, rebalance_timeout_ms: int, heartbeat_interval_ms: int,
                 max_poll_interval_ms: int, enable_auto_commit: bool, auto_commit_interval_ms: int,
                 retry_backoff: ExponentialBackoff, client_rack: str | None) -> None:
        super().__init__(network, loop, group_id=group_id, group_instance_id=group_instance_id,
                         session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=rebalance_timeout_ms,
                         heartbeat_interval_ms=heartbeat_interval_ms, retry_backoff=retry_backoff)
        self.subscriptions = subscriptions
        self.fetcher = fetcher
        self.assignors = assignors
        self.max_poll_interval_ms = max_poll_interval_ms
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.client_rack = client_rack or None
        self.offset_commit_highest_version = OFFSET_COMMIT_HIGHEST_VERSION
        self.rebalance_protocol = (RebalanceProtocol.COOPERATIVE
                                   if all(RebalanceProtocol.COOPERATIVE in a.supported_protocols for a in assignors)
                                   else RebalanceProtocol.EAGER)
        self.listener: ConsumerRebalanceListener | None = None
        self._partitions_lost = False
        self._last_poll_ms = monotonic_ms()
        self._next_auto_commit_ms = monotonic_ms() + auto_commit_interval_ms
        self._completed_commits: deque[tuple[Callable, dict, BaseException | None]] = deque()
        self._assignment_snapshot: dict[str, int] | None = None
        network.add_metadata_listener(self._on_metadata)

    # --- the caller's side: poll -------------------------------------------------------------------------------------

    def poll(self, deadline_ms: float) -> bool:
        """Do the group's work due in this poll; False if the group is not ready before the deadline."""
        self._last_poll_ms = monotonic_ms()
        self.invoke_completed_commit_callbacks()
        if self.subscriptions.has_auto_assigned_partitions:
            if self._partitions_lost:
                self._lose_partitions()
            if self.rejoin_needed or self.state != MemberState.STABLE:
                if not self.ensure_active_group(deadline_ms):
                    return False
        self.maybe_auto_commit()
        return True

    def join_pending(self) -> bool:
        """poll() would have to join (or rejoin) the group, which waits: the asyncio consumer does it off its loop."""
        return self.subscriptions.has_auto_assigned_partitions and (
            self._partitions_lost or self.rejoin_needed or self.state != MemberState.STABLE)

    def _on_join_prepare(self) -> None:
        """Before (re)joining: commit what was consumed, and give up partitions as the protocol requires."""
        self.maybe_auto_commit_sync()
        owned = self.subscriptions.assigned_partitions()
        if self.generation_id == NO_GENERATION and owned:
            self._lose_partitions()
            return
        if self.rebalance_protocol == RebalanceProtocol.EAGER:
            revoked = owned
        else:
            revoked = [tp for tp in owned if tp.topic not in self.subscriptions.subscription]
        if revoked:
            self._invoke_revoked(revoked)
            remaining = [tp for tp in owned if tp not in set(revoked)]
            self.subscriptions.assign_from_subscribed(remaining)
            self.fetcher.clear_buffered(set(remaining))

    def _on_join_complete(self, generation: int, member_id: str, protocol: str, assignment: bytes) -> None:
        assigned = decode_assignment(assignment)
        assignor = self._assignor(protocol)
        assignor.on_assignment(assigned, generation)
        receive_user_data = getattr(assignor, "on_assignment_user_data", None)
        if receive_user_data is not None:
            receive_user_data(decode_assignment_user_data(assignment))
        owned = set(self.subscriptions.assigned_partitions())
        new = set(assigned)
        self._next_auto_commit_ms = monotonic_ms() + self.auto_commit_interval_ms
        log.info("group %s: joined generation %d as %s (%s), assigned %s", self.group_id, generation, member_id,
                 protocol, ", ".join(str(tp) for tp in sorted(new)) or "nothing")
        if self.rebalance_protocol == RebalanceProtocol.COOPERATIVE:
            revoked = sorted(owned - new)
            added = sorted(new - owned)
            if revoked:
                self._invoke_revoked(revoked)
                self.rejoin_needed = True  # hand the revoked partitions over in a second rebalance
            self.subscriptions.assign_from_subscribed(assigned)
            self.fetcher.clear_buffered(new)
            self._invoke_assigned(added)
        else:
            self.subscriptions.assign_from_subscribed(assigned)
            self.fetcher.clear_buffered(new)
            self._invoke_assigned(sorted(new))
        # Metadata refreshed while the group rebalanced (a topic auto-created by this very join) was not checked
        # then: compare the assignment's snapshot with the latest metadata now, as Java's consumer does at each poll.
        self._rejoin_if_metadata_changed(self.network.cluster)

    def _lose_partitions(self) -> None:
        owned = self.subscriptions.assigned_partitions()
        self._partitions_lost = False
        if owned:
            log.info("group %s: partitions lost: %s", self.group_id, ", ".join(map(str, owned)))
            callback = getattr(self.listener, "on_partitions_lost", None)
            if callback is not None:
                self._call_listener(callback, owned)
            else:
                self._invoke_revoked(owned)
        self.subscriptions.assign_from_subscribed([])
        self.fetcher.clear_buffered()

    def _invoke_revoked(self, partitions: list[TopicPartition]) -> None:
        if self.listener is not None and partitions:
            self._call_listener(self.listener.on_partitions_revoked, partitions)

    def _invoke_assigned(self, partitions: list[TopicPartition]) -> None:
        if self.listener is not None:
            self._call_listener(self.listener.on_partitions_assigned, partitions)

    def _call_listener(self, callback: Callable, partitions: list[TopicPartition]) -> None:
        try:
            callback(list(partitions))
        except Exception:  # Java logs listener failures and carries on with the rebalance
            log.exception("group %s: the rebalance listener raised", self.group_id)

    def _assignor(self, name: str) -> ConsumerPartitionAssignor:
        for assignor in self.assignors:
            if assignor.name == name:
                return assignor
        raise KafkaError(f"the group chose assignor {name!r}, which this consumer does not have")

    # --- join and sync (network thread) ------------------------------------------------------------------------------

    def _join_protocols(self) -> list[tuple[str, bytes]]:
        self._assignment_snapshot = None
        topics = sorted(self.subscriptions.subscription)
        owned = self.subscriptions.assigned_partitions()
        return [(assignor.name, encode_subscription(Subscription(
                    topics, assignor.subscription_user_data(topics, owned, self.generation_id), owned,
                    self.generation_id, self.client_rack)))
                for assignor in self.assignors]

    async def _perform_assignment(self, join: JoinGroupResponse) -> dict[str, bytes]:
        assignor = self._assignor(join.protocol_name)
        subscriptions: dict[str, Subscription] = {}
        for member in join.members:
            subscription = decode_subscription(member.metadata)
            subscriptions[member.member_id] = subscription._replace(group_instance_id=member.group_instance_id)
        topics = {topic for subscription in subscriptions.values() for topic in subscription.topics}
        self.network.add_topics(topics)
        cluster = await self.network.refresh_metadata()
        partitions_per_topic = {topic: len(cluster.topics[topic].partitions) for topic in topics
                                if topic in cluster.topics and cluster.topics[topic].error_code == ErrorCode.NONE
                                and cluster.topics[topic].partitions}
        assignment = assignor.assign(partitions_per_topic, subscriptions)
        self._assignment_snapshot = {topic: partitions_per_topic.get(topic, 0) for topic in topics}
        log.debug("group %s: leader assigned with %s: %s", self.group_id, assignor.name, assignment)
        user_data_of = getattr(assignor, "assignment_user_data", None)
        user_data = user_data_of(assignment, subscriptions) if user_data_of is not None else {}
        return {member: encode_assignment(assignment.get(member, []), user_data.get(member))
                for member in subscriptions}

    # --- membership changes ------------------------------------------------------------------------------------------

    def request_rejoin(self, reason: str) -> None:
        super().request_rejoin(reason)
        self.fetcher.notify()

    def subscription_changed(self) -> None:
        self.request_rejoin("the subscription changed")

    def _on_metadata(self, cluster) -> None:
        """On the network thread after each refresh: a pattern that now matches other topics, or (for the leader,
        which assigned from a snapshot of the partition counts) a topic whose partitions changed, needs a new
        assignment. A refresh during a rebalance is checked when it completes (_on_join_complete)."""
        if self.state == MemberState.STABLE:
            self._rejoin_if_metadata_changed(cluster)

    def _rejoin_if_metadata_changed(self, cluster) -> None:
        if not self.subscriptions.has_auto_assigned_partitions:
            return
        if self.subscriptions.pattern is not None:
            if self.subscriptions.match_pattern(name for name, topic in cluster.topics.items()
                                                if not topic.is_internal):
                self.request_rejoin("the pattern matches other topics")
                return
        snapshot = self._assignment_snapshot
        if snapshot is None:
            return
        for topic, count in snapshot.items():
            metadata = cluster.topics.get(topic)
            if metadata is not None and len(metadata.partitions) != count:
                self.request_rejoin(f"the partition count of {topic} changed")
                return

    # --- heartbeats (network thread) ---------------------------------------------------------------------------------

    async def _on_heartbeat_due(self) -> bool:
        if monotonic_ms() - self._last_poll_ms <= self.max_poll_interval_ms:
            return False
        log.warning("group %s: poll() was not called for more than max.poll.interval.ms (%d ms); leaving "
                    "the group so that its partitions can be reassigned", self.group_id, self.max_poll_interval_ms)
        await self._leave_group("consumer poll timeout has expired")
        self._partitions_lost = True
        self._reset_generation()
        return True

    def _on_member_lost(self) -> None:
        self._partitions_lost = True
        self._reset_generation()
        self.fetcher.notify()

    # --- offsets -----------------------------------------------------------------------------------------------------

    def _member_ready(self) -> bool:
        """The member may commit as a member of the group (not in the middle of a join)."""
        return self.state == MemberState.STABLE and self.generation_id != NO_GENERATION

    def _latest_commit_identity(self) -> tuple[int, str] | None:
        """After STALE_MEMBER_EPOCH: the identity to retry the commit with, None when the member is no longer in
        the group (classic groups never answer that error)."""
        return None

    def _fetch_identity(self) -> tuple[str, int] | None:
        """(member id, member epoch) to fetch committed offsets as, None to fetch as a tool: a classic member's
        OffsetFetch carries no identity."""
        return None

    def _commit_identity(self) -> tuple[int, str]:
        """Generation and member id to commit under: the group's when this member is in it, else those of a
        tool (-1, ""), which the coordinator accepts for groups without active members (assign() with group.id)."""
        if self.subscriptions.has_auto_assigned_partitions:
            if self.state != MemberState.STABLE:
                raise RebalanceInProgressError(f"group {self.group_id!r} is rebalancing; the commit can be "
                                               "retried after the next poll() completes the rebalance")
            return self.generation_id, self.member_id
        return NO_GENERATION, UNKNOWN_MEMBER_ID

    async def _commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], generation: int, member_id: str,
                      timeout_ms: float) -> None:
        deadline = monotonic_ms() + timeout_ms
        attempts = 0
        while True:
            try:
                if self.coordinator_id == NO_NODE or not self.network.knows_node(self.coordinator_id):
                    self.coordinator_id = await find_coordinator(self.network, self.group_id,
                                                                 timeout_ms=max(deadline - monotonic_ms(), 1))
                results = await commit_offsets(self.network, self.coordinator_id, self.group_id, offsets,
                                               generation_id=generation, member_id=member_id,
                                               group_instance_id=self.group_instance_id,
                                               highest_version=self.offset_commit_highest_version)
                errors = [error for error in results.values() if error is not None]
                if not errors:
                    return
                error = errors[0]
                if error.error_code in COORDINATOR_ERRORS:
                    self._coordinator_dead(str(error))
                    raise error
                if error.error_code == ErrorCode.STALE_MEMBER_EPOCH:
                    latest = self._latest_commit_identity()
                    if latest is None:
                        raise type(error)(f"commit of group {self.group_id!r} failed: the member is no longer in "
                                          f"the group ({error})")
                    log.info("group %s: commit with member epoch %d was stale; retrying with epoch %d",
                             self.group_id, generation, latest[0])
                    generation, member_id = latest
                    raise error
                if error.error_code in MEMBER_LOST_ERRORS or error.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
                    if error.error_code != ErrorCode.REBALANCE_IN_PROGRESS:
                        self._reset_generation()
                    self.request_rejoin("a commit failed because the group rebalanced")
                    raise type(error)(f"commit of group {self.group_id!r} failed: the group has rebalanced and "
                                      f"assigned the partitions to another member ({error}); poll() rejoins")
                raise error
            except KafkaError as error:
                stale = error.error_code == ErrorCode.STALE_MEMBER_EPOCH and self._latest_commit_identity() is not None
                if not stale and (not error.retriable or isinstance(error, RebalanceInProgressError)):
                    raise
                attempts += 1
                wait = self.retry_backoff.backoff_ms(attempts)
                if monotonic_ms() + wait >= deadline:
                    raise KafkaTimeoutError(f"commit of group {self.group_id!r} did not complete within "
                                            f"{timeout_ms:.0f} ms: {error}") from None
                await asyncio.sleep(wait / 1000)

    def commit_sync(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_ms: float) -> None:
        if not offsets:
            return
        generation, member_id = self._commit_identity()
        self.loop.run(self._commit(dict(offsets), generation, member_id, timeout_ms), timeout_ms / 1000 + 1)

    def commit_async(self, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                     callback: Callable[[dict, BaseException | None], None] | None, timeout_ms: float) -> None:
        offsets = dict(offsets)
        try:
            generation, member_id = self._commit_identity()
        except KafkaError as error:
            if callback is not None:
                self._completed_commits.append((callback, offsets, error))
            return
        future = self.loop.submit(self._commit(offsets, generation, member_id, timeout_ms))

        def done(finished) -> None:
            error = finished.exception() if not finished.cancelled() else KafkaError("the commit was cancelled")
            if error is not None:
                log.info("group %s: async commit failed: %s", self.group_id, error)
            if callback is not None:
                self._completed_commits.append((callback, offsets, error))

        future.add_done_callback(done)

    def invoke_completed_commit_callbacks(self) -> None:
        """Async commit callbacks run in the caller's thread, at its next poll or commit, as in Java."""
        while self._completed_commits:
            callback, offsets, error = self._completed_commits.popleft()
            try:
                callback(offsets, error)
            except Exception:
                log.exception("an offset commit callback raised")

    def maybe_auto_commit(self) -> None:
        if not self.enable_auto_commit or monotonic_ms() < self._next_auto_commit_ms:
            return
        self._next_auto_commit_ms = monotonic_ms() + self.auto_commit_interval_ms
        if self.subscriptions.has_auto_assigned_partitions and not self._member_ready():
            return
        self.commit_async(self.subscriptions.all_consumed(), None, self.auto_commit_interval_ms)

    def maybe_auto_commit_sync(self, timeout_ms: float = 5000) -> None:
        if not self.enable_auto_commit:
            return
        offsets = self.subscriptions.all_consumed()
        if not offsets or (self.subscriptions.has_auto_assigned_partitions and not self._member_ready()):
            return
        if self.loop.in_loop_thread:  # the asyncio consumer, on the loop that would do the commit: send it, no wait
            self.commit_async(offsets, None, timeout_ms)
            return
        try:
            self.commit_sync(offsets, timeout_ms)
        except KafkaError as error:
            log.warning("group %s: auto-commit of %s failed: %s", self.group_id,
                        ", ".join(f"{tp}@{offset.offset}" for tp, offset in offsets.items()), error)

    def fetch_committed(self, partitions: list[TopicPartition], timeout_ms: float
                        ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        deadline = monotonic_ms() + timeout_ms

        async def fetch() -> dict[TopicPartition, OffsetAndMetadata | None]:
            attempts = 0
            while True:
                try:
                    if self.coordinator_id == NO_NODE or not self.network.knows_node(self.coordinator_id):
                        self.coordinator_id = await find_coordinator(self.network, self.group_id,
                                                                     timeout_ms=max(deadline - monotonic_ms(), 1))
                    return await fetch_committed(self.network, self.coordinator_id, self.group_id, partitions,
                                                 member=self._fetch_identity())
                except KafkaError as error:
                    # STALE_MEMBER_EPOCH: a heartbeat moved the member on meanwhile; the next attempt has its epoch.
                    stale = error.error_code == ErrorCode.STALE_MEMBER_EPOCH and self._fetch_identity() is not None
                    if not error.retriable and not stale:
                        raise
                    if error.error_code in COORDINATOR_ERRORS or isinstance(error, NetworkError):
                        self._coordinator_dead(str(error))
                    attempts += 1
                    wait = self.retry_backoff.backoff_ms(attempts)
                    if monotonic_ms() + wait >= deadline:
                        raise KafkaTimeoutError(f"committed offsets of group {self.group_id!r} not fetched within "
                                                f"{timeout_ms:.0f} ms: {error}") from None
                    await asyncio.sleep(wait / 1000)

        return self.loop.run(fetch(), timeout_ms / 1000 + 1)

    # --- closing -----------------------------------------------------------------------------------------------------

    def close(self, timeout_ms: float) -> None:
        """Commit (auto-commit), revoke, leave the group and stop heartbeats."""
        try:
            if self.subscriptions.has_auto_assigned_partitions and self.state == MemberState.STABLE:
                self.maybe_auto_commit_sync(timeout_ms)
                self._invoke_revoked(self.subscriptions.assigned_partitions())
            elif not self.subscriptions.has_auto_assigned_partitions:
                self.maybe_auto_commit_sync(timeout_ms)
            self.invoke_completed_commit_callbacks()
        finally:
            self._stop_heartbeats()
            try:
                self.loop.run(self._leave_group("the consumer is being closed"), timeout_ms / 1000 + 1)
            except KafkaError as error:
                log.info("group %s: leaving failed: %s", self.group_id, error)
