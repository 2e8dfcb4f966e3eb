"""ReplaceField$Key / $Value: keep (`include`), drop (`exclude`) and rename (`renames=old:new,...`) fields."""

from __future__ import annotations

from typing import Any, Mapping

from kfk.connect.config_def import ConfigDef, ConfigException, ConfigKey
from kfk.connect.data import SchemaBuilder, Struct
from kfk.connect.records import ConnectRecord
from kfk.connect.transforms.base import KeyOrValue, copy_schema_basics, require_map, require_struct

PURPOSE = "field replacement"


def _renames(name: str, value: Any) -> None:
    for pair in value or []:
        if len(pair.split(":")) != 2:
            raise ConfigException(f"Invalid value {','.join(value)} for configuration {name}: "
                                  "Invalid rename mapping: " + pair)


class ReplaceField(KeyOrValue):
    def config(self) -> ConfigDef:
        return ConfigDef([ConfigKey("exclude", "LIST", [], "MEDIUM", "Fields to drop."),
                          ConfigKey("include", "LIST", [], "MEDIUM", "Fields to keep (all when empty)."),
                          ConfigKey("renames", "LIST", [], "MEDIUM", "Renames, as old:new pairs.",
                                    validator=_renames),
                          ConfigKey("replace.null.with.default", "BOOLEAN", True, "MEDIUM",
                                    "Whether a null field is replaced by its schema's default.")])

    def configure(self, props: Mapping[str, Any]) -> None:
        parsed = self.config().parse(props)
        self.exclude = set(parsed["exclude"])
        self.include = set(parsed["include"])
        self.renames = dict(pair.split(":") for pair in parsed["renames"])
        self.replace_null_with_default = parsed["replace.null.with.default"]
        self._schema_cache: dict = {}

    def _kept(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            return self.new_record(record, None, {self.renames.get(name, name): item
                                                  for name, item in require_map(value, PURPOSE).items()
                                                  if self._kept(name)})
        struct = require_struct(value, PURPOSE)
        updated_schema = self._schema_cache.get(struct.schema)
        if updated_schema is None:
            builder = copy_schema_basics(struct.schema, SchemaBuilder.struct())
            for field in struct.schema.fields:
                if self._kept(field.name):
                    builder.field(self.renames.get(field.name, field.name), field.schema)
            updated_schema = self._schema_cache[struct.schema] = builder.build()
        updated = Struct(updated_schema)
        for field in struct.schema.fields:
            if self._kept(field.name):
                item = struct.get(field.name) if self.replace_null_with_default else \
                    struct.get_without_default(field.name)
                updated.put(self.renames.get(field.name, field.name), item)
        return self.new_record(record, updated_schema, updated)
