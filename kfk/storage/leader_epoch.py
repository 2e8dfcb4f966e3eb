"""LeaderEpochFileCache: for each leader epoch, the first offset written in it (`leader-epoch-checkpoint`).

A follower asks the leader "where did my last epoch end?" (OffsetsForLeaderEpoch) and truncates to the answer
instead of to its high watermark, so a leader change never silently diverges logs. The cache holds the entries
sorted by epoch with strictly increasing start offsets; every change is written to the checkpoint file
(`0` / count / `<epoch> <start offset>` lines) before it counts.
"""

from __future__ import annotations

import bisect
from typing import NamedTuple

from kfk.storage.checkpoint import CheckpointFile

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def _format_entry(entry: EpochEntry) -> str:
    return f"{entry.epoch} {entry.start_offset}"


def _parse_entry(fields: list[str]) -> EpochEntry | None:
    if len(fields) != 2:
        return None
    try:
        return EpochEntry(int(fields[0]), int(fields[1]))
    except ValueError:
        return None


class LeaderEpochFileCache:
    def __init__(self, path: str) -> None:
        self.checkpoint: CheckpointFile[EpochEntry] = CheckpointFile(path, _format_entry, _parse_entry)
        self._entries: list[EpochEntry] = sorted(self.checkpoint.read())

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def _flush(self) -> None:
        self.checkpoint.write(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset` (a leader's first append in a new epoch, or a batch of a
        new epoch seen by a follower or by recovery). Entries the new one contradicts — same or later epoch, or a
        start offset at or beyond this one — are removed first. Returns whether anything changed."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"Received invalid partition leader epoch entry ({epoch}, {start_offset})")
        latest = self.latest_entry
        if latest is not None and latest.epoch == epoch and start_offset >= latest.start_offset:
            return False
        while self._entries and (self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset):
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        self._flush()
        return True

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch in which `offset` was written (the entry with the largest start offset <= offset)."""
        starts = [entry.start_offset for entry in self._entries]
        index = bisect.bisect_right(starts, offset) - 1
        return self._entries[index].epoch if index >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: (the largest epoch <= requested, the first offset after it). The latest epoch
        ends at the log end offset; an epoch above all known gives (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET); one
        below all known gives (requested, start of the first known epoch)."""
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries and self._entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        epochs = [entry.epoch for entry in self._entries]
        higher = bisect.bisect_right(epochs, requested_epoch)
        if higher == len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._entries[0].start_offset
        return self._entries[higher - 1].epoch, self._entries[higher].start_offset

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to `end_offset`: drop the epochs that start at or after it."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return
        while self._entries and self._entries[-1].start_offset >= end_offset:
            self._entries.pop()
        self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved to `start_offset`: drop epochs that ended before it and move the start of the one
        holding it up to it."""
        if start_offset < 0 or not self._entries or self._entries[0].start_offset >= start_offset:
            return
        last_removed: EpochEntry | None = None
        while self._entries and self._entries[0].start_offset <= start_offset:
            last_removed = self._entries.pop(0)
        if last_removed is not None:
            self._entries.insert(0, EpochEntry(last_removed.epoch, start_offset))
        self._flush()

    def clear_and_flush(self) -> None:
        self._entries = []
        self._flush()
