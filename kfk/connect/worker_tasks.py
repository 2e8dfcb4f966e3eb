"""The threads that run tasks (Kafka's WorkerSourceTask and WorkerSinkTask).

A source task thread polls the task, transforms and converts each record and produces it; every
`offset.flush.interval.ms` it waits for the producer to acknowledge what was sent, stores the latest source offset
per source partition and calls the task's commit() (with exactly.once.source.support=enabled, records and offsets
commit in one transaction instead: ExactlyOnce). A sink task thread consumes (group `connect-<connector>`),
converts and transforms, calls put(), and commits what pre_commit() returns at the same interval. A task that
raises is FAILED with its traceback, as Kafka reports it in status.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass
from typing import Any, Mapping

from kfk.client import Consumer, FutureRecordMetadata, OffsetAndMetadata, Producer, TopicPartition
from kfk.client.structs import ConsumerRecord
from kfk.connect.connector import SinkTask, SinkTaskContext, SourceTask, SourceTaskContext, frozen_partition
from kfk.connect.converters import Converter, HeaderConverter
from kfk.connect.error_handling import (
    HEADER_CONVERTER,
    KAFKA_PRODUCE,
    KEY_CONVERTER,
    TRANSFORMATION,
    VALUE_CONVERTER,
    ErrorHandler,
    Skipped,
)
from kfk.connect.errors import RetriableException
from kfk.connect.offsets import OffsetStore, offset_key, offset_value
from kfk.connect.records import Headers, SinkRecord, SourceRecord
from kfk.connect.transforms.base import TransformationChain
from kfk.errors import KafkaTimeoutError

log = logging.getLogger("kfk.connect.worker")

TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


class TaskStatus:
    """A task's or connector's state as status shows it (UNASSIGNED, RUNNING, PAUSED, FAILED, ...)."""

    def __init__(self, state: str = "UNASSIGNED") -> None:
        self.state = state
        self.trace: str | None = None

    def failed(self, error: BaseException) -> None:
        self.state = "FAILED"
        self.trace = "".join(traceback.format_exception(error))


class WorkerTask:
    """One task's thread: start, pause/resume, stop; `status` is what the REST API reports."""

    def __init__(self, connector: str, task_id: int, task: Any, task_config: Mapping[str, str],
                 worker_config: Mapping[str, str], key_converter: Converter, value_converter: Converter,
                 header_converter: HeaderConverter, transformations: TransformationChain,
                 error_handler: ErrorHandler) -> None:
        self.connector, self.task_id, self.task = connector, task_id, task
        self.task_config = dict(task_config)
        self.worker_config = worker_config
        self.key_converter, self.value_converter = key_converter, value_converter
        self.header_converter = header_converter
        self.transformations = transformations
        self.errors = error_handler
        self.status = TaskStatus()
        self.flush_interval = int(worker_config.get("offset.flush.interval.ms", "60000")) / 1000
        self.offset_flush_timeout_s = int(worker_config.get("offset.flush.timeout.ms", "5000")) / 1000
        self.stopping = threading.Event()
        self.task_stopped = False
        self.resumed = threading.Event()
        self.resumed.set()
        self.thread = threading.Thread(target=self._run, name=f"task-thread-{connector}-{task_id}", daemon=True)

    def client_config(self, prefix: str) -> dict[str, Any]:
        """The worker's bootstrap.servers and security keys, overridden by `producer.`/`consumer.` keys."""
        config = {key: value for key, value in self.worker_config.items()
                  if key == "bootstrap.servers" or key.startswith(("security.", "sasl.", "ssl."))}
        config.update({key[len(prefix):]: value for key, value in self.worker_config.items()
                       if key.startswith(prefix)})
        return config

    def start(self, paused: bool = False) -> None:
        if paused:
            self.pause()
        self.thread.start()

    def pause(self) -> None:
        self.resumed.clear()
        if self.status.state == "RUNNING":
            self.status.state = "PAUSED"

    def resume(self) -> None:
        self.resumed.set()
        if self.status.state == "PAUSED":
            self.status.state = "RUNNING"

    def stop(self, timeout: float = 5.0) -> None:
        self.stopping.set()
        self.resumed.set()
        if isinstance(self.task, SourceTask):
            self.stop_task()  # a source task is stopped from outside, which wakes a poll() that waits for data
        if self.thread.is_alive() and threading.current_thread() is not self.thread:
            self.thread.join(timeout)

    def stop_task(self) -> None:
        self.task_stopped = True
        try:
            self.task.stop()
        except Exception:
            log.exception("%s-%d failed to stop", self.connector, self.task_id)

    def _run(self) -> None:
        try:
            self.status.state = "RUNNING" if self.resumed.is_set() else "PAUSED"
            self.execute()
        except BaseException as error:  # a task's failure is its status, never the worker's crash
            if not self.stopping.is_set():
                log.error("%s-%d failed", self.connector, self.task_id, exc_info=error)
                self.status.failed(error)
        finally:
            self.close()

    def execute(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def headers_from_connect(self, topic: str, headers: Headers) -> list[tuple[str, bytes | None]]:
        return [(header.key, self.header_converter.from_connect_header(topic, header.key, header.schema,
                                                                       header.value)) for header in headers]


@dataclass(frozen=True)
class ExactlyOnce:
    """How a source task runs with exactly.once.source.support=enabled (KIP-618): a transactional producer of id
    ``<group.id>-<connector>-<task>`` (a restarted task's init_transactions fences the one it replaces, and aborts
    what that one left open), the records and their source offsets (written to `offsets_topic` by the same producer)
    committed in one transaction, each poll's records (transaction.boundary=poll) or every `interval_s`
    (transaction.boundary=interval)."""

    transactional_id: str
    offsets_topic: str
    interval_s: float | None = None


class WorkerSourceTask(WorkerTask):
    task: SourceTask

    def __init__(self, *args: Any, offset_store: OffsetStore, exactly_once: ExactlyOnce | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.offset_store = offset_store
        self.exactly_once = exactly_once
        #: Exactly once: each source partition's latest offset since the last commit (the transaction makes every
        #: record before it durable together).
        self.pending_offsets: dict[Any, tuple[Mapping[str, Any], Mapping[str, Any] | None]] = {}
        #: At least once: each source partition's records in the order they were sent, with their sends (None: not
        #: sent, a record filtered out or skipped), so that a commit stores the offset of the last record of an
        #: acknowledged prefix without waiting for the sends still in flight (Kafka's SubmittedRecords).
        self.submitted: dict[Any, deque[tuple[FutureRecordMetadata | None, Mapping[str, Any],
                                              Mapping[str, Any] | None]]] = {}
        self.producer: Producer | None = None
        self.send_error: BaseException | None = None
        self.in_transaction = False
        self.wants_commit_record = type(self.task).commit_record is not SourceTask.commit_record

    def execute(self) -> None:
        config = {"acks": "all", "linger.ms": 0, "max.in.flight.requests.per.connection": 1,
                  "client.id": f"connector-producer-{self.connector}-{self.task_id}",
                  **self.client_config("producer.")}
        if self.exactly_once is not None:
            config.update({"transactional.id": self.exactly_once.transactional_id, "enable.idempotence": True})
        self.producer = Producer(config)
        if self.exactly_once is not None:
            self.producer.init_transactions()
        self.task.initialize(SourceTaskContext(self.task_config, self.offset_store.reader(self.connector)))
        self.task.start(self.task_config)
        interval = self.flush_interval if self.exactly_once is None else self.exactly_once.interval_s
        next_flush = time.monotonic() + (interval or 0)
        while not self.stopping.is_set():
            if not self.resumed.is_set():
                self.resumed.wait(0.5)
                continue
            records = self.task.poll() or []
            if records and self.exactly_once is not None and not self.in_transaction:
                self.producer.begin_transaction()
                self.in_transaction = True
            for record in records:
                self.send(record)
            if self.send_error is not None:
                raise self.send_error
            if (interval is None and records) or (interval is not None and time.monotonic() >= next_flush):
                self.commit_offsets()
                next_flush = time.monotonic() + (interval or 0)

    def send(self, record: SourceRecord) -> None:
        future: FutureRecordMetadata | None = None
        transformed = self.errors.execute(lambda: self.transformations.apply(record), TRANSFORMATION,
                                          self.transformations, source=record)
        if transformed is not Skipped and transformed is not None:
            topic = transformed.topic
            key = self.errors.execute(lambda: self.key_converter.from_connect_data(
                topic, transformed.key_schema, transformed.key), KEY_CONVERTER, self.key_converter, source=record)
            value = Skipped if key is Skipped else self.errors.execute(
                lambda: self.value_converter.from_connect_data(topic, transformed.value_schema, transformed.value),
                VALUE_CONVERTER, self.value_converter, source=record)
            headers = Skipped if value is Skipped else self.errors.execute(
                lambda: self.headers_from_connect(topic, transformed.headers), HEADER_CONVERTER,
                self.header_converter, source=record)
            if headers is not Skipped:
                def acknowledged(metadata: Any, error: BaseException | None) -> None:
                    if error is not None:
                        if self.errors.execute(lambda: _raise(error), KAFKA_PRODUCE, self.producer) is not Skipped:
                            self.send_error = error
                    elif self.wants_commit_record:
                        self.task.commit_record(record, metadata)
                future = self.producer.send(topic, value, key, partition=transformed.kafka_partition,
                                            timestamp_ms=transformed.timestamp, headers=headers or None,
                                            callback=acknowledged)
        else:
            self.task.commit_record(record, None)
        if record.source_partition is not None:
            # serialized when committed: only the latest committable offset of each partition is ever written
            partition = frozen_partition(record.source_partition)
            if self.exactly_once is not None:
                self.pending_offsets[partition] = (record.source_partition, record.source_offset)
            else:
                self.submitted.setdefault(partition, deque()).append(
                    (future, record.source_partition, record.source_offset))

    def commit_offsets(self) -> None:
        """Kafka's offset commit: everything sent is acknowledged first, then the offsets are stored. Exactly once,
        the offsets go into the transaction, which then commits (or aborts, if a send failed)."""
        if self.exactly_once is not None:
            self._commit_transaction()
        else:
            if self.send_error is not None:
                raise self.send_error
            offsets = self._acknowledged_offsets()
            if offsets:
                self.offset_store.set_all(offsets)
        self.task.commit()

    def _acknowledged_offsets(self) -> dict[bytes, bytes | None]:
        """Each source partition's offset after its longest prefix of records Kafka acknowledged (or that were
        not sent), taken out of ``submitted``."""
        offsets: dict[bytes, bytes | None] = {}
        for partition, records in list(self.submitted.items()):
            last = None
            while records and (records[0][0] is None or records[0][0].done()):
                last = records.popleft()
            if last is not None:
                offsets[offset_key(self.connector, last[1])] = offset_value(last[2])
            if not records:
                del self.submitted[partition]
        return offsets

    def _take_offsets(self) -> dict[bytes, bytes | None]:
        pending, self.pending_offsets = self.pending_offsets, {}
        return {offset_key(self.connector, partition): offset_value(offset) for partition, offset in pending.values()}

    def _commit_transaction(self) -> None:
        if not self.in_transaction:
            if not self.pending_offsets:
                return
            self.producer.begin_transaction()  # offsets alone (every record of the poll was filtered out)
            self.in_transaction = True
        offsets = self._take_offsets()
        try:
            for key, value in offsets.items():
                self.producer.send(self.exactly_once.offsets_topic, value, key)
            self.producer.flush()
            if self.send_error is not None:
                raise self.send_error
            self.producer.commit_transaction()
        except BaseException:
            self.in_transaction = False
            self.producer.abort_transaction()
            raise
        self.in_transaction = False
        self.offset_store.remember(offsets)

    def close(self) -> None:
        try:
            if self.producer is not None and self.exactly_once is None:
                # what is in flight gets offset.flush.timeout.ms to be acknowledged, as in Kafka's final commit
                self.producer.flush(self.offset_flush_timeout_s)
        except KafkaTimeoutError:
            log.warning("%s-%d: records still unacknowledged after %.0f s; committing the offsets of those "
                        "acknowledged", self.connector, self.task_id, self.offset_flush_timeout_s)
        try:
            # even after a failure: what Kafka acknowledged is safe to record (Kafka's finalOffsetCommit does too)
            self.commit_offsets()
        except Exception:
            log.exception("%s-%d: final offset commit failed", self.connector, self.task_id)
        if self.producer is not None:
            self.producer.close(5)


def _raise(error: BaseException) -> None:
    raise error


class WorkerSinkTask(WorkerTask):
    task: SinkTask

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.consumer: Consumer | None = None
        self.current_offsets: dict[TopicPartition, OffsetAndMetadata] = {}

    @property
    def group_id(self) -> str:
        return f"connect-{self.connector}"

    def execute(self) -> None:
        config = {"group.id": self.group_id, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "client.id": f"connector-consumer-{self.connector}-{self.task_id}",
                  **self.client_config("consumer.")}
        self.consumer = consumer = Consumer(config)
        context = SinkTaskContext(self.task_config)
        self.task.initialize(context)
        self.task.start(self.task_config)
        topics = [topic.strip() for topic in self.task_config.get("topics", "").split(",") if topic.strip()]
        consumer.subscribe(topics or self.task_config.get("topics.regex", ""), listener=_Rebalance(self))
        next_commit = time.monotonic() + self.flush_interval
        paused = False
        while not self.stopping.is_set():
            if self.resumed.is_set() == paused:
                paused = not paused
                (consumer.pause if paused else consumer.resume)(*consumer.assignment())
            batch = consumer.poll(0.5)
            context.assignment_set = set(consumer.assignment())
            records = [converted for record in batch if (converted := self.convert(record)) is not None]
            if records or batch:
                self.deliver(records)
            for partition, offset in context.offsets_to_reset.items():
                consumer.seek(partition, offset)
                self.current_offsets[partition] = OffsetAndMetadata(offset)
            context.offsets_to_reset.clear()
            if time.monotonic() >= next_commit or context.commit_requested:
                context.commit_requested = False
                self.commit()
                next_commit = time.monotonic() + self.flush_interval

    def convert(self, record: ConsumerRecord) -> SinkRecord | None:
        """The record as the task sees it, or None when a tolerated error skipped it. Each step runs directly and
        goes through the error handler (which retries it or reports it) only when it raised."""
        self.current_offsets[record.topic_partition] = OffsetAndMetadata(record.offset + 1)
        topic, errors = record.topic, self.errors
        try:
            key = self.key_converter.to_connect_data(topic, record.key)
        except Exception:
            key = errors.execute(lambda: self.key_converter.to_connect_data(topic, record.key), KEY_CONVERTER,
                                 self.key_converter, consumed=record)
            if key is Skipped:
                return None
        try:
            value = self.value_converter.to_connect_data(topic, record.value)
        except Exception:
            value = errors.execute(lambda: self.value_converter.to_connect_data(topic, record.value),
                                   VALUE_CONVERTER, self.value_converter, consumed=record)
            if value is Skipped:
                return None
        record_headers = Headers()
        if record.headers:
            record_headers = errors.execute(lambda: self.headers_to_connect(record), HEADER_CONVERTER,
                                            self.header_converter, consumed=record)
            if record_headers is Skipped:
                return None
        sink_record = SinkRecord(topic, record.partition, key.schema, key.value, value.schema, value.value,
                                 record.timestamp, record_headers, kafka_offset=record.offset,
                                 timestamp_type=TIMESTAMP_TYPES.get(record.timestamp_type, "NoTimestampType"),
                                 original_topic=topic, original_kafka_partition=record.partition,
                                 original_kafka_offset=record.offset)
        if not self.transformations.stages:
            return sink_record
        transformed = errors.execute(lambda: self.transformations.apply(sink_record), TRANSFORMATION,
                                     self.transformations, consumed=record)
        return None if transformed is Skipped else transformed

    def headers_to_connect(self, record: ConsumerRecord) -> Headers:
        converted = Headers()
        for name, raw in record.headers:
            schema_and_value = self.header_converter.to_connect_header(record.topic, name, raw)
            converted.add(name, schema_and_value.value, schema_and_value.schema)
        return converted

    def deliver(self, records: list[SinkRecord]) -> None:
        while not self.stopping.is_set():
            try:
                self.task.put(records)
                return
            except RetriableException:
                log.warning("%s-%d: put failed with a retriable error; retrying", self.connector, self.task_id)
                self.stopping.wait(1.0)

    def commit(self) -> None:
        if not self.current_offsets or self.consumer is None:
            return
        offsets = self.task.pre_commit(dict(self.current_offsets))
        if offsets:
            self.consumer.commit_sync(dict(offsets))

    def close(self) -> None:
        try:
            if self.status.state != "FAILED":
                self.commit()
                if self.consumer is not None:
                    self.task.close(sorted(self.consumer.assignment()))
        except Exception:
            log.exception("%s-%d: final offset commit failed", self.connector, self.task_id)
        self.stop_task()  # after the final commit, which flushes the task (Kafka's WorkerSinkTask.close)
        if self.consumer is not None:
            self.consumer.close(5)
        self.errors.close()


class _Rebalance:
    """Kafka's HandleRebalance: partitions taken away are committed and closed in the task first; new ones opened."""

    def __init__(self, worker_task: WorkerSinkTask) -> None:
        self.worker_task = worker_task

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        worker_task = self.worker_task
        if not revoked or worker_task.task_stopped:  # closing: the partitions were committed and closed already
            return
        worker_task.commit()
        worker_task.task.close(sorted(revoked))
        for partition in revoked:
            worker_task.current_offsets.pop(partition, None)

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        if assigned and not self.worker_task.task_stopped:
            self.worker_task.task.open(sorted(assigned))
