"""What a config is described with: the resource it belongs to, where its value comes from, and one described entry.

The broker builds ConfigEntry values (kfk.controller.config_describer) and answers DescribeConfigs / CreateTopics
from them; the client's Admin decodes those answers into the same type, so both ends speak one shape. The ids are
Kafka's wire ids (ConfigResource.Type, DescribeConfigsResponse.ConfigSource and ConfigType).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

__all__ = ["ConfigResourceType", "ConfigSource", "WireConfigType", "ConfigSynonym", "ConfigEntry"]


class ConfigResourceType(IntEnum):
    """What a config belongs to (Kafka's ConfigResource.Type), as in DescribeConfigs and ConfigRecord."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    CLIENT_METRICS = 16
    GROUP = 32


class ConfigSource(IntEnum):
    """Where a config value comes from (DescribeConfigs v1+; Kafka's code names DYNAMIC_TOPIC_CONFIG TOPIC_CONFIG)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8


class WireConfigType(IntEnum):
    """DescribeConfigsResponse.ConfigType, the `config_type` field of v3+."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class ConfigSynonym(NamedTuple):
    """One name a value could come from, in precedence order within ConfigEntry.synonyms."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """One config key of a resource as DescribeConfigs describes it: its effective value, where that value comes
    from, and (when asked for) its synonyms and documentation."""

    name: str
    value: str | None
    source: ConfigSource
    is_read_only: bool
    is_sensitive: bool
    config_type: WireConfigType = WireConfigType.UNKNOWN
    documentation: str | None = None
    synonyms: tuple[ConfigSynonym, ...] = ()

    @property
    def is_default(self) -> bool:
        """The value is the built-in default (DescribeConfigs v0's is_default; v1+ says it with the source)."""
        return self.source == ConfigSource.DEFAULT_CONFIG
