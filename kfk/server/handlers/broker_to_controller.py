"""Requests brokers send their active controller in KRaft mode, served on the controller listener:
BrokerRegistration (key 62) v0-v4, BrokerHeartbeat (key 63) v0-v2, AlterPartition (key 56) v2-v3 and
AllocateProducerIds (key 67) v0 (UnregisterBroker, an operator's request: handlers/unregister_broker.py).

A node that is not the active controller answers NOT_CONTROLLER and the broker asks the next one. BrokerRegistration:
v1 adds is_migrating_zk_broker (always false here), v2 log_dirs, v3 previous_broker_epoch (ignored: a registration
is always a new epoch), v4 only a new feature range. BrokerHeartbeat v1 adds offline_log_dirs (kfk does not take log
dirs offline one by one), v2 cordoned_log_dirs (no log dir is cordoned here). AlterPartition v2 names topics by id (v0-v1 are not served, as in Kafka 4.0); v3 lists
the new ISR with each member's broker epoch (the epochs are not checked). The logic is the controller's
(QuorumController.handle_*): these are the wire entry points, also called in-process by a combined node's broker.
"""

from __future__ import annotations

from kfk.controller.quorum_controller import QuorumController
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.allocate_producer_ids import (
    AllocateProducerIdsRequest,
    AllocateProducerIdsResponse,
)
from kfk.protocol.messages.alter_partition import (
    AlterPartitionRequest,
    AlterPartitionResponse,
)
from kfk.protocol.messages.broker_heartbeat import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
)
from kfk.protocol.messages.broker_registration import (
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from kfk.server.dispatch import Dispatcher, RequestContext


class BrokerToControllerHandler:
    def __init__(self, controller: QuorumController) -> None:
        self.controller = controller

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.BROKER_REGISTRATION, self.broker_registration)
        dispatcher.register(ApiKey.BROKER_HEARTBEAT, self.broker_heartbeat)
        dispatcher.register(ApiKey.ALTER_PARTITION, self.alter_partition)
        dispatcher.register(ApiKey.ALLOCATE_PRODUCER_IDS, self.allocate_producer_ids)

    async def broker_registration(self, context: RequestContext,
                                  request: BrokerRegistrationRequest) -> BrokerRegistrationResponse:
        return await self.controller.handle_broker_registration(request)

    async def broker_heartbeat(self, context: RequestContext,
                               request: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse:
        return await self.controller.handle_broker_heartbeat(request)

    async def alter_partition(self, context: RequestContext, request: AlterPartitionRequest) -> AlterPartitionResponse:
        return await self.controller.handle_alter_partition(request)

    async def allocate_producer_ids(self, context: RequestContext,
                                    request: AllocateProducerIdsRequest) -> AllocateProducerIdsResponse:
        return await self.controller.handle_allocate_producer_ids(request)
