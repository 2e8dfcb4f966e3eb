"""Forwarding (KIP-590): a KRaft broker passes the admin requests only the active controller can decide to it, inside an
Envelope that carries who asked (Kafka's ForwardingManager).

Clients send admin requests to any broker (the Metadata response names a broker as the controller). A broker whose
own controller is not the active one wraps the request in an EnvelopeRequest: request_data is the request exactly as
the client sent it (header and body), request_principal the client's principal (DefaultPrincipalData,
kfk/security/principal_serde.py), client_host_address the client's IP address as 4 or 16 bytes. The Envelope goes
to the active controller on its controller listener as the broker itself, so the controller checks CLUSTER_ACTION
for the broker (handlers/envelope.py), then authorizes the inner request as the client, serves it and answers the
inner response inside the EnvelopeResponse. The broker answers the client with that response under the client's
correlation id.

The envelope's own errors, as Kafka's forwarding broker treats them: NOT_CONTROLLER (the controller moved) is retried
on the new active controller by the ControllerChannel, until the request times out; UNSUPPORTED_VERSION closes the
client's connection, so that it reconnects and asks the versions again; any other (the broker is not allowed to
forward, the principal does not parse) is a misconfigured cluster, logged, and closes the connection too.
"""

from __future__ import annotations

import ipaddress
import logging

from kfk.errors import ErrorCode, InvalidRequestError
from kfk.protocol.headers import decode_response
from kfk.protocol.message import Message
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.envelope import EnvelopeRequest, EnvelopeResponse
from kfk.security.principal_serde import serialize_principal
from kfk.server.controller_channel import ControllerChannel
from kfk.server.dispatch import CloseConnection, RequestContext

log = logging.getLogger("kfk.server.forwarding")

#: The APIs a KRaft broker forwards to the active controller, and the only ones the controller accepts in an Envelope.
FORWARDED_APIS = frozenset({
    ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS, ApiKey.ALTER_CONFIGS,
    ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ELECT_LEADERS, ApiKey.ALTER_PARTITION_REASSIGNMENTS,
    ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.DESCRIBE_QUORUM, ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS,
    ApiKey.ALTER_CLIENT_QUOTAS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.ADD_RAFT_VOTER, ApiKey.REMOVE_RAFT_VOTER,
    ApiKey.CREATE_DELEGATION_TOKEN, ApiKey.RENEW_DELEGATION_TOKEN, ApiKey.EXPIRE_DELEGATION_TOKEN,
    ApiKey.UNREGISTER_BROKER, ApiKey.UPDATE_FEATURES})
#: Envelope's only version.
ENVELOPE_VERSION = 0


def client_address_bytes(client_host: str) -> bytes:
    """The client's IP address as Envelope carries it: 4 bytes for IPv4, 16 for IPv6."""
    return ipaddress.ip_address(client_host).packed


def client_host_of(address: bytes) -> str:
    """The client's host from an Envelope's address bytes; InvalidRequestError for bytes that are no IP address."""
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        raise InvalidRequestError(f"the forwarded client address {address.hex()} is no IP address") from None


def envelope_not_controller(response: EnvelopeResponse) -> bool:
    return response.error_code == ErrorCode.NOT_CONTROLLER


class ForwardingManager:
    def __init__(self, channel: ControllerChannel) -> None:
        self.channel = channel

    async def forward(self, context: RequestContext, request: Message) -> Message:
        """The active controller's answer to the client's `request` (`context`: how the client sent it)."""
        envelope = EnvelopeRequest(request_data=bytes(context.request_data),
                                   request_principal=serialize_principal(context.principal),
                                   client_host_address=client_address_bytes(context.client_host))
        response = await self.channel.send(envelope, ENVELOPE_VERSION, envelope_not_controller)
        if response.error_code != ErrorCode.NONE:
            error = ErrorCode(response.error_code).name
            if response.error_code != ErrorCode.UNSUPPORTED_VERSION:
                log.warning("the controller refused the envelope of a forwarded %s from %s: %s", request.NAME,
                            context.principal, error)
            raise CloseConnection(f"forwarding {request.NAME} to the controller failed: {error}")
        return decode_response(response.response_data, request.API_KEY, context.api_version)[1]
