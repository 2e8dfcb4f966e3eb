"""`kfk zookeeper start`: the installed ZooKeeper in the foreground, on the port and data dir given."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from kfk.cli import app
from kfk.testing.ports import free_port
from kfk.testing.zookeeper import is_serving

runner = CliRunner()


def test_help() -> None:
    for command in (["zookeeper", "--help"], ["zookeeper", "start", "--help"]):
        result = runner.invoke(app, command)
        assert result.exit_code == 0 and "Usage:" in result.output


@pytest.mark.zookeeper
def test_start_serves_on_the_port_and_stops_on_sigterm(tmp_path, zookeeper_server) -> None:
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "kfk", "zookeeper", "start", "--port", str(port),
                                "--data-dir", str(tmp_path / "zk"), "--tick-time", "500", "--host", "127.0.0.1"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not is_serving("127.0.0.1", port):
            assert process.poll() is None, process.stderr.read().decode()
            assert time.monotonic() < deadline
            time.sleep(0.1)
        config = (tmp_path / "zk" / "zoo.cfg").read_text()
        assert f"clientPort={port}" in config and "tickTime=500" in config
        assert (tmp_path / "zk" / "version-2").is_dir()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(20)
    assert not is_serving("127.0.0.1", port)


def test_a_missing_installation_is_explained(monkeypatch, tmp_path) -> None:
    import kfk.testing.zookeeper as zookeeper

    monkeypatch.delenv("KFK_ZOOKEEPER_CLASSPATH", raising=False)
    monkeypatch.setattr(zookeeper, "JAVA_SHARE", str(tmp_path))
    result = runner.invoke(app, ["zookeeper", "start", "--data-dir", str(tmp_path / "zk")])
    assert result.exit_code == 1 and "apt-get install zookeeper" in result.output


@pytest.mark.zookeeper
def test_a_client_port_in_use_is_one_line_not_a_java_stack(tmp_path, zookeeper_server) -> None:
    """The session's ZooKeeper holds its client port: a second one on that port (from flags, or from a zoo.cfg) is
    refused with one line that says what to do, where ZooKeeper would log its start-up and an 80-line stack."""
    port = zookeeper_server.client_port
    (tmp_path / "zoo.cfg").write_text(f"tickTime=500\ndataDir={tmp_path / 'from-file'}\nclientPort={port}\n"
                                      f"clientPortAddress=127.0.0.1\n")
    for arguments, advice in ((["--port", str(port), "--host", "127.0.0.1", "--data-dir", str(tmp_path / "zk")],
                               "choose another --port"),
                              ([str(tmp_path / "zoo.cfg")], f"choose another clientPort in {tmp_path / 'zoo.cfg'}")):
        done = subprocess.run([sys.executable, "-m", "kfk", "zookeeper", "start", *arguments],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 1 and done.stderr.splitlines() == [
            f"kfk: cannot listen on 127.0.0.1:{port}: the port is in use (is a ZooKeeper already running there?): "
            f"stop what holds it, or {advice}"], done.stderr
    assert is_serving("127.0.0.1", port)
