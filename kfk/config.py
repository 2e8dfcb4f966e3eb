"""Kafka's configuration surface: keys, types, defaults and validation.

Config keys keep Kafka's dotted names (`segment.bytes`) and map to typed attributes (`segment_bytes`). Values may
come as strings (server.properties, `--config key=value`, AlterConfigs requests) or as Python values (tests, code);
both go through the same parser and validator, so a bad value fails the same way wherever it came from: with an
InvalidConfigurationError that names the key, the value and what would have been accepted.

This module holds, for now, the topic-level log configs (LogConfig, Kafka's `TopicConfig` names and the defaults of
Kafka 4.x). Broker-level keys (server.properties) are added beside it by the broker's issue.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kfk.errors import InvalidConfigurationError

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


class ConfigType(enum.Enum):
    """The value types of Kafka's ConfigDef, with the same parsing rules (strings are trimmed first)."""

    BOOLEAN = "boolean"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    STRING = "string"
    LIST = "list"


Validator = Callable[[str, Any], None]


@dataclasses.dataclass(frozen=True)
class ConfigKey:
    """One config key: Kafka's name, its type, its default and the check applied to every value."""

    name: str
    type: ConfigType
    default: Any
    validator: Validator | None = None
    doc: str = ""
    internal: bool = False

    @property
    def attribute(self) -> str:
        """The typed attribute this key maps to: `segment.bytes` -> `segment_bytes`."""
        return self.name.replace(".", "_")

    def parse(self, value: Any) -> Any:
        """Parse and validate one value for this key; raise InvalidConfigurationError if it does not fit."""
        parsed = parse_value(self.name, self.type, value)
        if self.validator is not None and parsed is not None:
            self.validator(self.name, parsed)
        return parsed


def _invalid(name: str, value: Any, reason: str) -> InvalidConfigurationError:
    return InvalidConfigurationError(f"Invalid value {value!r} for configuration {name}: {reason}")


def parse_value(name: str, config_type: ConfigType, value: Any) -> Any:
    """Turn a raw value (string or Python value) into the key's type, as Kafka's ConfigDef.parseType does."""
    if value is None:
        return None
    if isinstance(value, str):
        value = value.strip()
    if config_type is ConfigType.BOOLEAN:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise _invalid(name, value, "expected value to be either true or false")
    if config_type in (ConfigType.INT, ConfigType.LONG):
        low, high = (INT32_MIN, INT32_MAX) if config_type is ConfigType.INT else (INT64_MIN, INT64_MAX)
        if isinstance(value, bool):
            raise _invalid(name, value, f"expected a {config_type.value}")
        if isinstance(value, int):
            number = value
        elif isinstance(value, str):
            try:
                number = int(value, 10)
            except ValueError:
                raise _invalid(name, value, f"not a number of type {config_type.value}") from None
        else:
            raise _invalid(name, value, f"expected a {config_type.value}")
        if not low <= number <= high:
            raise _invalid(name, value, f"out of range for type {config_type.value}")
        return number
    if config_type is ConfigType.DOUBLE:
        if isinstance(value, bool):
            raise _invalid(name, value, "expected a double")
        if isinstance(value, (int, float)):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                raise _invalid(name, value, "not a number of type double") from None
        else:
            raise _invalid(name, value, "expected a double")
        if math.isnan(number):
            raise _invalid(name, value, "not a number of type double")
        return number
    if config_type is ConfigType.STRING:
        if not isinstance(value, str):
            raise _invalid(name, value, "expected a string")
        return value
    if config_type is ConfigType.LIST:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",")] if value else []
        if isinstance(value, (list, tuple)):
            if not all(isinstance(item, str) for item in value):
                raise _invalid(name, value, "expected a comma-separated list of strings")
            return [item.strip() for item in value]
        raise _invalid(name, value, "expected a comma-separated list of strings")
    raise AssertionError(config_type)  # every ConfigType is handled above


def at_least(minimum: float) -> Validator:
    """Kafka's Range.atLeast."""

    def check(name: str, value: Any) -> None:
        if value < minimum:
            raise _invalid(name, value, f"value must be at least {minimum}")

    return check


def between(minimum: float, maximum: float) -> Validator:
    """Kafka's Range.between (both ends included)."""

    def check(name: str, value: Any) -> None:
        if not minimum <= value <= maximum:
            raise _invalid(name, value, f"value must be between {minimum} and {maximum}")

    return check


def one_of(*choices: str) -> Validator:
    """Kafka's ValidString.in (case-sensitive, as in Kafka)."""

    def check(name: str, value: Any) -> None:
        if value not in choices:
            raise _invalid(name, value, f"string must be one of: {', '.join(choices)}")

    return check


