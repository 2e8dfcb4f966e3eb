"""Finding plugins: kfk's built-ins (under Kafka's Java class names too) and Python entry points.

A config names a plugin as Kafka's does: its full class name (`org.apache.kafka.connect.file.FileStreamSourceConnector`
or kfk's `kfk.connect.connectors.file:FileStreamSourceConnector`), or an alias: the simple class name, and for
connectors and converters that name without its "Connector"/"Converter" suffix (`FileStreamSource`). Third-party
plugins register under the entry point group `kfk.connect.plugins` (name = the class name to use in configs,
value = `module:Class`); their kind follows from the class they extend.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from kfk.connect.connector import SinkConnector, SourceConnector
from kfk.connect.converters import Converter, HeaderConverter
from kfk.connect.errors import ConnectException
from kfk.connect.transforms.base import Predicate, Transformation

ENTRY_POINT_GROUP = "kfk.connect.plugins"
KINDS = ("source", "sink", "converter", "header_converter", "transformation", "predicate")

#: Kafka's Java class name -> (kfk's module:attribute, the Key/Value part for transforms that have one).
_FILE, _TRANSFORMS, _PREDICATES = ("org.apache.kafka.connect.file.", "org.apache.kafka.connect.transforms.",
                                   "org.apache.kafka.connect.transforms.predicates.")
_MIRROR = "org.apache.kafka.connect.mirror."
KAFKA_BUILT_INS: dict[str, tuple[str, str | None]] = {
    _FILE + "FileStreamSourceConnector": ("kfk.connect.connectors.file:FileStreamSourceConnector", None),
    _FILE + "FileStreamSinkConnector": ("kfk.connect.connectors.file:FileStreamSinkConnector", None),
    "io.confluent.connect.jdbc.JdbcSourceConnector": ("kfk.connect.connectors.jdbc.source:JdbcSourceConnector", None),
    "io.confluent.connect.jdbc.JdbcSinkConnector": ("kfk.connect.connectors.jdbc.sink:JdbcSinkConnector", None),
    "org.apache.kafka.connect.json.JsonConverter": ("kfk.connect.json_converter:JsonConverter", None),
    "org.apache.kafka.connect.storage.StringConverter": ("kfk.connect.converters:StringConverter", None),
    "org.apache.kafka.connect.converters.ByteArrayConverter": ("kfk.connect.converters:ByteArrayConverter", None),
    "org.apache.kafka.connect.storage.SimpleHeaderConverter": ("kfk.connect.converters:SimpleHeaderConverter", None),
    "io.confluent.connect.avro.AvroConverter": ("kfk.connect.avro_converter:AvroConverter", None),
    "io.confluent.connect.json.JsonSchemaConverter": ("kfk.connect.json_schema_converter:JsonSchemaConverter", None),
    "io.confluent.connect.protobuf.ProtobufConverter": ("kfk.connect.protobuf_converter:ProtobufConverter", None),
    _MIRROR + "MirrorSourceConnector": ("kfk.connect.mirror.source:MirrorSourceConnector", None),
    _MIRROR + "MirrorCheckpointConnector": ("kfk.connect.mirror.checkpoint:MirrorCheckpointConnector", None),
    _MIRROR + "MirrorHeartbeatConnector": ("kfk.connect.mirror.heartbeat:MirrorHeartbeatConnector", None),
    _TRANSFORMS + "RegexRouter": ("kfk.connect.transforms.regex_router:RegexRouter", None),
    _TRANSFORMS + "Filter": ("kfk.connect.transforms.filter:Filter", None),
    _TRANSFORMS + "ValueToKey": ("kfk.connect.transforms.value_to_key:ValueToKey", None),
    _PREDICATES + "TopicNameMatches": ("kfk.connect.transforms.filter:TopicNameMatches", None),
    _PREDICATES + "HasHeaderKey": ("kfk.connect.transforms.filter:HasHeaderKey", None),
    _PREDICATES + "RecordIsTombstone": ("kfk.connect.transforms.filter:RecordIsTombstone", None),
}
for _name, _module in (("InsertField", "insert_field"), ("ReplaceField", "replace_field"), ("MaskField", "mask_field"),
                       ("Cast", "cast"), ("TimestampConverter", "timestamp_converter")):
    for _part in ("Key", "Value"):
        KAFKA_BUILT_INS[f"{_TRANSFORMS}{_name}${_part}"] = (
            f"kfk.connect.transforms.{_module}:{_name}", _part.lower())


@dataclass(frozen=True)
class PluginDesc:
    """One plugin: the class name configs use, its kind, and how to make an instance."""
    class_name: str
    kind: str
    target: str
    part: str | None = None

    def load(self) -> Any:
        module, _, attribute = self.target.partition(":")
        return getattr(importlib.import_module(module), attribute)

    def instantiate(self) -> Any:
        plugin_class = self.load()
        return plugin_class(self.part) if self.part is not None else plugin_class()

    def task_class_name(self, task_class: type) -> str:
        """What a connector's task configs name as `task.class`: for Kafka's own connectors, Kafka's task class
        (in the connector's Java package), so that a Java worker sharing the config topic can run the task."""
        if self.class_name in KAFKA_BUILT_INS and self.class_name.startswith("org.apache.kafka."):
            return f"{self.class_name.rsplit('.', 1)[0]}.{task_class.__name__}"
        return f"{task_class.__module__}.{task_class.__qualname__}"

    @property
    def kfk_name(self) -> str:
        name = self.target.replace(":", ".")
        return f"{name}${self.part.capitalize()}" if self.part else name


def _kind_of(plugin_class: type) -> list[str]:
    kinds = []
    for base, kind in ((SourceConnector, "source"), (SinkConnector, "sink"), (Converter, "converter"),
                       (HeaderConverter, "header_converter"), (Transformation, "transformation"),
                       (Predicate, "predicate")):
        if isinstance(plugin_class, type) and issubclass(plugin_class, base):
            kinds.append(kind)
    return kinds


@cache
def all_plugins() -> tuple[PluginDesc, ...]:
    """Every plugin (one entry per kind it has), built-ins first, sorted by class name as Kafka lists them."""
    found: list[PluginDesc] = []
    for class_name, (target, part) in KAFKA_BUILT_INS.items():
        plugin_class = PluginDesc(class_name, "", target, part).load()
        found.extend(PluginDesc(class_name, kind, target, part) for kind in _kind_of(plugin_class))
    for entry_point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            plugin_class = entry_point.load()
        except Exception:  # a broken third-party plugin must not stop the worker (Kafka logs and skips it)
            continue
        target = f"{plugin_class.__module__}:{plugin_class.__qualname__}"
        found.extend(PluginDesc(entry_point.name, kind, target) for kind in _kind_of(plugin_class))
    return tuple(sorted(found, key=lambda plugin: (KINDS.index(plugin.kind) if plugin.kind in KINDS else 99,
                                                   plugin.class_name)))


def _aliases(plugin: PluginDesc) -> set[str]:
    simple = plugin.class_name.rsplit(".", 1)[-1]
    names = {plugin.class_name, plugin.kfk_name, simple}
    for suffix in ("Connector", "Converter"):
        if simple.endswith(suffix):
            names.add(simple[: -len(suffix)])
    return names


def find(name: str, kinds: tuple[str, ...]) -> PluginDesc:
    """The plugin of one of `kinds` that `name` names (class name, kfk's module path or alias)."""
    name = name.strip()
    candidates = [plugin for plugin in all_plugins() if plugin.kind in kinds]
    for plugin in candidates:
        if name in _aliases(plugin):
            return plugin
    if ":" in name or "." in name:  # module.Class or module:Class not registered: import it directly
        module, _, attribute = name.replace(":", ".").rpartition(".")
        try:
            plugin_class = getattr(importlib.import_module(module), attribute)
        except (ImportError, AttributeError, ValueError):
            plugin_class = None
        if plugin_class is not None:
            for kind in _kind_of(plugin_class):
                if kind in kinds:
                    return PluginDesc(name, kind, f"{module}:{attribute}")
    raise ConnectException(_not_found_message(name, kinds, candidates))


def _not_found_message(name: str, kinds: tuple[str, ...], candidates: list[PluginDesc]) -> str:
    what = {"source": "Connector", "sink": "Connector", "converter": "Converter",
            "header_converter": "HeaderConverter", "transformation": "Transformation",
            "predicate": "Predicate"}[kinds[0]]
    available = ", ".join(f"PluginDesc{{name='{plugin.class_name}', type={plugin.kind}}}" for plugin in candidates)
    return f"Failed to find any class that implements {what} and which name matches {name}, available " \
           f"{what.lower()}s are: {available}"


def find_connector(name: str) -> PluginDesc:
    return find(name, ("source", "sink"))


def new_instance(name: str, kinds: tuple[str, ...]) -> Any:
    return find(name, kinds).instantiate()


