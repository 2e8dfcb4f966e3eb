"""CreateDelegationToken (key 38), RenewDelegationToken (39), ExpireDelegationToken (40) and
DescribeDelegationToken (41), KIP-48's delegation tokens kept in the cluster metadata (kfk/controller/
delegation_token_control.py).

Create, Renew and Expire go to the active controller (a KRaft broker forwards them in an Envelope with the client's
principal, and the controller runs this handler again as that client); Describe answers from this broker's image.
Who may ask at all (Kafka's allowTokenRequests): not a client that authenticated with a delegation token (a token
cannot beget tokens), and not an unauthenticated one (PLAINTEXT, or TLS without a client certificate: kfk's only
ANONYMOUS principals), both answered DELEGATION_TOKEN_REQUEST_NOT_ALLOWED. A token owned by someone else needs
CREATE_TOKENS on that user (DELEGATION_TOKEN_AUTHORIZATION_FAILED); Describe lists the tokens the client owns,
requested or may renew, plus those it may DESCRIBE (the token) or DESCRIBE_TOKENS (their owner) by ACL.
"""

from __future__ import annotations

from typing import TypeVar

from kfk.controller.quorum_controller import QuorumController
from kfk.errors import ErrorCode
from kfk.metadata.cache import MetadataCache
from kfk.metadata.delegation_tokens import DelegationTokenData, token_hmac
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.create_delegation_token import (CreateDelegationTokenRequest,
                                                            CreateDelegationTokenResponse)
from kfk.protocol.messages.describe_delegation_token import (DescribeDelegationTokenRequest,
                                                              DescribeDelegationTokenResponse)
from kfk.protocol.messages.expire_delegation_token import (ExpireDelegationTokenRequest,
                                                            ExpireDelegationTokenResponse)
from kfk.protocol.messages.renew_delegation_token import RenewDelegationTokenRequest, RenewDelegationTokenResponse
from kfk.security.acl import AclOperation, ResourceType
from kfk.security.principal import ANONYMOUS, USER_TYPE, KafkaPrincipal
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext

#: The times of a response to a request refused before any token was looked at (Kafka's ERROR_TIMESTAMP).
ERROR_TIMESTAMP = -1
R = TypeVar("R", RenewDelegationTokenResponse, ExpireDelegationTokenResponse)
#: CreateDelegationToken names the token's requester from this version on (KIP-373).
FIRST_REQUESTER_VERSION = 3


def _allows_token_requests(context: RequestContext) -> bool:
    principal = context.principal
    return not principal.token_authenticated and principal != ANONYMOUS


class DelegationTokensHandler:
    def __init__(self, metadata_cache: MetadataCache, controller: QuorumController, secret_key: str | None,
                 auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.metadata_cache = metadata_cache
        self.controller = controller
        self.secret_key = secret_key
        self.auth = auth

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.CREATE_DELEGATION_TOKEN, self.create_delegation_token)
        dispatcher.register(ApiKey.RENEW_DELEGATION_TOKEN, self.renew_delegation_token)
        dispatcher.register(ApiKey.EXPIRE_DELEGATION_TOKEN, self.expire_delegation_token)
        dispatcher.register(ApiKey.DESCRIBE_DELEGATION_TOKEN, self.describe_delegation_token)

    async def create_delegation_token(self, context: RequestContext, request: CreateDelegationTokenRequest
                                      ) -> CreateDelegationTokenResponse:
        requester = context.principal
        owner = requester
        if request.owner_principal_name:
            owner = KafkaPrincipal(request.owner_principal_type or USER_TYPE, request.owner_principal_name)
        response = CreateDelegationTokenResponse(
            principal_type=owner.principal_type, principal_name=owner.name,
            token_requester_principal_type=requester.principal_type, token_requester_principal_name=requester.name,
            issue_timestamp_ms=ERROR_TIMESTAMP, expiry_timestamp_ms=ERROR_TIMESTAMP, max_timestamp_ms=ERROR_TIMESTAMP)
        if not _allows_token_requests(context):
            response.error_code = ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
        elif owner != requester and not self.auth.authorize(context, AclOperation.CREATE_TOKENS, ResourceType.USER,
                                                            str(owner)):
            response.error_code = ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED
        elif self.secret_key is None:  # the controller's answer (no times), known here (and so in ZooKeeper mode)
            response.error_code = ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
            response.issue_timestamp_ms = response.expiry_timestamp_ms = response.max_timestamp_ms = 0
        else:
            response = await self.controller.create_delegation_token(requester, request)
        if context.api_version < FIRST_REQUESTER_VERSION:  # the fields the version does not carry stay unset
            response.token_requester_principal_type = response.token_requester_principal_name = ""
        return response

    async def renew_delegation_token(self, context: RequestContext, request: RenewDelegationTokenRequest
                                     ) -> RenewDelegationTokenResponse:
        return self._refusal(context, RenewDelegationTokenResponse) \
            or await self.controller.renew_delegation_token(context.principal, request)

    async def expire_delegation_token(self, context: RequestContext, request: ExpireDelegationTokenRequest
                                      ) -> ExpireDelegationTokenResponse:
        return self._refusal(context, ExpireDelegationTokenResponse) \
            or await self.controller.expire_delegation_token(context.principal, request)

    def _refusal(self, context: RequestContext, response_class: type[R]) -> R | None:
        """Renew's or Expire's answer when the broker refuses it before the controller looks at the token."""
        if not _allows_token_requests(context):
            return response_class(error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
                                  expiry_timestamp_ms=ERROR_TIMESTAMP)
        if self.secret_key is None:
            return response_class(error_code=ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
        return None

    async def describe_delegation_token(self, context: RequestContext, request: DescribeDelegationTokenRequest
                                        ) -> DescribeDelegationTokenResponse:
        if not _allows_token_requests(context):
            return DescribeDelegationTokenResponse(error_code=ErrorCode.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
        if self.secret_key is None:
            return DescribeDelegationTokenResponse(error_code=ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED)
        owners = None if request.owners is None else {
            KafkaPrincipal(owner.principal_type, owner.principal_name) for owner in request.owners}
        tokens = [token for _, token in sorted(self.metadata_cache.image.delegation_tokens.items())
                  if (owners is None or token.owner in owners or token.requester in owners)
                  and self._may_describe(context, token)]
        return DescribeDelegationTokenResponse(tokens=[self._described(token) for token in tokens])

    def _may_describe(self, context: RequestContext, token: DelegationTokenData) -> bool:
        principal = context.principal
        return (principal == token.owner or principal == token.requester or principal in token.renewers
                or self.auth.authorize(context, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token.token_id)
                or self.auth.authorize(context, AclOperation.DESCRIBE_TOKENS, ResourceType.USER, str(token.owner)))

    def _described(self, token: DelegationTokenData) -> DescribeDelegationTokenResponse.DescribedDelegationToken:
        assert self.secret_key is not None
        Renewer = DescribeDelegationTokenResponse.DescribedDelegationTokenRenewer
        return DescribeDelegationTokenResponse.DescribedDelegationToken(
            principal_type=token.owner.principal_type, principal_name=token.owner.name,
            token_requester_principal_type=token.requester.principal_type,
            token_requester_principal_name=token.requester.name,
            issue_timestamp=token.issue_timestamp_ms, expiry_timestamp=token.expiry_timestamp_ms,
            max_timestamp=token.max_timestamp_ms, token_id=token.token_id,
            hmac=token_hmac(self.secret_key, token.token_id),
            renewers=[Renewer(principal_type=renewer.principal_type, principal_name=renewer.name)
                      for renewer in token.renewers])
