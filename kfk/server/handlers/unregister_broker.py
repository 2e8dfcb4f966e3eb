"""UnregisterBroker (key 64, v0) on a broker listener: an operator's request (kafka-cluster.sh unregister, `kfk
cluster unregister`) to drop the registration of a broker that is gone for good, so that it no longer counts in
the cluster's metadata. It needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED); a KRaft broker whose own
controller is not active forwards it to the one that is (the controller checks the client's ALTER itself), as Kafka 4
does. kfk's ZooKeeper mode has no such request (a broker's registration there is its session's ephemeral znode):
UNSUPPORTED_VERSION, which Kafka's tool reports as "does not support the broker unregistration API"."""

from __future__ import annotations

from kfk.controller.quorum_controller import QuorumController
from kfk.errors import ErrorCode, KafkaError
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.unregister_broker import UnregisterBrokerRequest, UnregisterBrokerResponse
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext


class UnregisterBrokerHandler:
    def __init__(self, controller: QuorumController, kraft: bool, auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.controller = controller
        self.kraft = kraft
        self.auth = auth

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.UNREGISTER_BROKER, self.unregister_broker)

    async def unregister_broker(self, context: RequestContext,
                                request: UnregisterBrokerRequest) -> UnregisterBrokerResponse:
        if not self.kraft:
            return UnregisterBrokerResponse(error_code=ErrorCode.UNSUPPORTED_VERSION)
        if not self.auth.authorize(context, AclOperation.ALTER, ResourceType.CLUSTER):
            return UnregisterBrokerResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        if not self.controller.is_active:
            return UnregisterBrokerResponse(error_code=ErrorCode.NOT_CONTROLLER)
        try:
            await self.controller.unregister_broker(request.broker_id)
        except KafkaError as error:  # with its message, as Kafka's controller answers from 4.1 (4.0 sent the code)
            return UnregisterBrokerResponse(error_code=error.error_code, error_message=error.message)
        return UnregisterBrokerResponse(error_code=ErrorCode.NONE)
