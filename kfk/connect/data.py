"""Connect's data model (org.apache.kafka.connect.data): schemas, structs and the logical types, as Python values.

A value's Python type follows its schema type: INT8..INT64 int, FLOAT32/FLOAT64 float, BOOLEAN bool, STRING str,
BYTES bytes, ARRAY list, MAP dict, STRUCT Struct. The logical types are Kafka's (same names, so converters and
other workers read them): Decimal (BYTES, `scale` parameter, a decimal.Decimal), Date (INT32 days, a datetime.date),
Time (INT32 milliseconds of the day, a datetime.time) and Timestamp (INT64 milliseconds, a UTC datetime).
Schemaless data (schema None) uses the same Python values without a schema, as Kafka's Java maps and lists.
"""

from __future__ import annotations

import datetime
import decimal
import enum
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from kfk.common.java_numbers import java_double
from kfk.connect.errors import DataException


class Type(enum.Enum):
    """Schema.Type; the values are the names JsonConverter writes in a schema's "type"."""
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    BOOLEAN = "boolean"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    MAP = "map"
    STRUCT = "struct"

    @property
    def is_primitive(self) -> bool:
        return self not in (Type.ARRAY, Type.MAP, Type.STRUCT)


INTEGER_RANGES = {Type.INT8: 8, Type.INT16: 16, Type.INT32: 32, Type.INT64: 64}


@dataclass(frozen=True)
class Field:
    """One field of a STRUCT schema: its name, position and schema."""
    name: str
    index: int
    schema: Schema


class Schema:
    """An immutable schema (Kafka's ConnectSchema). Build one with SchemaBuilder, or use the constants below."""

    __slots__ = ("type", "optional", "default", "name", "version", "doc", "parameters", "key_schema", "value_schema",
                 "_fields", "_by_name")

    def __init__(self, type: Type, optional: bool = False, default: Any = None, name: str | None = None,
                 version: int | None = None, doc: str | None = None, parameters: Mapping[str, str] | None = None,
                 fields: Iterable[Field] | None = None, key_schema: Schema | None = None,
                 value_schema: Schema | None = None) -> None:
        self.type = type
        self.optional = optional
        self.default = default
        self.name = name
        self.version = version
        self.doc = doc
        self.parameters = dict(parameters) if parameters is not None else None
        self.key_schema = key_schema
        self.value_schema = value_schema
        self._fields = tuple(fields) if type is Type.STRUCT else None
        self._by_name = {field.name: field for field in self._fields} if self._fields is not None else None

    @property
    def fields(self) -> tuple[Field, ...]:
        if self._fields is None:
            raise DataException("Cannot list fields on non-struct type")
        return self._fields

    def field(self, name: str) -> Field | None:
        if self._by_name is None:
            raise DataException("Cannot look up fields on non-struct type")
        return self._by_name.get(name)

    def _key(self) -> tuple:
        return (self.type, self.optional, _hashable(self.default), self.name, self.version, self.doc,
                tuple(sorted(self.parameters.items())) if self.parameters else self.parameters, self._fields,
                self.key_schema, self.value_schema)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Schema) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash((self.type, self.name, self.optional))

    def __repr__(self) -> str:
        return f"Schema{{{self.name + ':' if self.name else ''}{self.type.name}}}"


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((key, _hashable(item)) for key, item in value.items()))
    if isinstance(value, list):
        return tuple(_hashable(item) for item in value)
    return value


