"""Ctrl-C on `python -m kfk spark-export`: SIGINT to the command's process group, as a terminal sends it, at each
stage of a run, a few times each. A batch export then ends with one line and exit code 130, nothing of the run in
the output, and Spark's JVM gone; a streaming one stops its query and prints its summary. Never a traceback.

The stages are observed, not timed: the Spark launcher among the command's processes (the session is starting),
Python's worker for data sources (the session is up, the job is next), the first file in the run's staging dir (the
job is writing, with 39 of its 40 one-at-a-time tasks to go), the first micro-batch's file (a streaming query)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.spark.conftest import create_topic, produce_json

pytestmark = pytest.mark.spark

RECORDS = 4000
TASKS = 40


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker and one topic for the module's runs (each run reads the same records)."""
    pytest.importorskip("pyspark")
    broker = start_broker(tmp_path_factory.mktemp("kfk-interrupt"), dict(TEST_OVERRIDES))
    create_topic(broker.bootstrap_servers, "clicks", 4)
    produce_json(broker.bootstrap_servers, "clicks", 0, RECORDS)
    yield broker
    assert broker.stop() == 0


def processes_below(pid: int) -> dict[int, str]:
    """Every descendant of `pid` (its children, theirs...) with its command line."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    found: dict[int, str] = {}
    todo = [pid]
    while todo:
        parent = todo.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in found:
                try:
                    found[child] = Path(f"/proc/{child}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                except OSError:
                    continue
                todo.append(child)
    return found


def alive(pid: int, command_line: str) -> bool:
    """The process runs, and is the one that had this command line (not a later one with its pid)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        now = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return False
    return state != "Z" and now == command_line


def spark_launcher(process: subprocess.Popen, out: Path) -> bool:
    return any("spark-submit" in line or "SparkSubmit" in line for line in processes_below(process.pid).values())


def data_source_worker(process: subprocess.Popen, out: Path) -> bool:
    return any("pyspark.daemon" in line for line in processes_below(process.pid).values())


def first_staged_file(process: subprocess.Popen, out: Path) -> bool:
    return any(out.parent.glob(f".{out.name}.kfk-staging-*/**/*.parquet"))


def first_streamed_file(process: subprocess.Popen, out: Path) -> bool:
    return any(out.glob("*.parquet"))


def interrupt_when(stage: Callable[[subprocess.Popen, Path], bool], arguments: list[str], tmp_path: Path
                   ) -> tuple[int, str, str]:
    """Run the export, send SIGINT to its process group once `stage` is seen, and wait for it to end; returns the
    exit code, stdout and stderr. The processes it had started by then (the JVM among them) must end too."""
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    with stdout.open("w") as out_file, stderr.open("w") as err_file:
        process = subprocess.Popen([sys.executable, "-m", "kfk", "spark-export", *arguments], stdin=subprocess.DEVNULL,
                                   stdout=out_file, stderr=err_file, start_new_session=True)
    started: dict[int, str] = {}
    try:
        deadline = time.monotonic() + 300
        while not stage(process, tmp_path / "out"):
            assert process.poll() is None, f"ended before the stage: {stderr.read_text()}"
            assert time.monotonic() < deadline, "the stage never came"
            time.sleep(0.02)
        started = processes_below(process.pid)
        os.killpg(process.pid, signal.SIGINT)
        code = process.wait(timeout=180)
        # Spark stopped: the JVM (and the Python workers it started) end with the command, or soon after.
        deadline = time.monotonic() + 60
        while any(alive(*entry) for entry in started.items()) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = {pid: line for pid, line in started.items() if alive(pid, line)}
        assert left == {}, f"still running after the command ended: {left}"
    finally:
        for pid, line in started.items():
            if alive(pid, line):
                os.kill(pid, signal.SIGKILL)
        if process.poll() is None:
            process.kill()
        process.wait()
    return code, stdout.read_text(), stderr.read_text()


@pytest.mark.parametrize("attempt", [1, 2])
@pytest.mark.parametrize("stage", [spark_launcher, data_source_worker, first_staged_file],
                         ids=["session-starting", "session-up", "tasks-writing"])
def test_ctrl_c_stops_a_batch_export_cleanly(broker: BrokerProcess, stage, attempt: int, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, stdout, stderr = interrupt_when(stage, [
        "--topic", "clicks", "--bootstrap-server", broker.bootstrap_servers, "--output", str(out),
        "--master", "local[1]", "--min-partitions", str(TASKS)], tmp_path)
    assert (code, stdout, stderr) == (130, "", f"kfk: interrupted; nothing of this run was written to {out}\n")
    assert not any(out.glob("**/*.parquet")) and not any(tmp_path.glob(".out.kfk-staging-*"))


@pytest.mark.parametrize("attempt", [1, 2])
def test_ctrl_c_ends_a_streaming_export_with_its_summary(broker: BrokerProcess, attempt: int,
                                                         tmp_path: Path) -> None:
    """An interval trigger runs until Ctrl-C: that is its normal end (exit code 0 and the summary), the query
    stopped between two calls into the JVM (the main thread used to be in one, awaitTermination, nearly always)."""
    code, stdout, stderr = interrupt_when(first_streamed_file, [
        "--topic", "clicks", "--bootstrap-server", broker.bootstrap_servers, "--output", str(tmp_path / "out"),
        "--stream", "--checkpoint", str(tmp_path / "checkpoint"), "--trigger", "1s", "--master", "local[1]",
        "--max-offsets-per-trigger", "100"], tmp_path)
    assert code == 0 and stderr == "", stderr
    assert "note: stopped by the user; the next run with the same --checkpoint goes on from here" in stdout
    assert "exported " in stdout.splitlines()[-1]
