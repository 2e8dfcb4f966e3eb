"""ProtobufConverter (Confluent's io.confluent.connect.protobuf.ProtobufConverter): Connect data as Protobuf messages
in Confluent's wire format, their schema (.proto text) in a schema registry, through kfk.registry's client and serdes.

Connect schemas map to proto3 after Confluent's ProtobufData, for the common types: a STRUCT is a message (named by
the schema's name, its package the name's namespace; ConnectDefault1 without a name), its fields numbered from 1 in
order, a nested STRUCT a message nested in its parent; INT8/INT16/INT32 are int32, INT64 int64, FLOAT32 float,
FLOAT64 double, BOOLEAN bool, STRING string, BYTES bytes, ARRAY a repeated field, MAP a map field (keys of a
scalar type), Timestamp a google.protobuf.Timestamp. An optional scalar is a proto3 ``optional`` field (so null
survives: Confluent's ``optional.for.nullables``). Read back, int32-like fields are INT32, enums STRING, a message
field or an ``optional`` scalar is optional, a message is a STRUCT named by its full name.
"""

from __future__ import annotations

import datetime
from typing import Any

from kfk.connect.converters import NULL_SCHEMA_AND_VALUE, SchemaAndValue
from kfk.connect.data import TIMESTAMP_LOGICAL_NAME, Schema, SchemaBuilder, Struct, Type, timestamp_schema
from kfk.connect.errors import DataException
from kfk.connect.registry_config import RegistryConverter
from kfk.registry.schema_types import PROTOBUF
from kfk.registry.serdes import (
    ProtobufSerializer,
    RegistryClientError,
    protobuf_message,
    unframe,
    writer_schema,
)

_SCALARS = {Type.INT8: "int32", Type.INT16: "int32", Type.INT32: "int32", Type.INT64: "int64",
            Type.FLOAT32: "float", Type.FLOAT64: "double", Type.BOOLEAN: "bool", Type.STRING: "string",
            Type.BYTES: "bytes"}
_MAP_KEYS = (Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.BOOLEAN, Type.STRING)
DEFAULT_MESSAGE_NAME = "ConnectDefault1"
TIMESTAMP_MESSAGE = "google.protobuf.Timestamp"


def connect_to_proto(schema: Schema) -> str:
    """The .proto text of a STRUCT schema."""
    if schema.type is not Type.STRUCT:
        raise DataException(f"ProtobufConverter writes STRUCT records, not {schema.type.name}")
    package, _, name = (schema.name or DEFAULT_MESSAGE_NAME).rpartition(".")
    imports: set[str] = set()
    body = _message(schema, name, 0, imports)
    lines = ['syntax = "proto3";', *([f"package {package};"] if package else []),
             *(f'import "{file}";' for file in sorted(imports)), body]
    return "\n".join(lines) + "\n"


def _message(schema: Schema, name: str, depth: int, imports: set[str]) -> str:
    indent = "  " * (depth + 1)
    nested: dict[str, str] = {}
    lines = [f"{'  ' * depth}message {name} {{"]
    for field in schema.fields:
        declared = _field_type(field.schema, field.name, depth + 1, nested, imports)
        lines.append(f"{indent}{declared} {field.name} = {field.index + 1};")
    lines += nested.values()
    lines.append(f"{'  ' * depth}}}")
    return "\n".join(lines)


def _field_type(schema: Schema, field_name: str, depth: int, nested: dict[str, str], imports: set[str]) -> str:
    """The declared type of a field (with ``repeated``, ``optional`` or ``map<>``), nested messages added."""
    if schema.type is Type.ARRAY:
        element = schema.value_schema
        if element.type in (Type.ARRAY, Type.MAP):
            raise DataException(f"ProtobufConverter cannot write the field {field_name}: arrays of {element.type.name}")
        return f"repeated {_element_type(element, field_name, depth, nested, imports)}"
    if schema.type is Type.MAP:
        if schema.key_schema.type not in _MAP_KEYS or schema.value_schema.type in (Type.ARRAY, Type.MAP):
            raise DataException(f"ProtobufConverter cannot write the map field {field_name}: keys of a scalar type "
                                "and values that are not arrays or maps only")
        return (f"map<{_SCALARS[schema.key_schema.type]}, "
                f"{_element_type(schema.value_schema, field_name, depth, nested, imports)}>")
    declared = _element_type(schema, field_name, depth, nested, imports)
    optional = schema.optional and schema.type is not Type.STRUCT and schema.name != TIMESTAMP_LOGICAL_NAME
    return f"optional {declared}" if optional else declared


