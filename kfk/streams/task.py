"""StreamTask: one sub-topology running over one partition of its source topics (task "<subtopology>_<partition>").

The task instantiates the sub-topology's processors and stores, restores the stores from their changelogs, and
processes records one at a time, depth first: a record runs through every downstream processor before the next one
starts. Sinks serialize and hand records to the thread's producer (internal topics get the application id prefix).
"""

from __future__ import annotations

from collections.abc import Callable
import time
from pathlib import Path
from typing import Any

from kfk.client import ConsumerRecord, FutureRecordMetadata, Producer
from kfk.common.structs import TopicPartition
from kfk.streams.processor import Processor, ProcessorContext, Record, RecordMetadata, TaskId
from kfk.streams.serdes import Serde
from kfk.streams.state import (ChangelogWriter, Checkpoint, KeyValueStore, OuterJoinStore, SessionStore,
                               SuppressionBuffer, WindowStore)
from kfk.streams.windows import SessionWindows, SlidingWindows
from kfk.streams.topology import CHANGELOG_TOPIC_SUFFIX, Node, NodeKind, SubTopology, Topology

__all__ = ["StreamTask"]


class _NodeContext(ProcessorContext):
    def __init__(self, task: StreamTask, node: Node) -> None:
        self.task = task
        self.node = node
        self.task_id = task.id
        self.application_id = task.application_id

    def forward(self, record: Record, child_name: str | None = None) -> None:
        if child_name is not None:
            self.task.deliver(child_name, record)
            return
        for child in self.node.children:
            self.task.deliver(child, record)

    def get_state_store(self, name: str) -> KeyValueStore:
        if name in self.task.global_stores:
            return self.task.global_stores[name]
        if name not in self.node.stores:
            raise ValueError(f"Processor {self.node.name} has no access to StateStore {name} as the store is not "
                             "connected to the processor.")
        return self.task.stores[name]

    def record_metadata(self) -> RecordMetadata | None:
        return self.task.current

    def key_serde(self) -> Serde:
        return self.task.default_key_serde

    def value_serde(self) -> Serde:
        return self.task.default_value_serde


