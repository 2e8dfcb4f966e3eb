"""API keys and the version range kfk speaks for each API.

kfk's range is the whole range of Kafka's schemas, minus versions Kafka marks as still in development
(`latestVersionUnstable`, which Kafka only advertises with unstable.api.versions.enable=true), and minus the
newest versions of the few APIs that name topics by id, which the client does not send yet (_CLIENT_HIGHEST). The broker does not
advertise from this table: it advertises its own served versions table (kfk/server/dispatch.py), every row of which
has a handler, so it never claims an API it cannot serve. The client picks, per API, the highest version both sides
know.
"""

from __future__ import annotations

from typing import NamedTuple

from kfk.protocol.messages import API_SCHEMAS, ApiKey

__all__ = ["ApiKey", "VersionRange", "SCHEMA_VERSIONS", "SUPPORTED_VERSIONS", "highest_common_version"]


class VersionRange(NamedTuple):
    lowest: int
    highest: int

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lowest <= version <= self.highest


#: Every API's versions in Kafka's schemas, minus those still in development: what a broker of the vendored release
#: advertises at most.
SCHEMA_VERSIONS: dict[ApiKey, VersionRange] = {
    ApiKey(key): VersionRange(
        schema.lowest_version, schema.highest_version - (1 if schema.latest_version_unstable else 0)
    )
    for key, schema in API_SCHEMAS.items()
}

#: The newest version kfk's client sends of the APIs whose latest versions name topics by id instead of by name
#: (Produce v13, KIP-516; OffsetCommit/OffsetFetch v10, KIP-848; TxnOffsetCommit v6, KIP-1319): its producer,
#: consumer and transaction manager still address topics by name.
_CLIENT_HIGHEST: dict[ApiKey, int] = {
    ApiKey.PRODUCE: 12,
    ApiKey.OFFSET_COMMIT: 9,
    ApiKey.OFFSET_FETCH: 9,
    ApiKey.TXN_OFFSET_COMMIT: 5,
}

SUPPORTED_VERSIONS: dict[ApiKey, VersionRange] = {
    key: VersionRange(versions.lowest, min(versions.highest, _CLIENT_HIGHEST.get(key, versions.highest)))
    for key, versions in SCHEMA_VERSIONS.items()
}


def highest_common_version(api_key: ApiKey, peer_lowest: int, peer_highest: int) -> int | None:
    """The version to use with a peer that supports [peer_lowest, peer_highest], or None if the ranges miss."""
    ours = SUPPORTED_VERSIONS.get(api_key)
    if ours is None:
        return None
    highest = min(ours.highest, peer_highest)
    return highest if highest >= max(ours.lowest, peer_lowest) else None
