"""The compatibility rules, schema pair by schema pair: for each (old, new) pair the verdict expected under
BACKWARD (new reads old's data) and FORWARD (old reads new's data), derived from the Avro specification's schema
resolution rules and, for JSON Schema and Protobuf, from the rules Confluent documents; FULL must hold exactly when
both do, and the transitive levels must look past the latest version."""

from __future__ import annotations

import json

import pytest
from google.protobuf import descriptor_pb2

from kfk.registry.compatibility import check_compatibility
from kfk.registry.schema_types import SchemaParseError, parse_schema


def record(*fields: dict, name: str = "R", **extra) -> dict:
    return {"type": "record", "name": name, "fields": list(fields), **extra}


def field(name: str, kind, **extra) -> dict:
    return {"name": name, "type": kind, **extra}


ENUM_AB = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
ENUM_ABC = {"type": "enum", "name": "E", "symbols": ["A", "B", "C"]}

# (description, old, new, BACKWARD holds, FORWARD holds)
AVRO_PAIRS = [
    ("same primitive", "int", "int", True, True),
    ("int promoted to long", "int", "long", True, False),
    ("int promoted to float", "int", "float", True, False),
    ("int promoted to double", "int", "double", True, False),
    ("long promoted to double", "long", "double", True, False),
    ("float promoted to double", "float", "double", True, False),
    ("long narrowed to int", "long", "int", False, True),
    ("string read as bytes", "string", "bytes", True, True),
    ("string to int", "string", "int", False, False),
    ("boolean to string", "boolean", "string", False, False),
    ("null to int", "null", "int", False, False),
    ("field added with default", record(field("a", "int")),
     record(field("a", "int"), field("b", "string", default="")), True, True),
    ("field added without default", record(field("a", "int")),
     record(field("a", "int"), field("b", "string")), False, True),
    ("field removed (had no default)", record(field("a", "int"), field("b", "string")),
     record(field("a", "int")), True, False),
    ("field removed (had a default)", record(field("a", "int"), field("b", "string", default="x")),
     record(field("a", "int")), True, True),
    ("field type promoted", record(field("a", "int")), record(field("a", "long")), True, False),
    ("field type changed", record(field("a", "int")), record(field("a", "string")), False, False),
    ("field renamed with alias", record(field("a", "int")), record(field("b", "int", aliases=["a"])), True, False),
    ("field renamed without alias", record(field("a", "int")), record(field("b", "int")), False, False),
    ("record renamed", record(field("a", "int"), name="R"), record(field("a", "int"), name="S"), False, False),
    ("record renamed with alias", record(field("a", "int"), name="R"),
     record(field("a", "int"), name="S", aliases=["R"]), True, False),
    ("enum symbol added", ENUM_AB, ENUM_ABC, True, False),
    ("enum symbol removed", ENUM_ABC, ENUM_AB, False, True),
    ("enum symbol removed, reader default", ENUM_ABC, {**ENUM_AB, "default": "A"}, True, True),
    ("fixed same size", {"type": "fixed", "name": "F", "size": 4}, {"type": "fixed", "name": "F", "size": 4},
     True, True),
    ("fixed size changed", {"type": "fixed", "name": "F", "size": 4}, {"type": "fixed", "name": "F", "size": 8},
     False, False),
    ("array items promoted", {"type": "array", "items": "int"}, {"type": "array", "items": "long"}, True, False),
    ("array items changed", {"type": "array", "items": "int"}, {"type": "array", "items": "string"}, False, False),
    ("map values promoted", {"type": "map", "values": "float"}, {"type": "map", "values": "double"}, True, False),
    ("array to map", {"type": "array", "items": "int"}, {"type": "map", "values": "int"}, False, False),
    ("union branch added", ["null", "int"], ["null", "int", "string"], True, False),
    ("union branch removed", ["null", "int", "string"], ["null", "int"], False, True),
    ("type made nullable", "int", ["null", "int"], True, False),
    ("nullable made required", ["null", "int"], "int", False, True),
    ("union branch promoted", ["null", "int"], ["null", "long"], True, False),
    ("optional field added", record(field("a", "int")),
     record(field("a", "int"), field("b", ["null", "string"], default=None)), True, True),
    ("nested record field added without default", record(field("n", record(field("x", "int"), name="N"))),
     record(field("n", record(field("x", "int"), field("y", "int"), name="N"))), False, True),
    ("logical type over the same primitive", {"type": "int", "logicalType": "date"}, "int", True, True),
    ("recursive record unchanged",
     record(field("next", ["null", "R"], default=None), field("v", "int")),
     record(field("next", ["null", "R"], default=None), field("v", "int")), True, True),
]


