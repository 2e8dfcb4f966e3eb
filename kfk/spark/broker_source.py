"""Partitions and records from a running cluster, through kfk's client.

The driver plans with an Admin client (Metadata for the partitions, ListOffsets for the edges and for times, at the
query's isolation level, as Spark's Kafka source does since 3.1). Each Spark task reads its one offset range with
a Consumer of its own, opened inside read(): assign + seek, no group, no commits, and it stops exactly at the
range's end, since positions beyond it belong to another task or to the next micro-batch.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Iterator, Mapping

import pyarrow as pa

from kfk.client import Admin, Consumer
from kfk.client.config import ADMIN_CONFIG_DEF, CONSUMER_CONFIG_DEF
from kfk.client.offsets import READ_COMMITTED, READ_UNCOMMITTED
from kfk.common.constants import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from kfk.common.structs import TopicPartition
from kfk.errors import (
    InvalidConfigurationError,
    KafkaTimeoutError,
    OffsetOutOfRangeError,
    UnknownTopicOrPartitionError,
)
from kfk.spark.arrow_rows import RecordBatchBuilder
from kfk.spark.offsets import DataLossError, OffsetRange
from kfk.spark.options import SourceOptions, TopicSelection

__all__ = ["BrokerCatalog", "read_broker_range"]

# How many records one poll may hand back; the client's default (500) makes the loop below spin for nothing.
MAX_POLL_RECORDS = 10_000


def _client_config(options: SourceOptions, kind: str) -> dict[str, str]:
    """The kafka.* options that a client of this kind understands; any other one is a typo worth reporting."""
    config_def = ADMIN_CONFIG_DEF if kind == "admin" else CONSUMER_CONFIG_DEF
    unknown = [name for name in options.consumer_config
               if name not in CONSUMER_CONFIG_DEF.keys and name not in ADMIN_CONFIG_DEF.keys]
    if unknown:
        raise InvalidConfigurationError("unknown Kafka client option(s): " +
                                        ", ".join(f"kafka.{name}" for name in sorted(unknown)))
    config = {name: value for name, value in options.consumer_config.items() if name in config_def.keys}
    assert options.bootstrap_servers is not None
    config["bootstrap.servers"] = options.bootstrap_servers
    return config


class BrokerCatalog:
    """PartitionCatalog on a cluster (see kfk.spark.offsets)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._isolation_level = READ_COMMITTED if options.read_committed else READ_UNCOMMITTED
        self._admin = Admin(_client_config(options, "admin"))

    def close(self) -> None:
        self._admin.close()

    def __enter__(self) -> BrokerCatalog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def topic_partitions(self, selection: TopicSelection, *, allow_empty: bool = False) -> list[TopicPartition]:
        if selection.assign:
            topics = sorted({tp.topic for tp in selection.assign})
            described = self._admin.describe_topics(topics)
            for tp in selection.assign:
                if tp.partition not in {p.partition for p in described[tp.topic].partitions}:
                    raise UnknownTopicOrPartitionError(f"partition {tp} in option 'assign' does not exist")
            return sorted(selection.assign)
        if selection.subscribe:
            described = self._admin.describe_topics(selection.subscribe)
        else:
            assert selection.pattern is not None
            names = [name for name in self._admin.list_topics()
                     if re.fullmatch(selection.pattern, name) is not None]
            if not names:
                if allow_empty:
                    return []
                raise UnknownTopicOrPartitionError(f"no topic matches the pattern {selection.pattern!r}")
            described = self._admin.describe_topics(names)
        return sorted(TopicPartition(name, partition.partition)
                      for name, description in described.items() for partition in description.partitions)

    def _list(self, specs: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        if not specs:
            return {}
        found = self._admin.list_offsets(specs, isolation_level=self._isolation_level)
        return {tp: None if result is None else result.offset for tp, result in found.items()}

    def earliest_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: offset or 0 for tp, offset in self._list(dict.fromkeys(partitions, EARLIEST_TIMESTAMP)).items()}

    def latest_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: offset or 0 for tp, offset in self._list(dict.fromkeys(partitions, LATEST_TIMESTAMP)).items()}

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        return self._list(timestamps)


def read_broker_range(options: SourceOptions, offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of ``offset_range`` as Arrow batches, read by a consumer opened here (in the Spark task)."""
    if offset_range.size == 0:
        return
    tp = offset_range.topic_partition
    config = _client_config(options, "consumer")
    config.setdefault("max.poll.records", str(MAX_POLL_RECORDS))
    config["enable.auto.commit"] = "false"
    # The isolation level the offset range was listed under (Spark's default is read_uncommitted; kfk's consumer
    # defaults to read_committed, as librdkafka's, and would stop at the last stable offset short of the range).
    config["isolation.level"] = "read_committed" if options.read_committed else "read_uncommitted"
    # A position outside the log is data loss: fail, or (failOnDataLoss=false) go on from the log start.
    config["auto.offset.reset"] = "none" if options.fail_on_data_loss else "earliest"
    builder = RecordBatchBuilder(tp.topic, tp.partition, options.include_headers)
    start, until = offset_range.from_offset, offset_range.until_offset
    timeout_s = options.poll_timeout_ms / 1000
    consumer = Consumer(config)
    try:
        consumer.assign([tp])
        consumer.seek(tp, start)
        position = start
        progress_deadline = time.monotonic() + timeout_s
        while position < until:
            try:
                polled = consumer.poll(min(1.0, timeout_s))
            except OffsetOutOfRangeError as error:
                raise DataLossError(
                    f"offsets from {position} of {tp} are no longer available ({error}); some data may have been "
                    "lost. Set failOnDataLoss=false to skip what is gone") from None
            records = polled.records(tp)
            if records:
                if records[-1].offset >= until or records[0].offset < start:
                    records = [record for record in records if start <= record.offset < until]
                builder.add(records)
                if builder.full:
                    yield builder.take()
            new_position = consumer.position(tp)
            if new_position > position:
                position = new_position
                progress_deadline = time.monotonic() + timeout_s
            elif new_position < position and not options.fail_on_data_loss:
                position = new_position  # reset to the log start after a gap: records below start are dropped
            elif time.monotonic() > progress_deadline:
                raise KafkaTimeoutError(
                    f"no progress reading {tp} at offset {position} (range ends at {until}) for "
                    f"{options.poll_timeout_ms} ms (kafkaConsumer.pollTimeoutMs)")
        if builder.pending:
            yield builder.take()
    finally:
        consumer.close(timeout=5)
