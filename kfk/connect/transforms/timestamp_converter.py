"""TimestampConverter$Key / $Value: convert a timestamp (the whole value, or `field`) between string (with a Java
SimpleDateFormat `format`), unix (epoch in `unix.precision`), Date, Time and Timestamp, in UTC as Kafka does."""

from __future__ import annotations

import datetime
import re
from typing import Any, Mapping

from kfk.connect.config_def import ConfigDef, ConfigException, ConfigKey, one_of
from kfk.connect.data import (
    DATE_LOGICAL_NAME,
    INT64_SCHEMA,
    MILLIS_PER_DAY,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    TIME_LOGICAL_NAME,
    TIMESTAMP_LOGICAL_NAME,
    Schema,
    SchemaBuilder,
    Struct,
    date_schema,
    millis_to_time,
    millis_to_timestamp,
    time_schema,
    time_to_millis,
    timestamp_schema,
    timestamp_to_millis,
)
from kfk.connect.errors import DataException
from kfk.connect.records import ConnectRecord
from kfk.connect.transforms.base import KeyOrValue, copy_schema_basics, require_map, require_struct

PURPOSE = "converting timestamp formats"
TARGET_TYPES = ("string", "unix", "Date", "Time", "Timestamp")
PRECISIONS = {"seconds": 1_000, "milliseconds": 1, "microseconds": 1 / 1_000, "nanoseconds": 1 / 1_000_000}
UTC = datetime.timezone.utc
_PATTERN_TOKEN = re.compile(r"'([^']*)'|([A-Za-z])\2*|.", re.S)


