"""The configuration the schema registry's converters share: which subject a record's schema goes under
(`key.subject.name.strategy` / `value.subject.name.strategy`, named by Confluent's class names or their simple
names)."""

from __future__ import annotations

from typing import Any, Mapping

from kfk.connect.config_def import ConfigKey
from kfk.connect.errors import DataException
from kfk.registry.serdes import SUBJECT_NAME_STRATEGIES

STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."


def subject_strategy_keys() -> list[ConfigKey]:
    return [ConfigKey(f"{part}.subject.name.strategy", "STRING", STRATEGY_PACKAGE + "TopicNameStrategy", "MEDIUM",
                      f"How the subject of a record's {part} schema is named: TopicNameStrategy, RecordNameStrategy "
                      "or TopicRecordNameStrategy.") for part in ("key", "value")]


def subject_strategy(parsed: Mapping[str, Any], is_key: bool) -> str:
    """The simple name of the strategy configured for keys or values (as kfk.registry.serdes names it)."""
    configured = parsed[f"{'key' if is_key else 'value'}.subject.name.strategy"]
    simple = configured.rsplit(".", 1)[-1]
    if simple not in SUBJECT_NAME_STRATEGIES:
        raise DataException(f"Unknown subject name strategy {configured}: use one of "
                            + ", ".join(STRATEGY_PACKAGE + name for name in SUBJECT_NAME_STRATEGIES))
    return simple
