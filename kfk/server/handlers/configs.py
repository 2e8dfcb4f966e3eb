"""Configs: DescribeConfigs (key 32) v0-v4, AlterConfigs (key 33) v0-v2, IncrementalAlterConfigs (key 44) v0-v1,
ListConfigResources (key 74) v0-v1.

DescribeConfigs answers every config of a topic or of this broker (kfk/controller/config_describer.py), or only
the keys asked for. v0 has is_default instead of config_source and no synonyms; v1 adds config_source and, when
include_synonyms is set, the synonyms; v2 changes nothing on the wire; v3 adds config_type and, with
include_documentation, each key's documentation; v4 is flexible. The two alter APIs go through the controller
(kfk/controller/config_control.py): AlterConfigs replaces a resource's whole override set, IncrementalAlterConfigs
applies SET/DELETE/APPEND/SUBTRACT; both honour validate_only. AlterConfigs v2 and IncrementalAlterConfigs v1 are
the flexible versions.

BROKER_LOGGER resources (this broker's log levels) are described and altered here, by the broker that receives the
request, never through the controller (kfk/server/broker_loggers.py), as in Kafka.

ListConfigResources (flexible; v0 was ListClientMetricsResources) names config resources. v0 names the
CLIENT_METRICS resources of the metadata image: kfk has no KIP-714 client telemetry and its controller refuses to
alter CLIENT_METRICS resources, so that list is empty unless the metadata log carries such ConfigRecords (written by
another controller). v1 (KIP-1142) names the resources of the types asked for, each with its type, or of every type
it knows when none is asked (a type it does not know: UNSUPPORTED_VERSION): groups with configs, client metrics
resources, the brokers reachable on the request's listener (as BROKER_LOGGER and as BROKER) and every topic, in
Kafka's order.
"""

from __future__ import annotations

from kfk.common.config_types import ConfigEntry, ConfigResourceType, ConfigSource
from kfk.config import BrokerConfig
from kfk.controller.config_describer import describe_resource
from kfk.controller.quorum_controller import QuorumController
from kfk.errors import ERROR_INFO, ErrorCode, InvalidRequestError, KafkaError
from kfk.metadata.cache import MetadataCache
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from kfk.protocol.messages.describe_configs import DescribeConfigsRequest, DescribeConfigsResponse
from kfk.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kfk.protocol.messages.list_config_resources import (
    ListConfigResourcesRequest,
    ListConfigResourcesResponse,
)
from kfk.server.broker_loggers import alter_loggers, check_node_id, describe_loggers
from kfk.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, AUTHORIZATION_FAILED, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext

Result = DescribeConfigsResponse.DescribeConfigsResult
AlterResult = AlterConfigsResponse.AlterConfigsResourceResponse
IncrementalResult = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
Entry = DescribeConfigsResponse.DescribeConfigsResourceResult
Synonym = DescribeConfigsResponse.DescribeConfigsSynonym


def _entry(entry: ConfigEntry, version: int, include_synonyms: bool, include_documentation: bool) -> Entry:
    return Entry(
        name=entry.name,
        value=entry.value,
        read_only=entry.is_read_only,
        is_default=version == 0 and entry.source == ConfigSource.DEFAULT_CONFIG,
        config_source=entry.source,
        is_sensitive=entry.is_sensitive,
        synonyms=[Synonym(name=s.name, value=s.value, source=s.source) for s in entry.synonyms]
        if include_synonyms and version >= 1 else [],
        config_type=entry.config_type,
        documentation=entry.documentation if include_documentation else None,
    )


#: The types ListConfigResources v1 lists, in the order Kafka lists them.
_LISTED_RESOURCE_TYPES = (ConfigResourceType.GROUP, ConfigResourceType.CLIENT_METRICS,
                          ConfigResourceType.BROKER_LOGGER, ConfigResourceType.BROKER, ConfigResourceType.TOPIC)

