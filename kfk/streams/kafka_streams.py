"""KafkaStreams: runs a Topology with ``num.stream.threads`` stream threads, each with its own consumer, producer
and tasks.

How tasks are assigned. Kafka Streams' own assignment (StreamsPartitionAssignor) is a Java-only protocol whose
user data carries Java's task and host state, so kfk.streams does not speak it, and **a Java and a Python instance
cannot share one application.id** (both would join one group with no assignor in common: the coordinator refuses the
second, INCONSISTENT_GROUP_PROTOCOL). kfk.streams' threads join the application's group with the classic consumer
protocol and the range assignor: every member subscribes to the same topics, so partition i of every topic with
the same partition count goes to the same member, which keeps the partitions of one task (partition i of every
source topic of a sub-topology) together. A thread then runs task "<sub-topology>_<i>" for each partition i it holds
of that sub-topology's topics. The range assignment is the leader's target: as Kafka Streams' high-availability
assignor (KIP-441), a stateful task stays on an instance that is caught up on it until a warm-up replica has caught up
on the instance the target names (kfk.streams.assignment), and standby replicas follow num.standby.replicas.

Processing guarantees:
- at_least_once: every commit.interval.ms the thread flushes its record cache, flushes its producer, checks every
  send, writes the stores' checkpoints, then commits the consumed offsets.
- exactly_once_v2: one transactional producer per thread (transactional.id <application.id>-<process id>-<thread
  index>, the process id kept in the state directory so a restarted instance fences its predecessor at once); the
  outputs, changelog writes and consumed offsets (send_offsets_to_transaction with the consumer's group metadata)
  commit or abort together (the record cache is flushed into the transaction before it commits). The consumer
  reads read_committed, and a store is rebuilt from its committed changelog after a crash.

The record cache (kfk.streams.cache): statestore.cache.max.bytes (10 MiB by default) is divided evenly between the
stream threads; each thread's cache holds the updates of its tasks' cached stores (the DSL's aggregations and
materialized tables, and Processor API stores built with caching enabled) until a commit, a clean close or an
eviction flushes them, so a key updated N times between two commits goes downstream, to its changelog and to its
local store once, with its latest value. With statestore.cache.max.bytes=0 nothing is cached and every update is
forwarded.
"""

from __future__ import annotations

import enum
import json
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kfk.client import Admin, Consumer, ConsumerRecord, NewTopic, Producer
from kfk.client.offsets import READ_COMMITTED, READ_UNCOMMITTED
from kfk.client.producer.partitioner import partition_for_key
from kfk.common.constants import LATEST_TIMESTAMP
from kfk.common.structs import OffsetAndMetadata, TopicPartition
from kfk.errors import KafkaError, TopicExistsError
from kfk.streams.assignment import LATEST_OFFSET, AssignmentConfigs
from kfk.streams.cache import ThreadCache, cache_bytes_per_thread
from kfk.streams.config import StreamsConfig
from kfk.streams.metadata import (NOT_AVAILABLE, KeyQueryMetadata, PartitionsByHost, StreamsAssignor, StreamsMetadata,
                                  StreamsSubscription, parse_host_info)
from kfk.streams.processor import TaskId
from kfk.streams.serdes import Serde
from kfk.streams.standby import StandbyUpdater
from kfk.streams.state import Checkpoint, KeyValueStore, rocksdb_available
from kfk.streams.task import StreamTask, restore_stores
from kfk.streams.windows import WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS, JoinWindows
from kfk.streams.topology import CHANGELOG_TOPIC_SUFFIX, SubTopology, Topology, TopologyException

__all__ = ["KafkaStreams", "State", "MissingSourceTopicException", "internal_topic_configs"]

log = logging.getLogger("kfk.streams")

#: Kafka Streams' configs of the internal topics it creates (RepartitionTopicConfig, UnwindowedChangelogTopicConfig).
REPARTITION_TOPIC_CONFIGS = {"cleanup.policy": "delete", "segment.bytes": "52428800", "retention.ms": "-1",
                             "message.timestamp.type": "CreateTime"}