def _element_type(schema: Schema, field_name: str, depth: int, nested: dict[str, str], imports: set[str]) -> str:
    if schema.name == TIMESTAMP_LOGICAL_NAME:
        imports.add("google/protobuf/timestamp.proto")
        return TIMESTAMP_MESSAGE
    if schema.name and schema.name.startswith("org.apache.kafka.connect.data."):
        raise DataException(f"ProtobufConverter does not write the logical type {schema.name} (field {field_name})")
    if schema.type is Type.STRUCT:
        name = (schema.name or field_name[:1].upper() + field_name[1:]).rpartition(".")[2]
        text = _message(schema, name, depth, imports)
        if nested.setdefault(name, text) != text:
            raise DataException(f"ProtobufConverter: two different structs are both named {name}")
        return name
    return _SCALARS[schema.type]


# --- reading ---------------------------------------------------------------------------------------------------------

def proto_to_connect(descriptor: Any, optional: bool = False) -> Schema:
    """The Connect schema of a message descriptor."""
    if descriptor.full_name == TIMESTAMP_MESSAGE:
        builder = timestamp_schema()
    else:
        builder = SchemaBuilder.struct().name(descriptor.full_name)
        for field in descriptor.fields:
            builder.field(field.name, _field_schema(field))
    return (builder.optional() if optional else builder).build()


def _field_schema(field: Any) -> Schema:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        return SchemaBuilder.map(_single_schema(key, False), _single_schema(value, False)).build()
    if field.is_repeated:
        return SchemaBuilder.array(_single_schema(field, False)).build()
    return _single_schema(field, field.message_type is not None or field.has_presence)


def _single_schema(field: Any, optional: bool) -> Schema:
    if field.message_type is not None:
        return proto_to_connect(field.message_type, optional)
    kind = {field.TYPE_INT32: Type.INT32, field.TYPE_SINT32: Type.INT32, field.TYPE_SFIXED32: Type.INT32,
            field.TYPE_UINT32: Type.INT64, field.TYPE_FIXED32: Type.INT64, field.TYPE_INT64: Type.INT64,
            field.TYPE_SINT64: Type.INT64, field.TYPE_SFIXED64: Type.INT64, field.TYPE_UINT64: Type.INT64,
            field.TYPE_FIXED64: Type.INT64, field.TYPE_FLOAT: Type.FLOAT32, field.TYPE_DOUBLE: Type.FLOAT64,
            field.TYPE_BOOL: Type.BOOLEAN, field.TYPE_STRING: Type.STRING, field.TYPE_BYTES: Type.BYTES,
            field.TYPE_ENUM: Type.STRING}[field.type]
    builder = SchemaBuilder(kind)
    return (builder.optional() if optional else builder).build()


# --- values ----------------------------------------------------------------------------------------------------------

def _fill(message: Any, schema: Schema, struct: Struct) -> Any:
    for field in schema.fields:
        value = struct.get(field)
        if value is not None:
            _put(message, field.name, field.schema, value)
    return message


