"""The client quotas of the metadata image (Kafka's ClientQuotasImage), replayed from ClientQuotaRecords.

Quotas map each ClientQuotaEntity to its keys' values (doubles, as the record holds them). A record sets one key of
one entity, or removes it; an entity whose last key is removed leaves the image, as in Kafka.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

from kfk.common.client_quotas import ClientQuotaEntity
from kfk.protocol.message import Message

ClientQuotas = Mapping[ClientQuotaEntity, Mapping[str, float]]


def record_entity(record: Message) -> ClientQuotaEntity:
    """The entity of a ClientQuotaRecord (or of any message whose entity parts have entity_type/entity_name)."""
    return ClientQuotaEntity.of((part.entity_type, part.entity_name) for part in record.entity)


def apply_client_quota_record(quotas: dict[ClientQuotaEntity, Mapping[str, float]], record: Message) -> None:
    """Replay one ClientQuotaRecord into a mutable copy of the image's quotas."""
    entity = record_entity(record)
    values = dict(quotas.get(entity, {}))
    if record.remove:
        values.pop(record.key, None)
    else:
        values[record.key] = record.value
    if values:
        quotas[entity] = MappingProxyType(values)
    else:
        quotas.pop(entity, None)
