"""`kfk connect standalone` and `kfk connect distributed` refuse bad input in one line, without a traceback."""

import subprocess
import sys

import pytest


def run(*args: str, mode: str = "standalone") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfk", "connect", mode, *args], capture_output=True,
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


REQUIRED = "bootstrap.servers=127.0.0.1:1\ngroup.id=g\nconfig.storage.topic=c\noffset.storage.topic=o\n"


@pytest.mark.parametrize("worker, expected", [
    (REQUIRED, 'Missing required configuration "status.storage.topic"'),
    (REQUIRED + "status.storage.topic=s\nconnect.protocol=cooperative\n",
     "Invalid value cooperative for configuration connect.protocol: String must be one of (case insensitive): "
     "eager, compatible, sessioned"),
    (REQUIRED + "status.storage.topic=s\nscheduled.rebalance.max.delay.ms=-1\n",
     "Invalid value -1 for configuration scheduled.rebalance.max.delay.ms: Value must be at least 0"),
    (REQUIRED + "status.storage.topic=s\nsession.timeout.ms=ten\n",
     "Invalid value ten for configuration session.timeout.ms: Not a number of type INT"),
])
def test_bad_distributed_worker_properties_fail_in_one_line(tmp_path, worker, expected):
    path = tmp_path / "worker.properties"
    path.write_text(worker + "listeners=http://127.0.0.1:0\n")
    result = run(str(path), mode="distributed")
    assert result.returncode == 1
    assert expected in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