class StreamTask:
    def __init__(self, task_id: TaskId, subtopology: SubTopology, topology: Topology, *, application_id: str,
                 producer: Producer, key_serde: Serde, value_serde: Serde, state_dir: Path,
                 internal_topic: Callable[[str], str], in_memory: bool = False,
                 global_stores: dict[str, KeyValueStore] | None = None) -> None:
        """``in_memory``: keep every store in memory (the TopologyTestDriver's), whatever the topology asks;
        ``global_stores``: the instance's global stores, which any processor may read."""
        self.id = task_id
        self.global_stores = global_stores or {}
        self.application_id = application_id
        self.topology = topology
        self.producer = producer
        self.default_key_serde = key_serde
        self.default_value_serde = value_serde
        self.internal_topic = internal_topic
        self.partitions = {TopicPartition(internal_topic(topic), task_id.partition)
                           for topic in subtopology.source_topics}
        self.nodes = {name: topology.nodes[name] for name in subtopology.nodes}
        self.sources = {internal_topic(topic): node for node in self.nodes.values() for topic in node.topics}
        self.directory = state_dir / str(task_id)
        self.checkpoint = Checkpoint(self.directory / ".checkpoint")
        self.current: RecordMetadata | None = None
        self.pending: list[FutureRecordMetadata] = []
        #: The last record written to each changelog partition since the last commit.
        self.changelog_last: dict[TopicPartition, FutureRecordMetadata] = {}
        self.stores: dict[str, KeyValueStore] = {}
        self.changelogs: dict[str, TopicPartition] = {}
        for store_name in subtopology.stores:
            builder = topology.store_builders[store_name]
            changelog = None
            changelog_topic = f"{application_id}-{store_name}{CHANGELOG_TOPIC_SUFFIX}"
            if builder.logging:
                partition = TopicPartition(changelog_topic, task_id.partition)
                self.changelogs[store_name] = partition
                changelog = self._changelog_writer(partition)
            path = self.directory / "rocksdb" / store_name if builder.persistent and not in_memory else None
            store_keys = (builder.key_serde or key_serde).for_topic(changelog_topic)
            store_values = (builder.value_serde or value_serde).for_topic(changelog_topic)
            if builder.suppression:
                store: Any = SuppressionBuffer(store_name, store_keys, store_values, changelog,
                                               sessions=builder.suppression == "sessions")
            elif builder.outer_join:
                other_values = (builder.other_value_serde or value_serde).for_topic(changelog_topic)
                store = OuterJoinStore(store_name, store_keys, store_values, other_values, path, changelog)
            elif isinstance(builder.windows, SessionWindows):
                store = SessionStore(store_name, store_keys, store_values, path, changelog,
                                     builder.windows.retention_ms())
            elif builder.windows is not None:
                store = WindowStore(store_name, store_keys, store_values, path, changelog)
                if isinstance(builder.windows, SlidingWindows):
                    store.retention_ms = builder.windows.retention_ms()
            else:
                store = KeyValueStore(store_name, store_keys, store_values, path, changelog)
            self.stores[store_name] = store
        self.processors: dict[str, Processor] = {}
        for node in self.nodes.values():
            if node.kind is NodeKind.PROCESSOR:
                processor = node.supplier()
                processor.init(_NodeContext(self, node))
                self.processors[node.name] = processor

    def _changelog_writer(self, partition: TopicPartition) -> ChangelogWriter:
        def write(key: bytes, value: bytes | None, timestamp: int,
                  headers: list[tuple[str, bytes]] | None = None) -> None:
            future = self.producer.send(partition.topic, value, key, partition=partition.partition,
                                        timestamp_ms=timestamp, headers=headers)
            self.pending.append(future)
            self.changelog_last[partition] = future
        return write

    def process(self, record: ConsumerRecord) -> None:
        source = self.sources[record.topic]
        key_serde = source.key_serde or self.default_key_serde
        value_serde = source.value_serde or self.default_value_serde
        self.current = RecordMetadata(record.topic, record.partition, record.offset)
        streamed = Record(key_serde.deserialize(record.key), value_serde.deserialize(record.value), record.timestamp,
                          tuple(record.headers))
        for child in source.children:
            self.deliver(child, streamed)

    def deliver(self, name: str, record: Record) -> None:
        node = self.nodes[name]
        if node.kind is NodeKind.SINK:
            self._send(node, record)
        else:
            self.processors[name].process(record)

    def _send(self, node: Node, record: Record) -> None:
        topic = node.topic if node.topic is not None else node.extractor(record.key, record.value, record)
        if topic in self.topology.repartition_topics:
            topic = self.internal_topic(topic)
        key_serde = node.key_serde or self.default_key_serde
        value_serde = node.value_serde or self.default_value_serde
        partition = None if node.partitioner is None else node.partitioner(record.key, record.value)
        self.pending.append(self.producer.send(topic, value_serde.serialize_for(topic, record.value),
                                               key_serde.serialize_for(topic, record.key),
                                               partition=partition, timestamp_ms=record.timestamp,
                                               headers=list(record.headers) or None))

    def check_sends(self) -> None:
        """After the producer's flush: raise the first failed send (the records since the last commit would be lost
        otherwise)."""
        pending, self.pending = self.pending, []
        for future in pending:
            future.result(0)

    def write_checkpoint(self) -> None:
        """Record the changelog offsets the stores now hold (after check_sends: every write is acknowledged)."""
        offsets = self.checkpoint.read()
        for partition, future in self.changelog_last.items():
            offsets[partition] = future.result(0).offset + 1
        self.changelog_last = {}
        self.checkpoint.write({partition: offsets[partition] for partition in self.changelogs.values()
                               if partition in offsets})

    def close(self) -> None:
        for processor in self.processors.values():
            processor.close()
        for store in self.stores.values():
            store.close()


def restore_offsets(task: StreamTask, exactly_once: bool) -> dict[TopicPartition, int | None]:
    """Where each changelog's restoration starts: the checkpointed offset, or None (from the beginning, after
    wiping the local store: without a checkpoint its contents are unknown)."""
    checkpointed = task.checkpoint.read()
    starts: dict[TopicPartition, int | None] = {}
    for store_name, partition in task.changelogs.items():
        store = task.stores[store_name]
        offset = checkpointed.get(partition) if store.persistent else None
        if offset is None:
            store.wipe()
        starts[partition] = offset
    if exactly_once:
        task.checkpoint.delete()
    return starts


def restore_stores(task: StreamTask, exactly_once: bool, restore_consumer: Any, timeout_s: float) -> int:
    """Read each changelog partition from its start offset to its end into the store; returns records restored."""
    starts = restore_offsets(task, exactly_once)
    if not starts:
        return 0
    by_partition = {partition: task.stores[store] for store, partition in task.changelogs.items()}
    ends = restore_consumer.end_offsets(list(starts))
    pending = {partition for partition in starts if ends[partition] > (starts[partition] or 0)}
    if not pending:
        return 0
    restore_consumer.assign(pending)
    for partition in pending:
        if starts[partition] is None:
            restore_consumer.seek_to_beginning(partition)
        else:
            restore_consumer.seek(partition, starts[partition])
    restored = 0
    deadline = time.monotonic() + timeout_s
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"task {task.id}: restoring {sorted(map(str, pending))} did not finish")
        for record in restore_consumer.poll(0.2):
            by_partition[record.topic_partition].restore(record.key, record.value, record.timestamp)
            restored += 1
        for partition in list(pending):
            if restore_consumer.position(partition) >= ends[partition]:
                pending.discard(partition)
    restore_consumer.assign([])
    return restored
