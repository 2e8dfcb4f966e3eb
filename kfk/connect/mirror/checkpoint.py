"""MirrorCheckpointConnector and MirrorCheckpointTask (Kafka's): translate the committed offsets of the source's
consumer groups into the target's offsets, so a consumer can fail over to the remote topics.

The connector lists the source's consumer groups that pass the group filter and have offsets for a topic the topic
filter accepts (every `refresh.groups.interval.seconds`), and splits them into contiguous runs among at most
`tasks.max` tasks (`task.assigned.groups`). Each task reads the offset-syncs topic (OffsetSyncStore) and every
`emit.checkpoints.interval.seconds` writes a Checkpoint per group and partition to `<source>.checkpoints.internal` on
the target, translating as Kafka's OffsetSyncStore.translateDownstream does: from the latest sync at or before the
group's offset, the sync's downstream offset, plus one when the group is past the sync (never further: what lies
between syncs may be dropped or duplicated downstream). With `sync.group.offsets.enabled` it also commits the
translated offsets to the target's groups that have no active members and are behind.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Mapping

from kfk.client import Admin, Consumer, OffsetAndMetadata, TopicPartition
from kfk.connect.config_def import ConfigDef, ConfigKey
from kfk.connect.connector import SourceConnector, SourceTask
from kfk.connect.data import BYTES_SCHEMA
from kfk.connect.errors import ConnectException, RetriableException
from kfk.connect.mirror.admin_tasks import create_single_partition_compacted_topic
from kfk.connect.mirror.config import CHECKPOINT_CONFIG_DEF, TASK_CONSUMER_GROUPS, TASK_INDEX, MirrorConfig
from kfk.connect.mirror.records import Checkpoint, OffsetSync, wrap_offset
from kfk.connect.mirror.scheduler import Scheduler
from kfk.connect.mirror.source import _version
from kfk.connect.records import SourceRecord
from kfk.errors import GroupIdNotFoundError

log = logging.getLogger("kfk.connect.mirror")

CHECKPOINT_TASK_CONFIG_DEF = CHECKPOINT_CONFIG_DEF.merged(ConfigDef([
    ConfigKey(TASK_CONSUMER_GROUPS, "LIST", importance="LOW",
              documentation="Consumer groups assigned to this task to replicate."),
    ConfigKey(TASK_INDEX, "INT", None, "LOW", "The index of the task"),
]))
#: How many syncs per partition the store keeps for translating older group offsets.
SYNCS_KEPT = 64


def group_partitions(groups: list[str], task_count: int) -> list[list[str]]:
    """Kafka's ConnectorUtils.groupPartitions: contiguous runs, the first ones one longer when uneven."""
    per_task, extra = divmod(len(groups), task_count)
    runs, start = [], 0
    for index in range(task_count):
        size = per_task + (1 if index < extra else 0)
        runs.append(groups[start:start + size])
        start += size
    return runs


