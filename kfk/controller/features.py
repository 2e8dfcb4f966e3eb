"""Feature versions (KIP-584): the metadata.version levels and the other finalized features as Kafka 4.4 defines
them, which of them kfk's nodes support, and the record versions the metadata.version level gates.

Kafka gates every change of the metadata record format behind a `metadata.version` level, finalized in the log by
a FeatureLevelRecord the controller writes first. Other features (transaction.version, group.version,
eligible.leader.replicas.version, ...) are finalized the same way, each level naming the metadata.version a release
bootstraps it at and the levels of other features it depends on (Kafka's server-common Feature enum; the facts
below are its 4.4.0 values). kraft.version is finalized by the metadata quorum itself (a KRaftVersion control
record: 1 for a dynamic quorum, KIP-853), never by a FeatureLevelRecord.

What kfk supports, honestly: metadata.version 3.3-IV3 (level 7) only. Every later level lets the controller write
records kfk does not write or read in Kafka's shape (RegisterBrokerRecord v2 with IsMigratingZkBroker at 3.4-IV0,
controller registrations at 3.7-IV0, directory ids at 3.7-IV2, ELR at 4.0-IV1, ...), so kfk refuses them with
Kafka's errors naming its highest level. At 3.3-IV3 broker fencing changes are BrokerRegistrationChangeRecords
(since 3.3-IV2) and registrations carry InControlledShutdown (3.3-IV3), hence version 1 of both; every other record
is written at version 0. transaction.version 0-2 (the transaction coordinator serves KIP-890 part 2) and
kraft.version 0-1 (dynamic voters) are supported; group.version, eligible.leader.replicas.version, share.version and
streams.version are not (yet): kfk supports level 0 of them only, which Kafka's nodes do not advertise either.
Raise a feature's `kfk_max` here, and nowhere else, when kfk serves its next level (KIP-848's group coordinator:
group.version 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

METADATA_VERSION_FEATURE_NAME = "metadata.version"
KRAFT_VERSION_FEATURE_NAME = "kraft.version"
TRANSACTION_VERSION_FEATURE_NAME = "transaction.version"
GROUP_VERSION_FEATURE_NAME = "group.version"
ELIGIBLE_LEADER_REPLICAS_VERSION_FEATURE_NAME = "eligible.leader.replicas.version"
SHARE_VERSION_FEATURE_NAME = "share.version"
STREAMS_VERSION_FEATURE_NAME = "streams.version"


@dataclass(frozen=True, slots=True)
class MetadataVersion:
    level: int
    #: Kafka's name, e.g. "3.3-IV3".
    name: str
    #: Whether the metadata records changed from the previous level (a downgrade across such a level may lose
    #: metadata: Kafka refuses it).
    metadata_changed: bool

    @property
    def release(self) -> str:
        return self.name.split("-")[0]


#: Kafka 4.4.0's production metadata.version levels, oldest first (3.3-IV3 is the oldest Kafka 4 reads).
METADATA_VERSIONS: tuple[MetadataVersion, ...] = tuple(MetadataVersion(level, name, changed) for level, name, changed in (
    (7, "3.3-IV3", True), (8, "3.4-IV0", True), (9, "3.5-IV0", False), (10, "3.5-IV1", False),
    (11, "3.5-IV2", True), (12, "3.6-IV0", False), (13, "3.6-IV1", True), (14, "3.6-IV2", True),
    (15, "3.7-IV0", True), (16, "3.7-IV1", False), (17, "3.7-IV2", True), (18, "3.7-IV3", False),
    (19, "3.7-IV4", False), (20, "3.8-IV0", False), (21, "3.9-IV0", False), (22, "4.0-IV0", False),
    (23, "4.0-IV1", True), (24, "4.0-IV2", False), (25, "4.0-IV3", False), (26, "4.1-IV0", False),
    (27, "4.1-IV1", False), (28, "4.2-IV0", False), (29, "4.2-IV1", False), (30, "4.3-IV0", True),
    (31, "4.4-IV0", False), (32, "4.4-IV1", True), (33, "4.4-IV2", True)))
_BY_LEVEL = {version.level: version for version in METADATA_VERSIONS}
_BY_NAME = {version.name: version for version in METADATA_VERSIONS}

#: The range of metadata.version levels kfk's controller writes and reads (see the module's docstring).
MINIMUM_METADATA_VERSION = _BY_LEVEL[7]
LATEST_METADATA_VERSION = _BY_LEVEL[7]
#: The level `kfk storage format` and a self-formatting node bootstrap with (kfk's latest).
METADATA_VERSION_LEVEL = LATEST_METADATA_VERSION.level
METADATA_VERSION_NAME = LATEST_METADATA_VERSION.name
#: Kafka 4.4's newest production level: what its storage tool formats by default.
KAFKA_LATEST_PRODUCTION = METADATA_VERSIONS[-1]


def metadata_version(level: int) -> MetadataVersion | None:
    return _BY_LEVEL.get(level)


def metadata_version_from_string(text: str) -> MetadataVersion | None:
    """A level by Kafka's name ("3.3-IV3") or release ("3.3": that release's newest level), as
    MetadataVersion.fromVersionString reads it; None for neither."""
    if text in _BY_NAME:
        return _BY_NAME[text]
    release = [version for version in METADATA_VERSIONS if version.release == text]
    return release[-1] if release else None


def metadata_changed_between(one: int, other: int) -> bool:
    """Whether any level after the lower of the two, up to the higher, changed the metadata records."""
    low, high = sorted((one, other))
    return any(version.metadata_changed for version in METADATA_VERSIONS if low < version.level <= high)


@dataclass(frozen=True, slots=True)
class FeatureLevel:
    level: int
    #: The metadata.version level from which a release bootstraps a cluster with this level by default.
    bootstrap_metadata_version: int
    #: Levels of other features this one needs (metadata.version among them).
    dependencies: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Feature:
    name: str
    levels: tuple[FeatureLevel, ...]
    #: The highest level kfk's nodes serve (0: kfk does not support the feature).
    kfk_max: int

    def default_level(self, metadata_version_level: int) -> int:
        """Kafka's default for a cluster bootstrapped at `metadata_version_level` (Feature.defaultLevel)."""
        return max(entry.level for entry in self.levels if entry.bootstrap_metadata_version <= metadata_version_level)

    def level(self, level: int) -> FeatureLevel | None:
        return next((entry for entry in self.levels if entry.level == level), None)


