"""Client quotas: DescribeClientQuotas (key 48) v0-v1, AlterClientQuotas (key 49) v0-v1.

DescribeClientQuotas is answered by the receiving broker from its metadata image; AlterClientQuotas goes through
the controller (kfk/controller/client_quota_control.py) and is answered once the records are committed, so a
Describe that follows on this broker sees the change. v1 of both is the flexible version; nothing else changes.
"""

from __future__ import annotations

from kfk.controller.client_quota_control import describe_client_quotas
from kfk.controller.quorum_controller import QuorumController
from kfk.errors import KafkaError
from kfk.metadata.cache import MetadataCache
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.alter_client_quotas import AlterClientQuotasRequest, AlterClientQuotasResponse
from kfk.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest, DescribeClientQuotasResponse
from kfk.server.dispatch import Dispatcher, RequestContext


class ClientQuotasHandler:
    def __init__(self, metadata_cache: MetadataCache, controller: QuorumController) -> None:
        self.metadata_cache = metadata_cache
        self.controller = controller

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.DESCRIBE_CLIENT_QUOTAS, self.describe_client_quotas)
        dispatcher.register(ApiKey.ALTER_CLIENT_QUOTAS, self.alter_client_quotas)

    async def describe_client_quotas(self, context: RequestContext, request: DescribeClientQuotasRequest
                                     ) -> DescribeClientQuotasResponse:
        try:
            return describe_client_quotas(self.metadata_cache.image, request)
        except KafkaError as error:
            return DescribeClientQuotasResponse(error_code=error.error_code, error_message=error.message,
                                                entries=None)

    async def alter_client_quotas(self, context: RequestContext, request: AlterClientQuotasRequest
                                  ) -> AlterClientQuotasResponse:
        return await self.controller.alter_client_quotas(request)