def list_of(*choices: str) -> Validator:
    """Kafka's ValidList.in: every element must be one of the choices, and the list may not be empty."""

    def check(name: str, value: Any) -> None:
        if not value:
            raise _invalid(name, value, f"empty list; valid values are: {', '.join(choices)}")
        for item in value:
            if item not in choices:
                raise _invalid(name, value, f"{item!r} is not one of: {', '.join(choices)}")

    return check


def level_or_default(minimum: int, maximum: int, default: int) -> Validator:
    """A compression level: the codec's default or a value in its range (gzip accepts -1 beside 1..9)."""

    def check(name: str, value: Any) -> None:
        if value != default and not minimum <= value <= maximum:
            raise _invalid(name, value, f"level must be {default} or between {minimum} and {maximum}")

    return check


def _throttled_replicas(name: str, value: Any) -> None:
    """`*`, or a list of `partition:broker` pairs of non-negative integers (Kafka's ThrottledReplicaListValidator)."""
    if value == ["*"] or not value:
        return
    for item in value:
        partition, sep, broker = item.partition(":")
        if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
            raise _invalid(name, value, "must be the wildcard (*) or a list of partitionId:brokerId pairs")


class ConfigDef:
    """An ordered table of ConfigKeys: parses a mapping of raw values into validated typed values."""

    def __init__(self, keys: Iterable[ConfigKey]) -> None:
        self.keys: dict[str, ConfigKey] = {}
        for key in keys:
            if key.name in self.keys:
                raise ValueError(f"config key {key.name} defined twice")
            self.keys[key.name] = key

    def names(self) -> list[str]:
        return sorted(self.keys)

    def validate_names(self, props: Mapping[str, Any], kind: str) -> None:
        for name in props:
            if name not in self.keys:
                raise InvalidConfigurationError(f"Unknown {kind} config name: {name}")

    def parse(self, props: Mapping[str, Any]) -> dict[str, Any]:
        """Typed values for every key: the given value if present, else the default. Unknown names are ignored
        here (Kafka ignores them when building the config and rejects them separately, in validate_names)."""
        values: dict[str, Any] = {}
        for name, key in self.keys.items():
            values[name] = key.parse(props[name]) if name in props else key.default
        return values


# Defaults of Kafka 4.x (storage LogConfig, ServerLogConfigs).
DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024
DEFAULT_SEGMENT_MS = 7 * 24 * 60 * 60 * 1000
DEFAULT_RETENTION_MS = 7 * 24 * 60 * 60 * 1000
DEFAULT_DELETE_RETENTION_MS = 24 * 60 * 60 * 1000
DEFAULT_SEGMENT_INDEX_BYTES = 10 * 1024 * 1024
DEFAULT_INDEX_INTERVAL_BYTES = 4096
DEFAULT_FILE_DELETE_DELAY_MS = 60_000
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024 + 12  # one MiB plus the log overhead (offset and length) of a batch

CLEANUP_POLICY_DELETE = "delete"
CLEANUP_POLICY_COMPACT = "compact"
TIMESTAMP_TYPE_CREATE_TIME = "CreateTime"
TIMESTAMP_TYPE_LOG_APPEND_TIME = "LogAppendTime"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

