"""MaskField$Key / $Value: replace `fields` by their type's empty value (0, false, "", ...) or `replacement`."""

from __future__ import annotations

import datetime
import decimal
from typing import Any, Mapping

from kfk.connect.config_def import ConfigDef, ConfigException, ConfigKey
from kfk.connect.data import EPOCH, Struct, Type
from kfk.connect.errors import DataException
from kfk.connect.records import ConnectRecord
from kfk.connect.transforms.base import KeyOrValue, require_map, require_struct

PURPOSE = "mask fields"
EMPTY_BY_TYPE = {Type.BOOLEAN: False, Type.INT8: 0, Type.INT16: 0, Type.INT32: 0, Type.INT64: 0,
                 Type.FLOAT32: 0.0, Type.FLOAT64: 0.0, Type.STRING: "", Type.BYTES: b"", Type.ARRAY: [],
                 Type.MAP: {}}


def _non_empty_list(name: str, value: Any) -> None:
    if not value:
        raise ConfigException(f"Invalid value {','.join(value or [])} for configuration {name}: Empty list")


def _empty_like(value: Any) -> Any:
    for kind, empty in ((bool, False), (int, 0), (float, 0.0), (str, ""), (bytes, b""), (list, []), (dict, {}),
                        (decimal.Decimal, decimal.Decimal(0))):
        if isinstance(value, kind):
            return empty
    if isinstance(value, datetime.datetime):
        return EPOCH
    raise DataException(f"Cannot mask value of type: {type(value).__name__}")


class MaskField(KeyOrValue):
    def config(self) -> ConfigDef:
        return ConfigDef([ConfigKey("fields", "LIST", importance="HIGH", documentation="Names of fields to mask.",
                                    validator=_non_empty_list),
                          ConfigKey("replacement", "STRING", None, "LOW", "Custom value for the masked fields."),
                          ConfigKey("replace.null.with.default", "BOOLEAN", True, "MEDIUM",
                                    "Whether a null field is replaced by its schema's default.")])

    def configure(self, props: Mapping[str, Any]) -> None:
        parsed = self.config().parse(props)
        self.fields = set(parsed["fields"])
        self.replacement = parsed["replacement"]
        self.replace_null_with_default = parsed["replace.null.with.default"]

    def _masked(self, value: Any) -> Any:
        if value is None:
            return None
        if self.replacement is None:
            return _empty_like(value)
        if isinstance(value, (list, dict)):
            raise DataException(f"Cannot mask value of type {type(value).__name__} with custom replacement.")
        try:
            if isinstance(value, bool):
                return self.replacement.strip().lower() == "true"
            if isinstance(value, (int, float, decimal.Decimal)):
                return type(value)(self.replacement)
        except (ValueError, decimal.InvalidOperation):
            raise DataException(f"Unable to convert {self.replacement} ({type(self.replacement).__name__}) "
                                f"to number") from None
        if isinstance(value, str):
            return self.replacement
        raise DataException(f"Cannot mask value of type {type(value).__name__} with custom replacement.")

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        if value is None:
            return record
        schema = self.operating_schema(record)
        if schema is None:
            original = require_map(value, PURPOSE)
            return self.new_record(record, None, {name: self._masked(item) if name in self.fields else item
                                                  for name, item in original.items()})
        struct = require_struct(value, PURPOSE)
        updated = Struct(struct.schema)
        for field in struct.schema.fields:
            item = struct.get(field.name) if self.replace_null_with_default else \
                struct.get_without_default(field.name)
            if field.name in self.fields and item is not None:
                item = self._masked(item) if field.schema.type not in EMPTY_BY_TYPE or self.replacement else \
                    EMPTY_BY_TYPE[field.schema.type]
            updated.put(field.name, item)
        return self.new_record(record, struct.schema, updated)
