"""Client quotas, the shared vocabulary: entity types, quota keys and the entity a quota is set on.

One home for what the metadata image (kfk.metadata.client_quotas), the controller (AlterClientQuotas validation),
the ZooKeeper backend (/config/users, /config/clients) and the broker's quota managers (kfk.security.quotas) all
name: Kafka's ClientQuotaEntity types and QuotaConfigs keys.
"""

from __future__ import annotations

from enum import Enum
from typing import Iterable, NamedTuple

__all__ = [
    "USER", "CLIENT_ID", "IP", "ENTITY_TYPES", "PRODUCER_BYTE_RATE", "CONSUMER_BYTE_RATE", "REQUEST_PERCENTAGE",
    "CONTROLLER_MUTATION_RATE", "CONNECTION_CREATION_RATE", "QuotaValueType", "USER_CLIENT_QUOTA_KEYS",
    "IP_QUOTA_KEYS", "ClientQuotaEntity",
]

#: Entity types (Kafka's ClientQuotaEntity.USER / CLIENT_ID / IP); an entity name None is the type's default.
USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

#: Quota keys (Kafka's QuotaConfigs).
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"


class QuotaValueType(Enum):
    """How a quota key's value is checked: LONG and INT keys must hold whole numbers."""

    LONG = "LONG"
    DOUBLE = "DOUBLE"
    INT = "INT"


#: The keys a user, client-id or user+client-id entity takes, with their ConfigDef types (Kafka's
#: QuotaConfig.userAndClientQuotaConfigs); an ip entity takes IP_QUOTA_KEYS.
USER_CLIENT_QUOTA_KEYS: dict[str, QuotaValueType] = {
    PRODUCER_BYTE_RATE: QuotaValueType.LONG,
    CONSUMER_BYTE_RATE: QuotaValueType.LONG,
    REQUEST_PERCENTAGE: QuotaValueType.DOUBLE,
    CONTROLLER_MUTATION_RATE: QuotaValueType.DOUBLE,
}
IP_QUOTA_KEYS: dict[str, QuotaValueType] = {CONNECTION_CREATION_RATE: QuotaValueType.INT}


class ClientQuotaEntity(NamedTuple):
    """What a quota is set on: a user, a client-id, both, or an ip, as (type, name) parts; a None name is that
    type's <default>, and a type that is absent is no part of the entity (Kafka's ClientQuotaEntity map)."""

    #: ((entity type, name or None for <default>), ...) sorted by type: hashable, and one spelling per entity.
    parts: tuple[tuple[str, str | None], ...]

    @classmethod
    def of(cls, parts: Iterable[tuple[str, str | None]]) -> ClientQuotaEntity:
        return cls(tuple(sorted(parts, key=lambda part: part[0])))

    def sort_key(self) -> tuple:
        """An order over entities (a default, None, sorts before every name of its type)."""
        return tuple((kind, name is not None, name or "") for kind, name in self.parts)

    def as_dict(self) -> dict[str, str | None]:
        return dict(self.parts)

    def __str__(self) -> str:
        return ", ".join(f"{kind}={'<default>' if name is None else name}" for kind, name in self.parts)