#: Kafka 4.4.0's production features other than metadata.version, by name.
FEATURES: dict[str, Feature] = {feature.name: feature for feature in (
    Feature(KRAFT_VERSION_FEATURE_NAME, (FeatureLevel(0, 7), FeatureLevel(1, 21)), kfk_max=1),
    Feature(TRANSACTION_VERSION_FEATURE_NAME, (FeatureLevel(0, 7), FeatureLevel(1, 24), FeatureLevel(2, 24)),
            kfk_max=2),
    Feature(GROUP_VERSION_FEATURE_NAME, (FeatureLevel(0, 7), FeatureLevel(1, 22)), kfk_max=0),
    Feature(ELIGIBLE_LEADER_REPLICAS_VERSION_FEATURE_NAME,
            (FeatureLevel(0, 7), FeatureLevel(1, 26, {METADATA_VERSION_FEATURE_NAME: 23})), kfk_max=0),
    Feature(SHARE_VERSION_FEATURE_NAME, (FeatureLevel(0, 7), FeatureLevel(1, 28), FeatureLevel(2, 31)), kfk_max=0),
    Feature(STREAMS_VERSION_FEATURE_NAME, (FeatureLevel(0, 7), FeatureLevel(1, 29)), kfk_max=0),
)}


def supported_features() -> dict[str, tuple[int, int]]:
    """The (lowest, highest) level of each feature a kfk node supports: what its ApiVersions advertises and its
    BrokerRegistration tells the controller. Features kfk serves at level 0 only are left out, as Kafka leaves
    out a feature it does not know."""
    supported = {METADATA_VERSION_FEATURE_NAME: (MINIMUM_METADATA_VERSION.level, LATEST_METADATA_VERSION.level)}
    for feature in FEATURES.values():
        if feature.kfk_max > 0:
            supported[feature.name] = (0, feature.kfk_max)
    return dict(sorted(supported.items()))


def zookeeper_supported_features() -> dict[str, tuple[int, int]]:
    """What a broker in ZooKeeper mode supports: the same less metadata.version, which is KRaft's (Kafka 3.x's
    ZooKeeper brokers do not list it)."""
    supported = supported_features()
    del supported[METADATA_VERSION_FEATURE_NAME]
    return supported


def dependency_problem(name: str, level: int, proposed: Mapping[str, int]) -> str | None:
    """Why `name` may not be finalized at `level` beside the `proposed` levels (metadata.version among them), in
    Kafka's words (Feature.validateVersion); None when its dependencies hold."""
    feature = FEATURES.get(name)
    entry = feature.level(level) if feature is not None else None
    if entry is None:
        return None
    for dependency, needed in entry.dependencies.items():
        if proposed.get(dependency, 0) < needed:
            return f"{name} could not be set to {level} because it depends on {dependency} level {needed}"
    return None


def default_feature_levels(metadata_version_level: int) -> dict[str, int]:
    """The levels Kafka's storage tool finalizes with a metadata.version (its release's defaults), every feature
    but kraft.version (the quorum's), metadata.version first."""
    levels = {METADATA_VERSION_FEATURE_NAME: metadata_version_level}
    for feature in FEATURES.values():
        if feature.name != KRAFT_VERSION_FEATURE_NAME:
            levels[feature.name] = feature.default_level(metadata_version_level)
    return levels


def kfk_default_feature_levels() -> dict[str, int]:
    """What kfk bootstraps a cluster with when not told a release: its latest metadata.version, and each feature it
    supports at the level Kafka's latest release defaults to (capped at what kfk serves): transaction.version 2,
    as an Apache Kafka 4.x cluster formatted by default has it."""
    levels = {METADATA_VERSION_FEATURE_NAME: LATEST_METADATA_VERSION.level}
    for name, level in default_feature_levels(KAFKA_LATEST_PRODUCTION.level).items():
        feature = FEATURES.get(name)
        if feature is not None and min(level, feature.kfk_max) > 0 \
                and dependency_problem(name, min(level, feature.kfk_max), levels) is None:
            levels[name] = min(level, feature.kfk_max)
    return levels


def finalized_level(features: Mapping[str, int], name: str) -> int:
    """A feature's finalized level in an image's features (0 when not finalized). The one place other layers read
    a level from, e.g. the group coordinator's group.version: `finalized_level(image.features, GROUP_VERSION_...)`."""
    return features.get(name, 0)


#: Version written per record schema at METADATA_VERSION_LEVEL (absent: 0).
RECORD_VERSIONS: dict[str, int] = {
    "RegisterBrokerRecord": 1,
    "BrokerRegistrationChangeRecord": 1,
}


def record_version(schema_name: str) -> int:
    return RECORD_VERSIONS.get(schema_name, 0)