def verdict(schema_type: str, level: str, old: str, new: str) -> bool:
    previous = [(1, parse_schema(schema_type, old))]
    return not check_compatibility(level, parse_schema(schema_type, new), previous)


@pytest.mark.parametrize(("description", "old", "new", "backward", "forward"), AVRO_PAIRS,
                         ids=[pair[0] for pair in AVRO_PAIRS])
def test_avro_pairs(description: str, old, new, backward: bool, forward: bool) -> None:
    old_text, new_text = json.dumps(old), json.dumps(new)
    assert verdict("AVRO", "BACKWARD", old_text, new_text) is backward
    assert verdict("AVRO", "FORWARD", old_text, new_text) is forward
    assert verdict("AVRO", "FULL", old_text, new_text) is (backward and forward)
    assert verdict("AVRO", "NONE", old_text, new_text) is True


def test_transitive_levels_check_every_earlier_version() -> None:
    v1 = parse_schema("AVRO", json.dumps(record(field("a", "int"))))
    v2 = parse_schema("AVRO", json.dumps(record(field("a", "int"), field("b", "int", default=0))))
    # v3 drops b's default: it reads v2's records (which have b) but not v1's (which lack it)
    v3 = parse_schema("AVRO", json.dumps(record(field("a", "int"), field("b", "int"))))
    assert not check_compatibility("BACKWARD", v3, [(1, v1), (2, v2)])
    reasons = check_compatibility("BACKWARD_TRANSITIVE", v3, [(1, v1), (2, v2)])
    assert [(version, reason.error_type) for version, reason in reasons] == [(1, "READER_FIELD_MISSING_DEFAULT_VALUE")]


@pytest.mark.parametrize("text", ['{"type": "recrd", "name": "R"}', '{"type": "record", "fields": []}',
                                  'not json', '{"type": "record", "name": "R", "fields": '
                                              '[{"name": "a", "type": "int", "default": "x"}]}',
                                  '{"type": "enum", "name": "E", "symbols": ["A", "A"]}'])
def test_invalid_avro_refused(text: str) -> None:
    with pytest.raises(SchemaParseError):
        parse_schema("AVRO", text)


def obj(properties: dict, required=(), closed: bool = False) -> dict:
    schema = {"type": "object", "properties": properties, "required": list(required)}
    if closed:
        schema["additionalProperties"] = False
    return schema


STRING, INTEGER, BOOLEAN = {"type": "string"}, {"type": "integer"}, {"type": "boolean"}
MIN_LENGTH, MAX_LENGTH, PATTERN = {"minLength": 1}, {"maxLength": 5}, {"pattern": "^a"}

