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
import functools
import logging
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kfk.common.constants import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from kfk.config_support import BROKER_UNSUPPORTED, TOPIC_UNSUPPORTED
from kfk.errors import InvalidConfigurationError

_log = logging.getLogger(__name__)


class ConfigType(enum.Enum):
    """The value types of Kafka's ConfigDef, with the same parsing rules (strings are trimmed first)."""

    BOOLEAN = "boolean"
    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    STRING = "string"
    LIST = "list"
    CLASS = "class"  # a Java class name: kfk keeps it as a string
    PASSWORD = "password"  # a string that DescribeConfigs never shows (sensitive)


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


def _java_text(value: Any) -> str:
    """A value as Java's toString prints it in Kafka's ConfigException (lists as [a, b], booleans lower-case)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(_java_text, value)) + "]"
    return str(value)


def _invalid(name: str, value: Any, reason: str) -> InvalidConfigurationError:
    """Kafka's ConfigException(name, value, message) text."""
    return InvalidConfigurationError(f"Invalid value {_java_text(value)} for configuration {name}: {reason}")


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
        raise _invalid(name, value, "Expected value to be either true or false")
    if config_type in (ConfigType.INT, ConfigType.LONG):
        low, high = (INT32_MIN, INT32_MAX) if config_type is ConfigType.INT else (INT64_MIN, INT64_MAX)
        if isinstance(value, bool):
            raise _invalid(name, value, f"Expected value to be a {config_type.name} number")
        if isinstance(value, int):
            number = value
        elif isinstance(value, str):
            try:
                number = int(value, 10)
            except ValueError:
                raise _invalid(name, value, f"Not a number of type {config_type.name}") from None
        else:
            raise _invalid(name, value, f"Expected value to be a {config_type.name} number")
        if not low <= number <= high:
            raise _invalid(name, value, f"Not a number of type {config_type.name}")
        return number
    if config_type is ConfigType.DOUBLE:
        if isinstance(value, bool):
            raise _invalid(name, value, "Expected value to be a DOUBLE number")
        if isinstance(value, (int, float)):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                raise _invalid(name, value, "Not a number of type DOUBLE") from None
        else:
            raise _invalid(name, value, "Expected value to be a DOUBLE number")
        if math.isnan(number):
            raise _invalid(name, value, "Not a number of type DOUBLE")
        return number
    if config_type in (ConfigType.STRING, ConfigType.CLASS, ConfigType.PASSWORD):
        if not isinstance(value, str):
            raise _invalid(name, value, "Expected value to be a string")
        return value
    if config_type is ConfigType.LIST:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",")] if value else []
        if isinstance(value, (list, tuple)):
            if not all(isinstance(item, str) for item in value):
                raise _invalid(name, value, "Expected a comma separated list.")
            return [item.strip() for item in value]
        raise _invalid(name, value, "Expected a comma separated list.")
    raise AssertionError(config_type)  # every ConfigType is handled above


def at_least(minimum: float) -> Validator:
    """Kafka's Range.atLeast."""

    def check(name: str, value: Any) -> None:
        if value < minimum:
            raise _invalid(name, value, f"Value must be at least {minimum}")

    return check


def between(minimum: float, maximum: float) -> Validator:
    """Kafka's Range.between (both ends included; each end says which it is)."""

    def check(name: str, value: Any) -> None:
        if value < minimum:
            raise _invalid(name, value, f"Value must be at least {minimum}")
        if value > maximum:
            raise _invalid(name, value, f"Value must be no more than {maximum}")

    return check


def one_of(*choices: str) -> Validator:
    """Kafka's ValidString.in (case-sensitive, as in Kafka)."""

    def check(name: str, value: Any) -> None:
        if value not in choices:
            raise _invalid(name, value, f"String must be one of: {', '.join(choices)}")

    return check


def one_of_case_insensitive(*choices: str) -> Validator:
    """Kafka's CaseInsensitiveValidString.in (group.protocol: classic or CONSUMER alike)."""
    folded = {choice.lower() for choice in choices}

    def check(name: str, value: Any) -> None:
        if not isinstance(value, str) or value.lower() not in folded:
            raise _invalid(name, value, f"String must be one of (case insensitive): {', '.join(choices)}")

    return check


def list_of(*choices: str, allow_empty: bool = False) -> Validator:
    """Kafka's ValidList.in: every element must be one of the choices; the list may be empty only if allowed."""

    def check(name: str, value: Any) -> None:
        if not value and not allow_empty:
            raise InvalidConfigurationError(f"Configuration '{name}' must not be empty. Valid values include: "
                                            f"{_java_text(list(choices))}")
        for item in value:
            if item not in choices:
                raise _invalid(name, item, f"String must be one of: {', '.join(choices)}")

    return check


def at_most_elements(maximum: int) -> Validator:
    """Kafka's ListSize.atMostOfSize."""

    def check(name: str, value: Any) -> None:
        if len(value) > maximum:
            raise _invalid(name, value, f"exceeds maximum list size of [{maximum}].")

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


#: Kafka's Records.LOG_OVERHEAD (a record batch's offset and length fields): the smallest segment size it accepts.
RECORDS_LOG_OVERHEAD = 12
#: Kafka's default of the internal metadata.log.segment.min.bytes: metadata.log.segment.bytes may not be lower.
METADATA_LOG_SEGMENT_MIN_BYTES = 8 * 1024 * 1024

# Defaults of Kafka 4.x (storage LogConfig, ServerLogConfigs).
DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024
MIN_SEGMENT_BYTES = 1024 * 1024  # segment.bytes' floor (internal.segment.bytes has none)
DEFAULT_SEGMENT_MS = 7 * 24 * 60 * 60 * 1000
DEFAULT_RETENTION_MS = 7 * 24 * 60 * 60 * 1000
DEFAULT_DELETE_RETENTION_MS = 24 * 60 * 60 * 1000
# Kafka 4.0 bounds future timestamps by default (an hour; it was unbounded before): a producer whose clock runs far
# ahead would otherwise push time-based retention and the time index off for everyone.
DEFAULT_MESSAGE_TIMESTAMP_AFTER_MAX_MS = 60 * 60 * 1000
DEFAULT_SEGMENT_INDEX_BYTES = 10 * 1024 * 1024
DEFAULT_INDEX_INTERVAL_BYTES = 4096
DEFAULT_FILE_DELETE_DELAY_MS = 60_000
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024 + 12  # one MiB plus the log overhead (offset and length) of a batch
#: Kafka 4.4's bound on one record's decompressed size: the largest Java array.
DEFAULT_MAX_DECOMPRESSED_MESSAGE_BYTES = 2**31 - 1 - 8

CLEANUP_POLICY_DELETE = "delete"
CLEANUP_POLICY_COMPACT = "compact"
TIMESTAMP_TYPE_CREATE_TIME = "CreateTime"
TIMESTAMP_TYPE_LOG_APPEND_TIME = "LogAppendTime"
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")