class SchemaBuilder:
    """Kafka's fluent SchemaBuilder: `SchemaBuilder.struct().name("x").field("a", STRING_SCHEMA).build()`."""

    def __init__(self, type: Type) -> None:
        self.type = type
        self._optional = False
        self._default: Any = None
        self._name: str | None = None
        self._version: int | None = None
        self._doc: str | None = None
        self._parameters: dict[str, str] | None = None
        self._fields: dict[str, Field] = {}
        self._key_schema: Schema | None = None
        self._value_schema: Schema | None = None

    @classmethod
    def struct(cls) -> SchemaBuilder:
        return cls(Type.STRUCT)

    @classmethod
    def array(cls, value_schema: Schema) -> SchemaBuilder:
        builder = cls(Type.ARRAY)
        builder._value_schema = value_schema
        return builder

    @classmethod
    def map(cls, key_schema: Schema, value_schema: Schema) -> SchemaBuilder:
        builder = cls(Type.MAP)
        builder._key_schema, builder._value_schema = key_schema, value_schema
        return builder

    @classmethod
    def of(cls, schema: Schema) -> SchemaBuilder:
        """A builder holding everything of `schema` (Kafka's SchemaUtil.copySchemaBasics, plus the fields)."""
        builder = cls(schema.type)
        builder._name, builder._version, builder._doc = schema.name, schema.version, schema.doc
        builder._parameters = dict(schema.parameters) if schema.parameters else None
        builder._key_schema, builder._value_schema = schema.key_schema, schema.value_schema
        return builder

    def optional(self) -> SchemaBuilder:
        self._optional = True
        return self

    def required(self) -> SchemaBuilder:
        self._optional = False
        return self

    def default_value(self, value: Any) -> SchemaBuilder:
        validate_value(self.build_unchecked(), value)
        self._default = value
        return self

    def name(self, name: str | None) -> SchemaBuilder:
        self._name = name
        return self

    def version(self, version: int | None) -> SchemaBuilder:
        self._version = version
        return self

    def doc(self, doc: str | None) -> SchemaBuilder:
        self._doc = doc
        return self

    def parameter(self, name: str, value: str) -> SchemaBuilder:
        self._parameters = {**(self._parameters or {}), name: value}
        return self

    def parameters(self, parameters: Mapping[str, str]) -> SchemaBuilder:
        self._parameters = {**(self._parameters or {}), **parameters}
        return self

    def field(self, name: str, schema: Schema) -> SchemaBuilder:
        if self.type is not Type.STRUCT:
            raise DataException("Cannot create fields on type " + self.type.name)
        if not name:
            raise DataException("fieldName cannot be null.")
        if name in self._fields:
            raise DataException(f"Cannot create field because of field name duplication {name}")
        self._fields[name] = Field(name, len(self._fields), schema)
        return self

    def build_unchecked(self) -> Schema:
        return Schema(self.type, self._optional, self._default, self._name, self._version, self._doc,
                      self._parameters, self._fields.values(), self._key_schema, self._value_schema)

    def build(self) -> Schema:
        return self.build_unchecked()


def _primitive(type: Type, optional: bool = False) -> Schema:
    return Schema(type, optional)


INT8_SCHEMA, OPTIONAL_INT8_SCHEMA = _primitive(Type.INT8), _primitive(Type.INT8, True)
INT16_SCHEMA, OPTIONAL_INT16_SCHEMA = _primitive(Type.INT16), _primitive(Type.INT16, True)
INT32_SCHEMA, OPTIONAL_INT32_SCHEMA = _primitive(Type.INT32), _primitive(Type.INT32, True)
INT64_SCHEMA, OPTIONAL_INT64_SCHEMA = _primitive(Type.INT64), _primitive(Type.INT64, True)
FLOAT32_SCHEMA, OPTIONAL_FLOAT32_SCHEMA = _primitive(Type.FLOAT32), _primitive(Type.FLOAT32, True)
FLOAT64_SCHEMA, OPTIONAL_FLOAT64_SCHEMA = _primitive(Type.FLOAT64), _primitive(Type.FLOAT64, True)
BOOLEAN_SCHEMA, OPTIONAL_BOOLEAN_SCHEMA = _primitive(Type.BOOLEAN), _primitive(Type.BOOLEAN, True)
STRING_SCHEMA, OPTIONAL_STRING_SCHEMA = _primitive(Type.STRING), _primitive(Type.STRING, True)
BYTES_SCHEMA, OPTIONAL_BYTES_SCHEMA = _primitive(Type.BYTES), _primitive(Type.BYTES, True)