LOG_CONFIG_DEF = ConfigDef(
    [
        ConfigKey("segment.bytes", ConfigType.INT, DEFAULT_SEGMENT_BYTES, at_least(1024 * 1024),
                  "The segment file size for the log; a new segment is rolled when the active one would exceed it."),
        ConfigKey("segment.ms", ConfigType.LONG, DEFAULT_SEGMENT_MS, at_least(1),
                  "Roll a new segment after this long even if the active one is not full."),
        ConfigKey("segment.jitter.ms", ConfigType.LONG, 0, at_least(0),
                  "Maximum random jitter subtracted from segment.ms so that many partitions do not roll at once."),
        ConfigKey("segment.index.bytes", ConfigType.INT, DEFAULT_SEGMENT_INDEX_BYTES, at_least(4),
                  "Size of the offset (and time) index files, pre-allocated and trimmed when the segment rolls."),
        ConfigKey("flush.messages", ConfigType.LONG, INT64_MAX, at_least(1),
                  "Force an fsync after this many messages (default: leave flushing to the OS)."),
        ConfigKey("flush.ms", ConfigType.LONG, INT64_MAX, at_least(0),
                  "Force an fsync when data has been unflushed this long (default: leave flushing to the OS)."),
        ConfigKey("retention.bytes", ConfigType.LONG, -1, None,
                  "Delete old segments when the partition grows beyond this many bytes (-1: no size limit)."),
        ConfigKey("retention.ms", ConfigType.LONG, DEFAULT_RETENTION_MS, at_least(-1),
                  "Delete segments whose newest record is older than this (-1: no time limit)."),
        ConfigKey("max.message.bytes", ConfigType.INT, DEFAULT_MAX_MESSAGE_BYTES, at_least(0),
                  "The largest record batch size allowed, after compression."),
        ConfigKey("index.interval.bytes", ConfigType.INT, DEFAULT_INDEX_INTERVAL_BYTES, at_least(0),
                  "Add an offset index entry after this many bytes of log."),
        ConfigKey("file.delete.delay.ms", ConfigType.LONG, DEFAULT_FILE_DELETE_DELAY_MS, at_least(0),
                  "Wait this long after a segment is marked .deleted before removing its files."),
        ConfigKey("delete.retention.ms", ConfigType.LONG, DEFAULT_DELETE_RETENTION_MS, at_least(0),
                  "How long tombstones are kept in a compacted log after their segment was cleaned."),
        ConfigKey("min.compaction.lag.ms", ConfigType.LONG, 0, at_least(0),
                  "Minimum time a record stays uncompacted."),
        ConfigKey("max.compaction.lag.ms", ConfigType.LONG, INT64_MAX, at_least(1),
                  "Maximum time a record may stay ineligible for compaction."),
        ConfigKey("min.cleanable.dirty.ratio", ConfigType.DOUBLE, 0.5, between(0, 1),
                  "Compact a log only when its dirty part is at least this share of it."),
        ConfigKey("cleanup.policy", ConfigType.LIST, [CLEANUP_POLICY_DELETE],
                  list_of(CLEANUP_POLICY_COMPACT, CLEANUP_POLICY_DELETE),
                  "delete (retention), compact (keep the latest value per key) or both."),
        ConfigKey("unclean.leader.election.enable", ConfigType.BOOLEAN, False, None,
                  "Allow a replica outside the ISR to become leader (may lose data)."),
        ConfigKey("min.insync.replicas", ConfigType.INT, 1, at_least(1),
                  "Minimum ISR size for an acks=all produce to succeed."),
        ConfigKey("compression.type", ConfigType.STRING, "producer", one_of(*COMPRESSION_TYPES),
                  "The codec of the stored batches; 'producer' keeps what the producer sent."),
        ConfigKey("compression.gzip.level", ConfigType.INT, -1, level_or_default(1, 9, -1),
                  "gzip level used when compression.type is gzip."),
        ConfigKey("compression.lz4.level", ConfigType.INT, 9, between(1, 17),
                  "lz4 level used when compression.type is lz4."),
        ConfigKey("compression.zstd.level", ConfigType.INT, 3, between(-131072, 22),
                  "zstd level used when compression.type is zstd."),
        ConfigKey("preallocate", ConfigType.BOOLEAN, False, None,
                  "Pre-allocate the segment file (segment.bytes) when a segment is created."),
        ConfigKey("message.timestamp.type", ConfigType.STRING, TIMESTAMP_TYPE_CREATE_TIME,
                  one_of(TIMESTAMP_TYPE_CREATE_TIME, TIMESTAMP_TYPE_LOG_APPEND_TIME),
                  "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches with the broker's time."),
        ConfigKey("message.timestamp.before.max.ms", ConfigType.LONG, INT64_MAX, at_least(0),
                  "Reject CreateTime records older than the broker's time by more than this."),
        ConfigKey("message.timestamp.after.max.ms", ConfigType.LONG, INT64_MAX, at_least(0),
                  "Reject CreateTime records newer than the broker's time by more than this."),
        ConfigKey("leader.replication.throttled.replicas", ConfigType.LIST, [], _throttled_replicas,
                  "Replicas whose replication is throttled on the leader side."),
        ConfigKey("follower.replication.throttled.replicas", ConfigType.LIST, [], _throttled_replicas,
                  "Replicas whose replication is throttled on the follower side."),
        ConfigKey("remote.storage.enable", ConfigType.BOOLEAN, False, None,
                  "Tiered storage (not supported by kfk: accepted only as false)."),
        ConfigKey("local.retention.ms", ConfigType.LONG, -2, at_least(-2),
                  "Tiered storage local retention (-2: same as retention.ms)."),
        ConfigKey("local.retention.bytes", ConfigType.LONG, -2, at_least(-2),
                  "Tiered storage local retention (-2: same as retention.bytes)."),
        ConfigKey("remote.log.copy.disable", ConfigType.BOOLEAN, False, None, "Tiered storage only."),
        ConfigKey("remote.log.delete.on.disable", ConfigType.BOOLEAN, False, None, "Tiered storage only."),
        ConfigKey("internal.segment.bytes", ConfigType.INT, None, at_least(1), internal=True,
                  doc="Overrides segment.bytes without its 1 MiB minimum; for tests only, as in Kafka."),
    ]
)


