"""JsonConverter: the bytes of org.apache.kafka.connect.json.JsonConverter, exactly.

With `schemas.enable=true` (the default) every record is the envelope {"schema":...,"payload":...}, the schema in
Connect's JSON form ({"type":"struct","fields":[{"type":"string","optional":false,"field":"a"}],"optional":false,
"name":...}); with false only the payload. The text is what Jackson writes: compact, keys in Kafka's order,
non-ASCII as UTF-8 except characters beyond the BMP (a \\uXXXX surrogate pair) and control characters
(uppercase \\uXXXX), doubles and floats as Java prints them, bytes in base64. So a topic written by a Java
worker reads back here and the other way round, byte for byte.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import decimal
import json
from typing import Any, Mapping

from kfk.common.java_numbers import java_double, java_float
from kfk.connect.config_def import ConfigDef, ConfigKey, one_of
from kfk.connect.converters import NULL_SCHEMA_AND_VALUE, Converter, HeaderConverter, SchemaAndValue
from kfk.connect.data import (
    DATE_LOGICAL_NAME,
    DECIMAL_LOGICAL_NAME,
    TIME_LOGICAL_NAME,
    TIMESTAMP_LOGICAL_NAME,
    Schema,
    SchemaBuilder,
    Struct,
    Type,
    date_to_days,
    days_to_date,
    decimal_from_bytes,
    decimal_to_bytes,
    millis_to_time,
    millis_to_timestamp,
    time_to_millis,
    timestamp_to_millis,
)
from kfk.connect.errors import DataException

ENVELOPE_ERROR = ('JsonConverter with schemas.enable requires "schema" and "payload" fields and may not contain '
                  "additional fields. If you are trying to deserialize plain JSON data, set schemas.enable=false in "
                  "your converter configuration.")


class Float32(float):
    """A FLOAT32 value on its way to text: Jackson's FloatNode, printed as Java's Float.toString."""


class Numeric(str):
    """A decimal written as a JSON number (decimal.format=NUMERIC), as BigDecimal.toString prints it."""


def _escape(text: str) -> str:
    out = ['"']
    for char in text:
        code = ord(char)
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif code < 0x20:
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}.get(char)
                       or f"\\u{code:04X}")
        elif code > 0xFFFF:  # Jackson escapes characters outside the BMP as their UTF-16 surrogate pair
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def jackson_text(node: Any) -> str:
    """A JSON tree as Jackson's ObjectMapper writes it (compact)."""
    if node is None:
        return "null"
    if node is True:
        return "true"
    if node is False:
        return "false"
    if isinstance(node, str):
        return node if isinstance(node, Numeric) else _escape(node)
    if isinstance(node, Float32):
        return java_float(node)
    if isinstance(node, float):
        return java_double(node)
    if isinstance(node, int):
        return str(node)
    if isinstance(node, dict):
        return "{" + ",".join(f"{_escape(key)}:{jackson_text(value)}" for key, value in node.items()) + "}"
    if isinstance(node, list):
        return "[" + ",".join(jackson_text(item) for item in node) + "]"
    raise DataException(f"Cannot write {type(node).__name__} as JSON")


def schema_to_json(schema: Schema | None) -> dict[str, Any] | None:
    """Connect's JSON form of a schema (JsonConverter.asJsonSchema), keys in Kafka's order."""
    if schema is None:
        return None
    node: dict[str, Any] = {"type": schema.type.value}
    if schema.type is Type.ARRAY:
        node["items"] = schema_to_json(schema.value_schema)
    elif schema.type is Type.MAP:
        node["keys"] = schema_to_json(schema.key_schema)
        node["values"] = schema_to_json(schema.value_schema)
    elif schema.type is Type.STRUCT:
        node["fields"] = [{**schema_to_json(field.schema), "field": field.name} for field in schema.fields]
    node["optional"] = schema.optional
    if schema.name is not None:
        node["name"] = schema.name
    if schema.version is not None:
        node["version"] = schema.version
    if schema.doc is not None:
        node["doc"] = schema.doc
    if schema.parameters is not None:
        node["parameters"] = dict(schema.parameters)
    if schema.default is not None:
        node["default"] = value_to_json(schema, schema.default, "BASE64", True)
    return node


