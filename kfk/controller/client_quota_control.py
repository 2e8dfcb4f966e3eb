"""Client quotas: AlterClientQuotas and DescribeClientQuotas (Kafka's ClientQuotaControlManager and
ClientQuotasImage.describe).

AlterClientQuotas validates each entity (known types user / client-id / ip, no empty names, ip never combined with
the others), then each key against the entity's keys (kfk.common.client_quotas: unknown keys, values <= 0 and
fractions of LONG/INT keys are INVALID_REQUEST with Kafka's messages), and writes one ClientQuotaRecord per key whose
value changes (remove=True for a removal of a key that is set). An entity that fails writes nothing; the others do.
validate_only drops the records. The ZooKeeper backend turns the records into /config/users and /config/clients.

DescribeClientQuotas filters the image's entities by components: MATCH_TYPE_EXACT (a name), MATCH_TYPE_DEFAULT (the
<default> entity of that type) and MATCH_TYPE_SPECIFIED (any entity with that type); `strict` also requires the
entity to have no other types. A bad filter is answered with the request-level error Kafka gives.
"""

from __future__ import annotations

import ipaddress
import socket

from kfk.common.client_quotas import (
    CLIENT_ID,
    ENTITY_TYPES,
    IP,
    IP_QUOTA_KEYS,
    USER,
    USER_CLIENT_QUOTA_KEYS,
    ClientQuotaEntity,
    QuotaValueType,
)
from kfk.controller.result import NONE, ApiError, ControllerResult
from kfk.errors import ErrorCode, InvalidRequestError, UnsupportedVersionError
from kfk.metadata.client_quotas import record_entity
from kfk.metadata.image import MetadataImage
from kfk.protocol.message import Message
from kfk.protocol.messages.alter_client_quotas import AlterClientQuotasRequest, AlterClientQuotasResponse
from kfk.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest, DescribeClientQuotasResponse
from kfk.protocol.metadata_records import schema_class

ClientQuotaRecord = schema_class("ClientQuotaRecord")

#: DescribeClientQuotas component match types.
MATCH_TYPE_EXACT = 0
MATCH_TYPE_DEFAULT = 1
MATCH_TYPE_SPECIFIED = 2

_LIMITS = {QuotaValueType.INT: (2**31 - 1, "an INT"), QuotaValueType.LONG: (2**63 - 1, "a LONG")}


def _entity_error(entry: AlterClientQuotasRequest.EntryData) -> ApiError:
    if not entry.entity:
        return ApiError(ErrorCode.INVALID_REQUEST, "Invalid empty client quota entity")
    seen: set[str] = set()
    for part in entry.entity:
        if part.entity_type in seen:
            return ApiError(ErrorCode.INVALID_REQUEST,
                            f"Invalid client quota entity, duplicate entity entry {part.entity_type}")
        seen.add(part.entity_type)
        if part.entity_type not in ENTITY_TYPES:
            return ApiError(ErrorCode.INVALID_REQUEST, f"Unhandled client quota entity type: {part.entity_type}")
        if part.entity_name == "":
            return ApiError(ErrorCode.INVALID_REQUEST, f"Empty {part.entity_type} not supported")
    return NONE


def _keys_for(entity: ClientQuotaEntity) -> tuple[ApiError, dict[str, QuotaValueType]]:
    parts = entity.as_dict()
    if IP in parts:
        if len(parts) > 1:
            return ApiError(ErrorCode.INVALID_REQUEST, "Invalid quota entity combination, IP entity should"
                                                       "not be combined with User or ClientId"), {}
        if not _resolvable(parts[IP]):
            return ApiError(ErrorCode.INVALID_REQUEST, f"{parts[IP]} is not a valid IP or resolvable host."), {}
        return NONE, IP_QUOTA_KEYS
    return NONE, USER_CLIENT_QUOTA_KEYS


def _resolvable(host: str | None) -> bool:
    if host is None:
        return True
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(host, None)
        return True
    except OSError:
        return False


def _value_error(keys: dict[str, QuotaValueType], key: str, value: float) -> ApiError:
    value_type = keys.get(key)
    if value_type is None:
        return ApiError(ErrorCode.INVALID_REQUEST, f"Invalid configuration key {key}")
    if value <= 0.0:
        return ApiError(ErrorCode.INVALID_REQUEST, f"Quota {key} must be greater than 0")
    if value_type is QuotaValueType.DOUBLE:
        return NONE
    limit, name = _LIMITS[value_type]
    if value > limit:
        return ApiError(ErrorCode.INVALID_REQUEST, f"Proposed value for {key} is too large for {name}.")
    if abs(value % 1.0) > 1e-6:
        return ApiError(ErrorCode.INVALID_REQUEST, f"{key} cannot be a fractional value.")
    return NONE


