"""Connect's records (org.apache.kafka.connect.connector/source/sink/header): what tasks produce and consume.

A record carries Connect data (a value and its schema, key and value, see kfk.connect.data), never bytes: the
worker's converters turn it into bytes for Kafka and back. SourceRecord adds the source partition and offset the
worker stores for the task; SinkRecord adds the Kafka offset it was read at.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Mapping

from kfk.connect.data import Schema


@dataclass(frozen=True)
class Header:
    key: str
    value: Any
    schema: Schema | None = None


class Headers:
    """An ordered, multi-valued list of headers (Kafka's ConnectHeaders)."""

    def __init__(self, headers: list[Header] | None = None) -> None:
        self._headers: list[Header] = list(headers or [])

    def add(self, key: str, value: Any, schema: Schema | None = None) -> Headers:
        self._headers.append(Header(key, value, schema))
        return self

    def last_with_name(self, key: str) -> Header | None:
        for header in reversed(self._headers):
            if header.key == key:
                return header
        return None

    def all_with_name(self, key: str) -> list[Header]:
        return [header for header in self._headers if header.key == key]

    def remove(self, key: str) -> Headers:
        self._headers = [header for header in self._headers if header.key != key]
        return self

    def copy(self) -> Headers:
        return Headers(self._headers)

    def __iter__(self) -> Iterator[Header]:
        return iter(self._headers)

    def __len__(self) -> int:
        return len(self._headers)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Headers) and self._headers == other._headers

    def __repr__(self) -> str:
        return f"Headers({self._headers!r})"


@dataclass(frozen=True)
class ConnectRecord:
    """What every record has: the topic (and partition, None to let the producer choose), key and value with their
    schemas, the timestamp in ms (None when unknown) and headers. `new_record` is how transforms make a changed copy."""
    topic: str
    kafka_partition: int | None
    key_schema: Schema | None
    key: Any
    value_schema: Schema | None
    value: Any
    timestamp: int | None = None
    headers: Headers = field(default_factory=Headers)

    def new_record(self, **changes: Any) -> ConnectRecord:
        if "headers" not in changes:
            changes["headers"] = self.headers.copy()
        return replace(self, **changes)


@dataclass(frozen=True)
class SourceRecord(ConnectRecord):
    """A record a source task produces: `source_partition` and `source_offset` (JSON-like maps the task chooses)
    say where in the source system it came from; the worker stores the latest offset per partition."""
    source_partition: Mapping[str, Any] | None = None
    source_offset: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class SinkRecord(ConnectRecord):
    """A record a sink task is given: read from `topic`/`kafka_partition` at `kafka_offset`. The original_* fields
    keep where it was read before transforms renamed its topic (KIP-793), which is what offsets are committed for."""
    kafka_offset: int = -1
    timestamp_type: str = "NoTimestampType"
    original_topic: str | None = None
    original_kafka_partition: int | None = None
    original_kafka_offset: int | None = None
