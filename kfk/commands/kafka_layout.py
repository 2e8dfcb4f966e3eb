"""Kafka's tools' plain-text layouts, so that a script written for their output reads kfk's the same way.

Two layouts cover kafka-consumer-groups.sh, kafka-transactions.sh and kafka-metadata-quorum.sh:

- printf columns (ConsumerGroupCommand): each cell left-justified to at least its column's width (``%-Ns``; a wider
  value overflows, it is never cut), one space between cells, and a last cell usually left as it is (``%s``).
- ToolsUtils' table (kafka-transactions.sh, kafka-metadata-quorum.sh): each cell padded to its column's widest cell,
  header included, and followed by a tab, the last one too.

And the order they print a group's partitions in. Kafka's tools walk a java.util.HashMap keyed by TopicPartition:
neither sorted nor random, but fixed by the keys' hash codes, bucket after bucket (the table holds 16 buckets and
doubles whenever it would be more than 3/4 full), in insertion order within a bucket.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TypeVar

Key = TypeVar("Key")

_INT_MASK = 0xFFFF_FFFF


def columns(cells: Sequence[object], widths: Sequence[int | None]) -> str:
    """``%-Ns %-Ns ... %s`` as Java's printf fills it: a None width leaves its cell as it is."""
    return " ".join(str(cell) if width is None else f"{cell!s:<{width}}" for cell, width in zip(cells, widths))


def tools_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """ToolsUtils.prettyPrintTable's lines: the header, then one line per row."""
    widths = [max(len(row[column]) for row in [headers, *rows]) for column in range(len(headers))]
    return ["".join(f"{cell:<{width}}\t" for cell, width in zip(row, widths)) for row in [headers, *rows]]


def java_string_hash(text: str) -> int:
    """String.hashCode (over UTF-16 code units), as an unsigned 32-bit value."""
    data = text.encode("utf-16-be")
    code = 0
    for index in range(0, len(data), 2):
        code = (31 * code + (data[index] << 8 | data[index + 1])) & _INT_MASK
    return code


def topic_partition_hash(topic: str, partition: int) -> int:
    """org.apache.kafka.common.TopicPartition.hashCode, as an unsigned 32-bit value."""
    return (31 * (31 + partition) + java_string_hash(topic)) & _INT_MASK


def hash_map_order(keys: Iterable[Key], hash_code: Callable[[Key], int]) -> list[Key]:
    """The keys in the order a java.util.HashMap filled with them in this order iterates them."""
    keys = list(dict.fromkeys(keys))
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: Key) -> int:
        code = hash_code(key) & _INT_MASK
        return (code ^ code >> 16) & (capacity - 1)

    return sorted(keys, key=bucket)  # sorted() is stable: insertion order within a bucket


def partitions_in_kafka_order(partitions: Iterable) -> list:
    """TopicPartitions (anything with .topic and .partition) in a Kafka tool's HashMap order."""
    return hash_map_order(sorted(partitions), lambda tp: topic_partition_hash(tp.topic, tp.partition))
