"""Serdes: how kfk.streams turns keys and values into bytes and back, with the byte layouts of Kafka's own
(org.apache.kafka.common.serialization.Serdes), so that a Java and a Python application read each other's topics.

Integers are big-endian two's complement (Integer: 4 bytes, Long: 8 bytes), strings UTF-8, JSON UTF-8 text; null
(None) stays null in both directions, as Kafka's serdes do (a tombstone stays a tombstone).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Serde", "Serdes", "serde_from_config"]


@dataclass(frozen=True)
class Serde:
    """A serializer and deserializer pair; ``name`` is how describe() and error messages call it.
    ``serialize_to`` is for serdes whose bytes depend on the topic written (a schema registry's serdes register
    under the topic's subject); sinks call it through serialize_for."""

    name: str
    serialize: Callable[[Any], bytes | None]
    deserialize: Callable[[bytes | None], Any]
    serialize_to: Callable[[str, Any], bytes | None] | None = None

    def serialize_for(self, topic: str, value: Any) -> bytes | None:
        return self.serialize(value) if self.serialize_to is None else self.serialize_to(topic, value)

    def for_topic(self, topic: str) -> Serde:
        """This serde with ``serialize`` writing for ``topic`` (a store's serdes write for its changelog topic, as
        in Kafka Streams)."""
        if self.serialize_to is None:
            return self
        serialize_to = self.serialize_to
        return Serde(self.name, lambda value: serialize_to(topic, value), self.deserialize, serialize_to)


def _nullable(function: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else function(value)


def _fixed_int(layout: str, size: int, java_name: str) -> Serde:
    packer = struct.Struct(layout)

    def deserialize(data: bytes) -> int:
        if len(data) != size:
            raise ValueError(f"Size of data received by {java_name}Deserializer is not {size}")
        return packer.unpack(data)[0]

    return Serde(java_name, _nullable(packer.pack), _nullable(deserialize))


class Serdes:
    """Kafka's built-in serdes, by their Java names in snake_case."""

    @staticmethod
    def bytes() -> Serde:
        return Serde("ByteArray", _nullable(bytes), _nullable(bytes))

    @staticmethod
    def string() -> Serde:
        return Serde("String", _nullable(lambda text: text.encode()), _nullable(lambda data: data.decode()))

    @staticmethod
    def integer() -> Serde:
        return _fixed_int(">i", 4, "Integer")

    @staticmethod
    def long() -> Serde:
        return _fixed_int(">q", 8, "Long")

    @staticmethod
    def json() -> Serde:
        """JSON text in UTF-8 (Connect's JsonConverter without schemas writes the same bytes for plain values)."""
        return Serde("Json", _nullable(lambda value: json.dumps(value, separators=(",", ":")).encode()),
                     _nullable(json.loads))


#: default.key.serde / default.value.serde values: kfk's short names and the Java class names Kafka's configs use.
_BY_NAME: dict[str, Callable[[], Serde]] = {
    "bytes": Serdes.bytes, "string": Serdes.string, "integer": Serdes.integer, "long": Serdes.long,
    "json": Serdes.json,
    "org.apache.kafka.common.serialization.Serdes$ByteArraySerde": Serdes.bytes,
    "org.apache.kafka.common.serialization.Serdes$StringSerde": Serdes.string,
    "org.apache.kafka.common.serialization.Serdes$IntegerSerde": Serdes.integer,
    "org.apache.kafka.common.serialization.Serdes$LongSerde": Serdes.long,
}


#: Confluent's serde over a schema registry (configured by schema.registry.url), in kfk.streams.avro_serde.
GENERIC_AVRO_SERDE = "io.confluent.kafka.streams.serdes.avro.GenericAvroSerde"


def serde_from_config(value: Serde | str | None, is_key: bool = False,
                      schema_registry_url: str | None = None) -> Serde:
    """A default.*.serde setting as a Serde: a Serde itself, or one of the names above; unset means bytes (records
    stay bytes unless serdes say otherwise)."""
    if value is None:
        return Serdes.bytes()
    if isinstance(value, Serde):
        return value
    if value in (GENERIC_AVRO_SERDE, "avro"):
        if not schema_registry_url:
            raise ValueError(f"{value} needs schema.registry.url")
        from kfk.streams.avro_serde import generic_avro_serde

        return generic_avro_serde(schema_registry_url, is_key=is_key)
    try:
        return _BY_NAME[value]()
    except KeyError:
        raise ValueError(f"unknown serde {value!r}: use a Serde or one of {', '.join(sorted(_BY_NAME)[:5])}, "
                         "or a Java class name of Kafka's built-in serdes (or Confluent's GenericAvroSerde)") from None