CHANGELOG_TOPIC_CONFIGS = {"cleanup.policy": "compact", "message.timestamp.type": "CreateTime"}
#: Kafka Streams' buffered.records.per.partition default: a partition with more records waiting is paused.
BUFFERED_RECORDS_PER_PARTITION = 1000
#: How long a task holds records back while one of its partitions may still have older records to fetch.
TASK_IDLE_S = 0.5


class State(enum.Enum):
    """Kafka Streams' KafkaStreams.State."""

    CREATED = "CREATED"
    REBALANCING = "REBALANCING"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    NOT_RUNNING = "NOT_RUNNING"
    PENDING_ERROR = "PENDING_ERROR"
    ERROR = "ERROR"


class MissingSourceTopicException(KafkaError):
    """A source topic does not exist (Kafka's MissingSourceTopicException)."""


def internal_topic_configs(topology: Topology, application_id: str, source_partitions: Mapping[str, int]
                           ) -> tuple[dict[str, tuple[int, dict[str, str]]], dict[int, int]]:
    """The internal topics to create ({prefixed name: (partitions, configs)}) and each sub-topology's task count.

    A sub-topology has as many tasks as its source topics have partitions (the most, when they differ); a
    repartition topic has as many partitions as the sub-topologies writing to it have tasks (unless repartition()
    fixed the number), and a changelog one per task of its store's sub-topology. Repartition topics may feed one
    another, so the counts are settled by iterating until nothing changes.
    """
    subtopologies = topology.sub_topologies()
    counts: dict[str, int] = dict(source_partitions)
    for topic, fixed in topology.repartition_topics.items():
        if fixed is not None:
            counts[topic] = fixed
    for group in topology.copartition_groups:
        # as Kafka's CopartitionedTopicsEnforcer: a repartition topic co-partitioned with input topics (a foreign-key
        # join's) has as many partitions as they have
        inputs = [counts[topic] for topic in group if topic not in topology.repartition_topics and topic in counts]
        for topic in group:
            if inputs and topic in topology.repartition_topics and topic not in counts:
                counts[topic] = max(inputs)
    writers: dict[str, list[SubTopology]] = {}
    for subtopology in subtopologies:
        for name in subtopology.nodes:
            sink_topic = topology.nodes[name].topic
            if sink_topic in topology.repartition_topics:
                writers.setdefault(sink_topic, []).append(subtopology)
    changed = True
    while changed:
        changed = False
        for topic in topology.repartition_topics:
            if topic in counts:
                continue
            tasks = [max((counts.get(source, 0) for source in writer.source_topics), default=0)
                     for writer in writers.get(topic, [])]
            if tasks and all(tasks):
                counts[topic] = max(tasks)
                changed = True
    missing = [topic for topic in topology.repartition_topics if topic not in counts]
    if missing:
        raise TopologyException(f"Failed to compute number of partitions for all repartition topics: {missing}")
    for group in topology.copartition_groups:
        numbers = {counts[topic] for topic in group}
        if len(numbers) > 1:
            raise TopologyException(f"Topics not co-partitioned: [{','.join(sorted(group))}]")
    tasks = {subtopology.id: max(counts[topic] for topic in subtopology.source_topics)
             for subtopology in subtopologies}
    internal: dict[str, tuple[int, dict[str, str]]] = {}
    for topic in topology.repartition_topics:
        internal[f"{application_id}-{topic}"] = (counts[topic], dict(REPARTITION_TOPIC_CONFIGS))
    for subtopology in subtopologies:
        for store in subtopology.stores:
            builder = topology.store_builders[store]
            if builder.logging:
                configs = dict(CHANGELOG_TOPIC_CONFIGS)
                if builder.windows is not None:  # Kafka's WindowedChangelogTopicConfig
                    # A join's store keeps every record (keys never repeat): nothing to compact.
                    configs["cleanup.policy"] = ("delete" if isinstance(builder.windows, JoinWindows)
                                                 else "compact,delete")
                    configs["retention.ms"] = str(builder.windows.retention_ms()
                                                  + WINDOW_CHANGELOG_ADDITIONAL_RETENTION_MS)
                internal[f"{application_id}-{store}{CHANGELOG_TOPIC_SUFFIX}"] = (tasks[subtopology.id], configs)
    return internal, tasks


