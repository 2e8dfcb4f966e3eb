"""Confluent's wire format and the serdes built on it: a framed record is the magic byte 0, the schema's id in 4
big-endian bytes, then the payload (Avro's binary encoding; the JSON document; for Protobuf the message indexes as
zig-zag varints, then the message). A deserializer fetches the writer's schema by the id in the frame, so it reads
whatever any Confluent-compatible serializer wrote, and what these serializers write, confluent-kafka's
deserializers read.

Subject naming strategies (which subject a serializer registers and looks its schema up under), as Confluent's:
TopicNameStrategy ``<topic>-key``/``<topic>-value`` (the default), RecordNameStrategy (the record's fully qualified
name), TopicRecordNameStrategy ``<topic>-<record name>``.
"""

from __future__ import annotations

import io
import json
import struct
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from kfk.registry.schema_types import AVRO, JSON, PROTOBUF, SchemaReference, parse_schema

__all__ = ["RegistryClient", "RegistryClientError", "SUBJECT_NAME_STRATEGIES", "subject_name", "frame", "unframe",
           "AvroSerializer", "JsonSchemaSerializer", "ProtobufSerializer", "Deserializer", "AvroDeserializer",
           "writer_schema", "protobuf_message", "MAGIC_BYTE"]

MAGIC_BYTE = 0
SUBJECT_NAME_STRATEGIES = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")
_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryClientError(Exception):
    """A registry's refusal (``status``, Confluent's ``error_code``) or an unreachable registry (status 0)."""

    def __init__(self, status: int, error_code: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code


class RegistryClient:
    """The few calls a serde makes, over HTTP, with the answers cached: schemas by id never change, and a subject's
    id for one schema text does not either."""

    def __init__(self, url: str, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._by_id: dict[int, dict] = {}
        self._ids: dict[tuple[str, str, str], int] = {}
        self._lock = threading.Lock()

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method,
                                         headers={"Content-Type": _CONTENT_TYPE, "Accept": _CONTENT_TYPE})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            try:
                answer = json.loads(error.read())
                raise RegistryClientError(error.code, answer.get("error_code", error.code),
                                          answer.get("message", str(error))) from None
            except ValueError:
                raise RegistryClientError(error.code, error.code, str(error)) from None
        except OSError as error:
            raise RegistryClientError(0, 0, f"the schema registry at {self.url} does not answer "
                                            f"({getattr(error, 'reason', error)})") from None

    def register(self, subject: str, schema_type: str, schema: str, references: list[dict] = (),
                 auto_register: bool = True) -> int:
        """The id of ``schema`` under ``subject``: registered if ``auto_register``, else looked up."""
        key = (subject, schema_type, schema)
        with self._lock:
            if key in self._ids:
                return self._ids[key]
        body: dict[str, Any] = {"schema": schema}
        if schema_type != AVRO:
            body["schemaType"] = schema_type
        if references:
            body["references"] = list(references)
        quoted = urllib.parse.quote(subject, safe="")
        answer = self._call("POST", f"/subjects/{quoted}/versions" if auto_register else f"/subjects/{quoted}", body)
        with self._lock:
            self._ids[key] = answer["id"]
        return answer["id"]

    def schema(self, schema_id: int) -> dict:
        """GET /schemas/ids/{id}: {"schema", "schemaType"?, "references"?}."""
        with self._lock:
            cached = self._by_id.get(schema_id)
        if cached is None:
            cached = self._call("GET", f"/schemas/ids/{schema_id}")
            with self._lock:
                self._by_id[schema_id] = cached
        return cached

    def latest(self, subject: str) -> dict:
        return self._call("GET", f"/subjects/{urllib.parse.quote(subject, safe='')}/versions/latest")

    def resolve_references(self, references: list[dict]) -> list[SchemaReference]:
        """A schema's references with their texts (and theirs, recursively, first: a reference's own imports)."""
        resolved: list[SchemaReference] = []
        for reference in references or ():
            version = self._call("GET", f"/subjects/{urllib.parse.quote(reference['subject'], safe='')}/versions/"
                                        f"{reference['version']}")
            resolved += self.resolve_references(version.get("references", []))
            resolved.append(SchemaReference(reference["name"], reference["subject"], version["version"],
                                            version["schema"]))
        return resolved


def subject_name(strategy: str, topic: str, is_key: bool, record_name: str | None) -> str:
    if strategy == "TopicNameStrategy":
        return f"{topic}-{'key' if is_key else 'value'}"
    if record_name is None:
        raise ValueError(f"{strategy} needs a schema with a record name")
    if strategy == "RecordNameStrategy":
        return record_name
    if strategy == "TopicRecordNameStrategy":
        return f"{topic}-{record_name}"
    raise ValueError(f"unknown subject name strategy {strategy!r} (one of {', '.join(SUBJECT_NAME_STRATEGIES)})")


def frame(schema_id: int, payload: bytes) -> bytes:
    return struct.pack(">bI", MAGIC_BYTE, schema_id) + payload


def unframe(data: bytes) -> tuple[int, bytes]:
    if len(data) < 5 or data[0] != MAGIC_BYTE:
        raise ValueError("not in Confluent's wire format (magic byte 0 and a 4-byte schema id)")
    return struct.unpack_from(">I", data, 1)[0], data[5:]


class _Serializer:
    schema_type = AVRO

    def __init__(self, client: RegistryClient, schema: str, *, is_key: bool = False,
                 subject_name_strategy: str = "TopicNameStrategy", auto_register: bool = True) -> None:
        self.client = client
        self.schema = schema
        self.parsed = parse_schema(self.schema_type, schema)
        self.is_key = is_key
        self.strategy = subject_name_strategy
        self.auto_register = auto_register
        subject_name(self.strategy, "topic", is_key, self.parsed.record_name())  # refuse a bad strategy up front

    def schema_id(self, topic: str) -> int:
        subject = subject_name(self.strategy, topic, self.is_key, self.parsed.record_name())
        return self.client.register(subject, self.schema_type, self.schema, auto_register=self.auto_register)

    def serialize(self, topic: str, value: Any) -> bytes:
        return frame(self.schema_id(topic), self.encode(value))

    def encode(self, value: Any) -> bytes:
        raise NotImplementedError


class AvroSerializer(_Serializer):
    """Avro's binary encoding of a value; the value is Python data, or (from_json) JSON text in Avro's JSON
    encoding (unions tagged, {"int": 7}) as Confluent's kafka-avro-console-producer reads it, or plain JSON."""

    schema_type = AVRO

    def encode(self, value: Any) -> bytes:
        import fastavro

        out = io.BytesIO()
        fastavro.schemaless_writer(out, self.parsed.codec_schema, value, strict_allow_default=True)
        return out.getvalue()

    def from_json(self, text: str) -> Any:
        import fastavro

        try:
            return next(fastavro.json_reader(io.StringIO(text), self.parsed.codec_schema))
        except Exception:  # not Avro's JSON encoding: take it as plain JSON, checked when encoded
            return json.loads(text)


class JsonSchemaSerializer(_Serializer):
    """A JSON document checked against its JSON Schema, written as UTF-8 JSON."""

    schema_type = JSON

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._validator = self.parsed.validator()

    def encode(self, value: Any) -> bytes:
        import jsonschema

        try:
            self._validator.validate(value)
        except jsonschema.ValidationError as error:
            raise ValueError(f"the value does not match the JSON Schema: {error.message}") from None
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()

    def from_json(self, text: str) -> Any:
        return json.loads(text)


class ProtobufSerializer(_Serializer):
    """A Protobuf message (from JSON by Protobuf's JSON mapping) of the schema's first top-level message type, or of
    ``message_name``; the payload starts with the message's indexes in the file, as Confluent's serializers write
    them (a single 0 byte for the first message)."""

    schema_type = PROTOBUF

    def __init__(self, client: RegistryClient, schema: str, *, message_name: str | None = None,
                 **kwargs: Any) -> None:
        from google.protobuf import message_factory

        from kfk.registry.protobuf_schema import new_pool

        super().__init__(client, schema, **kwargs)
        proto = self.parsed.proto
        pool = new_pool([])
        pool.Add(proto)
        file = pool.FindFileByName(proto.name)
        messages = list(file.message_types_by_name.values())
        if not messages:
            raise ValueError("the Protobuf schema defines no message")
        if message_name is None:
            descriptor, indexes = messages[0], [0]
        else:
            found = _find_message(messages, message_name.removeprefix(f"{proto.package}."), [])
            if found is None:
                raise ValueError(f"the Protobuf schema has no message {message_name}")
            descriptor, indexes = found
        self._message_class = message_factory.GetMessageClass(descriptor)
        self._indexes = b"\x00" if indexes == [0] else b"".join(_zigzag(number) for number in [len(indexes), *indexes])

    def new_message(self) -> Any:
        """An empty message of the type this serializer writes."""
        return self._message_class()

    def from_json(self, text: str) -> Any:
        from google.protobuf import json_format

        return json_format.Parse(text, self._message_class())

    def encode(self, value: Any) -> bytes:
        return self._indexes + value.SerializeToString()


def _find_message(messages: list, name: str, path: list[int]):
    head, _, rest = name.partition(".")
    for index, descriptor in enumerate(messages):
        if descriptor.name == head:
            return (descriptor, [*path, index]) if not rest else _find_message(descriptor.nested_types, rest,
                                                                                [*path, index])
    return None


def _zigzag(number: int) -> bytes:
    value = (number << 1) ^ (number >> 63)
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def writer_schema(client: RegistryClient, schema_id: int) -> tuple[str, Any, list[SchemaReference]]:
    """The type, parsed schema and resolved references of the schema a frame names."""
    registered = client.schema(schema_id)
    schema_type = registered.get("schemaType", AVRO)
    references = client.resolve_references(registered.get("references", []))
    return schema_type, parse_schema(schema_type, registered["schema"], references), references


class AvroDeserializer:
    """A framed Avro record as Python data (records as dicts, logical types as Python's), with the writer's
    schema: what typed readers (kfk.streams' Avro serde, kfk.connect's AvroConverter) need, where Deserializer
    gives text."""

    def __init__(self, client: RegistryClient) -> None:
        self.client = client
        self._schemas: dict[int, Any] = {}

    def schema(self, schema_id: int) -> Any:
        """The writer's parsed Avro schema (kfk.registry.avro_schema.AvroSchema), cached by id."""
        parsed = self._schemas.get(schema_id)
        if parsed is None:
            schema_type, parsed, _ = writer_schema(self.client, schema_id)
            if schema_type != AVRO:
                raise ValueError(f"schema {schema_id} is a {schema_type} schema, not Avro")
            self._schemas[schema_id] = parsed
        return parsed

    def deserialize(self, data: bytes) -> tuple[Any, Any]:
        """(the writer's AvroSchema, the value)."""
        import fastavro

        schema_id, payload = unframe(data)
        parsed = self.schema(schema_id)
        return parsed, fastavro.schemaless_reader(io.BytesIO(payload), parsed.codec_schema, None)


class Deserializer:
    """Any framed record to JSON text, whatever its schema type: the writer's schema comes from the registry by
    the id in the frame. Avro is written in Avro's JSON encoding (as Confluent's kafka-avro-console-consumer prints
    it), Protobuf in Protobuf's JSON mapping, JSON Schema payloads as they are."""

    def __init__(self, client: RegistryClient) -> None:
        self.client = client
        self._readers: dict[int, Any] = {}

    def to_json(self, data: bytes) -> str:
        schema_id, payload = unframe(data)
        reader = self._readers.get(schema_id)
        if reader is None:
            reader = self._readers[schema_id] = self._reader(schema_id)
        return reader(payload)

    def _reader(self, schema_id: int):
        schema_type, parsed, references = writer_schema(self.client, schema_id)
        if schema_type == AVRO:
            import fastavro

            def read_avro(payload: bytes) -> str:
                value = fastavro.schemaless_reader(io.BytesIO(payload), parsed.codec_schema, None)
                out = io.StringIO()
                fastavro.json_writer(out, parsed.codec_schema, [value])
                return out.getvalue().strip()
            return read_avro
        if schema_type == JSON:
            return lambda payload: json.dumps(json.loads(payload), ensure_ascii=False)
        if schema_type == PROTOBUF:
            return _protobuf_reader(parsed, references)
        raise ValueError(f"unknown schema type {schema_type}")


def _read_varint(data: bytes, position: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), position  # zig-zag
        shift += 7


def protobuf_message(parsed: Any, references: list[SchemaReference]):
    """A function from a framed Protobuf payload (after the schema id) to (the message's descriptor, the message
    bytes): the payload starts with the message's indexes in the schema's file (one 0 byte for the first message)."""
    from kfk.registry.protobuf_schema import new_pool

    pool = new_pool(references)
    pool.Add(parsed.proto)
    file = pool.FindFileByName(parsed.proto.name)

    def locate(payload: bytes):
        count, position = _read_varint(payload, 0)
        indexes = [0]
        if count:
            indexes = []
            for _ in range(count):
                index, position = _read_varint(payload, position)
                indexes.append(index)
        descriptor = list(file.message_types_by_name.values())[indexes[0]]
        for index in indexes[1:]:
            descriptor = descriptor.nested_types[index]
        return descriptor, payload[position:]
    return locate


def _protobuf_reader(parsed: Any, references: list[SchemaReference]):
    from google.protobuf import json_format, message_factory

    locate = protobuf_message(parsed, references)

    def read_protobuf(payload: bytes) -> str:
        descriptor, data = locate(payload)
        message = message_factory.GetMessageClass(descriptor)()
        message.ParseFromString(data)
        return json_format.MessageToJson(message, indent=None, preserving_proto_field_name=True)
    return read_protobuf