def _put(message: Any, name: str, schema: Schema, value: Any) -> None:
    if schema.type is Type.ARRAY:
        target = getattr(message, name)
        for item in value:
            if schema.value_schema.type is Type.STRUCT or schema.value_schema.name == TIMESTAMP_LOGICAL_NAME:
                _into(target.add(), schema.value_schema, item)
            else:
                target.append(item)
    elif schema.type is Type.MAP:
        target = getattr(message, name)
        for key, item in value.items():
            if schema.value_schema.type is Type.STRUCT or schema.value_schema.name == TIMESTAMP_LOGICAL_NAME:
                _into(target[key], schema.value_schema, item)
            else:
                target[key] = item
    elif schema.type is Type.STRUCT or schema.name == TIMESTAMP_LOGICAL_NAME:
        _into(getattr(message, name), schema, value)
    else:
        setattr(message, name, value)


def _into(message: Any, schema: Schema, value: Any) -> None:
    if schema.name == TIMESTAMP_LOGICAL_NAME:
        message.FromDatetime(value)
    else:
        _fill(message, schema, value)


def _value(schema: Schema, message: Any) -> Any:
    if schema.name == TIMESTAMP_LOGICAL_NAME:
        return message.ToDatetime(tzinfo=datetime.timezone.utc)
    struct = Struct(schema)
    for field in schema.fields:
        descriptor = message.DESCRIPTOR.fields_by_name[field.name]
        raw = getattr(message, field.name)
        if field.schema.type is Type.ARRAY:
            element = field.schema.value_schema
            value: Any = [_value(element, item) if descriptor.message_type is not None else item for item in raw]
        elif field.schema.type is Type.MAP:
            element = field.schema.value_schema
            value = {key: _value(element, item) if element.type is Type.STRUCT or element.name else item
                     for key, item in raw.items()}
        elif descriptor.has_presence and not message.HasField(field.name):
            value = None
        elif descriptor.message_type is not None:
            value = _value(field.schema, raw)
        elif descriptor.enum_type is not None:
            value = descriptor.enum_type.values_by_number[raw].name
        else:
            value = raw
        struct.put(field.name, value)
    return struct


class ProtobufConverter(RegistryConverter):
    """Confluent's ProtobufConverter over kfk.registry: `schema.registry.url`, `auto.register.schemas`."""

    def __init__(self) -> None:
        super().__init__()
        self._serializers: dict[Schema, ProtobufSerializer] = {}
        self._readers: dict[int, Any] = {}

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if schema is None:
            raise DataException("ProtobufConverter needs a schema: the record has none")
        try:
            serializer = self._serializers.get(schema)
            if serializer is None:
                serializer = self._serializers[schema] = ProtobufSerializer(
                    self.client, connect_to_proto(schema), is_key=self.is_key, auto_register=self.auto_register,
                    subject_name_strategy=self.strategy)
            return serializer.serialize(topic, _fill(serializer.new_message(), schema, value))
        except RegistryClientError as error:
            raise DataException(f"Failed to access Protobuf data from topic {topic} : {error}") from None
        except (ValueError, TypeError) as error:
            raise DataException(f"Converting Kafka Connect data to byte[] failed due to serialization error of "
                                f"topic {topic}: {error}") from None

    def to_connect_data(self, topic: str, value: bytes | None) -> SchemaAndValue:
        if value is None:
            return NULL_SCHEMA_AND_VALUE
        from google.protobuf import message_factory

        try:
            schema_id, payload = unframe(value)
            locate = self._readers.get(schema_id)
            if locate is None:
                schema_type, parsed, references = writer_schema(self.client, schema_id)
                if schema_type != PROTOBUF:
                    raise ValueError(f"schema {schema_id} is a {schema_type} schema, not Protobuf")
                locate = self._readers[schema_id] = protobuf_message(parsed, references)
            descriptor, data = locate(payload)
            message = message_factory.GetMessageClass(descriptor)()
            message.ParseFromString(data)
            schema = proto_to_connect(descriptor)
            return SchemaAndValue(schema, _value(schema, message))
        except RegistryClientError as error:
            raise DataException(f"Failed to access Protobuf data from topic {topic} : {error}") from None
        except ValueError as error:
            raise DataException(f"Converting byte[] to Kafka Connect data failed due to serialization error of "
                                f"topic {topic}: {error}") from None
