"""SnapshotStore: the snapshots of the metadata log's folder as the Raft replica uses them (its RaftSnapshots).

The leader reads chunks of its newest snapshot for FetchSnapshot; a follower sent to a snapshot writes the chunks it
fetches into `<name>.checkpoint.part` (Kafka's name for a snapshot being fetched), and once it is whole reads it back
with every check `read_snapshot` makes before renaming it to its final name, so a file with the final name is
always whole. The snapshot read that way waits in `take_installed` for the backend, which loads it into its image
and listeners; older snapshots are deleted, as the follower's log now starts at the new one's end.
"""

from __future__ import annotations

import logging
import os

from kfk.backends.embedded.raft.log import OffsetAndEpoch
from kfk.backends.embedded.raft.voter_set import VoterSet
from kfk.backends.embedded.snapshots.reader import Snapshot, read_snapshot, read_snapshot_chunk
from kfk.backends.embedded.snapshots.snapshot_file import (
    FETCHED_PARTIAL_SUFFIX,
    SnapshotId,
    delete_snapshots_before,
    snapshot_path,
)
from kfk.backends.embedded.voters_record import from_voters_record
from kfk.errors import CorruptRecordError
from kfk.storage.checkpoint import fsync_directory

log = logging.getLogger("kfk.backends.embedded.snapshots")


class SnapshotStore:
    def __init__(self, directory: str) -> None:
        self.directory = directory
        #: The newest snapshot known whole (loaded, written or fetched): the backend tells of the ones it loads and
        #: writes, since only it knows which files read.
        self.latest: SnapshotId | None = None
        self._fetching: SnapshotId | None = None
        self._fetched_size = 0
        self._installed: Snapshot | None = None
        self.fetched_voters: VoterSet | None = None

    # -- what the backend tells and takes ----------------------------------------------------------------------------

    def added(self, snapshot_id: SnapshotId) -> None:
        """A snapshot the backend loaded or wrote: the newest from now on (unless one newer is known)."""
        if self.latest is None or snapshot_id > self.latest:
            self.latest = snapshot_id

    def take_installed(self) -> Snapshot | None:
        """The snapshot fetched from the leader since the last call, read whole; None if there is none."""
        installed, self._installed = self._installed, None
        return installed

    # -- RaftSnapshots -----------------------------------------------------------------------------------------------

    @property
    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return None if self.latest is None else OffsetAndEpoch(*self.latest)

    def read_chunk(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> tuple[bytes, int] | None:
        path = snapshot_path(self.directory, SnapshotId(*snapshot_id))
        try:
            size = os.path.getsize(path)
            return read_snapshot_chunk(path, position, max_bytes), size
        except FileNotFoundError:  # never written, or deleted behind a newer one meanwhile
            return None

    def begin_fetch(self, snapshot_id: OffsetAndEpoch) -> None:
        self.abort_fetch()
        self._fetching = SnapshotId(*snapshot_id)
        self._fetched_size = 0
        with open(self._partial_path(), "wb"):
            pass
        log.info("fetching the metadata snapshot %s from the leader", self._fetching)

    @property
    def fetched_size(self) -> int:
        return self._fetched_size

    def append_fetched(self, chunk: bytes) -> None:
        with open(self._partial_path(), "ab") as file:
            file.write(chunk)
        self._fetched_size += len(chunk)

    def complete_fetch(self) -> bool:
        snapshot_id, partial = self._fetching, self._partial_path()
        self._fetching = None
        with open(partial, "rb+") as file:
            os.fsync(file.fileno())
        try:
            snapshot = read_snapshot(partial, snapshot_id)
        except CorruptRecordError as error:
            log.warning("the metadata snapshot %s fetched from the leader does not read: %s", snapshot_id, error)
            os.unlink(partial)
            return False
        os.replace(partial, snapshot_path(self.directory, snapshot_id))
        fsync_directory(self.directory)
        delete_snapshots_before(self.directory, snapshot_id)
        self.latest = snapshot_id
        self._installed = snapshot
        self.fetched_voters = None if snapshot.voters is None else from_voters_record(snapshot.voters)
        log.info("fetched the metadata snapshot %s (%d bytes) from the leader", snapshot_id, self._fetched_size)
        return True

    def abort_fetch(self) -> None:
        if self._fetching is None:
            return
        try:
            os.unlink(self._partial_path())
        except FileNotFoundError:
            pass
        self._fetching = None

    def _partial_path(self) -> str:
        return snapshot_path(self.directory, self._fetching) + FETCHED_PARTIAL_SUFFIX