def schema_from_json(node: Any) -> Schema | None:
    """JsonConverter.asConnectSchema."""
    if node is None:
        return None
    if not isinstance(node, dict) or not isinstance(node.get("type"), str):
        raise DataException("Schema must contain 'type' field")
    try:
        schema_type = Type(node["type"])
    except ValueError:
        raise DataException("Unknown schema type: " + node["type"]) from None
    if schema_type is Type.STRUCT:
        fields = node.get("fields")
        if not isinstance(fields, list):
            raise DataException("Struct schema's \"fields\" argument is not an array.")
        builder = SchemaBuilder.struct()
        for field in fields:
            name = field.get("field") if isinstance(field, dict) else None
            if not isinstance(name, str):
                raise DataException("Struct schema's field name not specified properly")
            builder.field(name, schema_from_json(field))
    elif schema_type is Type.ARRAY:
        if "items" not in node:
            raise DataException("Array schema did not specify the element type")
        builder = SchemaBuilder.array(schema_from_json(node["items"]))
    elif schema_type is Type.MAP:
        if "keys" not in node or "values" not in node:
            raise DataException("Map schema did not specify the key and value types")
        builder = SchemaBuilder.map(schema_from_json(node["keys"]), schema_from_json(node["values"]))
    else:
        builder = SchemaBuilder(schema_type)
    if node.get("optional") is True:
        builder.optional()
    builder.name(node.get("name")).version(node.get("version")).doc(node.get("doc"))
    if isinstance(node.get("parameters"), dict):
        builder.parameters({key: str(value) for key, value in node["parameters"].items()})
    if node.get("default") is not None:
        builder.default_value(value_from_json(builder.build_unchecked(), node["default"], True))
    return builder.build()


def value_to_json(schema: Schema | None, value: Any, decimal_format: str, replace_null_with_default: bool) -> Any:
    """JsonConverter.convertToJson: a Connect value as a JSON tree (with Float32/Numeric marking Java's types)."""
    if value is None:
        if schema is None:
            return None
        if schema.default is not None and replace_null_with_default:
            return value_to_json(schema, schema.default, decimal_format, replace_null_with_default)
        if schema.optional:
            return None
        raise DataException("Conversion error: null value for field that is required and has no default value")
    if schema is None:
        return _schemaless_to_json(value, decimal_format)
    name = schema.name
    if name == DECIMAL_LOGICAL_NAME:
        if not isinstance(value, decimal.Decimal):
            raise DataException("Invalid type for Decimal, expected decimal.Decimal but was " + type(value).__name__)
        if decimal_format == "NUMERIC":
            return Numeric(str(value))
        return base64.b64encode(decimal_to_bytes(schema, value)).decode()
    if name == DATE_LOGICAL_NAME and isinstance(value, datetime.date):
        return date_to_days(value)
    if name == TIME_LOGICAL_NAME and isinstance(value, datetime.time):
        return time_to_millis(value)
    if name == TIMESTAMP_LOGICAL_NAME and isinstance(value, datetime.datetime):
        return timestamp_to_millis(value)
    kind = schema.type
    try:
        if kind in (Type.INT8, Type.INT16, Type.INT32, Type.INT64):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError
            return value
        if kind is Type.FLOAT32:
            return Float32(value)
        if kind is Type.FLOAT64:
            return float(value)
        if kind is Type.BOOLEAN:
            if not isinstance(value, bool):
                raise TypeError
            return value
        if kind is Type.STRING:
            if not isinstance(value, str):
                raise TypeError
            return value
        if kind is Type.BYTES:
            return base64.b64encode(bytes(value)).decode()
        if kind is Type.ARRAY:
            return [value_to_json(schema.value_schema, item, decimal_format, replace_null_with_default)
                    for item in value]
        if kind is Type.MAP:
            object_mode = schema.key_schema.type is Type.STRING
            if object_mode:
                return {key: value_to_json(schema.value_schema, item, decimal_format, replace_null_with_default)
                        for key, item in value.items()}
            return [[value_to_json(schema.key_schema, key, decimal_format, replace_null_with_default),
                     value_to_json(schema.value_schema, item, decimal_format, replace_null_with_default)]
                    for key, item in value.items()]
        if kind is Type.STRUCT:
            if not isinstance(value, Struct) or value.schema != schema:
                raise DataException("Mismatching schema.")
            return {field.name: value_to_json(field.schema, value.get_without_default(field.name), decimal_format,
                                              replace_null_with_default)
                    for field in schema.fields}
    except (TypeError, AttributeError, ValueError):
        raise DataException(f"Invalid type for {kind.name}: {type(value).__name__}") from None
    raise DataException("Couldn't convert " + repr(value) + " to JSON.")


