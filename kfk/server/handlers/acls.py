"""ACLs: CreateAcls (key 30), DescribeAcls (key 29), DeleteAcls (key 31), v1-v3 each (Kafka 4.0's range).

v1 adds the resource pattern type (LITERAL, PREFIXED; in filters also ANY and MATCH), v2 is flexible, v3 changes
nothing on the wire (the USER resource type). Without an authorizer (authorizer.class.name empty) every request is
answered SECURITY_DISABLED, as Kafka's. DescribeAcls needs DESCRIBE on the cluster and is answered from this
broker's metadata image; Create/DeleteAcls need ALTER on the cluster and are decided by the active controller.
A KRaft broker that is not it forwards them in an Envelope with the client's principal (kfk/server/forwarding.py),
checked by the controller. A ZooKeeper-mode broker checks the client itself and forwards them over the inter-broker
listener (the controller then authorizes the forwarding broker's principal, which super.users must hold, as
brokers' principals do in Kafka deployments).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from kfk.controller.acl_control import binding_filter_of
from kfk.controller.quorum_controller import QuorumController
from kfk.errors import ERROR_INFO, ErrorCode
from kfk.metadata.cache import MetadataCache
from kfk.protocol.message import Message
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from kfk.protocol.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from kfk.protocol.messages.describe_acls import DescribeAclsRequest, DescribeAclsResponse
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext

#: The version a broker forwards Create/DeleteAcls to the controller with (the highest kfk serves).
FORWARD_VERSION = 3
_NO_AUTHORIZER = "No Authorizer is configured."

#: Sends a request to the active controller: (request, version, "was it not the controller?") -> its response.
Forward = Callable[[Message, int, Callable[[Message], bool]], Awaitable[Message]]


class AclsHandler:
    """`forward`: to the ZooKeeper-mode controller (KRaft brokers forward in an Envelope before this handler)."""

    def __init__(self, metadata_cache: MetadataCache, controller: QuorumController, auth: RequestAuthorizer,
                 forward: Forward | None = None) -> None:
        self.metadata_cache = metadata_cache
        self.controller = controller
        self.auth = auth
        self.forward = forward

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.DESCRIBE_ACLS, self.describe_acls)
        dispatcher.register(ApiKey.CREATE_ACLS, self.create_acls)
        dispatcher.register(ApiKey.DELETE_ACLS, self.delete_acls)

    def _refusal(self, context: RequestContext, operation: AclOperation) -> tuple[ErrorCode, str] | None:
        if not self.auth.enabled:
            return ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER
        if not self.auth.authorize(context, operation, ResourceType.CLUSTER):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ERROR_INFO[ErrorCode.CLUSTER_AUTHORIZATION_FAILED].message
        return None

    async def describe_acls(self, context: RequestContext, request: DescribeAclsRequest) -> DescribeAclsResponse:
        refusal = self._refusal(context, AclOperation.DESCRIBE)
        if refusal is not None:
            return DescribeAclsResponse(error_code=refusal[0], error_message=refusal[1])
        try:
            acl_filter = binding_filter_of(request)
            problem = acl_filter.validation_error()
        except ValueError as error:
            problem = str(error)
        if problem is not None:
            return DescribeAclsResponse(error_code=ErrorCode.INVALID_REQUEST, error_message=problem)
        by_pattern: dict = {}
        for binding in self.metadata_cache.image.acls.values():
            if acl_filter.matches(binding):
                entry = binding.entry
                by_pattern.setdefault(binding.pattern, []).append(DescribeAclsResponse.AclDescription(
                    principal=entry.principal, host=entry.host, operation=entry.operation,
                    permission_type=entry.permission_type))
        return DescribeAclsResponse(error_code=ErrorCode.NONE, error_message=None, resources=[
            DescribeAclsResponse.DescribeAclsResource(resource_type=pattern.resource_type, resource_name=pattern.name,
                                                      pattern_type=pattern.pattern_type, acls=acls)
            for pattern, acls in by_pattern.items()])

    async def create_acls(self, context: RequestContext, request: CreateAclsRequest) -> CreateAclsResponse:
        refusal = self._refusal(context, AclOperation.ALTER)
        if refusal is not None:
            return CreateAclsResponse(results=[
                CreateAclsResponse.AclCreationResult(error_code=refusal[0], error_message=refusal[1])
                for _ in request.creations])
        if self.forward is not None and not self.controller.is_active:
            return await self.forward(request, FORWARD_VERSION, lambda response: any(
                result.error_code == ErrorCode.NOT_CONTROLLER for result in response.results))
        return await self.controller.create_acls(request)

    async def delete_acls(self, context: RequestContext, request: DeleteAclsRequest) -> DeleteAclsResponse:
        refusal = self._refusal(context, AclOperation.ALTER)
        if refusal is not None:
            return DeleteAclsResponse(filter_results=[
                DeleteAclsResponse.DeleteAclsFilterResult(error_code=refusal[0], error_message=refusal[1])
                for _ in request.filters])
        if self.forward is not None and not self.controller.is_active:
            return await self.forward(request, FORWARD_VERSION, lambda response: any(
                result.error_code == ErrorCode.NOT_CONTROLLER for result in response.filter_results))
        return await self.controller.delete_acls(request)
