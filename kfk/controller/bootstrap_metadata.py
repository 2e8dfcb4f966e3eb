"""The records a controller bootstraps an empty metadata log with (Kafka's BootstrapMetadata): what `kafka-storage
format` put in the metadata log dir's bootstrap.checkpoint (the metadata.version, `--add-scram` credentials), or
the metadata.version alone when the node was formatted without one (`kfk server start` formats itself).

The active controller appends them, in one batch, when it leads a log whose image has no metadata.version yet: the
records are committed together or not at all, so a controller that fails over before they commit leaves the next
one an empty log to bootstrap again, and a quorum whose every voter was formatted with the same file gets them once.

kfk's controller writes one metadata.version (controller/features.py). A bootstrap file that asks for another
(Apache Kafka's tool formats at 4.0-IV3 by default, and refuses `--add-scram` below 3.5-IV2) still bootstraps the
cluster, at kfk's level: its metadata.version record becomes kfk's, its other feature levels (group.version,
transaction.version: kfk finalizes its own in ApiVersions) are left out, and a warning says so. Every other record
(the SCRAM credentials, which kfk's controller keeps at its metadata.version as it does for
AlterUserScramCredentials) is appended as the file has it.
"""

from __future__ import annotations

import logging
from typing import Sequence

from kfk.controller.features import METADATA_VERSION_FEATURE_NAME, METADATA_VERSION_LEVEL, METADATA_VERSION_NAME
from kfk.protocol.message import Message
from kfk.protocol.metadata_records import schema_class

log = logging.getLogger("kfk.controller")

FeatureLevelRecord = schema_class("FeatureLevelRecord")


def records_for_empty_log(bootstrap_records: Sequence[Message] | None) -> list[Message]:
    """What the controller writes first: kfk's metadata.version, then the bootstrap file's other records."""
    records: list[Message] = [FeatureLevelRecord(name=METADATA_VERSION_FEATURE_NAME,
                                                 feature_level=METADATA_VERSION_LEVEL)]
    left_out = []
    for record in bootstrap_records or ():
        if not isinstance(record, FeatureLevelRecord):
            records.append(record)
        elif record.name != METADATA_VERSION_FEATURE_NAME or record.feature_level != METADATA_VERSION_LEVEL:
            left_out.append(f"{record.name}={record.feature_level}")
    if left_out:
        log.warning("bootstrap.checkpoint asks for feature levels %s: kfk's controller runs metadata.version %s "
                    "(level %d) and bootstraps the cluster at that level, with the file's other records",
                    ", ".join(left_out), METADATA_VERSION_NAME, METADATA_VERSION_LEVEL)
    return records
