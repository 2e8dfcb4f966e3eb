"""AvroConverter (Confluent's io.confluent.connect.avro.AvroConverter): Connect data as Avro in Confluent's wire
format, its schema in a schema registry, through kfk.registry's client and serdes (one copy of the wire format).

Connect schemas map to Avro as Confluent's AvroData maps them, so a topic written by a Java worker's AvroConverter,
by confluent-kafka's AvroSerializer or by kfk reads back anywhere: STRUCT is a record named by the schema's name
(unnamed ones are io.confluent.connect.avro.ConnectDefault, then ConnectDefault2, ...) with "connect.name"; INT8
and INT16 are Avro ints marked "connect.type"; INT32/INT64/FLOAT32/FLOAT64/BOOLEAN/STRING/BYTES are
int/long/float/double/boolean/string/bytes; an optional schema is the union ["null", type] (a field's default
null), or [type, "null"] when it has a default; ARRAY is an array, MAP with STRING keys a map; Decimal, Date, Time
and Timestamp are Avro's logical types. Read back, Avro's enums are strings and fixed are bytes.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from kfk.connect.config_def import ConfigKey
from kfk.connect.converters import NULL_SCHEMA_AND_VALUE, SchemaAndValue
from kfk.connect.registry_config import RegistryConverter
from kfk.connect.data import (
    DATE_LOGICAL_NAME,
    DECIMAL_LOGICAL_NAME,
    DECIMAL_SCALE_PARAMETER,
    TIME_LOGICAL_NAME,
    TIMESTAMP_LOGICAL_NAME,
    Schema,
    SchemaBuilder,
    Struct,
    Type,
    date_schema,
    decimal_schema,
    time_schema,
    timestamp_schema,
)
from kfk.connect.errors import DataException
from kfk.registry.serdes import AvroDeserializer, AvroSerializer, RegistryClientError, subject_name

NAMESPACE = "io.confluent.connect.avro"
DEFAULT_RECORD_NAME = "ConnectDefault"
_PRIMITIVES = {Type.INT32: "int", Type.INT64: "long", Type.FLOAT32: "float", Type.FLOAT64: "double",
               Type.BOOLEAN: "boolean", Type.STRING: "string", Type.BYTES: "bytes"}
_FROM_AVRO = {"int": Type.INT32, "long": Type.INT64, "float": Type.FLOAT32, "double": Type.FLOAT64,
              "boolean": Type.BOOLEAN, "string": Type.STRING, "bytes": Type.BYTES}
_LOGICAL = {DATE_LOGICAL_NAME: ("int", "date"), TIME_LOGICAL_NAME: ("int", "time-millis"),
            TIMESTAMP_LOGICAL_NAME: ("long", "timestamp-millis")}
_LOGICAL_BUILDERS = {"date": date_schema, "time-millis": time_schema, "timestamp-millis": timestamp_schema}
_DECIMAL_PRECISION = 64  # Confluent's default when the Connect schema has no connect.decimal.precision


class _ToAvro:
    """One Connect schema's Avro schema; unnamed records are numbered in the order they are met."""

    def __init__(self) -> None:
        self.unnamed = 0

    def schema(self, schema: Schema, with_optional: bool = True) -> Any:
        avro = self._non_optional(schema)
        if with_optional and schema.optional:
            return [avro, "null"] if schema.default is not None else ["null", avro]
        return avro

    def _non_optional(self, schema: Schema) -> Any:
        kind = schema.type
        if schema.name == DECIMAL_LOGICAL_NAME:
            scale = int((schema.parameters or {})[DECIMAL_SCALE_PARAMETER])
            return {"type": "bytes", "scale": scale,
                    "precision": int((schema.parameters or {}).get("connect.decimal.precision",
                                                                   _DECIMAL_PRECISION)),
                    "connect.version": 1, "connect.parameters": dict(schema.parameters or {}),
                    "connect.name": DECIMAL_LOGICAL_NAME, "logicalType": "decimal"}
        if schema.name in _LOGICAL:
            avro_type, logical = _LOGICAL[schema.name]
            return {"type": avro_type, "connect.version": 1, "connect.name": schema.name, "logicalType": logical}
        if kind in (Type.INT8, Type.INT16):
            return {"type": "int", "connect.type": kind.value}
        if kind in _PRIMITIVES:
            return _PRIMITIVES[kind]
        if kind is Type.ARRAY:
            return {"type": "array", "items": self.schema(schema.value_schema)}
        if kind is Type.MAP:
            if schema.key_schema.type is not Type.STRING:
                raise DataException("kfk's AvroConverter writes maps with STRING keys only "
                                    f"(this map's keys are {schema.key_schema.type.name})")
            return {"type": "map", "values": self.schema(schema.value_schema)}
        return self._record(schema)

    def _record(self, schema: Schema) -> dict[str, Any]:
        if schema.name:
            namespace, _, name = schema.name.rpartition(".")
        else:
            self.unnamed += 1
            namespace, name = NAMESPACE, DEFAULT_RECORD_NAME + (str(self.unnamed) if self.unnamed > 1 else "")
        record: dict[str, Any] = {"type": "record", "name": name}
        if namespace:
            record["namespace"] = namespace
        if schema.doc:
            record["doc"] = schema.doc
        fields = []
        for field in schema.fields:
            avro_field: dict[str, Any] = {"name": field.name, "type": self.schema(field.schema)}
            if field.schema.default is not None:
                avro_field["default"] = _default(field.schema, field.schema.default)
            elif field.schema.optional:
                avro_field["default"] = None
            fields.append(avro_field)
        record["fields"] = fields
        if schema.version is not None:
            record["connect.version"] = schema.version
        if schema.name:
            record["connect.name"] = schema.name
        return record