LOG_CONFIG_DEF = ConfigDef(
    [
        ConfigKey("segment.bytes", ConfigType.INT, DEFAULT_SEGMENT_BYTES, at_least(MIN_SEGMENT_BYTES),
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
                  list_of(CLEANUP_POLICY_COMPACT, CLEANUP_POLICY_DELETE, allow_empty=True),
                  "delete (retention), compact (keep the latest value per key), both, or neither (empty: the log "
                  "keeps everything, as Kafka 4.x allows)."),
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
        ConfigKey("message.timestamp.after.max.ms", ConfigType.LONG, DEFAULT_MESSAGE_TIMESTAMP_AFTER_MAX_MS,
                  at_least(0),
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
        ConfigKey("remote.copy.lag.ms", ConfigType.LONG, 0, at_least(-1),
                  "Tiered storage only: how old a segment must be before it is copied to remote storage."),
        ConfigKey("remote.copy.lag.bytes", ConfigType.LONG, -1, at_least(-1),
                  "Tiered storage only: how many bytes must follow a segment before it is copied to remote storage."),
        ConfigKey("max.decompressed.message.bytes", ConfigType.INT, DEFAULT_MAX_DECOMPRESSED_MESSAGE_BYTES,
                  at_least(0), "The largest decompressed record the broker accepts (Kafka 4.4)."),
        ConfigKey("errors.deadletterqueue.group.enable", ConfigType.BOOLEAN, False, None,
                  "Share groups only: whether share groups may use the topic as their dead-letter queue."),
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
    message_timestamp_after_max_ms: int = DEFAULT_MESSAGE_TIMESTAMP_AFTER_MAX_MS
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False
    remote_copy_lag_ms: int = 0
    remote_copy_lag_bytes: int = -1
    max_decompressed_message_bytes: int = DEFAULT_MAX_DECOMPRESSED_MESSAGE_BYTES
    errors_deadletterqueue_group_enable: bool = False
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
        for name, support in TOPIC_UNSUPPORTED.items():
            key = LOG_CONFIG_DEF.keys[name]
            if support.refuse and not support.accepts(values[name], key.default):
                raise InvalidConfigurationError(support.message(name, values[name]))
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



# ---------------------------------------------------------------------------------------------------------------
# Broker configuration (server.properties): Kafka's KafkaConfig names and defaults.

#: Kafka's security protocols (a listener's, in listener.security.protocol.map; a client's security.protocol).
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

#: Broker keys that a listener may override as listener.name.<listener, lower case>.<key>.
LISTENER_CONFIGS = ("max.connections", "max.connection.creation.rate")
LISTENER_PREFIX = "listener.name."


def _parse_voter(entry: str) -> tuple[int, tuple[str, int]]:
    """One controller.quorum.voters entry, id@host:port (the host may be a bracketed IPv6 address)."""
    node_id, at, address = entry.strip().partition("@")
    host, colon, port = address.rpartition(":")
    if not at or not colon or not node_id.strip().isdigit() or not port.isdigit() or not host \
            or not 0 < int(port) < 65536:
        raise InvalidConfigurationError(f"Invalid value {entry} for configuration controller.quorum.voters: "
                                        "an entry is not id@host:port")
    return int(node_id), (host.strip("[]"), int(port))


def parse_quorum_voters(entries: Iterable[str]) -> dict[int, tuple[str, int]]:
    """controller.quorum.voters (Kafka's `id@host:port,...`, KIP-595 static voters) as {voter id: (host, port)}: the
    one parser of it, for the server's role checks and for the Raft quorum alike."""
    voters: dict[int, tuple[str, int]] = {}
    for entry in entries:
        if not entry.strip():
            continue
        node_id, address = _parse_voter(entry)
        if node_id in voters:
            raise InvalidConfigurationError(f"Invalid value {','.join(entries)} for configuration "
                                            f"controller.quorum.voters: voter {node_id} is listed twice")
        voters[node_id] = address
    return voters


def parse_host_counts(text: str) -> dict[str, int]:
    """max.connections.per.ip.overrides: `host:count,...` as {host: count}."""
    counts: dict[str, int] = {}
    for entry in filter(None, (item.strip() for item in text.split(","))):
        host, colon, count = entry.rpartition(":")
        if not colon or not host.strip() or not count.strip().isdigit():
            raise _invalid("max.connections.per.ip.overrides", text, f"{entry!r} is not host:count")
        counts[host.strip().strip("[]")] = int(count)
    return counts


def _host_counts(name: str, value: Any) -> None:
    parse_host_counts(value)

DEFAULT_LOG_DIR = "/tmp/kafka-logs"
LONG_MAX = INT64_MAX
DOUBLE_MAX = sys.float_info.max  # Java's Double.MAX_VALUE


_B, _I, _L, _D, _S, _LIST, _C, _P = (ConfigType.BOOLEAN, ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE,
                                     ConfigType.STRING, ConfigType.LIST, ConfigType.CLASS, ConfigType.PASSWORD)

#: The other broker configs of Kafka 4.0's broker configuration reference, with their types and defaults (a short
#: is kept as an int): kfk accepts them in server.properties, checks their types and describes them as Kafka does.
#: Some govern kfk's behaviour (the controller.quorum.* timeouts, the ssl.* and sasl.* keys kfk.security reads...);
#: the others (quotas of features kfk lacks, metrics reporters, tiered storage, the KIP-848 consumer protocol, share
#: groups...) are refused or warned about when set to another value than their default: kfk.config_support says
#: which, key by key. (There is no controller.quorum.append.linger.ms: kfk's controller commits one write before it
#: computes the next, so a Raft leader would have nothing to accumulate, only latency to add.)
ACCEPTED_BROKER_KEYS: tuple[tuple[str, ConfigType, Any], ...] = (
    ("add.partitions.to.txn.retry.backoff.max.ms", _I, 100),
    ("add.partitions.to.txn.retry.backoff.ms", _I, 20),
    ("alter.config.policy.class.name", _C, None),
    ("alter.log.dirs.replication.quota.window.num", _I, 11),
    ("alter.log.dirs.replication.quota.window.size.seconds", _I, 1),
    ("background.threads", _I, 10),
    ("broker.heartbeat.interval.ms", _I, 2000),
    ("broker.session.timeout.ms", _I, 9000),
    ("client.quota.callback.class", _C, None),
    ("connection.failed.authentication.delay.ms", _I, 100),
    ("connections.max.reauth.ms", _L, 0),
    ("controller.quorum.election.backoff.max.ms", _I, 1000),
    ("controller.quorum.election.timeout.ms", _I, 1000),
    ("controller.quorum.fetch.timeout.ms", _I, 2000),
    ("controller.quorum.request.timeout.ms", _I, 2000),
    ("controller.quorum.retry.backoff.ms", _I, 20),
    ("controller.quota.window.num", _I, 11),
    ("controller.quota.window.size.seconds", _I, 1),
    ("controller.socket.timeout.ms", _I, 30000),
    ("create.topic.policy.class.name", _C, None),
    ("delete.records.purgatory.purge.interval.requests", _I, 1),
    ("early.start.listeners", _S, None),
    ("fetch.purgatory.purge.interval.requests", _I, 1000),
    ("group.consumer.assignors", _LIST, ["uniform", "range"]),
    ("group.consumer.heartbeat.interval.ms", _I, 5000),
    ("group.consumer.max.heartbeat.interval.ms", _I, 15000),
    ("group.consumer.max.session.timeout.ms", _I, 60000),
    ("group.consumer.max.size", _I, INT32_MAX),
    ("group.consumer.migration.policy", _S, "bidirectional"),
    ("group.consumer.min.heartbeat.interval.ms", _I, 5000),
    ("group.consumer.min.session.timeout.ms", _I, 45000),
    ("group.consumer.session.timeout.ms", _I, 45000),
    ("group.coordinator.append.linger.ms", _I, 5),
    ("group.coordinator.rebalance.protocols", _LIST, ["classic", "consumer"]),
    ("group.coordinator.threads", _I, 4),
    ("group.share.delivery.count.limit", _I, 5),
    ("group.share.heartbeat.interval.ms", _I, 5000),
    ("group.share.max.groups", _I, 10),
    ("group.share.max.heartbeat.interval.ms", _I, 15000),
    ("group.share.max.record.lock.duration.ms", _I, 60000),
    ("group.share.max.session.timeout.ms", _I, 60000),
    ("group.share.max.share.sessions", _I, 2000),
    ("group.share.max.size", _I, 200),
    ("group.share.min.heartbeat.interval.ms", _I, 5000),
    ("group.share.min.record.lock.duration.ms", _I, 15000),
    ("group.share.min.session.timeout.ms", _I, 45000),
    ("group.share.partition.max.record.locks", _I, 2000),
    ("group.share.record.lock.duration.ms", _I, 30000),
    ("group.share.session.timeout.ms", _I, 45000),
    ("initial.broker.registration.timeout.ms", _I, 60000),
    ("kafka.metrics.polling.interval.secs", _I, 10),
    ("kafka.metrics.reporters", _LIST, []),
    ("log.cleaner.dedupe.buffer.size", _L, 134217728),
    ("log.cleaner.io.buffer.load.factor", _D, 0.9),
    ("log.cleaner.io.buffer.size", _I, 524288),
    ("log.dir.failure.timeout.ms", _L, 30000),
    ("log.local.retention.bytes", _L, -2),
    ("log.local.retention.ms", _L, -2),
    ("log.remote.copy.lag.bytes", _L, -1),
    ("log.remote.copy.lag.ms", _L, 0),
    ("max.decompressed.message.bytes", _I, DEFAULT_MAX_DECOMPRESSED_MESSAGE_BYTES),
    ("metadata.log.dir", _S, None),
    ("metadata.log.max.record.bytes.between.snapshots", _L, 20971520),
    ("metadata.log.max.snapshot.interval.ms", _L, 3600000),
    ("metadata.log.segment.ms", _L, 604800000),
    ("metadata.max.idle.interval.ms", _I, 500),
    ("metadata.max.retention.bytes", _L, 104857600),
    ("metadata.max.retention.ms", _L, 604800000),
    ("metric.reporters", _LIST, ["org.apache.kafka.common.metrics.JmxReporter"]),
    ("metrics.num.samples", _I, 2),
    ("metrics.recording.level", _S, "INFO"),
    ("metrics.sample.window.ms", _L, 30000),
    ("num.replica.alter.log.dirs.threads", _I, None),
    ("offsets.load.buffer.size", _I, 5242880),
    ("offsets.topic.compression.codec", _I, 0),
    ("principal.builder.class", _C,
     "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"),
    ("producer.purgatory.purge.interval.requests", _I, 1000),
    ("queued.max.requests", _I, 500),
    ("quota.window.num", _I, 11),
    ("quota.window.size.seconds", _I, 1),
    ("remote.fetch.max.wait.ms", _I, 500),
    ("remote.list.offsets.request.timeout.ms", _L, 30000),
    ("remote.log.index.file.cache.total.size.bytes", _L, 1073741824),
    ("remote.log.manager.copier.thread.pool.size", _I, 10),
    ("remote.log.manager.copy.max.bytes.per.second", _L, INT64_MAX),
    ("remote.log.manager.copy.quota.window.num", _I, 11),
    ("remote.log.manager.copy.quota.window.size.seconds", _I, 1),
    ("remote.log.manager.expiration.thread.pool.size", _I, 10),
    ("remote.log.manager.fetch.max.bytes.per.second", _L, INT64_MAX),
    ("remote.log.manager.fetch.quota.window.num", _I, 11),
    ("remote.log.manager.fetch.quota.window.size.seconds", _I, 1),
    ("remote.log.manager.task.interval.ms", _L, 30000),
    ("remote.log.manager.thread.pool.size", _I, 2),
    ("remote.log.metadata.custom.metadata.max.bytes", _I, 128),
    ("remote.log.metadata.manager.class.name", _S,
     "org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager"),
    ("remote.log.metadata.manager.class.path", _S, None),
    ("remote.log.metadata.manager.impl.prefix", _S, "rlmm.config."),
    ("remote.log.metadata.manager.listener.name", _S, None),
    ("remote.log.reader.max.pending.tasks", _I, 100),
    ("remote.log.reader.threads", _I, 10),
    ("remote.log.storage.manager.class.name", _S, None),
    ("remote.log.storage.manager.class.path", _S, None),
    ("remote.log.storage.manager.impl.prefix", _S, "rsm.config."),
    ("remote.log.storage.system.enable", _B, False),
    ("replica.selector.class", _S, None),
    ("replica.socket.receive.buffer.bytes", _I, 65536),
    ("replica.socket.timeout.ms", _I, 30000),
    ("replication.quota.window.num", _I, 11),
    ("replication.quota.window.size.seconds", _I, 1),
    ("request.timeout.ms", _I, 30000),
    ("sasl.client.callback.handler.class", _C, None),
    ("sasl.enabled.mechanisms", _LIST, ["GSSAPI"]),
    ("sasl.jaas.config", _P, None),
    ("sasl.kerberos.kinit.cmd", _S, "/usr/bin/kinit"),
    ("sasl.kerberos.min.time.before.relogin", _L, 60000),
    ("sasl.kerberos.principal.to.local.rules", _LIST, ["DEFAULT"]),
    ("sasl.kerberos.service.name", _S, None),
    ("sasl.kerberos.ticket.renew.jitter", _D, 0.05),
    ("sasl.kerberos.ticket.renew.window.factor", _D, 0.8),
    ("sasl.login.callback.handler.class", _C, None),
    ("sasl.login.class", _C, None),
    ("sasl.login.connect.timeout.ms", _I, None),
    ("sasl.login.read.timeout.ms", _I, None),
    ("sasl.login.refresh.buffer.seconds", _I, 300),
    ("sasl.login.refresh.min.period.seconds", _I, 60),
    ("sasl.login.refresh.window.factor", _D, 0.8),
    ("sasl.login.refresh.window.jitter", _D, 0.05),
    ("sasl.login.retry.backoff.max.ms", _L, 10000),
    ("sasl.login.retry.backoff.ms", _L, 100),
    ("sasl.mechanism.controller.protocol", _S, "GSSAPI"),
    ("sasl.mechanism.inter.broker.protocol", _S, "GSSAPI"),
    ("sasl.oauthbearer.clock.skew.seconds", _I, 30),
    ("sasl.oauthbearer.expected.audience", _LIST, None),
    ("sasl.oauthbearer.expected.issuer", _S, None),
    ("sasl.oauthbearer.jwks.endpoint.refresh.ms", _L, 3600000),
    ("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", _L, 10000),
    ("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", _L, 100),
    ("sasl.oauthbearer.jwks.endpoint.url", _S, None),
    ("sasl.oauthbearer.scope.claim.name", _S, "scope"),
    ("sasl.oauthbearer.sub.claim.name", _S, "sub"),
    ("sasl.oauthbearer.token.endpoint.url", _S, None),
    ("sasl.server.callback.handler.class", _C, None),
    ("security.inter.broker.protocol", _S, "PLAINTEXT"),
    ("security.providers", _S, None),
    ("share.coordinator.append.linger.ms", _I, 10),
    ("share.coordinator.load.buffer.size", _I, 5242880),
    ("share.coordinator.state.topic.compression.codec", _I, 0),
    ("share.coordinator.threads", _I, 1),
    ("share.fetch.purgatory.purge.interval.requests", _I, 1000),
    ("socket.connection.setup.timeout.max.ms", _L, 30000),
    ("socket.connection.setup.timeout.ms", _L, 10000),
    ("socket.listen.backlog.size", _I, 50),
    ("ssl.allow.dn.changes", _B, False),
    ("ssl.allow.san.changes", _B, False),
    ("ssl.cipher.suites", _LIST, []),
    ("ssl.client.auth", _S, "none"),
    ("ssl.enabled.protocols", _LIST, ["TLSv1.2", "TLSv1.3"]),
    ("ssl.endpoint.identification.algorithm", _S, "https"),
    ("ssl.engine.factory.class", _C, None),
    ("ssl.key.password", _P, None),
    ("ssl.keymanager.algorithm", _S, "SunX509"),
    ("ssl.keystore.certificate.chain", _P, None),
    ("ssl.keystore.key", _P, None),
    ("ssl.keystore.location", _S, None),
    ("ssl.keystore.password", _P, None),
    ("ssl.keystore.type", _S, "JKS"),
    ("ssl.principal.mapping.rules", _S, "DEFAULT"),
    ("ssl.protocol", _S, "TLSv1.3"),
    ("ssl.provider", _S, None),
    ("ssl.secure.random.implementation", _S, None),
    ("ssl.trustmanager.algorithm", _S, "PKIX"),
    ("ssl.truststore.certificates", _P, None),
    ("ssl.truststore.location", _S, None),
    ("ssl.truststore.password", _P, None),
    ("ssl.truststore.type", _S, "JKS"),
    ("telemetry.max.bytes", _I, 1048576),
    ("transaction.state.log.load.buffer.size", _I, 5242880),
)

#: The broker configs whose "Update Mode" in Kafka 4.0's broker configuration reference is per-broker or
#: cluster-wide: Kafka updates them without a restart. Every other broker config is read-only there (among them
#: log.retention.hours/minutes and log.roll.hours, whose .ms synonyms are the dynamic ones), and DescribeConfigs
#: says so.
DYNAMIC_BROKER_CONFIGS: frozenset[str] = frozenset({
    # the broker defaults of topic configs
    "compression.type", "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
    "log.cleaner.delete.retention.ms", "log.cleaner.max.compaction.lag.ms", "log.cleaner.min.cleanable.ratio",
    "log.cleaner.min.compaction.lag.ms", "log.cleanup.policy", "log.flush.interval.messages",
    "log.flush.interval.ms", "log.index.interval.bytes", "log.index.size.max.bytes", "log.local.retention.bytes",
    "log.local.retention.ms", "log.message.timestamp.after.max.ms", "log.message.timestamp.before.max.ms",
    "log.message.timestamp.type", "log.preallocate", "log.retention.bytes", "log.retention.ms",
    "log.roll.jitter.ms", "log.roll.ms", "log.segment.bytes", "log.segment.delete.delay.ms", "message.max.bytes",
    "min.insync.replicas", "unclean.leader.election.enable", "log.remote.copy.lag.bytes", "log.remote.copy.lag.ms",
    "max.decompressed.message.bytes",
    # thread pools and the log cleaner
    "background.threads", "num.io.threads", "num.network.threads", "num.recovery.threads.per.data.dir",
    "num.replica.fetchers", "log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor", "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.threads",
    # listeners and connections
    "listeners", "listener.security.protocol.map", "max.connection.creation.rate", "max.connections",
    "max.connections.per.ip", "max.connections.per.ip.overrides", "principal.builder.class",
    # SASL and SSL
    "sasl.enabled.mechanisms", "sasl.jaas.config", "sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules", "sasl.kerberos.service.name", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.mechanism.inter.broker.protocol", "ssl.cipher.suites", "ssl.client.auth", "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm", "ssl.engine.factory.class", "ssl.key.password",
    "ssl.keymanager.algorithm", "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.location",
    "ssl.keystore.password", "ssl.keystore.type", "ssl.protocol", "ssl.provider", "ssl.secure.random.implementation",
    "ssl.trustmanager.algorithm", "ssl.truststore.certificates", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.type",
    # metrics, producer state, transactions, tiered storage
    "metric.reporters", "producer.id.expiration.ms", "transaction.partition.verification.enable",
    "remote.fetch.max.wait.ms", "remote.list.offsets.request.timeout.ms",
    "remote.log.index.file.cache.total.size.bytes", "remote.log.manager.copier.thread.pool.size",
    "remote.log.manager.copy.max.bytes.per.second", "remote.log.manager.expiration.thread.pool.size",
    "remote.log.manager.fetch.max.bytes.per.second", "remote.log.reader.threads",
})

#: Dynamic broker configs that are not KafkaConfig keys: the replication throttles (bytes/s, a long >= 0) that
#: reassignments set per broker or cluster-wide (Kafka's DynamicConfig.Broker).
THROTTLED_RATE_CONFIGS: dict[str, ConfigKey] = {
    name: ConfigKey(name, ConfigType.LONG, None, at_least(0))
    for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
}

_LISTENER = re.compile(r"[A-Za-z0-9_]+://(\[[0-9A-Fa-f:.]+\]|[^:\[\]]*):[0-9]+")

#: Dynamic broker configs that only make sense for one broker (its own listeners, keystores): Kafka refuses them
#: at the cluster-wide default (resource name "").
PER_BROKER_CONFIGS: frozenset[str] = frozenset(
    {"advertised.listeners", "listeners", "listener.security.protocol.map", "principal.builder.class"}
    | {name for name in DYNAMIC_BROKER_CONFIGS if name.startswith(("ssl.", "sasl."))}
) - {"max.connections", "max.connection.creation.rate", "num.network.threads"}

#: The key stores and passwords (Kafka's SslConfigs.RECONFIGURABLE_CONFIGS): dynamic only per listener
#: (listener.name.<listener>.ssl.keystore.location), never under their bare name.
LISTENER_ONLY_SECURITY_CONFIGS: frozenset[str] = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.keystore.key",
    "ssl.keystore.certificate.chain", "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.truststore.certificates",
})


def validate_dynamic_broker_configs(props: Mapping[str, str], per_broker: bool) -> None:
    """Raise InvalidConfigurationError unless `props` (a broker's whole dynamic set after a change) may be set at
    run time: Kafka's DynamicBrokerConfig.validateConfigs, in its order (read-only keys, bare security keys, values,
    per-broker keys at the default). Kafka answers all of these with INVALID_REQUEST (the caller's job); its
    messages list the names as a Scala Set, kfk lists them comma-separated. Unlike Kafka, a name that is no broker
    config at all is refused (Kafka stores it unread: a typo would silently do nothing), and so is a value kfk
    refuses at start-up too (BrokerConfig.check_supported: a feature kfk does not have, a Java plug-in)."""
    def check(names: Iterable[str], message: str) -> None:
        names = sorted(names)
        if names:
            raise InvalidConfigurationError(f"{message}: {', '.join(names)}")

    check((name for name in props if name in BROKER_CONFIG_DEF.keys and name not in DYNAMIC_BROKER_CONFIGS),
          "Cannot update these configs dynamically")
    check((name for name in props if name in LISTENER_ONLY_SECURITY_CONFIGS),
          "These security configs can be dynamically updated only per-listener using the listener prefix")
    check((name for name in props if name not in BROKER_CONFIG_DEF.keys and name not in THROTTLED_RATE_CONFIGS),
          "Unknown broker configs")
    for name, value in props.items():
        parsed = (THROTTLED_RATE_CONFIGS.get(name) or BROKER_CONFIG_DEF.keys[name]).parse(value)
        support = BROKER_UNSUPPORTED.get(name)
        if support is not None and support.refuse and not support.accepts(parsed, BROKER_CONFIG_DEF.keys[name].default):
            raise InvalidConfigurationError(support.message(name, parsed))
        if name == "listeners":
            bad = [entry for entry in parsed if not _LISTENER.fullmatch(entry.strip())]
            if bad:
                raise InvalidConfigurationError(f"Invalid value {value} for configuration listeners: "
                                                f"{', '.join(bad)} is not NAME://host:port")
    if not per_broker:
        check((name for name in props if name in PER_BROKER_CONFIGS),
              "Cannot update these configs at default cluster level, broker id must be specified")


def _accepted_key_doc(name: str) -> str:
    """The description of a key of ACCEPTED_BROKER_KEYS: what kfk does with it (kfk.config_support)."""
    support = BROKER_UNSUPPORTED.get(name)
    if support is None:
        return "As in Kafka 4.x."
    return f"Accepted as in Kafka 4.x, at its default; kfk does not act on it: {support.why}."


BROKER_CONFIG_DEF = ConfigDef(
    [
        # Roles and identity (KRaft)
        ConfigKey("node.id", ConfigType.INT, -1, None, "The node id of this server (required with process.roles)."),
        ConfigKey("broker.id", ConfigType.INT, -1, None, "Alias of node.id (ZooKeeper mode)."),
        ConfigKey("process.roles", ConfigType.LIST, [], list_of("broker", "controller"),
                  "broker, controller, or both (combined mode)."),
        ConfigKey("broker.rack", ConfigType.STRING, None, None, "The rack of this broker, for rack-aware placement."),
        ConfigKey("controller.listener.names", ConfigType.LIST, [], None,
                  "Listeners used by the controller (KRaft)."),
        ConfigKey("controller.quorum.voters", ConfigType.LIST, [], None, "Static quorum voters: id@host:port,..."),
        ConfigKey("controller.quorum.bootstrap.servers", ConfigType.LIST, [], None,
                  "Bootstrap addresses of the controller quorum."),
        ConfigKey("zookeeper.connect", ConfigType.STRING, None, None,
                  "ZooKeeper connection string (host:port[,host:port][/chroot]); selects the ZooKeeper backend."),
        ConfigKey("zookeeper.session.timeout.ms", ConfigType.INT, 18000, at_least(1), "ZooKeeper session timeout."),
        ConfigKey("zookeeper.connection.timeout.ms", ConfigType.INT, None, None,
                  "Time to wait for a ZooKeeper connection (default: the session timeout)."),
        # Network
        ConfigKey("listeners", ConfigType.LIST, ["PLAINTEXT://:9092"], None, "NAME://host:port listeners."),
        ConfigKey("advertised.listeners", ConfigType.LIST, None, None,
                  "Listeners published to clients (default: listeners)."),
        ConfigKey("listener.security.protocol.map", ConfigType.LIST,
                  ["CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT",
                   "SASL_SSL:SASL_SSL"], None, "Listener name to security protocol."),
        ConfigKey("inter.broker.listener.name", ConfigType.STRING, None, None,
                  "Listener brokers use between themselves."),
        ConfigKey("socket.request.max.bytes", ConfigType.INT, 100 * 1024 * 1024, at_least(1),
                  "The largest request the broker reads; a larger frame closes the connection."),
        ConfigKey("sasl.server.max.receive.size", ConfigType.INT, 524288, None,
                  "The largest frame a SASL listener reads before its connection is authenticated (and while it "
                  "re-authenticates); a larger size prefix closes the connection before the frame is read."),
        ConfigKey("socket.send.buffer.bytes", ConfigType.INT, 100 * 1024, None, "SO_SNDBUF (-1: OS default)."),
        ConfigKey("socket.receive.buffer.bytes", ConfigType.INT, 100 * 1024, None, "SO_RCVBUF (-1: OS default)."),
        ConfigKey("connections.max.idle.ms", ConfigType.LONG, 600000, at_least(1),
                  "Close connections idle for longer than this."),
        ConfigKey("socket.request.receive.timeout.ms", ConfigType.INT, 30000, at_least(1),
                  "kfk's own: close a connection whose request frame (size and body) is not complete this long after "
                  "its first bytes arrived, freeing the frame's memory (a peer that announces a large request and "
                  "stalls holds it no longer). Time the broker itself stopped reading does not count."),
        ConfigKey("metrics.port", ConfigType.INT, 0, between(0, 65535),
                  "kfk's own: serve the broker's metrics in Prometheus text format on this port (GET /metrics); 0: "
                  "no metrics endpoint."),
        ConfigKey("metrics.host", ConfigType.STRING, "127.0.0.1", None,
                  "kfk's own: the address the metrics endpoint binds (0.0.0.0 for every interface)."),
        ConfigKey("queued.max.request.bytes", ConfigType.LONG, -1, None,
                  "Bytes of requests the broker holds (being received, queued, being handled) before it stops "
                  "reading more; -1: no bound besides memory growing with the bytes received."),
        ConfigKey("max.connections", ConfigType.INT, INT32_MAX, at_least(0),
                  "Connections the broker accepts at once (listener.name.NAME.max.connections per listener); the "
                  "inter-broker listener may exceed it by closing the least recently active other connection."),
        ConfigKey("max.connections.per.ip", ConfigType.INT, INT32_MAX, at_least(0),
                  "Connections accepted at once from one IP address."),
        ConfigKey("max.connections.per.ip.overrides", ConfigType.STRING, "", _host_counts,
                  "Per-host exceptions to max.connections.per.ip: host:count,... (a host name or an IP address)."),
        ConfigKey("max.connection.creation.rate", ConfigType.INT, INT32_MAX, at_least(0),
                  "New connections accepted per second (listener.name.NAME.max.connection.creation.rate per "
                  "listener; the broker-wide rate does not apply to the inter-broker listener)."),
        ConfigKey("num.network.threads", ConfigType.INT, 1, at_least(1),
                  "Processes that serve the clients' connections: 1, the broker's event loop itself (kfk's default: "
                  "the fewest hops and the least memory, what a laptop wants; Kafka's is 3); N > 1, N network "
                  "processes move the bytes of the plaintext and SASL_PLAINTEXT listeners, fetched records with "
                  "sendfile, so that the broker uses more than one core (kfk.server.network_processes)."),
        ConfigKey("num.io.threads", ConfigType.INT, 8, at_least(1),
                  "Threads that run the broker's blocking file work off its event loop (appends of compressed or "
                  "large batches, log creation and deletion): its default executor."),
        # Logs
        ConfigKey("log.dirs", ConfigType.LIST, None, None, "Directories of the partition logs (default: log.dir)."),
        ConfigKey("log.dir", ConfigType.STRING, DEFAULT_LOG_DIR, None, "The log directory when log.dirs is unset."),
        ConfigKey("num.partitions", ConfigType.INT, 1, at_least(1), "Partitions of auto-created topics."),
        ConfigKey("default.replication.factor", ConfigType.INT, 1, at_least(1),
                  "Replication factor of auto-created topics."),
        ConfigKey("auto.create.topics.enable", ConfigType.BOOLEAN, True, None,
                  "Create a topic when a client asks for its metadata."),
        ConfigKey("delete.topic.enable", ConfigType.BOOLEAN, True, None, "Allow DeleteTopics."),
        ConfigKey("max.request.partition.size.limit", ConfigType.INT, 2000, at_least(1),
                  "The most partitions one DescribeTopicPartitions response describes."),
        ConfigKey("num.recovery.threads.per.data.dir", ConfigType.INT, 2, at_least(1),
                  "Threads per log dir for recovery at start-up and flushing at shutdown."),
        ConfigKey("log.segment.bytes", ConfigType.INT, DEFAULT_SEGMENT_BYTES, at_least(1024 * 1024),
                  "segment.bytes default."),
        ConfigKey("log.roll.ms", ConfigType.LONG, None, None, "segment.ms default (log.roll.hours if unset)."),
        ConfigKey("log.roll.hours", ConfigType.INT, 168, at_least(1), "segment.ms default, in hours."),
        ConfigKey("log.roll.jitter.ms", ConfigType.LONG, None, None, "segment.jitter.ms default."),
        ConfigKey("log.roll.jitter.hours", ConfigType.INT, 0, at_least(0), "segment.jitter.ms default, in hours."),
        ConfigKey("log.retention.ms", ConfigType.LONG, None, None, "retention.ms default (minutes/hours if unset)."),
        ConfigKey("log.retention.minutes", ConfigType.INT, None, None, "retention.ms default, in minutes."),
        ConfigKey("log.retention.hours", ConfigType.INT, 168, None, "retention.ms default, in hours."),
        ConfigKey("log.retention.bytes", ConfigType.LONG, -1, None, "retention.bytes default."),
        ConfigKey("log.retention.check.interval.ms", ConfigType.LONG, 300000, at_least(1),
                  "How often the log manager looks for segments to delete."),
        ConfigKey("log.index.size.max.bytes", ConfigType.INT, DEFAULT_SEGMENT_INDEX_BYTES, at_least(4),
                  "segment.index.bytes default."),
        ConfigKey("log.index.interval.bytes", ConfigType.INT, DEFAULT_INDEX_INTERVAL_BYTES, at_least(0),
                  "index.interval.bytes default."),
        ConfigKey("log.flush.interval.messages", ConfigType.LONG, LONG_MAX, at_least(1), "flush.messages default."),
        ConfigKey("log.flush.interval.ms", ConfigType.LONG, None, None, "flush.ms default."),
        ConfigKey("log.flush.scheduler.interval.ms", ConfigType.LONG, LONG_MAX, None,
                  "How often the flusher checks flush.ms."),
        ConfigKey("log.flush.offset.checkpoint.interval.ms", ConfigType.INT, 60000, at_least(0),
                  "How often the recovery-point checkpoint is written."),
        ConfigKey("log.flush.start.offset.checkpoint.interval.ms", ConfigType.INT, 60000, at_least(0),
                  "How often the log-start-offset checkpoint is written."),
        ConfigKey("log.segment.delete.delay.ms", ConfigType.LONG, DEFAULT_FILE_DELETE_DELAY_MS, at_least(0),
                  "file.delete.delay.ms default."),
        ConfigKey("log.cleanup.policy", ConfigType.LIST, [CLEANUP_POLICY_DELETE],
                  list_of(CLEANUP_POLICY_COMPACT, CLEANUP_POLICY_DELETE, allow_empty=True), "cleanup.policy default."),
        ConfigKey("log.cleaner.enable", ConfigType.BOOLEAN, True, None, "Run the log cleaner (compaction)."),
        ConfigKey("log.cleaner.threads", ConfigType.INT, 1, at_least(0), "Compaction threads."),
        ConfigKey("log.cleaner.backoff.ms", ConfigType.LONG, 15000, at_least(0),
                  "Sleep between cleaner passes with nothing to clean."),
        ConfigKey("log.cleaner.io.max.bytes.per.second", ConfigType.DOUBLE, DOUBLE_MAX, None,
                  "Read plus write I/O of all cleaner threads together, in bytes per second."),
        ConfigKey("log.cleaner.delete.retention.ms", ConfigType.LONG, DEFAULT_DELETE_RETENTION_MS, at_least(0),
                  "delete.retention.ms default."),
        ConfigKey("log.cleaner.min.compaction.lag.ms", ConfigType.LONG, 0, at_least(0),
                  "min.compaction.lag.ms default."),
        ConfigKey("log.cleaner.max.compaction.lag.ms", ConfigType.LONG, LONG_MAX, at_least(1),
                  "max.compaction.lag.ms default."),
        ConfigKey("log.cleaner.min.cleanable.ratio", ConfigType.DOUBLE, 0.5, between(0, 1),
                  "min.cleanable.dirty.ratio default."),
        ConfigKey("log.preallocate", ConfigType.BOOLEAN, False, None, "preallocate default."),
        ConfigKey("log.message.timestamp.type", ConfigType.STRING, TIMESTAMP_TYPE_CREATE_TIME,
                  one_of(TIMESTAMP_TYPE_CREATE_TIME, TIMESTAMP_TYPE_LOG_APPEND_TIME),
                  "message.timestamp.type default."),
        ConfigKey("log.message.timestamp.before.max.ms", ConfigType.LONG, LONG_MAX, at_least(0),
                  "message.timestamp.before.max.ms default."),
        ConfigKey("log.message.timestamp.after.max.ms", ConfigType.LONG, DEFAULT_MESSAGE_TIMESTAMP_AFTER_MAX_MS,
                  at_least(0),
                  "message.timestamp.after.max.ms default."),
        ConfigKey("message.max.bytes", ConfigType.INT, DEFAULT_MAX_MESSAGE_BYTES, at_least(0),
                  "max.message.bytes default."),
        ConfigKey("compression.type", ConfigType.STRING, "producer", one_of(*COMPRESSION_TYPES),
                  "compression.type default."),
        ConfigKey("compression.gzip.level", ConfigType.INT, -1, level_or_default(1, 9, -1), "gzip level default."),
        ConfigKey("compression.lz4.level", ConfigType.INT, 9, between(1, 17), "lz4 level default."),
        ConfigKey("compression.zstd.level", ConfigType.INT, 3, between(-131072, 22), "zstd level default."),
        ConfigKey("min.insync.replicas", ConfigType.INT, 1, at_least(1), "min.insync.replicas default."),
        ConfigKey("unclean.leader.election.enable", ConfigType.BOOLEAN, False, None,
                  "unclean.leader.election.enable default."),
        # Replication
        ConfigKey("replica.lag.time.max.ms", ConfigType.LONG, 30000, at_least(1),
                  "A follower that has not caught up for this long leaves the ISR."),
        ConfigKey("replica.fetch.max.bytes", ConfigType.INT, 1024 * 1024, at_least(0),
                  "Bytes per partition a follower fetches per request."),
        ConfigKey("max.incremental.fetch.session.cache.slots", ConfigType.INT, 1000, at_least(0),
                  "Incremental fetch sessions (KIP-227) the broker keeps at once; 0 answers every fetch without one."),
        ConfigKey("replica.fetch.response.max.bytes", ConfigType.INT, 10 * 1024 * 1024, at_least(0),
                  "Bytes a follower fetch response may hold in all."),
        ConfigKey("fetch.max.bytes", ConfigType.INT, 55 * 1024 * 1024, at_least(1024),
                  "Bytes any fetch response (a consumer's or a follower's) may hold in all, whatever the request "
                  "asks; the first batch still comes whole."),
        ConfigKey("replica.fetch.wait.max.ms", ConfigType.INT, 500, at_least(0), "Follower fetch long-poll time."),
        ConfigKey("replica.fetch.min.bytes", ConfigType.INT, 1, at_least(0), "Follower fetch min bytes."),
        ConfigKey("replica.fetch.backoff.ms", ConfigType.INT, 1000, at_least(0), "Back-off after a fetch error."),
        ConfigKey("num.replica.fetchers", ConfigType.INT, 1, at_least(1), "Fetcher tasks per source broker."),
        ConfigKey("replica.high.watermark.checkpoint.interval.ms", ConfigType.LONG, 5000, at_least(0),
                  "How often replication-offset-checkpoint is written."),
        ConfigKey("auto.leader.rebalance.enable", ConfigType.BOOLEAN, True, None,
                  "Move leadership back to preferred leaders."),
        ConfigKey("leader.imbalance.check.interval.seconds", ConfigType.LONG, 300, at_least(1),
                  "How often the controller checks leader imbalance."),
        ConfigKey("leader.imbalance.per.broker.percentage", ConfigType.INT, 10, at_least(0),
                  "Imbalance that triggers a preferred leader election."),
        ConfigKey("controlled.shutdown.enable", ConfigType.BOOLEAN, True, None, "Move leadership away on shutdown."),
        # Group coordinator
        ConfigKey("offsets.topic.num.partitions", ConfigType.INT, 50, at_least(1), "__consumer_offsets partitions."),
        ConfigKey("offsets.topic.replication.factor", ConfigType.INT, 3, at_least(1),
                  "__consumer_offsets replication factor."),
        ConfigKey("offsets.topic.segment.bytes", ConfigType.INT, 100 * 1024 * 1024, at_least(1),
                  "__consumer_offsets segment size."),
        ConfigKey("offsets.retention.minutes", ConfigType.INT, 7 * 24 * 60, at_least(1),
                  "Committed offsets of empty groups expire after this long."),
        ConfigKey("offsets.retention.check.interval.ms", ConfigType.LONG, 600000, at_least(1),
                  "How often expired offsets are removed."),
        ConfigKey("offset.metadata.max.bytes", ConfigType.INT, 4096, None, "Largest commit metadata string."),
        ConfigKey("offsets.commit.timeout.ms", ConfigType.INT, 5000, at_least(1),
                  "How long an offset commit (or any group coordinator write) waits for the __consumer_offsets "
                  "replicas."),
        ConfigKey("group.initial.rebalance.delay.ms", ConfigType.INT, 3000, None,
                  "How long the first rebalance of an empty group waits for more members."),
        ConfigKey("group.min.session.timeout.ms", ConfigType.INT, 6000, None, "Smallest session timeout allowed."),
        ConfigKey("group.max.session.timeout.ms", ConfigType.INT, 1800000, None, "Largest session timeout allowed."),
        ConfigKey("group.max.size", ConfigType.INT, 2**31 - 1, at_least(1), "Most members a group may have."),
        # Share coordinator (KIP-932)
        ConfigKey("share.coordinator.state.topic.num.partitions", ConfigType.INT, 50, at_least(1),
                  "__share_group_state partitions."),
        ConfigKey("share.coordinator.state.topic.replication.factor", ConfigType.INT, 3, at_least(1),
                  "__share_group_state replication factor."),
        ConfigKey("share.coordinator.state.topic.min.isr", ConfigType.INT, 2, at_least(1),
                  "__share_group_state min ISR."),
        ConfigKey("share.coordinator.state.topic.segment.bytes", ConfigType.INT, 100 * 1024 * 1024, at_least(1),
                  "__share_group_state segment size."),
        ConfigKey("share.coordinator.snapshot.update.records.per.snapshot", ConfigType.INT, 500, between(0, 500),
                  "Updates of a share partition's state written between two snapshots of it."),
        ConfigKey("share.coordinator.write.timeout.ms", ConfigType.INT, 5000, at_least(1),
                  "How long a share state write waits for the __share_group_state replicas."),
        ConfigKey("share.coordinator.state.topic.prune.interval.ms", ConfigType.INT, 5 * 60 * 1000, at_least(1),
                  "How often the share coordinator deletes the records of __share_group_state that later snapshots "
                  "made redundant."),
        ConfigKey("share.coordinator.cold.partition.snapshot.interval.ms", ConfigType.INT, 5 * 60 * 1000,
                  at_least(1), "How old a share partition's latest snapshot may get before the share coordinator "
                  "writes it again, so that an idle share partition does not hold back the pruning."),
        # Transactions and producer ids
        ConfigKey("transaction.state.log.num.partitions", ConfigType.INT, 50, at_least(1),
                  "__transaction_state partitions."),
        ConfigKey("transaction.state.log.replication.factor", ConfigType.INT, 3, at_least(1),
                  "__transaction_state replication factor."),
        ConfigKey("transaction.state.log.min.isr", ConfigType.INT, 2, at_least(1), "__transaction_state min ISR."),
        ConfigKey("transaction.max.timeout.ms", ConfigType.INT, 900000, at_least(1), "Largest transaction timeout."),
        ConfigKey("transactional.id.expiration.ms", ConfigType.INT, 7 * 24 * 3600 * 1000, at_least(1),
                  "Expire transactional ids idle for this long."),
        ConfigKey("transaction.state.log.segment.bytes", ConfigType.INT, 100 * 1024 * 1024, at_least(1),
                  "Segment size of __transaction_state (small: it is compacted and read whole on load)."),
        ConfigKey("transaction.abort.timed.out.transaction.cleanup.interval.ms", ConfigType.INT, 10000, at_least(1),
                  "How often the coordinator aborts transactions open longer than their timeout."),
        ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", ConfigType.INT, 3600000,
                  at_least(1), "How often the coordinator removes transactional ids idle past their expiration."),
        ConfigKey("transaction.partition.verification.enable", ConfigType.BOOLEAN, True, None,
                  "Before a partition leader appends a transactional batch, it asks the transaction coordinator "
                  "whether the partition is in the producer's open transaction (KIP-890)."),
        ConfigKey("producer.id.expiration.ms", ConfigType.INT, 86400000, at_least(1),
                  "Expire idempotent producer state idle for this long."),
        ConfigKey("metadata.log.segment.bytes", ConfigType.INT, 1024 * 1024 * 1024, at_least(RECORDS_LOG_OVERHEAD),
                  "The maximum size of one segment of the KRaft metadata log (at least "
                  "metadata.log.segment.min.bytes, checked at startup)."),
        ConfigKey("metadata.log.segment.min.bytes", ConfigType.INT, METADATA_LOG_SEGMENT_MIN_BYTES,
                  at_least(RECORDS_LOG_OVERHEAD), internal=True,
                  doc="The floor of metadata.log.segment.bytes; lowered by tests only, as in Kafka."),
        ConfigKey("delegation.token.secret.key", ConfigType.PASSWORD, None, None,
                  "The secret every broker and controller derives delegation tokens' HMACs from (the same on all); "
                  "without it the cluster issues no tokens."),
        ConfigKey("delegation.token.max.lifetime.ms", ConfigType.LONG, 7 * 24 * 3600 * 1000, at_least(1),
                  "The longest a delegation token may be renewed for, from its creation."),
        ConfigKey("delegation.token.expiry.time.ms", ConfigType.LONG, 24 * 3600 * 1000, at_least(1),
                  "How long a delegation token lives without a renewal, and the longest one renewal adds."),
        ConfigKey("delegation.token.expiry.check.interval.ms", ConfigType.LONG, 3600 * 1000, at_least(1),
                  "How often the active controller removes expired delegation tokens."),
        ConfigKey("unstable.api.versions.enable", ConfigType.BOOLEAN, False, None,
                  "Advertise API versions still in development."),
        ConfigKey("authorizer.class.name", ConfigType.STRING, "", None,
                  "Kafka's StandardAuthorizer or AclAuthorizer class name turns ACL authorization on; empty: off."),
        # kfk's own: where the broker's log goes (Apache Kafka configures log4j in a file of its own instead)
        ConfigKey("log.file", ConfigType.STRING, None, None,
                  "kfk's own: also write the broker's log to this file (rotated by size); stderr keeps it too."),
        ConfigKey("log.file.max.bytes", ConfigType.LONG, 100 * 1024 * 1024, at_least(1),
                  "kfk's own: rotate log.file when it reaches this size."),
        ConfigKey("log.file.backups", ConfigType.INT, 10, at_least(1),
                  "kfk's own: rotated copies of log.file kept (log.file.1 the newest)."),
        *(ConfigKey(name, config_type, default, None, _accepted_key_doc(name))
          for name, config_type, default in ACCEPTED_BROKER_KEYS),
    ]
)