def _alter_entity(image: MetadataImage, entity: ClientQuotaEntity,
                  entry: AlterClientQuotasRequest.EntryData) -> tuple[ApiError, list[Message]]:
    error, keys = _keys_for(entity)
    if error.is_failure:
        return error, []
    current = image.client_quotas.get(entity, {})
    parts = [ClientQuotaRecord.EntityData(entity_type=kind, entity_name=name) for kind, name in entity.parts]
    records: list[Message] = []
    for op in entry.ops:
        if op.remove:
            if op.key in current:
                records.append(ClientQuotaRecord(entity=parts, key=op.key, remove=True))
            continue
        error = _value_error(keys, op.key, op.value)
        if error.is_failure:
            return error, []
        if current.get(op.key) != op.value:
            records.append(ClientQuotaRecord(entity=parts, key=op.key, value=op.value))
    return NONE, records


def _entry_result(entry: AlterClientQuotasRequest.EntryData, error: ApiError) -> AlterClientQuotasResponse.EntryData:
    Entity = AlterClientQuotasResponse.EntityData
    return AlterClientQuotasResponse.EntryData(
        error_code=error.error_code, error_message=error.message,
        entity=[Entity(entity_type=part.entity_type, entity_name=part.entity_name) for part in entry.entity])


def alter_client_quotas_error(request: AlterClientQuotasRequest, error: ApiError) -> AlterClientQuotasResponse:
    """The answer to a request refused as a whole (not the controller, not authorized): `error` for every entry."""
    return AlterClientQuotasResponse(entries=[_entry_result(entry, error) for entry in request.entries])


def alter_client_quotas(image: MetadataImage, request: AlterClientQuotasRequest
                        ) -> ControllerResult[AlterClientQuotasResponse]:
    responses, records = [], []
    seen: set[ClientQuotaEntity] = set()
    for entry in request.entries:
        entity = record_entity(entry)
        keys = [op.key for op in entry.ops]
        error = _entity_error(entry)
        if not error.is_failure and (entity in seen or len(set(keys)) != len(keys)):
            error = ApiError(ErrorCode.INVALID_REQUEST, f"Ignoring duplicate entity {entity}")
        seen.add(entity)
        if not error.is_failure:
            error, changes = _alter_entity(image, entity, entry)
            records.extend(changes)
        responses.append(_entry_result(entry, error))
    return ControllerResult(AlterClientQuotasResponse(entries=responses), [] if request.validate_only else records)


def _filter(components: list[DescribeClientQuotasRequest.ComponentData]
            ) -> tuple[dict[str, str | None], set[str]]:
    """(exact names by type, types that must merely be present); raises Kafka's errors for a bad filter."""
    exact: dict[str, str | None] = {}
    present: set[str] = set()
    for component in components:
        kind = component.entity_type
        if not kind:
            raise InvalidRequestError("Invalid empty entity type.")
        if kind in exact or kind in present:
            raise InvalidRequestError(f"Entity type {kind} cannot appear more than once in the filter.")
        if kind not in ENTITY_TYPES:
            raise UnsupportedVersionError(f"Unsupported entity type {kind}")
        if component.match_type == MATCH_TYPE_EXACT:
            if component.match is None:
                raise InvalidRequestError("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[kind] = component.match
        elif component.match_type == MATCH_TYPE_DEFAULT:
            if component.match is not None:
                raise InvalidRequestError("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
            exact[kind] = None
        elif component.match_type == MATCH_TYPE_SPECIFIED:
            if component.match is not None:
                raise InvalidRequestError("Request specified MATCH_TYPE_SPECIFIED, but also specified a match "
                                          "string.")
            present.add(kind)
        else:
            raise UnsupportedVersionError(f"Unknown match type {component.match_type}")
    if (IP in exact or IP in present) and ({USER, CLIENT_ID} & (set(exact) | present)):
        raise InvalidRequestError("Invalid entity filter component combination. IP filter component should not be "
                                  "used with user or clientId filter component.")
    return exact, present


def describe_client_quotas(image: MetadataImage, request: DescribeClientQuotasRequest
                           ) -> DescribeClientQuotasResponse:
    """The quotas of the entities the filter matches (raises InvalidRequestError / UnsupportedVersionError for a
    filter Kafka refuses: the handler answers with that error)."""
    exact, present = _filter(request.components)
    Entry = DescribeClientQuotasResponse.EntryData
    entries = []
    for entity, values in image.client_quotas.items():
        parts = entity.as_dict()
        if request.strict and len(parts) != len(exact) + len(present):
            continue
        if any(kind not in parts or parts[kind] != name for kind, name in exact.items()):
            continue
        if any(kind not in parts for kind in present):
            continue
        entries.append(Entry(
            entity=[DescribeClientQuotasResponse.EntityData(entity_type=kind, entity_name=name)
                    for kind, name in entity.parts],
            values=[DescribeClientQuotasResponse.ValueData(key=key, value=value)
                    for key, value in sorted(values.items())]))
    # Kafka answers a success with an empty message, not a null one.
    return DescribeClientQuotasResponse(error_code=ErrorCode.NONE, error_message="", entries=entries)
