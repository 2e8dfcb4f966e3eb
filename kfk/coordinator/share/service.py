"""ShareCoordinatorService: the asyncio shell around the ShareCoordinator state machine (Kafka's
ShareCoordinatorService over the coordinator runtime).

- leadership: a MetadataCache listener loads the __share_group_state partitions this broker leads and unloads the
  others (kfk.coordinator.runtime.load_partition);
- writes: one queue and worker per partition (kfk.coordinator.runtime.CoordinatorWriter), acks=-1: a write's
  answer goes out once its records are committed; a failed append reloads the partition, so the state in memory
  is again what the log holds;
- each method takes one share partition (Kafka's persister sends one per request; the handlers split requests);
- upkeep, every prune / cold-snapshot interval: idle share partitions' snapshots written again, then each led
  state partition's redundant prefix deleted (its log start offset moved up, as DeleteRecords does), so
  __share_group_state, which is never compacted, stays as small as its live state.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from kfk.common.internal_topics import SHARE_GROUP_STATE_TOPIC_NAME
from kfk.coordinator.partitioning import partition_for
from kfk.coordinator.runtime import (
    AppendFunction,
    CoordinatorWriter,
    LoadedEntry,
    LoadedRecord,
    LogLookup,
    load_partition,
    wait_while_loading,
)
from kfk.coordinator.share.coordinator import ReadResult, ShareCoordinator, ShareCoordinatorConfig, WriteResult
from kfk.coordinator.share.record_serde import SharePartitionKey
from kfk.coordinator.share.state_batches import StateBatch
from kfk.coordinator.writes import CoordinatorWrite
from kfk.errors import ErrorCode, KafkaError
from kfk.metadata.image import MetadataImage

log = logging.getLogger("kfk.coordinator.share")


#: Moves a led state partition's log start offset up to an offset (DeleteRecords on the leader).
DeleteRecordsFunction = Callable[[int, int], None]


class ShareCoordinatorService:
    def __init__(self, config: ShareCoordinatorConfig, node_id: int, append: AppendFunction, log_of: LogLookup,
                 now_ms: Callable[[], int], delete_records: DeleteRecordsFunction | None = None) -> None:
        self.node_id = node_id
        self._delete_records = delete_records
        self._upkeep: asyncio.Task | None = None
        self._image: MetadataImage | None = None
        self.coordinator = ShareCoordinator(config, self._partition_exists)
        self._log_of = log_of
        self._now_ms = now_ms
        self._writer = CoordinatorWriter(SHARE_GROUP_STATE_TOPIC_NAME, append, now_ms, self._complete,
                                         lambda: None)
        self._loads: dict[int, asyncio.Task] = {}
        self._epochs: dict[int, int] = {}

    def _partition_exists(self, topic_id, partition: int) -> bool:
        topic = self._image.topics_by_id.get(topic_id) if self._image is not None else None
        return topic is not None and partition in topic.partitions

    def stop(self) -> None:
        self._writer.stop()
        for task in self._loads.values():
            task.cancel()
        if self._upkeep is not None:
            self._upkeep.cancel()

    # -- leadership --------------------------------------------------------------------------------------------

    def on_metadata_update(self, previous: MetadataImage, current: MetadataImage) -> None:
        self._image = current
        topic = current.topic(SHARE_GROUP_STATE_TOPIC_NAME)
        led = {} if topic is None else {index: registration.leader_epoch
                                        for index, registration in topic.partitions.items()
                                        if registration.leader == self.node_id}
        for partition in sorted(self._epochs):
            if led.get(partition) != self._epochs[partition]:
                self._unload(partition)
        for partition, leader_epoch in sorted(led.items()):
            if partition not in self._epochs:
                self._epochs[partition] = leader_epoch
                self._start_load(partition)

    def _unload(self, partition: int) -> None:
        task = self._loads.pop(partition, None)
        if task is not None:
            task.cancel()
        self._epochs.pop(partition, None)
        self.coordinator.unload(partition)

    def _start_load(self, partition: int) -> None:
        self.coordinator.begin_loading(partition)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        previous = self._loads.get(partition)
        if previous is not None:
            previous.cancel()
        self._loads[partition] = loop.create_task(self._load(partition))
        if self._upkeep is None and self._delete_records is not None:
            self._upkeep = loop.create_task(self._keep_up())

    async def _load(self, partition: int) -> None:
        count = await load_partition(SHARE_GROUP_STATE_TOPIC_NAME, partition, self._log_of,
                                     lambda entry: self._replay(entry))
        self._loads.pop(partition, None)
        self.coordinator.complete_loading(partition)
        log.debug("Loaded %s-%d: %d records", SHARE_GROUP_STATE_TOPIC_NAME, partition, count)

    def _replay(self, entry: LoadedEntry) -> None:
        if isinstance(entry, LoadedRecord):
            self.coordinator.replay(entry.key, entry.value, entry.offset)

    async def _keep_up(self) -> None:
        """Every interval: the cold snapshots, then the pruning, of each loaded state partition."""
        config = self.coordinator.config
        interval_s = min(config.prune_interval_ms, config.cold_partition_snapshot_interval_ms) / 1000
        next_cold_ms = next_prune_ms = self._now_ms()
        while True:
            await asyncio.sleep(interval_s)
            now_ms = self._now_ms()
            loaded = [partition for partition, done in sorted(self.coordinator.loaded.items()) if done]
            if now_ms >= next_cold_ms:
                next_cold_ms = now_ms + config.cold_partition_snapshot_interval_ms
                for partition in loaded:
                    for write in self.coordinator.cold_snapshots(partition, now_ms):
                        asyncio.get_running_loop().create_task(self._commit(write))
            if now_ms >= next_prune_ms:
                next_prune_ms = now_ms + config.prune_interval_ms
                for partition in loaded:
                    self._prune(partition)

    def _prune(self, partition: int) -> None:
        log_ = self._log_of(partition)
        if log_ is None or self._delete_records is None:
            return
        offset = self.coordinator.redundant_offset(partition, log_.high_watermark)
        if offset is None or offset <= log_.log_start_offset:
            return
        try:
            self._delete_records(partition, offset)
        except KafkaError as error:  # leadership moved meanwhile: the next leader prunes
            log.debug("Pruning %s-%d to %d failed: %s", SHARE_GROUP_STATE_TOPIC_NAME, partition, offset, error)
            return
        log.debug("Pruned %s-%d to offset %d", SHARE_GROUP_STATE_TOPIC_NAME, partition, offset)

    def _complete(self, write: CoordinatorWrite, error: ErrorCode, now_ms: int) -> None:
        if error != ErrorCode.NONE and write.partition in self._epochs and write.partition not in self._loads:
            log.info("Append to %s-%d failed (%s): reloading it", SHARE_GROUP_STATE_TOPIC_NAME, write.partition,
                     error.name)
            self._start_load(write.partition)
        if write.on_complete is not None:
            write.on_complete(error, now_ms)

    async def wait_until_loaded(self, coordinator_key: str, timeout_ms: int) -> None:
        """FindCoordinator's wait: the key's partition is loaded (or is not this broker's, or time is up)."""
        partition = partition_for(coordinator_key, self.coordinator.config.state_topic_num_partitions)

        def error() -> ErrorCode:
            loaded = self.coordinator.loaded.get(partition)
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loaded is False else ErrorCode.NONE
        await wait_while_loading(error, self._now_ms, timeout_ms)

    async def _commit(self, result: WriteResult) -> tuple[ErrorCode, str | None]:
        if result.error != ErrorCode.NONE or not result.records:
            return result.error, result.error_message
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        log_ = self._log_of(result.partition)
        offset_floor = None if log_ is None else log_.log_end_offset  # the records land at or after it

        def done(error: ErrorCode, _now_ms: int) -> None:
            if error == ErrorCode.NONE and offset_floor is not None:
                self.coordinator.committed(result.records, offset_floor)
            if not future.done():
                future.set_result(error)
        self._writer.submit(CoordinatorWrite(result.partition, list(result.records), done))
        error = await future
        if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.NOT_ENOUGH_REPLICAS,
                     ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT,
                     ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.KAFKA_STORAGE_ERROR):
            error = ErrorCode.NOT_COORDINATOR  # as Kafka's runtime maps append errors: the persister looks again
        return error, None

    # -- requests ----------------------------------------------------------------------------------------------

    def read(self, key: SharePartitionKey, leader_epoch: int) -> ReadResult:
        return self.coordinator.read(key, leader_epoch)

    def read_summary(self, key: SharePartitionKey, leader_epoch: int) -> ReadResult:
        return self.coordinator.read_summary(key, leader_epoch)

    async def write(self, key: SharePartitionKey, state_epoch: int, leader_epoch: int, start_offset: int,
                    state_batches: list[StateBatch], delivery_complete_count: int = -1
                    ) -> tuple[ErrorCode, str | None]:
        return await self._commit(self.coordinator.write(key, state_epoch, leader_epoch, start_offset,
                                                         state_batches, delivery_complete_count, self._now_ms()))

    async def initialize(self, key: SharePartitionKey, state_epoch: int, start_offset: int
                         ) -> tuple[ErrorCode, str | None]:
        return await self._commit(self.coordinator.initialize(key, state_epoch, start_offset, self._now_ms()))

    async def delete(self, key: SharePartitionKey) -> tuple[ErrorCode, str | None]:
        return await self._commit(self.coordinator.delete(key))
