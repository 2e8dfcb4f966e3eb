"""Partition: the high watermark rule, min ISR, acks=all completion and leader epochs, with a manual clock and a real
log. Followers are simulated by reporting their fetch offsets, as the follower fetch path will."""

from __future__ import annotations

import uuid

import pytest

from kfk.common.clock import ManualClock
from kfk.common.structs import TopicPartition
from kfk.config import LogConfig
from kfk.errors import (
    ErrorCode,
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from kfk.metadata.image import PartitionRegistration
from kfk.replication.partition import Partition
from kfk.storage.log import Log
from tests.storage.conftest import make_batch

LAG_MS = 10_000


def make_partition(tmp_path, clock: ManualClock, *, replicas=(1, 2, 3), isr=None, leader=1, leader_epoch=0,
                   min_insync_replicas: int = 1) -> Partition:
    config = LogConfig.from_properties({"min.insync.replicas": min_insync_replicas})
    log = Log.open(str(tmp_path / "topic-0"), config, now_ms=clock())
    partition = Partition(TopicPartition("topic", 0), uuid.uuid4(), 1, log, replica_lag_time_max_ms=LAG_MS)
    registration = PartitionRegistration(replicas=tuple(replicas), isr=tuple(isr or replicas), leader=leader,
                                         leader_epoch=leader_epoch, partition_epoch=0)
    if leader == 1:
        partition.make_leader(registration, clock())
    else:
        partition.make_follower(registration)
    return partition


def append(partition: Partition, count: int, clock: ManualClock, acks: int = 1) -> int:
    """Append `count` records as the leader would; returns the offset after them."""
    partition.check_append_allowed(acks)
    result = partition.append_to_leader_log(make_batch(0, [b"v"] * count), partition.leader_epoch, clock())
    partition.maybe_increment_high_watermark(clock())
    return result.last_offset + 1


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def test_alone_in_sync_the_high_watermark_follows_the_log_end(tmp_path, clock) -> None:
    partition = make_partition(tmp_path, clock, replicas=(1,))
    assert append(partition, 3, clock) == 3
    assert partition.log.high_watermark == 3
    assert partition.check_enough_replicas_reach_offset(3) == (True, ErrorCode.NONE)


def test_the_high_watermark_is_the_smallest_log_end_offset_of_the_in_sync_replicas(tmp_path, clock) -> None:
    partition = make_partition(tmp_path, clock)
    append(partition, 10, clock)
    assert partition.log.high_watermark == 0  # followers have nothing yet
    assert partition.check_enough_replicas_reach_offset(10) == (False, ErrorCode.NONE)
    assert not partition.update_follower_fetch_state(2, 10, 0, clock())
    assert partition.log.high_watermark == 0  # replica 3 is in sync and has not fetched yet
    assert partition.update_follower_fetch_state(3, 4, 0, clock())
    assert partition.log.high_watermark == 4
    assert partition.update_follower_fetch_state(3, 10, 0, clock())
    assert partition.log.high_watermark == 10
    assert partition.check_enough_replicas_reach_offset(10) == (True, ErrorCode.NONE)


def test_the_high_watermark_never_moves_backwards(tmp_path, clock) -> None:
    partition = make_partition(tmp_path, clock, replicas=(1, 2))
    append(partition, 5, clock)
    partition.update_follower_fetch_state(2, 5, 0, clock())
    assert partition.log.high_watermark == 5
    # A follower reporting an older position (it truncated, or a delayed fetch) does not pull it back.
    assert not partition.update_follower_fetch_state(2, 2, 0, clock())
    assert partition.log.high_watermark == 5


def test_a_replica_out_of_the_isr_does_not_hold_the_high_watermark_once_it_lags(tmp_path, clock) -> None:
    partition = make_partition(tmp_path, clock, replicas=(1, 2), isr=(1,))
    # Never caught up: a replica outside the ISR is ignored.
    append(partition, 5, clock)
    assert partition.log.high_watermark == 5
    # Caught up now (fetching at the leader's end): it is about to join, so the leader waits for it.
    partition.update_follower_fetch_state(2, 5, 0, clock())
    append(partition, 5, clock)
    assert partition.log.high_watermark == 5
    clock.advance(LAG_MS + 1)
    assert partition.maybe_increment_high_watermark(clock())
    assert partition.log.high_watermark == 10


def test_acks_all_with_too_few_in_sync_replicas_is_refused_before_the_append(tmp_path, clock) -> None:
    partition = make_partition(tmp_path, clock, replicas=(1, 2, 3), isr=(1,), min_insync_replicas=2)
    with pytest.raises(NotEnoughReplicasError):
        partition.check_append_allowed(-1)
    assert partition.log.log_end_offset == 0
    # acks=1 is accepted, but under min ISR the high watermark does not move (Kafka 4's rule).
    append(partition, 2, clock)
    assert partition.log.log_end_offset == 2
    assert partition.log.high_watermark == 0


def test_min_insync_replicas_above_the_replication_factor_is_capped(tmp_path, clock) -> None:
    partition = make_partition(tmp_path, clock, replicas=(1,), min_insync_replicas=3)
    assert partition.effective_min_isr == 1
    append(partition, 1, clock, acks=-1)
    assert partition.log.high_watermark == 1


def test_an_append_that_got_in_before_the_isr_shrank_is_answered_not_enough_replicas_after_append(
        tmp_path, clock) -> None:
    partition = make_partition(tmp_path, clock, replicas=(1, 2), min_insync_replicas=2)
    end = append(partition, 3, clock, acks=-1)
    partition.update_follower_fetch_state(2, end, 0, clock())
    shrunk = PartitionRegistration(replicas=(1, 2), isr=(1,), leader=1, leader_epoch=0, partition_epoch=1)
    partition.make_leader(shrunk, clock())
    assert partition.check_enough_replicas_reach_offset(end) == (True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)


def test_becoming_leader_records_the_epoch_start_and_followers_must_catch_up_again(tmp_path, clock) -> None:
    partition = make_partition(tmp_path, clock, replicas=(1, 2), leader_epoch=3)
    append(partition, 4, clock)
    partition.update_follower_fetch_state(2, 4, 0, clock())
    assert partition.log.leader_epoch_cache.entries[-1] == (3, 0)
    new_epoch = PartitionRegistration(replicas=(1, 2), isr=(1, 2), leader=1, leader_epoch=4, partition_epoch=1)
    assert partition.make_leader(new_epoch, clock())
    assert partition.leader_epoch_start_offset == 4
    assert partition.log.leader_epoch_cache.entries[-1] == (4, 4)
    append(partition, 1, clock)
    assert partition.log.high_watermark == 4  # replica 2's position is unknown in the new epoch
    # The same epoch again (an ISR change) is not a new leadership and keeps the cache as it is.
    assert not partition.make_leader(new_epoch, clock())
    assert partition.log.leader_epoch_cache.entries[-1] == (4, 4)


def test_a_follower_refuses_appends_and_leader_reads(tmp_path, clock) -> None:
    partition = make_partition(tmp_path, clock, replicas=(1, 2), leader=2, leader_epoch=5)
    assert not partition.is_leader
    with pytest.raises(NotLeaderOrFollowerError):
        partition.check_append_allowed(1)
    with pytest.raises(NotLeaderOrFollowerError):
        partition.local_log_with_epoch(-1, require_leader=True)
    assert partition.check_enough_replicas_reach_offset(1) == (False, ErrorCode.NOT_LEADER_OR_FOLLOWER)


def test_requests_with_another_leader_epoch_are_fenced(tmp_path, clock) -> None:
    partition = make_partition(tmp_path, clock, replicas=(1,), leader_epoch=7)
    partition.check_current_leader_epoch(7)
    partition.check_current_leader_epoch(-1)
    with pytest.raises(FencedLeaderEpochError):
        partition.check_current_leader_epoch(6)
    with pytest.raises(UnknownLeaderEpochError):
        partition.check_current_leader_epoch(8)


def test_a_replica_is_caught_up_while_its_last_catch_up_is_recent(tmp_path, clock) -> None:
    partition = make_partition(tmp_path, clock, replicas=(1, 2))
    append(partition, 5, clock)
    partition.update_follower_fetch_state(2, 5, 0, clock())
    replica = partition.remote_replicas[2]
    append(partition, 5, clock)
    clock.advance(LAG_MS)
    assert replica.is_caught_up(partition.log.log_end_offset, clock(), LAG_MS)
    clock.advance(1)
    assert not replica.is_caught_up(partition.log.log_end_offset, clock(), LAG_MS)
    # Fetching from where the leader's end was at the previous fetch counts as caught up at that fetch's time.
    partition.update_follower_fetch_state(2, 10, 0, clock())
    assert replica.is_caught_up(partition.log.log_end_offset, clock(), LAG_MS)
