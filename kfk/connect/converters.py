"""Converters: Connect data <-> the bytes of Kafka records (org.apache.kafka.connect.storage.Converter).

The worker converts keys and values with `key.converter` / `value.converter` and header values with
`header.converter`, so connectors never see bytes. Here: StringConverter, ByteArrayConverter and
SimpleHeaderConverter (Kafka's defaults and simplest); JsonConverter is in kfk.connect.json_converter.
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple

from kfk.connect.config_def import ConfigDef, ConfigKey
from kfk.connect.data import (
    BOOLEAN_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_BYTES_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Schema,
    Type,
    java_text,
)
from kfk.connect.errors import DataException


class SchemaAndValue(NamedTuple):
    schema: Schema | None
    value: Any


NULL_SCHEMA_AND_VALUE = SchemaAndValue(None, None)


class Converter:
    """Kafka's Converter. `configure` gets the converter's own keys (prefix stripped) and whether it is the key's."""

    def configure(self, configs: Mapping[str, Any], is_key: bool) -> None:
        pass

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        raise NotImplementedError

    def to_connect_data(self, topic: str, value: bytes | None) -> SchemaAndValue:
        raise NotImplementedError

    def config(self) -> ConfigDef:
        return ConfigDef()


class HeaderConverter:
    """Kafka's HeaderConverter: one header value at a time."""

    def configure(self, configs: Mapping[str, Any]) -> None:
        pass

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        raise NotImplementedError

    def to_connect_header(self, topic: str, header_key: str, value: bytes | None) -> SchemaAndValue:
        raise NotImplementedError


def java_string(value: Any) -> str:
    """String.valueOf of a Connect value as a Java worker writes it (true, 1.0, ...), for StringConverter."""
    return java_text(value)


class StringConverter(Converter, HeaderConverter):
    """Values as text in `converter.encoding` (UTF-8 by default); read back as optional strings."""

    def __init__(self) -> None:
        self.encoding = "utf-8"

    def config(self) -> ConfigDef:
        return ConfigDef([ConfigKey("converter.encoding", "STRING", "UTF-8", "HIGH",
                                    "The name of the character set of the bytes")])

    def configure(self, configs: Mapping[str, Any], is_key: bool = False) -> None:
        self.encoding = str(configs.get("converter.encoding", "UTF-8"))

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        return None if value is None else java_string(value).encode(self.encoding)

    def to_connect_data(self, topic: str, value: bytes | None) -> SchemaAndValue:
        return SchemaAndValue(OPTIONAL_STRING_SCHEMA, None if value is None else value.decode(self.encoding))

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, header_key: str, value: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, value)


class ByteArrayConverter(Converter, HeaderConverter):
    """Bytes passed through unchanged; only BYTES data (or schemaless bytes) can be written."""

    def configure(self, configs: Mapping[str, Any], is_key: bool = False) -> None:
        pass  # nothing to configure; as a header converter it is configured without is_key

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is not None and schema.type is not Type.BYTES:
            raise DataException(f"Invalid schema type for ByteArrayConverter: {schema.type.name}")
        if value is not None and not isinstance(value, (bytes, bytearray, memoryview)):
            raise DataException(f"ByteArrayConverter is not compatible with objects of type {type(value).__name__}")
        return None if value is None else bytes(value)

    def to_connect_data(self, topic: str, value: bytes | None) -> SchemaAndValue:
        return SchemaAndValue(OPTIONAL_BYTES_SCHEMA, value)

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        return self.from_connect_data(topic, schema, value)

    def to_connect_header(self, topic: str, header_key: str, value: bytes | None) -> SchemaAndValue:
        return self.to_connect_data(topic, value)


class SimpleHeaderConverter(HeaderConverter):
    """Kafka's default header converter: values written as their string form, read back with the type inferred
    (booleans and integers of the smallest fitting width; anything else stays a string)."""

    def from_connect_header(self, topic: str, header_key: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        return java_string(value).encode()

    def to_connect_header(self, topic: str, header_key: str, value: bytes | None) -> SchemaAndValue:
        if value is None:
            return NULL_SCHEMA_AND_VALUE
        try:
            text = value.decode()
        except UnicodeDecodeError:
            return SchemaAndValue(OPTIONAL_BYTES_SCHEMA, value)
        if text in ("true", "false"):
            return SchemaAndValue(BOOLEAN_SCHEMA, text == "true")
        if text.lstrip("-").isdigit():
            number = int(text)
            for schema, bits in ((INT8_SCHEMA, 8), (INT16_SCHEMA, 16), (INT32_SCHEMA, 32), (INT64_SCHEMA, 64)):
                if -(1 << (bits - 1)) <= number < (1 << (bits - 1)):
                    return SchemaAndValue(schema, number)
        return SchemaAndValue(STRING_SCHEMA, text)