def _default(schema: Schema, value: Any) -> Any:
    """A default as Avro's JSON writes it in a schema."""
    if isinstance(value, Struct):
        return {field.name: _default(field.schema, value.get(field)) for field in schema.fields}
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("latin-1")
    return value


def connect_to_avro_schema(schema: Schema) -> Any:
    """The Avro schema (as JSON data) Confluent's AvroConverter registers for a Connect schema."""
    return _ToAvro().schema(schema)


def connect_to_avro_value(schema: Schema, value: Any) -> Any:
    """A Connect value as fastavro writes it (records as dicts; logical types stay Python's)."""
    if value is None:
        return None
    if schema.type is Type.STRUCT:
        return {field.name: connect_to_avro_value(field.schema, value.get(field)) for field in schema.fields}
    if schema.type is Type.ARRAY:
        return [connect_to_avro_value(schema.value_schema, item) for item in value]
    if schema.type is Type.MAP:
        return {key: connect_to_avro_value(schema.value_schema, item) for key, item in value.items()}
    return value


class _ToConnect:
    """One Avro schema's Connect schema; named types met once are found again by their full names."""

    def __init__(self) -> None:
        self.named: dict[str, Schema] = {}

    def schema(self, avro: Any, namespace: str = "", optional: bool = False) -> Schema:
        if isinstance(avro, list):
            branches = [branch for branch in avro if branch != "null"]
            if len(branches) != 1:
                raise DataException("kfk's AvroConverter reads unions of null and one type only")
            return self.schema(branches[0], namespace, optional=len(avro) == 2)
        if isinstance(avro, str):
            if avro in _FROM_AVRO:
                builder = SchemaBuilder(_FROM_AVRO[avro])
            elif _full_name(avro, namespace) in self.named:
                return _optional(self.named[_full_name(avro, namespace)], optional)
            else:
                raise DataException(f"Unknown Avro type {avro}")
            return (builder.optional() if optional else builder).build()
        if isinstance(avro.get("type"), (dict, list)):  # {"type": {...}}: a type wrapped once more
            return _optional(self.schema(avro["type"], namespace), optional)
        builder = self._builder(avro, namespace)
        if optional:
            builder.optional()
        built = builder.build()
        if avro.get("type") == "record":
            self.named[_full_name(avro["name"], avro.get("namespace", namespace))] = built
        return built

    def _builder(self, avro: dict[str, Any], namespace: str) -> SchemaBuilder:
        kind, logical = avro["type"], avro.get("logicalType")
        if logical == "decimal" and kind == "bytes":
            return decimal_schema(int(avro.get("scale", 0)))
        if logical in _LOGICAL_BUILDERS:
            return _LOGICAL_BUILDERS[logical]()
        if kind == "int" and avro.get("connect.type") in ("int8", "int16"):
            return SchemaBuilder(Type(avro["connect.type"]))
        if kind in _FROM_AVRO:
            return SchemaBuilder(_FROM_AVRO[kind])
        if kind == "enum":
            return SchemaBuilder(Type.STRING)
        if kind == "fixed":
            return SchemaBuilder(Type.BYTES)
        if kind == "array":
            return SchemaBuilder.array(self.schema(avro["items"], namespace))
        if kind == "map":
            return SchemaBuilder.map(Schema(Type.STRING), self.schema(avro["values"], namespace))
        if kind == "record":
            full_name = _full_name(avro["name"], avro.get("namespace", namespace))
            inner = full_name.rpartition(".")[0]
            builder = SchemaBuilder.struct()
            if not full_name.startswith(f"{NAMESPACE}.{DEFAULT_RECORD_NAME}"):
                builder.name(avro.get("connect.name", full_name))
            if "connect.version" in avro:
                builder.version(int(avro["connect.version"]))
            if avro.get("doc"):
                builder.doc(avro["doc"])
            for field in avro["fields"]:
                builder.field(field["name"], self.schema(field["type"], inner))
            return builder
        raise DataException(f"Unknown Avro type {kind}")