JSON_PAIRS = [
    ("same", {"type": "string"}, {"type": "string"}, True, True),
    ("integer widened to number", {"type": "integer"}, {"type": "number"}, True, False),
    ("string to integer", {"type": "string"}, {"type": "integer"}, False, False),
    ("type union widened", {"type": "string"}, {"type": ["string", "null"]}, True, False),
    ("required property added", obj({"a": {"type": "string"}}), obj({"a": {"type": "string"}}, ["a"]), False, True),
    ("optional property added to a closed model", obj({"a": {"type": "string"}}, closed=True),
     obj({"a": {"type": "string"}, "b": {"type": "string"}}, closed=True), True, False),
    ("property added to an open model", obj({"a": {"type": "string"}}),
     obj({"a": {"type": "string"}, "b": {"type": "string"}}), False, True),
    ("property removed from a closed model", obj({"a": {"type": "string"}, "b": {"type": "string"}}, closed=True),
     obj({"a": {"type": "string"}}, closed=True), False, True),
    ("enum widened", {"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}, True, False),
    ("maxLength lowered", {"type": "string", "maxLength": 10}, {"type": "string", "maxLength": 5}, False, True),
    ("minimum raised", {"type": "number", "minimum": 0}, {"type": "number", "minimum": 1}, False, True),
    ("array items widened", {"type": "array", "items": {"type": "integer"}},
     {"type": "array", "items": {"type": "number"}}, True, False),
    ("model closed", obj({"a": {"type": "string"}}), obj({"a": {"type": "string"}}, closed=True), False, True),
    # combined schemas, by Confluent's rules (SUM_TYPE_EXTENDED, PRODUCT_TYPE_NARROWED, COMBINED_TYPE_EXTENDED are
    # compatible; SUM_TYPE_NARROWED, PRODUCT_TYPE_EXTENDED, COMBINED_TYPE_CHANGED, COMBINED_TYPE_SUBSCHEMAS_CHANGED
    # are not)
    ("oneOf alternative added", {"oneOf": [STRING, INTEGER]}, {"oneOf": [STRING, INTEGER, BOOLEAN]}, True, False),
    ("anyOf alternative removed", {"anyOf": [STRING, INTEGER]}, {"anyOf": [STRING]}, False, True),
    ("allOf part added", {"allOf": [MIN_LENGTH, MAX_LENGTH]}, {"allOf": [MIN_LENGTH, MAX_LENGTH, PATTERN]},
     False, True),
    ("oneOf became anyOf", {"oneOf": [STRING, INTEGER]}, {"anyOf": [STRING, INTEGER]}, True, False),
    ("anyOf became allOf", {"anyOf": [STRING, INTEGER]}, {"allOf": [STRING, INTEGER]}, False, True),
    ("plain type became a oneOf", STRING, {"oneOf": [STRING, INTEGER]}, True, False),
    ("allOf reduced to one part", {"allOf": [STRING, MAX_LENGTH]}, STRING, True, False),
    ("oneOf alternative replaced", {"oneOf": [STRING, INTEGER]}, {"oneOf": [STRING, BOOLEAN]}, False, False),
    ("oneOf alternative widened", {"oneOf": [STRING, INTEGER]}, {"oneOf": [STRING, {"type": "number"}]},
     True, False),
    ("oneOf alternatives reordered", {"oneOf": [STRING, INTEGER]}, {"oneOf": [INTEGER, STRING]}, True, True),
    ("nullable property through anyOf", obj({"v": {"anyOf": [STRING, INTEGER]}}),
     obj({"v": {"anyOf": [STRING, INTEGER, {"type": "null"}]}}), True, False),
]


@pytest.mark.parametrize(("description", "old", "new", "backward", "forward"), JSON_PAIRS,
                         ids=[pair[0] for pair in JSON_PAIRS])
def test_json_schema_pairs(description: str, old, new, backward: bool, forward: bool) -> None:
    old_text, new_text = json.dumps(old), json.dumps(new)
    assert verdict("JSON", "BACKWARD", old_text, new_text) is backward
    assert verdict("JSON", "FORWARD", old_text, new_text) is forward


def proto(*fields: tuple[str, int, int, int], package: str = "shop") -> str:
    import base64

    F = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="order.proto", package=package, syntax="proto2")
    message = file.message_type.add(name="Order")
    for name, number, kind, label in fields:
        message.field.add(name=name, number=number, type=kind, label=label or F.LABEL_OPTIONAL)
    return base64.b64encode(file.SerializeToString()).decode()


F = descriptor_pb2.FieldDescriptorProto
PROTOBUF_PAIRS = [
    ("optional field added", proto(("id", 1, F.TYPE_INT64, 0)),
     proto(("id", 1, F.TYPE_INT64, 0), ("note", 2, F.TYPE_STRING, 0)), True, True),
    ("field renamed", proto(("id", 1, F.TYPE_INT64, 0)), proto(("key", 1, F.TYPE_INT64, 0)), True, True),
    ("int32 to int64", proto(("id", 1, F.TYPE_INT32, 0)), proto(("id", 1, F.TYPE_INT64, 0)), True, True),
    ("string to bytes", proto(("id", 1, F.TYPE_STRING, 0)), proto(("id", 1, F.TYPE_BYTES, 0)), True, True),
    ("int64 to string", proto(("id", 1, F.TYPE_INT64, 0)), proto(("id", 1, F.TYPE_STRING, 0)), False, False),
    ("sint32 to int32", proto(("id", 1, F.TYPE_SINT32, 0)), proto(("id", 1, F.TYPE_INT32, 0)), False, False),
    ("required field added", proto(("id", 1, F.TYPE_INT64, 0)),
     proto(("id", 1, F.TYPE_INT64, 0), ("must", 2, F.TYPE_INT64, F.LABEL_REQUIRED)), False, False),
    ("package changed", proto(("id", 1, F.TYPE_INT64, 0)), proto(("id", 1, F.TYPE_INT64, 0), package="store"),
     False, False),
    ("made repeated", proto(("id", 1, F.TYPE_INT64, 0)), proto(("id", 1, F.TYPE_INT64, F.LABEL_REPEATED)),
     False, False),
]


@pytest.mark.parametrize(("description", "old", "new", "backward", "forward"), PROTOBUF_PAIRS,
                         ids=[pair[0] for pair in PROTOBUF_PAIRS])
def test_protobuf_pairs(description: str, old: str, new: str, backward: bool, forward: bool) -> None:
    assert verdict("PROTOBUF", "BACKWARD", old, new) is backward
    assert verdict("PROTOBUF", "FORWARD", old, new) is forward


PROTOBUF_TEXT_PAIRS = [
    ("text: optional field added", 'syntax = "proto3"; message Order { int64 id = 1; }',
     'syntax = "proto3"; message Order { int64 id = 1; string note = 2; }', True, True),
    ("text: field type changed", 'syntax = "proto3"; message Order { int64 id = 1; }',
     'syntax = "proto3"; message Order { string id = 1; }', False, False),
    ("text: type named relatively or fully", 'syntax = "proto3"; package p; message A {} message O { A a = 1; }',
     'syntax = "proto3"; package p; message A {} message O { .p.A a = 1; }', True, True),
    ("text: map value type changed", 'syntax = "proto3"; message Order { map<string, int64> tags = 1; }',
     'syntax = "proto3"; message Order { map<string, string> tags = 1; }', False, False),
    ("text: nested message type changed",
     'syntax = "proto3"; message Order { Line line = 1; message Line { int64 n = 1; } message Note {} }',
     'syntax = "proto3"; message Order { Note line = 1; message Line { int64 n = 1; } message Note {} }',
     False, False),
    ("text: enum value added", 'syntax = "proto3"; enum S { NEW = 0; } message Order { S s = 1; }',
     'syntax = "proto3"; enum S { NEW = 0; PAID = 1; } message Order { S s = 1; }', True, True),
]


@pytest.mark.parametrize(("description", "old", "new", "backward", "forward"), PROTOBUF_TEXT_PAIRS,
                         ids=[pair[0] for pair in PROTOBUF_TEXT_PAIRS])
def test_protobuf_source_text_pairs(description: str, old: str, new: str, backward: bool, forward: bool) -> None:
    assert verdict("PROTOBUF", "BACKWARD", old, new) is backward
    assert verdict("PROTOBUF", "FORWARD", old, new) is forward


def test_protobuf_source_text_is_canonical_and_links() -> None:
    text = """syntax = "proto3";
    package shop;   // the shop
    import "google/protobuf/timestamp.proto";
    option java_package = "com.example.shop";
    message Order {
      int64 id = 1;  /* key */
      map<string, Line> lines = 2;
      optional string note = 3;
      google.protobuf.Timestamp placed = 4;
      message Line { int32 count = 1; }
    }"""
    parsed = parse_schema("PROTOBUF", text)
    assert parsed.canonical == "\n".join([
        'syntax = "proto3";', "package shop;", 'import "google/protobuf/timestamp.proto";',
        'option java_package = "com.example.shop";', "message Order {", "  int64 id = 1;",
        "  map<string, Line> lines = 2;", "  optional string note = 3;", "  google.protobuf.Timestamp placed = 4;",
        "  message Line {", "    int32 count = 1;", "  }", "}"])
    assert parse_schema("PROTOBUF", parsed.canonical).canonical == parsed.canonical
    fields = {field.name: field for field in parsed.proto.message_type[0].field}
    assert fields["lines"].type_name == ".shop.Order.LinesEntry"
    assert fields["placed"].type_name == ".google.protobuf.Timestamp"
    assert fields["note"].proto3_optional and parsed.proto.message_type[0].oneof_decl[0].name == "_note"
    # the same schema sent as a descriptor is stored as text too (type names fully qualified, as Confluent writes)
    from_descriptor = parse_schema("PROTOBUF", parsed.serialized())
    assert "  .google.protobuf.Timestamp placed = 4;" in from_descriptor.canonical.splitlines()
    assert parse_schema("PROTOBUF", from_descriptor.canonical).proto == from_descriptor.proto


@pytest.mark.parametrize(("text", "reason"), [
    ('syntax = "proto3"; message { int64 id = 1; }', "line 1:27"),
    ('syntax = "proto3"; message Order { Missing m = 1; }', "Missing"),
    ('syntax = "proto3"; import "other.proto"; message Order { other.Thing m = 1; }', "other"),
    ('syntax = "proto3"; message Order { int64 a = 1; int64 b = 1; }', "duplicate field number"),
])
def test_invalid_protobuf_text_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(SchemaParseError, match=reason):
        parse_schema("PROTOBUF", text)


def _clean(message):
    """A descriptor without what kfk does not derive from text: JSON names (protoc's default), source info, and
    custom options (extensions of the option messages, which need their definitions linked)."""
    message.DiscardUnknownFields()
    for field, value in list(message.ListFields()):
        if field.name in ("json_name", "source_code_info"):
            message.ClearField(field.name)
        elif field.message_type is not None:
            for item in value if field.is_repeated else [value]:
                _clean(item)
            if not field.is_repeated and not value.ListFields():
                message.ClearField(field.name)
    return message


# .proto files whose protoc output ships beside them (googleapis-common-protos): protoc is the oracle of the parse
PROTOC_COMPILED = ["google/type/money.proto", "google/type/date.proto", "google/type/color.proto",
                   "google/type/postal_address.proto", "google/type/datetime.proto", "google/rpc/status.proto",
                   "google/rpc/error_details.proto", "google/api/http.proto", "google/api/distribution.proto",
                   "google/api/monitored_resource.proto", "google/api/field_behavior.proto",
                   "google/api/resource.proto"]


@pytest.mark.parametrize("name", PROTOC_COMPILED)
def test_protobuf_text_parsed_as_protoc_does(name: str) -> None:
    import importlib
    from pathlib import Path

    from kfk.registry.schema_types import SchemaReference

    root = Path(importlib.import_module("google.type").__path__[0]).parent.parent

    def compiled(file: str) -> descriptor_pb2.FileDescriptorProto:
        module = importlib.import_module(file.removesuffix(".proto").replace("/", ".") + "_pb2")
        return descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)

    def references(file: str, seen: set[str]) -> list[SchemaReference]:
        found = []
        for dependency in compiled(file).dependency:
            if not dependency.startswith("google/protobuf/") and dependency not in seen:
                seen.add(dependency)
                found += references(dependency, seen)
                found.append(SchemaReference(dependency, dependency, 1, (root / dependency).read_text()))
        return found

    parsed = parse_schema("PROTOBUF", (root / name).read_text(), references(name, set())).proto
    parsed.name = name
    assert _clean(parsed) == _clean(compiled(name))
