"""`kfk connect standalone` refuses bad input in one line, without a traceback."""

import subprocess
import sys

import pytest


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfk", "connect", "standalone", *args], capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("worker, expected", [
    ("offset.storage.file.filename=/tmp/x\n", 'Missing required configuration "bootstrap.servers"'),
    ("bootstrap.servers=127.0.0.1:1\noffset.storage.file.filename=/tmp/x\nlisteners=https://:8443\n",
     "kfk serves http listeners only"),
])
def test_bad_worker_properties_fail_in_one_line(tmp_path, worker, expected):
    path = tmp_path / "worker.properties"
    path.write_text(worker + "listeners=http://127.0.0.1:0\n" if "listeners" not in worker else worker)
    result = run(str(path))
    assert result.returncode == 1
    assert expected in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