def _listener_config_key(name: str) -> str | None:
    """The key of LISTENER_CONFIGS that listener.name.NAME.KEY sets, None for any other name."""
    if name.startswith(LISTENER_PREFIX):
        for key in LISTENER_CONFIGS:
            if name.endswith("." + key) and len(name) > len(LISTENER_PREFIX) + len(key) + 1:
                return key
    return None


def _hours_or_minutes_ms(values: Mapping[str, Any], ms: str, minutes: str | None, hours: str) -> int:
    if values[ms] is not None:
        return values[ms]
    if minutes is not None and values[minutes] is not None:
        return values[minutes] * 60_000
    return values[hours] * 3_600_000


#: The authorizer's own configs (Kafka's StandardAuthorizer reads them from the broker's properties; they are not
#: broker configs, so DescribeConfigs does not list them): see BrokerConfig.super_users.
AUTHORIZER_CONFIGS = ("super.users", "allow.everyone.if.no.acl.found")
#: The SASL mechanisms a per-listener key may name (listener.name.<listener>.<mechanism, lower case>.<key>).
_SASL_MECHANISM_NAMES = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")


#: How many distinct topic LogConfigs BrokerConfig.log_config remembers (topics rarely have many distinct overrides).
_LOG_CONFIG_CACHE_SIZE = 1024


