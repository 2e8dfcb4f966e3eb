"""The Transformation and Predicate interfaces, the key-or-value helper and the chain a connector runs."""

from __future__ import annotations

from typing import Any, Mapping

from kfk.connect.config_def import ConfigDef
from kfk.connect.data import Schema, SchemaBuilder, Struct
from kfk.connect.errors import DataException
from kfk.connect.records import ConnectRecord


class Transformation:
    """Kafka's Transformation: `configure` once, then `apply` each record (None drops it)."""

    def configure(self, props: Mapping[str, Any]) -> None:
        pass

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        raise NotImplementedError

    def config(self) -> ConfigDef:
        return ConfigDef()

    def close(self) -> None:
        pass


class Predicate:
    """Kafka's Predicate: decides whether a transform applies to a record."""

    def configure(self, props: Mapping[str, Any]) -> None:
        pass

    def test(self, record: ConnectRecord) -> bool:
        raise NotImplementedError

    def config(self) -> ConfigDef:
        return ConfigDef()

    def close(self) -> None:
        pass


class KeyOrValue(Transformation):
    """A transform of the record's key (`part="key"`, Kafka's X$Key) or value (`part="value"`, X$Value)."""

    def __init__(self, part: str = "value") -> None:
        if part not in ("key", "value"):
            raise ValueError(part)
        self.part = part

    def operating_schema(self, record: ConnectRecord) -> Schema | None:
        return record.key_schema if self.part == "key" else record.value_schema

    def operating_value(self, record: ConnectRecord) -> Any:
        return record.key if self.part == "key" else record.value

    def new_record(self, record: ConnectRecord, schema: Schema | None, value: Any) -> ConnectRecord:
        if self.part == "key":
            return record.new_record(key_schema=schema, key=value)
        return record.new_record(value_schema=schema, value=value)


def require_map(value: Any, purpose: str) -> dict:
    if not isinstance(value, dict):
        raise DataException(f"Only Map objects supported in absence of schema for [{purpose}], found: "
                            + _class_name(value))
    return value


def require_struct(value: Any, purpose: str) -> Struct:
    if not isinstance(value, Struct):
        raise DataException(f"Only Struct objects supported for [{purpose}], found: " + _class_name(value))
    return value


def _class_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def copy_schema_basics(source: Schema, builder: SchemaBuilder) -> SchemaBuilder:
    """Kafka's SchemaUtil.copySchemaBasics: name, version, doc, parameters (and optional)."""
    builder.name(source.name).version(source.version).doc(source.doc)
    if source.parameters:
        builder.parameters(source.parameters)
    if source.optional:
        builder.optional()
    return builder


class TransformationStage:
    """One configured transform with its optional predicate and negation."""

    def __init__(self, transformation: Transformation, predicate: Predicate | None = None,
                 negate: bool = False) -> None:
        self.transformation = transformation
        self.predicate = predicate
        self.negate = negate

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if self.predicate is not None and self.predicate.test(record) == self.negate:
            return record
        return self.transformation.apply(record)

    def close(self) -> None:
        self.transformation.close()
        if self.predicate is not None:
            self.predicate.close()


class TransformationChain:
    def __init__(self, stages: list[TransformationStage]) -> None:
        self.stages = stages

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        for stage in self.stages:
            record = stage.apply(record)
            if record is None:
                return None
        return record

    def close(self) -> None:
        for stage in self.stages:
            stage.close()
