"""MirrorSourceConnector and MirrorSourceTask (Kafka's): replicate the topics the filter selects from the source
cluster into remote topics on the target (named by the replication policy: `<source alias>.<topic>` by default).

The connector finds the source topics (every `refresh.topics.interval.seconds`), creates each remote topic with the
source's partition count and non-default configs (and adds partitions when the source grows), keeps topic configs and
topic ACLs in sync, creates the offset-syncs topic, and deals the partitions round-robin among at most `tasks.max` tasks
(`task.assigned.partitions`). Each task consumes its partitions from where the worker's stored offsets say
(source partition {cluster, partition, topic} -> {offset} of the last record replicated) and emits each record with
its key, value, headers and timestamp unchanged (BYTES, for the worker's ByteArrayConverter).

As records are acknowledged downstream the task writes OffsetSync records (upstream offset -> downstream offset) to
`mm2-offset-syncs.<target>.internal` (on the source cluster by default) when Kafka's OffsetSyncWriter would: the
first of each partition, when the downstream offset drifted `offset.lag.max` past the last sync, when an upstream
offset was skipped, and when the downstream topic was truncated; other syncs wait for the next commit().
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Mapping

from kfk.client import Admin, AlterConfigOp, ConfigResource, ConfigResourceType, Consumer, NewTopic, Producer
from kfk.client.structs import AlterConfigOpType
from kfk.common.config_types import ConfigSource
from kfk.common.structs import TopicPartition
from kfk.connect.config_def import ConfigDef, ConfigKey
from kfk.connect.connector import SourceConnector, SourceTask
from kfk.connect.data import BYTES_SCHEMA, OPTIONAL_BYTES_SCHEMA
from kfk.connect.errors import ConnectException
from kfk.connect.mirror.admin_tasks import create_single_partition_compacted_topic, topic_partition_list
from kfk.connect.mirror.config import (
    CONFIG_PROPERTIES_EXCLUDE,
    SOURCE_CONFIG_DEF,
    TASK_INDEX,
    TASK_TOPIC_PARTITIONS,
    USE_DEFAULTS_FROM,
    MirrorConfig,
    compile_pattern_list,
)
from kfk.connect.mirror.records import OffsetSync, unwrap_offset, wrap_offset, wrap_partition
from kfk.connect.mirror.scheduler import Scheduler
from kfk.connect.records import Headers, SourceRecord
from kfk.errors import SecurityDisabledError
from kfk.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

log = logging.getLogger("kfk.connect.mirror")

#: Every ACL of every topic pattern: what the ACL sync reads from the source cluster (Kafka's ANY_TOPIC_ACL).
ANY_TOPIC_ACL = AclBindingFilter(ResourceType.TOPIC)

SOURCE_TASK_CONFIG_DEF = SOURCE_CONFIG_DEF.merged(ConfigDef([
    ConfigKey(TASK_TOPIC_PARTITIONS, "LIST", importance="LOW",
              documentation="Topic-partitions assigned to this task to replicate."),
    ConfigKey(TASK_INDEX, "INT", None, "LOW", "The index of the task"),
]))


class MirrorSourceConnector(SourceConnector):
    def __init__(self) -> None:
        self.known_source_partitions: list[TopicPartition] = []
        self.known_target_partitions: list[TopicPartition] = []
        self.scheduler: Scheduler | None = None
        self.no_acl_authorizer = False

    def version(self) -> str:
        return _version()

    def config(self) -> ConfigDef:
        return SOURCE_CONFIG_DEF

    def task_class(self) -> type:
        return MirrorSourceTask

    def configure(self, props: Mapping[str, str]) -> MirrorConfig:
        """The config and what start() derives from it before it reaches for the clusters."""
        self.mirror_config = config = MirrorConfig(props, SOURCE_CONFIG_DEF)
        self.policy = config.replication_policy()
        self.topic_filter = config.topic_filter()
        self.config_exclude = compile_pattern_list(config[CONFIG_PROPERTIES_EXCLUDE])
        self.replicate_source_defaults = config[USE_DEFAULTS_FROM] == "source"
        return config

    def start(self, props: Mapping[str, str]) -> None:
        config = self.configure(props)
        if not config.enabled:
            return
        self.source_admin = Admin(config.source_admin("replication-source-admin"))
        self.target_admin = Admin(config.target_admin("replication-target-admin"))
        self.scheduler = scheduler = Scheduler(config.entity_label)
        scheduler.run_now(self.create_offset_syncs_topic, "creating upstream offset-syncs topic")
        scheduler.run_now(self.load_topic_partitions, "loading initial set of topic-partitions")
        scheduler.run_now(self.compute_and_create_topic_partitions, "creating downstream topic-partitions")
        scheduler.run_now(self.refresh_known_target_topics, "refreshing known target topics")
        scheduler.schedule_repeating(self.sync_topic_acls, config.interval_seconds("sync.topic.acls"),
                                     "syncing topic ACLs", delayed=False)
        scheduler.schedule_repeating(self.sync_topic_configs, config.interval_seconds("sync.topic.configs"),
                                     "syncing topic configs", delayed=False)
        scheduler.schedule_repeating(self.refresh_topic_partitions, config.interval_seconds("refresh.topics"),
                                     "refreshing topics")

    def stop(self) -> None:
        if self.scheduler is None:
            return
        self.scheduler.close()
        self.source_admin.close()
        self.target_admin.close()

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        if not self.mirror_config.enabled or not self.known_source_partitions:
            return []
        task_count = min(max_tasks, len(self.known_source_partitions))
        by_task: list[list[TopicPartition]] = [[] for _ in range(task_count)]
        for index, partition in enumerate(self.known_source_partitions):
            by_task[index % task_count].append(partition)
        return [{**self.mirror_config.props,
                 TASK_TOPIC_PARTITIONS: ",".join(f"{tp.topic}-{tp.partition}" for tp in partitions),
                 TASK_INDEX: str(index)} for index, partitions in enumerate(by_task)]

    def exactly_once_support(self, props: Mapping[str, str]) -> str | None:
        config = MirrorConfig(props, SOURCE_CONFIG_DEF)
        read_committed = config.source_consumer("").get("isolation.level") == "read_committed"
        return "SUPPORTED" if read_committed else "UNSUPPORTED"

    def alter_offsets(self, config: Mapping[str, str], offsets: Mapping[Any, Mapping[str, Any] | None]) -> bool:
        for partition, offset in offsets.items():
            if offset is None:
                continue
            partition = dict(partition)
            for key in ("cluster", "topic"):
                if key not in partition:
                    raise ConnectException(f"Source partition {partition} is missing the '{key}' key, which is "
                                           "required")
            if "partition" not in partition:
                raise ConnectException(f"Source partition {partition} is missing the 'partition' key, which is "
                                       "required")
            if "offset" not in offset:
                raise ConnectException(f"Source offset {offset} for source partition {partition} is missing the "
                                       "'offset' key, which is required")
        return True

    # --- topics -------------------------------------------------------------------------------------------------

    def should_replicate_topic(self, topic: str) -> bool:
        heartbeats = self.mirror_config["heartbeats.replication.enabled"] and self.policy.is_heartbeats_topic(topic)
        return (self.topic_filter(topic) or heartbeats) and not self.policy.is_internal_topic(topic) \
            and not self.is_cycle(topic)

    def is_cycle(self, topic: str) -> bool:
        source = self.policy.topic_source(topic)
        if source is None:
            return False
        if source == self.mirror_config.target_cluster_alias:
            return True
        upstream = self.policy.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return False
        return self.is_cycle(upstream)

    def remote_topic(self, topic: str) -> str:
        return self.policy.format_remote_topic(self.mirror_config.source_cluster_alias, topic)

    @staticmethod
    def _partitions(admin: Admin, topics: list[str]) -> list[TopicPartition]:
        if not topics:
            return []
        descriptions = admin.describe_topics(topics)
        return sorted(TopicPartition(name, partition.partition) for name, description in descriptions.items()
                      for partition in description.partitions)

    def find_source_topic_partitions(self) -> list[TopicPartition]:
        return self._partitions(self.source_admin, [topic for topic in self.source_admin.list_topics()
                                                    if self.should_replicate_topic(topic)])

    def find_target_topic_partitions(self) -> list[TopicPartition]:
        source, checkpoints = self.mirror_config.source_cluster_alias, self.mirror_config.checkpoints_topic()
        return self._partitions(self.target_admin, [topic for topic in self.target_admin.list_topics()
                                                    if self.policy.topic_source(topic) == source
                                                    and topic != checkpoints])

    def create_offset_syncs_topic(self) -> None:
        config = self.mirror_config
        if config["emit.offset-syncs.enabled"]:
            admin = (config.source_admin("offset-syncs-source-admin") if config.offset_syncs_on_source()
                     else config.target_admin("offset-syncs-target-admin"))
            create_single_partition_compacted_topic(admin, config.offset_syncs_topic(),
                                                    config["offset-syncs.topic.replication.factor"])

    def load_topic_partitions(self) -> None:
        self.known_source_partitions = self.find_source_topic_partitions()
        self.known_target_partitions = self.find_target_topic_partitions()

    def refresh_known_target_topics(self) -> None:
        self.known_target_partitions = self.find_target_topic_partitions()

    def refresh_topic_partitions(self) -> None:
        source_partitions = self.find_source_topic_partitions()
        target_partitions = self.find_target_topic_partitions()
        upstream_of_target = {TopicPartition(self.policy.upstream_topic(tp.topic), tp.partition)
                              for tp in target_partitions}
        missing_in_target = set(source_partitions) - upstream_of_target
        self.known_target_partitions = target_partitions
        if set(source_partitions) != set(self.known_source_partitions) or missing_in_target:
            log.info("%s: found %d topic-partitions on %s, %d missing on %s", self.mirror_config.entity_label,
                     len(source_partitions), self.mirror_config.source_cluster_alias, len(missing_in_target),
                     self.mirror_config.target_cluster_alias)
            self.known_source_partitions = source_partitions
            self.compute_and_create_topic_partitions()
            self.context.request_task_reconfiguration()

    def compute_and_create_topic_partitions(self) -> None:
        source_counts: dict[str, int] = {}
        for tp in self.known_source_partitions:
            source_counts[tp.topic] = source_counts.get(tp.topic, 0) + 1
        target_counts: dict[str, int] = {}
        for tp in self.known_target_partitions:
            target_counts[tp.topic] = target_counts.get(tp.topic, 0) + 1
        new_topics = sorted(topic for topic in source_counts if self.remote_topic(topic) not in target_counts)
        if new_topics:
            self.create_new_topics(new_topics, source_counts)
        grown = {self.remote_topic(topic): count for topic, count in source_counts.items()
                 if self.remote_topic(topic) in target_counts and count > target_counts[self.remote_topic(topic)]}
        if grown:
            for topic, error in self.target_admin.create_partitions(grown).items():
                if error is not None:
                    log.warning("Could not create topic-partitions for %s: %s", topic, error)

    def create_new_topics(self, topics: list[str], partition_counts: Mapping[str, int]) -> None:
        configs = self.describe_topic_configs(topics)
        new_topics = [NewTopic(self.remote_topic(topic), partition_counts[topic], self.mirror_config["replication.factor"],
                               {name: value for name, value in self.target_config(configs[topic], False).items()
                                if value is not None})
                      for topic in topics]
        for topic, error in self.target_admin.create_topics(new_topics).items():
            if error is None:
                log.info("Created remote topic %s", topic)
            else:
                log.warning("Could not create topic %s: %s", topic, error)

    def describe_topic_configs(self, topics: list[str]) -> dict[str, dict[str, Any]]:
        described = self.source_admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)
                                                        for topic in topics])
        return {resource.name: entries for resource, entries in described.items()}

    def target_config(self, entries: Mapping[str, Any], incremental: bool) -> dict[str, Any]:
        """Kafka's targetConfig: the source's entries worth copying (as ConfigEntry when incremental)."""
        chosen: dict[str, Any] = {}
        for name, entry in entries.items():
            if not (incremental or not entry.is_default or self.replicate_source_defaults):
                continue
            if entry.is_read_only or entry.is_sensitive or entry.source == ConfigSource.STATIC_BROKER_CONFIG:
                continue
            if self.config_exclude is not None and self.config_exclude.fullmatch(name):
                continue
            chosen[name] = entry if incremental else entry.value
        return chosen

    def topics_being_replicated(self) -> list[str]:
        target_topics = {tp.topic for tp in self.known_target_partitions}
        return sorted({tp.topic for tp in self.known_source_partitions
                       if self.remote_topic(tp.topic) in target_topics})

    def sync_topic_configs(self) -> None:
        topics = self.topics_being_replicated()
        if not topics:
            return
        changes = {}
        for topic, entries in self.describe_topic_configs(topics).items():
            operations = []
            for name, entry in self.target_config(entries, True).items():
                if entry.is_default and not self.replicate_source_defaults:
                    operations.append(AlterConfigOp(name, None, AlterConfigOpType.DELETE))
                else:
                    operations.append(AlterConfigOp(name, entry.value, AlterConfigOpType.SET))
            changes[ConfigResource(ConfigResourceType.TOPIC, self.remote_topic(topic))] = operations
        for resource, error in self.target_admin.incremental_alter_configs(changes).items():
            if error is not None:
                log.warning("Could not alter configuration of topic %s: %s", resource.name, error)

    # --- topic ACLs ---------------------------------------------------------------------------------------------

    def sync_topic_acls(self) -> None:
        """Kafka's syncTopicAcls: the source's literal topic ACLs of the topics this flow replicates are created on
        their remote topics (creating one that exists is a no-op, so each run adds only what is new; nothing is ever
        deleted on the target)."""
        try:
            bindings = self.source_admin.describe_acls(ANY_TOPIC_ACL)
        except SecurityDisabledError:
            if not self.no_acl_authorizer:
                self.no_acl_authorizer = True
                log.info("No ACL authorizer is configured on the source Kafka cluster, so no topic ACL syncing will "
                         "take place. Consider disabling topic ACL syncing by setting sync.topic.acls.enabled to "
                         "'false'.")
            return
        wanted = [self.target_acl_binding(binding) for binding in bindings
                  if binding.pattern.resource_type == ResourceType.TOPIC
                  and binding.pattern.pattern_type == PatternType.LITERAL
                  and should_replicate_acl(binding) and self.should_replicate_topic(binding.pattern.name)]
        if not wanted:
            return
        for binding, error in self.target_admin.create_acls(wanted).items():
            if error is not None:
                log.warning("Could not sync ACL of topic %s: %s", binding.pattern.name, error)

    def target_acl_binding(self, binding: AclBinding) -> AclBinding:
        """The binding for the remote topic; an ALLOW ALL becomes ALLOW READ, as the remote topic is read-only."""
        entry = binding.entry
        if entry.permission_type == AclPermissionType.ALLOW and entry.operation == AclOperation.ALL:
            entry = AccessControlEntry(entry.principal, entry.host, AclOperation.READ, entry.permission_type)
        return AclBinding(ResourcePattern(ResourceType.TOPIC, self.remote_topic(binding.pattern.name),
                                          PatternType.LITERAL), entry)


def should_replicate_acl(binding: AclBinding) -> bool:
    """Kafka's shouldReplicateAcl: every ACL but an ALLOW WRITE (only MirrorMaker writes remote topics); DENY
    entries are kept."""
    return not (binding.entry.permission_type == AclPermissionType.ALLOW
                and binding.entry.operation == AclOperation.WRITE)


class OffsetSyncWriter:
    """Kafka's OffsetSyncWriter: which acknowledged records become OffsetSync records, and when they are sent."""

    class PartitionState:
        def __init__(self, max_offset_lag: int) -> None:
            self.previous_upstream_offset = -1
            self.previous_downstream_offset = -1
            self.last_sync_downstream_offset = -1
            self.max_offset_lag = max_offset_lag
            self.should_sync_offsets = False

        def update(self, upstream_offset: int, downstream_offset: int) -> bool:
            no_previous_sync = self.last_sync_downstream_offset == -1
            # a checkpoint translates to one past the last sync, hence the + 1
            too_stale = downstream_offset - (self.last_sync_downstream_offset + 1) >= self.max_offset_lag
            skipped_upstream = upstream_offset - self.previous_upstream_offset != 1
            truncated_downstream = downstream_offset < self.previous_downstream_offset
            if no_previous_sync or too_stale or skipped_upstream or truncated_downstream:
                self.last_sync_downstream_offset = downstream_offset
                self.should_sync_offsets = True
            self.previous_upstream_offset, self.previous_downstream_offset = upstream_offset, downstream_offset
            return self.should_sync_offsets

    def __init__(self, producer: Producer, topic: str, max_offset_lag: int) -> None:
        self.producer, self.topic, self.max_offset_lag = producer, topic, max_offset_lag
        self.partition_states: dict[TopicPartition, OffsetSyncWriter.PartitionState] = {}
        self.delayed: dict[TopicPartition, OffsetSync] = {}
        self.pending: dict[TopicPartition, OffsetSync] = {}
        self.lock = threading.Lock()
        # Kafka sends a sync from the acknowledgement callback; here a thread of its own sends it, so that a
        # callback never waits on another producer
        self.wake = threading.Event()
        self.closing = False
        self.sender = threading.Thread(target=self._send_loop, name=f"offset-sync-writer-{topic}", daemon=True)
        self.sender.start()

    def maybe_queue_offset_syncs(self, topic_partition: TopicPartition, upstream_offset: int,
                                 downstream_offset: int) -> None:
        with self.lock:
            state = self.partition_states.setdefault(topic_partition, self.PartitionState(self.max_offset_lag))
            sync = OffsetSync(topic_partition, upstream_offset, downstream_offset)
            if state.update(upstream_offset, downstream_offset):
                self.delayed.pop(topic_partition, None)
                self.pending[topic_partition] = sync
                state.should_sync_offsets = False
            else:
                self.delayed[topic_partition] = sync
        self.fire_pending_offset_syncs()

    def promote_delayed_offset_syncs(self) -> None:
        with self.lock:
            self.pending.update(self.delayed)
            self.delayed.clear()

    def fire_pending_offset_syncs(self) -> None:
        self.wake.set()

    def _send_loop(self) -> None:
        while True:
            self.wake.wait()
            self.wake.clear()
            with self.lock:
                pending, self.pending = list(self.pending.values()), {}
            for sync in pending:
                try:
                    self.producer.send(self.topic, sync.record_value(), sync.record_key(), partition=0)
                except Exception:
                    log.exception("Failure sending offset sync.")
            if self.closing:
                return

    def close(self) -> None:
        """Send what is pending, then close the producer (which waits for what was sent)."""
        self.closing = True
        self.wake.set()
        self.sender.join(10)
        self.producer.close(5)


