"""InsertField$Key / $Value: add the record's topic, partition, offset, timestamp or a static value as fields.

A field name ending in "!" makes the added field required, "?" (or nothing) optional; tombstones pass unchanged.
"""

from __future__ import annotations

from typing import Any, Mapping

from kfk.connect.config_def import ConfigDef, ConfigKey
from kfk.connect.data import (
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    OPTIONAL_TIMESTAMP_SCHEMA,
    STRING_SCHEMA,
    TIMESTAMP_SCHEMA,
    SchemaBuilder,
    Struct,
    millis_to_timestamp,
)
from kfk.connect.errors import DataException
from kfk.connect.records import ConnectRecord, SinkRecord
from kfk.connect.transforms.base import KeyOrValue, copy_schema_basics, require_map, require_struct

PURPOSE = "field insertion"
KEYS = ("topic.field", "partition.field", "offset.field", "timestamp.field", "static.field")


def _field_spec(spec: str | None) -> tuple[str, bool] | None:
    """(name, optional) of a `name`, `name?` or `name!` spec."""
    if not spec:
        return None
    if spec.endswith("!"):
        return spec[:-1], False
    if spec.endswith("?"):
        return spec[:-1], True
    return spec, True


class InsertField(KeyOrValue):
    def config(self) -> ConfigDef:
        return ConfigDef([*(ConfigKey(key, "STRING", None, "MEDIUM", f"Field name for {key.split('.')[0]}.")
                            for key in KEYS),
                          ConfigKey("static.value", "STRING", None, "MEDIUM", "Static field value."),
                          ConfigKey("replace.null.with.default", "BOOLEAN", True, "MEDIUM",
                                    "Whether a null field is replaced by its schema's default.")])

    def configure(self, props: Mapping[str, Any]) -> None:
        parsed = self.config().parse(props)
        self.fields = {key: _field_spec(parsed[key]) for key in KEYS}
        self.static_value = parsed["static.value"]
        self._schema_cache: dict = {}

    def _values(self, record: ConnectRecord, schemaless: bool) -> list[tuple[str, Any]]:
        added: list[tuple[str, Any]] = []
        if self.fields["topic.field"]:
            added.append((self.fields["topic.field"][0], record.topic))
        if self.fields["partition.field"]:
            added.append((self.fields["partition.field"][0], record.kafka_partition))
        if self.fields["offset.field"]:
            if not isinstance(record, SinkRecord):
                raise DataException(f"Only SinkRecord supported for [{PURPOSE}], found: {type(record).__name__}")
            added.append((self.fields["offset.field"][0], record.kafka_offset))
        if self.fields["timestamp.field"]:
            timestamp = record.timestamp
            if not schemaless and timestamp is not None:
                timestamp = millis_to_timestamp(timestamp)
            added.append((self.fields["timestamp.field"][0], timestamp))
        if self.fields["static.field"]:
            added.append((self.fields["static.field"][0], self.static_value))
        return added

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            updated = dict(require_map(value, PURPOSE))
            updated.update(self._values(record, True))
            return self.new_record(record, None, updated)
        struct = require_struct(value, PURPOSE)
        updated_schema = self._schema_cache.get(struct.schema)
        if updated_schema is None:
            builder = copy_schema_basics(struct.schema, SchemaBuilder.struct())
            for field in struct.schema.fields:
                builder.field(field.name, field.schema)
            typed = {"topic.field": (STRING_SCHEMA, OPTIONAL_STRING_SCHEMA),
                     "partition.field": (INT32_SCHEMA, OPTIONAL_INT32_SCHEMA),
                     "offset.field": (INT64_SCHEMA, OPTIONAL_INT64_SCHEMA),
                     "timestamp.field": (TIMESTAMP_SCHEMA, OPTIONAL_TIMESTAMP_SCHEMA),
                     "static.field": (STRING_SCHEMA, OPTIONAL_STRING_SCHEMA)}
            for key in KEYS:
                spec = self.fields[key]
                if spec:
                    builder.field(spec[0], typed[key][1 if spec[1] else 0])
            updated_schema = self._schema_cache[struct.schema] = builder.build()
        updated = Struct(updated_schema)
        for field in struct.schema.fields:
            updated.put(field.name, struct.get_without_default(field.name))
        for name, added in self._values(record, False):
            updated.put(name, added)
        return self.new_record(record, updated_schema, updated)
