"""Exactly-once bookkeeping of the output directory, without Spark: a batch commit interrupted at any step is
finished by the next run, a run that died before its commit leaves nothing, and a streaming output loses the files
of a micro-batch that never committed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kfk.errors import InvalidConfigurationError
from kfk.spark.offsets import OffsetRange
from kfk.spark.output import COMMIT_FILE, MANIFEST, BatchOutput, StreamOutput


def staged(output: BatchOutput, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = output.staging / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (output.staging / "_SUCCESS").write_text("")


def data(directory: Path) -> dict[str, str]:
    return {str(path.relative_to(directory)): path.read_text() for path in sorted(directory.rglob("part-*"))}


def test_commit_records_ranges_and_refuses_overlaps(tmp_path: Path) -> None:
    target = tmp_path / "out"
    first = BatchOutput(str(target), "parquet")
    first.check([OffsetRange("t", 0, 0, 10)], overwrite=False)
    staged(first, {"partition=0/part-0.parquet": "a"})
    result = first.commit([OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 5, 5)], rows=10, overwrite=False)
    assert (result.files, result.bytes) == (1, 1)
    assert data(target) == {"partition=0/part-0.parquet": "a"} and not first.staging.exists()
    second = BatchOutput(str(target), "parquet")
    assert second.resume_offsets() == {("t", 0): 10}
    with pytest.raises(InvalidConfigurationError, match="already holds t-0 offsets 9..9"):
        second.check([OffsetRange("t", 0, 9, 20)], overwrite=False)
    with pytest.raises(InvalidConfigurationError, match="holds a parquet export"):
        BatchOutput(str(target), "json").check([OffsetRange("t", 0, 10, 20)], overwrite=False)
    second.check([OffsetRange("t", 0, 10, 20)], overwrite=False)
    staged(second, {"part-1.parquet": "b"})
    second.commit([OffsetRange("t", 0, 10, 20)], rows=10, overwrite=False)
    manifest = json.loads((target / MANIFEST).read_text())
    assert manifest["ranges"] == {"t": {"0": [[0, 20]]}} and len(manifest["runs"]) == 2


def test_an_interrupted_commit_is_finished_and_a_dead_run_dropped(tmp_path: Path) -> None:
    target = tmp_path / "out"
    target.mkdir()
    (target / "old.parquet").write_text("old")
    run = BatchOutput(str(target), "parquet")
    staged(run, {"part-a.parquet": "a", "part-b.parquet": "b"})
    # Step 1 done (the commit file), step 2 done (the old contents deleted), one of two files moved: then a crash.
    (run.staging / COMMIT_FILE).write_text(json.dumps({
        "run_id": run.run_id, "format": "parquet", "ranges": {"t": {"0": [[0, 2]]}}, "rows": 2, "overwrite": True,
        "overwrite_done": True, "finished_ms": 0, "files": 2, "bytes": 2}))
    (target / "old.parquet").unlink()
    os.replace(run.staging / "part-a.parquet", target / "part-a.parquet")
    dead = BatchOutput(str(target), "parquet")
    staged(dead, {"part-z.parquet": "never committed"})
    notes = BatchOutput(str(target), "parquet").recover()
    assert len(notes) == 2 and not run.staging.exists() and not dead.staging.exists()
    assert data(target) == {"part-a.parquet": "a", "part-b.parquet": "b"}
    assert json.loads((target / MANIFEST).read_text())["ranges"] == {"t": {"0": [[0, 2]]}}
    # Finishing again changes nothing (the run is in the manifest once).
    assert BatchOutput(str(target), "parquet").recover() == []
    assert len(json.loads((target / MANIFEST).read_text())["runs"]) == 1


def test_a_streaming_outputs_uncommitted_files_are_removed(tmp_path: Path) -> None:
    target, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    (target / "_spark_metadata").mkdir(parents=True)
    kept, orphan = target / "part-00000-a.parquet", target / "part-00000-b.parquet"
    for path in (kept, orphan):
        path.write_text("rows")
    (target / ".part-00000-b.parquet.crc").write_text("crc")
    entry = {"path": kept.absolute().as_uri(), "size": 4, "isDir": False, "modificationTime": 0,
             "blockReplication": 1, "blockSize": 1, "action": "add"}
    (target / "_spark_metadata" / "0").write_text("v1\n" + json.dumps(entry) + "\n")
    output = StreamOutput(str(target), str(checkpoint))
    with pytest.raises(InvalidConfigurationError, match="checkpoint .* is new"):
        output.check(overwrite=False)
    assert output.remove_orphans() == [orphan]
    assert sorted(path.name for path in target.iterdir()) == ["_spark_metadata", kept.name]


def test_only_the_files_of_taken_task_attempts_are_committed(tmp_path: Path) -> None:
    target = tmp_path / "out"
    run = BatchOutput(str(target), "parquet")
    staged(run, {"partition=0/part-00000-taken.parquet": "a", "partition=0/part-00000-failed.parquet": "half",
                 "part-00001-taken.parquet": "b", "part-00001-lost-race.parquet": "b"})
    extra = run.discard_except(["partition=0/part-00000-taken.parquet", "part-00001-taken.parquet"])
    assert sorted(path.name for path in extra) == ["part-00000-failed.parquet", "part-00001-lost-race.parquet"]
    result = run.commit([OffsetRange("t", 0, 0, 2)], rows=2, overwrite=False)
    assert result.files == 2
    assert data(target) == {"partition=0/part-00000-taken.parquet": "a", "part-00001-taken.parquet": "b"}