class MirrorSourceTask(SourceTask):
    def version(self) -> str:
        return _version()

    def start(self, props: Mapping[str, str]) -> None:
        self.mirror_config = config = MirrorConfig(props, SOURCE_TASK_CONFIG_DEF)
        self.source_cluster_alias = config.source_cluster_alias
        self.poll_timeout = config["consumer.poll.timeout.ms"] / 1000
        self.policy = config.replication_policy()
        self.stopping = False
        self.consumer_lock = threading.Lock()
        self.offset_sync_writer: OffsetSyncWriter | None = None
        if config["emit.offset-syncs.enabled"]:
            producer_config = (config.source_producer("offset-syncs-source-producer") if config.offset_syncs_on_source()
                               else config.target_producer("offset-syncs-target-producer"))
            self.offset_sync_writer = OffsetSyncWriter(Producer(producer_config), config.offset_syncs_topic(),
                                                       config["offset.lag.max"])
        self.consumer = Consumer(config.source_consumer("replication-consumer"))
        partitions = topic_partition_list(",".join(config[TASK_TOPIC_PARTITIONS]))
        self.consumer.assign(partitions)
        reader = self.context.offset_storage_reader
        for partition in partitions:
            offset = unwrap_offset(reader.offset(wrap_partition(partition, self.source_cluster_alias)))
            if offset >= 0:
                self.consumer.seek(partition, offset + 1)
        log.info("%s replicating %d topic-partitions", config.entity_label, len(partitions))

    def poll(self) -> list[SourceRecord] | None:
        with self.consumer_lock:
            if self.stopping:
                return None
            batch = self.consumer.poll(self.poll_timeout)
        if self.stopping:
            # a batch read while the task was being stopped is not handed over (as Kafka's worker drops it): its
            # acknowledgements would come after stop() and write no offset syncs, while its offsets were committed
            return None
        records = [self.convert_record(record) for record in batch]
        return records or None

    def convert_record(self, record: Any) -> SourceRecord:
        headers = Headers()
        for key, value in record.headers or ():
            headers.add(key, value, BYTES_SCHEMA)
        return SourceRecord(self.policy.format_remote_topic(self.source_cluster_alias, record.topic),
                            record.partition, OPTIONAL_BYTES_SCHEMA, record.key, BYTES_SCHEMA, record.value,
                            record.timestamp, headers,
                            source_partition=wrap_partition(record.topic_partition, self.source_cluster_alias),
                            source_offset=wrap_offset(record.offset))

    def commit_record(self, record: SourceRecord, metadata: Any) -> None:
        writer = self.offset_sync_writer  # the final commit() may close it concurrently
        if metadata is None or metadata.offset < 0 or writer is None:
            return
        partition = record.source_partition
        writer.maybe_queue_offset_syncs(
            TopicPartition(partition["topic"], partition["partition"]), unwrap_offset(record.source_offset),
            metadata.offset)

    def commit(self) -> None:
        if self.offset_sync_writer is not None:
            self.offset_sync_writer.promote_delayed_offset_syncs()
            self.offset_sync_writer.fire_pending_offset_syncs()
            if self.stopping:
                # the worker's final commit, after stop(): what was acknowledged since is synced too, then the
                # writer closes (Kafka closes it in stop() and loses the syncs of records still in flight, which
                # with kfk's eager rebalances would often be a partition's last)
                self.offset_sync_writer.close()
                self.offset_sync_writer = None

    def stop(self) -> None:
        self.stopping = True
        with self.consumer_lock:
            self.consumer.close(5)


def _version() -> str:
    from kfk import __version__
    return __version__
