"""`kfk zookeeper start`: run the ZooKeeper server installed on this machine in the foreground (Kafka's
zookeeper-server-start.sh).

With a properties file (Kafka's config/zookeeper.properties, i.e. a zoo.cfg) the server reads that file; without
one, a zoo.cfg is generated from --port, --data-dir and --tick-time. The process is replaced by the Java server, so
Ctrl-C and SIGTERM reach ZooKeeper itself. ZooKeeper comes from Debian's `zookeeper` package
(`sudo apt-get install zookeeper`); KFK_ZOOKEEPER_CLASSPATH points elsewhere.
"""

from __future__ import annotations

import os
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
    else:
        data = Path(data_dir).absolute()
        config_path = data / "zoo.cfg"
        try:
            data.mkdir(parents=True, exist_ok=True)
            config_path.write_text(zoo_cfg(str(data), port, tick_time, host))
        except OSError as error:
            fail(f"cannot use --data-dir {data_dir}: {error.strerror or error}")
        config = str(config_path)
        typer.echo(f"ZooKeeper on {host}:{port}, data in {data} (config {config})", err=True)
    os.execv(java, [java, "-cp", classpath, STANDALONE_MAIN, config])
