"""A real Apache ZooKeeper server in a subprocess: `kfk zookeeper start` and the `zookeeper` test fixtures use it.

kfk does not ship ZooKeeper; it runs the one installed on the machine (Debian's `zookeeper` package:
`apt-get install zookeeper`, which puts zookeeper.jar and its dependencies under /usr/share/java). The server is
Java's own ZooKeeperServerMain (standalone) or QuorumPeerMain (one member of an ensemble, `server.N` lines plus a
`myid` file), started with a generated zoo.cfg — what Kafka's zookeeper-server-start.sh does with its
config/zookeeper.properties.

Readiness is ZooKeeper's `srvr` four-letter command answering with the server's state (it answers "not currently
serving requests" until the database is loaded, and an ensemble member until a leader is elected). Sessions are
clamped by the server to [2, 20] x tickTime, so tests run with tickTime=500: a 1-10 s session timeout range, and a
killed broker's ephemeral znodes vanish within its session timeout.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from kfk.testing.ports import free_port

#: Where Debian's zookeeper package installs its jars (and its dependencies' jars).
JAVA_SHARE = "/usr/share/java"
#: The jars ZooKeeperServerMain needs besides zookeeper.jar (logging through slf4j-simple to stderr).
DEPENDENCY_JARS = ("zookeeper-jute", "slf4j-api", "slf4j-simple", "netty-handler", "netty-transport",
                   "netty-common", "netty-buffer", "netty-codec", "netty-resolver", "netty-transport-native-epoll",
                   "netty-transport-native-unix-common", "metrics-core", "commons-cli", "commons-io")
INSTALL_HINT = ("ZooKeeper is not installed: install Debian's package (`sudo apt-get install zookeeper`, with a "
                "Java runtime), or set KFK_ZOOKEEPER_CLASSPATH to the zookeeper jars")
STANDALONE_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
QUORUM_MAIN = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


class ZooKeeperNotInstalledError(RuntimeError):
    pass


class ZooKeeperStartError(RuntimeError):
    pass


def zookeeper_classpath() -> str:
    """The Java classpath of the installed ZooKeeper server (KFK_ZOOKEEPER_CLASSPATH overrides it)."""
    configured = os.environ.get("KFK_ZOOKEEPER_CLASSPATH")
    if configured:
        return configured
    main_jar = os.path.join(JAVA_SHARE, "zookeeper.jar")
    if not os.path.exists(main_jar):
        raise ZooKeeperNotInstalledError(INSTALL_HINT)
    jars = [main_jar]
    for name in DEPENDENCY_JARS:
        path = os.path.join(JAVA_SHARE, f"{name}.jar")
        if os.path.exists(path):
            jars.append(path)
        else:
            jars.extend(sorted(glob.glob(os.path.join(JAVA_SHARE, f"{name}-[0-9]*.jar")))[-1:])
    return ":".join(jars)


def java_executable() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.path.exists(os.path.join(java_home, "bin", "java")):
        return os.path.join(java_home, "bin", "java")
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperNotInstalledError(INSTALL_HINT)
    return java


def zoo_cfg(data_dir: str, client_port: int, tick_time_ms: int = 2000, host: str = "127.0.0.1",
            ensemble: dict[int, tuple[int, int]] | None = None) -> str:
    """zoo.cfg text. `ensemble` maps each server id to its (quorum port, election port), all on `host`."""
    lines = [
        f"tickTime={tick_time_ms}",
        f"dataDir={data_dir}",
        f"clientPort={client_port}",
        f"clientPortAddress={host}",
        "initLimit=10",
        "syncLimit=5",
        "maxClientCnxns=0",
        "admin.enableServer=false",
        "4lw.commands.whitelist=srvr,ruok,stat,cons,mntr",
        "autopurge.purgeInterval=0",
    ]
    for server_id, (quorum_port, election_port) in sorted((ensemble or {}).items()):
        lines.append(f"server.{server_id}={host}:{quorum_port}:{election_port}")
    return "\n".join(lines) + "\n"


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str | None:
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(word.encode())
            chunks = []
            while True:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                chunks.append(chunk)
        return b"".join(chunks).decode("utf-8", "replace")
    except OSError:
        return None


def is_serving(host: str, port: int) -> bool:
    answer = four_letter_word(host, port, "srvr")
    return answer is not None and "Mode:" in answer


@dataclass
class ZooKeeperServer:
    """One ZooKeeper server process (standalone, or member `server_id` of an ensemble)."""

    directory: Path
    client_port: int = 0
    tick_time_ms: int = 500
    host: str = "127.0.0.1"
    server_id: int | None = None
    ensemble: dict[int, tuple[int, int]] = field(default_factory=dict)
    process: subprocess.Popen | None = None

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)
        if self.client_port == 0:
            self.client_port = free_port(self.host)

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def log_path(self) -> Path:
        return self.directory / "zookeeper.log"

    def write_config(self) -> Path:
        data_dir = self.directory / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        if self.server_id is not None:
            (data_dir / "myid").write_text(f"{self.server_id}\n")
        config = self.directory / "zoo.cfg"
        config.write_text(zoo_cfg(str(data_dir), self.client_port, self.tick_time_ms, self.host, self.ensemble))
        return config

    def command(self) -> list[str]:
        main = QUORUM_MAIN if self.ensemble else STANDALONE_MAIN
        return [java_executable(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                "-Dzookeeper.jmx.log4j.disable=true", "-cp", zookeeper_classpath(), main,
                str(self.write_config())]

    def start(self, timeout: float = 30.0, wait: bool = True) -> ZooKeeperServer:
        command = self.command()
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True)
        log.close()
        if wait:
            self.wait_until_serving(timeout)
        return self

    def wait_until_serving(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise ZooKeeperStartError(f"ZooKeeper exited with {self.process.returncode}:\n"
                                          f"{self.output()[-4000:]}")
            if is_serving(self.host, self.client_port):
                return
            time.sleep(0.05)
        self.kill()
        raise ZooKeeperStartError(f"ZooKeeper not serving after {timeout}s:\n{self.output()[-4000:]}")

    def stop(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def output(self) -> str:
        return self.log_path.read_text("utf-8", "replace") if self.log_path.exists() else ""


def start_ensemble(directory: Path, size: int = 3, tick_time_ms: int = 500,
                   host: str = "127.0.0.1") -> list[ZooKeeperServer]:
    """`size` servers forming one ensemble; returns once a quorum serves."""
    ensemble = {server_id: (free_port(host), free_port(host)) for server_id in range(1, size + 1)}
    servers = [ZooKeeperServer(Path(directory) / f"zk{server_id}", tick_time_ms=tick_time_ms, host=host,
                               server_id=server_id, ensemble=ensemble)
               for server_id in ensemble]
    for server in servers:
        server.directory.mkdir(parents=True, exist_ok=True)
        server.start(wait=False)
    for server in servers:
        server.wait_until_serving()
    return servers
