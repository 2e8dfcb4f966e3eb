"""Exactly once on the output directory: which offsets it holds, and never a row twice or a row missing.

Batch exports (BatchOutput). Spark writes into a staging directory beside the output
(``<parent>/.<name>.kfk-staging-<run id>``), never into the output itself. When Spark has finished, the run is
committed in steps that a crash at any point can finish later:
1. ``_kfk_commit.json`` is written in the staging dir: the run's offset ranges, rows and whether it replaces the
   output (--overwrite). From here on, the run will be completed, not dropped;
2. with --overwrite, the output's old contents are deleted and the commit file says so (so a retry does not delete
   the files step 3 already moved);
3. each data file is renamed into the output (same file system, so a rename, not a copy);
4. ``_kfk_export.json`` in the output, the manifest, gains the run's offset ranges (keyed by run id, so adding
   twice changes nothing), and the staging dir goes.
Every run starts by finishing committed runs and deleting staging dirs of runs that died before step 1 (a
killed Spark job: its files never reached the output). Before Spark starts, the planned ranges are compared with
the manifest: a range that overlaps what the output holds is refused unless --overwrite; ``resume`` starts each
partition where the manifest ends.

Streaming exports (StreamOutput) rely on Spark: the checkpoint's offsets and commits logs say which micro-batches
ran, and the file sink's ``_spark_metadata`` log says which files hold committed micro-batches (Spark's readers
look only at those). A job killed in the middle of a micro-batch leaves files that no log lists; Spark redoes the
micro-batch with new files. Those orphans are deleted before the next run and after each run, so that readers
that ignore ``_spark_metadata`` (pyarrow, DuckDB, ...) see exactly the committed rows too. A checkpoint and an
output always go together: an output with a file-sink log and a new checkpoint would make Spark skip micro-batches
as "already written", so that pairing is refused.

Underscore- and dot-prefixed names are skipped by Spark's and pyarrow's dataset readers: the bookkeeping files
never show up as data.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from kfk.common.structs import TopicPartition
from kfk.errors import InvalidConfigurationError
from kfk.spark.offsets import OffsetRange
from kfk.storage.checkpoint import atomic_write

__all__ = ["BatchOutput", "CommitResult", "StreamOutput", "is_local", "local_path"]

MANIFEST = "_kfk_export.json"
COMMIT_FILE = "_kfk_commit.json"
MANIFEST_VERSION = 1
SPARK_METADATA = "_spark_metadata"
SUCCESS_FILES = frozenset({"_SUCCESS", "._SUCCESS.crc"})


def is_local(output: str) -> bool:
    return "://" not in output or output.startswith("file:")


def local_path(output: str) -> Path:
    if output.startswith("file:"):
        return Path(unquote(urlparse(output).path))
    return Path(output)


def _write_json(path: Path, document: Any) -> None:
    atomic_write(str(path), (json.dumps(document, indent=1, sort_keys=True) + "\n").encode("utf-8"))


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise InvalidConfigurationError(f"cannot read {path}: {error}") from None


def _data_files(root: Path) -> Iterator[Path]:
    """Files under ``root`` that readers take as data (not _-/.-prefixed, not in such directories)."""
    for directory, subdirectories, files in os.walk(root):
        subdirectories[:] = [name for name in subdirectories if not name.startswith(("_", "."))]
        for name in files:
            if not name.startswith(("_", ".")):
                yield Path(directory, name)


def _crc_of(path: Path) -> Path:
    return path.with_name(f".{path.name}.crc")


@dataclass(frozen=True)
class CommitResult:
    files: int
    bytes: int


def _intervals(document: Mapping[str, Mapping[str, list[list[int]]]]) -> dict[TopicPartition, list[tuple[int, int]]]:
    return {TopicPartition(topic, int(partition)): [(low, high) for low, high in spans]
            for topic, partitions in document.items() for partition, spans in partitions.items()}


def _merge(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for low, high in sorted(spans):
        if merged and low <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def _ranges_document(ranges: Iterable[OffsetRange]) -> dict[str, dict[str, list[list[int]]]]:
    document: dict[str, dict[str, list[list[int]]]] = {}
    for offset_range in sorted(ranges):
        if offset_range.size:
            document.setdefault(offset_range.topic, {}).setdefault(str(offset_range.partition), []).append(
                [offset_range.from_offset, offset_range.until_offset])
    return document


class BatchOutput:
    """A local output directory written by batch exports (see the module docstring)."""

    def __init__(self, output: str, output_format: str) -> None:
        if not is_local(output):
            raise InvalidConfigurationError(
                f"a batch export writes to a local directory, not {output}: use --stream (Spark's checkpoint and "
                "file sink keep a URI output exactly-once) or export locally and copy")
        self.path = local_path(output).absolute()
        self.format = output_format
        self.run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        self.staging = self.path.parent / f".{self.path.name}.kfk-staging-{self.run_id}"

    # --- before Spark ------------------------------------------------------------------------------------------------

    def manifest(self) -> dict[str, Any] | None:
        path = self.path / MANIFEST
        return _read_json(path) if path.exists() else None

    def exported(self) -> dict[TopicPartition, list[tuple[int, int]]]:
        """The offset intervals the output holds, per partition."""
        manifest = self.manifest()
        return {} if manifest is None else _intervals(manifest.get("ranges", {}))

    def resume_offsets(self) -> dict[TopicPartition, int]:
        """Where each partition the output has seen ends: the start of a --starting-offsets resume run."""
        return {tp: max(high for _, high in spans) for tp, spans in self.exported().items() if spans}

    def recover(self) -> list[str]:
        """Finish committed runs and drop dead ones (their staging dirs); what was done, for the user."""
        done = []
        prefix = f".{self.path.name}.kfk-staging-"
        if not self.path.parent.is_dir():
            return done
        for staging in sorted(self.path.parent.glob(prefix + "*")):
            if (staging / COMMIT_FILE).exists():
                self._complete(staging)
                done.append(f"completed the interrupted commit of run {staging.name[len(prefix):]}")
            else:
                shutil.rmtree(staging, ignore_errors=True)
                done.append(f"removed the unfinished run {staging.name[len(prefix):]} (nothing of it reached the "
                            "output)")
        return done

    def check(self, ranges: Iterable[OffsetRange], overwrite: bool) -> None:
        """Refuse, before Spark starts, an output that is not ours or that already holds some of ``ranges``."""
        if self.path.exists() and not self.path.is_dir():
            raise InvalidConfigurationError(f"the output {self.path} exists and is not a directory")
        if overwrite or not self.path.exists() or not any(self.path.iterdir()):
            return
        manifest = self.manifest()
        if manifest is None:
            raise InvalidConfigurationError(
                f"the output directory {self.path} exists and is not a kfk export (no {MANIFEST}): choose another "
                "--output, or pass --overwrite to replace its contents")
        if manifest.get("format") != self.format:
            raise InvalidConfigurationError(
                f"the output {self.path} holds a {manifest.get('format')} export, not {self.format}: use "
                f"--format {manifest.get('format')}, another --output, or --overwrite")
        exported = self.exported()
        overlaps = []
        for offset_range in ranges:
            for low, high in exported.get(offset_range.topic_partition, []):
                if offset_range.size and offset_range.from_offset < high and low < offset_range.until_offset:
                    overlaps.append(f"{offset_range.topic_partition} offsets "
                                    f"{max(low, offset_range.from_offset)}..{min(high, offset_range.until_offset) - 1}")
        if overlaps:
            raise InvalidConfigurationError(
                f"the output {self.path} already holds {', '.join(overlaps)}: pass --starting-offsets resume to "
                "export only what came after, or --overwrite to replace the output")

    # --- after Spark -------------------------------------------------------------------------------------------------

    def commit(self, ranges: Iterable[OffsetRange], rows: int, overwrite: bool,
               extra: Mapping[str, Any] | None = None) -> CommitResult:
        """Move what Spark wrote in the staging dir into the output and record the ranges (steps 1-4)."""
        files = [path for path in _data_files(self.staging)]
        _write_json(self.staging / COMMIT_FILE, {
            "run_id": self.run_id, "format": self.format, "ranges": _ranges_document(ranges), "rows": rows,
            "overwrite": overwrite, "overwrite_done": False, "finished_ms": int(time.time() * 1000),
            "files": len(files), "bytes": sum(path.stat().st_size for path in files), **(extra or {})})
        return self._complete(self.staging)

    def discard_except(self, kept: Iterable[str]) -> list[Path]:
        """Delete the staged data files not named in ``kept`` (paths relative to the staging dir): those of task
        attempts that failed half-way or lost to another attempt, which wrote their own files beside the ones
        whose results Spark took. Before commit, so that only the taken files reach the output."""
        keep = {self.staging / name for name in kept}
        extra = [path for path in _data_files(self.staging) if path not in keep]
        for path in extra:
            path.unlink()
        return extra

    def _complete(self, staging: Path) -> CommitResult:
        commit_path = staging / COMMIT_FILE
        commit = _read_json(commit_path)
        if commit["overwrite"] and not commit["overwrite_done"]:
            if self.path.exists():
                shutil.rmtree(self.path)
            commit["overwrite_done"] = True
            _write_json(commit_path, commit)
        self.path.mkdir(parents=True, exist_ok=True)
        for source in list(_data_files(staging)):
            target = self.path / source.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            if _crc_of(source).exists():
                os.replace(_crc_of(source), _crc_of(target))
            os.replace(source, target)
        manifest = None if commit["overwrite"] else self.manifest()
        if manifest is None:
            manifest = {"version": MANIFEST_VERSION, "format": commit["format"], "ranges": {}, "runs": []}
        if commit["run_id"] not in {run["run_id"] for run in manifest["runs"]}:
            spans = _intervals(manifest["ranges"])
            for tp, added in _intervals(commit["ranges"]).items():
                spans[tp] = _merge(spans.get(tp, []) + added)
            manifest["ranges"] = {}
            for tp in sorted(spans):
                manifest["ranges"].setdefault(tp.topic, {})[str(tp.partition)] = [list(span) for span in spans[tp]]
            manifest["runs"].append({key: value for key, value in commit.items()
                                     if key not in ("overwrite_done", "format")})
            for key in ("value_schema",):
                if key in commit:
                    manifest[key] = commit[key]
            _write_json(self.path / MANIFEST, manifest)
        shutil.rmtree(staging, ignore_errors=True)
        return CommitResult(commit["files"], commit["bytes"])

    def abandon(self) -> None:
        """Spark failed: nothing of this run reaches the output."""
        if not (self.staging / COMMIT_FILE).exists():
            shutil.rmtree(self.staging, ignore_errors=True)


class StreamOutput:
    """A streaming export's output and checkpoint (see the module docstring)."""

    def __init__(self, output: str, checkpoint: str) -> None:
        self.output = output
        self.checkpoint = checkpoint
        self.local = is_local(output)
        self.path = local_path(output).absolute() if self.local else None
        self.checkpoint_path = local_path(checkpoint).absolute() if is_local(checkpoint) else None

    def checkpoint_started(self) -> bool:
        return self.checkpoint_path is not None and (self.checkpoint_path / "offsets").is_dir() and any(
            name.isdigit() for name in os.listdir(self.checkpoint_path / "offsets"))

    def check(self, overwrite: bool) -> None:
        if overwrite:
            return
        if self.path is None:
            return
        if self.path.exists() and not self.path.is_dir():
            raise InvalidConfigurationError(f"the output {self.path} exists and is not a directory")
        has_sink_log = (self.path / SPARK_METADATA).is_dir()
        non_empty = self.path.exists() and any(self.path.iterdir())
        if non_empty and not has_sink_log:
            raise InvalidConfigurationError(
                f"the output directory {self.path} exists and is not a streaming kfk export (no {SPARK_METADATA}): "
                "choose another --output, or pass --overwrite to replace its contents")
        started = self.checkpoint_started()
        if has_sink_log and not started:
            raise InvalidConfigurationError(
                f"the output {self.path} holds a streaming export, but the checkpoint {self.checkpoint} is new: "
                "pass the checkpoint that export used to continue it, or --overwrite to start over")
        if started and self.path.exists() and not has_sink_log and self.committed_batches() > 0:
            raise InvalidConfigurationError(
                f"the checkpoint {self.checkpoint} has committed micro-batches but the output {self.path} has no "
                f"{SPARK_METADATA}: it was deleted or is not this export's output; pass --overwrite to start over")

    def committed_batches(self) -> int:
        if self.checkpoint_path is None or not (self.checkpoint_path / "commits").is_dir():
            return 0
        return sum(1 for name in os.listdir(self.checkpoint_path / "commits") if name.isdigit())

    def last_committed_offsets(self) -> dict[str, dict[str, int]] | None:
        """The source offsets of the last committed micro-batch, from the checkpoint's offsets log (its last line:
        one source, this one)."""
        if self.checkpoint_path is None or not (self.checkpoint_path / "commits").is_dir():
            return None
        committed = [int(name) for name in os.listdir(self.checkpoint_path / "commits") if name.isdigit()]
        if not committed:
            return None
        lines = (self.checkpoint_path / "offsets" / str(max(committed))).read_text(encoding="utf-8").splitlines()
        return json.loads(lines[-1])

    def clear(self) -> None:
        """--overwrite: start over (the output and the checkpoint go together)."""
        for path in (self.path, self.checkpoint_path):
            if path is not None and path.exists():
                shutil.rmtree(path)

    def committed_files(self) -> set[Path] | None:
        """Every data file the file sink's log lists, or None without a log."""
        assert self.path is not None
        log_dir = self.path / SPARK_METADATA
        if not log_dir.is_dir():
            return None
        files: set[Path] = set()
        entries = sorted((name for name in os.listdir(log_dir) if name.split(".")[0].isdigit()),
                         key=lambda name: int(name.split(".")[0]))
        for name in entries:
            lines = (log_dir / name).read_text(encoding="utf-8").splitlines()
            for line in lines[1:]:
                if not line.strip():
                    continue
                entry = json.loads(line)
                path = Path(unquote(urlparse(entry["path"]).path))
                if entry.get("action", "add") == "delete":
                    files.discard(path)
                else:
                    files.add(path)
        return files

    def remove_orphans(self) -> list[Path]:
        """Delete data files that no committed micro-batch lists (left by a killed job)."""
        if self.path is None or not self.path.is_dir():
            return []
        committed = self.committed_files()
        if committed is None:
            return []
        orphans = [path for path in _data_files(self.path) if path.absolute() not in committed]
        for path in orphans:
            path.unlink(missing_ok=True)
            _crc_of(path).unlink(missing_ok=True)
        return orphans

    def data_files_and_bytes(self) -> tuple[int, int]:
        if self.path is None or not self.path.is_dir():
            return 0, 0
        sizes = [path.stat().st_size for path in _data_files(self.path)]
        return len(sizes), sum(sizes)
