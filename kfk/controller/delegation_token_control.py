"""Delegation tokens in the metadata (KIP-48; Kafka's DelegationTokenControlManager): CreateDelegationToken,
RenewDelegationToken and ExpireDelegationToken become DelegationTokenRecord / RemoveDelegationTokenRecord, and the
active controller removes tokens past their expiry every delegation.token.expiry.check.interval.ms.

The broker has already refused what it refuses before forwarding (a token-authenticated or unauthenticated
requester, CREATE_TOKENS for another owner: kfk/server/handlers/delegation_tokens.py); the controller decides the
rest, in Kafka's order. Times: a new token may be renewed until now + min(its requested max lifetime, when positive,
delegation.token.max.lifetime.ms) and expires at now + delegation.token.expiry.time.ms, never past that maximum; a
renewal sets the expiry to now + min(the requested period, when positive, delegation.token.expiry.time.ms), capped by
the maximum; an expiry with a negative period removes the token at once, else sets its expiry to now + the period,
capped by the maximum. Tokens need delegation.token.secret.key (DELEGATION_TOKEN_AUTH_DISABLED without it), and in
KRaft metadata.version 3.6-IV2 or later to be created (UNSUPPORTED_VERSION before: the QuorumController checks).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, replace

from kfk.common.uuids import random_base64_uuid
from kfk.controller.result import ControllerResult
from kfk.errors import ErrorCode
from kfk.metadata.delegation_tokens import (DelegationTokenData, RemoveDelegationTokenRecord, record_of,
                                            token_hmac)
from kfk.metadata.image import MetadataImage
from kfk.protocol.messages.create_delegation_token import (CreateDelegationTokenRequest,
                                                            CreateDelegationTokenResponse)
from kfk.protocol.messages.expire_delegation_token import (ExpireDelegationTokenRequest,
                                                            ExpireDelegationTokenResponse)
from kfk.protocol.messages.renew_delegation_token import RenewDelegationTokenRequest, RenewDelegationTokenResponse
from kfk.security.principal import USER_TYPE, KafkaPrincipal


@dataclass(frozen=True, slots=True)
class DelegationTokenSettings:
    """The broker configs that govern tokens (secret_key None: tokens are disabled)."""

    secret_key: str | None
    max_lifetime_ms: int  # delegation.token.max.lifetime.ms
    expiry_time_ms: int  # delegation.token.expiry.time.ms


def token_for_hmac(image: MetadataImage, secret_key: str, token_hmac_bytes: bytes) -> DelegationTokenData | None:
    """The token whose HMAC this is (clients name a token by its HMAC in Renew and Expire)."""
    for token in image.delegation_tokens.values():
        if hmac.compare_digest(token_hmac(secret_key, token.token_id), token_hmac_bytes):
            return token
    return None


def create_delegation_token(image: MetadataImage, settings: DelegationTokenSettings, now_ms: int,
                            requester: KafkaPrincipal, request: CreateDelegationTokenRequest
                            ) -> ControllerResult[CreateDelegationTokenResponse]:
    owner = requester
    if request.owner_principal_name:  # v3+: a token for someone else (the broker checked CREATE_TOKENS)
        owner = KafkaPrincipal(request.owner_principal_type or USER_TYPE, request.owner_principal_name)
    response = CreateDelegationTokenResponse(
        principal_type=owner.principal_type, principal_name=owner.name,
        token_requester_principal_type=requester.principal_type, token_requester_principal_name=requester.name)
    if settings.secret_key is None:
        response.error_code = ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
        return ControllerResult(response, [])
    renewers = []
    for renewer in request.renewers:
        if renewer.principal_type != USER_TYPE:
            response.error_code = ErrorCode.INVALID_PRINCIPAL_TYPE
            return ControllerResult(response, [])
        renewers.append(KafkaPrincipal(renewer.principal_type, renewer.principal_name))
    max_lifetime_ms = settings.max_lifetime_ms
    if request.max_lifetime_ms > 0:
        max_lifetime_ms = min(max_lifetime_ms, request.max_lifetime_ms)
    max_timestamp_ms = now_ms + max_lifetime_ms
    token = DelegationTokenData(
        token_id=random_base64_uuid(), owner=owner, requester=requester, renewers=tuple(renewers),
        issue_timestamp_ms=now_ms, max_timestamp_ms=max_timestamp_ms,
        expiry_timestamp_ms=min(max_timestamp_ms, now_ms + settings.expiry_time_ms))
    response.issue_timestamp_ms = token.issue_timestamp_ms
    response.expiry_timestamp_ms = token.expiry_timestamp_ms
    response.max_timestamp_ms = token.max_timestamp_ms
    response.token_id = token.token_id
    response.hmac = token_hmac(settings.secret_key, token.token_id)
    return ControllerResult(response, [record_of(token)])


def _renewable(image: MetadataImage, settings: DelegationTokenSettings, now_ms: int, principal: KafkaPrincipal,
               token_hmac_bytes: bytes) -> tuple[DelegationTokenData | None, int]:
    """The token a Renew or Expire names, or the error that refuses it (Kafka's order)."""
    if settings.secret_key is None:
        return None, ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED
    token = token_for_hmac(image, settings.secret_key, bytes(token_hmac_bytes))
    if token is None:
        return None, ErrorCode.DELEGATION_TOKEN_NOT_FOUND
    if token.is_expired(now_ms):
        return None, ErrorCode.DELEGATION_TOKEN_EXPIRED
    if not token.may_renew(principal):
        return None, ErrorCode.DELEGATION_TOKEN_OWNER_MISMATCH
    return token, ErrorCode.NONE


def renew_delegation_token(image: MetadataImage, settings: DelegationTokenSettings, now_ms: int,
                           principal: KafkaPrincipal, request: RenewDelegationTokenRequest
                           ) -> ControllerResult[RenewDelegationTokenResponse]:
    token, error = _renewable(image, settings, now_ms, principal, request.hmac)
    if token is None:
        return ControllerResult(RenewDelegationTokenResponse(error_code=error), [])
    period_ms = settings.expiry_time_ms
    if request.renew_period_ms > 0:
        period_ms = min(period_ms, request.renew_period_ms)
    renewed = replace(token, expiry_timestamp_ms=min(token.max_timestamp_ms, now_ms + period_ms))
    return ControllerResult(RenewDelegationTokenResponse(expiry_timestamp_ms=renewed.expiry_timestamp_ms),
                            [record_of(renewed)])


def expire_delegation_token(image: MetadataImage, settings: DelegationTokenSettings, now_ms: int,
                            principal: KafkaPrincipal, request: ExpireDelegationTokenRequest
                            ) -> ControllerResult[ExpireDelegationTokenResponse]:
    token, error = _renewable(image, settings, now_ms, principal, request.hmac)
    if token is None:
        return ControllerResult(ExpireDelegationTokenResponse(error_code=error), [])
    if request.expiry_time_period_ms < 0:  # at once: the token is gone
        return ControllerResult(ExpireDelegationTokenResponse(expiry_timestamp_ms=request.expiry_time_period_ms),
                                [RemoveDelegationTokenRecord(token_id=token.token_id)])
    expired = replace(token, expiry_timestamp_ms=min(token.max_timestamp_ms, now_ms + request.expiry_time_period_ms))
    return ControllerResult(ExpireDelegationTokenResponse(expiry_timestamp_ms=expired.expiry_timestamp_ms),
                            [record_of(expired)])


def remove_expired_tokens(image: MetadataImage, now_ms: int) -> ControllerResult[int]:
    """The tokens past their expiry or maximum lifetime, removed (the controller's periodic sweep); the count."""
    records = [RemoveDelegationTokenRecord(token_id=token_id)
               for token_id, token in sorted(image.delegation_tokens.items()) if token.is_expired(now_ms)]
    return ControllerResult(len(records), records)
