"""The metadata.version the controller writes at, and the record versions that level implies.

Kafka gates every change of the metadata record format behind a `metadata.version` feature level, finalized in the
log by a FeatureLevelRecord that the controller writes first, when it bootstraps an empty log. kfk writes level 7,
3.3-IV3: the oldest level Kafka 4.x still reads, and the one whose records kfk models fully (no directory ids
(3.7-IV2), no eligible leader replicas (KIP-966), no metadata transactions (3.6-IV1)). At that level broker
fencing changes are BrokerRegistrationChangeRecords (since 3.3-IV2) and registrations carry InControlledShutdown
(3.3-IV3), hence version 1 of both; every other record is written at version 0.
"""

from __future__ import annotations

METADATA_VERSION_FEATURE_NAME = "metadata.version"
METADATA_VERSION_LEVEL = 7  # IBP_3_3_IV3
METADATA_VERSION_NAME = "3.3-IV3"

#: Version written per record schema at METADATA_VERSION_LEVEL (absent: 0).
RECORD_VERSIONS: dict[str, int] = {
    "RegisterBrokerRecord": 1,
    "BrokerRegistrationChangeRecord": 1,
}


def record_version(schema_name: str) -> int:
    return RECORD_VERSIONS.get(schema_name, 0)
