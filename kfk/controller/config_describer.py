"""Every topic or broker config with its value, where the value comes from, and its synonyms (Kafka's ConfigHelper).

DescribeConfigs (and CreateTopics v5+, which returns the new topic's configs) answer with every key, not only the
ones set. For each key:
- value: the effective value as Kafka prints it (lists comma-joined, booleans lower-case, unset optionals null);
- source: the first synonym's source, DEFAULT_CONFIG when there is none;
- synonyms, in precedence order: the topic's own override (DYNAMIC_TOPIC_CONFIG), then for the broker key the
  topic config inherits from (TOPIC_CONFIG_SYNONYMS: retention.ms <- log.retention.ms, log.retention.minutes,
  log.retention.hours) each name set in server.properties (STATIC_BROKER_CONFIG), then each name's built-in
  default (DEFAULT_CONFIG, only for names whose default is not null). As Kafka does, the broker part of the list
  starts at the first entry named after the first synonym: keys whose first broker name has no default
  (retention.ms, segment.ms) report no broker synonym unless that name itself is set, which is exactly Kafka's
  output `retention.ms=604800000 sensitive=false synonyms={}`.
A broker config is read-only unless Kafka 4.x can update it without a restart (DYNAMIC_BROKER_CONFIGS), which is
what tools check before offering to alter it. A broker's synonyms start with its dynamic values: this broker's own
(DYNAMIC_BROKER_CONFIG), then the cluster-wide default (DYNAMIC_DEFAULT_BROKER_CONFIG), then server.properties and
the built-in default; a topic config inherits them through its broker synonym. Describing the default resource
(name "") lists only the keys set there, with only their DYNAMIC_DEFAULT_BROKER_CONFIG synonyms, as Kafka. PASSWORD
keys are sensitive: their value and their synonyms' values are never sent, as in Kafka.
"""

from __future__ import annotations

from typing import Any, Mapping

from kfk.common.config_types import ConfigEntry, ConfigResourceType, ConfigSource, ConfigSynonym, WireConfigType
from kfk.config import (BROKER_CONFIG_DEF, DYNAMIC_BROKER_CONFIGS, LOG_CONFIG_DEF, THROTTLED_RATE_CONFIGS,
                        TOPIC_CONFIG_SYNONYMS, BrokerConfig, ConfigKey, ConfigType)
from kfk.errors import InvalidRequestError, UnknownTopicOrPartitionError
from kfk.group_config import GROUP_CONFIG_KEYS, default_value, group_config_value
from kfk.metadata.image import MetadataImage
from kfk.metadata.topic_names import validate_topic_name


_WIRE_TYPES = {
    ConfigType.BOOLEAN: WireConfigType.BOOLEAN,
    ConfigType.STRING: WireConfigType.STRING,
    ConfigType.INT: WireConfigType.INT,
    ConfigType.LONG: WireConfigType.LONG,
    ConfigType.DOUBLE: WireConfigType.DOUBLE,
    ConfigType.LIST: WireConfigType.LIST,
    ConfigType.CLASS: WireConfigType.CLASS,
    ConfigType.PASSWORD: WireConfigType.PASSWORD,
}


#: Broker keys that are one setting under several names (log.retention.ms / .minutes / .hours), by each name.
_BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {
    name: group for group in TOPIC_CONFIG_SYNONYMS.values() for name in group
}


