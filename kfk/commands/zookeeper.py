"""`kfk zookeeper start`: run the ZooKeeper server installed on this machine in the foreground (Kafka's
zookeeper-server-start.sh).

With a properties file (Kafka's config/zookeeper.properties, i.e. a zoo.cfg) the server reads that file; without
one, a zoo.cfg is generated from --port, --data-dir and --tick-time. The process is replaced by the Java server, so
Ctrl-C and SIGTERM reach ZooKeeper itself. ZooKeeper comes from Debian's `zookeeper` package
(`sudo apt-get install zookeeper`); KFK_ZOOKEEPER_CLASSPATH points elsewhere.

A client port that is already taken (most often by a ZooKeeper still running) is found before the JVM starts: the
server would log its whole start-up and an 80-line Java stack for it, then exit.
"""

from __future__ import annotations

import errno
import os
import socket
from pathlib import Path
from typing import Annotated, Optional

import typer

from kfk.commands.errors import fail

app = typer.Typer(help="Run a ZooKeeper server for kfk's ZooKeeper metadata backend.", no_args_is_help=True)


@app.command()
def start(
    properties: Annotated[
        Optional[str], typer.Argument(help="A zookeeper.properties / zoo.cfg file; without one, flags decide.")
    ] = None,
    port: Annotated[int, typer.Option("--port", help="Client port.")] = 2181,
    data_dir: Annotated[str, typer.Option("--data-dir", help="Where ZooKeeper keeps its data.")] = "./zookeeper-data",
    tick_time: Annotated[int, typer.Option("--tick-time", help="tickTime in ms (sessions: 2-20 ticks).")] = 2000,
    host: Annotated[str, typer.Option("--host", help="Address the client port binds to.")] = "0.0.0.0",
) -> None:
    """Start ZooKeeper in the foreground (Ctrl-C stops it)."""
    from kfk.testing.zookeeper import (
        STANDALONE_MAIN,
        ZooKeeperNotInstalledError,
        java_executable,
        zoo_cfg,
        zookeeper_classpath,
    )

    if properties is None and not 0 < port < 65536:
        fail(f"--port {port} is not a TCP port (1-65535)")
    try:
        classpath = zookeeper_classpath()
        java = java_executable()
    except ZooKeeperNotInstalledError as error:
        fail(str(error))
    if properties is not None:
        if not os.path.exists(properties):
            fail(f"cannot read {properties}: no such file")
        config = os.path.abspath(properties)
        client_address = _client_address(config)
        if client_address is not None:
            _check_port_free(*client_address, f"clientPort in {properties}", f"clientPortAddress in {properties}")
    else:
        data = Path(data_dir).absolute()
        config_path = data / "zoo.cfg"
        try:
            data.mkdir(parents=True, exist_ok=True)
            config_path.write_text(zoo_cfg(str(data), port, tick_time, host))
        except OSError as error:
            fail(f"cannot use --data-dir {data_dir}: {error.strerror or error}")
        config = str(config_path)
        _check_port_free(host, port, "--port", "--host")
        typer.echo(f"ZooKeeper on {host}:{port}, data in {data} (config {config})", err=True)
    os.execv(java, [java, "-cp", classpath, STANDALONE_MAIN, config])


def _client_address(config: str) -> tuple[str, int] | None:
    """(clientPortAddress, clientPort) of a zoo.cfg, or None when it sets no (numeric) client port; ZooKeeper
    itself reports a malformed file."""
    import javaproperties

    try:
        with open(config, encoding="utf-8") as handle:
            settings = javaproperties.load(handle)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    port = settings.get("clientPort", "").strip()
    if not port.isdigit():
        return None
    return settings.get("clientPortAddress", "").strip() or "0.0.0.0", int(port)


def _check_port_free(host: str, port: int, port_setting: str, host_setting: str) -> None:
    """Fail with one line if ZooKeeper could not listen on host:port. The probe binds as ZooKeeper's server socket
    does (SO_REUSEADDR, so a port left in TIME_WAIT counts as free), and lets go at once."""
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                                flags=socket.AI_PASSIVE)[0]
        with socket.socket(family, kind, protocol) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            fail(f"cannot listen on {host}:{port}: the port is in use (is a ZooKeeper already running there?): "
                 f"stop what holds it, or choose another {port_setting}")
        fail(f"cannot listen on {host}:{port}: {error.strerror or error}: check {host_setting} and {port_setting}")