def _hashable(values: Mapping[str, Any]) -> tuple:
    return tuple(sorted((name, tuple(value) if isinstance(value, list) else value) for name, value in values.items()))


def _listener_scoped_config(name: str) -> str | None:
    """The broker config that `listener.name.<listener>.<config>` (or `listener.name.<listener>.<mechanism>.<config>`,
    e.g. listener.name.internal.plain.sasl.jaas.config) sets for a single listener; None for any other name."""
    prefix, _, rest = name.partition(LISTENER_PREFIX)
    listener, _, config = rest.partition(".")
    if not prefix and listener and config.partition(".")[0].upper() in _SASL_MECHANISM_NAMES:
        config = config.partition(".")[2]
    return config if not prefix and listener and config in BROKER_CONFIG_DEF.keys else None


def _is_known_broker_name(name: str) -> bool:
    """A broker config name, one of the authorizer's, or one set for a single listener, as Kafka 4.x accepts them."""
    return name in BROKER_CONFIG_DEF.keys or name in AUTHORIZER_CONFIGS or _listener_scoped_config(name) is not None


class BrokerConfig:
    """A parsed server.properties: every key of BROKER_CONFIG_DEF as a typed attribute (`log.dirs` ->
    `log_dirs`), plus the values Kafka derives from several keys (log_dir_list, node_id, topic defaults)."""

    def __init__(self, props: Mapping[str, Any]) -> None:
        self.originals = dict(props)
        #: The dynamic configs in force (the cluster-wide default, then this broker's own): see reconfigure().
        self.dynamic_default: dict[str, str] = {}
        self.dynamic_broker: dict[str, str] = {}
        self._log_configs: dict[tuple, LogConfig] = {}  # log_config()'s, by (overrides, defaults)
        self.unknown = sorted(name for name in props if not _is_known_broker_name(name))
        for name, value in props.items():  # listener.name.NAME.KEY of the per-listener limits is checked as KEY is
            key = _listener_config_key(name)
            if key is not None:
                BROKER_CONFIG_DEF.keys[key].parse(value)
        values = BROKER_CONFIG_DEF.parse({k: v for k, v in props.items() if k in BROKER_CONFIG_DEF.keys})
        self.values = values
        for name, value in values.items():
            setattr(self, BROKER_CONFIG_DEF.keys[name].attribute, value)
        if self.node_id < 0 and self.broker_id >= 0:
            self.node_id = self.broker_id
        if self.process_roles and self.node_id < 0:
            raise InvalidConfigurationError("node.id is required when process.roles is set")
        if self.zookeeper_connect is None and not self.process_roles:
            raise InvalidConfigurationError(
                "set process.roles (KRaft-style embedded metadata) or zookeeper.connect (ZooKeeper metadata)"
            )
        self.broker_id = self.node_id

    @functools.cached_property
    def quorum_voter_addresses(self) -> dict[int, tuple[str, int]]:
        """controller.quorum.voters as {node id: (host, port)}, parsed once (parse_quorum_voters; it is not a
        dynamic config)."""
        return parse_quorum_voters(self.controller_quorum_voters)

    @property
    def single_node_quorum(self) -> bool:
        """kfk's embedded default: a combined node with no quorum configured is a quorum of one (itself), its broker
        talking to its controller in-process, with no controller listener needed."""
        return not self.controller_quorum_voters and not self.controller_quorum_bootstrap_servers

    def check_metadata_log(self) -> None:
        """KRaft: the metadata log's segments may not be smaller than metadata.log.segment.min.bytes (8 MiB), which
        Kafka checks when it opens that log; a ZooKeeper-mode broker has no metadata log."""
        if self.zookeeper_connect is None and self.metadata_log_segment_bytes < self.metadata_log_segment_min_bytes:
            raise InvalidConfigurationError(f"Cannot set metadata.log.segment.bytes below "
                                            f"{self.metadata_log_segment_min_bytes}: {self.metadata_log_segment_bytes}")

    def check_supported(self) -> list[str]:
        """The keys of server.properties (bare or for one listener) that kfk accepts but does not act on
        (kfk.config_support), set to another value than their default: raise InvalidConfigurationError, in one line,
        for the first one kfk refuses (a feature it does not have, a Java plug-in it cannot load), and return one
        warning line for each one kfk ignores (a thread count: kfk does what the user wants anyway)."""
        warnings = []
        for name in sorted(self.originals):
            config = name if name in BROKER_CONFIG_DEF.keys else _listener_scoped_config(name)
            support = BROKER_UNSUPPORTED.get(config) if config is not None else None
            if support is None:
                continue
            key = BROKER_CONFIG_DEF.keys[config]
            value = key.parse(self.originals[name])
            if support.accepts(value, key.default):
                continue
            if support.refuse:
                raise InvalidConfigurationError(support.message(name, value))
            warnings.append(support.message(name, value))
        return warnings

    def check_delegation_tokens(self) -> None:
        """kfk keeps delegation tokens in the KRaft metadata log only: its ZooKeeper mode has no token store (Kafka 3's
        /delegation_token znodes), so a secret key there would promise tokens that never come."""
        if self.zookeeper_connect is not None and self.delegation_token_secret_key is not None:
            raise InvalidConfigurationError(
                "delegation.token.secret.key is set, but kfk issues delegation tokens in KRaft mode only "
                "(process.roles): remove it, or run this cluster in KRaft mode")

    def check_kraft_roles(self) -> None:
        """Kafka's rules for process.roles, controller.listener.names, listeners and the quorum configuration,
        checked when a server starts (a BrokerConfig is also a bag of settings for components under test)."""
        if not self.process_roles or self.zookeeper_connect is not None:
            return
        roles = set(self.process_roles)
        listener_names = [entry.strip().partition("://")[0].strip().upper() for entry in self.listeners]
        controller_names = [name.strip().upper() for name in self.controller_listener_names]
        voters = self.quorum_voter_addresses
        if roles == {"broker", "controller"} and self.single_node_quorum:
            return
        if self.single_node_quorum:
            raise InvalidConfigurationError(
                "If using process.roles, either controller.quorum.bootstrap.servers must contain the set of bootstrap "
                "controllers or controller.quorum.voters must contain a parseable set of controllers.")
        if not controller_names:
            raise InvalidConfigurationError("controller.listener.names must contain at least one value when running "
                                            "KRaft (process.roles)")
        if "controller" in roles:
            if controller_names[0] not in listener_names:
                raise InvalidConfigurationError(
                    f"controller.listener.names must contain at least one value appearing in the 'listeners' "
                    f"configuration when running the KRaft controller role: {controller_names[0]} is not among "
                    f"{', '.join(listener_names)}")
            if voters and self.node_id not in voters:
                raise InvalidConfigurationError(
                    f"If process.roles contains the 'controller' role, the node id {self.node_id} must be included "
                    f"in the set of voters controller.quorum.voters={','.join(self.controller_quorum_voters)}")
        if roles == {"controller"}:
            others = [name for name in listener_names if name not in controller_names]
            if others:
                raise InvalidConfigurationError(
                    f"The listeners config must only contain KRaft controller listeners from controller.listener.names "
                    f"when process.roles=controller: {', '.join(others)} is not one")
        if roles == {"broker"}:
            if any(name in listener_names for name in controller_names):
                raise InvalidConfigurationError(
                    "controller.listener.names must not contain a value appearing in the 'listeners' configuration "
                    "when running KRaft with just the broker role")
            if self.node_id in voters:
                raise InvalidConfigurationError(
                    f"If process.roles contains just the 'broker' role, the node id {self.node_id} must not be "
                    f"included in the set of voters controller.quorum.voters="
                    f"{','.join(self.controller_quorum_voters)}")
        if self.inter_broker_listener_name and self.inter_broker_listener_name.upper() in controller_names:
            raise InvalidConfigurationError("inter.broker.listener.name must not be a controller listener "
                                            f"({self.inter_broker_listener_name})")

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> BrokerConfig:
        return cls(props)

    def reconfigure(self, dynamic_default: Mapping[str, str], dynamic_broker: Mapping[str, str]) -> set[str]:
        """Put the dynamic configs in force, in Kafka's precedence (this broker's own, then the cluster-wide
        default, then server.properties, then the defaults), and return the keys whose value changed. The object
        changes in place: every component holding it reads the new values. Only DYNAMIC_BROKER_CONFIGS keys
        change; a value that does not parse (written by another tool) is logged and ignored, as in Kafka."""
        def usable(props: Mapping[str, str]) -> dict[str, str]:
            kept = {}
            for name, value in props.items():
                if name in DYNAMIC_BROKER_CONFIGS:
                    try:
                        BROKER_CONFIG_DEF.keys[name].parse(value)
                    except InvalidConfigurationError as error:
                        _log.warning("Ignoring the dynamic broker config %s: %s", name, error)
                        continue
                    kept[name] = value
            return kept

        self.dynamic_default = dict(dynamic_default)
        self.dynamic_broker = dict(dynamic_broker)
        merged = {k: v for k, v in self.originals.items() if k in BROKER_CONFIG_DEF.keys}
        merged.update(usable(dynamic_default))
        merged.update(usable(dynamic_broker))
        values = BROKER_CONFIG_DEF.parse(merged)
        changed = {name for name in DYNAMIC_BROKER_CONFIGS if values[name] != self.values[name]}
        for name in changed:
            self.values[name] = values[name]
            setattr(self, BROKER_CONFIG_DEF.keys[name].attribute, values[name])
        return changed

    # -- listeners and their security (Kafka's listener.security.protocol.map, listener.name.<l>. prefix) --------

    @property
    def security_protocol_map(self) -> dict[str, str]:
        """listener.security.protocol.map as {LISTENER NAME: protocol}; InvalidConfigurationError for an entry that
        is not NAME:PROTOCOL or names a protocol Kafka does not have."""
        protocols: dict[str, str] = {}
        for entry in self.listener_security_protocol_map:
            name, colon, protocol = entry.strip().partition(":")
            protocol = protocol.strip().upper()
            if not colon or not name.strip() or protocol not in SECURITY_PROTOCOLS:
                raise _invalid("listener.security.protocol.map", ",".join(self.listener_security_protocol_map),
                               f"{entry!r} is not LISTENER:PROTOCOL with a protocol among "
                               f"{', '.join(SECURITY_PROTOCOLS)}")
            protocols[name.strip().upper()] = protocol
        return protocols

    def listener_security_protocol(self, listener_name: str) -> str:
        """The security protocol of one listener (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL), as the map says;
        InvalidConfigurationError for a listener the map does not name (Kafka refuses to start then)."""
        protocol = self.security_protocol_map.get(listener_name.upper())
        if protocol is None:
            raise InvalidConfigurationError(
                f"No security protocol defined for listener {listener_name.upper()} in listener.security.protocol.map")
        return protocol

    @property
    def inter_broker_listener(self) -> str:
        """The listener brokers use between themselves: inter.broker.listener.name, else the listener named as
        security.inter.broker.protocol when that is set (Kafka's rule; setting both is an error), else kfk's
        convenience for a broker whose listeners say nothing: the first listener."""
        explicit_protocol = "security.inter.broker.protocol" in self.originals
        if self.inter_broker_listener_name is not None:
            if explicit_protocol:
                raise InvalidConfigurationError("Only one of inter.broker.listener.name and "
                                                "security.inter.broker.protocol should be set.")
            return self.inter_broker_listener_name.strip().upper()
        if explicit_protocol:
            protocol = self.security_inter_broker_protocol.strip().upper()
            if protocol not in SECURITY_PROTOCOLS:
                raise _invalid("security.inter.broker.protocol", protocol,
                               f"not one of {', '.join(SECURITY_PROTOCOLS)}")
            return protocol
        first = self.listeners[0] if self.listeners else "PLAINTEXT://"
        return first.split("://", 1)[0].strip().upper() or "PLAINTEXT"

    def listener_override(self, listener_name: str, key: str) -> Any:
        """`key` as one listener sees it: listener.name.<listener, lower case>.<key> when set, else the broker-wide
        value (Kafka's valuesWithPrefixOverride, key by key). Keys that are no broker config (a SASL mechanism's
        `<mechanism>.sasl.jaas.config`) come back as the raw string, None when unset."""
        prefixed = f"{LISTENER_PREFIX}{listener_name.lower()}.{key}"
        config_key = BROKER_CONFIG_DEF.keys.get(key)
        if prefixed in self.originals:
            value = self.originals[prefixed]
            return config_key.parse(value) if config_key is not None else value
        if config_key is not None:
            return self.values[key]
        return self.originals.get(key)

    def listener_value(self, listener_name: str, key: str) -> Any:
        """A key of LISTENER_CONFIGS set for one listener (listener.name.<name>.<key>), None if not set: a listener's
        limit is its own, beside the broker-wide one, never a copy of it."""
        prefixed = f"{LISTENER_PREFIX}{listener_name.lower()}.{key}"
        if prefixed in self.originals:
            return BROKER_CONFIG_DEF.keys[key].parse(self.originals[prefixed])
        return None

    @property
    def super_users(self) -> list[str]:
        """`super.users`: principals (`User:admin;User:broker`) every authorization check lets through."""
        text = str(self.originals.get("super.users") or "")
        return [user.strip() for user in text.split(";") if user.strip()]

    @property
    def allow_everyone_if_no_acl_found(self) -> bool:
        """`allow.everyone.if.no.acl.found` (false by default): whether a resource without any ACL is open to all."""
        value = self.originals.get("allow.everyone.if.no.acl.found", False)
        return value if isinstance(value, bool) else str(value).strip().lower() == "true"

    @property
    def log_dir_list(self) -> list[str]:
        return list(self.log_dirs) if self.log_dirs else [self.log_dir]

    @property
    def log_roll_time_ms(self) -> int:
        return _hours_or_minutes_ms(self.values, "log.roll.ms", None, "log.roll.hours")

    @property
    def log_roll_time_jitter_ms(self) -> int:
        return _hours_or_minutes_ms(self.values, "log.roll.jitter.ms", None, "log.roll.jitter.hours")

    @property
    def log_retention_time_ms(self) -> int:
        return _hours_or_minutes_ms(self.values, "log.retention.ms", "log.retention.minutes", "log.retention.hours")

    def topic_defaults(self) -> dict[str, Any]:
        """The broker's defaults for topic configs, by topic config name (Kafka's synonyms: log.segment.bytes ->
        segment.bytes, log.retention.hours -> retention.ms, ...)."""
        defaults = {
            "segment.bytes": self.log_segment_bytes,
            "segment.ms": self.log_roll_time_ms,
            "segment.jitter.ms": self.log_roll_time_jitter_ms,
            "segment.index.bytes": self.log_index_size_max_bytes,
            "flush.messages": self.log_flush_interval_messages,
            "retention.bytes": self.log_retention_bytes,
            "retention.ms": self.log_retention_time_ms,
            "max.message.bytes": self.message_max_bytes,
            "index.interval.bytes": self.log_index_interval_bytes,
            "file.delete.delay.ms": self.log_segment_delete_delay_ms,
            "delete.retention.ms": self.log_cleaner_delete_retention_ms,
            "min.compaction.lag.ms": self.log_cleaner_min_compaction_lag_ms,
            "max.compaction.lag.ms": self.log_cleaner_max_compaction_lag_ms,
            "min.cleanable.dirty.ratio": self.log_cleaner_min_cleanable_ratio,
            "cleanup.policy": self.log_cleanup_policy,
            "unclean.leader.election.enable": self.unclean_leader_election_enable,
            "min.insync.replicas": self.min_insync_replicas,
            "compression.type": self.compression_type,
            "compression.gzip.level": self.compression_gzip_level,
            "compression.lz4.level": self.compression_lz4_level,
            "compression.zstd.level": self.compression_zstd_level,
            "preallocate": self.log_preallocate,
            "message.timestamp.type": self.log_message_timestamp_type,
            "message.timestamp.before.max.ms": self.log_message_timestamp_before_max_ms,
            "message.timestamp.after.max.ms": self.log_message_timestamp_after_max_ms,
            "local.retention.ms": self.log_local_retention_ms,
            "local.retention.bytes": self.log_local_retention_bytes,
            "remote.copy.lag.ms": self.log_remote_copy_lag_ms,
            "remote.copy.lag.bytes": self.log_remote_copy_lag_bytes,
            "max.decompressed.message.bytes": self.max_decompressed_message_bytes,
        }
        if self.log_flush_interval_ms is not None:
            defaults["flush.ms"] = self.log_flush_interval_ms
        return defaults

    def log_config(self, overrides: Mapping[str, Any] | None = None) -> LogConfig:
        """A topic's LogConfig: its own overrides on top of this broker's defaults. Remembered by (overrides,
        defaults), as a LogConfig is immutable: a broker opening the logs of 1,000 new topics of 10 partitions, or
        a controller validating them, would otherwise parse the same config 10,000 times on its event loop."""
        overrides = overrides or {}
        defaults = self.topic_defaults()
        key = (_hashable(overrides), _hashable(defaults))
        cache = self._log_configs
        config = cache.get(key)
        if config is None:
            config = LogConfig.from_properties(overrides, defaults=defaults)
            if len(cache) >= _LOG_CONFIG_CACHE_SIZE:
                cache.clear()
            cache[key] = config
        return config