# --- logical types (their names are Kafka's Java class names, written into schemas on the wire) ---------------------

DECIMAL_LOGICAL_NAME = "org.apache.kafka.connect.data.Decimal"
DECIMAL_SCALE_PARAMETER = "scale"
DATE_LOGICAL_NAME = "org.apache.kafka.connect.data.Date"
TIME_LOGICAL_NAME = "org.apache.kafka.connect.data.Time"
TIMESTAMP_LOGICAL_NAME = "org.apache.kafka.connect.data.Timestamp"
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
MILLIS_PER_DAY = 86_400_000


def decimal_schema(scale: int) -> SchemaBuilder:
    builder = SchemaBuilder(Type.BYTES).name(DECIMAL_LOGICAL_NAME).version(1)
    return builder.parameter(DECIMAL_SCALE_PARAMETER, str(scale))


def date_schema() -> SchemaBuilder:
    return SchemaBuilder(Type.INT32).name(DATE_LOGICAL_NAME).version(1)


def time_schema() -> SchemaBuilder:
    return SchemaBuilder(Type.INT32).name(TIME_LOGICAL_NAME).version(1)


def timestamp_schema() -> SchemaBuilder:
    return SchemaBuilder(Type.INT64).name(TIMESTAMP_LOGICAL_NAME).version(1)


DATE_SCHEMA = date_schema().build()
TIME_SCHEMA = time_schema().build()
TIMESTAMP_SCHEMA = timestamp_schema().build()
OPTIONAL_TIMESTAMP_SCHEMA = timestamp_schema().optional().build()


def decimal_to_bytes(schema: Schema, value: decimal.Decimal) -> bytes:
    """Decimal.fromLogical: the unscaled value, big-endian two's complement in the fewest bytes."""
    scale = int((schema.parameters or {})[DECIMAL_SCALE_PARAMETER])
    unscaled = int(value.scaleb(scale).to_integral_value())
    if value.as_tuple().exponent != -scale and value.scaleb(scale) != unscaled:
        raise DataException(f"Decimal value has mismatching scale for given Decimal schema: {value}")
    length = max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1)
    return unscaled.to_bytes(length, "big", signed=True)


def decimal_from_bytes(schema: Schema, value: bytes) -> decimal.Decimal:
    scale = int((schema.parameters or {})[DECIMAL_SCALE_PARAMETER])
    return decimal.Decimal(int.from_bytes(value, "big", signed=True)).scaleb(-scale)


def date_to_days(value: datetime.date) -> int:
    return (value - datetime.date(1970, 1, 1)).days


def days_to_date(days: int) -> datetime.date:
    return datetime.date(1970, 1, 1) + datetime.timedelta(days=days)


def time_to_millis(value: datetime.time) -> int:
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000


def millis_to_time(millis: int) -> datetime.time:
    if not 0 <= millis < MILLIS_PER_DAY:
        raise DataException("Time values must use number of milliseconds greater than 0 and less than 86400000")
    return (datetime.datetime.min + datetime.timedelta(milliseconds=millis)).time()


def timestamp_to_millis(value: datetime.datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    delta = value - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def millis_to_timestamp(millis: int) -> datetime.datetime:
    return EPOCH + datetime.timedelta(milliseconds=millis)


LOGICAL_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    DECIMAL_LOGICAL_NAME: (decimal.Decimal,),
    DATE_LOGICAL_NAME: (datetime.date,),
    TIME_LOGICAL_NAME: (datetime.time,),
    TIMESTAMP_LOGICAL_NAME: (datetime.datetime,),
}
PYTHON_TYPES: dict[Type, tuple[type, ...]] = {
    Type.INT8: (int,), Type.INT16: (int,), Type.INT32: (int,), Type.INT64: (int,),
    Type.FLOAT32: (float, int), Type.FLOAT64: (float, int), Type.BOOLEAN: (bool,), Type.STRING: (str,),
    Type.BYTES: (bytes, bytearray, memoryview), Type.ARRAY: (list, tuple), Type.MAP: (dict,),
}


