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

Methods run on the event loop, except `append_to_leader_log`, which only touches the log (under its lock) and may run
in an executor; the high watermark is moved afterwards, on the loop.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from typing import NamedTuple

from kfk.common.constants import INT64_MAX, LATEST_TIMESTAMP, UNKNOWN_LEADER_EPOCH, UNKNOWN_OFFSET
from kfk.common.structs import TopicPartition
from kfk.config import LogConfig
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
from kfk.records import MAGIC_OFFSET, MAGIC_VALUE_V2, RECORD_BATCH_OVERHEAD, CompressionType, LogValidator, TimestampType
from kfk.records import AppendOrigin as ValidatorOrigin
from kfk.records.batch import ATTRIBUTES_OFFSET, COMPRESSION_CODEC_MASK
from kfk.storage.fetch_data_info import TimestampAndOffset
from kfk.storage.log import Log
from kfk.storage.producer_state import AppendOrigin

logger = logging.getLogger(__name__)


#: DeleteRecords' offset meaning "up to the high watermark".
DELETE_TO_HIGH_WATERMARK = -1

_TOPIC_COMPRESSION = {
    "producer": None,
    "uncompressed": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}


def log_validator_for(config: LogConfig, origin: AppendOrigin = AppendOrigin.CLIENT) -> LogValidator:
    """The records layer's validator configured like the topic (compression.type, message.timestamp.*,
    max.message.bytes, cleanup.policy)."""
    target = _TOPIC_COMPRESSION[config.compression_type]
    level = {
        CompressionType.GZIP: config.compression_gzip_level if config.compression_gzip_level != -1 else None,
        CompressionType.LZ4: config.compression_lz4_level,
        CompressionType.ZSTD: config.compression_zstd_level,
    }.get(target) if target is not None else None
    return LogValidator(
        timestamp_type=TimestampType.LOG_APPEND_TIME if config.message_timestamp_type == "LogAppendTime"
        else TimestampType.CREATE_TIME,
        target_compression=target,
        compression_level=level,
        compacted_topic=config.compact,
        timestamp_before_max_ms=None if config.message_timestamp_before_max_ms == INT64_MAX
        else config.message_timestamp_before_max_ms,
        timestamp_after_max_ms=None if config.message_timestamp_after_max_ms == INT64_MAX
        else config.message_timestamp_after_max_ms,
        max_message_bytes=config.max_message_bytes,
        origin=ValidatorOrigin.CLIENT if origin is AppendOrigin.CLIENT else ValidatorOrigin.COORDINATOR,
    )


def append_needs_record_work(config: LogConfig, records: bytes | bytearray | memoryview) -> bool:
    """Will validating these records take more than a header pass? Legacy message sets are converted, a batch whose
    codec is not the topic's is re-encoded, and compacted topics or bounded timestamps make every record be decoded:
    milliseconds per MiB of CPU, partly outside the GIL (the codecs), so the broker does that in an executor."""
    if config.compact or config.message_timestamp_before_max_ms != INT64_MAX \
            or config.message_timestamp_after_max_ms != INT64_MAX:
        return True
    if len(records) <= MAGIC_OFFSET:
        return False
    if records[MAGIC_OFFSET] != MAGIC_VALUE_V2:
        return True
    target = _TOPIC_COMPRESSION[config.compression_type]
    if target is None or len(records) < RECORD_BATCH_OVERHEAD:
        return False  # the producer's codec is kept, or the batch is malformed (validation says so, quickly)
    return records[ATTRIBUTES_OFFSET + 1] & COMPRESSION_CODEC_MASK != target.value


