"""ReplicaManager: the partitions this broker hosts and the data path through them (Kafka's ReplicaManager).

- Metadata: it listens to the MetadataCache. For every partition whose replicas include this node it opens (or
  creates) the log with the topic's id and LogConfig and makes the partition leader or follower in the image's
  leader epoch; a topic removed from the image has its logs deleted; a topic whose configs changed gets the new
  LogConfig. Opening and deleting logs is file work (creating files, fsyncing checkpoints: a few ms per partition),
  so it runs in the executor, one change after the other in image order; a produce or fetch for a partition being
  opened waits for it. A log on disk whose topic the image does not know is left alone (it may be a topic the image
  has not replayed yet); one whose topic id differs from the image's (deleted and re-created while this broker was
  down) is set aside as a stray replica (stray_replicas.py, which the broker runs at startup) before the new one is
  created.
- Followers: a partition this broker follows is handed to the ReplicaFetcherManager (replica_fetcher.py), which
  truncates its divergent tail by leader epoch and then fetches from the leader's inter-broker endpoint; a leader
  that changes address or loses its registration is followed again or dropped when the image says so.
- In-sync replicas (multi-broker backends): every replica.lag.time.max.ms / 2 each led partition drops the
  followers that have not caught up for replica.lag.time.max.ms, and a follower whose fetch reaches the high
  watermark is added back; the change is persisted through the backend (`alter_partition`: a conditional write of
  the partition state) and adopted when the image brings it back.
- Produce (`append_records`): leader and min ISR checks, validation and append per partition, then for acks=all a
  DelayedProduce that completes when the high watermark passes the records, or times out.
- Fetch (`fetch_messages`): reads file regions (nothing is copied) from each partition up to the bound of the
  isolation level; when less than min_bytes is there, a DelayedFetch waits for appends until max_wait_ms.
- ListOffsets, DeleteRecords, OffsetForLeaderEpoch, DescribeLogDirs.

Everything runs on the event loop, except what takes milliseconds (DESIGN decision 8), measured with
bench/bench_broker.py: an append whose records must be converted, re-encoded or decoded (legacy message sets, a topic
codec other than the batch's, compacted topics) and any append to a topic with a flush.messages policy (an fsync may
follow) go to the default executor. A plain append is a header pass, a CRC and a write: 0.5 ms for 1 MiB on the
loop, 0.7 ms through the executor, so it stays on the loop whatever its size.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import functools
import logging
import os
import ssl
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import NamedTuple

from kfk.common.clock import Clock
from kfk.common.config_types import ConfigResourceType
from kfk.common.constants import INT64_MAX, UNKNOWN_LEADER_EPOCH
from kfk.common.structs import TopicPartition
from kfk.config import BrokerConfig, LogConfig
from kfk.errors import (
    ErrorCode,
    InconsistentTopicIdError,
    InvalidRecordError,
    InvalidTimestampError,
    InvalidTopicError,
    KafkaError,
    KafkaStorageError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from kfk.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from kfk.metadata.topic_names import is_internal
from kfk.replication.broker_topic_stats import BrokerTopicStats
from kfk.replication.delayed_fetch import DelayedFetch
from kfk.replication.delayed_produce import DelayedProduce, ProducePartitionResult, ProducePartitionStatus
from kfk.replication.fetch_params import FetchParams, FetchPartitionRequest, LogReadResult
from kfk.replication.partition import Partition
from kfk.replication.purgatory import AsyncioExpirationTimer, DelayedOperationPurgatory
from kfk.replication.replica_fetcher import ReplicaFetcherManager
from kfk.storage.fetch_data_info import TimestampAndOffset
from kfk.storage.log import Log, VerificationGuard
from kfk.storage.log_manager import LogManager
from kfk.storage.log_validator import RecordValidationError, append_needs_record_work
from kfk.storage.producer_state import AppendOrigin, ProducerStateEntry

logger = logging.getLogger(__name__)

FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"


@dataclasses.dataclass(frozen=True, slots=True)
class LogDirPartition:
    partition: int
    size: int
    offset_lag: int
    is_future: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class LogDirDescription:
    """DescribeLogDirs' view of one log dir."""

    path: str
    error: ErrorCode
    topics: dict[str, list[LogDirPartition]]
    total_bytes: int = -1
    usable_bytes: int = -1


class _Opening(NamedTuple):
    """A partition whose log is being opened in the executor; `ready` resolves once it is hosted (or dropped)."""

    topic_id: uuid.UUID
    ready: asyncio.Future


#: DescribeLogDirs' offset lag of a log whose partition this broker does not host (Kafka's INVALID_OFFSET_LAG).
INVALID_OFFSET_LAG = -1
#: How many log creations or deletions (of distinct partitions) run in the executor at once.
FILE_WORK_CHUNK = 8
#: Persists a leader's ISR change: (topic, partition, leader, leader_epoch, new ISR, partition epoch it was computed
#: from) -> the new partition epoch; raises InvalidUpdateVersionError when the partition changed meanwhile.
AlterPartition = Callable[[str, int, int, int, tuple[int, ...], int], Awaitable[int]]