def format_config_value(value: Any) -> str | None:
    """A typed config value as Kafka prints it (ConfigDef.convertToString)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(value)
    return str(value)


def _static_value(raw: Any) -> str | None:
    return raw.strip() if isinstance(raw, str) else format_config_value(raw)


def _broker_synonyms(config: BrokerConfig, name: str, names: tuple[str, ...]) -> list[ConfigSynonym]:
    synonyms = [ConfigSynonym(n, dynamic[n], source) for dynamic, source in (
        (config.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (config.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)) for n in names if n in dynamic]
    synonyms += [ConfigSynonym(n, _static_value(config.originals[n]), ConfigSource.STATIC_BROKER_CONFIG)
                 for n in names if n in config.originals]
    for n in names:
        default = (THROTTLED_RATE_CONFIGS.get(n) or BROKER_CONFIG_DEF.keys[n]).default
        if default is not None:
            synonyms.append(ConfigSynonym(n, format_config_value(default), ConfigSource.DEFAULT_CONFIG))
    for index, synonym in enumerate(synonyms):
        if synonym.name == name:
            return synonyms[index:]
    return []


def _entry(key: ConfigKey, value: str | None, synonyms: list[ConfigSynonym], read_only: bool) -> ConfigEntry:
    source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
    sensitive = key.type is ConfigType.PASSWORD
    if sensitive:
        value = None
        synonyms = [synonym._replace(value=None) for synonym in synonyms]
    return ConfigEntry(key.name, value, source, read_only, sensitive, _WIRE_TYPES[key.type], key.doc or None,
                       tuple(synonyms))


def describe_topic_configs(config: BrokerConfig, overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """Every topic config of a topic with these overrides, by name."""
    values = config.log_config(overrides).to_properties()
    entries = []
    for name in sorted(values):
        key = LOG_CONFIG_DEF.keys[name]
        synonyms: list[ConfigSynonym] = []
        if name in overrides:
            synonyms.append(ConfigSynonym(name, values[name], ConfigSource.DYNAMIC_TOPIC_CONFIG))
        broker_names = TOPIC_CONFIG_SYNONYMS.get(name)
        if broker_names:
            synonyms.extend(_broker_synonyms(config, broker_names[0], broker_names))
        entries.append(_entry(key, values[name], synonyms, read_only=False))
    return entries


def describe_broker_configs(config: BrokerConfig) -> list[ConfigEntry]:
    """Every broker config of this broker, by name, then the replication throttles set on it."""
    entries = []
    for name in sorted(BROKER_CONFIG_DEF.keys):
        key = BROKER_CONFIG_DEF.keys[name]
        if key.internal:
            continue
        synonyms = _broker_synonyms(config, name, _BROKER_SYNONYMS.get(name, (name,)))
        entries.append(_entry(key, format_config_value(config.values[name]), synonyms,
                              read_only=name not in DYNAMIC_BROKER_CONFIGS))
    for name, key in THROTTLED_RATE_CONFIGS.items():
        synonyms = _broker_synonyms(config, name, (name,))
        if synonyms:
            entries.append(_entry(key, synonyms[0].value, synonyms, read_only=False))
    return entries


def describe_default_broker_configs(config: BrokerConfig) -> list[ConfigEntry]:
    """The cluster-wide dynamic defaults (resource name ""): the keys set there, each with its default synonym."""
    entries = []
    for name, value in sorted(config.dynamic_default.items()):
        key = THROTTLED_RATE_CONFIGS.get(name) or BROKER_CONFIG_DEF.keys.get(name)
        if key is not None:
            synonyms = [ConfigSynonym(name, value, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)]
            entries.append(_entry(key, value, synonyms, read_only=False))
    return entries


def describe_resource(image: MetadataImage, config: BrokerConfig, node_id: int, resource_type: int,
                      resource_name: str) -> list[ConfigEntry]:
    """The config entries of one DescribeConfigs resource, or the KafkaError Kafka answers for it: a topic must be
    a valid name of a topic in the image; a broker is this node's id, or "" for the cluster-wide dynamic defaults."""
    if resource_type == ConfigResourceType.TOPIC:
        validate_topic_name(resource_name)
        if image.topic(resource_name) is None:
            raise UnknownTopicOrPartitionError(f"The topic '{resource_name}' does not exist.")
        return describe_topic_configs(config, image.config(ConfigResourceType.TOPIC, resource_name))
    if resource_type == ConfigResourceType.BROKER:
        if not resource_name:
            return describe_default_broker_configs(config)
        try:
            broker_id = int(resource_name, 10)
        except ValueError:
            raise InvalidRequestError(f"Broker id must be an integer, but it is: {resource_name}") from None
        if broker_id != node_id:
            raise InvalidRequestError(
                f"Unexpected broker id, expected {node_id} or empty string, but received {resource_name}")
        return describe_broker_configs(config)
    if resource_type == ConfigResourceType.GROUP:
        if not resource_name:
            raise InvalidRequestError("Group name must not be empty")
        return describe_group_configs(config, image.config(ConfigResourceType.GROUP, resource_name))
    known = {member.value: member.name for member in ConfigResourceType}
    raise InvalidRequestError(f"Unsupported resource type: {known.get(resource_type, resource_type)}")


def describe_group_configs(config: BrokerConfig, overrides: Mapping[str, str]) -> list[ConfigEntry]:
    """Every group config but Kafka's internal ones, by name: the group's own value (GROUP_CONFIG), then the broker
    setting it overrides, or for a key of groups alone its default under its own name (as Kafka lists them)."""
    entries = []
    for name in sorted(GROUP_CONFIG_KEYS):
        entry = GROUP_CONFIG_KEYS[name]
        if entry.key.internal:
            continue
        synonyms: list[ConfigSynonym] = []
        if name in overrides:
            synonyms.append(ConfigSynonym(name, overrides[name], ConfigSource.GROUP_CONFIG))
        broker_name = entry.synonym or name
        if broker_name in BROKER_CONFIG_DEF.keys:
            synonyms.extend(_broker_synonyms(config, broker_name, (broker_name,)))
        else:
            synonyms.append(ConfigSynonym(broker_name, format_config_value(default_value(config, entry)),
                                          ConfigSource.DEFAULT_CONFIG))
        entries.append(_entry(entry.key, format_config_value(group_config_value(config, overrides, name)),
                              synonyms, read_only=False))
    return entries
