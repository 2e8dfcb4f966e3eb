"""The framework's connector config keys (Kafka's ConnectorConfig, SourceConnectorConfig, SinkConnectorConfig),
in Kafka's order, groups and defaults, and the transforms/predicates they configure.

Validation reports them beside the connector's own keys, as /connector-plugins/{plugin}/config/validate shows
(documentation strings are kfk's own words).
"""

from __future__ import annotations

from typing import Any, Mapping

from kfk.connect import plugins
from kfk.connect.config_def import (
    ConfigDef,
    ConfigException,
    ConfigInfos,
    ConfigKey,
    at_least,
    config_value_json,
    one_of,
)
from kfk.connect.transforms.base import TransformationChain, TransformationStage

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
SIMPLE_HEADER_CONVERTER = "org.apache.kafka.connect.storage.SimpleHeaderConverter"


def _common(version: str) -> list[ConfigKey]:
    return [
        ConfigKey("name", "STRING", importance="HIGH", documentation="The connector's unique name.",
                  group="Common", order_in_group=1, width="MEDIUM", display_name="Connector name"),
        ConfigKey("connector.class", "STRING", importance="HIGH",
                  documentation="The connector's class name or alias (Kafka's Java names are accepted).",
                  group="Common", order_in_group=2, width="LONG", display_name="Connector class"),
        ConfigKey("connector.plugin.version", "STRING", version, "MEDIUM", "The connector's version.", "Common", 3,
                  "MEDIUM", "Connector version"),
        ConfigKey("tasks.max", "INT", 1, "HIGH", "The most tasks the connector may run.", "Common", 4, "SHORT",
                  "Tasks max", validator=at_least(1)),
        ConfigKey("tasks.max.enforce", "BOOLEAN", True, "LOW", "(Deprecated) Whether tasks.max is enforced.",
                  "Common", 5, "SHORT", "Enforce tasks max"),
        ConfigKey("key.converter", "CLASS", JSON_CONVERTER, "LOW", "The converter of record keys.", "Common", 6,
                  "SHORT", "Key converter class"),
        ConfigKey("key.converter.plugin.version", "STRING", version, "LOW", "The key converter's version.",
                  "Common", 7, "SHORT", "Key converter version"),
        ConfigKey("value.converter", "CLASS", JSON_CONVERTER, "LOW", "The converter of record values.", "Common", 8,
                  "SHORT", "Value converter class"),
        ConfigKey("value.converter.plugin.version", "STRING", version, "LOW", "The value converter's version.",
                  "Common", 9, "SHORT", "Value converter version"),
        ConfigKey("header.converter", "CLASS", SIMPLE_HEADER_CONVERTER, "LOW", "The converter of header values.",
                  "Common", 10, "SHORT", "Header converter class"),
        ConfigKey("header.converter.plugin.version", "STRING", version, "LOW", "The header converter's version.",
                  "Common", 11, "SHORT", "Header converter version"),
        ConfigKey("transforms", "LIST", [], "LOW", "Aliases of the transforms applied to records, in order.",
                  "Transforms", 12, "LONG", "Transforms"),
        ConfigKey("predicates", "LIST", [], "LOW", "Aliases of the predicates transforms use.", "Predicates", 13,
                  "LONG", "Predicates"),
        ConfigKey("config.action.reload", "STRING", "restart", "LOW",
                  "What to do when externally provided config values change: none or restart.", "Common", 14,
                  "MEDIUM", "Reload Action", validator=one_of("none", "restart")),
        ConfigKey("errors.retry.timeout", "LONG", 0, "MEDIUM",
                  "How long (ms) a failed operation is retried; 0 never, -1 forever.", "Error Handling", 1, "MEDIUM",
                  "Retry Timeout for Errors"),
        ConfigKey("errors.retry.delay.max.ms", "LONG", 60000, "MEDIUM", "The longest wait (ms) between retries.",
                  "Error Handling", 2, "MEDIUM", "Maximum Delay Between Retries for Errors"),
        ConfigKey("errors.tolerance", "STRING", "none", "MEDIUM",
                  "none: an error fails the task; all: problem records are skipped.", "Error Handling", 3, "SHORT",
                  "Error Tolerance", validator=one_of("none", "all")),
        ConfigKey("errors.log.enable", "BOOLEAN", False, "MEDIUM", "Whether each tolerated error is logged.",
                  "Error Handling", 4, "SHORT", "Log Errors"),
        ConfigKey("errors.log.include.messages", "BOOLEAN", False, "MEDIUM",
                  "Whether logged errors include the record.", "Error Handling", 5, "SHORT", "Log Error Details"),
    ]


