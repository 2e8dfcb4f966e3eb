"""Dynamic group configs (Kafka's GroupConfig): per-group overrides of the group coordinator's broker settings, set
with IncrementalAlterConfigs/AlterConfigs on resource type GROUP (`kafka-configs.sh --entity-type groups`) and kept
in the metadata image as ConfigResourceType.GROUP entries.

Each key overrides one broker setting (its synonym: consumer.session.timeout.ms <- group.consumer.session.timeout.ms)
or, for the keys that exist only per group (share.auto.offset.reset, share.isolation.level...), has a default of its
own. A value must parse as the key's type and pass its validator, then fall within the broker's bounds for it
(group.consumer.min/max.session.timeout.ms...), and a group's session timeout must stay above its heartbeat interval,
with Kafka's messages. Keys Kafka defines as internal are accepted and never described. Bounds whose broker key kfk
does not have use Kafka's defaults for it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping

from kfk.config import BROKER_CONFIG_DEF, BrokerConfig, ConfigDef, ConfigKey, ConfigType, at_least, one_of
from kfk.errors import InvalidConfigurationError

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"
SHARE_RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
SHARE_DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"
SHARE_PARTITION_MAX_RECORD_LOCKS = "share.partition.max.record.locks"

#: share.auto.offset.reset's by_duration:<ISO-8601 duration> (Java's Duration.parse: PnDTnHnMn.nS, no sign here).
_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:[.,](\d{1,9}))?S)?)?", re.IGNORECASE)


def parse_duration_ms(text: str) -> int | None:
    """Milliseconds of an ISO-8601 duration such as P1D or PT1H30M or PT0.5S; None if `text` is not one."""
    match = _DURATION.fullmatch(text)
    if match is None or text.upper().endswith("T") or not any(match.groups()):
        return None
    days, hours, minutes, seconds, fraction = match.groups()
    whole = ((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60 + int(seconds or 0)
    return whole * 1000 + int((fraction or "0").ljust(9, "0")[:3])


def _auto_offset_reset(name: str, value: Any) -> None:
    if value in ("earliest", "latest"):
        return
    if isinstance(value, str) and value.startswith("by_duration:") and \
            parse_duration_ms(value[len("by_duration:"):]) is not None:
        return
    raise InvalidConfigurationError(
        f"Invalid value {value} for configuration {name}: Invalid value `{value}` for configuration {name}. The "
        "value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.")


def _no_duplicates(name: str, value: Any) -> None:
    if len(set(value)) != len(value):
        raise InvalidConfigurationError(f"{name} must not contain duplicate tag keys.")


def _dead_letter_topic(name: str, value: Any) -> None:
    if value.startswith("__"):
        raise InvalidConfigurationError(f"{name}: DLQ topic name must not start with '__'")


@dataclasses.dataclass(frozen=True)
class GroupConfigKey:
    """A group config key: its ConfigKey (type, Kafka's default, validator), the broker key it overrides, and the
    broker keys bounding it with Kafka's defaults for them (used when kfk has no such broker key)."""

    key: ConfigKey
    synonym: str | None = None
    minimum: tuple[str, int] | None = None
    maximum: tuple[str, int] | None = None


def _int(name: str, default: int, lowest: int, synonym: str | None = None, minimum: tuple[str, int] | None = None,
         maximum: tuple[str, int] | None = None, internal: bool = False) -> GroupConfigKey:
    return GroupConfigKey(ConfigKey(name, ConfigType.INT, default, at_least(lowest), internal=internal), synonym,
                          minimum, maximum)


def _flag(name: str, default: bool, internal: bool = False) -> GroupConfigKey:
    return GroupConfigKey(ConfigKey(name, ConfigType.BOOLEAN, default, internal=internal))


def _bounded(kind: str, setting: str, default: int, low: int, high: int, lowest: int = 1) -> GroupConfigKey:
    """A key bounded by group.<kind>.min.<setting> and group.<kind>.max.<setting>."""
    return _int(f"{kind}.{setting}", default, lowest, f"group.{kind}.{setting}", (f"group.{kind}.min.{setting}", low),
                (f"group.{kind}.max.{setting}", high))


#: Kafka 4.4's group config keys, with the broker key each overrides and its bounds, in the order Kafka checks them.
GROUP_CONFIG_KEYS: dict[str, GroupConfigKey] = {entry.key.name: entry for entry in (
    _bounded("consumer", "heartbeat.interval.ms", 5000, 5000, 15000),
    _bounded("consumer", "session.timeout.ms", 45000, 45000, 60000),
    _bounded("consumer", "assignment.interval.ms", 1000, 0, 15000, lowest=0),
    _flag("consumer.assignor.offload.enable", True, internal=True),
    _bounded("share", "heartbeat.interval.ms", 5000, 5000, 15000),
    _bounded("share", "session.timeout.ms", 45000, 45000, 60000),
    _bounded("share", "record.lock.duration.ms", 30000, 15000, 60000, lowest=1000),
    _bounded("share", "delivery.count.limit", 5, 2, 10, lowest=2),
    _bounded("share", "partition.max.record.locks", 2000, 100, 4000, lowest=100),
    GroupConfigKey(ConfigKey(SHARE_AUTO_OFFSET_RESET, ConfigType.STRING, "latest", _auto_offset_reset)),
    GroupConfigKey(ConfigKey(SHARE_ISOLATION_LEVEL, ConfigType.STRING, "read_uncommitted",
                             one_of("read_committed", "read_uncommitted"))),
    _flag("share.renew.acknowledge.enable", True),
    _bounded("share", "assignment.interval.ms", 1000, 0, 15000, lowest=0),
    _flag("share.assignor.offload.enable", True, internal=True),
    _bounded("streams", "heartbeat.interval.ms", 5000, 5000, 15000),
    _bounded("streams", "session.timeout.ms", 45000, 45000, 60000),
    _int("streams.num.standby.replicas", 0, 0, "group.streams.num.standby.replicas",
         maximum=("group.streams.max.standby.replicas", 2)),
    _int("streams.initial.rebalance.delay.ms", 3000, 0, "group.streams.initial.rebalance.delay.ms"),
    _bounded("streams", "assignment.interval.ms", 1000, 0, 15000, lowest=0),
    _flag("streams.assignor.offload.enable", True, internal=True),
    _int("streams.task.offset.interval.ms", 60000, 1, minimum=("group.streams.min.task.offset.interval.ms", 15000),
         internal=True),
    _int("streams.num.warmup.replicas", 2, 0, maximum=("group.streams.max.warmup.replicas", 20), internal=True),
    GroupConfigKey(ConfigKey("streams.rack.aware.assignment.tags", ConfigType.LIST, [], _no_duplicates),
                   "group.streams.rack.aware.assignment.tags"),
    GroupConfigKey(ConfigKey("streams.acceptable.recovery.lag", ConfigType.LONG, 10000, at_least(0), internal=True)),
    GroupConfigKey(ConfigKey("streams.assignor.name", ConfigType.STRING, None), "group.streams.assignors"),
    GroupConfigKey(ConfigKey("errors.deadletterqueue.topic.name", ConfigType.STRING, "", _dead_letter_topic)),
    _flag("errors.deadletterqueue.copy.record.enable", False),
)}

GROUP_CONFIG_DEF = ConfigDef(entry.key for entry in GROUP_CONFIG_KEYS.values())

#: Each (session timeout, heartbeat interval) pair: the first must stay greater than the second.
_SESSION_AND_HEARTBEAT = [(f"{kind}.session.timeout.ms", f"{kind}.heartbeat.interval.ms")
                          for kind in ("consumer", "share", "streams")]

#: group.streams.assignors' default: the one task assignor Kafka 4.4 registers.
_STREAMS_ASSIGNORS_DEFAULT = ["sticky"]


def broker_value(config: BrokerConfig, name: str, default: Any) -> Any:
    """The broker's value of `name`, or Kafka's default for it where kfk has no such broker key."""
    return config.values[name] if name in BROKER_CONFIG_DEF.keys else default


def default_value(config: BrokerConfig, entry: GroupConfigKey) -> Any:
    """A group config's value for a group that does not set it: the broker key it overrides, else its own default."""
    if entry.synonym is None:
        return entry.key.default
    if entry.synonym == "group.streams.assignors":
        return broker_value(config, entry.synonym, _STREAMS_ASSIGNORS_DEFAULT)[0]
    return broker_value(config, entry.synonym, entry.key.default)


def validate_group_configs(config: BrokerConfig, overrides: Mapping[str, str | None]) -> dict[str, Any]:
    """A group's whole new set of overrides, checked as Kafka's GroupConfig.validate does; returns the typed values
    or raises InvalidConfigurationError with Kafka's message."""
    GROUP_CONFIG_DEF.validate_names(overrides, "group")
    # Checked in Kafka's order (the table's), whatever the request's.
    typed = {name: entry.key.parse(overrides[name]) for name, entry in GROUP_CONFIG_KEYS.items() if name in overrides}
    for name, value in typed.items():
        entry = GROUP_CONFIG_KEYS[name]
        low = broker_value(config, *entry.minimum) if entry.minimum else None
        high = broker_value(config, *entry.maximum) if entry.maximum else None
        if low is not None and high is not None and not low <= value <= high:
            raise InvalidConfigurationError(f"{name} must be in the range {low} to {high} inclusive.")
        if high is not None and low is None and value > high:
            raise InvalidConfigurationError(f"{name} must be less than or equal to {high}")
        if low is not None and high is None and value < low:
            raise InvalidConfigurationError(f"{name} must be greater than or equal to {low}")
    assignor = typed.get("streams.assignor.name")
    if assignor is not None:
        registered = broker_value(config, "group.streams.assignors", _STREAMS_ASSIGNORS_DEFAULT)
        if assignor not in registered:
            raise InvalidConfigurationError(f"streams.assignor.name '{assignor}' is not a registered task assignor. "
                                            f"Registered assignors are: [{', '.join(registered)}].")
    for session, heartbeat in _SESSION_AND_HEARTBEAT:
        if session in typed or heartbeat in typed:
            effective = {name: typed[name] if name in typed else default_value(config, GROUP_CONFIG_KEYS[name])
                         for name in (session, heartbeat)}
            if effective[session] <= effective[heartbeat]:
                raise InvalidConfigurationError(f"{session} must be greater than {heartbeat}")
    return typed


def group_override(overrides: Mapping[str, str], name: str, default: Any) -> Any:
    """The typed value of group config `name` if the group sets it (values in the image are valid: the controller
    checked them), else `default` (the broker's setting, which the caller holds)."""
    return GROUP_CONFIG_KEYS[name].key.parse(overrides[name]) if name in overrides else default


def group_config_value(config: BrokerConfig, overrides: Mapping[str, str], name: str) -> Any:
    """The typed value of group config `name` for a group with these overrides."""
    return group_override(overrides, name, default_value(config, GROUP_CONFIG_KEYS[name]))
