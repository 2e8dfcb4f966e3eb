"""Config changes: IncrementalAlterConfigs and the legacy AlterConfigs (Kafka's ConfigurationControlManager).

A topic's overrides live in the image as ConfigResourceType.TOPIC entries, written as ConfigRecords (a null value
removes an override). Both APIs compute the topic's new override set, validate the whole set on top of the broker's
defaults (BrokerConfig.log_config: unknown names and bad values fail with INVALID_CONFIG and the validator's
message), and write one ConfigRecord per key that changes.
- IncrementalAlterConfigs applies operations: SET, DELETE, and for LIST keys APPEND (add the values not yet
  present) and SUBTRACT (remove them), starting from the key's effective value.
- AlterConfigs replaces the whole set: keys left out lose their override.
Broker resources are accepted for the local broker id, a registered broker's id or "" (the cluster default). The
only dynamic broker configs are the replication throttles that reassignments set (leader/follower.replication.
throttled.rate, bytes/s, with IncrementalAlterConfigs SET/DELETE); changing any other key answers what Kafka answers
for a key that is not dynamically updatable (INVALID_REQUEST, "Cannot update these configs dynamically"). Other
resource types get Kafka's "Unexpected resource type".
"""

from __future__ import annotations

from enum import IntEnum
from typing import Mapping

from kfk.common.config_types import ConfigResourceType
from kfk.config import LOG_CONFIG_DEF, BrokerConfig, ConfigType
from kfk.controller.result import NONE, ApiError, ControllerResult
from kfk.errors import ErrorCode, InvalidConfigurationError, InvalidTopicError
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

#: Broker configs that may change at run time (Kafka's DynamicConfig.Broker subset kfk implements).
DYNAMIC_BROKER_CONFIGS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")


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


def _check_resource(image: MetadataImage, resource_type: int, name: str, node_id: int,
                    config_names: list[str]) -> ApiError:
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
    if resource_type == ConfigResourceType.BROKER:
        if name:
            try:
                broker_id = int(name, 10)
            except ValueError:
                return ApiError(ErrorCode.INVALID_REQUEST, "Unable to parse broker name as a base 10 number.")
            if broker_id != node_id and broker_id not in image.brokers:
                return ApiError(ErrorCode.INVALID_REQUEST,
                                f"Unexpected broker id, expected {node_id} or empty string, but received {name}")
        config_names = [name for name in config_names if name not in DYNAMIC_BROKER_CONFIGS]
        if config_names:
            return ApiError(ErrorCode.INVALID_REQUEST,
                            f"Cannot update these configs dynamically: Set({', '.join(config_names)})")
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
                      operations: list[IncrementalAlterConfigsRequest.AlterableConfig]) -> dict[str, str]:
    new = dict(current)
    for operation in operations:
        key, value = operation.name, operation.value
        if operation.config_operation == OpType.SET:
            if value is None:
                raise InvalidConfigurationError(f"Null value not supported for topic configs: {key}")
            new[key] = value
        elif operation.config_operation == OpType.DELETE:
            new.pop(key, None)
        elif operation.config_operation in (OpType.APPEND, OpType.SUBTRACT):
            op = OpType(operation.config_operation).name
            definition = LOG_CONFIG_DEF.keys.get(key)
            if definition is None:
                raise InvalidConfigurationError(f"Unknown topic config name: {key}")
            if definition.type is not ConfigType.LIST:
                raise InvalidConfigurationError(f"Can't {op} to key {key} because its type is not LIST.")
            values = _list_values(config, new, key)
            items = [item.strip() for item in (value or "").split(",") if item.strip()]
            if operation.config_operation == OpType.APPEND:
                values.extend(item for item in items if item not in values)
            else:
                values = [item for item in values if item not in items]
            new[key] = ",".join(values)
        else:
            raise _InvalidRequest(f"Unknown operation type {operation.config_operation}")
    return new


