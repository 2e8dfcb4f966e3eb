"""Kafka records as Arrow record batches with Spark's Kafka-source schema.

The Python Data Source API takes pyarrow RecordBatches from read() as they are (after one schema check), while
tuples go through a per-value converter in the worker. Building columns here, a few C-level passes over the records
the consumer returned, is what makes a kfk read fast in Spark.

Columns: key binary, value binary, topic string, partition int32, offset int64, timestamp (microseconds, UTC, what
Spark's TimestampType becomes in Arrow), timestampType int32, and with includeHeaders
headers list<struct<key string, value binary>>.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from kfk.client.structs import ConsumerRecord

__all__ = ["HEADERS_TYPE", "RecordBatchBuilder", "arrow_schema"]

HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()),
                                                         pa.field("value", pa.binary())])))
TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
_BASE_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", TIMESTAMP_TYPE),
    pa.field("timestampType", pa.int32()),
]
_SCHEMA = pa.schema(_BASE_FIELDS)
_SCHEMA_WITH_HEADERS = pa.schema(_BASE_FIELDS + [pa.field("headers", HEADERS_TYPE)])

DEFAULT_MAX_ROWS = 10_000
"""Rows per Arrow batch: Spark's default spark.sql.execution.arrow.maxRecordsPerBatch."""
DEFAULT_MAX_BYTES = 16 * 1024 * 1024


def arrow_schema(include_headers: bool) -> pa.Schema:
    return _SCHEMA_WITH_HEADERS if include_headers else _SCHEMA


class RecordBatchBuilder:
    """Collects one partition's records and cuts them into RecordBatches of at most ``max_rows`` rows (or about
    ``max_bytes`` of keys and values)."""

    def __init__(self, topic: str, partition: int, include_headers: bool, max_rows: int = DEFAULT_MAX_ROWS,
                 max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.schema = arrow_schema(include_headers)
        self._clear()
        self.rows = 0

    def _clear(self) -> None:
        self._keys: list[bytes | None] = []
        self._values: list[bytes | None] = []
        self._offsets: list[int] = []
        self._timestamps: list[int] = []
        self._timestamp_types: list[int] = []
        self._headers: list[list[tuple[str, bytes | None]]] = []
        self._bytes = 0

    @property
    def full(self) -> bool:
        return len(self._offsets) >= self.max_rows or self._bytes >= self.max_bytes

    @property
    def pending(self) -> int:
        return len(self._offsets)

    def add(self, records: Sequence[ConsumerRecord]) -> None:
        if not records:
            return
        _, _, offsets, timestamps, timestamp_types, keys, values, headers, _ = zip(*records)
        self._offsets.extend(offsets)
        self._timestamps.extend(timestamps)
        self._timestamp_types.extend(timestamp_types)
        self._keys.extend(keys)
        self._values.extend(values)
        if self.include_headers:
            self._headers.extend(headers)
        # Sizes of the first and last values, times the count: cheap, and good enough to bound a batch.
        first, last = values[0], values[-1]
        self._bytes += len(records) * ((len(first) if first else 0) + (len(last) if last else 0)) // 2

    def take(self) -> pa.RecordBatch:
        """The collected rows as one RecordBatch (empty if none), and start over."""
        count = len(self._offsets)
        columns = [
            pa.array(self._keys, pa.binary()),
            pa.array(self._values, pa.binary()),
            pa.repeat(pa.scalar(self.topic, pa.string()), count),
            pa.repeat(pa.scalar(self.partition, pa.int32()), count),
            pa.array(self._offsets, pa.int64()),
            pa.array(self._timestamps, pa.timestamp("ms", tz="UTC")).cast(TIMESTAMP_TYPE),
            pa.array(self._timestamp_types, pa.int32()),
        ]
        if self.include_headers:
            columns.append(pa.array(self._headers, HEADERS_TYPE))
        self._clear()
        self.rows += count
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)
