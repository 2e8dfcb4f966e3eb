"""The SCRAM credentials part of the metadata image: per user and SCRAM mechanism, what the broker needs to check a
SCRAM exchange (salt, StoredKey, ServerKey, iterations), never a password.

UserScramCredentialRecord sets one user's credential for one mechanism (replacing any earlier one);
RemoveUserScramCredentialRecord removes it. The mechanism is the record's type number (1 SCRAM-SHA-256,
2 SCRAM-SHA-512), as DescribeUserScramCredentials reports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kfk.metadata.image import _Delta


@dataclass(frozen=True, slots=True)
class ScramCredentialData:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _mutable(delta: _Delta) -> dict[tuple[str, int], ScramCredentialData]:
    if delta.scram_credentials is None:
        delta.scram_credentials = dict(delta.image.scram_credentials)
    return delta.scram_credentials


def user_scram_credential_record(delta: _Delta, record: Any) -> None:
    _mutable(delta)[(record.name, record.mechanism)] = ScramCredentialData(
        bytes(record.salt), bytes(record.stored_key), bytes(record.server_key), record.iterations)


def remove_user_scram_credential_record(delta: _Delta, record: Any) -> None:
    _mutable(delta).pop((record.name, record.mechanism), None)
