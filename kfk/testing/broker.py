"""Run `kfk server start` in a subprocess and wait until it serves.

The broker logs to a file (never a pipe, which could fill and block it); readiness is the line it prints once its
listeners are bound, which also tells the ephemeral port it got.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

READY = re.compile(r"kfk broker (\d+) started, listening on (\S+)://([^\s:]+|\[[^\]]+\]):(\d+)([^(]*)")
BOUND = re.compile(r"(\w+)://\S+:(\d+)")
#: How long a start may take: a second or two on a quiet machine, but a test run shares its cores with other workers
#: (and with JVMs), and a slow start is no failure of the broker.
START_TIMEOUT_S = 60.0
#: Set (to a count), every broker started here gets num.network.threads=<count> unless its test sets it: CI runs the
#: integration, cluster, transaction and differential suites a second time so, against the broker's network
#: processes (kfk.server.network_processes).
NETWORK_THREADS_VARIABLE = "KFK_TEST_NETWORK_THREADS"


class BrokerStartError(RuntimeError):
    pass


@dataclass
class BrokerProcess:
    """A broker subprocess. `bootstrap_servers` is host:port of its one listener, named `listener_name` (SSL for a
    TLS broker, its ssl.* settings in `overrides`; listener.security.protocol.map gives a name's protocol)."""

    log_dir: Path
    overrides: dict[str, str]
    log_path: Path
    process: subprocess.Popen | None = None
    host: str = "127.0.0.1"
    port: int = 0
    node_id: int = 1
    extra_args: list[str] = field(default_factory=list)
    listener_name: str = "PLAINTEXT"
    #: More listeners, NAME://host:port (port 0: any), after the first; `ports` has every bound one's port by name.
    extra_listeners: list[str] = field(default_factory=list)
    ports: dict[str, int] = field(default_factory=dict)
    #: The port of its CONTROLLER listener (KRaft controllers: fixed before the start, the voters string names it).
    controller_port: int | None = None
    #: KRaft: the cluster id its log dir is formatted with (`kfk storage format`) before the first start, so that
    #: every node of the cluster has the same one.
    cluster_id: str | None = None
    #: More `kfk storage format` flags for that first format (e.g. `--add-scram ...`, or a dynamic quorum's
    #: `--standalone` or `--no-initial-controllers`).
    format_args: list[str] = field(default_factory=list)

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = START_TIMEOUT_S) -> BrokerProcess:
        """Start (or restart, on the same port) and wait until the broker is listening."""
        overrides = dict(self.overrides)
        overrides.setdefault("log.dirs", str(self.log_dir))
        if NETWORK_THREADS_VARIABLE in os.environ:  # the suites run again against the multi-process broker
            overrides.setdefault("num.network.threads", os.environ[NETWORK_THREADS_VARIABLE])
        overrides["listeners"] = self._listeners(overrides.get("process.roles", ""))
        override_args = [arg for key, value in overrides.items() for arg in ("--override", f"{key}={value}")]
        if self.cluster_id is not None and not (Path(overrides["log.dirs"]) / "meta.properties").exists():
            self._format(override_args)
        args = [sys.executable, "-m", "kfk", "server", "start", *self.extra_args, *override_args]
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = open(self.log_path, "ab")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log_path.read_bytes()[offset:].decode("utf-8", "replace")
            match = READY.search(text)
            if match:
                self.node_id = int(match.group(1))
                if match.group(2) != "CONTROLLER":  # a controller-only node: its controller_port is known
                    self.port = int(match.group(4))
                self.ports = {name: int(port) for name, port in BOUND.findall(match.group(0))}
                return self
            if self.process.poll() is not None:
                raise BrokerStartError(f"broker exited with {self.process.returncode}:\n{text[-4000:]}")
            time.sleep(0.02)
        self.kill()
        raise BrokerStartError(f"broker not ready after {timeout}s:\n{self.output()[-4000:]}")

    def _format(self, override_args: list[str]) -> None:
        done = subprocess.run([sys.executable, "-m", "kfk", "storage", "format", "--cluster-id", self.cluster_id,
                               *self.format_args, *override_args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise BrokerStartError(f"kfk storage format failed ({done.returncode}): {done.stderr.strip()}")

    def _listeners(self, roles: str) -> str:
        """`listener_name` (PLAINTEXT by default) and the extra listeners for a broker, CONTROLLER for a KRaft
        controller (a controller-only node has no other but its extra listeners: more controller listeners)."""
        listeners = []
        broker = self.controller_port is None or "broker" in roles
        if broker:
            listeners += [f"{self.listener_name}://{self.host}:{self.port}", *self.extra_listeners]
        if self.controller_port is not None:
            listeners.append(f"CONTROLLER://{self.host}:{self.controller_port}")
            if not broker:
                listeners += self.extra_listeners
        return ",".join(listeners)

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM (a clean shutdown) and wait; returns the exit code."""
        return self._signal(signal.SIGTERM, timeout)

    def kill(self) -> int:
        """SIGKILL: a crash, no flush, no checkpoints."""
        return self._signal(signal.SIGKILL, 10.0)

    def _signal(self, sig: int, timeout: float) -> int:
        if self.process is None:
            return 0
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        code = self.process.returncode
        self.process = None
        return code

    def output(self) -> str:
        return self.log_path.read_text("utf-8", "replace") if self.log_path.exists() else ""


def start_broker(log_dir: Path, overrides: dict[str, str] | None = None, host: str = "127.0.0.1",
                 port: int = 0, timeout: float = START_TIMEOUT_S, listener_name: str = "PLAINTEXT",
                 extra_listeners: list[str] | None = None) -> BrokerProcess:
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    broker = BrokerProcess(log_dir=log_dir / "data", overrides=dict(overrides or {}),
                           log_path=log_dir / "broker.log", host=host, port=port, listener_name=listener_name,
                           extra_listeners=list(extra_listeners or []))
    return broker.start(timeout)


def start_together(nodes: Iterable[BrokerProcess], timeout: float = START_TIMEOUT_S) -> None:
    """Start nodes in parallel and wait until each serves; the first failure is raised once all have finished. KRaft
    nodes must start together: a broker is ready only once a controller, which needs a majority of the voters, has
    unfenced it."""
    errors: list[BaseException] = []

    def start_one(node: BrokerProcess) -> None:
        try:
            node.start(timeout)
        except BaseException as error:  # noqa: BLE001 - raised below
            errors.append(error)

    threads = [threading.Thread(target=start_one, args=(node,)) for node in nodes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
