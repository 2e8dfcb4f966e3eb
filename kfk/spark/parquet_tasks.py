"""Spark tasks that write their own Parquet files with pyarrow: the batch Parquet export without Spark's rows.

Through the data source, every record goes Python worker -> Arrow -> JVM rows -> Spark's Parquet writer: the JVM
side of that trip is most of an export's time. Here a task reads its offset range (read_range: the broker or a log
dir, as the data source does) and writes the Arrow batches it gets straight to Parquet in the worker, so the JVM
only schedules tasks and receives, per task, the names of the files it wrote and their row counts. The driver then
commits exactly those files (kfk.spark.output), which is what makes a retried or speculative task attempt harmless:
the files of an attempt whose result Spark did not take are never committed.

What the files hold is what the Spark path writes for the same options (ParquetLayout): Spark's Kafka-source
columns in its order, key/value as binary or as strings (the bytes as they are, like Spark's cast, no UTF-8
check), timestamps as INT64 microseconds in UTC, and with --partition-by Hive-style directories, the partition
columns left out of the files. Only partition columns whose directory names Spark and this writer spell alike are
taken (ARROW_PARTITION_COLUMNS); kfk.spark.export keeps the Spark path for the rest.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kfk.spark.arrow_rows import arrow_schema
from kfk.spark.catalog import read_range
from kfk.spark.offsets import OffsetRange
from kfk.spark.options import SourceOptions

__all__ = ["ARROW_PARTITION_COLUMNS", "PARQUET_CODECS", "ParquetLayout", "TaskFile", "write_empty_file",
           "write_range"]

ARROW_PARTITION_COLUMNS = frozenset({"topic", "partition", "offset", "timestampType", "date", "hour"})
"""Partition columns whose values Spark writes into directory names unescaped (topic names are [a-zA-Z0-9._-],
the rest numbers and ISO dates), so that both writers make the same directories."""

PARQUET_CODECS = {"none": "none", "uncompressed": "none", "snappy": "snappy", "gzip": "gzip", "zstd": "zstd",
                  "brotli": "brotli", "lz4_raw": "lz4"}
"""spark.sql.parquet.compression.codec -> pyarrow's name for the same Parquet codec."""


class TaskFile(NamedTuple):
    """One file a task wrote: its path under the staging dir, and its rows."""

    path: str
    rows: int


@dataclass(frozen=True)
class ParquetLayout:
    """How rows become files: the decoding of key and value, the partition columns (in directory order), the
    Parquet codec, and the time zone of the derived date and hour columns (Spark's session time zone)."""

    decode_key: str = "binary"
    decode_value: str = "binary"
    partition_by: tuple[str, ...] = ()
    compression: str = "snappy"
    time_zone: str = "UTC"

    def columns(self, batch: pa.RecordBatch) -> pa.Table:
        """The batch as the export's columns, derived partition columns (date, hour) appended as Spark does."""
        table = pa.Table.from_batches([batch])
        for name, kind in (("key", self.decode_key), ("value", self.decode_value)):
            if kind == "string":
                index = table.schema.get_field_index(name)
                table = table.set_column(index, name, table.column(name).combine_chunks().view(pa.string()))
        derived = [name for name in self.partition_by if name in ("date", "hour") and name not in table.schema.names]
        if derived:
            local = pc.local_timestamp(table.column("timestamp").cast(pa.timestamp("us", tz=self.time_zone)))
            for name in derived:
                column = local.cast(pa.date32()) if name == "date" else pc.hour(local).cast(pa.int32())
                table = table.append_column(name, column)
        return table

    def schema(self, include_headers: bool) -> pa.Schema:
        """The files' schema (partition columns left out): what an empty range's file carries."""
        table = self.columns(pa.RecordBatch.from_pylist([], schema=arrow_schema(include_headers)))
        return table.drop_columns(list(self.partition_by)).schema


def _directory_value(value: object) -> str:
    return value.isoformat() if isinstance(value, datetime.date) else str(value)


class _FileSet:
    """The open ParquetWriters of one task attempt, one per partition directory."""

    def __init__(self, staging: Path, basename: str, layout: ParquetLayout) -> None:
        self.staging = staging
        self.basename = basename
        self.layout = layout
        self.writers: dict[tuple[object, ...], tuple[Path, pq.ParquetWriter]] = {}
        self.rows: dict[tuple[object, ...], int] = {}

    def write(self, table: pa.Table) -> None:
        names = list(self.layout.partition_by)
        if not names:
            self._write((), table)
            return
        for combination in table.select(names).group_by(names).aggregate([]).to_pylist():
            mask = None
            for name in names:
                matches = pc.equal(table.column(name), combination[name])
                mask = matches if mask is None else pc.and_(mask, matches)
            self._write(tuple(combination[name] for name in names), table.filter(mask).drop_columns(names))

    def _write(self, key: tuple[object, ...], table: pa.Table) -> None:
        if key not in self.writers:
            directory = self.staging.joinpath(*(f"{name}={_directory_value(value)}"
                                                for name, value in zip(self.layout.partition_by, key)))
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / self.basename
            self.writers[key] = (path, pq.ParquetWriter(path, table.schema, compression=self.layout.compression))
            self.rows[key] = 0
        self.writers[key][1].write_table(table)
        self.rows[key] += table.num_rows

    def close(self) -> list[TaskFile]:
        for _, writer in self.writers.values():
            writer.close()
        return [TaskFile(str(path.relative_to(self.staging)), self.rows[key])
                for key, (path, _) in self.writers.items()]


def _basename(task: int, compression: str) -> str:
    """Spark's naming (part-<task>-<unique>-c000.<codec>.parquet), unique per attempt so that a retry never
    writes over its failed predecessor's file."""
    codec = "" if compression == "none" else f".{'lz4raw' if compression == 'lz4' else compression}"
    return f"part-{task:05d}-{uuid.uuid4()}-c000{codec}.parquet"


def write_range(options: SourceOptions, layout: ParquetLayout, staging: str,
                task: tuple[int, OffsetRange]) -> list[TaskFile]:
    """The Spark task: read one offset range and write it under ``staging``; the files written (none if the range
    held no record, e.g. only transaction markers)."""
    index, offset_range = task
    files = _FileSet(Path(staging), _basename(index, layout.compression), layout)
    try:
        for batch in read_range(options, offset_range):
            if batch.num_rows:
                files.write(layout.columns(batch))
    finally:
        written = files.close()
    return written


def write_empty_file(options: SourceOptions, layout: ParquetLayout, staging: str) -> TaskFile:
    """One file with the schema and no row, for an export that found no record: Spark writes one too, so that
    readers of the output still learn its columns."""
    path = Path(staging) / _basename(0, layout.compression)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(layout.schema(options.include_headers).empty_table(), path, compression=layout.compression)
    return TaskFile(path.name, 0)
