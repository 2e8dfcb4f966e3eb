"""The options of the "kfk" data source, with the names, defaults and rules of Spark's Kafka source.

A job written for ``format("kafka")`` runs unchanged on ``format("kfk")``:

- one of ``subscribe`` (comma list), ``subscribePattern`` (a regex matched against whole topic names, as Java's
  ``Pattern.matches``) or ``assign`` (JSON ``{"topicA":[0,1]}``), and ``kafka.bootstrap.servers``;
- where to start and stop: ``startingOffsets`` / ``endingOffsets`` ("earliest", "latest" or JSON
  ``{"topicA":{"0":23,"1":-1}}`` where -2 means earliest and -1 latest), ``startingOffsetsByTimestamp`` /
  ``endingOffsetsByTimestamp`` (JSON of epoch milliseconds per partition), ``startingTimestamp`` /
  ``endingTimestamp`` (one time for every partition) and ``startingOffsetsByTimestampStrategy`` (error | latest).
  Precedence as in Spark: timestamp, then by-timestamp JSON, then offsets;
- ``failOnDataLoss``, ``includeHeaders``, ``minPartitions``, ``maxOffsetsPerTrigger``,
  ``kafkaConsumer.pollTimeoutMs``;
- every ``kafka.``-prefixed option goes to kfk's consumer (``kafka.isolation.level=read_committed`` ...), except the
  ones Spark refuses too because the source manages them (auto.offset.reset, enable.auto.commit, the
  (de)serializers and interceptors); ``kafka.group.id`` is accepted and unused, since ranges are read without a group.

One kfk addition: ``logDir`` reads partitions from a stopped broker's log dir instead of a cluster.

Parsing is pure and needs neither pyspark nor a broker, so that `kfk spark-export` can reject bad input before it
starts Spark. Every problem is an InvalidConfigurationError naming the option.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kfk.common.structs import TopicPartition
from kfk.errors import InvalidConfigurationError

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "SourceOptions",
    "TopicSelection",
    "parse_offsets_json",
    "partition_offsets_to_json",
]

EARLIEST = -2
"""In an offsets JSON: the partition's log start offset (Spark's and Kafka's ListOffsets sentinel)."""
LATEST = -1
"""In an offsets JSON: the partition's end (high watermark, or last stable offset under read_committed)."""

# kafka.* options Spark refuses because the source itself decides them.
UNSUPPORTED_KAFKA_OPTIONS = {
    "auto.offset.reset": "set the source option startingOffsets instead",
    "enable.auto.commit": "the source does not commit offsets to Kafka (they live in Spark's checkpoint)",
    "key.deserializer": "keys are always read as bytes",
    "value.deserializer": "values are always read as bytes",
    "interceptor.classes": "interceptors are not supported",
}
IGNORED_KAFKA_OPTIONS = frozenset({"group.id"})

DEFAULT_POLL_TIMEOUT_MS = 120_000


@dataclass(frozen=True)
class TopicSelection:
    """Which topics a query reads: exactly one of the three forms is set."""

    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[TopicPartition, ...] = ()

    def describe(self) -> str:
        if self.subscribe:
            return "topics " + ", ".join(self.subscribe)
        if self.pattern is not None:
            return f"topics matching {self.pattern!r}"
        return "partitions " + ", ".join(str(tp) for tp in self.assign)

    def matches(self, topic: str) -> bool:
        if self.subscribe:
            return topic in self.subscribe
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return any(tp.topic == topic for tp in self.assign)


