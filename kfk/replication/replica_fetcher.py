"""Follower fetchers: copy the leaders' logs to this broker (Kafka's ReplicaFetcherManager / ReplicaFetcherThread).

Each partition this broker follows is assigned to one fetcher per (leader broker, fetcher id): num.replica.fetchers
fetchers per leader, a partition going to fetcher hash(topic, partition) mod that number, as in Kafka. A fetcher is
an asyncio task with one connection to its leader. Per partition:
1. Truncation first, whenever the partition starts following a leader in a new leader epoch (KIP-101/279): ask the
   leader (OffsetForLeaderEpoch, current_leader_epoch fenced) where the latest epoch of this replica's log ends in
   the leader's log, and truncate to that offset if this log goes further — the divergent tail that a previous
   leader wrote but never committed. Never below this replica's high watermark: offsets below it were committed,
   so every in-sync replica, and the leader elected among them, has them. A log without leader epochs falls back to
   its high watermark.
2. Then fetch: Fetch with replica_id = this broker, from the log end offset, replica.fetch.max.bytes per partition,
   replica.fetch.response.max.bytes in all, waiting up to replica.fetch.wait.max.ms for replica.fetch.min.bytes.
   The leader learns this replica's log end offset from that fetch offset (its high watermark and ISR follow); the
   fetched batches are appended with the leader's offsets and epochs, and the follower's high watermark follows the
   leader's. A partition whose leader answers with an error (it is no longer leader, epochs differ) backs off for
   replica.fetch.backoff.ms until the metadata image says what changed.
3. Throttling (the reassignment throttle, KIP-73): the replicas a topic's follower.replication.throttled.replicas
   names ("partition:broker" entries or "*") share this broker's follower.replication.throttled.rate (a dynamic
   broker config, bytes/s): while the bytes fetched for them exceed the rate, they are left out of fetches; other
   partitions are never held back. (The leader-side rate is not enforced: the follower side bounds the copy.)
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import ssl
import time
import zlib
from collections.abc import Callable

from kfk.common.clock import Clock
from kfk.common.structs import TopicPartition
from kfk.config import BrokerConfig
from kfk.errors import ErrorCode, KafkaError, NetworkError
from kfk.protocol.fetch_session import FetchSessionBuilder
from kfk.protocol.messages.fetch import FetchRequest, FetchResponse
from kfk.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse
from kfk.records import complete_entries_length
from kfk.replication.broker_channel import BrokerChannel
from kfk.security.sasl.settings import inter_broker_sasl
from kfk.replication.partition import Partition
from kfk.storage.log import Log
from kfk.storage.log_manager import LogManager

logger = logging.getLogger(__name__)

FETCH_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
_WAIT_FOR_METADATA = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
                      ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.LEADER_NOT_AVAILABLE)


def truncation_offset(log: Log, requested_epoch: int, leader_epoch: int, leader_end_offset: int) -> int:
    """Where a follower's log must end before it fetches from a new leader (KIP-279), from the leader's answer to
    OffsetForLeaderEpoch(`requested_epoch`, this log's latest epoch): the end of that epoch on the leader, or, if
    the leader's largest epoch at or below it is older, where that older epoch ends in this log too; the high
    watermark when the leader knows none of its epochs. (The caller never goes below its high watermark.)"""
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        return log.high_watermark
    target = min(leader_end_offset, log.log_end_offset)
    if leader_epoch < requested_epoch:
        _, own_end = log.end_offset_for_epoch(leader_epoch)
        if own_end >= 0:
            target = min(target, own_end)
    return target


def fetcher_id(topic_partition: TopicPartition, num_fetchers: int) -> int:
    return (zlib.crc32(topic_partition.topic.encode()) * 31 + topic_partition.partition) % num_fetchers


class ReplicationQuota:
    """A token bucket of `rate` bytes/s with one second of burst (Kafka's ReplicationQuotaManager, simplified):
    exceeded while more bytes were recorded than the rate allowed so far."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.rate: int | None = None
        self.tokens = 0.0
        self.updated = clock()

    def update_rate(self, rate: int | None) -> None:
        if rate != self.rate:
            self._refill()
            self.rate = rate
            self.tokens = float(rate or 0)

    def _refill(self) -> None:
        now = self.clock()
        if self.rate is not None:
            self.tokens = min(float(self.rate), self.tokens + (now - self.updated) * self.rate)
        self.updated = now

    def is_exceeded(self) -> bool:
        if self.rate is None:
            return False
        self._refill()
        return self.tokens < 0

    def record(self, size: int) -> None:
        if self.rate is not None:
            self._refill()
            self.tokens -= size


#: The follower throttle of this broker: (rate in bytes/s or None, is this followed partition throttled?).
ThrottleConfig = Callable[[], tuple[int | None, Callable[[TopicPartition], bool]]]


def no_throttle() -> tuple[int | None, Callable[[TopicPartition], bool]]:
    return None, lambda topic_partition: False


@dataclasses.dataclass(slots=True)
class PartitionFetchState:
    leader_epoch: int
    truncating: bool = True
    delayed_until: float = 0.0


class ReplicaFetcher:
    """Fetches the partitions it is given from one leader broker."""

    def __init__(self, node_id: int, leader_id: int, host: str, port: int, config: BrokerConfig,
                 get_partition: Callable[[TopicPartition], Partition | None], log_manager: LogManager, now_ms: Clock,
                 name: str, quota: ReplicationQuota | None = None, throttle: ThrottleConfig = no_throttle,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.node_id = node_id
        self.log_manager = log_manager  # truncations go through it: it pauses the partition's cleaning
        self.quota = quota or ReplicationQuota()
        self.throttle = throttle
        self.leader_id = leader_id
        self.address = (host, port)
        self.config = config
        self.get_partition = get_partition
        self.now_ms = now_ms
        self.name = name
        self.channel = BrokerChannel(host, port, f"broker-{node_id}-fetcher-{name}",
                                     request_timeout_ms=config.replica_fetch_wait_max_ms + 30_000,
                                     ssl_context=ssl_context, sasl=inter_broker_sasl(config))
        self.partitions: dict[TopicPartition, PartitionFetchState] = {}
        self._wakeup = asyncio.Event()
        # An incremental fetch session (KIP-227) with the leader: idle partitions are not named in every fetch.
        self._session = FetchSessionBuilder()
        self._task: asyncio.Task | None = None
        self._stopped = False

    def add_partition(self, topic_partition: TopicPartition, leader_epoch: int) -> None:
        if self._stopped:
            raise RuntimeError(f"fetcher {self.name} is stopped")
        state = self.partitions.get(topic_partition)
        if state is not None and state.leader_epoch == leader_epoch:
            return
        self.partitions[topic_partition] = PartitionFetchState(leader_epoch)
        self._wakeup.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"replica-fetcher-{self.name}")

    def remove_partition(self, topic_partition: TopicPartition) -> None:
        self.partitions.pop(topic_partition, None)

    async def shutdown(self) -> None:
        self._stopped = True  # the loop ends at its next turn even if a cancellation were lost
        self.partitions.clear()
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - stopping
                pass
        await self.channel.close()

    async def _run(self) -> None:
        backoff_s = self.config.replica_fetch_backoff_ms / 1000
        while not self._stopped:
            if not self.partitions:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            try:
                if any(state.truncating for state in self.partitions.values()):
                    await self._truncate()
                if not await self._fetch():
                    # Nothing fetchable now (all backing off or truncating): wait a little or for a new partition.
                    self._wakeup.clear()
                    try:
                        async with asyncio.timeout(min(backoff_s, 0.1)):
                            await self._wakeup.wait()
                    except TimeoutError:
                        pass
            except NetworkError as error:
                logger.debug("fetcher %s: %s", self.name, error)
                await asyncio.sleep(min(backoff_s, 0.2))
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - a fetcher must survive to fetch again
                logger.exception("replica fetcher %s failed; retrying", self.name)
                await asyncio.sleep(backoff_s)

    # -- truncation --------------------------------------------------------------------------------------------------

    async def _truncate(self) -> None:
        by_topic: dict[str, list[OffsetForLeaderEpochRequest.OffsetForLeaderPartition]] = {}
        asked: dict[TopicPartition, tuple[int, int]] = {}
        for topic_partition, state in list(self.partitions.items()):
            if not state.truncating or state.delayed_until > asyncio.get_running_loop().time():
                continue
            partition = self.get_partition(topic_partition)
            if partition is None:
                continue
            latest_epoch = partition.log.latest_epoch()
            if latest_epoch is None:
                self._truncate_to(partition, partition.log.high_watermark, "its log has no leader epochs")
                state.truncating = False
                continue
            asked[topic_partition] = (latest_epoch, state.leader_epoch)
            by_topic.setdefault(topic_partition.topic, []).append(OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
                partition=topic_partition.partition, current_leader_epoch=state.leader_epoch,
                leader_epoch=latest_epoch))
        if not by_topic:
            return
        request = OffsetForLeaderEpochRequest(replica_id=self.node_id, topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=topic, partitions=partitions)
            for topic, partitions in by_topic.items()])
        response: OffsetForLeaderEpochResponse = await self.channel.request(request, OFFSET_FOR_LEADER_EPOCH_VERSION)
        for topic in response.topics:
            for result in topic.partitions:
                topic_partition = TopicPartition(topic.topic, result.partition)
                state = self.partitions.get(topic_partition)
                partition = self.get_partition(topic_partition)
                if state is None or partition is None or asked.get(topic_partition, (0, -2))[1] != state.leader_epoch:
                    continue
                if result.error_code != ErrorCode.NONE:
                    self._back_off(topic_partition, state, result.error_code)
                    continue
                target = truncation_offset(partition.log, asked[topic_partition][0], result.leader_epoch,
                                           result.end_offset)
                reason = ("the leader knows none of its epochs" if result.end_offset == UNDEFINED_EPOCH_OFFSET
                          else f"leader epoch {result.leader_epoch} ends at {result.end_offset} on the leader")
                self._truncate_to(partition, target, reason)
                state.truncating = False

    def _truncate_to(self, partition: Partition, target: int, reason: str) -> None:
        log = partition.log
        high_watermark = log.high_watermark
        if target < high_watermark:
            logger.warning("%s: not truncating below the high watermark %d (to %d: %s)", partition.topic_partition,
                           high_watermark, target, reason)
        target = max(target, high_watermark)
        if target < log.log_end_offset:
            logger.info("%s: truncating the divergent tail from %d to %d (%s)", partition.topic_partition,
                        log.log_end_offset, target, reason)
            self.log_manager.truncate_to(partition.topic_partition, target, self.now_ms())

    # -- fetch -------------------------------------------------------------------------------------------------------

    async def _fetch(self) -> bool:
        """One fetch round; False if no partition was fetchable."""
        now = asyncio.get_running_loop().time()
        config = self.config
        wanted: dict[tuple[str, int], FetchRequest.FetchPartition] = {}
        epochs: dict[TopicPartition, int] = {}
        rate, is_throttled = self.throttle()
        self.quota.update_rate(rate)
        over_quota = self.quota.is_exceeded()
        throttled: set[TopicPartition] = set()
        for topic_partition, state in self.partitions.items():
            if state.truncating or state.delayed_until > now:
                continue
            if rate is not None and is_throttled(topic_partition):
                if over_quota:
                    continue
                throttled.add(topic_partition)
            partition = self.get_partition(topic_partition)
            if partition is None:
                continue
            log = partition.log
            latest_epoch = log.latest_epoch()
            epochs[topic_partition] = state.leader_epoch
            wanted[(topic_partition.topic, topic_partition.partition)] = FetchRequest.FetchPartition(
                partition=topic_partition.partition, current_leader_epoch=state.leader_epoch,
                fetch_offset=log.log_end_offset,
                last_fetched_epoch=UNDEFINED_EPOCH if latest_epoch is None else latest_epoch,
                log_start_offset=log.log_start_offset, partition_max_bytes=config.replica_fetch_max_bytes)
        if not wanted:
            return False
        session = self._session.build(wanted)
        request = FetchRequest(replica_id=self.node_id, max_wait_ms=config.replica_fetch_wait_max_ms,
                               min_bytes=config.replica_fetch_min_bytes,
                               max_bytes=config.replica_fetch_response_max_bytes, isolation_level=0,
                               session_id=session.session_id, session_epoch=session.session_epoch,
                               topics=session.topics, forgotten_topics_data=session.forgotten_topics_data)
        try:
            response: FetchResponse = await self.channel.request(request, FETCH_VERSION)
        except BaseException:
            self._session.reset()  # the broker may or may not have moved the session on: start a new one
            raise
        if not self._session.handle_response(response):
            logger.debug("fetcher %s: fetch session error %s; the next fetch is full", self.name,
                         ErrorCode(response.error_code).name)
            return True
        if response.error_code != ErrorCode.NONE:
            self._session.reset()
            raise NetworkError(f"fetch from broker {self.leader_id} failed: {ErrorCode(response.error_code).name}")
        for topic in response.responses:
            for data in topic.partitions:
                topic_partition = TopicPartition(topic.topic, data.partition_index)
                state = self.partitions.get(topic_partition)
                partition = self.get_partition(topic_partition)
                if topic_partition in throttled and data.records:
                    self.quota.record(len(data.records))
                if state is None or partition is None or epochs.get(topic_partition) != state.leader_epoch \
                        or state.truncating:
                    continue  # the partition moved on while the fetch was in flight
                self._process(topic_partition, partition, state, data)
        return True

    def _process(self, topic_partition: TopicPartition, partition: Partition, state: PartitionFetchState,
                 data: FetchResponse.PartitionData) -> None:
        if data.error_code == ErrorCode.NONE:
            records = data.records or b""
            complete = complete_entries_length(records) if records else 0
            try:
                partition.append_as_follower(memoryview(records)[:complete] if complete else b"",
                                             data.high_watermark, data.log_start_offset, self.now_ms())
            except KafkaError as error:
                logger.warning("%s: appending fetched records failed: %s", topic_partition, error)
                state.truncating = True
                self._back_off(topic_partition, state, error.error_code)
            return
        if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._handle_out_of_range(partition, data)
            return
        self._back_off(topic_partition, state, data.error_code)

    def _handle_out_of_range(self, partition: Partition, data: FetchResponse.PartitionData) -> None:
        """Our log end is outside the leader's log: below its start (it deleted what we lack: start over at its log
        start), or beyond its end (an unclean leader has less: cut back to its high watermark, losing records)."""
        log = partition.log
        now_ms = self.now_ms()
        if data.log_start_offset >= 0 and log.log_end_offset < data.log_start_offset:
            logger.info("%s: fetch offset %d is below the leader's log start %d; restarting the log there",
                        partition.topic_partition, log.log_end_offset, data.log_start_offset)
            self.log_manager.truncate_fully_and_start_at(partition.topic_partition, data.log_start_offset, now_ms)
        elif data.high_watermark >= 0 and log.log_end_offset > data.high_watermark:
            logger.warning("%s: the leader's log ends before ours (%d > %d): truncating (records may be lost)",
                           partition.topic_partition, log.log_end_offset, data.high_watermark)
            self.log_manager.truncate_to(partition.topic_partition, data.high_watermark, now_ms)

    def _back_off(self, topic_partition: TopicPartition, state: PartitionFetchState, error: int) -> None:
        if error not in _WAIT_FOR_METADATA:
            logger.warning("%s: fetch from broker %d failed: %s", topic_partition, self.leader_id,
                           ErrorCode(error).name if error in ErrorCode._value2member_map_ else error)
        state.delayed_until = asyncio.get_running_loop().time() + self.config.replica_fetch_backoff_ms / 1000


