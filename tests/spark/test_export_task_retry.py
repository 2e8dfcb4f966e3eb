"""A batch Parquet export whose Spark task dies half-way through its file: Spark runs the task again and the output
holds every record exactly once, with nothing of the dead attempt.

The failure is a real one: the Python worker writing the file is SIGKILLed (found as the process of the export's
session that has a staged part file open), Spark sees its worker crash and retries the task (``local[2,4]``: a local
master that allows four attempts per task). The export runs as `python -m kfk spark-export` in a process of its own,
so that its SparkContext can allow retries; its output is read back with pyarrow and with Spark."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

import pyarrow.parquet as pq  # noqa: E402

from tests.spark.conftest import create_topic, produce_json  # noqa: E402
from tests.spark.test_export import arrow_rows, assert_exactly, spark_rows  # noqa: E402

pytestmark = pytest.mark.spark


def session_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[3])  # after state, ppid, pgrp: the session id


def writers_of_staged_files(session: int, staging_prefix: str) -> dict[int, str]:
    """{pid: staged part file it has open} over the processes of ``session``."""
    found = {}
    for name in os.listdir("/proc"):
        if not name.isdigit() or session_of(int(name)) != session:
            continue
        try:
            descriptors = os.listdir(f"/proc/{name}/fd")
        except OSError:
            continue
        for descriptor in descriptors:
            try:
                target = os.readlink(f"/proc/{name}/fd/{descriptor}")
            except OSError:
                continue
            if target.startswith(staging_prefix) and os.path.basename(target).startswith("part-"):
                found[int(name)] = target
    return found


def test_a_task_killed_mid_file_is_retried_and_its_file_never_committed(spark: Any, kfk_broker: str,
                                                                        tmp_path: Path) -> None:
    create_topic(kfk_broker, "retried", 1)
    produced = produce_json(kfk_broker, "retried", 0, 100_000, codecs=("lz4",))
    output = tmp_path / "retried"
    # One task for the whole partition (--min-partitions 1): ten Arrow batches, so it is killed with its file open.
    command = [sys.executable, "-m", "kfk", "spark-export", "--bootstrap-server", kfk_broker, "--topic", "retried",
               "--output", str(output), "--master", "local[2,4]", "--min-partitions", "1", "--include-headers",
               "--json", "--spark-conf", "spark.ui.enabled=false"]
    job = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    killed: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 300
        while not killed and job.poll() is None and time.monotonic() < deadline:
            for pid, path in writers_of_staged_files(job.pid, str(tmp_path / ".retried.kfk-staging-")).items():
                os.kill(pid, signal.SIGKILL)
                killed[pid] = path
            time.sleep(0.01)
        stdout, stderr = job.communicate(timeout=600)
    finally:
        try:
            os.killpg(job.pid, signal.SIGKILL)  # whatever of the JVM and its workers is left
        except ProcessLookupError:
            pass
    assert killed, "no task was caught writing its file"
    assert job.returncode == 0, stderr.decode(errors="replace")[-4000:]
    summary = json.loads(stdout)
    assert summary["rows"] == 100_000
    files = sorted(path.name for path in output.rglob("part-*"))
    assert files and not {Path(path).name for path in killed.values()} & set(files)
    assert not list(tmp_path.glob(".retried.kfk-staging-*"))
    assert_exactly(arrow_rows(output), produced)
    assert_exactly(spark_rows(spark, output), produced)
    assert pq.read_table(output).num_rows == 100_000
