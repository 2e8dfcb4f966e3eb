"""Partition: one partition as this broker hosts it — its role (leader or follower), leader epoch, replicas, in-sync
replicas and high watermark rule (Kafka's cluster/Partition).

The metadata image says who leads which partition in which leader epoch and which replicas are in sync; this class
turns that into local state: becoming leader records the epoch start in the leader-epoch cache and resets what it
knows of the followers; becoming follower forgets them. On the leader, the high watermark is the smallest log end
offset over the in-sync replicas (the leader's own included) and over followers that are caught up and about to
join them; it never moves backwards, and it does not move at all while the in-sync replicas are fewer than the
effective min.insync.replicas (Kafka 4's rule, so an acks=1 write to a partition that lost its replicas is not
exposed to consumers until enough replicas have it). On one node the only in-sync replica is the leader, so the high
watermark follows the log end offset right after every append.

Followers report their fetch position through `update_follower_fetch_state`; the result is that the high watermark
can move and waiting acks=all produces complete. The leader also decides ISR changes (`isr_after_shrink` for
followers that have not caught up within replica.lag.time.max.ms, `isr_after_expand` for one that caught up); the
replica manager persists them through the metadata backend, and the partition only adopts the new ISR when the
metadata image brings it back (so the ISR a leader acts on is always one the controller knows).

Methods run on the event loop, except `append_to_leader_log`, which only touches the log (Log.append_as_leader
validates and assigns offsets under the log's own lock) and may run in an executor; the high watermark is moved
afterwards, on the loop. The partition never takes the log's lock: what must be read or changed together is one Log
method.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid

from kfk.common.constants import LATEST_TIMESTAMP, UNKNOWN_LEADER_EPOCH, UNKNOWN_OFFSET
from kfk.common.structs import TopicPartition
from kfk.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    UnknownLeaderEpochError,
)
from kfk.metadata.image import NO_LEADER, PartitionRegistration
from kfk.storage.fetch_data_info import TimestampAndOffset
from kfk.storage.log import Log, VerificationGuard
from kfk.storage.log_validator import LogAppendInfo
from kfk.storage.producer_state import AppendOrigin

logger = logging.getLogger(__name__)


#: DeleteRecords' offset meaning "up to the high watermark".
DELETE_TO_HIGH_WATERMARK = -1


@dataclasses.dataclass(slots=True)
class ReplicaState:
    """What the leader knows of one follower from its fetches (Kafka's Replica)."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: int = 0
    last_caught_up_time_ms: int = 0

    def is_caught_up(self, leader_log_end_offset: int, now_ms: int, replica_lag_time_max_ms: int) -> bool:
        """At the leader's end now, or was at the leader's end (of the time) within replica.lag.time.max.ms."""
        return (self.log_end_offset == leader_log_end_offset
                or now_ms - self.last_caught_up_time_ms <= replica_lag_time_max_ms)

    def update_fetch_state(self, fetch_offset: int, log_start_offset: int, fetch_time_ms: int,
                           leader_log_end_offset: int) -> None:
        # A fetch at the leader's end catches the follower up now; a fetch at or past where the leader's end was at
        # the previous fetch means it was caught up at that previous fetch time.
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_time_ms = fetch_time_ms


class Partition:
    def __init__(self, topic_partition: TopicPartition, topic_id: uuid.UUID, local_broker_id: int, log: Log,
                 replica_lag_time_max_ms: int = 30_000) -> None:
        self.topic_partition = topic_partition
        self.topic_id = topic_id
        self.local_broker_id = local_broker_id
        self.log = log
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.leader_id = NO_LEADER
        self.leader_epoch = UNKNOWN_LEADER_EPOCH
        self.partition_epoch = -1
        self.assigned_replicas: tuple[int, ...] = ()
        self.in_sync_replicas: tuple[int, ...] = ()
        self.remote_replicas: dict[int, ReplicaState] = {}
        #: The log end offset when this broker became leader in the current epoch (None when not leader).
        self.leader_epoch_start_offset: int | None = None

    def __repr__(self) -> str:
        return (f"Partition({self.topic_partition}, leader={self.leader_id}, leader_epoch={self.leader_epoch}, "
                f"in_sync_replicas={self.in_sync_replicas})")

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    # -- role changes ----------------------------------------------------------------------------------------------

    def make_leader(self, registration: PartitionRegistration, now_ms: int) -> bool:
        """Lead the partition in `registration.leader_epoch`. Returns True if this is a new leadership (the epoch
        or the leader changed), False for an ISR/replica update within the same epoch."""
        new_leadership = not self.is_leader or registration.leader_epoch != self.leader_epoch
        self._update_assignment(registration)
        self.leader_id = self.local_broker_id
        self.leader_epoch = registration.leader_epoch
        if new_leadership:
            self.leader_epoch_start_offset = self.log.maybe_assign_epoch_start_offset(registration.leader_epoch)
            for replica in self.remote_replicas.values():
                # Followers must prove again that they are caught up with the new leader.
                replica.last_caught_up_time_ms = now_ms if replica.broker_id in self.in_sync_replicas else 0
                replica.log_end_offset = UNKNOWN_OFFSET
                replica.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
                replica.last_fetch_time_ms = 0
            logger.debug("%s: leader in epoch %d from offset %d, in-sync replicas %s, high watermark %d",
                        self.topic_partition, self.leader_epoch, self.leader_epoch_start_offset,
                        list(self.in_sync_replicas), self.log.high_watermark)
        self.maybe_increment_high_watermark(now_ms)
        return new_leadership

    def make_follower(self, registration: PartitionRegistration) -> bool:
        """Follow `registration.leader` (fetching from it is the replica fetcher's work). Returns True if the leader
        or epoch changed."""
        changed = registration.leader != self.leader_id or registration.leader_epoch != self.leader_epoch
        self._update_assignment(registration)
        self.leader_id = registration.leader
        self.leader_epoch = registration.leader_epoch
        self.leader_epoch_start_offset = None
        self.remote_replicas.clear()
        return changed

    def _update_assignment(self, registration: PartitionRegistration) -> None:
        self.assigned_replicas = registration.replicas
        self.in_sync_replicas = registration.isr
        self.partition_epoch = registration.partition_epoch
        remote = [broker_id for broker_id in registration.replicas if broker_id != self.local_broker_id]
        self.remote_replicas = {broker_id: self.remote_replicas.get(broker_id) or ReplicaState(broker_id)
                                for broker_id in remote}

    # -- the high watermark ------------------------------------------------------------------------------------------

    @property
    def effective_min_isr(self) -> int:
        """min.insync.replicas, capped by the replication factor (Kafka 4 accepts a larger setting and caps it)."""
        return min(self.log.config.min_insync_replicas, len(self.remote_replicas) + 1)

    @property
    def is_under_min_isr(self) -> bool:
        return self.is_leader and len(self.in_sync_replicas) < self.effective_min_isr

    def maybe_increment_high_watermark(self, now_ms: int) -> bool:
        """Move the high watermark up to the smallest log end offset of the in-sync replicas (and of followers caught
        up enough to join them). Never backwards; not while under min ISR. Returns whether it moved."""
        if not self.is_leader or self.is_under_min_isr:
            return False
        log = self.log
        leader_log_end_offset = log.log_end_offset
        new_high_watermark = leader_log_end_offset
        for replica in self.remote_replicas.values():
            if replica.log_end_offset >= new_high_watermark:
                continue
            if replica.broker_id in self.in_sync_replicas or replica.is_caught_up(
                    leader_log_end_offset, now_ms, self.replica_lag_time_max_ms):
                new_high_watermark = max(replica.log_end_offset, 0)
        return log.maybe_increment_high_watermark(new_high_watermark)

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """acks=all: have the in-sync replicas all reached `required_offset` (the high watermark passed it)? An
        append that got in before the ISR shrank below min.insync.replicas is answered
        NOT_ENOUGH_REPLICAS_AFTER_APPEND."""
        if not self.is_leader:
            return False, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.log.high_watermark >= required_offset:
            if self.effective_min_isr <= len(self.in_sync_replicas):
                return True, ErrorCode.NONE
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, ErrorCode.NONE

    def update_follower_fetch_state(self, replica_id: int, fetch_offset: int, log_start_offset: int,
                                    now_ms: int) -> bool:
        """A follower fetched from `fetch_offset`: record its position; returns whether the high watermark moved."""
        replica = self.remote_replicas.get(replica_id)
        if replica is None or not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"Replica {replica_id} is not a follower of {self.topic_partition} on broker {self.local_broker_id}")
        replica.update_fetch_state(fetch_offset, log_start_offset, now_ms, self.log.log_end_offset)
        return self.maybe_increment_high_watermark(now_ms)

    # -- in-sync replicas (leader) ----------------------------------------------------------------------------------

    def out_of_sync_replicas(self, now_ms: int) -> list[int]:
        """In-sync followers that have not caught up with the leader's log end for replica.lag.time.max.ms (Kafka's
        getOutOfSyncReplicas: a follower that stopped fetching and one that fetches but cannot keep up both count)."""
        if not self.is_leader:
            return []
        leader_log_end_offset = self.log.log_end_offset
        return [replica_id for replica_id in self.in_sync_replicas if replica_id != self.local_broker_id
                and replica_id in self.remote_replicas
                and not self.remote_replicas[replica_id].is_caught_up(leader_log_end_offset, now_ms,
                                                                      self.replica_lag_time_max_ms)]

    def isr_after_shrink(self, now_ms: int) -> tuple[int, ...] | None:
        """The ISR without the lagging followers, or None if nobody lags."""
        lagging = self.out_of_sync_replicas(now_ms)
        if not lagging:
            return None
        return tuple(replica for replica in self.in_sync_replicas if replica not in lagging)

    def isr_after_expand(self, replica_id: int) -> tuple[int, ...] | None:
        """The ISR with `replica_id` added if it has caught up: its log end offset reached the high watermark and
        the start of the current leader epoch (so it holds everything this leader may have committed), or None."""
        replica = self.remote_replicas.get(replica_id)
        if not self.is_leader or replica is None or replica_id in self.in_sync_replicas \
                or replica_id not in self.assigned_replicas:
            return None
        epoch_start = self.leader_epoch_start_offset or 0
        if replica.log_end_offset >= self.log.high_watermark and replica.log_end_offset >= epoch_start:
            return tuple(replica for replica in self.assigned_replicas
                         if replica in self.in_sync_replicas or replica == replica_id)
        return None

    # -- follower ----------------------------------------------------------------------------------------------------

    def append_as_follower(self, records: bytes | memoryview, leader_high_watermark: int,
                           leader_log_start_offset: int, now_ms: int) -> None:
        """Records fetched from the leader, at their leader-assigned offsets; then the follower's high watermark
        (the leader's, capped by what this log has) and log start offset follow the leader's."""
        log = self.log
        if records:
            log.append_as_follower(records, now_ms)
        high_watermark = log.update_high_watermark(leader_high_watermark)  # capped by our log end
        if leader_log_start_offset > log.log_start_offset:
            log.maybe_increment_log_start_offset(min(leader_log_start_offset, high_watermark))

    # -- leader epoch fencing ----------------------------------------------------------------------------------------

    def check_current_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320: a request carrying an older epoch than ours is fenced; a newer one means our metadata lags."""
        if current_leader_epoch == UNKNOWN_LEADER_EPOCH:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"The leader epoch {current_leader_epoch} of the request is older than the current leader epoch "
                f"{self.leader_epoch} of {self.topic_partition}")
        if current_leader_epoch > self.leader_epoch:
            raise UnknownLeaderEpochError(
                f"The leader epoch {current_leader_epoch} of the request is newer than the current leader epoch "
                f"{self.leader_epoch} of {self.topic_partition}")

    def local_log_with_epoch(self, current_leader_epoch: int, require_leader: bool) -> Log:
        self.check_current_leader_epoch(current_leader_epoch)
        if require_leader and not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"Leader not local for partition {self.topic_partition} on broker {self.local_broker_id}")
        return self.log

    # -- produce -----------------------------------------------------------------------------------------------------

    def check_append_allowed(self, required_acks: int) -> Log:
        """Before appending: are we the leader, and (acks=all) are there enough in-sync replicas?"""
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"Leader not local for partition {self.topic_partition} on broker {self.local_broker_id}")
        if required_acks == -1 and len(self.in_sync_replicas) < self.effective_min_isr:
            raise NotEnoughReplicasError(
                f"The size of the current ISR {list(self.in_sync_replicas)} is insufficient to satisfy the min.isr "
                f"requirement of {self.effective_min_isr} for partition {self.topic_partition}")
        return self.log

    def append_to_leader_log(self, records: bytes | bytearray | memoryview, leader_epoch: int, now_ms: int,
                             origin: AppendOrigin = AppendOrigin.CLIENT,
                             verification_guard: VerificationGuard | None = None) -> LogAppendInfo:
        """Append to the leader's log in `leader_epoch` (the log validates, assigns offsets and writes under its own
        lock). Touches only the log: safe to run in an executor."""
        return self.log.append_as_leader(records, leader_epoch, now_ms, origin, verification_guard)

    # -- ListOffsets, DeleteRecords, OffsetForLeaderEpoch ------------------------------------------------------------

    def fetch_offset_for_timestamp(self, timestamp: int, isolation_level: int | None, current_leader_epoch: int,
                                   fetch_only_from_leader: bool) -> TimestampAndOffset | None:
        """ListOffsets. `isolation_level` None is a replica's request (bounded by the log end offset), 0 a
        READ_UNCOMMITTED consumer's (the high watermark), 1 a READ_COMMITTED one's (the last stable offset).
        Timestamp lookups whose answer is at or past that bound find nothing (None: -1/-1 on the wire)."""
        log = self.local_log_with_epoch(current_leader_epoch, fetch_only_from_leader)
        offsets = log.fetch_offset_snapshot()
        if isolation_level is None:
            last_fetchable_offset = offsets.log_end_offset
        elif isolation_level == 1:
            last_fetchable_offset = offsets.last_stable_offset
        else:
            last_fetchable_offset = offsets.high_watermark
        epoch_start = self.leader_epoch_start_offset
        lagging = isolation_level is not None and epoch_start is not None and epoch_start > offsets.high_watermark
        if timestamp == LATEST_TIMESTAMP:
            if lagging:
                raise OffsetNotAvailableError(
                    f"Failed to fetch offsets for partition {self.topic_partition} with leader epoch "
                    f"{self.leader_epoch} as its high watermark ({offsets.high_watermark}) is lagging behind the "
                    f"start offset from the beginning of this epoch ({epoch_start}).")
            return TimestampAndOffset(-1, last_fetchable_offset, self.leader_epoch)
        # Records appended after the snapshot are past its bounds: the lookup never answers beyond them.
        found = log.offset_for_timestamp(timestamp)
        if timestamp < 0 and timestamp != -3:  # EARLIEST, EARLIEST_LOCAL, LATEST_TIERED: no bound applies
            return found
        if found is not None and found.offset < last_fetchable_offset:
            return found
        if lagging:
            raise OffsetNotAvailableError(
                f"Failed to fetch offsets for partition {self.topic_partition}: its high watermark "
                f"({offsets.high_watermark}) is lagging behind the start of leader epoch {self.leader_epoch}.")
        return None

    def delete_records_on_leader(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset` (-1: the high watermark); returns the low
        watermark (the smallest log start offset over the replicas; ours on one node)."""
        if not self.is_leader:
            raise NotLeaderOrFollowerError(
                f"Leader not local for partition {self.topic_partition} on broker {self.local_broker_id}")
        log = self.log
        if not log.config.delete:
            raise PolicyViolationError(
                f"Records of partition {self.topic_partition} can not be deleted due to the configured policy")
        target = log.high_watermark if offset == DELETE_TO_HIGH_WATERMARK else offset
        if target < 0:
            raise OffsetOutOfRangeError(f"The offset {target} for partition {self.topic_partition} is not valid")
        log.maybe_increment_log_start_offset(target)
        return self.low_watermark()

    def low_watermark(self) -> int:
        low = self.log.log_start_offset
        for replica in self.remote_replicas.values():
            if 0 <= replica.log_start_offset < low:
                low = replica.log_start_offset
        return low

    def last_offset_for_leader_epoch(self, current_leader_epoch: int, leader_epoch: int,
                                     fetch_only_from_leader: bool) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (the largest epoch <= `leader_epoch` in our log, the offset where it ends), or
        (-1, -1) when the log knows no such epoch."""
        log = self.local_log_with_epoch(current_leader_epoch, fetch_only_from_leader)
        return log.end_offset_for_epoch(leader_epoch)