class MirrorCheckpointConnector(SourceConnector):
    def __init__(self) -> None:
        self.known_consumer_groups: list[str] | None = None
        self.scheduler: Scheduler | None = None

    def version(self) -> str:
        return _version()

    def config(self) -> ConfigDef:
        return CHECKPOINT_CONFIG_DEF

    def task_class(self) -> type:
        return MirrorCheckpointTask

    def start(self, props: Mapping[str, str]) -> None:
        self.mirror_config = config = MirrorConfig(props, CHECKPOINT_CONFIG_DEF)
        if not config.enabled:
            return
        self.topic_filter, self.group_filter = config.topic_filter(), config.group_filter()
        self.source_admin = Admin(config.source_admin("checkpoint-source-admin"))
        self.scheduler = scheduler = Scheduler(config.entity_label)
        scheduler.run_now(lambda: create_single_partition_compacted_topic(
            config.target_admin("checkpoint-target-admin"), config.checkpoints_topic(),
            config["checkpoints.topic.replication.factor"]), "creating internal topics")
        scheduler.run_now(self.load_initial_consumer_groups, "loading initial consumer groups")
        scheduler.schedule_repeating(self.refresh_consumer_groups, config.interval_seconds("refresh.groups"),
                                     "refreshing consumer groups")

    def stop(self) -> None:
        if self.scheduler is not None:
            self.scheduler.close()
            self.source_admin.close()

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        if not self.mirror_config.enabled or self.mirror_config.interval_seconds("emit.checkpoints") is None:
            return []
        if self.known_consumer_groups is None:
            raise RetriableException("Timeout while loading consumer groups.")
        if not self.known_consumer_groups:
            return []
        task_count = min(max_tasks, len(self.known_consumer_groups))
        return [{**self.mirror_config.props, TASK_CONSUMER_GROUPS: ",".join(groups), TASK_INDEX: str(index)}
                for index, groups in enumerate(group_partitions(self.known_consumer_groups, task_count))]

    def find_consumer_groups(self) -> list[str]:
        groups = []
        for listing in self.source_admin.list_consumer_groups():
            if listing.protocol_type not in ("consumer", "") or not self.group_filter(listing.group_id):
                continue
            offsets = self.source_admin.list_consumer_group_offsets(listing.group_id)
            if any(self.topic_filter(partition.topic) for partition in offsets):
                groups.append(listing.group_id)
        return sorted(groups)

    def load_initial_consumer_groups(self) -> None:
        self.known_consumer_groups = self.find_consumer_groups()

    def refresh_consumer_groups(self) -> None:
        groups = self.find_consumer_groups()
        if set(groups) != set(self.known_consumer_groups or []):
            log.info("%s: found %d consumer groups", self.mirror_config.entity_label, len(groups))
            self.known_consumer_groups = groups
            self.context.request_task_reconfiguration()


class TopicReader:
    """Reads one single-partition topic from the beginning in a thread of its own, handing each record to
    `on_record`; `read_to_end` waits until what the topic held at the call has been handed over."""

    def __init__(self, client: Mapping[str, str], topic: str, on_record, name: str) -> None:
        self.partition = TopicPartition(topic, 0)
        self.on_record = on_record
        self.consumer = Consumer({**client, "client.id": client.get("client.id", name)})
        self.consumer.assign([self.partition])
        self.consumer.seek_to_beginning(self.partition)
        self.position = 0
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                with self.lock:
                    if self.stopping.is_set():
                        return
                    records = self.consumer.poll(0.5)
                for record in records:
                    self.on_record(record)
                    self.position = record.offset + 1
            except Exception:
                if not self.stopping.is_set():
                    log.exception("reading %s failed", self.partition.topic)
                    self.stopping.wait(1)

    def read_to_end(self, timeout: float = 60.0) -> bool:
        with self.lock:
            end = self.consumer.end_offsets([self.partition])[self.partition]
        deadline = time.monotonic() + timeout
        while self.position < end:
            if time.monotonic() > deadline or self.stopping.is_set():
                return False
            time.sleep(0.05)
        return True

    def close(self) -> None:
        self.stopping.set()
        with self.lock:
            self.consumer.close(5)


