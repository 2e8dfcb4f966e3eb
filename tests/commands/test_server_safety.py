"""Safety rails of `kfk server start|stop` and `kfk storage format` around a live broker, through `python -m kfk`.

A broker locks its log dir for its lifetime: a second broker, or a format, on that dir is refused in one line naming
the holder and changes nothing; `kfk server stop` signals only the kfk broker that holds the dir's lock, never a
process a stale pid file happens to name.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kfk.testing.broker import BrokerProcess


def kfk(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfk", *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def snapshot(directory: Path) -> dict[str, tuple[int, int]]:
    """Every file under the dir with its size and modification time (ns): what "touching nothing" means."""
    return {str(path.relative_to(directory)): (path.stat().st_size, path.stat().st_mtime_ns)
            for path in sorted(directory.rglob("*")) if path.is_file()}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    from kfk.testing.broker import start_broker

    process = start_broker(tmp_path_factory.mktemp("locked"), {"num.partitions": "2"})
    assert kfk("topics", "create", "--topic", "kept", "--bootstrap-server", process.bootstrap_servers).returncode == 0
    yield process
    process.stop()


def test_a_second_broker_on_a_locked_log_dir_is_refused_and_touches_nothing(broker: BrokerProcess) -> None:
    before = snapshot(broker.log_dir)
    assert (broker.log_dir / "kfk.pid").exists() and (broker.log_dir / ".lock").exists()
    second = kfk("server", "start", "--override", f"log.dirs={broker.log_dir}",
                 "--override", "listeners=PLAINTEXT://127.0.0.1:0")
    assert second.returncode == 1
    assert second.stderr.splitlines() == [
        f"kfk: log dir {broker.log_dir} is in use by pid {broker.process.pid} (its .lock is locked): stop that "
        f"broker first (kfk server stop --log-dir {broker.log_dir})"]
    assert snapshot(broker.log_dir) == before  # no recovery, the pid file kept
    assert broker.process.poll() is None


def test_storage_format_refuses_a_locked_log_dir(broker: BrokerProcess) -> None:
    before = snapshot(broker.log_dir)
    formatted = kfk("storage", "format", "--ignore-formatted", "--override", f"log.dirs={broker.log_dir}")
    assert formatted.returncode == 1
    assert formatted.stderr.splitlines() == [
        f"kfk: log dir {broker.log_dir} is in use by pid {broker.process.pid} (its .lock is locked): stop that "
        f"broker first (kfk server stop --log-dir {broker.log_dir})"]
    assert snapshot(broker.log_dir) == before


def test_stop_leaves_alone_a_process_a_stale_pid_file_names(tmp_path: Path) -> None:
    """A broker killed with -9 leaves kfk.pid behind; its pid may belong to another process by now."""
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        log_dir = tmp_path / "data"
        log_dir.mkdir()
        (log_dir / "kfk.pid").write_text(f"{bystander.pid}\n")
        stopped = kfk("server", "stop", "--log-dir", str(log_dir))
        assert stopped.returncode == 1
        assert stopped.stderr.splitlines() == [
            f"kfk: no broker is running on {log_dir}: its lock is free, so {log_dir / 'kfk.pid'} is stale (pid "
            f"{bystander.pid}; that process, if any, was left alone)"]
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()


def test_stop_refuses_a_lock_holder_that_is_not_a_kfk_broker(tmp_path: Path) -> None:
    """Whatever holds the dir's lock (here a Python process that took it, as Apache Kafka's JVM would) is not
    signalled unless it is `kfk server start`."""
    log_dir = tmp_path / "data"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from kfk.storage.log_dir_lock import LogDirLock; "
                               f"LogDirLock.acquire({str(log_dir)!r}); print('locked', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        stopped = kfk("server", "stop", "--log-dir", str(log_dir))
        assert stopped.returncode == 1
        assert len(stopped.stderr.splitlines()) == 1
        assert stopped.stderr.startswith(f"kfk: the process holding {log_dir} is not a kfk broker (")
        assert stopped.stderr.rstrip().endswith("): left alone")
        assert holder.poll() is None
    finally:
        holder.kill()
        holder.wait()


def test_stop_signals_the_broker_holding_the_lock(tmp_path: Path) -> None:
    from kfk.testing.broker import start_broker

    process = start_broker(tmp_path)
    try:
        stopped = kfk("server", "stop", "--log-dir", str(process.log_dir))
        assert stopped.returncode == 0, stopped.stderr
        assert stopped.stdout.strip() == f"sent SIGTERM to broker pid {process.process.pid}"
        assert process.process.wait(20) == 0
        assert not (process.log_dir / "kfk.pid").exists()
        # The lock went with the broker: the dir starts again.
        assert process.start().process.poll() is None
    finally:
        process.stop()


def test_a_killed_broker_leaves_no_lock_behind(tmp_path: Path) -> None:
    from kfk.testing.broker import start_broker

    process = start_broker(tmp_path)
    try:
        pid = process.process.pid
        process.kill()
        assert (process.log_dir / "kfk.pid").read_text().strip() == str(pid)
        restarted = process.start()
        assert os.path.exists(process.log_dir / "meta.properties") and restarted.process.poll() is None
    finally:
        process.stop()


def test_a_posix_record_lock_as_apache_kafka_takes_keeps_kfk_out(tmp_path: Path) -> None:
    """Apache Kafka's JVM locks `.lock` with a POSIX record lock (FileChannel.tryLock, fcntl F_SETLK): kfk's lock
    conflicts with it, and names that process's pid, which the lock itself tells."""
    log_dir = tmp_path / "data"
    log_dir.mkdir()
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, time; handle = open('.lock', 'w'); fcntl.lockf(handle, fcntl.LOCK_EX); "
                               "print('locked', flush=True); time.sleep(60)"],
        cwd=log_dir, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        started = kfk("server", "start", "--override", f"log.dirs={log_dir}",
                      "--override", "listeners=PLAINTEXT://127.0.0.1:0")
        assert started.returncode == 1
        assert started.stderr.startswith(f"kfk: log dir {log_dir} is in use by pid {holder.pid} (")
        assert sorted(path.name for path in log_dir.iterdir()) == [".lock"]
    finally:
        holder.kill()
        holder.wait()