def _schemaless_to_json(value: Any, decimal_format: str) -> Any:
    if value is None or isinstance(value, (bool, str, int, float)):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, decimal.Decimal):
        return Numeric(str(value))
    if isinstance(value, (list, tuple)):
        return [_schemaless_to_json(item, decimal_format) for item in value]
    if isinstance(value, dict):
        if all(isinstance(key, str) for key in value):
            return {key: _schemaless_to_json(item, decimal_format) for key, item in value.items()}
        return [[_schemaless_to_json(key, decimal_format), _schemaless_to_json(item, decimal_format)]
                for key, item in value.items()]
    if isinstance(value, Struct):
        return value_to_json(value.schema, value, decimal_format, True)
    raise DataException(f"Java class {type(value).__name__} does not have corresponding schema type.")


def value_from_json(schema: Schema | None, node: Any, replace_null_with_default: bool = True) -> Any:
    """JsonConverter.convertToConnect: a JSON tree read against `schema` (None: inferred, as schemaless JSON)."""
    if schema is None:
        return _schemaless_from_json(node)
    if node is None:
        if schema.default is not None and replace_null_with_default:
            return schema.default
        if schema.optional:
            return None
        raise DataException(f"Invalid null value for required {schema.type.name} field")
    name = schema.name
    try:
        if name == DECIMAL_LOGICAL_NAME:
            if isinstance(node, str):
                return decimal_from_bytes(schema, base64.b64decode(node, validate=True))
            return decimal.Decimal(str(node))
        if name == DATE_LOGICAL_NAME:
            return days_to_date(int(node))
        if name == TIME_LOGICAL_NAME:
            return millis_to_time(int(node))
        if name == TIMESTAMP_LOGICAL_NAME:
            return millis_to_timestamp(int(node))
    except (ValueError, TypeError, binascii.Error):
        raise DataException(f"Invalid value for logical type {name}: {node!r}") from None
    kind = schema.type
    if kind in (Type.INT8, Type.INT16, Type.INT32, Type.INT64):
        if isinstance(node, bool) or not isinstance(node, (int, float)):
            raise DataException(f"Invalid JSON for {kind.name.lower()}: {node!r}")
        return int(node)
    if kind in (Type.FLOAT32, Type.FLOAT64):
        if isinstance(node, bool) or not isinstance(node, (int, float)):
            raise DataException(f"Invalid JSON for {kind.name.lower()}: {node!r}")
        return float(node)
    if kind is Type.BOOLEAN:
        if not isinstance(node, bool):
            raise DataException(f"Invalid JSON for boolean: {node!r}")
        return node
    if kind is Type.STRING:
        if not isinstance(node, str):
            raise DataException(f"Invalid JSON for string: {node!r}")
        return node
    if kind is Type.BYTES:
        try:
            return base64.b64decode(node, validate=True)
        except (binascii.Error, TypeError):
            raise DataException("Invalid bytes field") from None
    if kind is Type.ARRAY:
        if not isinstance(node, list):
            raise DataException("Invalid JSON for array: " + repr(node))
        return [value_from_json(schema.value_schema, item, replace_null_with_default) for item in node]
    if kind is Type.MAP:
        if schema.key_schema.type is Type.STRING:
            if not isinstance(node, dict):
                raise DataException("Maps with string fields should be encoded as JSON objects, but found "
                                    + type(node).__name__)
            return {key: value_from_json(schema.value_schema, item, replace_null_with_default)
                    for key, item in node.items()}
        if not isinstance(node, list):
            raise DataException("Maps with non-string fields should be encoded as JSON array of tuples, but found "
                                + type(node).__name__)
        result = {}
        for entry in node:
            if not isinstance(entry, list) or len(entry) != 2:
                raise DataException("Found invalid map entry instead of array tuple: " + repr(entry))
            result[value_from_json(schema.key_schema, entry[0], replace_null_with_default)] = value_from_json(
                schema.value_schema, entry[1], replace_null_with_default)
        return result
    if kind is Type.STRUCT:
        if not isinstance(node, dict):
            raise DataException("Structs should be encoded as JSON objects, but found " + type(node).__name__)
        struct = Struct(schema)
        for field in schema.fields:
            struct.put(field.name, value_from_json(field.schema, node.get(field.name), replace_null_with_default))
        return struct
    raise DataException("Unknown schema type: " + kind.name)