class OffsetSyncStore:
    """The offset syncs of every replicated partition (Kafka's OffsetSyncStore), newest last, read from the
    offset-syncs topic; translation waits until the topic has been read to its end once."""

    def __init__(self, config: MirrorConfig) -> None:
        client = (config.source_consumer("offset-syncs-source-consumer") if config.offset_syncs_on_source()
                  else config.target_consumer("offset-syncs-target-consumer"))
        self.syncs: dict[TopicPartition, deque[OffsetSync]] = {}
        self.lock = threading.Lock()
        self.read_to_end = False
        self.reader = TopicReader(client, config.offset_syncs_topic(), self._on_record, "offset-syncs-reader")

    def start(self) -> None:
        if not self.reader.read_to_end():
            raise ConnectException(f"Timed out reading {self.reader.partition.topic} to its end")
        self.read_to_end = True

    def _on_record(self, record) -> None:
        if record.key is None or record.value is None:
            return
        sync = OffsetSync.deserialize(record.key, record.value)
        with self.lock:
            history = self.syncs.setdefault(sync.topic_partition, deque(maxlen=SYNCS_KEPT))
            # a sync below the newest means the source rewound (or a new task started): older syncs are stale
            while history and history[-1].upstream_offset >= sync.upstream_offset:
                history.pop()
            history.append(sync)

    def translate_downstream(self, topic_partition: TopicPartition, upstream_offset: int) -> int | None:
        """The downstream offset for a group at `upstream_offset`, -1 when it is older than every sync kept, None
        when the partition has no sync (or the store has not read its topic yet)."""
        if not self.read_to_end:
            return None
        with self.lock:
            history = list(self.syncs.get(topic_partition, ()))
        if not history:
            return None
        candidates = [sync for sync in history if sync.upstream_offset <= upstream_offset]
        if not candidates:
            return -1
        sync = candidates[-1]
        return sync.downstream_offset + (0 if upstream_offset == sync.upstream_offset else 1)

    def close(self) -> None:
        self.reader.close()


