"""Config changes: IncrementalAlterConfigs and the legacy AlterConfigs (Kafka's ConfigurationControlManager).

A topic's overrides live in the image as ConfigResourceType.TOPIC entries, written as ConfigRecords (a null value
removes an override). Both APIs compute the topic's new override set, validate the whole set on top of the broker's
defaults (BrokerConfig.log_config: unknown names and bad values fail with INVALID_CONFIG and the validator's
message), and write one ConfigRecord per key that changes.
- IncrementalAlterConfigs applies operations: SET, DELETE, and for LIST keys APPEND (add the values not yet
  present) and SUBTRACT (remove them), starting from the key's effective value.
- AlterConfigs replaces the whole set: keys left out lose their override.
Broker resources are accepted for the local broker id, a registered broker's id or "" (the cluster default). Their
new dynamic set (the keys DYNAMIC_BROKER_CONFIGS and the replication throttles) is checked as Kafka's
DynamicBrokerConfig does (config.validate_dynamic_broker_configs: read-only keys, per-broker keys at the default,
bad values), every failure answered with INVALID_REQUEST as Kafka does, then written as ConfigRecords of resource
type BROKER (the ZooKeeper backend writes /config/brokers/<id> or /config/brokers/<default>). Each broker applies
them when its image changes (kfk/server/dynamic_config.py). A group's configs are overrides like a topic's, checked
by kfk/group_config.py (the group need not exist, as in Kafka); on ZooKeeper, which has no place for them in
Kafka, they are refused as Kafka 3.x's ZooKeeper brokers did. Other resource types get Kafka's "Unexpected
resource type".

With eligible leader replicas on (KIP-966), min.insync.replicas decides who is eligible, so Kafka keeps it
cluster-wide: turning ELR on writes the cluster default from the static config when none is set and removes
per-broker values (`elr_safety_records`), per-broker values are refused and the cluster default may not be removed
(Kafka's INVALID_CONFIG messages), and any change of it clears the ELRs it judged (ClearElrRecord for the topic, or
for all).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Mapping

from kfk.common.config_types import ConfigResourceType
from kfk.config import BROKER_CONFIG_DEF, LOG_CONFIG_DEF, BrokerConfig, ConfigType, validate_dynamic_broker_configs
from kfk.controller.partition_change import elr_enabled
from kfk.controller.result import NONE, ApiError, ControllerResult
from kfk.errors import ErrorCode, InvalidConfigurationError, InvalidTopicError
from kfk.group_config import GROUP_CONFIG_DEF, group_config_value, validate_group_configs
from kfk.metadata.image import MetadataImage
from kfk.metadata.topic_names import validate_topic_name
from kfk.protocol.message import Message
from kfk.protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from kfk.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kfk.protocol.metadata_records import schema_class

ConfigRecord = schema_class("ConfigRecord")
ClearElrRecord = schema_class("ClearElrRecord")
MIN_INSYNC_REPLICAS = "min.insync.replicas"


class OpType(IntEnum):
    """AlterConfigOp.OpType: the config_operation of IncrementalAlterConfigs."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


def validate_topic_configs(config: BrokerConfig, overrides: Mapping[str, str | None]) -> None:
    """Raise InvalidConfigurationError (Kafka's message) unless `overrides` is a valid set of topic overrides."""
    null_keys = [name for name, value in overrides.items() if value is None]
    if null_keys:
        raise InvalidConfigurationError(f"Null value not supported for topic configs: {','.join(null_keys)}")
    config.log_config(overrides)


def validate_group_overrides(config: BrokerConfig, overrides: Mapping[str, str | None]) -> None:
    """Raise InvalidConfigurationError (Kafka's message) unless `overrides` is a valid set of group configs."""
    null_keys = [name for name, value in overrides.items() if value is None]
    if null_keys:
        raise InvalidConfigurationError(f"Null value not supported for group configs: {','.join(null_keys)}")
    validate_group_configs(config, overrides)


#: The resources whose configs are a set of overrides checked as a whole: topics and groups.
_OVERRIDE_VALIDATORS = {ConfigResourceType.TOPIC: validate_topic_configs,
                        ConfigResourceType.GROUP: validate_group_overrides}


