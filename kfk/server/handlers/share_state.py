"""The share coordinator's state APIs (KIP-932), which partition leaders' persisters send to the broker leading the
share partition's __share_group_state partition: InitializeShareGroupState (83) v0, ReadShareGroupState (84) v0,
WriteShareGroupState (85) v0-v1 (v1: the delivery complete count, KIP-1226), DeleteShareGroupState (86) v0,
ReadShareGroupStateSummary (87) v0-v1 (v1: leader epoch and delivery complete count answered).

Inter-broker requests: CLUSTER_ACTION on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every partition, as
Kafka does. Each partition is answered by the share coordinator (kfk.coordinator.share.service) on its own:
NOT_COORDINATOR when its partition of __share_group_state is not this broker's, COORDINATOR_LOAD_IN_PROGRESS while
that partition loads.
"""

from __future__ import annotations

from kfk.coordinator.share.service import ShareCoordinatorService
from kfk.coordinator.share.state_batches import StateBatch
from kfk.errors import ErrorCode
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.delete_share_group_state import (DeleteShareGroupStateRequest,
                                                            DeleteShareGroupStateResponse)
from kfk.protocol.messages.initialize_share_group_state import (InitializeShareGroupStateRequest,
                                                                InitializeShareGroupStateResponse)
from kfk.protocol.messages.read_share_group_state import ReadShareGroupStateRequest, ReadShareGroupStateResponse
from kfk.protocol.messages.read_share_group_state_summary import (ReadShareGroupStateSummaryRequest,
                                                                  ReadShareGroupStateSummaryResponse)
from kfk.protocol.messages.write_share_group_state import WriteShareGroupStateRequest, WriteShareGroupStateResponse
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext


class ShareStateHandler:
    def __init__(self, service: ShareCoordinatorService, auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.service = service
        self.auth = auth

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.INITIALIZE_SHARE_GROUP_STATE, self.initialize)
        dispatcher.register(ApiKey.READ_SHARE_GROUP_STATE, self.read)
        dispatcher.register(ApiKey.WRITE_SHARE_GROUP_STATE, self.write)
        dispatcher.register(ApiKey.DELETE_SHARE_GROUP_STATE, self.delete)
        dispatcher.register(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, self.read_summary)

    def _allowed(self, context: RequestContext) -> bool:
        return self.auth.authorize(context, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)

    async def initialize(self, context: RequestContext,
                         request: InitializeShareGroupStateRequest) -> InitializeShareGroupStateResponse:
        Response = InitializeShareGroupStateResponse
        allowed = self._allowed(context)
        results = []
        for topic in request.topics:
            partitions = []
            for partition in topic.partitions:
                error, message = (await self.service.initialize((request.group_id, topic.topic_id,
                                                                 partition.partition), partition.state_epoch,
                                                                partition.start_offset)) \
                    if allowed else (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
                partitions.append(Response.PartitionResult(partition=partition.partition, error_code=error,
                                                           error_message=message))
            results.append(Response.InitializeStateResult(topic_id=topic.topic_id, partitions=partitions))
        return Response(results=results)

    async def read(self, context: RequestContext, request: ReadShareGroupStateRequest) -> ReadShareGroupStateResponse:
        Response = ReadShareGroupStateResponse
        allowed = self._allowed(context)
        results = []
        for topic in request.topics:
            partitions = []
            for partition in topic.partitions:
                if not allowed:
                    partitions.append(Response.PartitionResult(partition=partition.partition,
                                                               error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
                    continue
                state = self.service.read((request.group_id, topic.topic_id, partition.partition),
                                          partition.leader_epoch)
                partitions.append(Response.PartitionResult(
                    partition=partition.partition, error_code=state.error, error_message=state.error_message,
                    state_epoch=state.state_epoch,
                    start_offset=state.start_offset if state.error == ErrorCode.NONE else 0,
                    state_batches=[Response.StateBatch(first_offset=batch.first_offset, last_offset=batch.last_offset,
                                                       delivery_state=batch.delivery_state,
                                                       delivery_count=batch.delivery_count)
                                   for batch in state.state_batches]))
            results.append(Response.ReadStateResult(topic_id=topic.topic_id, partitions=partitions))
        return Response(results=results)

    async def read_summary(self, context: RequestContext,
                           request: ReadShareGroupStateSummaryRequest) -> ReadShareGroupStateSummaryResponse:
        Response = ReadShareGroupStateSummaryResponse
        allowed = self._allowed(context)
        results = []
        for topic in request.topics:
            partitions = []
            for partition in topic.partitions:
                if not allowed:
                    partitions.append(Response.PartitionResult(partition=partition.partition,
                                                               error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED))
                    continue
                state = self.service.read_summary((request.group_id, topic.topic_id, partition.partition),
                                                  partition.leader_epoch)
                partitions.append(Response.PartitionResult(
                    partition=partition.partition, error_code=state.error, error_message=state.error_message,
                    state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
                    start_offset=state.start_offset if state.error == ErrorCode.NONE else 0,
                    delivery_complete_count=state.delivery_complete_count))
            results.append(Response.ReadStateSummaryResult(topic_id=topic.topic_id, partitions=partitions))
        return Response(results=results)

    async def write(self, context: RequestContext,
                    request: WriteShareGroupStateRequest) -> WriteShareGroupStateResponse:
        Response = WriteShareGroupStateResponse
        allowed = self._allowed(context)
        results = []
        for topic in request.topics:
            partitions = []
            for partition in topic.partitions:
                error, message = (await self.service.write(
                    (request.group_id, topic.topic_id, partition.partition), partition.state_epoch,
                    partition.leader_epoch, partition.start_offset,
                    [StateBatch(batch.first_offset, batch.last_offset, batch.delivery_state, batch.delivery_count)
                     for batch in partition.state_batches], partition.delivery_complete_count)) \
                    if allowed else (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
                partitions.append(Response.PartitionResult(partition=partition.partition, error_code=error,
                                                           error_message=message))
            results.append(Response.WriteStateResult(topic_id=topic.topic_id, partitions=partitions))
        return Response(results=results)

    async def delete(self, context: RequestContext,
                     request: DeleteShareGroupStateRequest) -> DeleteShareGroupStateResponse:
        Response = DeleteShareGroupStateResponse
        allowed = self._allowed(context)
        results = []
        for topic in request.topics:
            partitions = []
            for partition in topic.partitions:
                error, message = (await self.service.delete((request.group_id, topic.topic_id,
                                                             partition.partition))) \
                    if allowed else (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
                partitions.append(Response.PartitionResult(partition=partition.partition, error_code=error,
                                                           error_message=message))
            results.append(Response.DeleteStateResult(topic_id=topic.topic_id, partitions=partitions))
        return Response(results=results)
