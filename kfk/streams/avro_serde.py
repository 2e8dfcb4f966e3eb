"""Avro serdes over a schema registry, as Confluent's GenericAvroSerde: records in Confluent's wire format, written
and read through kfk.registry's client and serdes, so a kfk.streams application reads what confluent-kafka's
AvroSerializer, a Connect worker's AvroConverter or `kfk console-produce --value-format avro` wrote, and they read
what it writes.

Generic records are dicts. A deserialized record is a GenericRecord: a dict that remembers its writer's schema, so
a topology that passes records on (or builds new ones with GenericRecord(schema, ...)) writes them with their
schema, as Java's GenericRecord carries its own; a plain dict is written with the serde's ``schema``.
"""

from __future__ import annotations

import json
from typing import Any

from kfk.registry.serdes import AvroDeserializer, AvroSerializer, RegistryClient
from kfk.streams.serdes import Serde

__all__ = ["GenericRecord", "generic_avro_serde"]


class GenericRecord(dict):
    """A record's fields, and its Avro schema (JSON text) in ``schema``."""

    def __init__(self, schema: str | dict, fields: Any = (), /, **more: Any) -> None:
        super().__init__(fields, **more)
        self.schema = schema if isinstance(schema, str) else json.dumps(schema, separators=(",", ":"))


def generic_avro_serde(schema_registry_url: str, *, schema: str | dict | None = None, is_key: bool = False,
                       auto_register: bool = True,
                       subject_name_strategy: str = "TopicNameStrategy") -> Serde:
    """A serde of generic Avro records (``schema_registry_url`` as Confluent's schema.registry.url). Records are
    written with their own schema (GenericRecord), else ``schema``; registered under the subject of the topic
    written (``<topic>-value``/``-key`` by default): sinks write for their topic, stores for their changelog."""
    client = RegistryClient(schema_registry_url)
    default_schema = None if schema is None else GenericRecord(schema).schema
    deserializer = AvroDeserializer(client)
    serializers: dict[str, AvroSerializer] = {}

    def serialize_to(topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        text = getattr(value, "schema", None) or default_schema
        if text is None:
            raise ValueError("GenericAvroSerde: the record has no schema (give the serde a schema, or write a "
                             "GenericRecord)")
        serializer = serializers.get(text)
        if serializer is None:
            serializer = serializers[text] = AvroSerializer(client, text, is_key=is_key, auto_register=auto_register,
                                                            subject_name_strategy=subject_name_strategy)
        return serializer.serialize(topic, value)

    def serialize(value: Any) -> bytes | None:
        if value is None:
            return None
        raise ValueError("GenericAvroSerde registers schemas under the topic written: serialize with "
                         "serialize_for(topic, value), or take serde.for_topic(topic)")

    def deserialize(data: bytes | None) -> Any:
        if data is None:
            return None
        parsed, value = deserializer.deserialize(data)
        return GenericRecord(parsed.canonical, value) if isinstance(value, dict) else value

    return Serde("GenericAvro", serialize, deserialize, serialize_to)