@dataclasses.dataclass(frozen=True)
class LogConfig:
    """A topic's log configuration: Kafka's topic-level keys as typed attributes.

    Build it with `LogConfig.from_properties({...})` (strings or Python values, Kafka's names); `LogConfig()` is
    Kafka's defaults. `overridden_configs` holds the keys that were set explicitly (DescribeConfigs reports those
    as DYNAMIC_TOPIC_CONFIG and the rest as defaults).
    """

    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    segment_ms: int = DEFAULT_SEGMENT_MS
    segment_jitter_ms: int = 0
    segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES
    flush_messages: int = INT64_MAX
    flush_ms: int = INT64_MAX
    retention_bytes: int = -1
    retention_ms: int = DEFAULT_RETENTION_MS
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES
    file_delete_delay_ms: int = DEFAULT_FILE_DELETE_DELAY_MS
    delete_retention_ms: int = DEFAULT_DELETE_RETENTION_MS
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = INT64_MAX
    min_cleanable_dirty_ratio: float = 0.5
    cleanup_policy: tuple[str, ...] = (CLEANUP_POLICY_DELETE,)
    unclean_leader_election_enable: bool = False
    min_insync_replicas: int = 1
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    preallocate: bool = False
    message_timestamp_type: str = TIMESTAMP_TYPE_CREATE_TIME
    message_timestamp_before_max_ms: int = INT64_MAX
    message_timestamp_after_max_ms: int = INT64_MAX
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    internal_segment_bytes: int | None = None
    overridden_configs: frozenset[str] = frozenset()

    @classmethod
    def from_properties(
        cls, props: Mapping[str, Any], defaults: Mapping[str, Any] | None = None
    ) -> LogConfig:
        """Validate Kafka-named properties (overrides on top of `defaults`, e.g. the broker's log.* values mapped
        to topic names) and build the config. Raises InvalidConfigurationError for an unknown name, a value of the
        wrong type or range, or min.compaction.lag.ms above max.compaction.lag.ms."""
        LOG_CONFIG_DEF.validate_names(props, "topic")
        merged = dict(defaults or {})
        merged.update(props)
        values = LOG_CONFIG_DEF.parse(merged)
        if values["min.compaction.lag.ms"] > values["max.compaction.lag.ms"]:
            raise InvalidConfigurationError(
                f"conflict topic config setting min.compaction.lag.ms ({values['min.compaction.lag.ms']}) > "
                f"max.compaction.lag.ms ({values['max.compaction.lag.ms']})"
            )
        if values["remote.storage.enable"]:
            raise InvalidConfigurationError("remote.storage.enable=true: tiered storage is not supported by kfk")
        fields: dict[str, Any] = {}
        for name, value in values.items():
            fields[LOG_CONFIG_DEF.keys[name].attribute] = tuple(value) if isinstance(value, list) else value
        return cls(**fields, overridden_configs=frozenset(props))

    def to_properties(self) -> dict[str, str]:
        """Every non-internal key with its value as Kafka prints it (DescribeConfigs, `kfk configs --describe`)."""
        result: dict[str, str] = {}
        for name, key in LOG_CONFIG_DEF.keys.items():
            if key.internal:
                continue
            value = getattr(self, key.attribute)
            if isinstance(value, bool):
                result[name] = "true" if value else "false"
            elif isinstance(value, tuple):
                result[name] = ",".join(value)
            else:
                result[name] = str(value)
        return result

    @property
    def segment_size(self) -> int:
        """The roll size in bytes: internal.segment.bytes when a test set it, else segment.bytes."""
        return self.internal_segment_bytes if self.internal_segment_bytes is not None else self.segment_bytes

    @property
    def compact(self) -> bool:
        return CLEANUP_POLICY_COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return CLEANUP_POLICY_DELETE in self.cleanup_policy

    @property
    def max_segment_ms(self) -> int:
        """segment.ms, capped by max.compaction.lag.ms on compacted topics (so dirty data becomes cleanable)."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @property
    def init_file_size(self) -> int:
        """Bytes to pre-allocate for a new segment file (only with preallocate=true)."""
        return self.segment_size if self.preallocate else 0