#: The broker synonym of each topic config, for DescribeConfigs (the first one listed wins, as in Kafka).
TOPIC_CONFIG_SYNONYMS: dict[str, tuple[str, ...]] = {
    "segment.bytes": ("log.segment.bytes",),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "flush.messages": ("log.flush.interval.messages",),
    "flush.ms": ("log.flush.interval.ms",),
    "retention.bytes": ("log.retention.bytes",),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "max.message.bytes": ("message.max.bytes",),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "cleanup.policy": ("log.cleanup.policy",),
    "unclean.leader.election.enable": ("unclean.leader.election.enable",),
    "min.insync.replicas": ("min.insync.replicas",),
    "compression.type": ("compression.type",),
    "compression.gzip.level": ("compression.gzip.level",),
    "compression.lz4.level": ("compression.lz4.level",),
    "compression.zstd.level": ("compression.zstd.level",),
    "preallocate": ("log.preallocate",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "message.timestamp.before.max.ms": ("log.message.timestamp.before.max.ms",),
    "message.timestamp.after.max.ms": ("log.message.timestamp.after.max.ms",),
    "local.retention.ms": ("log.local.retention.ms",),
    "local.retention.bytes": ("log.local.retention.bytes",),
    "remote.copy.lag.ms": ("log.remote.copy.lag.ms",),
    "remote.copy.lag.bytes": ("log.remote.copy.lag.bytes",),
    "max.decompressed.message.bytes": ("max.decompressed.message.bytes",),
}


def parse_overrides(overrides: Iterable[str]) -> dict[str, str]:
    """`--override key=value` arguments (Kafka's kafka-server-start.sh flag)."""
    props: dict[str, str] = {}
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or not key.strip():
            raise InvalidConfigurationError(f"--override expects key=value, got {override!r}")
        props[key.strip()] = value.strip()
    return props
