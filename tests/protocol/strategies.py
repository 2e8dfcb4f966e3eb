"""Hypothesis strategies for every generated message, built from Kafka's JSON schemas (the same ones the generator
reads), so the tests and the codec agree on what a valid message is while sharing none of the codec's code.

A message drawn for version v holds:
- the schema default in every field the version lacks (Kafka refuses to send a non-default value there);
- None only where the field is nullable at v;
- for tagged fields, either the default (the field is left out of the tagged section) or a drawn value;
- strings short enough for an int16 length, integers within their wire type.
Defaults are worked out here from the schema text, not read from the generated classes, so a generator that got a
default wrong fails the round trip (the decoder fills absent fields with its own defaults).
"""

from __future__ import annotations

import functools
import uuid
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from kfk.protocol.messages import DATA_SCHEMAS, data_class, request_class, response_class
from kfk.protocol.schema import Field, MessageSpec, Struct, load_specs

ROOT = Path(__file__).resolve().parents[2]
SPEC_DIR = ROOT / "scripts" / "kafka-protocol" / "message"
REMOVED_VERSIONS = ROOT / "scripts" / "kafka-protocol" / "kip896"
ZERO_UUID = uuid.UUID(int=0)

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
}

# Small sizes keep a deep message (FetchResponse: topics > partitions > aborted transactions) cheap to draw.
MAX_ARRAY = 3
MAX_TEXT = 12  # characters; at most 4 bytes each in UTF-8, far below the int16 limit of classic strings
MAX_BYTES = 24


@functools.cache
def specs() -> dict[str, MessageSpec]:
    return {spec.name: spec for spec in load_specs(SPEC_DIR, REMOVED_VERSIONS)}


def message_class(spec: MessageSpec) -> type:
    if spec.type == "request":
        return request_class(spec.api_key)
    if spec.type == "response":
        return response_class(spec.api_key)
    return data_class(spec.name)


def api_specs() -> list[MessageSpec]:
    return [spec for spec in specs().values() if spec.type in ("request", "response")]


def data_specs() -> list[MessageSpec]:
    """Headers and data schemas that the generator writes a module for."""
    return [spec for spec in specs().values() if spec.name in DATA_SCHEMAS]


def versions_of(spec: MessageSpec) -> range:
    return range(spec.valid_versions.low, spec.valid_versions.high + 1)


def struct_class(message_cls: type, spec: MessageSpec, struct: Struct) -> type:
    """Nested structs are attributes of the top-level message class (ProduceRequest.TopicProduceData)."""
    return message_cls if struct is spec.struct else getattr(message_cls, struct.name)


def schema_default(field: Field, message_cls: type, spec: MessageSpec) -> Any:
    """The value Kafka's rules give a field the message does not carry, from the schema text."""
    raw = field.default
    if field.is_array:
        return None if raw == "null" else []
    if field.is_struct:
        return None if raw == "null" else default_struct(message_cls, spec, field.struct)
    kind = field.type
    if kind == "bool":
        return raw == "true"
    if kind in INT_RANGES:
        return int(raw, 0) if raw else 0
    if kind == "float64":
        return float(raw) if raw else 0.0
    if kind == "string":
        return None if raw == "null" else (raw or "")
    if kind == "bytes":
        return None if raw == "null" else b""
    if kind == "records":
        return None
    if kind == "uuid":
        return ZERO_UUID
    raise AssertionError(f"no default rule for {field.name}: {kind}")


def default_struct(message_cls: type, spec: MessageSpec, struct: Struct) -> Any:
    cls = struct_class(message_cls, spec, struct)
    return cls(**{f.attribute: schema_default(f, message_cls, spec) for f in struct.fields})


def _scalar(kind: str) -> st.SearchStrategy:
    if kind == "bool":
        return st.booleans()
    if kind in INT_RANGES:
        low, high = INT_RANGES[kind]
        return st.one_of(st.sampled_from([low, -1, 0, 1, high]).filter(lambda n: low <= n <= high),
                         st.integers(low, high))
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "string":
        return st.text(max_size=MAX_TEXT)
    if kind in ("bytes", "records"):
        return st.binary(max_size=MAX_BYTES)
    if kind == "uuid":
        return st.one_of(st.just(ZERO_UUID), st.uuids())
    raise AssertionError(kind)


def field_strategy(
    field: Field, version: int, flexible: bool, message_cls: type, spec: MessageSpec
) -> st.SearchStrategy:
    default = schema_default(field, message_cls, spec)
    if version not in field.versions:
        return st.just(default)
    if field.is_struct:
        element = struct_strategy(message_cls, spec, field.struct, version)
    else:
        element = _scalar(field.element_type)
    value = st.lists(element, max_size=MAX_ARRAY) if field.is_array else element
    if field.nullable_at(version):
        value = st.one_of(st.none(), value)
    if flexible and field.tagged_at(version):
        value = st.one_of(st.just(default), value)  # left out of the tagged section, or present
    return value


def struct_strategy(message_cls: type, spec: MessageSpec, struct: Struct, version: int) -> st.SearchStrategy:
    cls = struct_class(message_cls, spec, struct)
    flexible = spec.flexible_at(version)
    fields = {f.attribute: field_strategy(f, version, flexible, message_cls, spec) for f in struct.fields}
    return st.fixed_dictionaries(fields).map(lambda kwargs: cls(**kwargs))


@functools.cache
def message_strategy(name: str, version: int) -> st.SearchStrategy:
    """Valid messages of schema `name` (e.g. "ProduceRequest") at `version`."""
    spec = specs()[name]
    return struct_strategy(message_class(spec), spec, spec.struct, version)