class SimpleDateFormat:
    """The common letters of Java's SimpleDateFormat (y M d H h m s S a E Z X z and 'quoted' text), in UTC."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.tokens = [(match.group(1), match.group(0)) for match in _PATTERN_TOKEN.finditer(pattern)]
        for literal, token in self.tokens:
            if literal is None and token[0].isalpha() and token[0] not in "yMdHhmsSaEZXzD":
                raise ConfigException(f"TimestampConverter requires a SimpleDateFormat-compatible pattern for string "
                                      f"timestamps: {pattern}")

    def format(self, moment: datetime.datetime) -> str:
        out = []
        for literal, token in self.tokens:
            if literal is not None:
                out.append(literal if literal else "'")
                continue
            letter, width = token[0], len(token)
            if not letter.isalpha():
                out.append(token)
            elif letter == "y":
                out.append(f"{moment.year % 100:02d}" if width == 2 else f"{moment.year:0{width}d}")
            elif letter == "M":
                out.append(moment.strftime("%B") if width >= 4 else moment.strftime("%b") if width == 3
                           else f"{moment.month:0{width}d}")
            elif letter == "d":
                out.append(f"{moment.day:0{width}d}")
            elif letter == "D":
                out.append(f"{moment.timetuple().tm_yday:0{width}d}")
            elif letter == "H":
                out.append(f"{moment.hour:0{width}d}")
            elif letter == "h":
                out.append(f"{(moment.hour % 12) or 12:0{width}d}")
            elif letter == "m":
                out.append(f"{moment.minute:0{width}d}")
            elif letter == "s":
                out.append(f"{moment.second:0{width}d}")
            elif letter == "S":
                out.append(f"{moment.microsecond // 1000:0{width}d}")
            elif letter == "a":
                out.append("AM" if moment.hour < 12 else "PM")
            elif letter == "E":
                out.append(moment.strftime("%A") if width >= 4 else moment.strftime("%a"))
            elif letter == "Z":
                out.append("+0000")
            elif letter == "X":
                out.append("Z")
            elif letter == "z":
                out.append("UTC")
        return "".join(out)

    def parse(self, text: str) -> datetime.datetime:
        regex, groups = [], []
        for literal, token in self.tokens:
            if literal is not None:
                regex.append(re.escape(literal or "'"))
            elif not token[0].isalpha():
                regex.append(re.escape(token))
            elif token[0] in "aEzZX":
                regex.append(r"(?:AM|PM|[A-Za-z]+|[+-]\d{2}:?\d{2}|Z)")
            else:
                groups.append(token[0])
                regex.append(r"(\d+)")
        match = re.fullmatch("".join(regex), text)
        if match is None:
            raise DataException(f"Could not parse timestamp: value ({text}) does not match pattern ({self.pattern})")
        fields = {"y": 1970, "M": 1, "d": 1, "H": 0, "h": 0, "m": 0, "s": 0, "S": 0, "D": None}
        for letter, value in zip(groups, match.groups()):
            fields[letter] = int(value)
        moment = datetime.datetime(fields["y"], fields["M"], fields["d"], fields["H"] or fields["h"], fields["m"],
                                   fields["s"], fields["S"] * 1000, tzinfo=UTC)
        if fields["D"] is not None:
            moment = moment.replace(month=1, day=1) + datetime.timedelta(days=fields["D"] - 1)
        return moment


class TimestampConverter(KeyOrValue):
    def config(self) -> ConfigDef:
        return ConfigDef([
            ConfigKey("field", "STRING", "", "HIGH", "The field holding the timestamp, or empty for the whole value."),
            ConfigKey("target.type", "STRING", importance="HIGH", documentation="The desired timestamp type.",
                      validator=one_of(*TARGET_TYPES)),
            ConfigKey("format", "STRING", "", "MEDIUM", "A SimpleDateFormat pattern for string timestamps."),
            ConfigKey("unix.precision", "STRING", "milliseconds", "LOW", "The precision of unix timestamps.",
                      validator=one_of(*PRECISIONS)),
            ConfigKey("replace.null.with.default", "BOOLEAN", True, "MEDIUM",
                      "Whether a null field is replaced by its schema's default."),
        ])

    def configure(self, props: Mapping[str, Any]) -> None:
        parsed = self.config().parse(props)
        self.field = parsed["field"]
        self.target = parsed["target.type"]
        self.format = SimpleDateFormat(parsed["format"]) if parsed["format"] else None
        if self.target == "string" and self.format is None:
            raise ConfigException("TimestampConverter requires format option to be specified when using string "
                                  "timestamps")
        self.precision = PRECISIONS[parsed["unix.precision"]]
        self.replace_null_with_default = parsed["replace.null.with.default"]

    # raw form: milliseconds since the epoch
    def _to_millis(self, value: Any, schema: Schema | None) -> int:
        name = schema.name if schema is not None else None
        if isinstance(value, datetime.datetime) or name == TIMESTAMP_LOGICAL_NAME:
            return timestamp_to_millis(value)
        if isinstance(value, datetime.date) or name == DATE_LOGICAL_NAME:
            return timestamp_to_millis(datetime.datetime(value.year, value.month, value.day, tzinfo=UTC))
        if isinstance(value, datetime.time) or name == TIME_LOGICAL_NAME:
            return time_to_millis(value)
        if isinstance(value, str):
            if self.format is None:
                raise DataException("TimestampConverter requires format option to be specified when using string "
                                    "timestamps")
            return timestamp_to_millis(self.format.parse(value))
        if isinstance(value, int) and not isinstance(value, bool):
            return int(value * self.precision)
        raise DataException(f"Expected timestamp to be a Long, String, or Date, but found {type(value).__name__}")

    def _from_millis(self, millis: int) -> Any:
        if self.target == "string":
            return self.format.format(millis_to_timestamp(millis))
        if self.target == "unix":
            return int(millis // self.precision) if self.precision >= 1 else int(millis / self.precision)
        if self.target == "Date":
            return millis_to_timestamp(millis - millis % MILLIS_PER_DAY).date()
        if self.target == "Time":
            return millis_to_time(millis % MILLIS_PER_DAY)
        return millis_to_timestamp(millis)

    def _target_schema(self, optional: bool) -> Schema:
        if self.target == "string":
            return OPTIONAL_STRING_SCHEMA if optional else STRING_SCHEMA
        if self.target == "unix":
            return OPTIONAL_INT64_SCHEMA if optional else INT64_SCHEMA
        builder = {"Date": date_schema, "Time": time_schema, "Timestamp": timestamp_schema}[self.target]()
        return builder.optional().build() if optional else builder.build()

    def _convert(self, value: Any, schema: Schema | None) -> Any:
        return None if value is None else self._from_millis(self._to_millis(value, schema))

    def apply(self, record: ConnectRecord) -> ConnectRecord | None:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if not self.field:
            new_schema = self._target_schema(schema.optional) if schema is not None else None
            return self.new_record(record, new_schema, self._convert(value, schema))
        if value is None:
            return record
        if schema is None:
            updated = dict(require_map(value, PURPOSE))
            updated[self.field] = self._convert(updated.get(self.field), None)
            return self.new_record(record, None, updated)
        struct = require_struct(value, PURPOSE)
        builder = copy_schema_basics(struct.schema, SchemaBuilder.struct())
        for field in struct.schema.fields:
            builder.field(field.name, self._target_schema(field.schema.optional) if field.name == self.field
                          else field.schema)
        updated_schema = builder.build()
        updated = Struct(updated_schema)
        for field in struct.schema.fields:
            item = struct.get(field.name) if self.replace_null_with_default else \
                struct.get_without_default(field.name)
            updated.put(field.name, self._convert(item, field.schema) if field.name == self.field else item)
        return self.new_record(record, updated_schema, updated)