@dataclass(frozen=True)
class OffsetSpec:
    """One end of a query: ``kind`` is "earliest", "latest", "offsets" (``offsets``: per partition, with the
    EARLIEST/LATEST sentinels allowed), "timestamps" (``timestamps``: per partition, epoch ms) or "timestamp"
    (``timestamp``: one time for every partition)."""

    kind: str
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None

    @property
    def by_time(self) -> bool:
        return self.kind in ("timestamp", "timestamps")


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str | None
    log_dir: str | None
    topics: TopicSelection
    starting: OffsetSpec
    ending: OffsetSpec
    starting_by_timestamp_strategy: str
    fail_on_data_loss: bool
    include_headers: bool
    min_partitions: int | None
    max_offsets_per_trigger: int | None
    poll_timeout_ms: int
    consumer_config: Mapping[str, str]
    streaming: bool

    @property
    def read_committed(self) -> bool:
        return self.consumer_config.get("isolation.level", "read_uncommitted") == "read_committed"

    @classmethod
    def parse(cls, options: Mapping[str, Any], *, streaming: bool) -> SourceOptions:
        """Validate Spark-style options (names are case-insensitive, as in Spark)."""
        lowered = {str(name).lower(): "" if value is None else str(value) for name, value in options.items()}
        consumer_config = _consumer_config(lowered)
        bootstrap = consumer_config.pop("bootstrap.servers", None)
        log_dir = lowered.get("logdir") or None
        if bootstrap is None and log_dir is None:
            raise InvalidConfigurationError("option 'kafka.bootstrap.servers' must be specified for the kfk source "
                                            "(or 'logDir' to read a stopped broker's log dir)")
        if bootstrap is not None and log_dir is not None:
            raise InvalidConfigurationError("give either 'kafka.bootstrap.servers' or 'logDir', not both")
        if "isolation.level" in consumer_config and consumer_config["isolation.level"] not in (
                "read_uncommitted", "read_committed"):
            raise InvalidConfigurationError("option 'kafka.isolation.level' must be read_uncommitted or "
                                            f"read_committed, got {consumer_config['isolation.level']!r}")
        topics = _topic_selection(lowered)
        starting = _offset_spec(lowered, "starting", default="latest" if streaming else "earliest")
        if not streaming and starting.kind == "latest":
            raise InvalidConfigurationError("option 'startingOffsets' can't be latest for batch queries")
        if not streaming and any(offset == LATEST for offset in starting.offsets.values()):
            raise InvalidConfigurationError("option 'startingOffsets' can't use -1 (latest) for batch queries")
        ending = _offset_spec(lowered, "ending", default="latest")
        if streaming and any(name in lowered for name in ("endingoffsets", "endingoffsetsbytimestamp",
                                                          "endingtimestamp")):
            raise InvalidConfigurationError("ending offsets are not valid in streaming queries "
                                            "(use a trigger such as availableNow instead)")
        if ending.kind == "earliest":
            raise InvalidConfigurationError("option 'endingOffsets' can't be earliest")
        if any(offset == EARLIEST for offset in ending.offsets.values()):
            raise InvalidConfigurationError("option 'endingOffsets' can't use -2 (earliest)")
        strategy = lowered.get("startingoffsetsbytimestampstrategy", "error").lower()
        if strategy not in ("error", "latest"):
            raise InvalidConfigurationError("option 'startingOffsetsByTimestampStrategy' must be error or latest, "
                                            f"got {strategy!r}")
        min_partitions = _positive_int(lowered, "minpartitions", "minPartitions")
        max_offsets = _positive_int(lowered, "maxoffsetspertrigger", "maxOffsetsPerTrigger")
        poll_timeout = _positive_int(lowered, "kafkaconsumer.polltimeoutms", "kafkaConsumer.pollTimeoutMs")
        return cls(
            bootstrap_servers=bootstrap, log_dir=log_dir, topics=topics, starting=starting, ending=ending,
            starting_by_timestamp_strategy=strategy,
            fail_on_data_loss=_boolean(lowered, "failondataloss", "failOnDataLoss", True),
            include_headers=_boolean(lowered, "includeheaders", "includeHeaders", False),
            min_partitions=min_partitions, max_offsets_per_trigger=max_offsets,
            poll_timeout_ms=poll_timeout or DEFAULT_POLL_TIMEOUT_MS, consumer_config=consumer_config,
            streaming=streaming)


def _consumer_config(lowered: Mapping[str, str]) -> dict[str, str]:
    config: dict[str, str] = {}
    for name, value in lowered.items():
        if not name.startswith("kafka."):
            continue
        key = name[len("kafka."):]
        if key in UNSUPPORTED_KAFKA_OPTIONS:
            raise InvalidConfigurationError(f"Kafka option 'kafka.{key}' is not supported: "
                                            f"{UNSUPPORTED_KAFKA_OPTIONS[key]}")
        if key in IGNORED_KAFKA_OPTIONS:
            continue
        config[key] = value
    return config


