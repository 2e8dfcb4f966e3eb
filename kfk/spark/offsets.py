"""Offset ranges: what a batch query or a micro-batch reads, planned on the driver before any record moves.

A range is one partition's [from_offset, until_offset). Planning turns the query's OffsetSpecs into concrete
offsets through a PartitionCatalog (the cluster through kfk's Admin client, or a stopped broker's log dir), checks
them the way Spark's Kafka source does (every partition of the query named in a per-partition JSON, end not before
start, data already deleted = data loss), and splits big ranges so that ``minPartitions`` Spark tasks share the
work (Spark's KafkaOffsetRangeCalculator: each range gets a share of the tasks proportional to its size).

Streaming offsets are Spark's own JSON document, ``{"topic": {"0": 23}}``: what the checkpoint's offsets log holds
for the kfk source is what it would hold for Spark's Kafka source.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import NamedTuple, Protocol

from kfk.common.structs import TopicPartition
from kfk.errors import InvalidConfigurationError, KafkaError, OffsetOutOfRangeError
from kfk.spark.options import EARLIEST, LATEST, OffsetSpec, SourceOptions, TopicSelection

__all__ = [
    "DataLossError",
    "OffsetRange",
    "PartitionCatalog",
    "offsets_from_document",
    "plan_batch",
    "rate_limit",
    "resolve_offsets",
    "split_ranges",
]


class DataLossError(OffsetOutOfRangeError):
    """Records the query should read are gone (retention, a deleted topic) and failOnDataLoss is true."""


class OffsetRange(NamedTuple):
    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return max(0, self.until_offset - self.from_offset)


class PartitionCatalog(Protocol):
    """Where partitions and their offsets come from: a cluster (kfk.spark.broker_source) or a log dir
    (kfk.spark.log_dir_source). ``latest_offsets`` is the high watermark, or the last stable offset under
    read_committed."""

    def topic_partitions(self, selection: TopicSelection, *, allow_empty: bool = False) -> list[TopicPartition]: ...

    def earliest_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]: ...

    def latest_offsets(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]: ...

    def offsets_for_times(self, timestamps: Mapping[TopicPartition, int]) -> dict[TopicPartition, int | None]: ...

    def close(self) -> None: ...


def resolve_offsets(catalog: PartitionCatalog, spec: OffsetSpec, partitions: list[TopicPartition], *, option: str,
                    no_match: str) -> dict[TopicPartition, int]:
    """Concrete offsets for ``spec`` on ``partitions``. ``no_match`` says what a time later than every record
    means: "error" (startingOffsetsByTimestampStrategy=error) or "latest"."""
    if spec.kind == "earliest":
        return catalog.earliest_offsets(partitions)
    if spec.kind == "latest":
        return catalog.latest_offsets(partitions)
    if spec.kind == "offsets":
        _check_covers(spec.offsets, partitions, option)
        wanted = dict(spec.offsets)
        earliest = [tp for tp, offset in wanted.items() if offset == EARLIEST]
        latest = [tp for tp, offset in wanted.items() if offset == LATEST]
        if earliest:
            wanted.update(catalog.earliest_offsets(earliest))
        if latest:
            wanted.update(catalog.latest_offsets(latest))
        return wanted
    if spec.kind == "timestamps":
        _check_covers(spec.timestamps, partitions, option + "ByTimestamp")
        timestamps = dict(spec.timestamps)
    else:
        assert spec.timestamp is not None
        timestamps = dict.fromkeys(partitions, spec.timestamp)
    found = catalog.offsets_for_times(timestamps)
    missing = [tp for tp in partitions if found.get(tp) is None]
    if missing and no_match == "error":
        raise InvalidConfigurationError(
            f"no record of {', '.join(map(str, missing))} has a timestamp at or after the one given in "
            f"'{option}' ({', '.join(str(timestamps[tp]) for tp in missing)}); set "
            "startingOffsetsByTimestampStrategy=latest to start those partitions at their end")
    latest = catalog.latest_offsets(missing) if missing else {}
    return {tp: found[tp] if found.get(tp) is not None else latest[tp] for tp in partitions}


def _check_covers(given: Mapping[TopicPartition, int], partitions: list[TopicPartition], option: str) -> None:
    """Spark's rule: a per-partition JSON names exactly the partitions of the query."""
    missing = sorted(set(partitions) - set(given))
    extra = sorted(set(given) - set(partitions))
    if missing or extra:
        parts = []
        if missing:
            parts.append("not specified: " + ", ".join(map(str, missing)))
        if extra:
            parts.append("not part of the query (unknown, or not subscribed): " + ", ".join(map(str, extra)))
        raise InvalidConfigurationError(
            f"option '{option}' must give an offset for every partition of the query and no other "
            f"({'; '.join(parts)}); use -2 for earliest and -1 for latest")


