"""The follower side and the leader's ISR decisions: which followers lag (replica.lag.time.max.ms), which caught up,
a follower's appends and high watermark, and the fetcher's truncation by leader epoch (with the leader's answers
scripted, a real log in tmp_path)."""

from __future__ import annotations

import asyncio

from kfk.common.structs import TopicPartition
from kfk.config import BrokerConfig
from kfk.errors import ErrorCode
from kfk.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochResponse
from kfk.replication.replica_fetcher import PartitionFetchState, ReplicaFetcher
from kfk.storage.cleaner_threads import CleanerConfig
from kfk.storage.log_manager import LogManager
from tests.replication.test_partition import LAG_MS, append, clock, make_partition  # noqa: F401 - fixture
from tests.storage.conftest import make_batch


def test_a_follower_that_stops_fetching_while_the_leader_appends_lags_after_the_lag_time(tmp_path, clock) -> None:
    partition = make_partition(tmp_path, clock)
    end = append(partition, 5, clock)
    partition.update_follower_fetch_state(2, end, 0, clock())
    partition.update_follower_fetch_state(3, end, 0, clock())
    assert partition.isr_after_shrink(clock()) is None
    clock.advance(1000)
    end = append(partition, 5, clock)
    partition.update_follower_fetch_state(2, end, 0, clock())  # 2 keeps up, 3 stopped
    clock.advance(LAG_MS - 1000)
    assert partition.isr_after_shrink(clock()) is None  # 3 was caught up exactly LAG_MS ago: not yet
    clock.advance(1)
    partition.update_follower_fetch_state(2, end, 0, clock())
    assert partition.isr_after_shrink(clock()) == (1, 2)


def test_an_idle_partition_keeps_its_caught_up_followers(tmp_path, clock) -> None:
    partition = make_partition(tmp_path, clock)
    end = append(partition, 3, clock)
    for follower in (2, 3):
        partition.update_follower_fetch_state(follower, end, 0, clock())
    clock.advance(10 * LAG_MS)
    assert partition.isr_after_shrink(clock()) is None  # nothing new to fetch: still in sync, as in Kafka


def test_a_follower_joins_the_isr_once_it_reaches_the_high_watermark(tmp_path, clock) -> None:
    partition = make_partition(tmp_path, clock, isr=(1, 2))
    end = append(partition, 10, clock)
    partition.update_follower_fetch_state(2, end, 0, clock())
    assert partition.log.high_watermark == end
    partition.update_follower_fetch_state(3, 4, 0, clock())
    assert partition.isr_after_expand(3) is None
    partition.update_follower_fetch_state(3, end, 0, clock())
    assert partition.isr_after_expand(3) == (1, 2, 3)
    assert partition.isr_after_expand(2) is None  # already in sync


def test_a_follower_appends_the_leaders_batches_and_follows_its_high_watermark(tmp_path, clock) -> None:
    partition = make_partition(tmp_path, clock, leader=2)
    partition.append_as_follower(make_batch(0, [b"a", b"b", b"c"], leader_epoch=0), 2, 0, clock())
    assert (partition.log.log_end_offset, partition.log.high_watermark) == (3, 2)
    partition.append_as_follower(b"", 10, 0, clock())
    assert partition.log.high_watermark == 3  # never past its own log end


class ScriptedChannel:
    """Answers OffsetForLeaderEpoch as a leader would, and records what it was asked."""

    def __init__(self, end_offsets: dict[int, tuple[int, int]]) -> None:
        self.end_offsets = end_offsets
        self.asked: list[int] = []

    async def request(self, message, version, timeout_ms=None):
        topics = []
        for topic in message.topics:
            results = []
            for wanted in topic.partitions:
                self.asked.append(wanted.leader_epoch)
                epoch, end = self.end_offsets.get(wanted.leader_epoch, (-1, -1))
                results.append(OffsetForLeaderEpochResponse.EpochEndOffset(
                    error_code=ErrorCode.NONE, partition=wanted.partition, leader_epoch=epoch, end_offset=end))
            topics.append(OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult(topic=topic.topic,
                                                                                 partitions=results))
        return OffsetForLeaderEpochResponse(topics=topics)

    async def close(self) -> None:
        pass


def truncate(tmp_path, clock, end_offsets: dict[int, tuple[int, int]], high_watermark: int) -> tuple[int, list[int]]:
    """A follower whose log has epochs 0 (offsets 0-4) and 1 (5-9) asks a leader in epoch 2 where to truncate."""
    partition = make_partition(tmp_path, clock, leader=2, leader_epoch=2)
    for offset in range(10):  # one record per batch: truncation cuts at batch boundaries
        partition.append_as_follower(make_batch(offset, [b"v"], leader_epoch=0 if offset < 5 else 1),
                                     high_watermark, 0, clock())
    config = BrokerConfig({"process.roles": "broker", "node.id": "1"})
    log_manager = LogManager([str(tmp_path)], cleaner_config=CleanerConfig(enable_cleaner=False))
    log_manager.logs[partition.topic_partition] = partition.log
    fetcher = ReplicaFetcher(1, 2, "127.0.0.1", 1, config, lambda tp: partition, log_manager, clock, "test")
    fetcher.channel = ScriptedChannel(end_offsets)
    fetcher.partitions[TopicPartition("topic", 0)] = PartitionFetchState(leader_epoch=2)
    asyncio.run(fetcher._truncate())
    assert not fetcher.partitions[TopicPartition("topic", 0)].truncating
    return partition.log.log_end_offset, fetcher.channel.asked


def test_the_divergent_tail_of_the_latest_epoch_is_truncated(tmp_path, clock) -> None:
    # The new leader had epoch 1 only up to offset 7: offsets 7-9 were never committed.
    assert truncate(tmp_path, clock, {1: (1, 7)}, high_watermark=5) == (7, [1])


def test_a_leader_that_never_had_our_epoch_cuts_back_to_where_its_epoch_ends(tmp_path, clock) -> None:
    # The leader knows epoch 0 only (it ends at 4 there): epoch 1 is ours alone; we keep what epoch 0 left us.
    end, _ = truncate(tmp_path, clock, {1: (0, 4)}, high_watermark=0)
    assert end == 4


def test_truncation_never_goes_below_the_high_watermark(tmp_path, clock) -> None:
    end, _ = truncate(tmp_path, clock, {1: (1, 6)}, high_watermark=8)
    assert end == 8