class ReplicaManager:
    def __init__(self, node_id: int, config: BrokerConfig, log_manager: LogManager,
                 now_ms: Clock, alter_partition: AlterPartition | None = None,
                 inter_broker_ssl: ssl.SSLContext | None = None) -> None:
        self.node_id = node_id
        self.config = config
        self.log_manager = log_manager
        self.now_ms = now_ms
        self.partitions: dict[TopicPartition, Partition] = {}
        self.image = MetadataImage()
        self.produce_purgatory: DelayedOperationPurgatory[DelayedProduce] = DelayedOperationPurgatory(
            "Produce", self._arm_expiration_timer)
        self.fetch_purgatory: DelayedOperationPurgatory[DelayedFetch] = DelayedOperationPurgatory(
            "Fetch", self._arm_expiration_timer)
        self._timer = AsyncioExpirationTimer([self.produce_purgatory, self.fetch_purgatory], now_ms)
        self._opening: dict[TopicPartition, _Opening] = {}
        self._file_work: collections.deque[tuple[functools.partial, _Opening | None]] = collections.deque()
        self._file_worker: asyncio.Task | None = None
        self.fetcher_manager = ReplicaFetcherManager(node_id, config, self.partitions.get, log_manager, now_ms,
                                                     self._follower_throttle, inter_broker_ssl)
        self.inter_broker_listener = config.inter_broker_listener
        self._alter_partition = alter_partition
        self._isr_changes_in_flight: set[TopicPartition] = set()
        #: The last ISR change logged per partition (a change proposed again is not logged again).
        self._isr_changes_logged: dict[TopicPartition, tuple[int, ...]] = {}
        self._isr_expiration: asyncio.Task | None = None
        #: Set once this broker stops following (controlled shutdown done, or shutting down): no fetcher restarts.
        self._following_stopped = False
        #: Moves of replicas to another log dir running in the executor (AlterReplicaLogDirs).
        self._log_dir_moves: set[asyncio.Future] = set()
        #: Traffic per topic, and the ISR changes of led partitions applied (Kafka's IsrShrinksPerSec and
        #: IsrExpandsPerSec), for the metrics endpoint.
        self.topic_stats = BrokerTopicStats()
        self.isr_shrinks = 0
        self.isr_expands = 0

    def _arm_expiration_timer(self, deadline_ms: int) -> None:
        self._timer.arm(deadline_ms)

    async def shutdown(self) -> None:
        """Let pending log creations and deletions finish, then answer every waiting request (acks=all produces
        time out, fetches return what is there)."""
        await self.metadata_applied()
        self.log_manager.abort_log_dir_moves()
        await asyncio.gather(*self._log_dir_moves, return_exceptions=True)
        self._following_stopped = True
        if self._isr_expiration is not None:
            self._isr_expiration.cancel()
        await self.fetcher_manager.shutdown()
        self._timer.cancel()
        self.produce_purgatory.complete_all()
        self.fetch_purgatory.complete_all()

    # -- metadata ----------------------------------------------------------------------------------------------------

    def on_metadata_update(self, previous: MetadataImage, current: MetadataImage) -> None:
        """MetadataCache listener (on the event loop): apply what changed between two images. Role and config
        changes of hosted partitions apply now; creating and deleting logs (files, fsyncs: milliseconds each) is
        queued, in image order, for the executor. A request for a partition being created waits for it."""
        self.image = current
        if self._alter_partition is not None and self._isr_expiration is None:
            self._isr_expiration = asyncio.get_running_loop().create_task(self._expire_lagging_replicas())
        for topic in current.topics_deleted_since(previous):
            doomed = [tp for tp, partition in self.partitions.items() if partition.topic_id == topic.topic_id]
            doomed += [tp for tp, opening in self._opening.items() if opening.topic_id == topic.topic_id]
            self._remove_partitions(doomed, f"topic {topic.name} deleted")
            self.topic_stats.remove(topic.name)
        broker_defaults_changed = any(
            previous.config(ConfigResourceType.BROKER, name) != current.config(ConfigResourceType.BROKER, name)
            for name in ("", str(self.node_id)))  # the dynamic broker configs: self.config has them already
        for topic in current.topics_by_id.values():
            previous_topic = previous.topics_by_id.get(topic.topic_id)
            if previous_topic is topic and previous.configs is current.configs:
                continue  # images share the topics a change did not touch
            self._apply_topic(previous_topic, topic, previous, current, broker_defaults_changed)
        if previous.brokers is not current.brokers:  # a leader may have come back on another address
            for partition in self.partitions.values():
                if not partition.is_leader:
                    self._follow(partition)
        if self._file_work and (self._file_worker is None or self._file_worker.done()):
            self._file_worker = asyncio.get_running_loop().create_task(self._run_file_work())

    async def metadata_applied(self) -> None:
        """Wait until the logs of every image seen so far are created or deleted."""
        while self._file_worker is not None and not self._file_worker.done():
            await asyncio.shield(self._file_worker)

    def _apply_topic(self, previous_topic: TopicImage | None, topic: TopicImage, previous: MetadataImage,
                     current: MetadataImage, broker_defaults_changed: bool) -> None:
        overrides = current.config(ConfigResourceType.TOPIC, topic.name)
        if previous_topic is not None and any(tp.topic == topic.name for tp in self.partitions) and (
                broker_defaults_changed or overrides != previous.config(ConfigResourceType.TOPIC, topic.name)):
            config = self._log_config(topic.name, overrides)
            if config != self.log_manager.topic_configs.get(topic.name):
                self.log_manager.update_topic_config(topic.name, config)
        now_ms = self.now_ms()
        removed: list[TopicPartition] = []
        for index, registration in topic.partitions.items():
            topic_partition = TopicPartition(topic.name, index)
            partition = self.partitions.get(topic_partition)
            if self.node_id not in registration.replicas:
                if partition is not None or topic_partition in self._opening:
                    removed.append(topic_partition)
                continue
            if partition is None:
                if topic_partition not in self._opening:
                    self._open_partition(topic_partition, topic.topic_id, registration)
                continue  # one being opened takes the registration of the image current when it is installed
            if previous_topic is None or previous_topic.partitions.get(index) != registration:
                self._apply_registration(partition, registration, now_ms)
        if removed:
            self._remove_partitions(removed, "no longer a replica")

    def _log_config(self, topic: str, overrides: Mapping[str, str]) -> LogConfig:
        try:
            return self.config.log_config(overrides)
        except KafkaError as error:
            logger.error("Invalid configs of topic %s (%s); using the broker defaults", topic, error)
            return self.config.log_config()

    def _open_partition(self, topic_partition: TopicPartition, topic_id: uuid.UUID,
                        registration: PartitionRegistration) -> None:
        config = self._log_config(topic_partition.topic,
                                  self.image.config(ConfigResourceType.TOPIC, topic_partition.topic))
        leader_epoch = registration.leader_epoch if registration.leader == self.node_id else None
        opening = _Opening(topic_id, asyncio.get_running_loop().create_future())
        self._opening[topic_partition] = opening
        self._file_work.append((functools.partial(self._open_log, topic_partition, topic_id, config, leader_epoch),
                                opening))

    def _open_log(self, topic_partition: TopicPartition, topic_id: uuid.UUID, config: LogConfig,
                  leader_epoch: int | None) -> Log | None:
        """In the executor: open or create the log (replacing one left by an earlier topic of the same name) and,
        for a leader, record where its epoch starts, so that becoming leader on the loop writes nothing."""
        log_manager = self.log_manager
        now_ms = self.now_ms()
        existing = log_manager.get_log(topic_partition)
        if existing is not None and existing.partition_metadata.exists():
            try:
                stale = existing.partition_metadata.read() != topic_id
            except KafkaStorageError:
                stale = False
            if stale:  # a deletion this broker missed (stray_replicas.py sets such logs aside at startup)
                log_manager.mark_stray(topic_partition)
        try:
            log = log_manager.get_or_create_log(topic_partition, now_ms, topic_id=topic_id, config=config)
            if log.config != config:
                log_manager.update_topic_config(topic_partition.topic, config)
            if leader_epoch is not None:
                log.maybe_assign_epoch_start_offset(leader_epoch)
            return log
        except (KafkaStorageError, InconsistentTopicIdError, OSError) as error:
            logger.error("Cannot open the log of %s: %s", topic_partition, error)
            return None

    def _install_partition(self, topic_partition: TopicPartition, log: Log | None, opening: _Opening) -> None:
        """Back on the loop: host the opened log in the role the current image gives it (unless the partition
        was removed meanwhile: the deletion queued after this opening removes the log)."""
        if self._opening.get(topic_partition) is not opening:
            return
        del self._opening[topic_partition]
        try:
            topic = self.image.topics_by_id.get(opening.topic_id)
            registration = topic.partitions.get(topic_partition.partition) if topic is not None else None
            if log is None or registration is None:
                return
            config = self._log_config(topic_partition.topic,
                                      self.image.config(ConfigResourceType.TOPIC, topic_partition.topic))
            if log.config != config:  # the topic's configs changed while the log was being opened
                self.log_manager.update_topic_config(topic_partition.topic, config)
            partition = Partition(topic_partition, opening.topic_id, self.node_id, log,
                                  self.config.replica_lag_time_max_ms)
            self.partitions[topic_partition] = partition
            self._apply_registration(partition, registration, self.now_ms())
        finally:
            opening.ready.set_result(None)

    def _remove_partitions(self, topic_partitions: Iterable[TopicPartition], reason: str) -> None:
        """Stop hosting now (waiting requests are answered), delete the logs in the executor."""
        for topic_partition in list(topic_partitions):
            self.partitions.pop(topic_partition, None)
            self.fetcher_manager.remove_partition(topic_partition)
            opening = self._opening.pop(topic_partition, None)
            if opening is not None:
                opening.ready.set_result(None)  # requests waiting for it now find it gone
            self._complete_delayed_requests(topic_partition)
            logger.info("Deleting the log of %s: %s", topic_partition, reason)
            self._file_work.append((functools.partial(self._delete_log, topic_partition), None))

    def _delete_log(self, topic_partition: TopicPartition) -> None:
        self.log_manager.delete_log(topic_partition, self.now_ms())

    async def _run_file_work(self) -> None:
        """The queued log creations and deletions, in image order, in chunks of up to FILE_WORK_CHUNK at once for
        distinct partitions: a new log costs fsyncs, which overlap when they run side by side, so a broker given
        10,000 new partitions does not wait for 10,000 of them one after another (nor its followers' fetches,
        which start once their logs exist, fall out of the ISR meanwhile)."""
        loop = asyncio.get_running_loop()
        while self._file_work:
            chunk: list[tuple[functools.partial, _Opening | None]] = []
            while self._file_work and len(chunk) < FILE_WORK_CHUNK \
                    and all(work.args[0] != self._file_work[0][0].args[0] for work, _ in chunk):
                chunk.append(self._file_work.popleft())
            results = await asyncio.gather(*(loop.run_in_executor(None, work) for work, _ in chunk),
                                           return_exceptions=True)
            for (work, opening), result in zip(chunk, results):
                if isinstance(result, Exception):  # one partition's failure must not stop the others
                    logger.error("Error applying metadata to %s", work.args[0], exc_info=result)
                    result = None
                elif isinstance(result, BaseException):
                    raise result
                if opening is not None:
                    self._install_partition(work.args[0], result, opening)

    async def _wait_until_opened(self, topic_partitions: Iterable[TopicPartition]) -> None:
        """A request for a partition whose log is still being created waits for it instead of failing."""
        if not self._opening:
            return
        waiting = [self._opening[tp].ready for tp in topic_partitions if tp in self._opening]
        if waiting:
            await asyncio.wait(waiting)

    def _apply_registration(self, partition: Partition, registration: PartitionRegistration, now_ms: int) -> None:
        if registration.leader == self.node_id:
            self.fetcher_manager.remove_partition(partition.topic_partition)
            partition.make_leader(registration, now_ms)
        else:
            partition.make_follower(registration)
            self._follow(partition)
        self._complete_delayed_requests(partition.topic_partition)

    def stop_following(self) -> None:
        """After a controlled shutdown (Kafka's StopReplica to the broker that leaves): stop every fetcher and start
        none again, so that no leader adds this broker back to an ISR the controller just took it out of."""
        self._following_stopped = True
        for topic_partition in list(self.fetcher_manager.assignment):
            self.fetcher_manager.remove_partition(topic_partition)

    def _follow(self, partition: Partition) -> None:
        """Fetch from the partition's leader, or stop fetching while it has none (or its broker is down)."""
        endpoint = self.image.alive_endpoint(partition.leader_id, self.inter_broker_listener) \
            if partition.leader_id >= 0 and not self._following_stopped else None
        if endpoint is None:
            self.fetcher_manager.remove_partition(partition.topic_partition)
        else:
            self.fetcher_manager.add_partition(partition.topic_partition, partition.leader_id,
                                               partition.leader_epoch, endpoint.host, endpoint.port)

    def _follower_throttle(self) -> tuple[int | None, Callable[[TopicPartition], bool]]:
        """follower.replication.throttled.rate of this broker (or the cluster default) and which followed
        partitions it applies to: those whose topic lists "partition:this broker" (or "*") in
        follower.replication.throttled.replicas."""
        image = self.image
        rate = image.config(ConfigResourceType.BROKER, str(self.node_id)).get(FOLLOWER_THROTTLED_RATE) \
            or image.config(ConfigResourceType.BROKER, "").get(FOLLOWER_THROTTLED_RATE)
        if rate is None:
            return None, lambda topic_partition: False
        mine = f":{self.node_id}"

        def is_throttled(topic_partition: TopicPartition) -> bool:
            partition = self.partitions.get(topic_partition)
            if partition is None:
                return False
            replicas = partition.log.config.follower_replication_throttled_replicas
            return "*" in replicas or f"{topic_partition.partition}{mine}" in replicas

        return int(rate), is_throttled

    # -- in-sync replicas --------------------------------------------------------------------------------------------

    async def _expire_lagging_replicas(self) -> None:
        """Kafka's isr-expiration task: every replica.lag.time.max.ms / 2, every led partition drops the followers
        that have not caught up for replica.lag.time.max.ms."""
        interval_s = max(self.config.replica_lag_time_max_ms / 2, 10) / 1000
        while True:
            await asyncio.sleep(interval_s)
            now_ms = self.now_ms()
            for partition in list(self.partitions.values()):
                new_isr = partition.isr_after_shrink(now_ms)
                if new_isr is not None:
                    lagging = [r for r in partition.in_sync_replicas if r not in new_isr]
                    self._submit_isr_change(partition, new_isr, f"followers {lagging} have not caught up for "
                                                                f"{self.config.replica_lag_time_max_ms} ms")

    def _isr_eligible(self, broker_id: int) -> bool:
        """KIP-841: only a registered, unfenced broker may join an ISR (a broker whose ZooKeeper session expired may
        still be fetching until it notices; the controller would take it out again at once)."""
        broker = self.image.brokers.get(broker_id)
        return broker is not None and not broker.fenced and not broker.in_controlled_shutdown

    def _submit_isr_change(self, partition: Partition, new_isr: tuple[int, ...], reason: str) -> None:
        """Persist an ISR change through the metadata backend (one in flight per partition); the partition adopts
        it when the new registration comes back through the metadata image. Every follower fetch while a change is
        in flight (or after it failed, e.g. while ZooKeeper is away) proposes it again, so it is logged only when
        it differs from the last change logged for the partition: once per change."""
        topic_partition = partition.topic_partition
        if self._alter_partition is None or topic_partition in self._isr_changes_in_flight:
            return
        self._isr_changes_in_flight.add(topic_partition)
        if self._isr_changes_logged.get(topic_partition) != new_isr:
            self._isr_changes_logged[topic_partition] = new_isr
            logger.info("%s: %s; changing the ISR from %s to %s", topic_partition, reason,
                        list(partition.in_sync_replicas), list(new_isr))

        async def alter() -> None:
            shrink = len(new_isr) < len(partition.in_sync_replicas)
            try:
                await self._alter_partition(topic_partition.topic, topic_partition.partition, partition.leader_id,
                                            partition.leader_epoch, new_isr, partition.partition_epoch)
                if shrink:
                    self.isr_shrinks += 1
                else:
                    self.isr_expands += 1
            except KafkaError as error:
                logger.info("%s: ISR change to %s not applied: %s", topic_partition, list(new_isr), error)
            except Exception:  # noqa: BLE001
                logger.exception("%s: ISR change to %s failed", topic_partition, list(new_isr))
            finally:
                self._isr_changes_in_flight.discard(topic_partition)

        asyncio.get_running_loop().create_task(alter())

    def _complete_delayed_requests(self, topic_partition: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(topic_partition)
        self.fetch_purgatory.check_and_complete(topic_partition)

    # -- lookups -----------------------------------------------------------------------------------------------------

    def get_partition(self, topic_partition: TopicPartition) -> Partition | None:
        return self.partitions.get(topic_partition)

    def compression_type(self, topic_partition: TopicPartition) -> str | None:
        """The compression.type of the partition's log here; None when this broker does not host it."""
        partition = self.partitions.get(topic_partition)
        return partition.log.config.compression_type if partition is not None else None

    def get_partition_or_error(self, topic_partition: TopicPartition) -> Partition:
        partition = self.partitions.get(topic_partition)
        if partition is not None:
            return partition
        if self.image.partition(topic_partition.topic, topic_partition.partition) is not None:
            raise NotLeaderOrFollowerError(
                f"Broker {self.node_id} does not host partition {topic_partition}")
        raise UnknownTopicOrPartitionError(f"This server does not host this topic-partition: {topic_partition}")

    def active_producers(self, topic_partition: TopicPartition) -> list[ProducerStateEntry]:
        """DescribeProducers: the producers in this replica's producer state, leader or follower, as Kafka answers
        (`kafka-transactions.sh describe-producers --broker-id` asks a follower on purpose);
        NOT_LEADER_OR_FOLLOWER where this broker holds no replica, UNKNOWN_TOPIC_OR_PARTITION for a partition the
        metadata does not know."""
        partition = self.get_partition_or_error(topic_partition)
        return partition.local_log_with_epoch(UNKNOWN_LEADER_EPOCH, require_leader=False).active_producers()

    def start_transaction_verification(self, topic_partition: TopicPartition, producer_id: int,
                                       producer_epoch: int) -> VerificationGuard | None:
        """The guard a transactional produce verified with the coordinator presents at its append (None where this
        broker does not lead the partition: the append fails on that first)."""
        partition = self.partitions.get(topic_partition)
        if partition is None or not partition.is_leader:
            return None
        return partition.log.start_transaction_verification(producer_id, producer_epoch)

    # -- produce -----------------------------------------------------------------------------------------------------

    async def append_records(
        self, timeout_ms: int, required_acks: int, entries: Mapping[TopicPartition, bytes | bytearray | memoryview],
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guards: Mapping[TopicPartition, VerificationGuard] | None = None,
    ) -> dict[TopicPartition, ProducePartitionResult]:
        """Append each partition's records on its leader; for acks=all wait (up to `timeout_ms`) until the in-sync
        replicas have them. Per-partition errors never fail the other partitions. `verification_guards`: the
        transaction verifications of transactional produces, by partition (Log.start_transaction_verification)."""
        if required_acks not in (0, 1, -1):
            return {tp: ProducePartitionResult(ErrorCode.INVALID_REQUIRED_ACKS) for tp in entries}
        await self._wait_until_opened(entries)
        results: dict[TopicPartition, ProducePartitionResult] = {}
        required_offsets: dict[TopicPartition, int] = {}
        for topic_partition, records in entries.items():
            guard = verification_guards.get(topic_partition) if verification_guards else None
            result, required_offset = await self._append_to_local_log(topic_partition, records, required_acks,
                                                                     origin, guard)
            results[topic_partition] = result
            required_offsets[topic_partition] = required_offset
        if required_acks != -1 or all(result.error != ErrorCode.NONE for result in results.values()):
            return results
        statuses = {tp: ProducePartitionStatus(required_offsets[tp], result) for tp, result in results.items()}
        future = asyncio.get_running_loop().create_future()
        operation = DelayedProduce(self.now_ms() + max(timeout_ms, 0), statuses, self.partitions.get, future)
        pending = [tp for tp, status in statuses.items() if status.acks_pending]
        self.produce_purgatory.try_complete_else_watch(operation, pending)
        return await future

    async def _append_to_local_log(self, topic_partition: TopicPartition, records: bytes | bytearray | memoryview,
                                   required_acks: int, origin: AppendOrigin,
                                   verification_guard: VerificationGuard | None = None
                                   ) -> tuple[ProducePartitionResult, int]:
        now_ms = self.now_ms()
        try:
            if origin is AppendOrigin.CLIENT and is_internal(topic_partition.topic):  # the coordinators write them
                raise InvalidTopicError(f"Cannot append to internal topic {topic_partition.topic}")
            partition = self.get_partition_or_error(topic_partition)
            log = partition.check_append_allowed(required_acks)
            leader_epoch = partition.leader_epoch
            if self._append_off_loop(log, records):
                loop = asyncio.get_running_loop()
                appended = await loop.run_in_executor(None, partition.append_to_leader_log, records, leader_epoch,
                                                      now_ms, origin, verification_guard)
            else:
                appended = partition.append_to_leader_log(records, leader_epoch, now_ms, origin, verification_guard)
        except RecordValidationError as error:  # the validator says which records, as it finds them
            return ProducePartitionResult(error.error_code, record_errors=error.record_errors,
                                          error_message=str(error)), -1
        except (InvalidRecordError, InvalidTimestampError) as error:
            return ProducePartitionResult(error.error_code, error_message=str(error)), -1
        except KafkaError as error:
            logger.debug("Produce to %s failed: %s", topic_partition, error)
            return ProducePartitionResult(error.error_code), -1
        except Exception:  # noqa: BLE001 - one partition's failure must not fail the request
            logger.exception("Error appending to %s", topic_partition)
            return ProducePartitionResult(ErrorCode.UNKNOWN_SERVER_ERROR), -1
        counters = self.topic_stats.topic(topic_partition.topic)
        counters.bytes_in += len(records)
        counters.messages_in += appended.records_count
        if not appended.duplicate and appended.last_offset >= appended.first_offset >= 0:
            self._on_leader_append(partition, now_ms)
        return ProducePartitionResult(ErrorCode.NONE, base_offset=appended.first_offset,
                                      log_append_time_ms=appended.log_append_time,
                                      log_start_offset=appended.log_start_offset), appended.last_offset + 1

    def _append_off_loop(self, log: Log, records: bytes | bytearray | memoryview) -> bool:
        return log.config.flush_messages < INT64_MAX or append_needs_record_work(log.config, records)

    def _on_leader_append(self, partition: Partition, now_ms: int) -> None:
        """New records (appended at `now_ms`): the high watermark may move (completing acks=all produces) and fetches
        may complete."""
        topic_partition = partition.topic_partition
        if partition.maybe_increment_high_watermark(now_ms):
            self.produce_purgatory.check_and_complete(topic_partition)
        self.fetch_purgatory.check_and_complete(topic_partition)

    # -- fetch -------------------------------------------------------------------------------------------------------

    async def fetch_messages(self, params: FetchParams,
                             partitions: list[FetchPartitionRequest]) -> list[LogReadResult]:
        """Read each partition (in request order, within max_bytes overall); wait in the fetch purgatory while less
        than min_bytes is readable, up to max_wait_ms."""
        await self._wait_until_opened(request.topic_partition for request in partitions)
        results = self.read_from_local_log(params, partitions)
        if params.is_from_follower:
            results = self._update_follower_fetch_state(params, partitions, results)
        bytes_readable = sum(result.size for result in results)
        error_reading = any(result.error != ErrorCode.NONE for result in results)
        if not (params.max_wait_ms <= 0 or not partitions or bytes_readable >= params.min_bytes or error_reading):
            future = asyncio.get_running_loop().create_future()
            operation = DelayedFetch(self.now_ms() + params.max_wait_ms, params, partitions, self.partitions.get,
                                     self.read_from_local_log, future)
            self.fetch_purgatory.try_complete_else_watch(operation,
                                                         [request.topic_partition for request in partitions])
            results = await future
        self._count_bytes_out(params, partitions, results)
        return results

    def _count_bytes_out(self, params: FetchParams, partitions: list[FetchPartitionRequest],
                         results: list[LogReadResult]) -> None:
        follower = params.is_from_follower
        for request, result in zip(partitions, results):
            size = result.size
            if size:
                counters = self.topic_stats.topic(request.topic_partition.topic)
                if follower:
                    counters.replication_bytes_out += size
                else:
                    counters.bytes_out += size

    def read_from_local_log(self, params: FetchParams,
                            partitions: list[FetchPartitionRequest]) -> list[LogReadResult]:
        """Kafka's size rules: partitions are read in order, each up to min(its partition_max_bytes, what is left of
        max_bytes); the first partition with data may exceed both by one whole batch (Fetch v3+), later ones not."""
        limit_bytes = params.max_bytes
        min_one_message = not params.hard_max_bytes_limit
        results: list[LogReadResult] = []
        for request in partitions:
            result = self._read_partition(params, request, limit_bytes, min_one_message)
            if result.size > 0:
                min_one_message = False
            limit_bytes = max(0, limit_bytes - result.size)
            results.append(result)
        return results

    def _read_partition(self, params: FetchParams, request: FetchPartitionRequest, limit_bytes: int,
                        min_one_message: bool) -> LogReadResult:
        partition: Partition | None = None
        log: Log | None = None
        try:
            partition = self.get_partition_or_error(request.topic_partition)
            log = partition.local_log_with_epoch(request.current_leader_epoch, require_leader=True)
            offsets, info = log.read_with_offset_snapshot(request.fetch_offset,
                                                          min(request.partition_max_bytes, limit_bytes),
                                                          params.isolation, min_one_message)
            return LogReadResult(ErrorCode.NONE, offsets.high_watermark, offsets.last_stable_offset,
                                 offsets.log_start_offset, offsets.log_end_offset, info.records,
                                 info.aborted_transactions, partition.leader_id, partition.leader_epoch)
        except OffsetOutOfRangeError as error:
            assert log is not None and partition is not None
            offsets = log.fetch_offset_snapshot()
            return LogReadResult(error.error_code, offsets.high_watermark, offsets.last_stable_offset,
                                 offsets.log_start_offset, offsets.log_end_offset, leader_id=partition.leader_id,
                                 leader_epoch=partition.leader_epoch, error_message=str(error))
        except KafkaError as error:
            leader_id, leader_epoch = (partition.leader_id, partition.leader_epoch) if partition else (-1, -1)
            return LogReadResult(error.error_code, leader_id=leader_id, leader_epoch=leader_epoch,
                                 error_message=str(error))
        except Exception as error:  # noqa: BLE001 - one partition's failure must not fail the fetch
            logger.exception("Error reading %s", request.topic_partition)
            return LogReadResult(ErrorCode.UNKNOWN_SERVER_ERROR, error_message=str(error))

    def _update_follower_fetch_state(self, params: FetchParams, partitions: list[FetchPartitionRequest],
                                     results: list[LogReadResult]) -> list[LogReadResult]:
        """A follower's fetch offset is its log end offset: the leader's high watermark may move."""
        now_ms = self.now_ms()
        updated: list[LogReadResult] = []
        for request, result in zip(partitions, results):
            if result.error == ErrorCode.NONE:
                partition = self.partitions[request.topic_partition]
                try:
                    if partition.update_follower_fetch_state(params.replica_id, request.fetch_offset,
                                                             request.log_start_offset, now_ms):
                        self._complete_delayed_requests(request.topic_partition)
                    new_isr = partition.isr_after_expand(params.replica_id)
                    if new_isr is not None and self._isr_eligible(params.replica_id):
                        self._submit_isr_change(partition, new_isr, f"replica {params.replica_id} caught up")
                except KafkaError as error:
                    result = LogReadResult(error.error_code, error_message=str(error))
            updated.append(result)
        return updated

    # -- ListOffsets, DeleteRecords, OffsetForLeaderEpoch ------------------------------------------------------------

    def fetch_offset_for_timestamp(self, topic_partition: TopicPartition, timestamp: int,
                                   isolation_level: int | None, current_leader_epoch: int,
                                   fetch_only_from_leader: bool) -> TimestampAndOffset | None:
        partition = self.get_partition_or_error(topic_partition)
        return partition.fetch_offset_for_timestamp(timestamp, isolation_level, current_leader_epoch,
                                                    fetch_only_from_leader)

    def legacy_fetch_offsets_before(self, topic_partition: TopicPartition, timestamp: int, max_num_offsets: int,
                                    is_from_consumer: bool, fetch_only_from_leader: bool) -> list[int]:
        """ListOffsets v0: up to `max_num_offsets` segment base offsets (and the log end) from segments last
        modified at or before `timestamp`, newest first; a consumer never gets offsets above the high watermark."""
        partition = self.get_partition_or_error(topic_partition)
        log = partition.local_log_with_epoch(-1, fetch_only_from_leader)
        offsets = log.legacy_fetch_offsets_before(timestamp, max_num_offsets, self.now_ms())
        high_watermark = log.high_watermark
        if is_from_consumer and any(offset > high_watermark for offset in offsets):
            offsets = [high_watermark] + [offset for offset in offsets if offset <= high_watermark]
        return offsets

    def delete_records(self, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, tuple[ErrorCode, int]]:
        """DeleteRecords: per partition (error, low watermark). On one node the low watermark is the leader's new
        log start offset at once, so nothing waits."""
        results: dict[TopicPartition, tuple[ErrorCode, int]] = {}
        for topic_partition, offset in offsets.items():
            try:
                partition = self.get_partition_or_error(topic_partition)
                results[topic_partition] = (ErrorCode.NONE, partition.delete_records_on_leader(offset))
                self.fetch_purgatory.check_and_complete(topic_partition)
            except KafkaError as error:
                results[topic_partition] = (error.error_code, -1)
        return results

    def last_offset_for_leader_epoch(self, topic_partition: TopicPartition, current_leader_epoch: int,
                                     leader_epoch: int, fetch_only_from_leader: bool) -> tuple[int, int]:
        partition = self.get_partition_or_error(topic_partition)
        return partition.last_offset_for_leader_epoch(current_leader_epoch, leader_epoch, fetch_only_from_leader)

    async def alter_replica_log_dir(self, topic_partition: TopicPartition, log_dir: str) -> ErrorCode:
        """Start moving a hosted replica's log into another of this broker's log dirs (AlterReplicaLogDirs). As in
        Kafka the answer comes before the move ends: DescribeLogDirs shows the future replica while it is copied,
        then the partition under its new dir. A failed move is logged and leaves the replica where it was.

        A partition whose log is being created waits until it is hosted: DescribeLogDirs lists a log as soon as
        the log manager has it, while the partition is hosted once its whole chunk of new logs is open (Kafka's
        AlterReplicaLogDirs waits the same way, for the replica state lock its metadata updates hold). For one
        this broker does not know yet the answer is REPLICA_NOT_AVAILABLE, and its log is created in `log_dir`
        if it comes, as in Kafka."""
        try:
            self.log_manager.check_destination_log_dir(log_dir)
        except KafkaError as error:
            return error.error_code
        await self._wait_until_opened((topic_partition,))
        if topic_partition not in self.partitions or self.log_manager.get_log(topic_partition) is None:
            self.log_manager.prefer_log_dir(topic_partition, log_dir)
            return ErrorCode.REPLICA_NOT_AVAILABLE
        move = asyncio.get_running_loop().run_in_executor(None, self.log_manager.move_log, topic_partition,
                                                          log_dir, self.now_ms())
        self._log_dir_moves.add(move)

        def done(future: asyncio.Future) -> None:
            self._log_dir_moves.discard(future)
            if not future.cancelled() and future.exception() is not None:
                logger.error("Moving %s to %s failed: %s", topic_partition, log_dir, future.exception())

        move.add_done_callback(done)
        return ErrorCode.NONE

    def describe_log_dirs(self, topic_partitions: set[TopicPartition] | None) -> list[LogDirDescription]:
        """Per log dir: the size of each requested partition (every partition when None), the future replicas
        being copied into it (their offset lag unknown: 0), and the volume's space. A log whose partition is not
        hosted (being created, or of a topic the image does not know) has no lag to tell: -1, as in Kafka."""
        by_dir: dict[str, dict[str, list[LogDirPartition]]] = {path: {} for path in self.log_manager.log_dirs}
        for topic_partition, (log_dir, size) in self.log_manager.future_log_sizes().items():
            if (topic_partitions is None or topic_partition in topic_partitions) and log_dir in by_dir:
                by_dir[log_dir].setdefault(topic_partition.topic, []).append(
                    LogDirPartition(topic_partition.partition, size, 0, is_future=True))
        for log in self.log_manager.all_logs():
            topic_partition = log.topic_partition
            if topic_partitions is not None and topic_partition not in topic_partitions:
                continue
            parent = os.path.dirname(log.dir)
            if parent not in by_dir:
                continue
            lag = max(log.high_watermark - log.log_end_offset, 0) if topic_partition in self.partitions \
                else INVALID_OFFSET_LAG
            by_dir[parent].setdefault(topic_partition.topic, []).append(
                LogDirPartition(topic_partition.partition, log.size, lag))
        descriptions: list[LogDirDescription] = []
        for path, topics in by_dir.items():
            try:
                stats = os.statvfs(path)
            except OSError as error:
                logger.error("Cannot read log dir %s: %s", path, error)
                descriptions.append(LogDirDescription(path, ErrorCode.KAFKA_STORAGE_ERROR, {}))
                continue
            descriptions.append(LogDirDescription(path, ErrorCode.NONE, topics,
                                                  total_bytes=stats.f_blocks * stats.f_frsize,
                                                  usable_bytes=stats.f_bavail * stats.f_frsize))
        return descriptions
