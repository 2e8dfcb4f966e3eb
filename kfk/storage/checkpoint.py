"""Kafka's checkpoint text files: a version line, a count line, then one entry per line, fields split by spaces.

    0
    2
    orders 0 1042
    orders 1 977

Used for the per-log-dir `recovery-point-offset-checkpoint`, `replication-offset-checkpoint`,
`log-start-offset-checkpoint` and `cleaner-offset-checkpoint` (entries `<topic> <partition> <offset>`) and for each
partition's `leader-epoch-checkpoint` (entries `<epoch> <start offset>`). Writes go to `<name>.tmp`, are fsynced and
renamed over the old file, so a crash leaves either the old or the new checkpoint, never half of one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from typing import Generic, TypeVar

from kfk.common.structs import TopicPartition
from kfk.errors import KafkaStorageError

T = TypeVar("T")

CURRENT_VERSION = 0


def fsync_directory(directory: str) -> None:
    """Make a rename or a new file in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: str, data: bytes, sync: bool = True) -> None:
    """Write `data` to `path` via `path.tmp` and a rename, fsyncing the file and its directory when `sync`."""
    temporary = path + ".tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temporary, path)
    if sync:
        fsync_directory(os.path.dirname(os.path.abspath(path)))


class CheckpointFile(Generic[T]):
    """A checkpoint file of one entry type: `format_entry` gives the line, `parse_entry` the entry from its
    fields (returning None for a malformed line)."""

    def __init__(
        self,
        path: str,
        format_entry: Callable[[T], str],
        parse_entry: Callable[[list[str]], T | None],
        version: int = CURRENT_VERSION,
    ) -> None:
        self.path = path
        self.version = version
        self._format_entry = format_entry
        self._parse_entry = parse_entry

    def write(self, entries: Iterable[T], sync: bool = True) -> None:
        items = list(entries)
        lines = [str(self.version), str(len(items))]
        lines.extend(self._format_entry(item) for item in items)
        atomic_write(self.path, ("\n".join(lines) + "\n").encode("utf-8"), sync)

    def read(self) -> list[T]:
        """The entries, or [] when the file does not exist or is empty (as Kafka's CheckpointReadBuffer reads an empty
        file). A malformed file raises KafkaStorageError naming the file and the line, as Kafka's does."""
        try:
            with open(self.path, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError) as exc:
            raise KafkaStorageError(f"Error while reading checkpoint file {self.path}: {exc}") from exc

        def malformed(line: str) -> KafkaStorageError:
            return KafkaStorageError(f"Malformed line in checkpoint file ({self.path}): '{line}'")

        if not lines:
            return []
        try:
            version = int(lines[0].strip())
        except ValueError:
            raise malformed(lines[0]) from None
        if version != self.version:
            raise KafkaStorageError(f"Unrecognized version of the checkpoint file ({self.path}): {version}")
        if len(lines) < 2:
            raise malformed("")
        try:
            expected = int(lines[1].strip())
        except ValueError:
            raise malformed(lines[1]) from None
        entries: list[T] = []
        for line in lines[2:]:
            if not line.strip():
                continue
            entry = self._parse_entry(line.split())
            if entry is None:
                raise malformed(line)
            entries.append(entry)
        if len(entries) != expected:
            raise KafkaStorageError(
                f"Expected {expected} entries in checkpoint file ({self.path}), but found only {len(entries)}"
            )
        return entries


def _format_offset_entry(entry: tuple[TopicPartition, int]) -> str:
    topic_partition, offset = entry
    return f"{topic_partition.topic} {topic_partition.partition} {offset}"


def _parse_offset_entry(fields: list[str]) -> tuple[TopicPartition, int] | None:
    if len(fields) != 3:
        return None
    try:
        return TopicPartition(fields[0], int(fields[1])), int(fields[2])
    except ValueError:
        return None


class OffsetCheckpointFile:
    """`<topic> <partition> <offset>` per line: recovery points, high watermarks, log start offsets."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: CheckpointFile[tuple[TopicPartition, int]] = CheckpointFile(
            path, _format_offset_entry, _parse_offset_entry
        )

    def write(self, offsets: Mapping[TopicPartition, int], sync: bool = True) -> None:
        self._file.write(sorted(offsets.items()), sync)

    def read(self) -> dict[TopicPartition, int]:
        return dict(self._file.read())
