"""Feature versions (KIP-584) as Kafka 4.4 defines them: the metadata.version levels and the other features'
levels, each with the metadata.version a release bootstraps it at and the levels of other features it depends on
(facts from Kafka's server-common MetadataVersion and Feature enums, 4.4.0). What kfk's nodes support of them is
kfk/controller/features.py's; the broker, the controller and the tools (`kfk features`, `kfk storage format`) read
the facts here.

kraft.version is finalized by the metadata quorum itself (a KRaftVersion control record: 1 for a dynamic quorum,
KIP-853), never by a FeatureLevelRecord.
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
METADATA_VERSIONS: tuple[MetadataVersion, ...] = tuple(MetadataVersion(*version) for version in (
    (7, "3.3-IV3", True), (8, "3.4-IV0", True), (9, "3.5-IV0", False), (10, "3.5-IV1", False),
    (11, "3.5-IV2", True), (12, "3.6-IV0", False), (13, "3.6-IV1", True), (14, "3.6-IV2", True),
    (15, "3.7-IV0", True), (16, "3.7-IV1", False), (17, "3.7-IV2", True), (18, "3.7-IV3", False),
    (19, "3.7-IV4", False), (20, "3.8-IV0", False), (21, "3.9-IV0", False), (22, "4.0-IV0", False),
    (23, "4.0-IV1", True), (24, "4.0-IV2", False), (25, "4.0-IV3", False), (26, "4.1-IV0", False),
    (27, "4.1-IV1", False), (28, "4.2-IV0", False), (29, "4.2-IV1", False), (30, "4.3-IV0", True),
    (31, "4.4-IV0", False), (32, "4.4-IV1", True), (33, "4.4-IV2", True)))
_BY_LEVEL = {version.level: version for version in METADATA_VERSIONS}
_BY_NAME = {version.name: version for version in METADATA_VERSIONS}
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

    def default_level(self, metadata_version_level: int) -> int:
        """Kafka's default for a cluster bootstrapped at `metadata_version_level` (Feature.defaultLevel)."""
        return max(entry.level for entry in self.levels if entry.bootstrap_metadata_version <= metadata_version_level)

    def level(self, level: int) -> FeatureLevel | None:
        return next((entry for entry in self.levels if entry.level == level), None)


#: Kafka 4.4.0's production features other than metadata.version, in Kafka's order.
FEATURES: dict[str, Feature] = {feature.name: feature for feature in (
    Feature(KRAFT_VERSION_FEATURE_NAME, (FeatureLevel(0, 7), FeatureLevel(1, 21))),
    Feature(TRANSACTION_VERSION_FEATURE_NAME, (FeatureLevel(0, 7), FeatureLevel(1, 24), FeatureLevel(2, 24))),
    Feature(GROUP_VERSION_FEATURE_NAME, (FeatureLevel(0, 7), FeatureLevel(1, 22))),
    Feature(ELIGIBLE_LEADER_REPLICAS_VERSION_FEATURE_NAME,
            (FeatureLevel(0, 7), FeatureLevel(1, 26, {METADATA_VERSION_FEATURE_NAME: 23}))),
    Feature(SHARE_VERSION_FEATURE_NAME, (FeatureLevel(0, 7), FeatureLevel(1, 28), FeatureLevel(2, 31))),
    Feature(STREAMS_VERSION_FEATURE_NAME, (FeatureLevel(0, 7), FeatureLevel(1, 29))),
)}


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


def default_feature_levels(metadata_version_level: int, *, kraft_version: bool = False) -> dict[str, int]:
    """The levels a release finalizes with a metadata.version (Kafka's defaults), metadata.version first; kraft.version
    (the quorum's) only when asked."""
    levels = {METADATA_VERSION_FEATURE_NAME: metadata_version_level}
    for feature in FEATURES.values():
        if kraft_version or feature.name != KRAFT_VERSION_FEATURE_NAME:
            levels[feature.name] = feature.default_level(metadata_version_level)
    return levels