def _schemaless_from_json(node: Any) -> Any:
    if isinstance(node, list):
        return [_schemaless_from_json(item) for item in node]
    if isinstance(node, dict):
        return {key: _schemaless_from_json(item) for key, item in node.items()}
    return node


class JsonConverter(Converter, HeaderConverter):
    """org.apache.kafka.connect.json.JsonConverter: `schemas.enable` (true), `decimal.format` (BASE64|NUMERIC),
    `replace.null.with.default` (true)."""

    def __init__(self) -> None:
        self.schemas_enable = True
        self.decimal_format = "BASE64"
        self.replace_null_with_default = True

    def config(self) -> ConfigDef:
        return ConfigDef([
            ConfigKey("schemas.enable", "BOOLEAN", True, "HIGH", "Include schemas within each serialized value."),
            ConfigKey("schemas.cache.size", "INT", 1000, "HIGH", "How many schemas are kept in the cache."),
            ConfigKey("decimal.format", "STRING", "BASE64", "LOW", "How DECIMAL values are written.",
                      validator=one_of("BASE64", "NUMERIC")),
            ConfigKey("replace.null.with.default", "BOOLEAN", True, "LOW",
                      "Whether a null field is written as its schema's default."),
        ])

    def configure(self, configs: Mapping[str, Any], is_key: bool = False) -> None:
        parsed = self.config().parse({key: value for key, value in configs.items()
                                      if key in self.config().keys})
        self.schemas_enable = parsed["schemas.enable"]
        self.decimal_format = parsed["decimal.format"]
        self.replace_null_with_default = parsed["replace.null.with.default"]

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is None and value is None:
            return None
        payload = value_to_json(schema, value, self.decimal_format, self.replace_null_with_default)
        node = {"schema": schema_to_json(schema), "payload": payload} if self.schemas_enable else payload
        return jackson_text(node).encode()

    def to_connect_data(self, topic: str, value: bytes | None) -> SchemaAndValue:
        if value is None:
            return NULL_SCHEMA_AND_VALUE
        try:
            node = json.loads(value)
        except (ValueError, UnicodeDecodeError) as error:
            raise DataException("Converting byte[] to Kafka Connect data failed due to serialization error: "
                                + str(error)) from None
        if self.schemas_enable:
            if not isinstance(node, dict) or set(node) != {"schema", "payload"}:
                raise DataException(ENVELOPE_ERROR)
            schema = schema_from_json(node["schema"])
            return SchemaAndValue(schema, value_from_json(schema, node["payload"], self.replace_null_with_default))
        return SchemaAndValue(None, _schemaless_from_json(node))

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, header_key: str, value: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, value)
