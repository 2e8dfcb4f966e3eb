"""Partition leadership: ElectLeaders (key 43) v0-v2, ControlledShutdown (key 7) v1-v3 (ZooKeeper mode),
AlterPartitionReassignments (key 45) v0 and ListPartitionReassignments (key 46) v0 (one version each, flexible).

Both are served by the active controller (others answer NOT_CONTROLLER; clients and brokers send them to the
controller the Metadata response names). ElectLeaders: v0 is always a preferred election, v1 adds election_type
(0 preferred, 1 unclean) and a top-level error_code, v2 is flexible; a null topic list means every partition, and
then the partitions that needed no election are left out of the answer, as in Kafka. ControlledShutdown: a broker
that is stopping asks the controller to move its leaderships away; the answer lists the partitions it still leads
(no other in-sync replica), and the broker asks again. v0 (a header without client id) is not served, as in recent
Kafka; v2 adds broker_epoch (a stale one answers STALE_BROKER_EPOCH), v3 is flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

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
from kfk.server.dispatch import Dispatcher, RequestContext

if TYPE_CHECKING:
    from kfk.server.broker import BrokerServer

ELECT_LEADERS_VERSIONS = (0, 2)
CONTROLLED_SHUTDOWN_VERSIONS = (1, 3)
RemainingPartition = ControlledShutdownResponse.RemainingPartition


def register(dispatcher: Dispatcher, broker: BrokerServer) -> None:
    async def elect_leaders(context: RequestContext, request: ElectLeadersRequest) -> ElectLeadersResponse:
        if context.api_version == 0:
            request.election_type = 0
        return await broker.controller.elect_leaders(request)

    async def controlled_shutdown(context: RequestContext,
                                  request: ControlledShutdownRequest) -> ControlledShutdownResponse:
        controller = broker.controller
        if not controller.is_active:
            return ControlledShutdownResponse(error_code=ErrorCode.NOT_CONTROLLER)
        try:
            remaining = await controller.controlled_shutdown(request.broker_id, request.broker_epoch)
        except KafkaError as error:
            return ControlledShutdownResponse(error_code=error.error_code)
        return ControlledShutdownResponse(error_code=ErrorCode.NONE, remaining_partitions=[
            RemainingPartition(topic_name=topic, partition_index=partition) for topic, partition in remaining])

    async def alter_reassignments(context: RequestContext, request: AlterPartitionReassignmentsRequest
                                  ) -> AlterPartitionReassignmentsResponse:
        return await broker.controller.alter_partition_reassignments(request)

    async def list_reassignments(context: RequestContext, request: ListPartitionReassignmentsRequest
                                 ) -> ListPartitionReassignmentsResponse:
        return broker.controller.list_partition_reassignments(request)

    dispatcher.register(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, 0, alter_reassignments)
    dispatcher.register(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, 0, list_reassignments)
    dispatcher.register(ApiKey.ELECT_LEADERS, *ELECT_LEADERS_VERSIONS, elect_leaders)
    dispatcher.register(ApiKey.CONTROLLED_SHUTDOWN, *CONTROLLED_SHUTDOWN_VERSIONS, controlled_shutdown)
