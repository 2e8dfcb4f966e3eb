"""The console tools' schema-registry formats: ``--key-format``/``--value-format avro|json-schema|protobuf`` with a
schema registry (``--schema-registry-url``, Confluent's schema.registry.url), as Confluent's
kafka-avro-console-producer / -consumer (and their JSON Schema and Protobuf siblings) do.

console-produce reads JSON per line (for Avro, Avro's JSON encoding as Confluent's tool reads it, or plain JSON),
registers the schema given by ``--value-schema`` (a file, or the schema's text) under the subject the naming
strategy gives (or only looks it up with --no-auto-register), and writes Confluent's wire format. console-consume
reads any framed record, fetching the writer's schema by its id, and prints JSON. A Protobuf schema is given as a
.proto file (without imports beyond google/protobuf's), or as the descriptor set `protoc --descriptor_set_out`
writes; its lines are Protobuf's JSON.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from kfk.commands.errors import fail

__all__ = ["SchemaFormat", "KeyFormat", "ValueFormat", "KeySchema", "ValueSchema", "SchemaRegistryUrl",
           "SubjectNameStrategy", "KeySubjectNameStrategy", "AutoRegister", "serializer_for", "deserializer_for",
           "JsonText"]


class SchemaFormat(str, Enum):
    avro = "avro"
    json_schema = "json-schema"
    protobuf = "protobuf"


_HELP = "Records in Confluent's wire format with a schema from the schema registry: avro, json-schema or protobuf."
KeyFormat = Annotated[Optional[SchemaFormat], typer.Option("--key-format", help="Keys as " + _HELP[11:])]
ValueFormat = Annotated[Optional[SchemaFormat], typer.Option("--value-format", help=_HELP)]
KeySchema = Annotated[Optional[str], typer.Option(
    "--key-schema", help="With --key-format: the key schema, a file or its text (key.schema).")]
ValueSchema = Annotated[Optional[str], typer.Option(
    "--value-schema", help="With --value-format: the value schema, a file (schema.avsc) or its text (value.schema).")]
SchemaRegistryUrl = Annotated[str, typer.Option(
    "--schema-registry-url", envvar="KFK_SCHEMA_REGISTRY_URL", show_envvar=True,
    help="The schema registry's address (schema.registry.url).")]
DEFAULT_SCHEMA_REGISTRY_URL = "http://localhost:8081"
SubjectNameStrategy = Annotated[str, typer.Option(
    "--subject-name-strategy", help="Which subject the value schema is registered under "
                                    "(value.subject.name.strategy): TopicNameStrategy (<topic>-value), "
                                    "RecordNameStrategy (the record's name) or TopicRecordNameStrategy.")]
KeySubjectNameStrategy = Annotated[str, typer.Option(
    "--key-subject-name-strategy", help="The same for the key schema (key.subject.name.strategy).")]
AutoRegister = Annotated[bool, typer.Option(
    "--auto-register/--no-auto-register", help="Register the schema (auto.register.schemas), or only look its id "
                                               "up (the subject must have it already).")]


class JsonText(str):
    """A deserialized key or value: JSON text, which the json formatter embeds as the value it encodes."""

    def json_value(self) -> Any:
        return json.loads(self)


def _schema_text(schema: str, flag: str) -> str:
    """The schema's text: given inline (JSON starts with {, [ or "), or the content of the file named."""
    if schema.lstrip()[:1] in ("{", "[", '"'):
        return schema
    try:
        return Path(schema).read_text()
    except OSError as error:
        fail(f"cannot read {flag} {schema}: {error.strerror} (give a schema file, or the schema's JSON text)")


def _descriptor_text(schema: str, flag: str) -> str:
    """A Protobuf schema as the registry takes it: a .proto file's text, or a base64 FileDescriptorProto from a
    descriptor set file (what `protoc --descriptor_set_out=order.desc order.proto` writes; its last file is the
    schema), or given as either text."""
    import base64

    from google.protobuf import descriptor_pb2
    from google.protobuf.message import DecodeError

    path = Path(schema)
    if not path.is_file():
        return schema
    data = path.read_bytes()
    descriptors = descriptor_pb2.FileDescriptorSet()
    try:
        descriptors.ParseFromString(data)
    except DecodeError:
        descriptors.Clear()
    if not descriptors.file:
        return data.decode("utf-8", "replace").strip()  # .proto source (or base64)
    return base64.b64encode(descriptors.file[-1].SerializeToString()).decode()


def serializer_for(fmt: SchemaFormat | None, schema: str | None, flag: str, url: str, *, is_key: bool,
                   strategy: str, auto_register: bool):
    """A function from one line's bytes to the framed record, or None without a format."""
    if fmt is None:
        if schema is not None:
            fail(f"{flag}-schema goes with {flag}-format")
        return None
    if schema is None:
        fail(f"{flag}-format {fmt.value} needs {flag}-schema")
    from kfk.registry.schema_types import SchemaParseError
    from kfk.registry.serdes import (
        AvroSerializer,
        JsonSchemaSerializer,
        ProtobufSerializer,
        RegistryClient,
        RegistryClientError,
    )

    kind = {SchemaFormat.avro: AvroSerializer, SchemaFormat.json_schema: JsonSchemaSerializer,
            SchemaFormat.protobuf: ProtobufSerializer}[fmt]
    text = _descriptor_text(schema, f"{flag}-schema") if fmt is SchemaFormat.protobuf else \
        _schema_text(schema, f"{flag}-schema")
    try:
        serializer = kind(RegistryClient(url), text, is_key=is_key, subject_name_strategy=strategy,
                          auto_register=auto_register)
    except SchemaParseError as error:
        fail(f"{flag}-schema is not a valid {fmt.value} schema: {error}")
    except ValueError as error:
        fail(str(error))

    def serialize(topic: str, data: bytes | None) -> bytes | None:
        if data is None:
            return None
        try:
            value = serializer.from_json(data.decode("utf-8"))
        except ValueError as error:
            raise ValueError(f"not JSON: {data.decode('utf-8', 'replace')!r} ({error})") from None
        try:
            return serializer.serialize(topic, value)
        except RegistryClientError as error:
            detail = f" (HTTP {error.status}, error code {error.error_code})" if error.status else ""
            raise ValueError(f"the schema registry refused the schema: {error}{detail}") from None
        except (ValueError, TypeError) as error:
            raise ValueError(f"the {fmt.value} schema does not fit {data.decode('utf-8', 'replace')!r}: "
                             f"{error}") from None
    return serialize


def deserializer_for(fmt: SchemaFormat | None, url: str):
    """A deserializer (bytes -> JsonText) for console-consume's formatters, or None without a format."""
    if fmt is None:
        return None
    from kfk.registry.serdes import Deserializer, RegistryClient, RegistryClientError

    from kfk.commands.record_formats import DeserializationError

    deserializer = Deserializer(RegistryClient(url))

    def deserialize(data: bytes) -> JsonText:
        try:
            return JsonText(deserializer.to_json(data))
        except RegistryClientError as error:
            raise DeserializationError(f"cannot fetch the record's schema: {error}") from None
        except (ValueError, IndexError, EOFError, StopIteration) as error:
            raise DeserializationError(f"cannot read the record as {fmt.value}: {error}") from None
    return deserialize
