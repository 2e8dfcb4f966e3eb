"""What kfk's nodes support of the feature versions (kfk/common/features.py has Kafka's facts), and the record
versions kfk's metadata.version gates.

metadata.version: 3.3-IV3 (level 7) only. Every later level lets a controller write records kfk does not write or
read in Kafka's shape (RegisterBrokerRecord v2 with IsMigratingZkBroker at 3.4-IV0, SCRAM records only from
3.5-IV2, metadata transactions at 3.6-IV1, controller registrations at 3.7-IV0, directory ids at 3.7-IV2, ELR at
4.0-IV1, ...), so kfk refuses them with Kafka's errors naming its highest level. At 3.3-IV3 broker fencing changes
are BrokerRegistrationChangeRecords (since 3.3-IV2) and registrations carry InControlledShutdown (3.3-IV3), hence
version 1 of both; every other record is written at version 0.

The other features, by the highest level kfk serves (KFK_MAX_LEVELS): transaction.version 2 (the transaction
coordinator serves KIP-890 part 2), kraft.version 1 (dynamic voters) and group.version 1 (KIP-848's consumer group
protocol, which it enables; it depends on no metadata.version, so kfk finalizes it at its 3.3-IV3).
eligible.leader.replicas.version, share.version and streams.version are at 0: kfk does not serve them (yet), and
leaves them out of what it advertises, as a Kafka node leaves out a feature it does not know (kfk serves share groups
without share.version: kfk/server/handlers/share_groups.py says why). Raise a level here, and nowhere else, when kfk
serves it.
"""

from __future__ import annotations

from kfk.common.features import (
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

#: The range of metadata.version levels kfk's controller writes and reads (see the module's docstring).
MINIMUM_METADATA_VERSION = metadata_version(7)
LATEST_METADATA_VERSION = metadata_version(7)
#: The level `kfk storage format` and a self-formatting node bootstrap with (kfk's latest).
METADATA_VERSION_LEVEL = LATEST_METADATA_VERSION.level
METADATA_VERSION_NAME = LATEST_METADATA_VERSION.name

#: The highest level kfk serves of each feature other than metadata.version (absent or 0: not supported).
KFK_MAX_LEVELS: dict[str, int] = {
    KRAFT_VERSION_FEATURE_NAME: 1,
    TRANSACTION_VERSION_FEATURE_NAME: 2,
    GROUP_VERSION_FEATURE_NAME: 1,
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
    ZooKeeper brokers do not list it)."""
    supported = supported_features()
    del supported[METADATA_VERSION_FEATURE_NAME]
    return supported


def kfk_default_feature_levels() -> dict[str, int]:
    """What kfk bootstraps a cluster with when not told a release: its latest metadata.version, and each feature it
    supports at the level Kafka's latest release defaults to (capped at what kfk serves, dependencies holding):
    group.version 1 and transaction.version 2, as an Apache Kafka 4 cluster formatted by default has them, in the
    order Kafka's format writes them (metadata.version, then by name). Kafka's tool would format its latest release,
    4.4-IV2, whose metadata kfk does not serve."""
    levels = {METADATA_VERSION_FEATURE_NAME: LATEST_METADATA_VERSION.level}
    for name, level in sorted(default_feature_levels(KAFKA_LATEST_PRODUCTION.level).items()):
        capped = min(level, KFK_MAX_LEVELS.get(name, 0))
        if name in FEATURES and capped > 0 and dependency_problem(name, capped, levels) is None:
            levels[name] = capped
    return levels


#: Version written per record schema at METADATA_VERSION_LEVEL (absent: 0).
RECORD_VERSIONS: dict[str, int] = {
    "RegisterBrokerRecord": 1,
    "BrokerRegistrationChangeRecord": 1,
}


def record_version(schema_name: str) -> int:
    return RECORD_VERSIONS.get(schema_name, 0)
