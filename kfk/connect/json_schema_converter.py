"""JsonSchemaConverter (Confluent's io.confluent.connect.json.JsonSchemaConverter): Connect data as JSON documents in
Confluent's wire format, their JSON Schema in a schema registry, through kfk.registry's client and serdes.

Connect schemas map to JSON Schema after Confluent's JsonSchemaData, for the common types: STRUCT is an "object"
titled by the schema's name, its properties marked with "connect.index" and the non-optional ones "required";
integers are "integer" and floats "number", marked with "connect.type" (int8 ... float64); BYTES is a base64
"string" marked "connect.type": "bytes"; an optional schema is {"oneOf": [{"type": "null"}, ...]}; ARRAY is an
"array"; MAP with STRING keys an "object" of "additionalProperties" marked "connect.type": "map". Read back, a
property is optional unless "required" or non-null, an unmarked "integer" is INT64 and "number" FLOAT64.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from kfk.connect.converters import NULL_SCHEMA_AND_VALUE, SchemaAndValue
from kfk.connect.data import Schema, SchemaBuilder, Struct, Type
from kfk.connect.errors import DataException
from kfk.connect.registry_config import RegistryConverter
from kfk.registry.schema_types import JSON
from kfk.registry.serdes import JsonSchemaSerializer, RegistryClientError, unframe, writer_schema

_INTEGERS = (Type.INT8, Type.INT16, Type.INT32, Type.INT64)


def connect_to_json_schema(schema: Schema) -> dict[str, Any]:
    node = _non_optional(schema)
    return {"oneOf": [{"type": "null"}, node]} if schema.optional else node


def _non_optional(schema: Schema) -> dict[str, Any]:
    kind = schema.type
    if kind in _INTEGERS:
        return {"type": "integer", "connect.type": kind.value}
    if kind in (Type.FLOAT32, Type.FLOAT64):
        return {"type": "number", "connect.type": kind.value}
    if kind is Type.BOOLEAN:
        return {"type": "boolean"}
    if kind is Type.STRING:
        return {"type": "string"}
    if kind is Type.BYTES:
        return {"type": "string", "connect.type": "bytes"}
    if kind is Type.ARRAY:
        return {"type": "array", "items": connect_to_json_schema(schema.value_schema)}
    if kind is Type.MAP:
        if schema.key_schema.type is not Type.STRING:
            raise DataException("kfk's JsonSchemaConverter writes maps with STRING keys only")
        return {"type": "object", "additionalProperties": connect_to_json_schema(schema.value_schema),
                "connect.type": "map"}
    node: dict[str, Any] = {"type": "object"}
    if schema.name:
        node["title"] = schema.name
    node["properties"] = {field.name: {**connect_to_json_schema(field.schema), "connect.index": field.index}
                          for field in schema.fields}
    required = [field.name for field in schema.fields if not field.schema.optional]
    if required:
        node["required"] = required
    return node


def json_schema_to_connect(node: Any, optional: bool = False) -> Schema:
    if not isinstance(node, dict):
        raise DataException(f"Unsupported JSON Schema: {node!r}")
    if "oneOf" in node or "anyOf" in node:
        branches = [branch for branch in node.get("oneOf", node.get("anyOf")) if branch != {"type": "null"}]
        if len(branches) != 1:
            raise DataException("kfk's JsonSchemaConverter reads unions of null and one type only")
        return json_schema_to_connect(branches[0], True)
    kind, marked = node.get("type"), node.get("connect.type")
    if kind == "integer":
        builder = SchemaBuilder(Type(marked) if marked in ("int8", "int16", "int32", "int64") else Type.INT64)
    elif kind == "number":
        builder = SchemaBuilder(Type.FLOAT32 if marked == "float32" else Type.FLOAT64)
    elif kind == "boolean":
        builder = SchemaBuilder(Type.BOOLEAN)
    elif kind == "string":
        builder = SchemaBuilder(Type.BYTES if marked == "bytes" else Type.STRING)
    elif kind == "array":
        builder = SchemaBuilder.array(json_schema_to_connect(node.get("items", {})))
    elif kind == "object" and "properties" not in node and isinstance(node.get("additionalProperties"), dict):
        builder = SchemaBuilder.map(Schema(Type.STRING), json_schema_to_connect(node["additionalProperties"]))
    elif kind == "object":
        builder = SchemaBuilder.struct().name(node.get("title"))
        required = set(node.get("required", ()))
        properties = sorted(node.get("properties", {}).items(),
                            key=lambda item: item[1].get("connect.index", 0) if isinstance(item[1], dict) else 0)
        for name, property_schema in properties:
            builder.field(name, json_schema_to_connect(property_schema, name not in required))
    else:
        raise DataException(f"Unsupported JSON Schema type: {kind!r}")
    return (builder.optional() if optional else builder).build()


def connect_to_json_value(schema: Schema, value: Any) -> Any:
    if value is None:
        return None
    if schema.type is Type.STRUCT:
        return {field.name: connect_to_json_value(field.schema, value.get(field)) for field in schema.fields
                if value.get(field) is not None}
    if schema.type is Type.ARRAY:
        return [connect_to_json_value(schema.value_schema, item) for item in value]
    if schema.type is Type.MAP:
        return {key: connect_to_json_value(schema.value_schema, item) for key, item in value.items()}
    if schema.type is Type.BYTES:
        return base64.b64encode(bytes(value)).decode()
    return value


def json_to_connect_value(schema: Schema, value: Any) -> Any:
    if value is None:
        return None
    if schema.type is Type.STRUCT:
        struct = Struct(schema)
        for field in schema.fields:
            struct.put(field.name, json_to_connect_value(field.schema, value.get(field.name)))
        return struct
    if schema.type is Type.ARRAY:
        return [json_to_connect_value(schema.value_schema, item) for item in value]
    if schema.type is Type.MAP:
        return {key: json_to_connect_value(schema.value_schema, item) for key, item in value.items()}
    if schema.type is Type.BYTES:
        return base64.b64decode(value)
    if schema.type in (Type.FLOAT32, Type.FLOAT64):
        return float(value)
    return value


class JsonSchemaConverter(RegistryConverter):
    """Confluent's JsonSchemaConverter over kfk.registry: `schema.registry.url`, `auto.register.schemas`."""

    def __init__(self) -> None:
        super().__init__()
        self._serializers: dict[Schema, JsonSchemaSerializer] = {}
        self._connect_schemas: dict[int, Schema] = {}

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if schema is None:
            raise DataException("JsonSchemaConverter needs a schema: the record has none")
        try:
            serializer = self._serializers.get(schema)
            if serializer is None:
                serializer = self._serializers[schema] = JsonSchemaSerializer(
                    self.client, json.dumps(connect_to_json_schema(schema), separators=(",", ":")),
                    is_key=self.is_key, auto_register=self.auto_register, subject_name_strategy=self.strategy)
            return serializer.serialize(topic, connect_to_json_value(schema, value))
        except RegistryClientError as error:
            raise DataException(f"Failed to access JSON Schema data from topic {topic} : {error}") from None
        except ValueError as error:
            raise DataException(f"Converting Kafka Connect data to byte[] failed due to serialization error of "
                                f"topic {topic}: {error}") from None

    def to_connect_data(self, topic: str, value: bytes | None) -> SchemaAndValue:
        if value is None:
            return NULL_SCHEMA_AND_VALUE
        try:
            schema_id, payload = unframe(value)
            schema = self._connect_schemas.get(schema_id)
            if schema is None:
                schema_type, parsed, _ = writer_schema(self.client, schema_id)
                if schema_type != JSON:
                    raise ValueError(f"schema {schema_id} is a {schema_type} schema, not a JSON Schema")
                schema = self._connect_schemas[schema_id] = json_schema_to_connect(parsed.document)
            return SchemaAndValue(schema, json_to_connect_value(schema, json.loads(payload)))
        except RegistryClientError as error:
            raise DataException(f"Failed to access JSON Schema data from topic {topic} : {error}") from None
        except ValueError as error:
            raise DataException(f"Converting byte[] to Kafka Connect data failed due to serialization error of "
                                f"topic {topic}: {error}") from None
