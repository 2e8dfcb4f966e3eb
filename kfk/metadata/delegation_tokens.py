"""The delegation tokens part of the metadata image (KIP-48, kept in the metadata log since KIP-900).

A token is what DelegationTokenRecord holds: its id, owner, requester, renewers and three times (issued, renewable
until, expires). The record never holds the token's secret: its HMAC is HMAC-SHA512 of the token id keyed by the
cluster's `delegation.token.secret.key`, which every broker and controller is configured with, so each derives it
(`token_hmac`) and nothing secret is written to the log. DelegationTokenRecord replaces a token (created or renewed,
or expired to a new time); RemoveDelegationTokenRecord removes it (expired now, or past its expiry).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kfk.protocol.message import Message
from kfk.protocol.metadata_records import schema_class
from kfk.security.principal import KafkaPrincipal

if TYPE_CHECKING:
    from kfk.metadata.image import _Delta


@dataclass(frozen=True, slots=True)
class DelegationTokenData:
    token_id: str
    owner: KafkaPrincipal
    requester: KafkaPrincipal
    renewers: tuple[KafkaPrincipal, ...]
    issue_timestamp_ms: int
    max_timestamp_ms: int
    expiry_timestamp_ms: int

    def is_expired(self, now_ms: int) -> bool:
        """Past its expiry or its maximum lifetime (Kafka compares with `<`: a token is valid at its expiry ms)."""
        return self.expiry_timestamp_ms < now_ms or self.max_timestamp_ms < now_ms

    def may_renew(self, principal: KafkaPrincipal) -> bool:
        """The owner and the listed renewers may renew or expire a token (and see it in DescribeDelegationToken)."""
        return principal == self.owner or principal in self.renewers


def token_hmac(secret_key: str, token_id: str) -> bytes:
    """The token's secret: HMAC-SHA512 of its id under delegation.token.secret.key (both as UTF-8), as Kafka's
    controller computes it; clients authenticate with its base64 form as the SCRAM password."""
    return hmac.new(secret_key.encode(), token_id.encode(), hashlib.sha512).digest()


def _mutable(delta: _Delta) -> dict[str, DelegationTokenData]:
    if delta.delegation_tokens is None:
        delta.delegation_tokens = dict(delta.image.delegation_tokens)
    return delta.delegation_tokens


def _principal(text: str) -> KafkaPrincipal:
    return KafkaPrincipal.parse(text)


def delegation_token_record(delta: _Delta, record: Any) -> None:
    _mutable(delta)[record.token_id] = DelegationTokenData(
        token_id=record.token_id, owner=_principal(record.owner), requester=_principal(record.requester),
        renewers=tuple(_principal(renewer) for renewer in record.renewers),
        issue_timestamp_ms=record.issue_timestamp, max_timestamp_ms=record.max_timestamp,
        expiry_timestamp_ms=record.expiration_timestamp)


def remove_delegation_token_record(delta: _Delta, record: Any) -> None:
    _mutable(delta).pop(record.token_id, None)


DelegationTokenRecord = schema_class("DelegationTokenRecord")
RemoveDelegationTokenRecord = schema_class("RemoveDelegationTokenRecord")


def record_of(token: DelegationTokenData) -> Message:
    """The DelegationTokenRecord that (re)creates `token` in an image."""
    return DelegationTokenRecord(
        owner=str(token.owner), requester=str(token.requester), renewers=[str(r) for r in token.renewers],
        issue_timestamp=token.issue_timestamp_ms, max_timestamp=token.max_timestamp_ms,
        expiration_timestamp=token.expiry_timestamp_ms, token_id=token.token_id)
