"""Protobuf schemas, taken in either form Confluent's registry takes: .proto source text (its canonical form), or a
base64-encoded FileDescriptorProto (what confluent-kafka's serializers send: ``FileDescriptor.serialized_pb``), their
imports given as schema references by file name; the well-known google/protobuf files need no reference. Either way
the schema is kept as canonical .proto text (a descriptor is turned into text, as Confluent's registry does) and
linked in a DescriptorPool (which refuses unresolved types); ``serialized()`` gives the descriptor form back.

Compatibility follows the main rules Confluent documents for Protobuf: the package and messages may not disappear,
a field (by number) may not change kind beyond the wire-compatible groups (int32/uint32/int64/uint64/bool;
sint32/sint64; fixed32/sfixed32; fixed64/sfixed64; string/bytes) nor its message or enum type, a required field may
not be added or removed, and a field may not leave a oneof. Adding, removing or renaming optional fields is allowed.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message import DecodeError

from kfk.registry import proto_text
from kfk.registry.schema_types import PROTOBUF, Incompatibility, SchemaParseError, SchemaReference

__all__ = ["ProtobufSchema", "new_pool"]

F = descriptor_pb2.FieldDescriptorProto
_WIRE_GROUPS = [
    {F.TYPE_INT32, F.TYPE_UINT32, F.TYPE_INT64, F.TYPE_UINT64, F.TYPE_BOOL},
    {F.TYPE_SINT32, F.TYPE_SINT64},
    {F.TYPE_FIXED32, F.TYPE_SFIXED32},
    {F.TYPE_FIXED64, F.TYPE_SFIXED64},
    {F.TYPE_STRING, F.TYPE_BYTES},
]
_WELL_KNOWN = ("any_pb2", "duration_pb2", "empty_pb2", "field_mask_pb2", "struct_pb2", "timestamp_pb2",
               "wrappers_pb2", "source_context_pb2", "type_pb2", "api_pb2", "descriptor_pb2")
DEFAULT_FILE_NAME = "schema.proto"


def _decoded(text: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The descriptor a base64 schema holds, or None when the text is not base64 (.proto source never is: it has
    spaces, semicolons, braces)."""
    try:
        data = base64.b64decode(text.strip(), validate=True)
        proto = descriptor_pb2.FileDescriptorProto()
        proto.ParseFromString(data)
    except (binascii.Error, ValueError, DecodeError):
        return None
    return proto


def _read(text: str, name: str,
          pool: descriptor_pool.DescriptorPool) -> tuple[str, descriptor_pb2.FileDescriptorProto]:
    """A schema's canonical text and its descriptor (named ``name``), its imports looked up in ``pool``."""
    proto = _decoded(text)
    if proto is not None:
        proto.name = name
        return proto_text.render(proto_text.source_from_descriptor(proto)), proto
    source = proto_text.parse_source(text)
    return proto_text.render(source), proto_text.descriptor_from_source(source, name, pool)


def _link(pool: descriptor_pool.DescriptorPool, proto: descriptor_pb2.FileDescriptorProto) -> None:
    try:
        pool.Add(proto)
        pool.FindFileByName(proto.name)
    except (TypeError, KeyError, ValueError) as error:
        raise SchemaParseError(str(error)) from None


def new_pool(references: Sequence[SchemaReference]) -> descriptor_pool.DescriptorPool:
    """A pool holding the well-known types and the referenced files (each after the files it imports), in which a
    schema's file can be linked."""
    import importlib

    pool = descriptor_pool.DescriptorPool()
    for module in _WELL_KNOWN:
        pool.AddSerializedFile(importlib.import_module(f"google.protobuf.{module}").DESCRIPTOR.serialized_pb)
    for reference in references:
        try:
            pool.FindFileByName(reference.name)
        except KeyError:
            _link(pool, _read(reference.schema, reference.name, pool)[1])
    return pool


