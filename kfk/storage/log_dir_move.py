"""Copying a partition's folder into another log dir while its log keeps serving (AlterReplicaLogDirs).

The copy goes in two steps into a `<topic>-<partition>.<id>-future` folder of the destination. The first runs
without the log's lock, appends going on: it copies the segments that are closed when it starts (closed segments
do not change while cleaning is paused, except that retention may delete them). The second runs under the lock,
appends waiting: it copies everything else (the active segment, the segments rolled meanwhile, checkpoints,
producer snapshots, partition.metadata), drops from the copy what retention removed, and copies everything again
if the log was truncated in between. Every copied file is fsynced, so the copy is as durable as the original.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import threading

from kfk.storage.checkpoint import fsync_directory
from kfk.storage.log_files import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    offset_from_file_name,
)

_SEGMENT_FILE_SUFFIXES = (LOG_FILE_SUFFIX, INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)
#: Files on their way out (deleted segments waiting for removal, a cleaner's unfinished output): never copied.
_TRANSIENT_FILE_SUFFIXES = (DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX)


@dataclasses.dataclass(frozen=True, slots=True)
class ReplicaCopy:
    """A copy in progress: where it goes, which segments were closed when it started (base offset below
    `closed_below`), and the log's truncation count then."""

    future_directory: str
    closed_below: int
    truncations: int

    def _is_closed_segment_file(self, name: str) -> bool:
        return name.endswith(_SEGMENT_FILE_SUFFIXES) and offset_from_file_name(name) < self.closed_below

    def copy_closed_segments(self, source: str, aborted: threading.Event) -> None:
        """The first step (no lock held); stops between two files once `aborted` is set (broker shutdown)."""
        os.makedirs(self.future_directory, exist_ok=True)
        for name in sorted(os.listdir(source)):
            if aborted.is_set():
                raise InterruptedError(f"Copy of {source} aborted")
            if self._is_closed_segment_file(name):
                try:
                    copy_file(os.path.join(source, name), os.path.join(self.future_directory, name))
                except FileNotFoundError:
                    pass  # retention deleted the segment meanwhile; the last step drops its other files
        fsync_directory(self.future_directory)

    def finish(self, source: str, recopy_all: bool) -> None:
        """The last step, under the log's lock with the log flushed."""
        names = {name for name in os.listdir(source) if not name.endswith(_TRANSIENT_FILE_SUFFIXES)}
        for name in os.listdir(self.future_directory):
            if name not in names:
                os.unlink(os.path.join(self.future_directory, name))
        for name in sorted(names):
            if recopy_all or not self._is_closed_segment_file(name):
                copy_file(os.path.join(source, name), os.path.join(self.future_directory, name))
        fsync_directory(self.future_directory)


def copy_file(source: str, destination: str) -> None:
    """Copy a file's bytes (all of them: a preallocated segment or index keeps its length) and fsync the copy."""
    shutil.copyfile(source, destination)
    fd = os.open(destination, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)

