"""Snapshot file names and housekeeping in the metadata log's folder.

A snapshot is named by its id, `<end offset>-<epoch>.checkpoint` (kfk.storage.log_files parses the name, which
dump-log shares). It is written as `<name>.checkpoint.tmp` and renamed once complete and fsynced, so a file with
the final name is always whole; a `.tmp` left by a crash is deleted on the next start, as is a `.part` (a snapshot
being fetched from the leader, store.py).
"""

from __future__ import annotations

import logging
import os
from typing import NamedTuple

from kfk.storage.log_files import KRAFT_SNAPSHOT_FILE_SUFFIX, snapshot_id_from_file_name

log = logging.getLogger("kfk.backends.embedded.snapshots")

PARTIAL_SUFFIX = ".tmp"
#: Kafka's suffix for a snapshot being fetched from the leader (FetchSnapshot), chunk by chunk.
FETCHED_PARTIAL_SUFFIX = ".part"


class SnapshotId(NamedTuple):
    """Kafka's OffsetAndEpoch for a snapshot: the records below `end_offset`, the last of them from `epoch`."""

    end_offset: int
    epoch: int


def snapshot_file_name(snapshot_id: SnapshotId) -> str:
    return f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}{KRAFT_SNAPSHOT_FILE_SUFFIX}"


def snapshot_path(directory: str, snapshot_id: SnapshotId) -> str:
    return os.path.join(directory, snapshot_file_name(snapshot_id))


def list_snapshots(directory: str) -> list[SnapshotId]:
    """The complete snapshots in `directory`, oldest first."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    ids = (snapshot_id_from_file_name(name) for name in names)
    return sorted(SnapshotId(*found) for found in ids if found is not None)


def delete_partial_snapshots(directory: str) -> None:
    """Remove snapshots a crash left half-written."""
    for name in os.listdir(directory):
        if name.endswith(tuple(KRAFT_SNAPSHOT_FILE_SUFFIX + suffix
                               for suffix in (PARTIAL_SUFFIX, FETCHED_PARTIAL_SUFFIX))):
            log.warning("deleting the partial snapshot %s", name)
            os.unlink(os.path.join(directory, name))


def delete_snapshots_before(directory: str, snapshot_id: SnapshotId) -> list[SnapshotId]:
    """Delete the snapshots older than `snapshot_id` (the log no longer reaches back to them); returns them."""
    deleted = [older for older in list_snapshots(directory) if older < snapshot_id]
    for older in deleted:
        try:
            os.unlink(snapshot_path(directory, older))
        except FileNotFoundError:
            pass
    return deleted
