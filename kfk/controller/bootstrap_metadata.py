"""The records a controller bootstraps an empty metadata log with (Kafka's BootstrapMetadata): what `kafka-storage
format` put in the metadata log dir's bootstrap.checkpoint (the feature levels, `--add-scram` credentials), or kfk's
default feature levels when the node was formatted without one (`kfk server start` formats itself).

The active controller appends them, in one batch, when it leads a log whose image has no metadata.version yet: the
records are committed together or not at all, so a controller that fails over before they commit leaves the next
one an empty log to bootstrap again, and a quorum whose every voter was formatted with the same file gets them once.

The finalized feature levels come first: the file's when kfk supports them (a level above kfk's range becomes kfk's
highest, a feature kfk does not serve or whose dependencies no longer hold is left out, and a warning says so), else
kfk's defaults (controller/features.py: its latest metadata.version, transaction.version 2). A file with a
metadata.version and no other feature level finalizes just that, as Kafka's would. Every other record (the SCRAM
credentials) is appended as the file has it.
"""

from __future__ import annotations

import logging
from typing import Sequence

from kfk.common.features import FEATURES, KRAFT_VERSION_FEATURE_NAME, METADATA_VERSION_FEATURE_NAME, dependency_problem
from kfk.controller.config_control import elr_safety_records
from kfk.controller.features import (
    LATEST_METADATA_VERSION,
    kfk_default_feature_levels,
    supported_features,
    zookeeper_supported_features,
)
from kfk.controller.partition_change import elr_enabled
from kfk.metadata.image import MetadataImage
from kfk.protocol.message import Message
from kfk.protocol.metadata_records import schema_class

log = logging.getLogger("kfk.controller")

FeatureLevelRecord = schema_class("FeatureLevelRecord")


def records_for_empty_log(bootstrap_records: Sequence[Message] | None, static_min_insync_replicas: int = 1,
                          kraft: bool = True) -> list[Message]:
    """What the controller writes first: the feature levels, metadata.version first, then the bootstrap file's
    other records, then, when the levels turn eligible leader replicas on, the cluster-wide min.insync.replicas
    they need (the static config's; config_control.elr_safety_records). On ZooKeeper (not `kraft`) only the
    features a ZooKeeper-mode broker supports are finalized: its partition state has no place for an ELR."""
    asked = {record.name: record.feature_level for record in bootstrap_records or ()
             if isinstance(record, FeatureLevelRecord)}
    if METADATA_VERSION_FEATURE_NAME not in asked:
        levels = kfk_default_feature_levels()
    else:
        levels, left_out = feature_levels_kfk_serves(asked)
        if left_out:
            log.warning("bootstrap.checkpoint asks for feature levels %s that kfk does not serve: the cluster is "
                        "bootstrapped at %s", ", ".join(left_out),
                        ", ".join(f"{name}={level}" for name, level in levels.items()))
    if not kraft:
        served = zookeeper_supported_features()
        levels = {name: level for name, level in levels.items()
                  if name == METADATA_VERSION_FEATURE_NAME or name in served}
    records = [*(FeatureLevelRecord(name=name, feature_level=level) for name, level in levels.items()),
               *(record for record in bootstrap_records or () if not isinstance(record, FeatureLevelRecord))]
    image = MetadataImage().apply(records, 0)
    if elr_enabled(image):
        records += elr_safety_records(image, static_min_insync_replicas)
    return records


def feature_levels_kfk_serves(asked: dict[str, int]) -> tuple[dict[str, int], list[str]]:
    """The levels of `asked` kfk can finalize (metadata.version first, capped at kfk's latest), and the ones it
    cannot, as name=level."""
    supported = supported_features()
    left_out = []
    metadata_version = asked[METADATA_VERSION_FEATURE_NAME]
    if metadata_version > LATEST_METADATA_VERSION.level:
        left_out.append(f"{METADATA_VERSION_FEATURE_NAME}={metadata_version}")
        metadata_version = LATEST_METADATA_VERSION.level
    levels = {METADATA_VERSION_FEATURE_NAME: metadata_version}
    for name, level in sorted(asked.items()):
        if name == METADATA_VERSION_FEATURE_NAME or level == 0:
            continue
        low, high = supported.get(name, (0, 0))
        if name in FEATURES and name != KRAFT_VERSION_FEATURE_NAME and low <= level <= high \
                and dependency_problem(name, level, asked | levels) is None:
            levels[name] = level
        else:
            left_out.append(f"{name}={level}")
    return levels, left_out