def source_config_def(version: str) -> ConfigDef:
    return ConfigDef(_common(version) + [
        ConfigKey("topic.creation.groups", "LIST", [], "LOW", "Groups of settings of topics source tasks create.",
                  "Topic Creation", 1, "LONG", "Topic Creation Groups"),
        ConfigKey("exactly.once.support", "STRING", "requested", "MEDIUM",
                  "requested, or required to refuse connectors that cannot promise exactly-once delivery.",
                  "Exactly Once Support", 2, "SHORT", "Exactly once support",
                  validator=one_of("requested", "required")),
        ConfigKey("transaction.boundary", "STRING", "poll", "MEDIUM",
                  "Where exactly-once transactions end: poll, interval or connector.", "Exactly Once Support", 3,
                  "SHORT", "Transaction Boundary", validator=one_of("poll", "interval", "connector")),
        ConfigKey("transaction.boundary.interval.ms", "LONG", None, "LOW",
                  "The transaction interval when transaction.boundary is interval.", "Exactly Once Support", 4,
                  "SHORT", "Transaction boundary interval"),
        ConfigKey("offsets.storage.topic", "STRING", None, "LOW", "A separate offsets topic for this connector.",
                  "offsets.topic", 1, "LONG", "Offsets topic"),
    ])


def sink_config_def(version: str) -> ConfigDef:
    return ConfigDef(_common(version) + [
        ConfigKey("topics", "LIST", [], "HIGH", "The topics to consume.", "Common", 4, "LONG", "Topics"),
        ConfigKey("topics.regex", "STRING", "", "HIGH", "A regular expression of the topics to consume.", "Common",
                  4, "LONG", "Topics regex"),
        ConfigKey("errors.deadletterqueue.topic.name", "STRING", "", "MEDIUM",
                  "The topic records that failed are written to (none when empty).", "Error Handling", 6, "MEDIUM",
                  "Dead Letter Queue Topic Name"),
        ConfigKey("errors.deadletterqueue.topic.replication.factor", "SHORT", 3, "MEDIUM",
                  "The replication factor of the dead letter queue topic when it is created.", "Error Handling", 7,
                  "MEDIUM", "Dead Letter Queue Topic Replication Factor"),
        ConfigKey("errors.deadletterqueue.context.headers.enable", "BOOLEAN", False, "MEDIUM",
                  "Whether dead letter queue records carry headers naming the failure.", "Error Handling", 8,
                  "MEDIUM", "Enable Error Context Headers"),
    ])


