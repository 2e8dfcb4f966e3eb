"""What `python -m kfk spark-export` shows on a terminal: its own progress (offsets planned, batches done, rows
written) and a one-line summary, and none of Spark's or the JVM's own start-up lines (those are for --verbose)."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.spark.conftest import create_topic

pytestmark = pytest.mark.spark

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def run_on_a_terminal(args: list[str], timeout: float) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal (where the progress goes) and stdout on a pipe; returns the exit code,
    stdout, and what the terminal showed (without colour codes)."""
    master, slave = pty.openpty()
    process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    shown = bytearray()
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer of the terminal is gone
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    stdout = process.stdout.read().decode()
    process.stdout.close()
    return process.wait(timeout), stdout, ANSI.sub("", shown.decode("utf-8", "replace"))


def test_progress_and_summary_on_a_terminal_without_spark_noise(kfk_broker: str, tmp_path: Path) -> None:
    create_topic(kfk_broker, "shown", 1)
    produced = subprocess.run([sys.executable, "-m", "kfk", "console-produce", "--topic", "shown",
                               "--bootstrap-server", kfk_broker], input="a\nb\nc\n", capture_output=True, text=True,
                              timeout=60)
    assert produced.returncode == 0, produced.stderr
    code, stdout, shown = run_on_a_terminal(
        [sys.executable, "-m", "kfk", "spark-export", "--topic", "shown", "--bootstrap-server", kfk_broker,
         "--output", str(tmp_path / "out"), "--format", "json"], timeout=600)
    assert code == 0, shown
    assert "3 offsets planned in 1 partitions" in shown
    assert re.search(r"batches \d+/\d+ done|3 rows written", shown), shown
    for noise in ("Using incubator modules", "Setting default log level", "setLogLevel", "WARN"):
        assert noise not in shown
    summary = re.search(r"^exported 3 rows \(.* in \d+ files\) to .*out as json in ([\d.]+) s"
                        r"(?: \(([\d.]+) rows/s\))?$", stdout, re.MULTILINE)
    assert summary, stdout
    # The rate is the rows over the seconds shown (to their rounding), never "0 rows/s"; none under a second.
    seconds, rate = float(summary[1]), summary[2]
    if seconds >= 1.1:
        assert rate is not None and 3 / (seconds + 0.05) * 0.95 <= float(rate) <= 3 / (seconds - 0.05) * 1.05, stdout
    elif seconds < 0.95:
        assert rate is None, stdout


def test_an_export_too_short_for_a_rate_shows_none(kfk_broker: str, tmp_path: Path) -> None:
    """An empty topic: nothing to export, Spark not even started, 0 s; the summary used to end "(0 rows/s)"."""
    create_topic(kfk_broker, "quiet", 1)
    done = subprocess.run([sys.executable, "-m", "kfk", "spark-export", "--topic", "quiet", "--bootstrap-server",
                           kfk_broker, "--output", str(tmp_path / "out")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == (f"exported 0 rows (0.0 MB in 0 files) to {tmp_path / 'out'} as parquet "
                                            "in 0.0 s")
