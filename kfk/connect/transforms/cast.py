"""Cast$Key / $Value: cast the whole value (`spec=int32`) or fields (`spec=a:int64,b:string`) to primitive types."""

from __future__ import annotations

import base64
import datetime
import decimal
from typing import Any, Mapping

from kfk.connect.config_def import ConfigDef, ConfigException, ConfigKey
from kfk.connect.converters import java_string
from kfk.connect.data import Schema, SchemaBuilder, Struct, Type, timestamp_to_millis
from kfk.connect.errors import DataException
from kfk.connect.records import ConnectRecord
from kfk.connect.transforms.base import KeyOrValue, copy_schema_basics, require_map, require_struct

PURPOSE = "cast types"
TARGETS = {Type.INT8, Type.INT16, Type.INT32, Type.INT64, Type.FLOAT32, Type.FLOAT64, Type.BOOLEAN, Type.STRING}
WHOLE_VALUE = ""


def _parse_spec(name: str, mappings: list[str]) -> dict[str, Type]:
    casts: dict[str, Type] = {}
    for mapping in mappings:
        parts = mapping.split(":")
        if len(parts) > 2:
            raise ConfigException(f"Invalid value {','.join(mappings)} for configuration {name}: "
                                  "Invalid cast mapping: " + mapping)
        field, type_name = (WHOLE_VALUE, parts[0]) if len(parts) == 1 else parts
        if len(parts) == 1 and len(mappings) > 1:
            raise ConfigException(f"Invalid value {','.join(mappings)} for configuration {name}: Cast transformations "
                                  "that specify a type to cast the entire value to may only specify a single cast "
                                  "in their spec")
        try:
            target = Type(type_name.strip().lower())
        except ValueError:
            target = None
        if target not in TARGETS:
            raise ConfigException(f"Invalid value {','.join(mappings)} for configuration {name}: Invalid type found "
                                  f"in casting spec: {type_name.strip()}")
        casts[field.strip()] = target
    return casts


def cast_value(value: Any, target: Type) -> Any:
    """Kafka's Cast.castValueToType for the primitive targets."""
    if value is None:
        return None
    if isinstance(value, datetime.datetime) and target is not Type.STRING:
        value = timestamp_to_millis(value)
    try:
        if target in (Type.INT8, Type.INT16, Type.INT32, Type.INT64):
            number = int(value) if not isinstance(value, str) else int(value.strip())
            bits = {Type.INT8: 8, Type.INT16: 16, Type.INT32: 32, Type.INT64: 64}[target]
            return (number + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))  # Java's narrowing
        if target in (Type.FLOAT32, Type.FLOAT64):
            return float(value)
        if target is Type.BOOLEAN:
            if isinstance(value, str):
                return value.strip().lower() == "true"
            return bool(value)
        if target is Type.STRING:
            if isinstance(value, (bytes, bytearray)):
                return base64.b64encode(bytes(value)).decode()
            if isinstance(value, datetime.datetime):
                return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"
            return java_string(value)
    except (ValueError, TypeError, decimal.InvalidOperation):
        pass
    raise DataException(f"Unexpected type in Cast transformation: {type(value).__name__}")


class Cast(KeyOrValue):
    def config(self) -> ConfigDef:
        return ConfigDef([ConfigKey("spec", "LIST", importance="HIGH",
                                    documentation="field:type pairs, or one type for the whole value.",
                                    validator=lambda name, value: _parse_spec(name, value)),
                          ConfigKey("replace.null.with.default", "BOOLEAN", True, "MEDIUM",
                                    "Whether a null field is replaced by its schema's default.")])

    def configure(self, props: Mapping[str, Any]) -> None:
        parsed = self.config().parse(props)
        self.casts = _parse_spec("spec", parsed["spec"])
        self.whole = self.casts.get(WHOLE_VALUE)
        self.replace_null_with_default = parsed["replace.null.with.default"]
        self._schema_cache: dict = {}

    def _cast_schema(self, schema: Schema, target: Type) -> Schema:
        builder = SchemaBuilder(target)
        if schema.optional:
            builder.optional()
        if schema.default is not None:
            builder.default_value(cast_value(schema.default, target))
        return builder.build()

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if self.whole is not None:
            new_schema = self._cast_schema(schema, self.whole) if schema is not None else None
            return self.new_record(record, new_schema, cast_value(value, self.whole))
        if value is None:
            return record
        if schema is None:
            original = require_map(value, PURPOSE)
            return self.new_record(record, None, {name: cast_value(item, self.casts[name]) if name in self.casts
                                                  else item for name, item in original.items()})
        struct = require_struct(value, PURPOSE)
        updated_schema = self._schema_cache.get(struct.schema)
        if updated_schema is None:
            builder = copy_schema_basics(struct.schema, SchemaBuilder.struct())
            for field in struct.schema.fields:
                target = self.casts.get(field.name)
                if target is not None and not field.schema.type.is_primitive:
                    raise DataException("Cast transformation does not support casting to/from "
                                        + field.schema.type.name)
                builder.field(field.name, self._cast_schema(field.schema, target) if target else field.schema)
            updated_schema = self._schema_cache[struct.schema] = builder.build()
        updated = Struct(updated_schema)
        for field in struct.schema.fields:
            item = struct.get(field.name) if self.replace_null_with_default else \
                struct.get_without_default(field.name)
            target = self.casts.get(field.name)
            updated.put(field.name, cast_value(item, target) if target else item)
        return self.new_record(record, updated_schema, updated)