class ReplicaFetcherManager:
    """Which fetcher copies which followed partition; fetchers start with their first partition and stop when
    their leader has none left for them."""

    def __init__(self, node_id: int, config: BrokerConfig, get_partition: Callable[[TopicPartition], Partition | None],
                 log_manager: LogManager, now_ms: Clock, throttle: ThrottleConfig = no_throttle,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.node_id = node_id
        self.log_manager = log_manager
        self.throttle = throttle
        self.ssl_context = ssl_context  # TLS to the leaders (an SSL or SASL_SSL inter-broker listener)
        self.quota = ReplicationQuota()  # one follower quota for the whole broker, as in Kafka
        self.config = config
        self.get_partition = get_partition
        self.now_ms = now_ms
        self.fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self.assignment: dict[TopicPartition, tuple[int, int]] = {}

    def add_partition(self, topic_partition: TopicPartition, leader_id: int, leader_epoch: int, host: str,
                      port: int) -> None:
        key = (leader_id, fetcher_id(topic_partition, self.config.num_replica_fetchers))
        previous = self.assignment.get(topic_partition)
        if previous is not None and previous != key:
            self.remove_partition(topic_partition)
        fetcher = self.fetchers.get(key)
        moved: dict[TopicPartition, PartitionFetchState] = {}
        if fetcher is not None and fetcher.address != (host, port):
            moved = dict(fetcher.partitions)  # the leader came back on another address: follow it there
            self._stop(key)
            fetcher = None
        if fetcher is None:
            fetcher = ReplicaFetcher(self.node_id, leader_id, host, port, self.config, self.get_partition,
                                     self.log_manager, self.now_ms, f"{leader_id}-{key[1]}", self.quota, self.throttle,
                                     self.ssl_context)
            self.fetchers[key] = fetcher
        for other, state in moved.items():
            self.assignment[other] = key
            fetcher.add_partition(other, state.leader_epoch)
        self.assignment[topic_partition] = key
        fetcher.add_partition(topic_partition, leader_epoch)

    def resize(self) -> None:
        """A dynamic num.replica.fetchers (Kafka's resizeThreadPool): every followed partition moves to the fetcher
        the new count gives it, with its leader epoch (it checks for truncation again there); emptied fetchers
        stop."""
        for topic_partition, key in list(self.assignment.items()):
            fetcher = self.fetchers.get(key)
            state = fetcher.partitions.get(topic_partition) if fetcher is not None else None
            if state is not None:
                self.add_partition(topic_partition, key[0], state.leader_epoch, *fetcher.address)

    def remove_partition(self, topic_partition: TopicPartition) -> None:
        key = self.assignment.pop(topic_partition, None)
        if key is None:
            return
        fetcher = self.fetchers.get(key)
        if fetcher is not None:
            fetcher.remove_partition(topic_partition)
            if not fetcher.partitions:
                self._stop(key)

    def _stop(self, key: tuple[int, int]) -> None:
        fetcher = self.fetchers.pop(key, None)
        if fetcher is not None:
            for topic_partition in list(fetcher.partitions):
                self.assignment.pop(topic_partition, None)
            asyncio.get_running_loop().create_task(fetcher.shutdown())

    async def shutdown(self) -> None:
        fetchers = list(self.fetchers.values())
        self.fetchers.clear()
        self.assignment.clear()
        await asyncio.gather(*(fetcher.shutdown() for fetcher in fetchers), return_exceptions=True)