def config_records(resource_type: ConfigResourceType, name: str, current: Mapping[str, str],
                   new: Mapping[str, str]) -> list[Message]:
    """The ConfigRecords that turn `current` into `new`: changed or added keys, then removed keys (value null)."""
    records: list[Message] = [
        ConfigRecord(resource_type=resource_type, resource_name=name, name=key, value=value)
        for key, value in new.items() if current.get(key) != value
    ]
    records.extend(ConfigRecord(resource_type=resource_type, resource_name=name, name=key, value=None)
                   for key in current if key not in new)
    return records


def _check_resource(image: MetadataImage, resource_type: int, name: str, node_id: int, kraft: bool) -> ApiError:
    if resource_type == ConfigResourceType.TOPIC:
        if not name:
            return ApiError(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
        try:
            validate_topic_name(name)
        except InvalidTopicError as error:
            return ApiError.from_exception(error)
        if image.topic(name) is None:
            return ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        return NONE
    if resource_type == ConfigResourceType.GROUP and kraft:  # group configs are KRaft's, as in Kafka
        return ApiError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.") if not name else NONE
    if resource_type == ConfigResourceType.BROKER:
        if name:
            try:
                broker_id = int(name, 10)
            except ValueError:
                return ApiError(ErrorCode.INVALID_REQUEST, "Unable to parse broker name as a base 10 number.")
            if broker_id != node_id and broker_id not in image.brokers:
                return ApiError(ErrorCode.INVALID_REQUEST,
                                f"Unexpected broker id, expected {node_id} or empty string, but received {name}")
        return NONE
    known = {member.value: member for member in ConfigResourceType if member != ConfigResourceType.UNKNOWN}
    if resource_type in known:
        return ApiError(ErrorCode.INVALID_REQUEST, f"Unexpected resource type {known[resource_type].name}.")
    return ApiError(ErrorCode.UNSUPPORTED_VERSION, f"Unknown resource type {resource_type}.")


def _duplicates(resources: list) -> set[tuple[int, str]]:
    seen: set[tuple[int, str]] = set()
    duplicates: set[tuple[int, str]] = set()
    for resource in resources:
        key = (resource.resource_type, resource.resource_name)
        (duplicates if key in seen else seen).add(key)
    return duplicates


def _list_values(config: BrokerConfig, current: Mapping[str, str], key: str) -> list[str]:
    """The effective value of a LIST key, as a list (the override, else the broker's default)."""
    value = config.log_config(current).to_properties()[key]
    return [item for item in value.split(",") if item] if value else []


class _InvalidRequest(Exception):
    """An operation code Kafka does not define (INVALID_REQUEST, unlike config errors)."""


def _apply_operations(config: BrokerConfig, current: Mapping[str, str],
                      operations: list[IncrementalAlterConfigsRequest.AlterableConfig],
                      resource_type: ConfigResourceType = ConfigResourceType.TOPIC) -> dict[str, str]:
    """A topic's or a group's overrides after the operations; APPEND and SUBTRACT start from the key's effective
    value."""
    kind, definitions = ("group", GROUP_CONFIG_DEF) if resource_type == ConfigResourceType.GROUP \
        else ("topic", LOG_CONFIG_DEF)
    new = dict(current)
    for operation in operations:
        key, value = operation.name, operation.value
        if operation.config_operation == OpType.SET:
            if value is None:
                raise InvalidConfigurationError(f"Null value not supported for {kind} configs: {key}")
            new[key] = value
        elif operation.config_operation == OpType.DELETE:
            new.pop(key, None)
        elif operation.config_operation in (OpType.APPEND, OpType.SUBTRACT):
            op = OpType(operation.config_operation).name
            definition = definitions.keys.get(key)
            if definition is None:
                raise InvalidConfigurationError(f"Unknown {kind} config name: {key}")
            if definition.type is not ConfigType.LIST:
                raise InvalidConfigurationError(f"Can't {op} to key {key} because its type is not LIST.")
            start = _list_values(config, new, key) if resource_type == ConfigResourceType.TOPIC else \
                group_config_value(config, new, key)
            new[key] = _append_or_subtract(start, value, operation.config_operation == OpType.APPEND)
        else:
            raise _InvalidRequest(f"Unknown operation type {operation.config_operation}")
    return new


def _split_list(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def _append_or_subtract(values: list[str], value: str | None, append: bool) -> str:
    """A LIST config after APPEND (the items not there yet, in order) or SUBTRACT (every occurrence removed)."""
    items = _split_list(value)
    if not append:
        return ",".join(item for item in values if item not in items)
    result = list(values)
    result.extend(item for item in items if item not in result)
    return ",".join(result)


def _apply_broker_operations(current: Mapping[str, str],
                             operations: list[IncrementalAlterConfigsRequest.AlterableConfig]) -> dict[str, str]:
    """A broker's dynamic set after the operations; APPEND and SUBTRACT start from the dynamic value, else the
    key's default (Kafka's prepareIncrementalConfigs)."""
    new = dict(current)
    for operation in operations:
        key, value = operation.name, operation.value
        if operation.config_operation == OpType.SET:
            new[key] = value
        elif operation.config_operation == OpType.DELETE:
            new.pop(key, None)
        elif operation.config_operation in (OpType.APPEND, OpType.SUBTRACT):
            definition = BROKER_CONFIG_DEF.keys.get(key)
            if definition is None or definition.type is not ConfigType.LIST:
                raise InvalidConfigurationError(f"Can't {OpType(operation.config_operation).name} to key {key} "
                                                "because its type is not LIST.")
            start = new.get(key, ",".join(definition.default or []))
            new[key] = _append_or_subtract(_split_list(start), value, operation.config_operation == OpType.APPEND)
        else:
            raise _InvalidRequest(f"Unknown operation type {operation.config_operation}")
    return new


def _broker_records(image: MetadataImage, name: str, new: dict[str, str]) -> tuple[ApiError, list[Message]]:
    """The ConfigRecords that make `new` the dynamic set of broker `name` ("" for the default), or Kafka's
    INVALID_REQUEST when it may not be set at run time."""
    null_keys = [key for key, value in new.items() if value is None]
    if null_keys:
        return ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {', '.join(null_keys)}"), []
    try:
        validate_dynamic_broker_configs(new, per_broker=bool(name))
    except InvalidConfigurationError as error:
        return ApiError(ErrorCode.INVALID_REQUEST, str(error)), []
    current = image.config(ConfigResourceType.BROKER, name)
    if elr_enabled(image) and current.get(MIN_INSYNC_REPLICAS) != new.get(MIN_INSYNC_REPLICAS):
        if name:
            return ApiError(ErrorCode.INVALID_CONFIG, "Broker-level min.insync.replicas cannot be altered while ELR "
                                                      "is enabled."), []
        if MIN_INSYNC_REPLICAS not in new:
            return ApiError(ErrorCode.INVALID_CONFIG, "Cluster-level min.insync.replicas cannot be removed while ELR "
                                                      "is enabled."), []
    return NONE, config_records(ConfigResourceType.BROKER, name, current, new)


def elr_safety_records(image: MetadataImage, static_min_insync_replicas: int) -> list[Message]:
    """What turning eligible leader replicas on writes (Kafka's maybeGenerateElrSafetyRecords): the cluster-wide
    min.insync.replicas from the static config unless one is set, and the removal of every per-broker one."""
    records: list[Message] = []
    if MIN_INSYNC_REPLICAS not in image.config(ConfigResourceType.BROKER, ""):
        records.append(ConfigRecord(resource_type=ConfigResourceType.BROKER, resource_name="",
                                    name=MIN_INSYNC_REPLICAS, value=str(static_min_insync_replicas)))
    for broker in image.config_resource_names(ConfigResourceType.BROKER):
        if broker and MIN_INSYNC_REPLICAS in image.config(ConfigResourceType.BROKER, broker):
            records.append(ConfigRecord(resource_type=ConfigResourceType.BROKER, resource_name=broker,
                                        name=MIN_INSYNC_REPLICAS, value=None))
    return records


def clear_elr_records(image: MetadataImage, records: list[Message]) -> list[Message]:
    """A ClearElrRecord for each min.insync.replicas change among `records` while ELR is on: the topic's, or every
    topic's for the cluster default (Kafka's createClearElrRecordsAsNeeded)."""
    if not elr_enabled(image):
        return []
    return [ClearElrRecord(topic_name=record.resource_name if record.resource_type == ConfigResourceType.TOPIC
                           else "")
            for record in records if record.NAME == "ConfigRecord" and record.name == MIN_INSYNC_REPLICAS]


def incremental_alter_configs(image: MetadataImage, request: IncrementalAlterConfigsRequest, config: BrokerConfig,
                              node_id: int, kraft: bool = True) -> ControllerResult[IncrementalAlterConfigsResponse]:
    Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
    duplicates = _duplicates(request.resources)
    responses, records = [], []
    for resource in request.resources:
        names = [operation.name for operation in resource.configs]
        if (resource.resource_type, resource.resource_name) in duplicates:
            error = ApiError(ErrorCode.INVALID_REQUEST, "Duplicate resource.")
        elif len(set(names)) != len(names):
            error = ApiError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
        else:
            error = _check_resource(image, resource.resource_type, resource.resource_name, node_id, kraft)
        if not error.is_failure and resource.resource_type == ConfigResourceType.BROKER:
            current = image.config(ConfigResourceType.BROKER, resource.resource_name)
            try:
                error, changes = _broker_records(image, resource.resource_name,
                                                 _apply_broker_operations(current, resource.configs))
            except InvalidConfigurationError as exception:
                error = ApiError.from_exception(exception)
            except _InvalidRequest as exception:
                error = ApiError(ErrorCode.INVALID_REQUEST, str(exception))
            else:
                records.extend(changes)
        if not error.is_failure and resource.resource_type in _OVERRIDE_VALIDATORS:
            resource_type = ConfigResourceType(resource.resource_type)
            current = image.config(resource_type, resource.resource_name)
            try:
                new = _apply_operations(config, current, resource.configs, resource_type)
                _OVERRIDE_VALIDATORS[resource_type](config, new)
            except InvalidConfigurationError as exception:
                error = ApiError.from_exception(exception)
            except _InvalidRequest as exception:
                error = ApiError(ErrorCode.INVALID_REQUEST, str(exception))
            else:
                records.extend(config_records(resource_type, resource.resource_name, current, new))
        responses.append(Result(error_code=error.error_code, error_message=error.message,
                                resource_type=resource.resource_type, resource_name=resource.resource_name))
    return ControllerResult(IncrementalAlterConfigsResponse(responses=responses),
                            [] if request.validate_only else records + clear_elr_records(image, records))


def legacy_alter_configs(image: MetadataImage, request: AlterConfigsRequest, config: BrokerConfig,
                         node_id: int, kraft: bool = True) -> ControllerResult[AlterConfigsResponse]:
    Result = AlterConfigsResponse.AlterConfigsResourceResponse
    duplicates = _duplicates(request.resources)
    responses, records = [], []
    for resource in request.resources:
        if (resource.resource_type, resource.resource_name) in duplicates:
            error = ApiError(ErrorCode.INVALID_REQUEST, "Duplicate resource.")
        else:
            error = _check_resource(image, resource.resource_type, resource.resource_name, node_id, kraft)
        if not error.is_failure and resource.resource_type == ConfigResourceType.BROKER:
            error, changes = _broker_records(image, resource.resource_name,
                                             {entry.name: entry.value for entry in resource.configs})
            records.extend(changes)
        if not error.is_failure and resource.resource_type in _OVERRIDE_VALIDATORS:
            resource_type = ConfigResourceType(resource.resource_type)
            current = image.config(resource_type, resource.resource_name)
            new = {entry.name: entry.value for entry in resource.configs}
            try:
                _OVERRIDE_VALIDATORS[resource_type](config, new)
            except InvalidConfigurationError as exception:
                error = ApiError.from_exception(exception)
            else:
                records.extend(config_records(resource_type, resource.resource_name, current, new))
        responses.append(Result(error_code=error.error_code, error_message=error.message,
                                resource_type=resource.resource_type, resource_name=resource.resource_name))
    return ControllerResult(AlterConfigsResponse(responses=responses),
                            [] if request.validate_only else records + clear_elr_records(image, records))
