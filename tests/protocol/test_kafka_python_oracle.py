"""kafka-python's codec as an independent oracle: messages kfk encodes decode in kafka-python to the same field
values, and messages kafka-python encodes decode in kfk to the same message, byte for byte the same wire.

kafka-python 3.x also reads Kafka's JSON schemas (a newer Kafka than kfk's copy: it may know extra tagged fields
and higher versions), so the fields are matched by their JSON name over the versions both sides define. Its own
conventions are converted at the boundary: authorized-operations fields become sets of bit positions (None for
the "not requested" value), a zero UUID may come back as None.
"""

from __future__ import annotations

import importlib
import io
import inspect
import pkgutil
import uuid
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

with warnings.catch_warnings():  # kafka-python reads its schemas with a deprecated importlib API
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.protocol
    from kafka.protocol.api_data import ApiData
    from kafka.protocol.api_message import ApiMessage
    from kafka.protocol.schemas.fields.codecs import BitField

from kfk.protocol.headers import RequestHeader, decode_request, decode_response, encode_request, encode_response
from kfk.protocol.schema import Field, MessageSpec, Struct, snake_case

from .strategies import message_class, message_strategy, schema_default, specs, versions_of

ORACLE_SETTINGS = settings(
    max_examples=5, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# The APIs the oracle must cover (issue 2); every other API kafka-python implements is checked as well.
REQUIRED = {"ApiVersions", "Metadata", "Produce", "Fetch", "ListOffsets", "FindCoordinator", "JoinGroup", "SyncGroup",
            "Heartbeat", "OffsetCommit", "OffsetFetch", "CreateTopics"}
NOT_REQUESTED = -(2**31)  # authorized operations "not requested": kafka-python's None


def kafka_python_classes() -> dict[str, type]:
    found = {}
    for info in pkgutil.walk_packages(kafka.protocol.__path__, "kafka.protocol."):
        with warnings.catch_warnings():  # kafka-python reads its schemas with a deprecated importlib API
            warnings.simplefilter("ignore", DeprecationWarning)
            module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (inspect.isclass(value) and issubclass(value, (ApiMessage, ApiData))
                    and value not in (ApiMessage, ApiData) and getattr(value, "_json", None) is not None):
                found[name] = value
    return found


KP_CLASSES = kafka_python_classes()


def common_versions(spec: MessageSpec, kp_cls: type) -> list[int]:
    low, high = kp_cls._valid_versions
    return [v for v in versions_of(spec) if low <= v <= high]


CASES = [
    (name, version)
    for name, spec in sorted(specs().items())
    if name in KP_CLASSES
    for version in common_versions(spec, KP_CLASSES[name])
]


def kfk_field(kp_field, struct: Struct) -> Field | None:
    """The kfk field a kafka-python field stands for (matched by JSON name; kafka-python renames a few)."""
    for f in struct.fields:
        if f.name == kp_field._name or f.attribute == snake_case(kp_field._name):
            return f
    if kp_field._name == "authorized_operations":  # kafka-python's json_patch rename
        return next(f for f in struct.fields if f.attribute.endswith("authorized_operations"))
    if kp_field._name == "GenerationId":  # TxnOffsetCommit's, GenerationIdOrMemberEpoch since Kafka 4.1
        return next((f for f in struct.fields if f.attribute == "generation_id_or_member_epoch"), None)
    return None


def is_bitfield(kp_field) -> bool:
    return kp_field._type_str == "bitfield"


def to_kafka_python(value: Any, kp_struct, spec: MessageSpec, struct: Struct, version: int, kfk_cls: type,
                    cls: type | None = None) -> Any:
    """A kafka-python object with the field values of the kfk struct `value`."""
    kwargs = {}
    for kp_field in kp_struct._fields:
        if not kp_field.for_version_q(version):
            continue
        f = kfk_field(kp_field, struct)
        if f is None:
            continue  # a field of kafka-python's newer schema: it keeps its default
        field_value = getattr(value, f.attribute)
        if f.tagged_at(version) and field_value == schema_default(f, kfk_cls, spec):
            continue  # absent: kafka-python writes every tagged field it is given, even at its default
        kwargs[kp_field.name] = convert_out(field_value, kp_field, f, spec, version, kfk_cls)
    return (cls or kp_struct.data_class)(version=version, **kwargs)


def convert_out(value: Any, kp_field, f: Field, spec: MessageSpec, version: int, kfk_cls: type) -> Any:
    if value is None:
        return None
    if f.is_struct:
        inner = kp_field.array_of if f.is_array else kp_field
        if f.is_array:
            return [to_kafka_python(item, inner, spec, f.struct, version, kfk_cls) for item in value]
        return to_kafka_python(value, inner, spec, f.struct, version, kfk_cls)
    if is_bitfield(kp_field):
        return None if value == NOT_REQUESTED else BitField.from_32_bit_field(value & 0xFFFFFFFF)
    return value


def to_kfk(kp_value: Any, kfk_cls: type, spec: MessageSpec, struct: Struct, version: int, kp_struct) -> Any:
    """The kfk struct with the field values of a kafka-python object; fields kfk's version lacks get defaults."""
    by_attribute = {}
    for kp_field in kp_struct._fields:
        f = kfk_field(kp_field, struct)
        if f is not None:
            by_attribute[f.attribute] = kp_field
    kwargs = {}
    for f in struct.fields:
        if version not in f.versions:
            kwargs[f.attribute] = schema_default(f, kfk_cls, spec)
            continue
        kp_field = by_attribute[f.attribute]
        kwargs[f.attribute] = convert_in(getattr(kp_value, kp_field.name), kp_field, f, kfk_cls, spec, version)
    cls = kfk_cls if struct is spec.struct else getattr(kfk_cls, struct.name)
    return cls(**kwargs)


def convert_in(value: Any, kp_field, f: Field, kfk_cls: type, spec: MessageSpec, version: int) -> Any:
    if is_bitfield(kp_field):
        if value is None:
            return NOT_REQUESTED
        bits = sum(1 << bit for bit in value)
        return bits - 2**32 if bits >= 2**31 else bits
    if value is None and not f.nullable_at(version):
        if f.type == "uuid":
            return uuid.UUID(int=0)
        if f.is_struct and not f.is_array and f.tagged_at(version):
            return schema_default(f, kfk_cls, spec)  # kafka-python reads an absent tagged struct as None
    if value is None:
        return None
    if f.is_struct:
        inner = kp_field.array_of if f.is_array else kp_field
        if f.is_array:
            return [to_kfk(item, kfk_cls, spec, f.struct, version, inner) for item in value]
        return to_kfk(value, kfk_cls, spec, f.struct, version, inner)
    if f.type in ("bytes", "records"):
        return bytes(value)
    if f.type == "uuid" and not isinstance(value, uuid.UUID):
        return uuid.UUID(str(value))
    return value


def kafka_python_encode(kp_obj: Any, kp_cls: type, version: int) -> bytes:
    if issubclass(kp_cls, ApiMessage):
        return bytes(kp_obj.encode(version=version))
    return bytes(kp_obj.encode(version=version, header=False))  # no int16 version prefix: kfk writes the body only


def kafka_python_decode(data: bytes, kp_cls: type, version: int) -> Any:
    if issubclass(kp_cls, ApiMessage):
        return kp_cls.decode(data, version=version)
    return kp_cls.decode(io.BytesIO(data), version=version, header=False)


def oracle_strategy(name: str, version: int):
    strategy = message_strategy(name, version)
    if name == "ApiVersionsResponse":
        # kafka-python reads any ApiVersionsResponse with a non-zero error code as v0 (KIP-511 fallback).
        def no_error(message):
            message.error_code = 0
            return message

        strategy = strategy.map(no_error)
    return strategy


def test_cases_cover_the_required_apis() -> None:
    names = {name for name, _ in CASES}
    for api in REQUIRED:
        assert {api + "Request", api + "Response"} <= names, api
        versions = {v for name, v in CASES if name == api + "Request"}
        assert len(versions) >= 3, (api, versions)
    assert {"ConsumerProtocolSubscription", "ConsumerProtocolAssignment"} <= names


@pytest.mark.parametrize(("name", "version"), CASES, ids=[f"{n}-v{v}" for n, v in CASES])
def test_kfk_and_kafka_python_agree(name: str, version: int) -> None:
    spec = specs()[name]
    cls = message_class(spec)
    kp_cls = KP_CLASSES[name]

    @ORACLE_SETTINGS
    @given(oracle_strategy(name, version))
    def check(message) -> None:
        wire = message.encode(version)
        # kfk encodes, kafka-python decodes: same fields.
        kp_decoded = kafka_python_decode(wire, kp_cls, version)
        assert to_kfk(kp_decoded, cls, spec, spec.struct, version, kp_cls._struct).to_dict() == message.to_dict()
        # kafka-python encodes, kfk decodes: same message, and the same bytes kfk writes.
        kp_message = to_kafka_python(message, kp_cls._struct, spec, spec.struct, version, cls, kp_cls)
        kp_wire = kafka_python_encode(kp_message, kp_cls, version)
        assert cls.decode(kp_wire, version).to_dict() == message.to_dict()
        assert kp_wire == wire

    check()


FRAME_CASES = [("ApiVersions", 0), ("ApiVersions", 3), ("Metadata", 1), ("Metadata", 12), ("Produce", 3),
               ("Produce", 9), ("Fetch", 4), ("Fetch", 12), ("JoinGroup", 5), ("JoinGroup", 6), ("OffsetFetch", 8)]


@pytest.mark.parametrize(("api", "version"), FRAME_CASES, ids=[f"{a}-v{v}" for a, v in FRAME_CASES])
def test_whole_frames_with_headers(api: str, version: int) -> None:
    """Size prefix, request header v1/v2 and response header v0/v1 (ApiVersions always v0) agree as well."""
    request_spec, response_spec = specs()[api + "Request"], specs()[api + "Response"]
    request_cls, response_cls = message_class(request_spec), message_class(response_spec)
    kp_request_cls, kp_response_cls = KP_CLASSES[api + "Request"], KP_CLASSES[api + "Response"]

    @ORACLE_SETTINGS
    @given(oracle_strategy(api + "Request", version), oracle_strategy(api + "Response", version))
    def check(request, response) -> None:
        header = RequestHeader(request_api_key=request_cls.API_KEY, request_api_version=version,
                               correlation_id=77, client_id="oracle-client")
        frame = encode_request(header, request)
        kp_request = to_kafka_python(request, kp_request_cls._struct, request_spec, request_spec.struct, version,
                                     request_cls, kp_request_cls)
        kp_request.with_header(correlation_id=77, client_id="oracle-client")
        assert bytes(kp_request.encode(header=True, framed=True)) == frame
        assert decode_request(frame[4:]) == (header, request)

        chunks = encode_response(77, response_cls.API_KEY, version, response)
        kp_response = to_kafka_python(response, kp_response_cls._struct, response_spec, response_spec.struct, version,
                                      response_cls, kp_response_cls)
        kp_response.with_header(correlation_id=77)
        # (no version= here: kafka-python 3.0.12 then sets request_api_version on the response header and fails)
        kp_frame = bytes(kp_response.encode(header=True, framed=True))
        assert kp_frame == b"".join(chunks)
        assert decode_response(kp_frame[4:], response_cls.API_KEY, version) == (77, response)
        decoded = kp_response_cls.decode(kp_frame, version=version, header=True, framed=True)
        assert decoded.header.correlation_id == 77

    check()
