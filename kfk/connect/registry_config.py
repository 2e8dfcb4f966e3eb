"""What the schema registry's converters share (Confluent's AvroConverter, JsonSchemaConverter and
ProtobufConverter): `schema.registry.url`, `auto.register.schemas`, and which subject a record's schema goes under
(`key.subject.name.strategy` / `value.subject.name.strategy`, named by Confluent's class names or their simple
names)."""

from __future__ import annotations

from typing import Any, Mapping

from kfk.connect.config_def import ConfigDef, ConfigKey
from kfk.connect.converters import Converter
from kfk.connect.errors import DataException
from kfk.registry.serdes import SUBJECT_NAME_STRATEGIES, RegistryClient

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


class RegistryConverter(Converter):
    """A converter over kfk.registry: the registry client and the settings every Confluent converter takes.
    Subclasses add their own keys (`extra_config_keys`) and read them in `configure_more`."""

    def __init__(self) -> None:
        self.client: RegistryClient | None = None
        self.is_key = False
        self.auto_register = True
        self.strategy = "TopicNameStrategy"

    def extra_config_keys(self) -> list[ConfigKey]:
        return []

    def config(self) -> ConfigDef:
        return ConfigDef([
            ConfigKey("schema.registry.url", "LIST", importance="HIGH",
                      documentation="Comma-separated URLs of schema registry instances (the first is used)."),
            ConfigKey("auto.register.schemas", "BOOLEAN", True, "MEDIUM",
                      "Register a record's schema under its subject, rather than look it up."),
            *self.extra_config_keys(),
            *subject_strategy_keys(),
        ])

    def configure(self, configs: Mapping[str, Any], is_key: bool = False) -> None:
        definition = self.config()
        parsed = definition.parse({key: value for key, value in configs.items() if key in definition.keys})
        self.client = RegistryClient(parsed["schema.registry.url"][0])
        self.is_key = is_key
        self.auto_register = parsed["auto.register.schemas"]
        self.strategy = subject_strategy(parsed, is_key)
        self.configure_more(parsed)

    def configure_more(self, parsed: Mapping[str, Any]) -> None:
        """Read the subclass's own keys, once the shared ones are set."""
