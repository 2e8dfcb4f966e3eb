"""Every API, every version, request and response, plus headers and data schemas: decode(encode(m)) == m and the
re-encoding is byte-identical, with field values drawn from the schemas (nulls, tagged fields present and absent)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import HealthCheck, given, settings

from kfk.errors import UnsupportedVersionError
from kfk.protocol.messages import API_SCHEMAS

from .strategies import api_specs, data_specs, message_class, message_strategy, schema_default, specs, versions_of

# A few examples per (schema, version) keep the ~700 cases fast; CI runs them on every commit, so coverage adds up.
ROUNDTRIP_SETTINGS = settings(
    max_examples=6,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

CASES = [(spec.name, version) for spec in api_specs() + data_specs() for version in versions_of(spec)]


def assert_round_trip(cls: type, message: object, version: int) -> None:
    wire = message.encode(version)
    decoded = cls.decode(wire, version)
    assert decoded == message
    assert decoded.encode(version) == wire
    # decode_from reports the end of the message and ignores what follows; a memoryview decodes the same.
    again, end = cls.decode_from(b"\x07" + wire + b"\x01\x02\x03", version, 1)
    assert end == len(wire) + 1
    assert again == message
    assert cls.decode(memoryview(wire), version) == message
    chunks: list = []
    message.encode_into(chunks, version)
    assert b"".join(chunks) == wire


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{name}-v{version}" for name, version in CASES])
def test_round_trip(name: str, version: int) -> None:
    spec = specs()[name]
    cls = message_class(spec)

    @ROUNDTRIP_SETTINGS
    @given(message_strategy(name, version))
    def check(message: object) -> None:
        assert_round_trip(cls, message, version)

    check()


def test_every_api_and_data_schema_is_covered() -> None:
    names = {name for name, _ in CASES}
    for schema in API_SCHEMAS.values():
        assert {schema.name + "Request", schema.name + "Response"} <= names
    assert {"RequestHeader", "ResponseHeader", "ConsumerProtocolSubscription", "ConsumerProtocolAssignment",
            "LeaderChangeMessage"} <= names
    assert {version for name, version in CASES if name == "RequestHeader"} == {0, 1, 2}
    assert {version for name, version in CASES if name == "ResponseHeader"} == {0, 1}


def test_all_defaults_encode_at_every_version() -> None:
    """A message built from schema defaults alone is valid at every version and decodes back to itself."""
    for name, version in CASES:
        spec = specs()[name]
        cls = message_class(spec)
        message = cls(**{f.attribute: schema_default(f, cls, spec) for f in spec.struct.fields})
        assert cls() == message, f"{name}: constructor defaults differ from the schema's"
        assert_round_trip(cls, message, version)


def scalar_paths(struct, path=()):
    """Every scalar field, with the chain of struct fields that leads to it (nested structs included)."""
    for f in struct.fields:
        if f.is_struct:
            yield from scalar_paths(f.struct, path + (f,))
        elif not f.is_array and f.type != "records":
            yield path, f


def non_default(f, default):
    if f.type == "uuid":
        return uuid.UUID(int=1)
    other = {"bool": not default, "string": "x", "bytes": b"x", "float64": 1.5}.get(f.type)
    return other if other is not None else (1 if default != 1 else 2)


def build(cls, spec, struct, path, leaf, value):
    """A struct at its defaults except along `path`, which holds one element down to `leaf` = `value`."""
    kwargs = {f.attribute: schema_default(f, cls, spec) for f in struct.fields}
    if path:
        child = build(cls, spec, path[0].struct, path[1:], leaf, value)
        kwargs[path[0].attribute] = [child] if path[0].is_array else child
    else:
        kwargs[leaf.attribute] = value
    return (cls if struct is spec.struct else getattr(cls, struct.name))(**kwargs)


def follow(message, path, leaf):
    for f in path:
        message = getattr(message, f.attribute)
        message = message[0] if f.is_array else message
    return getattr(message, leaf.attribute)


@pytest.mark.parametrize("name", sorted(spec.name for spec in api_specs() + data_specs()))
def test_fields_absent_from_a_version(name: str) -> None:
    """Kafka's rule, at any depth: a non-ignorable field holding a non-default value cannot be sent at a version
    that lacks it; an ignorable one is silently dropped, and the receiver sees the default."""
    spec = specs()[name]
    cls = message_class(spec)
    for path, f in scalar_paths(spec.struct):
        default = schema_default(f, cls, spec)
        message = build(cls, spec, spec.struct, path, f, non_default(f, default))
        for version in versions_of(spec):
            if version in f.versions or not all(version in p.versions for p in path):
                continue
            if f.ignorable:
                decoded = cls.decode(message.encode(version), version)
                assert follow(decoded, path, f) == default
            else:
                with pytest.raises(UnsupportedVersionError):
                    message.encode(version)