def plan_batch(catalog: PartitionCatalog, options: SourceOptions) -> list[OffsetRange]:
    """The offset ranges of a batch query, one per partition, checked for data loss and inverted ends."""
    partitions = catalog.topic_partitions(options.topics)
    starts = resolve_offsets(catalog, options.starting, partitions, option="startingOffsets",
                             no_match=options.starting_by_timestamp_strategy)
    ends = resolve_offsets(catalog, options.ending, partitions, option="endingOffsets", no_match="latest")
    earliest = catalog.earliest_offsets(partitions)
    latest = catalog.latest_offsets(partitions)
    ranges = []
    for tp in sorted(partitions):
        start, end = starts[tp], ends[tp]
        if end > latest[tp]:
            raise InvalidConfigurationError(f"the ending offset {end} of {tp} is past its end ({latest[tp]}): "
                                            "those records do not exist yet")
        if start < earliest[tp]:
            if options.fail_on_data_loss:
                raise DataLossError(
                    f"offsets {start}..{min(end, earliest[tp]) - 1} of {tp} are no longer available (its log "
                    f"starts at {earliest[tp]}); some data may have been lost. Start later, or set "
                    "failOnDataLoss=false to skip what is gone")
            start = min(earliest[tp], end)
        if start > end:
            raise InvalidConfigurationError(f"the starting offset {start} of {tp} is after its ending offset "
                                            f"{end}")
        ranges.append(OffsetRange(tp.topic, tp.partition, start, end))
    return ranges


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """One range per partition, or, when ``min_partitions`` asks for more tasks than there are non-empty ranges,
    each range cut into about ``size / total * min_partitions`` equal parts (at least one)."""
    ranges = [offset_range for offset_range in ranges if offset_range.size > 0]
    if not min_partitions or min_partitions <= len(ranges):
        return ranges
    total = sum(offset_range.size for offset_range in ranges)
    result: list[OffsetRange] = []
    for offset_range in ranges:
        parts = max(1, round(offset_range.size / total * min_partitions))
        step = offset_range.size / parts
        bounds = [offset_range.from_offset + math.floor(step * index) for index in range(parts)]
        bounds.append(offset_range.until_offset)
        result.extend(OffsetRange(offset_range.topic, offset_range.partition, low, high)
                      for low, high in zip(bounds, bounds[1:]) if high > low)
    return result


def rate_limit(starts: Mapping[TopicPartition, int], ends: Mapping[TopicPartition, int], limit: int
               ) -> dict[TopicPartition, int]:
    """At most ``limit`` offsets in all, shared between partitions in proportion to how far behind each is
    (maxOffsetsPerTrigger). A partition whose share rounds below one still advances by one, so none starves."""
    backlog = {tp: max(0, end - starts.get(tp, end)) for tp, end in ends.items()}
    total = sum(backlog.values())
    if total <= limit:
        return dict(ends)
    limited: dict[TopicPartition, int] = {}
    for tp, end in ends.items():
        start = starts.get(tp, end)
        share = limit * backlog[tp] / total
        step = math.ceil(share) if share < 1 else math.floor(share)
        limited[tp] = min(end, start + step)
    return limited


def offsets_from_document(document: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    """Spark's offsets JSON (as a dict) -> {TopicPartition: offset}."""
    try:
        return {TopicPartition(topic, int(partition)): int(offset)
                for topic, partitions in document.items() for partition, offset in partitions.items()}
    except (AttributeError, TypeError, ValueError) as error:
        raise KafkaError(f"malformed kfk source offsets {document!r}: {error}") from None