def validate_value(schema: Schema, value: Any, field_name: str | None = None) -> None:
    """Kafka's ConnectSchema.validateValue: DataException if `value` does not fit `schema`."""
    where = f' for field: "{field_name}"' if field_name else ""
    if value is None:
        if not schema.optional and schema.default is None:
            raise DataException(f"Invalid value: null used for required field{where}, schema type: {schema.type.name}")
        return
    logical = LOGICAL_PYTHON_TYPES.get(schema.name or "")
    if logical is not None:
        if not isinstance(value, logical):
            raise DataException(f"Invalid Python object for schema \"{schema.name}\" with type {schema.type.name}: "
                                f"{type(value).__name__}{where}")
        return
    if schema.type is Type.STRUCT:
        if not isinstance(value, Struct) or value.schema != schema:
            raise DataException("Struct schemas do not match.")
        value.validate()
        return
    expected = PYTHON_TYPES[schema.type]
    if not isinstance(value, expected) or (isinstance(value, bool) and schema.type in INTEGER_RANGES):
        raise DataException(f"Invalid Python object for schema with type {schema.type.name}: "
                            f"{type(value).__name__}{where}")
    bits = INTEGER_RANGES.get(schema.type)
    if bits is not None and not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
        raise DataException(f"Invalid value {value} for schema with type {schema.type.name}{where}")
    if schema.type is Type.ARRAY:
        for item in value:
            validate_value(schema.value_schema, item)
    elif schema.type is Type.MAP:
        for key, item in value.items():
            validate_value(schema.key_schema, key)
            validate_value(schema.value_schema, item)


class Struct:
    """A STRUCT value (Kafka's Struct): values by field, checked against the schema as they are put."""

    __slots__ = ("schema", "_values")

    def __init__(self, schema: Schema) -> None:
        if schema.type is not Type.STRUCT:
            raise DataException("Not a struct schema: " + repr(schema))
        self.schema = schema
        self._values: list[Any] = [None] * len(schema.fields)

    def _lookup(self, name: str) -> Field:
        field = self.schema.field(name)
        if field is None:
            raise DataException(f"{name} is not a valid field name")
        return field

    def put(self, name: str, value: Any) -> Struct:
        field = self._lookup(name)
        validate_value(field.schema, value, name)
        self._values[field.index] = value
        return self

    def get(self, name: str | Field) -> Any:
        field = name if isinstance(name, Field) else self._lookup(name)
        value = self._values[field.index]
        return field.schema.default if value is None else value

    def get_without_default(self, name: str) -> Any:
        return self._values[self._lookup(name).index]

    def validate(self) -> None:
        for field in self.schema.fields:
            validate_value(field.schema, self._values[field.index], field.name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Struct) and self.schema == other.schema and self._values == other._values

    def __hash__(self) -> int:
        return hash(tuple(map(_hashable, self._values)))

    def __repr__(self) -> str:
        """As Java's Struct.toString: the fields that are set, each value as Java prints it (what FileStreamSink
        writes of a struct)."""
        inner = ",".join(f"{field.name}={java_text(self._values[field.index])}" for field in self.schema.fields
                         if self._values[field.index] is not None)
        return f"Struct{{{inner}}}"


def java_text(value: Any) -> str:
    """String.valueOf of a Connect value: true/false, doubles as Java prints them, lists as "[a, b]", maps as
    "{k=v}", null as "null"."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(java_text, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{java_text(key)}={java_text(item)}" for key, item in value.items()) + "}"
    if isinstance(value, (bytes, bytearray)):
        return repr(bytes(value))
    return str(value)
