"""Who may send the controller listener's cluster requests, when an authorizer is configured (Kafka's ControllerApis
checks).

The Raft requests between controllers (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot) and the
requests brokers send their controller (BrokerRegistration, BrokerHeartbeat, AlterPartition, AllocateProducerIds)
need CLUSTER_ACTION on the cluster; UnregisterBroker, an operator's, needs ALTER. The principal is the one the
controller listener authenticated (a SASL user, a certificate's DN): controllers and brokers are usually
super.users, or are granted CLUSTER_ACTION by an ACL. A refused request is answered CLUSTER_AUTHORIZATION_FAILED.

A request the node serves in-process (a combined node's broker talking to its own active controller) comes from the
node itself, over no listener, and is not checked.
"""

from __future__ import annotations

from kfk.errors import ErrorCode
from kfk.protocol.message import Message
from kfk.protocol.messages import ApiKey, response_class
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import RequestAuthorizer
from kfk.server.dispatch import LOCAL_LISTENER, Dispatcher, Handler, RequestContext

#: The operation on the cluster each of the controller's cluster requests needs.
CLUSTER_REQUEST_OPERATIONS: dict[ApiKey, AclOperation] = {
    **{api_key: AclOperation.CLUSTER_ACTION for api_key in (
        ApiKey.VOTE, ApiKey.BEGIN_QUORUM_EPOCH, ApiKey.END_QUORUM_EPOCH, ApiKey.FETCH, ApiKey.FETCH_SNAPSHOT,
        ApiKey.BROKER_REGISTRATION, ApiKey.BROKER_HEARTBEAT, ApiKey.ALTER_PARTITION, ApiKey.ALLOCATE_PRODUCER_IDS)},
    ApiKey.UNREGISTER_BROKER: AclOperation.ALTER,
}


def authorize_cluster_requests(dispatcher: Dispatcher, auth: RequestAuthorizer) -> None:
    """Wrap the controller dispatcher's handlers of CLUSTER_REQUEST_OPERATIONS with their check (nothing to do
    without an authorizer)."""
    if not auth.enabled:
        return
    for api_key, operation in CLUSTER_REQUEST_OPERATIONS.items():
        dispatcher.wrap(api_key, lambda handler, api_key=api_key, operation=operation:
                        _checked(handler, api_key, operation, auth))


def _checked(handler: Handler, api_key: ApiKey, operation: AclOperation, auth: RequestAuthorizer) -> Handler:
    async def checked(context: RequestContext, request: Message) -> Message:
        if context.listener_name == LOCAL_LISTENER or auth.authorize(context, operation, ResourceType.CLUSTER):
            return await handler(context, request)
        return response_class(api_key)(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)

    return checked
