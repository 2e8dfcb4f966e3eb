"""DescribeUserScramCredentials (key 50, v0) and AlterUserScramCredentials (key 51, v0): SCRAM credentials kept in
the cluster metadata (kfk/controller/scram_control.py). Describe answers from this broker's metadata image; Alter
goes through the controller, and the records it commits reach every broker's image (and so its SCRAM servers)."""

from __future__ import annotations

from kfk.controller.quorum_controller import QuorumController
from kfk.controller.scram_control import describe_user_scram_credentials
from kfk.metadata.cache import MetadataCache
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.alter_user_scram_credentials import (AlterUserScramCredentialsRequest,
                                                                 AlterUserScramCredentialsResponse)
from kfk.protocol.messages.describe_user_scram_credentials import (DescribeUserScramCredentialsRequest,
                                                                    DescribeUserScramCredentialsResponse)
from kfk.server.dispatch import Dispatcher, RequestContext


class ScramCredentialsHandler:
    def __init__(self, metadata_cache: MetadataCache, controller: QuorumController) -> None:
        self.metadata_cache = metadata_cache
        self.controller = controller

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, self.describe_user_scram_credentials)
        dispatcher.register(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, self.alter_user_scram_credentials)

    async def describe_user_scram_credentials(self, context: RequestContext,
                                              request: DescribeUserScramCredentialsRequest
                                              ) -> DescribeUserScramCredentialsResponse:
        return describe_user_scram_credentials(self.metadata_cache.image, request)

    async def alter_user_scram_credentials(self, context: RequestContext, request: AlterUserScramCredentialsRequest
                                           ) -> AlterUserScramCredentialsResponse:
        return await self.controller.alter_user_scram_credentials(request)
