"""StreamTask: one sub-topology running over one partition of its source topics (task "<subtopology>_<partition>").

The task instantiates the sub-topology's processors and stores, restores the stores from their changelogs, and
processes records one at a time, depth first: a record runs through every downstream processor before the next one
starts. Sinks serialize and hand records to the thread's producer (internal topics get the application id prefix).

Failures go to the task's exception handlers (kfk.streams.errors) where Kafka Streams sends them: a source's serde
error to the deserialization handler; an exception raised in a processor node (its own code, or a sink right below
it) to the processing handler, at the innermost node, so a node that forwards several records loses only the failed
one; a sink's serializer error and a failed send to the production handler. A record dropped on RESUME is counted in
``dropped_records`` (Kafka's dropped-records task metric). The dead letter records a handler answers with are
written before the task resumes or fails, as a sink's records are (their failures reach the production handler).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from kfk.client import ConsumerRecord, FutureRecordMetadata, Producer
from kfk.common.structs import TopicPartition
from kfk.errors import KafkaError
from kfk.streams.cache import ThreadCache
from kfk.streams.errors import (ErrorHandlerContext, ExceptionHandlers, FailedProcessingException, ProducerRecord,
                                Response, Result, SerializationExceptionOrigin, StreamsException, handler_response)
from kfk.streams.processor import Processor, ProcessorContext, Record, RecordMetadata, TaskId
from kfk.streams.serdes import Serde
from kfk.streams.state import (ChangelogWriter, Checkpoint, KeyValueStore, OuterJoinStore, SessionStore,
                               SuppressionBuffer, WindowStore)
from kfk.streams.windows import SessionWindows, SlidingWindows, TimeWindows
from kfk.streams.topology import CHANGELOG_TOPIC_SUFFIX, Node, NodeKind, SubTopology, Topology

__all__ = ["StreamTask", "StandbyTask"]

log = logging.getLogger("kfk.streams")


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
                 global_stores: dict[str, KeyValueStore] | None = None,
                 exception_handlers: ExceptionHandlers | None = None, cache: ThreadCache | None = None) -> None:
        """``in_memory``: keep every store in memory (the TopologyTestDriver's), whatever the topology asks;
        ``global_stores``: the instance's global stores, which any processor may read; ``exception_handlers``:
        Kafka's defaults (fail on every error) unless given; ``cache``: the thread's record cache, which the
        stores the topology caches use (None: no store is cached)."""
        self.id = task_id
        self.handlers = exception_handlers or ExceptionHandlers.defaults()
        #: Records dropped by a handler's RESUME (Kafka's dropped-records-total).
        self.dropped_records = 0
        #: The source record being processed, as read, flattened (topic, partition, offset, timestamp, raw key, raw
        #: value, headers): the handlers' context. Flat and of atomic values, so that the pending sends holding it
        #: until the commit cost the garbage collector nothing (holding the ConsumerRecord made the record path 40 %
        #: slower).
        self.source: tuple | None = None
        #: The partition counts of the topics a sink with a partitioner writes to.
        self.partition_counts: dict[str, int] = {}
        #: A failed send its handler answered FAIL for: raised by the next send or commit, as Kafka's collector.
        self.send_exception: StreamsException | None = None
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
        #: The sends since the last commit, and beside each what its failure's handler needs (a flat tuple; None for
        #: a changelog write).
        self.pending: list[FutureRecordMetadata] = []
        self.pending_sends: list[tuple | None] = []
        #: The last record written to each changelog partition since the last commit.
        self.changelog_last: dict[TopicPartition, FutureRecordMetadata] = {}
        self.stores, self.changelogs = build_stores(task_id, subtopology, topology, application_id, key_serde,
                                                    value_serde, self.directory, in_memory, self._changelog_writer)
        #: The stores in the record cache, in the topology's order (the order a commit flushes them in).
        self.cached_stores = []
        if cache is not None:
            for name, store in self.stores.items():
                if topology.store_builders[name].caching and isinstance(store, KeyValueStore):
                    store.enable_cache(cache, f"{task_id}-{name}", self)
                    self.cached_stores.append(store)
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
            self.pending_sends.append(None)
            self.changelog_last[partition] = future
        return write

    def process(self, record: ConsumerRecord) -> None:
        source = self.sources[record.topic]
        key_serde = source.key_serde or self.default_key_serde
        value_serde = source.value_serde or self.default_value_serde
        self.current = RecordMetadata(record.topic, record.partition, record.offset)
        headers = tuple(record.headers)
        self.source = (record.topic, record.partition, record.offset, record.timestamp, record.key, record.value,
                       headers)
        try:
            streamed = Record(key_serde.deserialize(record.key), value_serde.deserialize(record.value),
                              record.timestamp, headers)
        except Exception as error:  # noqa: BLE001 - any serde error is the handler's to judge
            self._deserialization_failed(source.name, record, error)
            return
        for child in source.children:
            self.deliver(child, streamed)

    def _context(self, node_name: str, source: tuple | None = None) -> ErrorHandlerContext:
        """The handlers' context at `node_name` for the source record being processed (or `source`, one saved)."""
        source = source or self.source
        if source is None:  # not within a record's processing (Kafka: a punctuation's context has no record either)
            return ErrorHandlerContext("", -1, -1, (), node_name, self.id, -1, None, None)
        topic, partition, offset, timestamp, key, value, headers = source
        return ErrorHandlerContext(topic, partition, offset, headers, node_name, self.id, timestamp, key, value)

    def _deserialization_failed(self, node_name: str, record: ConsumerRecord, error: Exception) -> None:
        try:
            response = handler_response(self.handlers.deserialization.handle_error(self._context(node_name), record,
                                                                                   error),
                                        "DeserializationExceptionResponse")
        except Exception as fatal:  # noqa: BLE001 - the handler's own failure stops the thread
            raise StreamsException("Fatal user code error in deserialization error callback") from fatal
        self._send_dead_letter_records(node_name, response, self.source)
        if response.result is Result.FAIL:
            raise StreamsException(
                "Deserialization exception handler is set to fail upon a deserialization error. If you would rather "
                "have the streaming pipeline continue after a deserialization error, please set the "
                "deserialization.exception.handler appropriately.") from error
        log.warning("Skipping record due to deserialization error. topic=[%s] partition=[%s] offset=[%s]",
                    record.topic, record.partition, record.offset)
        self.dropped_records += 1

    def deliver(self, name: str, record: Record) -> None:
        node = self.nodes[name]
        if node.kind is NodeKind.SINK:
            self._send(node, record)
            return
        try:
            self.processors[name].process(record)
        except FailedProcessingException:
            raise  # handled (FAIL) at the node below
        except Exception as error:  # noqa: BLE001 - user code's errors are the processing handler's
            if isinstance(error, KafkaError) and error.fatal:
                raise
            self._processing_failed(name, record, error)

    def _processing_failed(self, name: str, record: Record, error: Exception) -> None:
        try:
            response = handler_response(self.handlers.processing.handle_error(self._context(name), record, error),
                                        "ProcessingExceptionHandler")
        except Exception as fatal:  # noqa: BLE001
            log.error("Processing error callback failed after processing error for record: %s", self._context(name),
                      exc_info=error)
            raise FailedProcessingException(name, fatal, "Fatal user code error in processing error callback") \
                from fatal
        self._send_dead_letter_records(name, response, self.source)
        if response.result is Result.FAIL:
            log.error("Processing exception handler is set to fail upon a processing error. If you would rather have "
                      "the streaming pipeline continue after a processing error, please set the "
                      "processing.exception.handler appropriately.")
            current = self.current
            raise FailedProcessingException(name, error, (
                f"Exception caught in process. taskId={self.id}, processor={name}, "
                f"topic={current.topic if current else None}, partition={current.partition if current else -1}, "
                f"offset={current.offset if current else -1}"))
        self.dropped_records += 1

    def _send(self, node: Node, record: Record) -> None:
        if self.send_exception is not None:  # Kafka's collector: an earlier send's failure stops the next one
            error, self.send_exception = self.send_exception, None
            raise error
        topic = node.topic if node.topic is not None else node.extractor(record.key, record.value, record)
        if topic in self.topology.repartition_topics:
            topic = self.internal_topic(topic)
        key_serde = node.key_serde or self.default_key_serde
        value_serde = node.value_serde or self.default_value_serde
        partition = None if node.partitioner is None else node.partitioner(
            topic, record.key, record.value, self._partition_count(topic))
        origin = SerializationExceptionOrigin.KEY
        try:
            key = key_serde.serialize_for(topic, record.key)
            origin = SerializationExceptionOrigin.VALUE
            value = value_serde.serialize_for(topic, record.value)
        except Exception as error:  # noqa: BLE001 - a serializer's error is the production handler's
            self._serialization_failed(node.name, ProducerRecord(topic, partition, record.timestamp, record.key,
                                                                 record.value, record.headers), error, origin)
            return
        self._produce((node.name, topic, partition, record.timestamp, key, value, record.headers, self.source))

    def _partition_count(self, topic: str) -> int:
        """`topic`'s partition count, as a sink's partitioner is told it (asked of the producer once)."""
        count = self.partition_counts.get(topic)
        if count is None:
            count = self.partition_counts[topic] = len(self.producer.partitions_for(topic))
        return count

    def _produce(self, produced: tuple) -> None:
        """Hand a serialized record (a sink's or a dead letter record: sink node name, topic, partition, timestamp,
        key, value, headers and the source record) to the producer; its failure is the production handler's."""
        _, topic, partition, timestamp, key, value, headers, _ = produced
        try:
            future = self.producer.send(topic, value, key, partition=partition, timestamp_ms=timestamp,
                                        headers=list(headers) or None)
        except KafkaError as error:  # refused before it was queued (too large...): as Kafka's send callback
            if error.fatal:
                raise
            self._send_failed(produced, error)
            return
        self.pending.append(future)
        self.pending_sends.append(produced)

    def _send_dead_letter_records(self, node_name: str, response: Response, source: tuple | None) -> None:
        """Write the dead letter records a handler answered with for a failure of `source`'s processing, as Kafka's
        RecordCollector does: like a sink's records, though an earlier send's failure does not stop them."""
        for record in response.dead_letter_queue_records:
            self._produce((node_name, record.topic, record.partition, record.timestamp, record.key, record.value,
                           record.headers, source))

    def _serialization_failed(self, node_name: str, record: ProducerRecord, error: Exception,
                              origin: SerializationExceptionOrigin) -> None:
        handler = self.handlers.production
        handle = getattr(handler, "handle_serialization_error", None)
        try:
            answer = Result.FAIL if handle is None else handle(self._context(node_name), record, error, origin)
            response = handler_response(answer, "ProductionExceptionHandler")
        except Exception as fatal:  # noqa: BLE001
            raise FailedProcessingException(node_name, fatal, "Fatal user code error in production error callback") \
                from fatal
        self._send_dead_letter_records(node_name, response, self.source)
        if response.result is not Result.RESUME:
            raise StreamsException(f"Unable to serialize record. ProducerRecord(topic=[{record.topic}], "
                                   f"partition=[{record.partition}], timestamp=[{record.timestamp}]") from error
        log.warning("Unable to serialize record, continue processing. ProducerRecord(topic=[%s], partition=[%s], "
                    "timestamp=[%s])", record.topic, record.partition, record.timestamp)
        self.dropped_records += 1

    def _send_failed(self, produced: tuple, error: Exception) -> None:
        """A sink's record the producer could not write: the production handler decides (RETRY, which Kafka answers
        by re-initializing the task, stops the thread here: the producer already retried what it could)."""
        node_name, topic, partition, timestamp, key, value, headers, source = produced
        # Kafka Streams drops the source record's raw key and value from the context once a sink has serialized its
        # record: a send's failure sees none (a dead letter record of Kafka's handlers has a null key and value)
        context = replace(self._context(node_name, source), source_raw_key=None, source_raw_value=None)
        message = f"Error encountered sending record to topic {topic} for task {self.id} due to:\n{error!r}"
        try:
            response = handler_response(self.handlers.production.handle_error(
                context, ProducerRecord(topic, partition, timestamp, key, value, headers), error),
                "ProductionExceptionHandler")
        except Exception as fatal:  # noqa: BLE001
            log.error("Production error callback failed after production error for record %s", context,
                      exc_info=error)
            self.send_exception = FailedProcessingException(node_name, fatal,
                                                            "Fatal user code error in production error callback")
            return
        self._send_dead_letter_records(node_name, response, source)
        result = response.result
        if result is Result.RESUME:
            log.warning("%s\nException handler choose to CONTINUE processing in spite of this error but written "
                        "offsets would not be recorded.", message, exc_info=error)
            self.dropped_records += 1
            return
        if result is Result.RETRY and not getattr(error, "retriable", False):
            log.warning("ProductionExceptionHandler returned RETRY for a non-retriable exception. Will treat it as "
                        "FAIL.")
        failure = StreamsException(f"{message}\nException handler choose to FAIL the processing, no more records "
                                   "would be sent.")
        failure.__cause__ = error
        self.send_exception = failure

    def flush_cache(self) -> bool:
        """Flush the cached stores (a commit's first step, before the producer's flush): their dirty entries go to
        the local stores, the changelogs and downstream. Whether anything was dirty."""
        flushed = False
        for store in self.cached_stores:
            if store.cache.dirty:
                flushed = True
                store.cache.flush()
        return flushed

    def check_sends(self) -> None:
        """After the producer's flush: hand each failed send to the production handler, then raise a failure it
        answered FAIL for (the records since the last commit would be lost otherwise); a failed changelog write
        is raised as it is. Dead letter records the handler answers with here are checked at the next commit."""
        pending, sends, self.pending, self.pending_sends = self.pending, self.pending_sends, [], []
        for future, produced in zip(pending, sends):
            try:
                future.result(0)
            except Exception as error:  # noqa: BLE001
                if produced is None or (isinstance(error, KafkaError) and error.fatal):
                    raise
                self._send_failed(produced, error)
        if self.send_exception is not None:
            error, self.send_exception = self.send_exception, None
            raise error

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


class StandbyTask:
    """A standby replica of a task on another instance than the active one: the task's stores, kept up to date
    from their changelogs and never processing. When the task moves here it restores only what the standby had not
    read yet: closing the standby writes the checkpoint the active task starts from (for persistent stores; an
    in-memory store is rebuilt from the changelog's start, as Kafka's)."""

    def __init__(self, task_id: TaskId, subtopology: SubTopology, topology: Topology, *, application_id: str,
                 key_serde: Serde, value_serde: Serde, state_dir: Path) -> None:
        self.id = task_id
        self.directory = state_dir / str(task_id)
        self.checkpoint = Checkpoint(self.directory / ".checkpoint")
        self.stores, self.changelogs = build_stores(task_id, subtopology, topology, application_id, key_serde,
                                                    value_serde, self.directory, False, lambda partition: None)
        self.store_of = {partition: self.stores[name] for name, partition in self.changelogs.items()}
        #: Where reading each changelog goes on (None: from its start).
        self.positions: dict[TopicPartition, int | None] = restore_offsets(self, exactly_once=False)

    def apply(self, partition: TopicPartition, records: list[ConsumerRecord]) -> None:
        """Apply a fetched batch of one changelog partition, in one write."""
        self.store_of[partition].restore_batch([(record.key, record.value, record.timestamp) for record in records])
        self.positions[partition] = records[-1].offset + 1

    def write_checkpoint(self) -> None:
        """Flush the stores (the applied batches skipped RocksDB's write-ahead log), then checkpoint them."""
        for store in self.stores.values():
            store.flush()
        self.checkpoint.write({partition: offset for partition, offset in self.positions.items()
                               if offset is not None and self.store_of[partition].persistent})

    def close(self) -> None:
        self.write_checkpoint()
        for store in self.stores.values():
            store.close()


def build_stores(task_id: TaskId, subtopology: SubTopology, topology: Topology, application_id: str,
                 key_serde: Serde, value_serde: Serde, directory: Path, in_memory: bool,
                 changelog_writer: Callable[[TopicPartition], ChangelogWriter | None]
                 ) -> tuple[dict[str, Any], dict[str, TopicPartition]]:
    """A task's stores (under ``directory``; all in memory when ``in_memory``) and the changelog partition of each
    logged one. ``changelog_writer(partition)`` gives what a store's writes go to: the producer for an active task,
    nothing for a standby (it only applies what it reads from the changelog)."""
    stores: dict[str, Any] = {}
    changelogs: dict[str, TopicPartition] = {}
    for store_name in subtopology.stores:
        builder = topology.store_builders[store_name]
        changelog = None
        changelog_topic = f"{application_id}-{store_name}{CHANGELOG_TOPIC_SUFFIX}"
        if builder.logging:
            partition = TopicPartition(changelog_topic, task_id.partition)
            changelogs[store_name] = partition
            changelog = changelog_writer(partition)
        path = directory / "rocksdb" / store_name if builder.persistent and not in_memory else None
        store_keys = (builder.key_serde or key_serde).for_topic(changelog_topic)
        store_values = (builder.value_serde or value_serde).for_topic(changelog_topic)
        if builder.suppression:
            store: Any = SuppressionBuffer(store_name, store_keys, store_values, changelog,
                                           sessions=builder.suppression == "sessions")
        elif builder.outer_join:
            other_values = (builder.other_value_serde or value_serde).for_topic(changelog_topic)
            store = OuterJoinStore(store_name, store_keys, store_values, other_values, path, changelog)
        elif isinstance(builder.windows, SessionWindows):
            store = SessionStore(store_name, store_keys, store_values, path, changelog, builder.windows.retention_ms())
        elif builder.windows is not None:
            store = WindowStore(store_name, store_keys, store_values, path, changelog)
            if isinstance(builder.windows, (SlidingWindows, TimeWindows)):
                store.retention_ms = builder.windows.retention_ms()
        else:
            store = KeyValueStore(store_name, store_keys, store_values, path, changelog)
        stores[store_name] = store
    return stores, changelogs


def restore_offsets(task: StreamTask | StandbyTask, exactly_once: bool) -> dict[TopicPartition, int | None]:
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


def restore_stores(tasks: list[StreamTask], exactly_once: bool, restore_consumer: Any,
                   timeout_s: float) -> dict[TaskId, int]:
    """Read each changelog partition of ``tasks`` from its start offset to its end into its store, all partitions
    at once (as Kafka Streams' state updater restores every restoring task together: each fetch brings data of all
    of them), a fetched batch of a partition in one write; flush the stores, then return each task's records
    restored."""
    store_of: dict[TopicPartition, Any] = {}
    task_of: dict[TopicPartition, TaskId] = {}
    starts: dict[TopicPartition, int | None] = {}
    for task in tasks:
        starts.update(restore_offsets(task, exactly_once))
        for store, partition in task.changelogs.items():
            store_of[partition] = task.stores[store]
            task_of[partition] = task.id
    restored = dict.fromkeys((task.id for task in tasks), 0)
    if not starts:
        return restored
    ends = restore_consumer.end_offsets(list(starts))
    pending = {partition for partition in starts if ends[partition] > (starts[partition] or 0)}
    if not pending:
        return restored
    restore_consumer.assign(pending)
    for partition in pending:
        if starts[partition] is None:
            restore_consumer.seek_to_beginning(partition)
        else:
            restore_consumer.seek(partition, starts[partition])
    deadline = time.monotonic() + timeout_s
    while pending:
        if time.monotonic() > deadline:
            raise TimeoutError(f"restoring {sorted(map(str, pending))} did not finish")
        for partition, records in restore_consumer.poll(0.2).by_partition().items():
            store_of[partition].restore_batch([(record.key, record.value, record.timestamp) for record in records])
            restored[task_of[partition]] += len(records)
        for partition in list(pending):
            if restore_consumer.position(partition) >= ends[partition]:
                pending.discard(partition)
    restore_consumer.assign([])
    for partition, store in store_of.items():
        store.flush()
    return restored
