"""QuorumController: the active controller's shell around the pure control logic (Kafka's QuorumController).

Every write follows one path: under one lock, compute a ControllerResult from the controller's own image, append
its records through the MetadataBackend with the controller epoch this node won, and answer only after the append
returned, i.e. after the records are committed and every listener (this controller and the broker's MetadataCache)
has applied them. The lock makes writes linearizable: two CreateTopics for one name cannot both pass the "exists?"
check. The controller keeps its own image (it is a backend listener itself) so a controller-only node needs no
broker cache.

Works over any MetadataBackend (embedded Raft log, ZooKeeper). A node that did not win the controller election
answers NOT_CONTROLLER; forwarding such requests to the active controller comes with multi-node clusters.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from typing import Callable, Sequence, TypeVar

from kfk.config import BrokerConfig
from kfk.controller import cluster_control, config_control, replication_control
from kfk.controller.auto_topic_creation import creatable_topic
from kfk.controller.backend import MetadataBackend
from kfk.controller.config_describer import describe_topic_configs
from kfk.controller.features import METADATA_VERSION_FEATURE_NAME, METADATA_VERSION_LEVEL
from kfk.controller.producer_ids import ProducerIdsBlock, generate_next_producer_ids
from kfk.controller.result import ApiError, ControllerResult
from kfk.errors import ErrorCode, NotControllerError
from kfk.metadata.image import Endpoint, MetadataImage
from kfk.metadata.topic_names import has_collision_chars
from kfk.protocol.message import Message
from kfk.protocol.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from kfk.protocol.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from kfk.protocol.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from kfk.protocol.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from kfk.protocol.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kfk.protocol.metadata_records import schema_class

log = logging.getLogger("kfk.controller")

FeatureLevelRecord = schema_class("FeatureLevelRecord")
T = TypeVar("T")
_NOT_CONTROLLER = ApiError(ErrorCode.NOT_CONTROLLER, "This node is not the active controller.")


class QuorumController:
    def __init__(self, backend: MetadataBackend, config: BrokerConfig, node_id: int,
                 rng: random.Random | None = None) -> None:
        self.backend = backend
        self.config = config
        self.node_id = node_id
        self.rng = rng or random.Random()
        self.image = MetadataImage(cluster_id=backend.cluster_id)
        self.controller_epoch: int | None = None
        self._lock = asyncio.Lock()

    # -- MetadataListener --------------------------------------------------------------------------------------------

    def handle_commit(self, records: Sequence[Message], last_offset: int) -> None:
        self.image = self.image.apply(records, last_offset)

    # -- activation --------------------------------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        return self.controller_epoch is not None

    async def activate(self) -> bool:
        """Run for controller; once elected, bootstrap an empty log with the metadata.version record."""
        epoch = await self.backend.elect_controller(self.node_id)
        if epoch is None:
            return False
        self.controller_epoch = epoch
        if METADATA_VERSION_FEATURE_NAME not in self.image.features:
            await self._write(lambda image: ControllerResult(None, [
                FeatureLevelRecord(name=METADATA_VERSION_FEATURE_NAME, feature_level=METADATA_VERSION_LEVEL)]))
        return True

    def deactivate(self) -> None:
        self.controller_epoch = None

    async def _write(self, operation: Callable[[MetadataImage], ControllerResult[T]]) -> T:
        async with self._lock:
            if self.controller_epoch is None:
                raise NotControllerError(_NOT_CONTROLLER.message)
            result = operation(self.image)
            if result.records:
                await self.backend.append(result.records, self.controller_epoch)
            return result.response

    # -- topics ------------------------------------------------------------------------------------------------------

    def _describe_new_topic_configs(self, overrides) -> list[CreateTopicsResponse.CreatableTopicConfigs]:
        return [CreateTopicsResponse.CreatableTopicConfigs(name=entry.name, value=entry.value,
                                                           read_only=entry.read_only, config_source=entry.source,
                                                           is_sensitive=entry.is_sensitive)
                for entry in describe_topic_configs(self.config, overrides)]

    async def create_topics(self, request: CreateTopicsRequest) -> CreateTopicsResponse:
        try:
            response = await self._write(lambda image: replication_control.create_topics(
                image, request, self.config, self.rng, self._describe_new_topic_configs))
        except NotControllerError:
            return replication_control.create_topics_error(request, _NOT_CONTROLLER)
        for result in response.topics:
            if result.error_code == ErrorCode.NONE and has_collision_chars(result.name):
                log.warning("Topic %s: due to limitations in metric names, topics with a period ('.') or underscore "
                            "('_') could collide. To avoid issues it is best to use either, but not both.",
                            result.name)
        return response

    async def auto_create_topics(self, names: Sequence[str]) -> CreateTopicsResponse:
        """Create topics clients asked for (Metadata with auto-creation), each with what Kafka gives it."""
        request = CreateTopicsRequest(topics=[creatable_topic(name, self.config) for name in names])
        response = await self.create_topics(request)
        for result in response.topics:
            if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                log.info("auto-creation of topic %s failed: %s (%s)", result.name,
                         ErrorCode(result.error_code).name, result.error_message)
        return response

    async def delete_topics(self, request: DeleteTopicsRequest, api_version: int) -> DeleteTopicsResponse:
        try:
            return await self._write(lambda image: replication_control.delete_topics(
                image, request, api_version, self.config.delete_topic_enable))
        except NotControllerError:
            return replication_control.delete_topics_error(request, _NOT_CONTROLLER)

    async def create_partitions(self, request: CreatePartitionsRequest) -> CreatePartitionsResponse:
        try:
            return await self._write(lambda image: replication_control.create_partitions(image, request, self.rng))
        except NotControllerError:
            return replication_control.create_partitions_error(request, _NOT_CONTROLLER)

    # -- configs -----------------------------------------------------------------------------------------------------

    async def incremental_alter_configs(self, request: IncrementalAlterConfigsRequest
                                        ) -> IncrementalAlterConfigsResponse:
        try:
            return await self._write(lambda image: config_control.incremental_alter_configs(
                image, request, self.config, self.node_id))
        except NotControllerError:
            Result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
            return IncrementalAlterConfigsResponse(responses=[
                Result(error_code=_NOT_CONTROLLER.error_code, error_message=_NOT_CONTROLLER.message,
                       resource_type=resource.resource_type, resource_name=resource.resource_name)
                for resource in request.resources])

    async def legacy_alter_configs(self, request: AlterConfigsRequest) -> AlterConfigsResponse:
        try:
            return await self._write(lambda image: config_control.legacy_alter_configs(
                image, request, self.config, self.node_id))
        except NotControllerError:
            Result = AlterConfigsResponse.AlterConfigsResourceResponse
            return AlterConfigsResponse(responses=[
                Result(error_code=_NOT_CONTROLLER.error_code, error_message=_NOT_CONTROLLER.message,
                       resource_type=resource.resource_type, resource_name=resource.resource_name)
                for resource in request.resources])

    # -- brokers and producer ids ------------------------------------------------------------------------------------

    async def register_broker(self, broker_id: int, endpoints: Sequence[Endpoint], rack: str | None) -> int:
        """Register (fenced) a broker incarnation; returns its broker epoch."""
        incarnation_id = uuid.uuid4()
        return await self._write(lambda image: cluster_control.register_broker(
            image, broker_id, incarnation_id, endpoints, rack))

    async def unfence_broker(self, broker_id: int, broker_epoch: int) -> None:
        await self._write(lambda image: cluster_control.unfence_broker(image, broker_id, broker_epoch))

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> ProducerIdsBlock:
        return await self._write(lambda image: generate_next_producer_ids(image, broker_id, broker_epoch))
