"""ValueToKey: the record's key made of fields of its value (`fields`), e.g. a table row's id as the key of the
JDBC source's records, so that they are partitioned and compacted by row and a sink can upsert by key."""

from __future__ import annotations

from typing import Any, Mapping

from kfk.connect.config_def import ConfigDef, ConfigKey
from kfk.connect.data import SchemaBuilder, Struct
from kfk.connect.errors import DataException
from kfk.connect.records import ConnectRecord
from kfk.connect.transforms.base import Transformation, require_map, require_struct

PURPOSE = "copying fields from value to key"


class ValueToKey(Transformation):
    def config(self) -> ConfigDef:
        return ConfigDef([ConfigKey("fields", "LIST", importance="HIGH",
                                    documentation="The value's fields the key is made of."),
                          ConfigKey("replace.null.with.default", "BOOLEAN", True, "MEDIUM",
                                    "Whether a null field is replaced by its schema's default.")])

    def configure(self, props: Mapping[str, Any]) -> None:
        parsed = self.config().parse(props)
        self.fields: list[str] = parsed["fields"]
        self.replace_null_with_default: bool = parsed["replace.null.with.default"]
        self._schema_cache: dict = {}

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        if record.value_schema is None:
            value = require_map(record.value, PURPOSE)
            return record.new_record(key_schema=None, key={name: value.get(name) for name in self.fields})
        value = require_struct(record.value, PURPOSE)
        key_schema = self._schema_cache.get(value.schema)
        if key_schema is None:
            builder = SchemaBuilder.struct()
            for name in self.fields:
                field = value.schema.field(name)
                if field is None:
                    raise DataException("Field does not exist: " + name)
                builder.field(name, field.schema)
            key_schema = self._schema_cache[value.schema] = builder.build()
        key = Struct(key_schema)
        for name in self.fields:
            key.put(name, value.get(name) if self.replace_null_with_default else value.get_without_default(name))
        return record.new_record(key_schema=key_schema, key=key)