class KafkaStreams:
    """A Streams application instance: ``KafkaStreams(builder.build(), config)``, then start() and close()."""

    def __init__(self, topology: Topology, config: Mapping[str, Any] | StreamsConfig) -> None:
        self.topology = topology
        self.config = config if isinstance(config, StreamsConfig) else StreamsConfig(config)
        self.state = State.CREATED
        self._state_lock = threading.Condition()
        self._threads: list[StreamThread] = []
        self.state_dir = Path(self.config.state_dir) / self.config.application_id
        self.process_id = self._process_id()
        self.error: BaseException | None = None
        #: The global stores (each instance's copy of every partition of their topics), by name.
        self.global_stores: dict[str, KeyValueStore] = {}
        self._global_thread: GlobalStreamThread | None = None
        #: This instance's application.server, and what the group's last assignment said every host holds.
        self.application_server = parse_host_info(self.config.application_server)
        self.partitions_by_host = PartitionsByHost()
        #: The standby and warm-up tasks of this instance's threads, when the topology has logged stores.
        self.standby_updater: StandbyUpdater | None = None
        #: Each stateful sub-topology's changelog topics, and the sub-topologies whose stores all persist on disk (a
        #: closed task's state is then still there, at its checkpoint).
        self.changelog_topics: dict[int, list[str]] = {}
        self.persistent_subtopologies: set[int] = set()
        for subtopology in topology.sub_topologies():
            logged = [topology.store_builders[store] for store in subtopology.stores
                      if topology.store_builders[store].logging]
            if logged:
                self.changelog_topics[subtopology.id] = [
                    f"{self.config.application_id}-{builder.name}{CHANGELOG_TOPIC_SUFFIX}" for builder in logged]
                if all(builder.persistent for builder in logged) and rocksdb_available():
                    self.persistent_subtopologies.add(subtopology.id)
        #: The leader's reader of the changelogs' end offsets (opened at the first assignment that needs it).
        self._admin: Admin | None = None
        self._admin_lock = threading.Lock()

    def _process_id(self) -> uuid.UUID:
        """Kept in <state.dir>/<application.id>/kafka-streams-process-metadata, as Kafka Streams keeps it."""
        path = self.state_dir / "kafka-streams-process-metadata"
        try:
            return uuid.UUID(json.loads(path.read_text())["processId"])
        except (FileNotFoundError, KeyError, ValueError):
            process_id = uuid.uuid4()
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"processId": str(process_id)}))
            return process_id

    def _set_state(self, state: State) -> None:
        with self._state_lock:
            self.state = state
            self._state_lock.notify_all()

    def wait_for_state(self, *states: State, timeout: float = 60) -> State:
        with self._state_lock:
            self._state_lock.wait_for(lambda: self.state in states, timeout)
            return self.state

    def start(self) -> None:
        """Create the internal topics, then start the stream threads (they join the group and run)."""
        if self.state is not State.CREATED:
            raise RuntimeError(f"KafkaStreams is not in state CREATED (it is {self.state.value})")
        self._set_state(State.REBALANCING)
        self.internal_topics, self.tasks_per_subtopology = self._prepare_topics()
        if self.topology.global_nodes:
            # Kafka bootstraps the global stores before any stream thread processes a record
            self._global_thread = GlobalStreamThread(self)
            self._global_thread.bootstrap()
            self._global_thread.start()
        if self.changelog_topics:
            self.standby_updater = StandbyUpdater(self)
            self.standby_updater.start()
        for index in range(1, self.config.num_stream_threads + 1):
            thread = StreamThread(self, index)
            self._threads.append(thread)
        for thread in self._threads:
            thread.start()

    def _prepare_topics(self) -> tuple[dict[str, tuple[int, dict[str, str]]], dict[int, int]]:
        config = self.config
        external = [topic for topic in self.topology.source_topics()
                    if topic not in self.topology.repartition_topics]
        external += [topic for topics in self.topology.global_stores().values() for topic in topics]
        with Admin(config.admin_config(f"{config.client_id}-admin")) as admin:
            present = set(admin.list_topics())
            absent = sorted(set(external) - present)
            if absent:
                self._set_state(State.ERROR)
                raise MissingSourceTopicException(
                    f"One or more source topics were missing during rebalance: {absent}")
            described = admin.describe_topics(external)
            partitions = {name: len(description.partitions) for name, description in described.items()}
            internal, tasks = internal_topic_configs(self.topology, config.application_id, partitions)
            wanted = [NewTopic(name, count, config.replication_factor, configs)
                      for name, (count, configs) in internal.items() if name not in present]
            if wanted:
                for name, error in admin.create_topics(wanted).items():
                    if error is not None and not isinstance(error, TopicExistsError):
                        raise error
        return internal, tasks

    def assignment_configs(self) -> AssignmentConfigs:
        config = self.config
        return AssignmentConfigs(config.num_standby_replicas, config.acceptable_recovery_lag,
                                 config.max_warmup_replicas, config.probing_rebalance_interval_ms,
                                 tuple(config.rack_aware_assignment_tags))

    def task_offset_sums(self) -> dict[TaskId, int]:
        """The changelog offset sum of every stateful task this instance has state for, as its threads report it
        when they join the group: LATEST_OFFSET for a task a thread runs, a standby's positions, or the checkpoint a
        closed task left on disk."""
        sums: dict[TaskId, int] = {}
        if self.state_dir.is_dir():
            for directory in self.state_dir.iterdir():
                try:
                    task_id = TaskId.parse(directory.name)
                except ValueError:
                    continue
                if task_id.subtopology in self.persistent_subtopologies:
                    offsets = Checkpoint(directory / ".checkpoint").read()
                    if offsets:
                        sums[task_id] = sum(offsets.values())
        if self.standby_updater is not None:
            sums.update(self.standby_updater.offset_sums())
        for thread in self._threads:
            sums.update((task_id, LATEST_OFFSET) for task_id in list(thread.tasks)
                        if task_id.subtopology in self.changelog_topics)
        return sums

    def changelog_end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The leader's look at the changelogs' ends (committed ends under exactly_once_v2)."""
        with self._admin_lock:
            if self._admin is None:
                self._admin = Admin(self.config.admin_config(f"{self.config.client_id}-admin"))
            found = self._admin.list_offsets(dict.fromkeys(partitions, LATEST_TIMESTAMP), timeout_ms=10_000, isolation_level=(
                READ_COMMITTED if self.config.exactly_once else READ_UNCOMMITTED))
        return {partition: value.offset if value is not None else 0 for partition, value in found.items()}

    def request_probing_rebalance(self, reason: str) -> None:
        """Have the group assign again now (one thread rejoining rebalances the whole group)."""
        try:
            self._threads[0].consumer.enforce_rebalance(reason)
        except KafkaError as error:  # not in the group yet: its join assigns anyway
            log.info("no probing rebalance (%s): %s", reason, error)

    def _thread_finished(self, thread: StreamThread, error: BaseException | None) -> None:
        if error is not None and self.error is None:
            self.error = error
            log.error("stream thread %s died: %s", thread.name, error)
            self._set_state(State.ERROR)

    def close(self, timeout: float = 60) -> bool:
        """Stop the threads (each commits and closes its tasks); True if they all stopped within ``timeout``."""
        if self.state is State.CREATED:
            self._set_state(State.NOT_RUNNING)
            return True
        if self.state is not State.ERROR:
            self._set_state(State.PENDING_SHUTDOWN)
        for thread in self._threads:
            thread.running = False
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(deadline - time.monotonic(), 0))
        for helper in filter(None, [self._global_thread, self.standby_updater]):
            helper.running = False
            helper.join(max(deadline - time.monotonic(), 0))
        stopped = not any(thread.is_alive()
                          for thread in [*self._threads, *filter(None, [self._global_thread, self.standby_updater])])
        with self._admin_lock:
            if self._admin is not None:
                self._admin.close()
                self._admin = None
        if self.state is not State.ERROR:
            self._set_state(State.NOT_RUNNING)
        return stopped

    def __enter__(self) -> KafkaStreams:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def store(self, name: str, enable_stale_stores: bool = False) -> ReadOnlyStore:
        """The local instances of store `name` (interactive queries): the tasks of this instance's threads hold
        the keys of the partitions they run; with ``enable_stale_stores`` (Kafka's StoreQueryParameters
        .enableStaleStores()) the standby replicas' copies too, which may lag behind the active ones."""
        stores = [task.stores[name] for thread in self._threads for task in list(thread.tasks.values())
                  if name in task.stores]
        if enable_stale_stores and self.standby_updater is not None:
            stores += self.standby_updater.stores_named(name)
        if not stores and name not in self.topology.store_builders:
            raise ValueError(f"Cannot get state store {name} because no such store is registered in the topology.")
        return ReadOnlyStore(stores)

    def metadata_for_all_stream_clients(self) -> list[StreamsMetadata]:
        """Every instance of the application that has an application.server, with the stores and source partitions
        its tasks hold (Kafka Streams' metadataForAllStreamsClients), as of the group's last assignment."""
        return [StreamsMetadata(host, self._stores_of(partitions), partitions)
                for host, partitions in sorted(self.partitions_by_host.hosts().items())]

    def streams_metadata_for_store(self, store_name: str) -> list[StreamsMetadata]:
        """The instances holding some of store `store_name` (Kafka Streams' streamsMetadataForStore)."""
        return [metadata for metadata in self.metadata_for_all_stream_clients()
                if store_name in metadata.state_store_names]

    def query_metadata_for_key(self, store_name: str, key: Any, key_serde: Serde | None = None) -> KeyQueryMetadata:
        """Which instance holds `key` of store `store_name` (Kafka Streams' queryMetadataForKey): the key, written
        with `key_serde` (default.key.serde by default), goes to the partition Kafka's default partitioner picks among
        the store's source topic's partitions, and the host given that partition has it. NOT_AVAILABLE before the
        first assignment or when the instances have no application.server."""
        subtopology = next((sub for sub in self.topology.sub_topologies() if store_name in sub.stores), None)
        if subtopology is None:
            raise ValueError(f"Cannot get state store {store_name} because no such store is registered in the "
                             "topology.")
        if not self._threads:
            return NOT_AVAILABLE
        topic = self._threads[0]._internal(subtopology.source_topics[0])
        partition_count = len(self._threads[0].consumer.partitions_for(topic) or [])
        data = (key_serde or self.config.key_serde).serialize_for(topic, key)
        if not partition_count or data is None:
            return NOT_AVAILABLE
        partition = partition_for_key(data, partition_count)
        source = TopicPartition(topic, partition)
        host = self.partitions_by_host.host_of(source)
        if host is None:
            return NOT_AVAILABLE
        return KeyQueryMetadata(host, self.partitions_by_host.standby_hosts_of(source), partition)

    def _stores_of(self, partitions: frozenset[TopicPartition]) -> frozenset[str]:
        """The stores of the sub-topologies some of these source partitions belong to."""
        topics = {partition.topic for partition in partitions}
        internal = self._threads[0]._internal if self._threads else (lambda topic: topic)
        return frozenset(store for sub in self.topology.sub_topologies()
                         if any(internal(topic) in topics for topic in sub.source_topics) for store in sub.stores)

    def metrics(self) -> dict[str, float]:
        """This instance's metrics, by Kafka Streams' names, summed over its tasks: dropped-records-total (the
        records the exception handlers skipped), restore-total (changelog records restored into active tasks),
        update-total (changelog records applied to standby tasks) and, with the record cache on, hit-ratio-avg (the
        share of cached stores' reads the cache answered, over the open tasks' stores)."""
        dropped = sum(thread.dropped_records + sum(task.dropped_records for task in list(thread.tasks.values()))
                      for thread in self._threads)
        restored = sum(thread.restored_records for thread in self._threads)
        updated = self.standby_updater.updated_records if self.standby_updater is not None else 0
        metrics = {"dropped-records-total": float(dropped), "restore-total": float(restored),
                   "update-total": float(updated)}
        caches = [thread.cache for thread in self._threads if thread.cache is not None]
        if caches:
            metrics["hit-ratio-avg"] = ThreadCache.hit_ratio(*caches)
        return metrics

    def _thread_running(self) -> None:
        if self.state is State.REBALANCING and all(thread.assigned for thread in self._threads):
            self._set_state(State.RUNNING)


