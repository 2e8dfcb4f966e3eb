"""Log directory ids in the metadata (KIP-858, JBOD in KRaft; metadata.version 3.7-IV2 on).

Each log dir has a directory id (meta.properties' directory.id); a broker registers the ids of its online dirs, and
each partition record names the dir of each replica. Kafka reserves three ids below 100 as placeholders (its
DirectoryId): MIGRATING (0) for a replica whose dir was never recorded (a partition from before 3.7-IV2, or a
broker that registered no dirs), UNASSIGNED (1) for one whose broker has several dirs and has not yet said which
holds it, and LOST (2) for one on a dir that went offline.
"""

from __future__ import annotations

import uuid
from typing import Sequence

MIGRATING = uuid.UUID(int=0)
UNASSIGNED = uuid.UUID(int=1)
LOST = uuid.UUID(int=2)


def is_reserved(directory: uuid.UUID) -> bool:
    """Kafka keeps the ids below 100 for placeholders: no log dir may have one."""
    return directory.int < 100


def default_directory(log_dirs: Sequence[uuid.UUID] | None) -> uuid.UUID:
    """Where the controller places a new replica on a broker with these registered dirs (Kafka's
    ClusterControlManager.defaultDir): its only dir; UNASSIGNED when it has several (the broker assigns it) or is
    not registered; MIGRATING when it registered none."""
    if log_dirs is None:
        return UNASSIGNED
    if not log_dirs:
        return MIGRATING
    return log_dirs[0] if len(log_dirs) == 1 else UNASSIGNED

