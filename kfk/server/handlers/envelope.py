"""Envelope (key 58) v0, on the controller listener only (as Kafka 4.0): a broker's forwarded admin request (KIP-590;
the broker's side is kfk/server/forwarding.py).

The sender must be a broker: CLUSTER_ACTION on the cluster, checked for the principal of the controller connection
(a request this node serves in-process, from its own broker, is not checked); anyone else is answered
CLUSTER_AUTHORIZATION_FAILED. The inner request is then served by this dispatcher's handler as if the client had
sent it here, with the client's principal and host from the envelope, so each handler's own checks
(kfk/server/authorization.py) authorize the client. The answer carries the inner response (its header holds the
client's correlation id), or an envelope error: PRINCIPAL_DESERIALIZATION_FAILURE, INVALID_REQUEST for a request that
does not parse or may not be forwarded, UNSUPPORTED_VERSION, and NOT_CONTROLLER when the inner response says this
node is not the active controller (the broker then retries on the new one).
"""

from __future__ import annotations

from collections.abc import Set

from kfk.errors import ErrorCode, KafkaError
from kfk.protocol.headers import encode_response
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.envelope import EnvelopeRequest, EnvelopeResponse
from kfk.security.acl import AclOperation, ResourceType
from kfk.security.principal_serde import deserialize_principal
from kfk.server.authorization import RequestAuthorizer
from kfk.server.controller_channel import answers_not_controller
from kfk.server.dispatch import LOCAL_LISTENER, Dispatcher, RequestContext
from kfk.server.forwarding import client_host_of


class EnvelopeHandler:
    """`dispatcher`: the controller listener's, which serves the inner requests; `forwardable`: the APIs it accepts
    inside an Envelope."""

    def __init__(self, dispatcher: Dispatcher, auth: RequestAuthorizer, forwardable: Set[int]) -> None:
        self.dispatcher = dispatcher
        self.auth = auth
        self.forwardable = forwardable

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.ENVELOPE, self.envelope)

    async def envelope(self, context: RequestContext, request: EnvelopeRequest) -> EnvelopeResponse:
        if context.listener_name != LOCAL_LISTENER and not self.auth.authorize(
                context, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER):
            return EnvelopeResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        try:
            principal = deserialize_principal(request.request_principal)
            client_host = client_host_of(request.client_host_address)
            header, response = await self.dispatcher.handle_forwarded(
                request.request_data, client_host, context.listener_name, principal, self.forwardable)
        except KafkaError as error:
            return EnvelopeResponse(error_code=error.error_code)
        if answers_not_controller(response):
            return EnvelopeResponse(error_code=ErrorCode.NOT_CONTROLLER)
        chunks = encode_response(header.correlation_id, header.request_api_key, header.request_api_version, response)
        return EnvelopeResponse(response_data=b"".join(chunks[1:]))