def prefixed(config: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {key[len(prefix):]: value for key, value in config.items() if key.startswith(prefix)}


def build_transformations(config: Mapping[str, str]) -> TransformationChain:
    """The connector's transforms chain from `transforms`, `transforms.<a>.*`, `predicates`, `predicates.<p>.*`."""
    aliases = [alias.strip() for alias in config.get("transforms", "").split(",") if alias.strip()]
    predicate_aliases = {alias.strip() for alias in config.get("predicates", "").split(",") if alias.strip()}
    stages = []
    for alias in aliases:
        props = prefixed(config, f"transforms.{alias}.")
        if "type" not in props:
            raise ConfigException(f'Missing required configuration "transforms.{alias}.type" which has no default '
                                  "value.")
        transformation = plugins.new_instance(props["type"], ("transformation",))
        transformation.configure({key: value for key, value in props.items()
                                  if key not in ("type", "predicate", "negate")})
        predicate = None
        predicate_alias = props.get("predicate")
        if predicate_alias:
            if predicate_alias not in predicate_aliases:
                raise ConfigException(f"Invalid value {predicate_alias} for configuration transforms.{alias}.predicate:"
                                      " The predicate must be one of " + str(sorted(predicate_aliases)))
            predicate_props = prefixed(config, f"predicates.{predicate_alias}.")
            if "type" not in predicate_props:
                raise ConfigException(f'Missing required configuration "predicates.{predicate_alias}.type" which has '
                                      "no default value.")
            predicate = plugins.new_instance(predicate_props["type"], ("predicate",))
            predicate.configure({key: value for key, value in predicate_props.items() if key != "type"})
        negate = props.get("negate", "false").strip().lower() == "true"
        stages.append(TransformationStage(transformation, predicate, negate))
    return TransformationChain(stages)


def validate_connector_config(config: Mapping[str, str]) -> ConfigInfos:
    """Kafka's AbstractHerder.validateConnectorConfig: the framework's and the connector's keys with errors."""
    class_name = config.get("connector.class")
    if not class_name:
        from kfk.connect.errors import BadRequestException
        raise BadRequestException(f"Connector config {java_map(config)} contains no connector type")
    plugin = plugins.find_connector(class_name)
    connector = plugin.instantiate()
    version = connector.version()
    framework = source_config_def(version) if plugin.kind == "source" else sink_config_def(version)
    infos = ConfigInfos(class_name)
    results = framework.validate_all(config)
    if plugin.kind == "sink":
        has_topics = bool(config.get("topics", "").strip())
        has_regex = bool(config.get("topics.regex", "").strip())
        if has_topics == has_regex:
            message = "Must configure one of topics or topics.regex" if not has_topics else \
                "topics and topics.regex are mutually exclusive options, but both are set."
            results["topics"] = (results["topics"][0], results["topics"][1] + [message])
            results["topics.regex"] = (results["topics.regex"][0], results["topics.regex"][1] + [message])
    for name in ("key.converter", "value.converter", "header.converter"):
        value = config.get(name)
        if value:
            kinds = ("header_converter",) if name == "header.converter" else ("converter",)
            try:
                plugins.find(value, kinds)
            except Exception as error:
                results[name] = (None, [f"Invalid value {value} for configuration {name}: {error}"])
    try:
        build_transformations(config).close()
    except Exception as error:
        results["transforms"] = (results["transforms"][0], results["transforms"][1] + [str(error)])
    recommended_converters = sorted(plugin.class_name for plugin in plugins.all_plugins()
                                    if plugin.kind == "converter")
    recommended_header = sorted(plugin.class_name for plugin in plugins.all_plugins()
                                if plugin.kind == "header_converter")
    for key in framework.keys.values():
        raw = config.get(key.name, _default_text(key))
        recommended: list[str] = []
        if key.name.endswith("plugin.version"):
            recommended = [version]
        elif key.name in ("key.converter", "value.converter"):
            recommended = recommended_converters
        elif key.name == "header.converter":
            recommended = recommended_header
        infos.configs.append(config_value_json(key, raw, results[key.name][1], recommended))
    connector_results = connector.validate(config)
    for key in connector.config().keys.values():
        if key.name in framework.keys:
            continue
        value, errors = connector_results.get(key.name, (None, []))
        raw = config.get(key.name) if not errors else None
        infos.configs.append(config_value_json(key, raw, errors))
    return infos


def _default_text(key: ConfigKey) -> Any:
    from kfk.connect.config_def import render
    return None if key.required else render(key.type, key.default)


def java_map(config: Mapping[str, str]) -> str:
    """A map as Java's Map.toString prints it ({a=b, c=d}), which Kafka's messages quote."""
    return "{" + ", ".join(f"{key}={value}" for key, value in config.items()) + "}"