class ConfigsHandler:
    """`config` and `node_id` are this broker's, described when a client asks for the BROKER resource."""

    def __init__(self, metadata_cache: MetadataCache, controller: QuorumController, config: BrokerConfig,
                 node_id: int, auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.metadata_cache = metadata_cache
        self.auth = auth
        self.controller = controller
        self.config = config
        self.node_id = node_id

    def _refusal(self, context: RequestContext, operation: AclOperation, resource_type: int,
                 resource_name: str) -> ErrorCode:
        """NONE when the principal may do `operation` (DESCRIBE_CONFIGS, ALTER_CONFIGS) on a config resource: a
        topic's or a group's own ACLs, the cluster's for broker, logger and client-metrics configs."""
        if resource_type == ConfigResourceType.TOPIC:
            kind, name = ResourceType.TOPIC, resource_name
        elif resource_type == ConfigResourceType.GROUP:
            kind, name = ResourceType.GROUP, resource_name
        else:
            kind, name = ResourceType.CLUSTER, CLUSTER_NAME
        return ErrorCode.NONE if self.auth.authorize(context, operation, kind, name) else AUTHORIZATION_FAILED[kind]

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.DESCRIBE_CONFIGS, self.describe_configs)
        dispatcher.register(ApiKey.ALTER_CONFIGS, self.alter_configs)
        dispatcher.register(ApiKey.INCREMENTAL_ALTER_CONFIGS, self.incremental_alter_configs)
        dispatcher.register(ApiKey.LIST_CONFIG_RESOURCES, self.list_config_resources)

    async def describe_configs(self, context: RequestContext,
                               request: DescribeConfigsRequest) -> DescribeConfigsResponse:
        image = self.metadata_cache.image
        results = []
        for resource in request.resources:
            refusal = self._refusal(context, AclOperation.DESCRIBE_CONFIGS, resource.resource_type,
                                    resource.resource_name)
            if refusal != ErrorCode.NONE:
                results.append(Result(error_code=refusal, error_message=ERROR_INFO[refusal].message,
                                      resource_type=resource.resource_type, resource_name=resource.resource_name))
                continue
            try:
                entries = self._describe_loggers(resource.resource_name) \
                    if resource.resource_type == ConfigResourceType.BROKER_LOGGER else describe_resource(
                        image, self.config, self.node_id, resource.resource_type, resource.resource_name)
            except KafkaError as error:
                # Kafka names an unknown topic by its code alone (an empty message).
                message = "" if error.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION else error.message
                results.append(Result(error_code=error.error_code, error_message=message,
                                      resource_type=resource.resource_type, resource_name=resource.resource_name))
                continue
            keys = resource.configuration_keys
            results.append(Result(
                error_code=ErrorCode.NONE,
                error_message="",  # as Kafka's answer: empty, not null
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=[_entry(entry, context.api_version, request.include_synonyms, request.include_documentation)
                         for entry in entries if keys is None or entry.name in keys],
            ))
        return DescribeConfigsResponse(results=results)

    def _describe_loggers(self, resource_name: str) -> list[ConfigEntry]:
        """Kafka's checks of a BROKER_LOGGER name for DescribeConfigs (ConfigHelper), then the loggers."""
        if not resource_name:
            raise InvalidRequestError("Broker id must not be empty")
        try:
            broker_id = int(resource_name)
        except ValueError:
            raise InvalidRequestError(f"Broker id must be an integer, but it is: {resource_name}") from None
        if broker_id != self.node_id:
            raise InvalidRequestError(f"Unexpected broker id, expected {self.node_id} but received {resource_name}")
        return describe_loggers()

    async def alter_configs(self, context: RequestContext, request: AlterConfigsRequest) -> AlterConfigsResponse:
        answers = self._refused_alterations(context, request.resources, AlterResult)
        if not answers:
            return await self.controller.legacy_alter_configs(request)
        others = [resource for resource in request.resources if id(resource) not in answers]
        if others:
            response = await self.controller.legacy_alter_configs(
                AlterConfigsRequest(resources=others, validate_only=request.validate_only))
            answers.update((id(resource), result) for resource, result in zip(others, response.responses))
        return AlterConfigsResponse(responses=[answers[id(resource)] for resource in request.resources])

    def _refused_alterations(self, context: RequestContext, resources: list, result_class: type) -> dict[int, object]:
        """The answers to the resources (by id()) whose configs the principal may not alter."""
        answers = {}
        for resource in resources:
            refusal = self._refusal(context, AclOperation.ALTER_CONFIGS, resource.resource_type,
                                    resource.resource_name)
            if refusal != ErrorCode.NONE:
                answers[id(resource)] = result_class(
                    error_code=refusal, error_message=ERROR_INFO[refusal].message,
                    resource_type=resource.resource_type, resource_name=resource.resource_name)
        return answers

    async def incremental_alter_configs(self, context: RequestContext, request: IncrementalAlterConfigsRequest
                                        ) -> IncrementalAlterConfigsResponse:
        """BROKER_LOGGER resources here, the others through the controller; answers in the request's order."""
        answers = self._refused_alterations(context, request.resources, IncrementalResult)
        loggers = [resource for resource in request.resources
                   if resource.resource_type == ConfigResourceType.BROKER_LOGGER and id(resource) not in answers]
        if not loggers and not answers:
            return await self.controller.incremental_alter_configs(request)
        names = [resource.resource_name for resource in loggers]
        for resource in loggers:
            try:
                if names.count(resource.resource_name) > 1:
                    raise InvalidRequestError("Each resource must appear at most once.")
                check_node_id(resource.resource_name, self.node_id)
                alter_loggers(resource.configs, request.validate_only)
                error_code, message = ErrorCode.NONE, None
            except KafkaError as error:
                error_code, message = error.error_code, error.message
            answers[id(resource)] = IncrementalResult(error_code=error_code, error_message=message,
                                                      resource_type=resource.resource_type,
                                                      resource_name=resource.resource_name)
        others = [resource for resource in request.resources if id(resource) not in answers]
        if others:
            response = await self.controller.incremental_alter_configs(
                IncrementalAlterConfigsRequest(resources=others, validate_only=request.validate_only))
            answers.update((id(resource), result) for resource, result in zip(others, response.responses))
        return IncrementalAlterConfigsResponse(
            responses=[answers[id(resource)] for resource in request.resources])

    async def list_config_resources(self, context: RequestContext, request: ListConfigResourcesRequest
                                    ) -> ListConfigResourcesResponse:
        if not self.auth.authorize(context, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
            return ListConfigResourcesResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        supported = _LISTED_RESOURCE_TYPES if context.api_version >= 1 else (ConfigResourceType.CLIENT_METRICS,)
        wanted = set(request.resource_types or supported)
        if not wanted <= set(supported):
            return ListConfigResourcesResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
        image = self.metadata_cache.image
        brokers = [str(broker_id) for broker_id in sorted(image.brokers)
                   if image.alive_endpoint(broker_id, context.listener_name) is not None]
        names = {
            ConfigResourceType.GROUP: lambda: image.config_resource_names(ConfigResourceType.GROUP),
            ConfigResourceType.CLIENT_METRICS: lambda: image.config_resource_names(ConfigResourceType.CLIENT_METRICS),
            ConfigResourceType.BROKER_LOGGER: lambda: brokers,
            ConfigResourceType.BROKER: lambda: brokers,
            ConfigResourceType.TOPIC: lambda: sorted(image.topics_by_name),
        }
        return ListConfigResourcesResponse(config_resources=[
            ListConfigResourcesResponse.ConfigResource(resource_name=name, resource_type=resource_type)
            for resource_type in supported if resource_type in wanted for name in names[resource_type]()])