class MirrorCheckpointTask(SourceTask):
    def version(self) -> str:
        return _version()

    def start(self, props: Mapping[str, str]) -> None:
        self.mirror_config = config = MirrorConfig(props, CHECKPOINT_TASK_CONFIG_DEF)
        self.source_cluster_alias, self.target_cluster_alias = config.source_cluster_alias, config.target_cluster_alias
        self.consumer_groups = [group for group in config[TASK_CONSUMER_GROUPS] if group]
        self.checkpoints_topic = config.checkpoints_topic()
        self.topic_filter = config.topic_filter()
        self.policy = config.replication_policy()
        self.interval = config.interval_seconds("emit.checkpoints")
        self.stopping = threading.Event()
        self.initialized = threading.Event()
        self.checkpoints: dict[str, dict[TopicPartition, Checkpoint]] = {}
        self.idle_group_offsets: dict[str, dict[TopicPartition, OffsetAndMetadata]] = {}
        self.source_admin = Admin(config.source_admin("checkpoint-source-admin"))
        self.target_admin = Admin(config.target_admin("checkpoint-target-admin"))
        self.offset_sync_store = OffsetSyncStore(config)
        self.scheduler = Scheduler(config.entity_label)
        threading.Thread(target=self._initialize, name=f"{config.entity_label}-init", daemon=True).start()

    def _initialize(self) -> None:
        """Kafka's CheckpointStore start: the checkpoints written before (by any worker) are the baseline. Retried
        until it succeeds: a topic created a moment ago may not be in every broker's metadata yet."""
        config = self.mirror_config
        while not self.stopping.is_set():
            try:
                reader = TopicReader(config.target_consumer("checkpoints-target-consumer"), self.checkpoints_topic,
                                     self._on_checkpoint, "checkpoints-reader")
                try:
                    reader.read_to_end()
                finally:
                    reader.close()
                self.offset_sync_store.start()
                break
            except Exception:
                log.exception("%s: reading the checkpoints and offset syncs failed; retrying", config.entity_label)
                self.checkpoints.clear()
                self.stopping.wait(1)
        else:
            return
        self.initialized.set()
        interval = config.interval_seconds("sync.group.offsets")
        self.scheduler.schedule_repeating(self.refresh_idle_consumer_group_offset, interval,
                                          "refreshing idle consumers group offsets at target cluster", delayed=False)
        self.scheduler.schedule_repeating(self.sync_group_offset, interval,
                                          "sync idle consumer group offset from source to target")

    def _on_checkpoint(self, record) -> None:
        if record.key is None or record.value is None:
            return
        checkpoint = Checkpoint.deserialize(record.key, record.value)
        if checkpoint.consumer_group_id in self.consumer_groups:
            self.checkpoints.setdefault(checkpoint.consumer_group_id, {})[checkpoint.topic_partition] = checkpoint

    def poll(self) -> list[SourceRecord] | None:
        if self.stopping.wait(self.interval or 1.0) or not self.initialized.is_set():
            return None
        records = []
        for group in self.consumer_groups:
            try:
                records.extend(self.source_records_for_group(group))
            except Exception:
                log.exception("Error querying offsets for consumer group %s on cluster %s.", group,
                              self.source_cluster_alias)
        return records or None

    def source_records_for_group(self, group: str) -> list[SourceRecord]:
        timestamp = int(time.time() * 1000)
        upstream = self.source_admin.list_consumer_group_offsets(group)
        new_checkpoints = self.checkpoints_for_group(upstream, group)
        self.checkpoints.setdefault(group, {}).update(new_checkpoints)
        return [SourceRecord(self.checkpoints_topic, 0, BYTES_SCHEMA, checkpoint.record_key(), BYTES_SCHEMA,
                             checkpoint.record_value(), timestamp, source_partition=checkpoint.connect_partition(),
                             source_offset=wrap_offset(0))
                for checkpoint in new_checkpoints.values()]

    def checkpoints_for_group(self, upstream: Mapping[TopicPartition, OffsetAndMetadata], group: str
                              ) -> dict[TopicPartition, Checkpoint]:
        result = {}
        for topic_partition, offset in sorted(upstream.items()):
            if offset is None or not self.topic_filter(topic_partition.topic):
                continue
            downstream = self.offset_sync_store.translate_downstream(topic_partition, offset.offset)
            if downstream is None or downstream < 0:
                continue
            checkpoint = Checkpoint(group, self.rename_topic_partition(topic_partition), offset.offset, downstream,
                                    offset.metadata or "")
            if self.is_more_recent(checkpoint):
                result[checkpoint.topic_partition] = checkpoint
        return result

    def is_more_recent(self, checkpoint: Checkpoint) -> bool:
        last = self.checkpoints.get(checkpoint.consumer_group_id, {}).get(checkpoint.topic_partition)
        return last is None or checkpoint.upstream_offset < last.upstream_offset \
            or checkpoint.downstream_offset > last.downstream_offset

    def rename_topic_partition(self, upstream: TopicPartition) -> TopicPartition:
        if self.policy.topic_source(upstream.topic) == self.target_cluster_alias:
            return TopicPartition(self.policy.original_topic(upstream.topic), upstream.partition)
        return TopicPartition(self.policy.format_remote_topic(self.source_cluster_alias, upstream.topic),
                              upstream.partition)

    def refresh_idle_consumer_group_offset(self) -> None:
        for group in self.consumer_groups:
            try:
                description = self.target_admin.describe_consumer_groups([group]).get(group)
            except GroupIdNotFoundError:
                continue  # not on the target yet: all of its translated offsets are synced
            if description is not None and description.state.lower() == "empty":
                self.idle_group_offsets[group] = self.target_admin.list_consumer_group_offsets(group)

    def sync_group_offset(self) -> dict[str, dict[TopicPartition, OffsetAndMetadata]]:
        synced = {}
        for group, checkpoints in list(self.checkpoints.items()):
            converted = {tp: OffsetAndMetadata(checkpoint.downstream_offset, checkpoint.metadata)
                         for tp, checkpoint in checkpoints.items()}
            target = self.idle_group_offsets.get(group)
            if target is not None:
                converted = {tp: offset for tp, offset in converted.items()
                             if tp not in target or target[tp] is None or target[tp].offset < offset.offset}
            if not converted:
                continue
            try:
                errors = self.target_admin.alter_consumer_group_offsets(group, converted)
            except Exception as error:
                log.warning("Unable to sync offsets for consumer group %s: %s", group, error)
                continue
            if any(error is not None for error in errors.values()):
                log.warning("Unable to sync offsets for consumer group %s: %s", group, errors)
                continue
            synced[group] = converted
        self.idle_group_offsets.clear()
        return synced

    def stop(self) -> None:
        self.stopping.set()
        self.scheduler.close()
        self.offset_sync_store.close()
        self.source_admin.close()
        self.target_admin.close()