def _topic_selection(lowered: Mapping[str, str]) -> TopicSelection:
    given = [name for name in ("subscribe", "subscribepattern", "assign") if lowered.get(name, "").strip()]
    if len(given) != 1:
        raise InvalidConfigurationError("exactly one of the options 'subscribe', 'subscribePattern' or 'assign' "
                                        "must be specified for the kfk source")
    if given[0] == "subscribe":
        topics = tuple(dict.fromkeys(topic.strip() for topic in lowered["subscribe"].split(",") if topic.strip()))
        if not topics:
            raise InvalidConfigurationError("option 'subscribe' names no topic")
        return TopicSelection(subscribe=topics)
    if given[0] == "subscribepattern":
        pattern = lowered["subscribepattern"].strip()
        try:
            re.compile(pattern)
        except re.error as error:
            raise InvalidConfigurationError(f"option 'subscribePattern' is not a valid regex: {error}") from None
        return TopicSelection(pattern=pattern)
    document = _json(lowered["assign"], "assign")
    if not isinstance(document, dict) or not document:
        raise InvalidConfigurationError('option \'assign\' must be a JSON object such as {"topicA":[0,1]}')
    partitions: list[TopicPartition] = []
    for topic, numbers in document.items():
        if not isinstance(numbers, list) or not all(_is_int(number) and number >= 0 for number in numbers):
            raise InvalidConfigurationError(f"option 'assign': topic {topic!r} needs a list of partition numbers")
        partitions.extend(TopicPartition(topic, number) for number in numbers)
    return TopicSelection(assign=tuple(dict.fromkeys(partitions)))


def _offset_spec(lowered: Mapping[str, str], side: str, default: str) -> OffsetSpec:
    name = f"{side}Offsets"
    timestamp_text = lowered.get(f"{side}timestamp")
    if timestamp_text:
        try:
            timestamp = int(timestamp_text)
        except ValueError:
            raise InvalidConfigurationError(f"option '{side}Timestamp' must be epoch milliseconds, "
                                            f"got {timestamp_text!r}") from None
        if timestamp < 0:
            raise InvalidConfigurationError(f"option '{side}Timestamp' must not be negative")
        return OffsetSpec("timestamp", timestamp=timestamp)
    by_timestamp = lowered.get(f"{side}offsetsbytimestamp")
    if by_timestamp:
        timestamps = parse_offsets_json(by_timestamp, f"{name}ByTimestamp", minimum=0)
        return OffsetSpec("timestamps", timestamps=timestamps)
    text = lowered.get(f"{side}offsets", default).strip()
    if text.lower() in ("earliest", "latest"):
        return OffsetSpec(text.lower())
    return OffsetSpec("offsets", offsets=parse_offsets_json(text, name, minimum=EARLIEST))


def parse_offsets_json(text: str, option: str, *, minimum: int) -> dict[TopicPartition, int]:
    """Spark's per-partition JSON ``{"topicA":{"0":23,"1":-1}}`` -> {TopicPartition: number}."""
    document = _json(text, option)
    if not isinstance(document, dict) or not document:
        raise InvalidConfigurationError(
            f"option '{option}' must be earliest, latest or a JSON object such as "
            '{"topicA":{"0":23,"1":-1}}' + f", got {text!r}")
    result: dict[TopicPartition, int] = {}
    for topic, partitions in document.items():
        if not isinstance(partitions, dict) or not partitions:
            raise InvalidConfigurationError(f"option '{option}': topic {topic!r} needs an object of "
                                            'partition -> number, such as {"0":23}')
        for partition, number in partitions.items():
            if not str(partition).isdigit():
                raise InvalidConfigurationError(f"option '{option}': {partition!r} of topic {topic!r} is not a "
                                                "partition number")
            if not _is_int(number) or number < minimum:
                raise InvalidConfigurationError(f"option '{option}': the value for {topic}-{partition} must be "
                                                f"an integer >= {minimum}, got {number!r}")
            result[TopicPartition(topic, int(partition))] = number
    return result


def partition_offsets_to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """{TopicPartition: offset} -> Spark's offset document (topics and partitions sorted, as Spark writes it)."""
    document: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        document.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return document


def _json(text: str, option: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InvalidConfigurationError(f"option '{option}' is not valid JSON ({error}): {text!r}") from None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _boolean(lowered: Mapping[str, str], key: str, name: str, default: bool) -> bool:
    text = lowered.get(key)
    if text is None or text == "":
        return default
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise InvalidConfigurationError(f"option '{name}' must be true or false, got {text!r}")


def _positive_int(lowered: Mapping[str, str], key: str, name: str) -> int | None:
    text = lowered.get(key)
    if text is None or text == "":
        return None
    try:
        value = int(text)
    except ValueError:
        raise InvalidConfigurationError(f"option '{name}' must be a positive integer, got {text!r}") from None
    if value <= 0:
        raise InvalidConfigurationError(f"option '{name}' must be a positive integer, got {value}")
    return value