class LeaderAppendResult(NamedTuple):
    """Where an append to the leader's log put the records (for a retried idempotent batch: where they went the
    first time, `duplicate`). A named tuple: one is built per produced partition."""

    first_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int
    duplicate: bool = False


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
        self._validator: LogValidator | None = None
        self._validator_config: LogConfig | None = None

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
            log = self.log
            with log.lock:
                self.leader_epoch_start_offset = log.log_end_offset
                if registration.leader_epoch >= 0:
                    log.leader_epoch_cache.assign(registration.leader_epoch, log.log_end_offset)
            for replica in self.remote_replicas.values():
                # Followers must prove again that they are caught up with the new leader.
                replica.last_caught_up_time_ms = now_ms if replica.broker_id in self.in_sync_replicas else 0
                replica.log_end_offset = UNKNOWN_OFFSET
                replica.last_fetch_leader_log_end_offset = UNKNOWN_OFFSET
                replica.last_fetch_time_ms = 0
            logger.info("%s: leader in epoch %d from offset %d, in-sync replicas %s, high watermark %d",
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
        with log.lock:
            if new_high_watermark > log.high_watermark:
                log.update_high_watermark(new_high_watermark)
                return True
        return False

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
        with log.lock:
            if records:
                log.append_as_follower(records, now_ms)
            log.update_high_watermark(min(leader_high_watermark, log.log_end_offset))
            if leader_log_start_offset > log.log_start_offset:
                log.maybe_increment_log_start_offset(min(leader_log_start_offset, log.high_watermark))

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

    def _validator_for(self, config: LogConfig, origin: AppendOrigin) -> LogValidator:
        if origin is not AppendOrigin.CLIENT:
            return log_validator_for(config, origin)
        if self._validator is None or self._validator_config is not config:
            self._validator = log_validator_for(config)
            self._validator_config = config
        return self._validator

    def append_to_leader_log(self, records: bytes | bytearray | memoryview, leader_epoch: int, now_ms: int,
                             origin: AppendOrigin = AppendOrigin.CLIENT) -> LeaderAppendResult:
        """Validate the records (records layer: CRC, offsets, compression, timestamps, keys), stamp them with offsets
        from the log end and with `leader_epoch`, and append them. Holds the log lock across both, so offsets are
        assigned and written atomically. Touches only the log: safe to run in an executor."""
        log = self.log
        with log.lock:
            validator = self._validator_for(log.config, origin)
            validated = validator.validate_and_assign_offsets(records, log.log_end_offset, now_ms, leader_epoch)
            if validated.valid_bytes == 0:  # an empty message set (legacy produce versions allow it)
                return LeaderAppendResult(UNKNOWN_OFFSET, UNKNOWN_OFFSET, -1, log.log_start_offset)
            info = log.append_as_leader(validated.validated_records, now_ms, origin, validated.batches)
            return LeaderAppendResult(
                first_offset=info.first_offset,
                last_offset=info.last_offset,
                log_append_time_ms=-1 if info.duplicate else validated.log_append_time,
                log_start_offset=log.log_start_offset,
                duplicate=info.duplicate,
            )

    # -- ListOffsets, DeleteRecords, OffsetForLeaderEpoch ------------------------------------------------------------

    def fetch_offset_for_timestamp(self, timestamp: int, isolation_level: int | None, current_leader_epoch: int,
                                   fetch_only_from_leader: bool) -> TimestampAndOffset | None:
        """ListOffsets. `isolation_level` None is a replica's request (bounded by the log end offset), 0 a
        READ_UNCOMMITTED consumer's (the high watermark), 1 a READ_COMMITTED one's (the last stable offset).
        Timestamp lookups whose answer is at or past that bound find nothing (None: -1/-1 on the wire)."""
        log = self.local_log_with_epoch(current_leader_epoch, fetch_only_from_leader)
        with log.lock:
            if isolation_level is None:
                last_fetchable_offset = log.log_end_offset
            elif isolation_level == 1:
                last_fetchable_offset = log.last_stable_offset
            else:
                last_fetchable_offset = log.high_watermark
            epoch_start = self.leader_epoch_start_offset
            lagging = isolation_level is not None and epoch_start is not None and epoch_start > log.high_watermark
            if timestamp == LATEST_TIMESTAMP:
                if lagging:
                    raise OffsetNotAvailableError(
                        f"Failed to fetch offsets for partition {self.topic_partition} with leader epoch "
                        f"{self.leader_epoch} as its high watermark ({log.high_watermark}) is lagging behind the "
                        f"start offset from the beginning of this epoch ({epoch_start}).")
                return TimestampAndOffset(-1, last_fetchable_offset, self.leader_epoch)
            found = log.offset_for_timestamp(timestamp)
            if timestamp < 0 and timestamp != -3:  # EARLIEST, EARLIEST_LOCAL, LATEST_TIERED: no bound applies
                return found
            if found is not None and found.offset < last_fetchable_offset:
                return found
            if lagging:
                raise OffsetNotAvailableError(
                    f"Failed to fetch offsets for partition {self.topic_partition}: its high watermark "
                    f"({log.high_watermark}) is lagging behind the start of leader epoch {self.leader_epoch}.")
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
        with log.lock:
            return log.end_offset_for_epoch(leader_epoch)