def _apply_broker_operations(current: Mapping[str, str],
                             operations: list[IncrementalAlterConfigsRequest.AlterableConfig]) -> dict[str, str]:
    """SET or DELETE of the dynamic broker configs (throttle rates: a long >= 0)."""
    new = dict(current)
    for operation in operations:
        if operation.config_operation == OpType.DELETE:
            new.pop(operation.name, None)
            continue
        if operation.config_operation != OpType.SET:
            raise InvalidConfigurationError(f"Can't {OpType(operation.config_operation).name} to key "
                                            f"{operation.name} because its type is not LIST.")
        try:
            rate = int(operation.value or "")
        except ValueError:
            rate = -1
        if rate < 0:
            raise InvalidConfigurationError(f"Invalid value {operation.value} for configuration {operation.name}: "
                                            "Value must be at least 0")
        new[operation.name] = str(rate)
    return new


def incremental_alter_configs(image: MetadataImage, request: IncrementalAlterConfigsRequest, config: BrokerConfig,
                              node_id: int) -> ControllerResult[IncrementalAlterConfigsResponse]:
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
            error = _check_resource(image, resource.resource_type, resource.resource_name, node_id, names)
        if not error.is_failure and resource.resource_type == ConfigResourceType.BROKER:
            current = image.config(ConfigResourceType.BROKER, resource.resource_name)
            try:
                new = _apply_broker_operations(current, resource.configs)
            except InvalidConfigurationError as exception:
                error = ApiError.from_exception(exception)
            else:
                records.extend(config_records(ConfigResourceType.BROKER, resource.resource_name, current, new))
        if not error.is_failure and resource.resource_type == ConfigResourceType.TOPIC:
            current = image.config(ConfigResourceType.TOPIC, resource.resource_name)
            try:
                new = _apply_operations(config, current, resource.configs)
                validate_topic_configs(config, new)
            except InvalidConfigurationError as exception:
                error = ApiError.from_exception(exception)
            except _InvalidRequest as exception:
                error = ApiError(ErrorCode.INVALID_REQUEST, str(exception))
            else:
                records.extend(config_records(ConfigResourceType.TOPIC, resource.resource_name, current, new))
        responses.append(Result(error_code=error.error_code, error_message=error.message,
                                resource_type=resource.resource_type, resource_name=resource.resource_name))
    return ControllerResult(IncrementalAlterConfigsResponse(responses=responses),
                            [] if request.validate_only else records)


def legacy_alter_configs(image: MetadataImage, request: AlterConfigsRequest, config: BrokerConfig,
                         node_id: int) -> ControllerResult[AlterConfigsResponse]:
    Result = AlterConfigsResponse.AlterConfigsResourceResponse
    duplicates = _duplicates(request.resources)
    responses, records = [], []
    for resource in request.resources:
        names = [entry.name for entry in resource.configs]
        if (resource.resource_type, resource.resource_name) in duplicates:
            error = ApiError(ErrorCode.INVALID_REQUEST, "Duplicate resource.")
        else:
            error = _check_resource(image, resource.resource_type, resource.resource_name, node_id, names)
        if not error.is_failure and resource.resource_type == ConfigResourceType.BROKER:
            current = image.config(ConfigResourceType.BROKER, resource.resource_name)
            set_all = [IncrementalAlterConfigsRequest.AlterableConfig(name=entry.name, config_operation=OpType.SET,
                                                                      value=entry.value)
                       for entry in resource.configs]
            try:
                new = _apply_broker_operations({}, set_all)
            except InvalidConfigurationError as exception:
                error = ApiError.from_exception(exception)
            else:
                records.extend(config_records(ConfigResourceType.BROKER, resource.resource_name, current, new))
        if not error.is_failure and resource.resource_type == ConfigResourceType.TOPIC:
            current = image.config(ConfigResourceType.TOPIC, resource.resource_name)
            new = {entry.name: entry.value for entry in resource.configs}
            try:
                validate_topic_configs(config, new)
            except InvalidConfigurationError as exception:
                error = ApiError.from_exception(exception)
            else:
                records.extend(config_records(ConfigResourceType.TOPIC, resource.resource_name, current, new))
        responses.append(Result(error_code=error.error_code, error_message=error.message,
                                resource_type=resource.resource_type, resource_name=resource.resource_name))
    return ControllerResult(AlterConfigsResponse(responses=responses), [] if request.validate_only else records)
