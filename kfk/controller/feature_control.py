"""UpdateFeatures on the active controller (Kafka's FeatureControlManager): finalized feature levels changed by
FeatureLevelRecords, with Kafka's checks and its INVALID_UPDATE_VERSION messages.

Each update is checked in Kafka's order: a known upgrade type (1 UPGRADE, 2 SAFE_DOWNGRADE, 3 UNSAFE_DOWNGRADE), a
level not below 0, a level this controller and every registered broker support (fenced ones too: a registration
only leaves with UnregisterBroker), the direction matching the type, then for metadata.version no downgrade across
a level that changed the metadata records, and for the other features their dependencies (on metadata.version and
each other) against the levels the whole request proposes. The first refusal answers the request and nothing is
written; otherwise every update's record is written in one batch (validate_only: none). A level of 0 removes a
feature (the image forgets it); metadata.version is never removed.

kraft.version is the metadata quorum's (a KRaftVersion control record), not a FeatureLevelRecord: kfk's quorum
does not change it online (Kafka 4.1 upgrades a static quorum to dynamic voters), so any other level than the
current one is refused, naming what to do instead.

In ZooKeeper mode (the ZooKeeper backend keeps the levels in the /feature znode, as Kafka 3.x's ZooKeeper controller
did) metadata.version is not a feature: it belongs to KRaft, and is refused in Kafka 3.x's ZooKeeper words.
"""

from __future__ import annotations

from typing import Mapping

from kfk.common.features import (
    FEATURES,
    KRAFT_VERSION_FEATURE_NAME,
    METADATA_VERSION_FEATURE_NAME,
    dependency_problem,
    metadata_changed_between,
)
from kfk.controller.config_control import elr_safety_records
from kfk.controller.features import supported_features
from kfk.controller.partition_change import elr_enabled
from kfk.controller.result import ApiError, ControllerResult
from kfk.errors import ErrorCode
from kfk.metadata.image import MetadataImage
from kfk.protocol.message import Message
from kfk.protocol.metadata_records import schema_class

FeatureLevelRecord = schema_class("FeatureLevelRecord")
ClearElrRecord = schema_class("ClearElrRecord")

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
#: A feature a node does not know: Kafka's VersionRange 0-0 (QuorumFeatures.DISABLED).
DISABLED = (0, 0)


def _range_text(supported: tuple[int, int]) -> str:
    low, high = supported
    return str(low) if low == high else f"{low}-{high}"


def _reason_not_supported(level: int, who: str, supported: tuple[int, int]) -> str | None:
    low, high = supported
    if low <= level <= high:
        return None
    if high == 0:
        return f"{who} does not support this feature."
    return f"{who} only supports versions {_range_text(supported)}"


def _invalid_update_version(name: str, level: int, message: str) -> ApiError:
    return ApiError(ErrorCode.INVALID_UPDATE_VERSION, f"Invalid update version {level} for feature {name}. {message}")


def _invalid_metadata_version(level: int, message: str) -> ApiError:
    return ApiError(ErrorCode.INVALID_UPDATE_VERSION, f"Invalid metadata.version {level}. {message}")


def update_features(image: MetadataImage, updates: Mapping[str, tuple[int, int]], validate_only: bool,
                    node_id: int, kraft_version: int, kraft: bool = True,
                    static_min_insync_replicas: int = 1) -> ControllerResult[ApiError]:
    """`updates`: level and upgrade type by feature name, as the request lists them. Returns the first refusal (or
    NONE) and, unless `validate_only` or refused, the FeatureLevelRecords, followed by what eligible leader
    replicas need when the update turns them on (config_control.elr_safety_records)."""
    current_levels = dict(image.features)
    current_levels[KRAFT_VERSION_FEATURE_NAME] = kraft_version
    proposed = {**current_levels, **{name: level for name, (level, _) in updates.items()}}
    local = supported_features()
    records: list[Message] = []
    for name, (level, upgrade_type) in updates.items():
        if name == METADATA_VERSION_FEATURE_NAME and not kraft:
            return ControllerResult(ApiError(
                ErrorCode.INVALID_REQUEST,
                "Could not apply finalized feature update because the provided feature is not supported."), [])
        error = _check_update(image, name, level, upgrade_type, current_levels.get(name, 0), proposed, local,
                              node_id)
        if error is not None:
            return ControllerResult(error, [])
        if name != KRAFT_VERSION_FEATURE_NAME:
            records.append(FeatureLevelRecord(name=name, feature_level=level))
    if validate_only:
        return ControllerResult(ApiError(ErrorCode.NONE, None), [])
    enabled, will_be = elr_enabled(image), elr_enabled(image.apply(records, image.offset + 1))
    if will_be and not enabled:
        records += elr_safety_records(image, static_min_insync_replicas)
    elif enabled and not will_be:
        # Every partition's ELR and last known ELR go with the feature, at once (Kafka's controller drops each
        # partition's at its next change instead), so no broker or tool shows stale ones.
        records.append(ClearElrRecord())
    return ControllerResult(ApiError(ErrorCode.NONE, None), records)


def _check_update(image: MetadataImage, name: str, level: int, upgrade_type: int, current: int,
                  proposed: Mapping[str, int], local: Mapping[str, tuple[int, int]], node_id: int) -> ApiError | None:
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return _invalid_update_version(name, level, "The controller does not support the given upgrade type.")
    if level < 0:
        return _invalid_update_version(name, level, "A feature version cannot be less than 0.")
    reason = _reason_not_supported(level, f"Local controller {node_id}", local.get(name, DISABLED))
    for broker_id in sorted(image.brokers):
        if reason is not None:
            break
        reason = _reason_not_supported(level, f"Broker {broker_id}",
                                       image.brokers[broker_id].supported_features.get(name, DISABLED))
    if reason is not None:
        return _invalid_update_version(name, level, reason)
    if level < current and upgrade_type == UPGRADE:
        return _invalid_update_version(name, level, "Can't downgrade the version of this feature without setting "
                                                    "the upgrade type to either safe or unsafe downgrade.")
    if level > current and upgrade_type != UPGRADE:
        return _invalid_update_version(name, level, "Can't downgrade to a newer version.")
    if name == METADATA_VERSION_FEATURE_NAME:
        if level < current and metadata_changed_between(current, level):
            if upgrade_type == UNSAFE_DOWNGRADE:
                return _invalid_metadata_version(level, "Unsafe metadata downgrade is not supported in this version.")
            return _invalid_metadata_version(level, "Refusing to perform the requested downgrade because it might "
                                                    "delete metadata information.")
        return None
    if name == KRAFT_VERSION_FEATURE_NAME:
        if level != current:
            return _invalid_update_version(
                name, level, f"kfk's metadata quorum runs {name} {current} and cannot change it online: format a "
                "dynamic quorum (storage format --standalone or --initial-controllers) for kraft.version 1.")
        return None
    problem = dependency_problem(name, level, proposed) if name in FEATURES else None
    if problem is not None:
        return _invalid_update_version(name, level, problem)
    return None
