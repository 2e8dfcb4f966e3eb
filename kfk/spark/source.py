"""The "kfk" data source for PySpark: Spark's Kafka source, in Python, on kfk's client.

    from kfk.spark import register
    register(spark)
    df = (spark.read.format("kfk")
          .option("kafka.bootstrap.servers", "localhost:9092")
          .option("subscribe", "orders")
          .load())

Same schema and options as ``format("kafka")`` (kfk.spark.options). Built on the Python Data Source API
(pyspark.sql.datasource, Spark 4.2+: latestOffset with a read limit):

- batch: the planner asks the cluster for the query's offset ranges (kfk.spark.offsets.plan_batch); one Spark
  partition per range, or more with minPartitions; each task reads its range with its own consumer;
- streaming: offsets are Spark's Kafka offset JSON, kept in the query's checkpoint (offsets log), so a restarted
  query resumes from the last committed micro-batch. maxOffsetsPerTrigger caps a micro-batch (ReadMaxRows), and
  Trigger.AvailableNow is honoured by recording the end offsets when the query starts (prepareForTriggerAvailableNow)
  and never reading past them, in as many capped micro-batches as needed. Newly discovered partitions start at
  earliest; a partition that disappears or moves backwards is data loss (failOnDataLoss).

Readers and partitions are pickled to the executors: they hold options and offsets only. Connections (the driver's
Admin client, the tasks' consumers) are opened where they are used and never pickled.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kfk.common.structs import TopicPartition
from kfk.spark.catalog import open_catalog, read_range
from kfk.spark.offsets import (
    DataLossError,
    OffsetRange,
    PartitionCatalog,
    offsets_from_document,
    plan_batch,
    rate_limit,
    resolve_offsets,
    split_ranges,
)
from kfk.spark.options import SourceOptions, partition_offsets_to_json

__all__ = ["KfkDataSource", "OffsetRangePartition", "kafka_schema"]

_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]
_HEADERS = StructField("headers", ArrayType(StructType([StructField("key", StringType()),
                                                        StructField("value", BinaryType())])))


def kafka_schema(include_headers: bool) -> StructType:
    """Spark's Kafka-source schema (headers only with includeHeaders=true)."""
    return StructType(_FIELDS + [_HEADERS] if include_headers else list(_FIELDS))


class OffsetRangePartition(InputPartition):
    """One Spark task: an OffsetRange (``value``)."""

    def __init__(self, offset_range: OffsetRange) -> None:
        super().__init__(offset_range)


def _read(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if not isinstance(partition.value, OffsetRange):
        return iter(())  # Spark plans one empty partition when a query has no range at all
    return read_range(options, partition.value)


class KfkDataSource(DataSource):
    """Registered as format "kfk"."""

    @classmethod
    def name(cls) -> str:
        return "kfk"

    def schema(self) -> StructType:
        include = str(self.options.get("includeHeaders", "false")).strip().lower() == "true"
        return kafka_schema(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        return KfkBatchReader(SourceOptions.parse(dict(self.options), streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KfkStreamReader(SourceOptions.parse(dict(self.options), streaming=True))


class KfkBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> list[InputPartition]:
        catalog = open_catalog(self.options)
        try:
            ranges = plan_batch(catalog, self.options)
        finally:
            catalog.close()
        return [OffsetRangePartition(offset_range)
                for offset_range in split_ranges(ranges, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)


class KfkStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._catalog: PartitionCatalog | None = None
        self._available_now_target: dict[TopicPartition, int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_catalog"] = None
        return state

    @property
    def catalog(self) -> PartitionCatalog:
        if self._catalog is None:
            self._catalog = open_catalog(self.options)
        return self._catalog

    def _partitions(self) -> list[TopicPartition]:
        return self.catalog.topic_partitions(self.options.topics, allow_empty=True)

    def initialOffset(self) -> dict:
        partitions = self._partitions()
        starts = resolve_offsets(self.catalog, self.options.starting, partitions, option="startingOffsets",
                                 no_match=self.options.starting_by_timestamp_strategy)
        return partition_offsets_to_json(starts)

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now_target = self.catalog.latest_offsets(self._partitions())

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        starts = offsets_from_document(start)
        partitions = self._partitions()
        new = [tp for tp in partitions if tp not in starts]
        if new:
            starts.update(self.catalog.earliest_offsets(new))
        gone = sorted(set(starts) - set(partitions))
        if gone and self.options.fail_on_data_loss:
            raise DataLossError(f"partitions {', '.join(map(str, gone))} disappeared (topic deleted?); some data may "
                                "have been lost. Set failOnDataLoss=false to go on without them")
        latest = self.catalog.latest_offsets(partitions)
        target = self._available_now_target
        ends: dict[TopicPartition, int] = {}
        for tp in partitions:
            end = latest[tp]
            if target is not None:
                end = min(end, max(target.get(tp, starts[tp]), starts[tp]))
            if end < starts[tp]:
                if self.options.fail_on_data_loss:
                    raise DataLossError(f"the end of {tp} moved back from {starts[tp]} to {end} (topic recreated? "
                                        "log truncated?); some data may have been lost. Set failOnDataLoss=false "
                                        "to go on from its new end")
            ends[tp] = end
        if isinstance(limit, ReadMaxRows):
            forward = {tp: end for tp, end in ends.items() if end >= starts[tp]}
            ends.update(rate_limit({tp: starts[tp] for tp in forward}, forward, limit.max_rows))
        return partition_offsets_to_json(ends)

    def reportLatestOffset(self) -> dict | None:
        return partition_offsets_to_json(self.catalog.latest_offsets(self._partitions()))

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        starts = offsets_from_document(start)
        ends = offsets_from_document(end)
        new = [tp for tp in ends if tp not in starts]
        if new:
            starts.update(self.catalog.earliest_offsets(new))
        ranges = [OffsetRange(tp.topic, tp.partition, starts[tp], until)
                  for tp, until in sorted(ends.items()) if until > starts[tp]]
        return [OffsetRangePartition(offset_range)
                for offset_range in split_ranges(ranges, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.options, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint, not in Kafka."""

    def stop(self) -> None:
        if self._catalog is not None:
            self._catalog.close()
            self._catalog = None