@dataclass
class ProtobufSchema:
    schema_type = PROTOBUF
    canonical: str
    proto: descriptor_pb2.FileDescriptorProto

    @classmethod
    def parse(cls, text: str, references: Sequence[SchemaReference] = ()) -> ProtobufSchema:
        pool = new_pool(references)
        canonical, proto = _read(text, DEFAULT_FILE_NAME, pool)
        _link(pool, proto)
        return cls(canonical, proto)

    def normalized(self) -> ProtobufSchema:
        """The text the descriptor declares: type names fully qualified, so that a schema sent as text and the same
        schema sent as a descriptor (what the serializers send) are the same registration."""
        return ProtobufSchema(proto_text.render(proto_text.source_from_descriptor(self.proto)), self.proto)

    def serialized(self) -> str:
        """The schema as a base64 FileDescriptorProto (Confluent's ``format=serialized``)."""
        return base64.b64encode(self.proto.SerializeToString()).decode("ascii")

    def record_name(self) -> str | None:
        if not self.proto.message_type:
            return None
        name = self.proto.message_type[0].name
        return f"{self.proto.package}.{name}" if self.proto.package else name

    def incompatibilities(self, writer: ProtobufSchema) -> list[Incompatibility]:
        found: list[Incompatibility] = []
        if self.proto.package != writer.proto.package:
            found.append(Incompatibility("PACKAGE_CHANGED", "#/",
                                         f"The package changed from '{writer.proto.package}' to "
                                         f"'{self.proto.package}'"))
        reader_messages = dict(_messages(self.proto.message_type, ""))
        for name, writer_message in _messages(writer.proto.message_type, ""):
            reader_message = reader_messages.get(name)
            if reader_message is None:
                found.append(Incompatibility("MESSAGE_REMOVED", f"#/{name}",
                                             f"The message '{name}' of the writer's schema is missing from the "
                                             "reader's"))
            else:
                _compare_fields(reader_message, writer_message, name, found)
        return found


def _messages(messages, prefix: str):
    for message in messages:
        name = f"{prefix}{message.name}"
        yield name, message
        yield from _messages(message.nested_type, f"{name}.")


def _compare_fields(reader: descriptor_pb2.DescriptorProto, writer: descriptor_pb2.DescriptorProto, name: str,
                    found: list[Incompatibility]) -> None:
    reader_fields = {field.number: field for field in reader.field}
    writer_fields = {field.number: field for field in writer.field}
    for number, field in reader_fields.items():
        if number not in writer_fields and field.label == F.LABEL_REQUIRED:
            found.append(Incompatibility("REQUIRED_FIELD_ADDED", f"#/{name}/{number}",
                                         f"The required field '{field.name}' ({number}) is new in '{name}'"))
    for number, old in writer_fields.items():
        here = f"#/{name}/{number}"
        new = reader_fields.get(number)
        if new is None:
            if old.label == F.LABEL_REQUIRED:
                found.append(Incompatibility("REQUIRED_FIELD_REMOVED", here,
                                             f"The required field '{old.name}' ({number}) was removed from '{name}'"))
            continue
        if new.type != old.type:
            if not any(new.type in group and old.type in group for group in _WIRE_GROUPS):
                kind = ("FIELD_KIND_CHANGED" if F.TYPE_MESSAGE in (new.type, old.type) or
                        F.TYPE_ENUM in (new.type, old.type) else "FIELD_SCALAR_KIND_CHANGED")
                found.append(Incompatibility(kind, here, f"The field {number} of '{name}' changed from "
                                             f"{F.Type.Name(old.type)} to {F.Type.Name(new.type)}"))
        elif new.type in (F.TYPE_MESSAGE, F.TYPE_ENUM) and new.type_name != old.type_name:
            found.append(Incompatibility("FIELD_NAMED_TYPE_CHANGED", here, f"The field {number} of '{name}' changed "
                                         f"from {old.type_name} to {new.type_name}"))
        if (old.label == F.LABEL_REPEATED) != (new.label == F.LABEL_REPEATED):
            found.append(Incompatibility("FIELD_KIND_CHANGED", here,
                                         f"The field {number} of '{name}' changed between repeated and single"))
        if old.HasField("oneof_index") and not new.HasField("oneof_index") and not old.proto3_optional:
            found.append(Incompatibility("ONEOF_FIELD_REMOVED", here,
                                         f"The field {number} of '{name}' left its oneof"))
