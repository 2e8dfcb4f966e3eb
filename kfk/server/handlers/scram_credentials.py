"""DescribeUserScramCredentials (key 50, v0) and AlterUserScramCredentials (key 51, v0): SCRAM credentials kept in
the cluster metadata (kfk/controller/scram_control.py). Describe answers from this broker's metadata image; Alter
goes through the controller, and the records it commits reach every broker's image (and so its SCRAM servers).
Describe needs DESCRIBE and Alter ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from kfk.controller.quorum_controller import QuorumController
from kfk.controller.scram_control import describe_user_scram_credentials
from kfk.metadata.cache import MetadataCache
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.alter_user_scram_credentials import (AlterUserScramCredentialsRequest,
                                                                 AlterUserScramCredentialsResponse)
from kfk.protocol.messages.describe_user_scram_credentials import (DescribeUserScramCredentialsRequest,
                                                                    DescribeUserScramCredentialsResponse)
from kfk.errors import ErrorCode
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext


class ScramCredentialsHandler:
    def __init__(self, metadata_cache: MetadataCache, controller: QuorumController,
                 auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.metadata_cache = metadata_cache
        self.auth = auth
        self.controller = controller

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, self.describe_user_scram_credentials)
        dispatcher.register(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, self.alter_user_scram_credentials)

    async def describe_user_scram_credentials(self, context: RequestContext,
                                              request: DescribeUserScramCredentialsRequest
                                              ) -> DescribeUserScramCredentialsResponse:
        if not self.auth.authorize(context, AclOperation.DESCRIBE, ResourceType.CLUSTER):
            return DescribeUserScramCredentialsResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return describe_user_scram_credentials(self.metadata_cache.image, request)

    async def alter_user_scram_credentials(self, context: RequestContext, request: AlterUserScramCredentialsRequest
                                           ) -> AlterUserScramCredentialsResponse:
        if not self.auth.authorize(context, AclOperation.ALTER, ResourceType.CLUSTER):
            Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
            users = dict.fromkeys(item.name for item in [*request.deletions, *request.upsertions])
            return AlterUserScramCredentialsResponse(results=[
                Result(user=user, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED) for user in users])
        return await self.controller.alter_user_scram_credentials(request)
