"""Client quotas: DescribeClientQuotas (key 48) v0-v1, AlterClientQuotas (key 49) v0-v1.

DescribeClientQuotas is answered by the receiving broker from its metadata image; AlterClientQuotas goes through
the controller (kfk/controller/client_quota_control.py) and is answered once the records are committed, so a
Describe that follows on this broker sees the change. v1 of both is the flexible version; nothing else changes.

Authorization, as Kafka's: DescribeClientQuotas needs DESCRIBE_CONFIGS and AlterClientQuotas ALTER_CONFIGS on the
cluster; a refused request is answered CLUSTER_AUTHORIZATION_FAILED (for every entry of an Alter).
"""

from __future__ import annotations

from kfk.controller.client_quota_control import alter_client_quotas_error, describe_client_quotas
from kfk.controller.quorum_controller import QuorumController
from kfk.controller.result import ApiError
from kfk.errors import ERROR_INFO, ErrorCode, KafkaError
from kfk.metadata.cache import MetadataCache
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.alter_client_quotas import AlterClientQuotasRequest, AlterClientQuotasResponse
from kfk.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest, DescribeClientQuotasResponse
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext

_REFUSED = ApiError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ERROR_INFO[ErrorCode.CLUSTER_AUTHORIZATION_FAILED].message)


class ClientQuotasHandler:
    def __init__(self, metadata_cache: MetadataCache, controller: QuorumController,
                 auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.metadata_cache = metadata_cache
        self.controller = controller
        self.auth = auth

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.DESCRIBE_CLIENT_QUOTAS, self.describe_client_quotas)
        dispatcher.register(ApiKey.ALTER_CLIENT_QUOTAS, self.alter_client_quotas)

    async def describe_client_quotas(self, context: RequestContext, request: DescribeClientQuotasRequest
                                     ) -> DescribeClientQuotasResponse:
        if not self.auth.authorize(context, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER):
            return DescribeClientQuotasResponse(error_code=_REFUSED.error_code, error_message=_REFUSED.message,
                                                entries=None)
        try:
            return describe_client_quotas(self.metadata_cache.image, request)
        except KafkaError as error:
            return DescribeClientQuotasResponse(error_code=error.error_code, error_message=error.message,
                                                entries=None)

    async def alter_client_quotas(self, context: RequestContext, request: AlterClientQuotasRequest
                                  ) -> AlterClientQuotasResponse:
        if not self.auth.authorize(context, AclOperation.ALTER_CONFIGS, ResourceType.CLUSTER):
            return alter_client_quotas_error(request, _REFUSED)
        return await self.controller.alter_client_quotas(request)
