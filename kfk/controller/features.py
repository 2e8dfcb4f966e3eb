"""What kfk's nodes support of the feature versions (kfk/common/features.py has Kafka's facts), and the record
versions each metadata.version gives.

metadata.version: every production level of Kafka 4.4, 3.3-IV3 (7) to 4.4-IV2 (33). A level decides the versions the
controller writes records at (`record_version`, Kafka's MetadataVersion table) and what it may record: log dir ids
in broker registrations and partitions from 3.7-IV2 (kfk/metadata/directories.py), eligible leader replicas from
4.0-IV1 with eligible.leader.replicas.version 1. kfk's controller never needs a metadata transaction (each of its
writes fits one batch), nor writes controller registrations; it reads both as Kafka writes them.

The other features, by the highest level kfk serves (KFK_MAX_LEVELS): transaction.version 2 (the transaction
coordinator serves KIP-890 part 2), kraft.version 1 (dynamic voters), group.version 1 (KIP-848's consumer group
protocol) and eligible.leader.replicas.version 1 (KIP-966's ELR, kfk/controller/partition_change.py).
share.version and streams.version are at 0: kfk does not serve them (yet), and leaves them out of what it advertises, as a Kafka node leaves out a feature it does not know (kfk serves
share groups without share.version: kfk/server/handlers/share_groups.py says why). Raise a level here, and nowhere
else, when kfk serves it.
"""

from __future__ import annotations

from kfk.common.features import (
    ELIGIBLE_LEADER_REPLICAS_VERSION_FEATURE_NAME,
    FEATURES,
    GROUP_VERSION_FEATURE_NAME,
    KAFKA_LATEST_PRODUCTION,
    KRAFT_VERSION_FEATURE_NAME,
    METADATA_VERSION_FEATURE_NAME,
    TRANSACTION_VERSION_FEATURE_NAME,
    default_feature_levels,
    dependency_problem,
    metadata_version,
)
from kfk.protocol.message import Message

#: The range of metadata.version levels kfk's controller writes and reads (see the module's docstring).
MINIMUM_METADATA_VERSION = metadata_version(7)
LATEST_METADATA_VERSION = KAFKA_LATEST_PRODUCTION
#: The level `kfk storage format` and a self-formatting node bootstrap with (kfk's latest).
METADATA_VERSION_LEVEL = LATEST_METADATA_VERSION.level
METADATA_VERSION_NAME = LATEST_METADATA_VERSION.name

#: The highest level kfk serves of each feature other than metadata.version (absent or 0: not supported).
KFK_MAX_LEVELS: dict[str, int] = {
    KRAFT_VERSION_FEATURE_NAME: 1,
    TRANSACTION_VERSION_FEATURE_NAME: 2,
    GROUP_VERSION_FEATURE_NAME: 1,
    ELIGIBLE_LEADER_REPLICAS_VERSION_FEATURE_NAME: 1,
}


def supported_features() -> dict[str, tuple[int, int]]:
    """The (lowest, highest) level of each feature a kfk node supports, by name: what its ApiVersions advertises, its
    BrokerRegistration tells the controller, and its controller checks an update against."""
    supported = {METADATA_VERSION_FEATURE_NAME: (MINIMUM_METADATA_VERSION.level, LATEST_METADATA_VERSION.level)}
    for name, highest in KFK_MAX_LEVELS.items():
        if highest > 0:
            supported[name] = (0, highest)
    return dict(sorted(supported.items()))


def zookeeper_supported_features() -> dict[str, tuple[int, int]]:
    """What a broker in ZooKeeper mode supports: the same less metadata.version, which is KRaft's (Kafka 3.x's
    ZooKeeper brokers do not list it), and less eligible.leader.replicas.version, which needs a metadata.version."""
    supported = supported_features()
    del supported[METADATA_VERSION_FEATURE_NAME]
    del supported[ELIGIBLE_LEADER_REPLICAS_VERSION_FEATURE_NAME]
    return supported


def kfk_default_feature_levels() -> dict[str, int]:
    """What kfk bootstraps a cluster with when not told a release: its latest metadata.version, and each feature it
    supports at the level Kafka's latest release defaults to (capped at what kfk serves, dependencies holding):
    group.version 1 and transaction.version 2, as an Apache Kafka 4.4 cluster formatted by default has them, in the
    order Kafka's format writes them (metadata.version, then by name)."""
    levels = {METADATA_VERSION_FEATURE_NAME: LATEST_METADATA_VERSION.level}
    for name, level in sorted(default_feature_levels(KAFKA_LATEST_PRODUCTION.level).items()):
        capped = min(level, KFK_MAX_LEVELS.get(name, 0))
        if name in FEATURES and capped > 0 and dependency_problem(name, capped, levels) is None:
            levels[name] = capped
    return levels


#: metadata.version levels that change what the controller writes (Kafka's MetadataVersion gates, 4.4.0).
MIGRATION_LEVEL = 8                  # 3.4-IV0: RegisterBrokerRecord v2 (IsMigratingZkBroker)
SCRAM_LEVEL = 11                     # 3.5-IV2: SCRAM credentials in the metadata log
NO_EPOCH_BUMP_ON_ISR_SHRINK_LEVEL = 12  # 3.6-IV0: an ISR shrink no longer starts a new leader epoch
METADATA_TRANSACTIONS_LEVEL = 13     # 3.6-IV1: Begin/End/AbortTransactionRecord
DELEGATION_TOKENS_LEVEL = 14         # 3.6-IV2: DelegationTokenRecord
CONTROLLER_REGISTRATION_LEVEL = 15   # 3.7-IV0: RegisterControllerRecord
DIRECTORY_ASSIGNMENT_LEVEL = 17      # 3.7-IV2: log dir ids in registrations and partitions (JBOD in KRaft)
ELR_LEVEL = 23                       # 4.0-IV1: eligible leader replicas in partition records (KIP-966)
CORDONED_LOG_DIRS_LEVEL = 30         # 4.3-IV0: RegisterBrokerRecord v4 (CordonedLogDirs)
CIDR_ACL_LEVEL = 32                  # 4.4-IV1: ACL hosts as CIDR blocks
CONTROLLER_UNREGISTRATION_LEVEL = 33  # 4.4-IV2: UnregisterControllerRecord


def record_version(record: Message, metadata_version_level: int) -> int:
    """The version a record is written at under a metadata.version, as Kafka's controller writes it: the
    registration and partition records follow the level (MetadataVersion.registerBrokerRecordVersion,
    partitionRecordVersion, partitionChangeRecordVersion); BrokerRegistrationChangeRecord takes the lowest version
    that holds what it changes (a fencing change v0, a controlled shutdown v1, log dirs v2, cordoned dirs v3);
    every other record is version 0."""
    name = record.NAME
    if name == "RegisterBrokerRecord":
        return (4 if metadata_version_level >= CORDONED_LOG_DIRS_LEVEL else
                3 if metadata_version_level >= DIRECTORY_ASSIGNMENT_LEVEL else
                2 if metadata_version_level >= MIGRATION_LEVEL else 1)
    if name in ("PartitionRecord", "PartitionChangeRecord"):
        return (2 if metadata_version_level >= ELR_LEVEL else
                1 if metadata_version_level >= DIRECTORY_ASSIGNMENT_LEVEL else 0)
    if name == "BrokerRegistrationChangeRecord":
        return (3 if record.cordoned_log_dirs is not None else 2 if record.log_dirs else
                1 if record.in_controlled_shutdown else 0)
    return 0