def _optional(schema: Schema, optional: bool) -> Schema:
    if not optional or schema.optional:
        return schema
    builder = SchemaBuilder.of(schema).optional()
    if schema.type is Type.STRUCT:
        for field in schema.fields:
            builder.field(field.name, field.schema)
    return builder.build()


def _full_name(name: str, namespace: str) -> str:
    return name if "." in name or not namespace else f"{namespace}.{name}"


def avro_to_connect_schema(avro: Any) -> Schema:
    """The Connect schema of an Avro schema (JSON data), as Confluent's AvroData reads one."""
    return _ToConnect().schema(avro)


def avro_to_connect_value(schema: Schema, value: Any) -> Any:
    if value is None:
        return None
    if schema.type is Type.STRUCT:
        struct = Struct(schema)
        for field in schema.fields:
            struct.put(field.name, avro_to_connect_value(field.schema, value.get(field.name)))
        return struct
    if schema.type is Type.ARRAY:
        return [avro_to_connect_value(schema.value_schema, item) for item in value]
    if schema.type is Type.MAP:
        return {key: avro_to_connect_value(schema.value_schema, item) for key, item in value.items()}
    return value


class AvroConverter(RegistryConverter):
    """Confluent's AvroConverter over kfk.registry: `schema.registry.url`, `auto.register.schemas` (register the
    record's schema under the subject, else look it up) and `use.latest.version` (write with the subject's latest
    schema instead, with auto.register.schemas=false)."""

    def __init__(self) -> None:
        super().__init__()
        self.use_latest_version = False
        self._serializers: dict[tuple[str, Schema], tuple[AvroSerializer, Schema]] = {}
        self._deserializer: AvroDeserializer | None = None
        self._connect_schemas: dict[str, Schema] = {}

    def extra_config_keys(self) -> list[ConfigKey]:
        return [ConfigKey("use.latest.version", "BOOLEAN", False, "LOW",
                          "Write with the subject's latest schema (with auto.register.schemas=false).")]

    def configure_more(self, parsed: Mapping[str, Any]) -> None:
        self.use_latest_version = parsed["use.latest.version"] and not self.auto_register
        self._deserializer = AvroDeserializer(self.client)

    def _serializer(self, topic: str, schema: Schema) -> tuple[AvroSerializer, Schema]:
        """The serializer of records of ``schema`` and the Connect schema they are written as (the subject's
        latest, under use.latest.version)."""
        cached = self._serializers.get((topic, schema))
        if cached is None:
            text = json.dumps(connect_to_avro_schema(schema), separators=(",", ":"))
            written_as = schema
            if self.use_latest_version:
                text = self.client.latest(subject_name(self.strategy, topic, self.is_key, schema.name))["schema"]
                written_as = avro_to_connect_schema(json.loads(text))
            serializer = AvroSerializer(self.client, text, is_key=self.is_key, auto_register=self.auto_register,
                                        subject_name_strategy=self.strategy)
            cached = self._serializers[(topic, schema)] = (serializer, written_as)
        return cached

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if schema is None:
            raise DataException("AvroConverter needs a schema: the record has none")
        try:
            serializer, written_as = self._serializer(topic, schema)
            if written_as is not schema and isinstance(value, Struct):
                value = _project(value, written_as)
            return serializer.serialize(topic, connect_to_avro_value(written_as, value))
        except RegistryClientError as error:
            raise DataException(f"Failed to access Avro data from topic {topic} : {error}") from None
        except (ValueError, TypeError) as error:
            raise DataException(f"Failed to serialize Avro data from topic {topic} : {error}") from None

    def to_connect_data(self, topic: str, value: bytes | None) -> SchemaAndValue:
        if value is None:
            return NULL_SCHEMA_AND_VALUE
        try:
            parsed, data = self._deserializer.deserialize(value)
        except RegistryClientError as error:
            raise DataException(f"Failed to access Avro data from topic {topic} : {error}") from None
        except (ValueError, EOFError) as error:
            raise DataException(f"Failed to deserialize data for topic {topic} to Avro: {error}") from None
        schema = self._connect_schemas.get(parsed.canonical)
        if schema is None:
            schema = self._connect_schemas[parsed.canonical] = avro_to_connect_schema(json.loads(parsed.canonical))
        return SchemaAndValue(schema, avro_to_connect_value(schema, data))


def _project(value: Struct, schema: Schema) -> Struct:
    """A struct's fields that ``schema`` has (use.latest.version: the record is written as the latest schema)."""
    projected = Struct(schema)
    for field in schema.fields:
        if value.schema.field(field.name) is not None:
            projected.put(field.name, value.get(field.name))
    return projected
