"""Partition leadership: ElectLeaders (key 43) v0-v2, ControlledShutdown (key 7) v1-v3 (ZooKeeper mode),
AlterPartitionReassignments (key 45) v0-v1 and ListPartitionReassignments (key 46) v0 (flexible). v1 of
AlterPartitionReassignments adds allow_replication_factor_change (KIP-860): false refuses a target whose replica
count differs from the partition's (INVALID_REPLICATION_FACTOR), and the answer echoes the flag.

Both are served by the active controller (others answer NOT_CONTROLLER; clients and brokers send them to the
controller the Metadata response names). ElectLeaders: v0 is always a preferred election, v1 adds election_type
(0 preferred, 1 unclean) and a top-level error_code, v2 is flexible; a null topic list means every partition, and
then the partitions that needed no election are left out of the answer, as in Kafka. ControlledShutdown: a broker
that is stopping asks the controller to move its leaderships away; the answer lists the partitions it still leads
(no other in-sync replica), and the broker asks again. v0 (a header without client id) is not served, as in recent
Kafka; v2 adds broker_epoch (a stale one answers STALE_BROKER_EPOCH), v3 is flexible.
"""

from __future__ import annotations

from kfk.controller.quorum_controller import QuorumController
from kfk.errors import ErrorCode, KafkaError
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from kfk.protocol.messages.controlled_shutdown import ControlledShutdownRequest, ControlledShutdownResponse
from kfk.protocol.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from kfk.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext

RemainingPartition = ControlledShutdownResponse.RemainingPartition


class LeadershipHandler:
    """Authorization: ALTER on the cluster to elect or reassign, DESCRIBE to list reassignments, CLUSTER_ACTION
    (brokers) for ControlledShutdown; CLUSTER_AUTHORIZATION_FAILED otherwise."""

    def __init__(self, controller: QuorumController, auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.controller = controller
        self.auth = auth

    def _may(self, context: RequestContext, operation: AclOperation) -> bool:
        return self.auth.authorize(context, operation, ResourceType.CLUSTER)

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.ELECT_LEADERS, self.elect_leaders)
        dispatcher.register(ApiKey.CONTROLLED_SHUTDOWN, self.controlled_shutdown)
        dispatcher.register(ApiKey.ALTER_PARTITION_REASSIGNMENTS, self.alter_reassignments)
        dispatcher.register(ApiKey.LIST_PARTITION_REASSIGNMENTS, self.list_reassignments)

    async def elect_leaders(self, context: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
        if context.api_version == 0:
            request.election_type = 0
        if not self._may(context, AclOperation.ALTER):
            Result = ElectLeadersResponse.ReplicaElectionResult
            return ElectLeadersResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, replica_election_results=[
                Result(topic=entry.topic, partition_result=[ElectLeadersResponse.PartitionResult(
                    partition_id=index, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                    for index in entry.partitions]) for entry in request.topic_partitions or ()])
        return await self.controller.elect_leaders(request)

    async def controlled_shutdown(self, context: RequestContext,
                                  request: ControlledShutdownRequest) -> ControlledShutdownResponse:
        controller = self.controller
        if not self._may(context, AclOperation.CLUSTER_ACTION):
            return ControlledShutdownResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        if not controller.is_active:
            return ControlledShutdownResponse(error_code=ErrorCode.NOT_CONTROLLER)
        try:
            remaining = await controller.controlled_shutdown(request.broker_id, request.broker_epoch)
        except KafkaError as error:
            return ControlledShutdownResponse(error_code=error.error_code)
        return ControlledShutdownResponse(error_code=ErrorCode.NONE, remaining_partitions=[
            RemainingPartition(topic_name=topic, partition_index=partition) for topic, partition in remaining])

    async def alter_reassignments(self, context: RequestContext, request: AlterPartitionReassignmentsRequest
                                  ) -> AlterPartitionReassignmentsResponse:
        if not self._may(context, AclOperation.ALTER):
            return AlterPartitionReassignmentsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return await self.controller.alter_partition_reassignments(request)

    async def list_reassignments(self, context: RequestContext, request: ListPartitionReassignmentsRequest
                                 ) -> ListPartitionReassignmentsResponse:
        if not self._may(context, AclOperation.DESCRIBE):
            return ListPartitionReassignmentsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return self.controller.list_partition_reassignments(request)