class ReadOnlyStore:
    """A read-only view of one store across the local tasks (Kafka's ReadOnlyKeyValueStore)."""

    def __init__(self, stores: list) -> None:
        self.stores = stores

    def get(self, key: Any) -> Any:
        for store in self.stores:
            value = store.get(key)
            if value is not None:
                return value
        return None

    def all(self) -> dict[Any, Any]:
        return {key: value for store in self.stores for key, value in store.all()}

    def approximate_num_entries(self) -> int:
        return sum(1 for store in self.stores for _ in store.all())


class GlobalStreamThread(threading.Thread):
    """Kafka's global stream thread: reads every partition of the global stores' topics (with no group: each
    instance reads them all) into the stores, which the tasks only read. The stores are kept in memory and
    rebuilt from the topics' beginning at every start (the topic is the store's changelog)."""

    def __init__(self, streams: KafkaStreams) -> None:
        super().__init__(name=f"{streams.config.client_id}-GlobalStreamThread", daemon=True)
        self.streams = streams
        self.running = True
        config = streams.config
        self.store_of: dict[str, KeyValueStore] = {}
        for store_name, topics in streams.topology.global_stores().items():
            builder = streams.topology.store_builders[store_name]
            store = KeyValueStore(store_name, builder.key_serde or config.key_serde,
                                  builder.value_serde or config.value_serde, None, None)
            streams.global_stores[store_name] = store
            self.store_of.update((topic, store) for topic in topics)
        self.consumer = Consumer(config.restore_consumer_config(f"{config.client_id}-global-consumer"))

    def bootstrap(self, timeout_s: float = 120) -> None:
        """Read every global topic to its current end before the stream threads start."""
        partitions = [TopicPartition(topic, partition) for topic in self.store_of
                      for partition in self.consumer.partitions_for(topic)]
        self.consumer.assign(partitions)
        self.consumer.seek_to_beginning(*partitions)
        ends = self.consumer.end_offsets(partitions)
        deadline = time.monotonic() + timeout_s
        while any(self.consumer.position(partition) < ends[partition] for partition in partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the global stores did not load {sorted(map(str, partitions))}")
            self._apply(self.consumer.poll(0.2))

    def _apply(self, records: Any) -> None:
        for record in records:
            if record.key is not None:
                self.store_of[record.topic].restore(record.key, record.value, record.timestamp)

    def run(self) -> None:
        try:
            while self.running:
                self._apply(self.consumer.poll(0.1))
        except BaseException as error:  # noqa: BLE001 - reported, as a stream thread's
            log.error("the global stream thread failed", exc_info=error)
        finally:
            self.consumer.close()


class StreamThread(threading.Thread):
    """One thread: a consumer in the application's group, a producer (transactional under exactly_once_v2), a
    restore consumer, and the tasks of the partitions the group gave it."""

    def __init__(self, streams: KafkaStreams, index: int) -> None:
        config = streams.config
        super().__init__(name=f"{config.client_id}-StreamThread-{index}", daemon=True)
        self.streams = streams
        self.config = config
        self.running = True
        self.assigned = False
        client_id = f"{config.client_id}-{streams.process_id}-StreamThread-{index}"
        transactional_id = f"{config.application_id}-{streams.process_id}-{index}" if config.exactly_once else None
        self.producer = Producer(config.producer_config(f"{client_id}-producer", transactional_id))
        self.restore_consumer = Consumer(config.restore_consumer_config(f"{client_id}-restore-consumer"))
        cache_bytes = cache_bytes_per_thread(config.statestore_cache_max_bytes, config.num_stream_threads)
        #: The thread's record cache (None when statestore.cache.max.bytes is 0: nothing is cached).
        self.cache = ThreadCache(cache_bytes) if cache_bytes > 0 else None
        self.subtopologies = {subtopology.id: subtopology for subtopology in streams.topology.sub_topologies()}
        self.topic_subtopology = {self._internal(topic): subtopology.id
                                  for subtopology in self.subtopologies.values()
                                  for topic in subtopology.source_topics}
        self.assignor = StreamsAssignor(StreamsSubscription(str(streams.process_id), streams.application_server,
                                                            client_tags=config.client_tags),
                                        streams.partitions_by_host, streams.assignment_configs(),
                                        self.topic_subtopology, streams.changelog_topics, streams.task_offset_sums,
                                        streams.changelog_end_offsets)
        self.consumer = Consumer(config.consumer_config(f"{client_id}-consumer", index), assignors=[self.assignor])
        self.tasks: dict[TaskId, StreamTask] = {}
        self.task_of: dict[TopicPartition, StreamTask] = {}
        self.consumed: dict[TopicPartition, int] = {}
        #: Fetched records not processed yet, per partition (a task takes them in timestamp order).
        self.buffers: dict[TopicPartition, deque[ConsumerRecord]] = {}
        #: Since when (monotonic s) each task has had records it holds back, waiting for an empty partition.
        self.waiting_since: dict[TaskId, float] = {}
        self.in_transaction = False
        #: Records the exception handlers dropped in the tasks this thread has closed.
        self.dropped_records = 0
        #: Changelog records restored into this thread's active tasks.
        self.restored_records = 0
        #: When (monotonic s) this thread starts the probing rebalance its latest assignment asked for.
        self.probe_at: float | None = None

    def _internal(self, topic: str) -> str:
        if topic in self.streams.topology.repartition_topics:
            return f"{self.config.application_id}-{topic}"
        return topic

    # --- the group's callbacks (run inside consumer.poll) ------------------------------------------------------------

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        if self.tasks:
            self.commit()
        for task in self.tasks.values():
            self._close_task(task, clean=True)
        self.tasks.clear()
        self.task_of.clear()
        self.buffers.clear()
        self.waiting_since.clear()

    def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        if self.in_transaction:
            self.producer.abort_transaction()
            self.in_transaction = False
        for task in self.tasks.values():
            self._close_task(task, clean=False)
        self.tasks.clear()
        self.task_of.clear()
        self.consumed.clear()
        self.buffers.clear()
        self.waiting_since.clear()

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        streams = self.streams
        created: dict[TaskId, StreamTask] = {}
        task_of: dict[TopicPartition, StreamTask] = {}
        for partition in sorted(assigned):
            task_id = TaskId(self.topic_subtopology[partition.topic], partition.partition)
            task = self.tasks.get(task_id) or created.get(task_id)
            if task is None:
                if streams.standby_updater is not None:  # its standby here (if any) hands over its stores
                    streams.standby_updater.release(task_id)
                task = StreamTask(task_id, self.subtopologies[task_id.subtopology], streams.topology,
                                  application_id=self.config.application_id, producer=self.producer,
                                  key_serde=self.config.key_serde, value_serde=self.config.value_serde,
                                  state_dir=streams.state_dir, internal_topic=self._internal,
                                  global_stores=streams.global_stores,
                                  exception_handlers=self.config.exception_handlers(), cache=self.cache)
                created[task_id] = task
            task_of[partition] = task
        for task_id, restored in restore_stores(list(created.values()), self.config.exactly_once,
                                                self.restore_consumer, timeout_s=120).items():
            if restored:
                log.info("task %s restored %d changelog records", task_id, restored)
            self.restored_records += restored
        # restored, they run (and interactive queries see their stores)
        self.tasks.update(created)
        self.task_of.update(task_of)
        if streams.standby_updater is not None:
            streams.standby_updater.assign(self.name, set(self.assignor.standby_tasks), set(self.tasks),
                                           self.assignor.warmup_tasks)
        probing_ms = self.assignor.probing_rebalance_ms
        self.probe_at = time.monotonic() + probing_ms / 1000 if probing_ms is not None else None
        self.assigned = True
        streams._thread_running()

    # --- the loop ----------------------------------------------------------------------------------------------------

    def run(self) -> None:
        error: BaseException | None = None
        try:
            if self.config.exactly_once:
                self.producer.init_transactions()
            topics = [self._internal(topic) for topic in self.streams.topology.source_topics()]
            self.consumer.subscribe(topics, listener=self)
            last_commit = time.monotonic()
            while self.running:
                records = self.consumer.poll(self.config.poll_ms / 1000)
                for partition, batch in records.by_partition().items():
                    if partition in self.task_of:
                        buffer = self.buffers.setdefault(partition, deque())
                        buffer.extend(batch)
                        if len(buffer) > BUFFERED_RECORDS_PER_PARTITION:
                            self.consumer.pause(partition)
                self._process_buffered()
                paused = self.consumer.paused()
                if paused:
                    self.consumer.resume(*(tp for tp in paused
                                           if len(self.buffers.get(tp, ())) <= BUFFERED_RECORDS_PER_PARTITION))
                if time.monotonic() - last_commit >= self.config.commit_interval_ms / 1000:
                    self.commit()
                    last_commit = time.monotonic()
                if self.probe_at is not None and time.monotonic() >= self.probe_at:
                    self.probe_at = None
                    self.consumer.enforce_rebalance("probing rebalance: the warm-up replicas may have caught up")
            self.commit()
            for task in self.tasks.values():
                self._close_task(task, clean=True)
            self.tasks.clear()
            self.task_of.clear()
        except BaseException as caught:  # the thread's end: reported to KafkaStreams, which goes to ERROR
            error = caught
        finally:
            for client in (self.consumer, self.restore_consumer):
                client.close()
            self.producer.close()
            self.streams._thread_finished(self, error)

    def _process_buffered(self) -> None:
        """Process each task's buffered records in timestamp order across its partitions, as Kafka Streams'
        PartitionGroup does: the record with the smallest timestamp among the partitions' heads goes first. While a
        partition of the task has nothing buffered but may have more to fetch (its position is behind the high
        watermark the last fetch reported), the task waits, up to TASK_IDLE_S, so that a table's older records
        are applied before the stream records they should join with."""
        for task in self.tasks.values():
            if len(task.partitions) == 1:  # one partition: its records in offset order, nothing to wait for
                (partition,) = task.partitions
                buffer = self.buffers.get(partition)
                if buffer:
                    self._begin_transaction()
                    while buffer:
                        record = buffer.popleft()
                        task.process(record)
                    self.consumed[partition] = record.offset + 1
                continue
            while True:
                heads = {tp: self.buffers[tp][0] for tp in task.partitions if self.buffers.get(tp)}
                if not heads:
                    self.waiting_since.pop(task.id, None)
                    break
                lagging = [tp for tp in task.partitions if tp not in heads and not self._caught_up(tp)]
                if lagging:
                    since = self.waiting_since.setdefault(task.id, time.monotonic())
                    if time.monotonic() - since < TASK_IDLE_S:
                        break
                else:
                    self.waiting_since.pop(task.id, None)
                self._begin_transaction()
                partition = min(heads, key=lambda tp: heads[tp].timestamp)
                record = self.buffers[partition].popleft()
                task.process(record)
                self.consumed[partition] = record.offset + 1

    def _begin_transaction(self) -> None:
        """Under exactly_once_v2, every output, changelog write and offset from the first record processed after a
        commit to the next commit is one transaction."""
        if self.config.exactly_once and not self.in_transaction:
            self.producer.begin_transaction()
            self.in_transaction = True

    def _caught_up(self, partition: TopicPartition) -> bool:
        highwater = self.consumer.highwater(partition)
        return highwater is not None and self.consumer.position(partition) >= highwater

    def commit(self) -> None:
        """Flush the record cache (its updates go downstream, to the changelogs and the local stores), make
        everything processed so far durable, and commit the consumed offsets (in the transaction under
        exactly_once_v2)."""
        for task in self.tasks.values():
            task.flush_cache()
        offsets = {partition: OffsetAndMetadata(offset) for partition, offset in self.consumed.items()
                   if partition in self.task_of}
        if self.config.exactly_once:
            if not self.in_transaction:
                return
            if offsets:
                self.producer.send_offsets_to_transaction(offsets, self.consumer.group_metadata())
            self.producer.commit_transaction()
            self.in_transaction = False
            for task in self.tasks.values():
                task.check_sends()
                task.changelog_last = {}
        else:
            self.producer.flush()
            for task in self.tasks.values():
                task.check_sends()
                task.write_checkpoint()
            if offsets:
                self.consumer.commit_sync(offsets)
        self.consumed = {partition: offset for partition, offset in self.consumed.items()
                         if partition in self.task_of and partition not in offsets}

    def _close_task(self, task: StreamTask, clean: bool) -> None:
        self.dropped_records += task.dropped_records
        if clean:
            task.write_checkpoint() if not self.config.exactly_once else self._checkpoint_after_commit(task)
        task.close()

    def _checkpoint_after_commit(self, task: StreamTask) -> None:
        """Under exactly_once_v2 a checkpoint is written only on a clean close, when the last transaction has
        committed: the changelog's end is then what the stores hold."""
        ends = self.restore_consumer.end_offsets(list(task.changelogs.values())) if task.changelogs else {}
        task.checkpoint.write(ends)
