"""`kfk server start|stop`: run a broker in the foreground, or stop one (kafka-server-start.sh / -stop.sh).

With no properties file, `kfk server start` is the embedded default: one node that is both broker and controller,
listening on 127.0.0.1:9092, data in ./kfk-data. `--override key=value` changes any property, with or without a
file (Kafka's own flag).
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path
from typing import Annotated, Optional

import typer

from kfk.commands.errors import fail

app = typer.Typer(help="Run or stop a kfk broker.", no_args_is_help=True)

#: The embedded single-node default; the same choices as Kafka's sample config/server.properties for one node,
#: group.initial.rebalance.delay.ms=0 included (Kafka's built-in default, 3000, suits production groups whose members
#: start together; on a development broker it only makes every new consumer wait 3 s).
EMBEDDED_DEFAULTS = {
    "node.id": "1",
    "process.roles": "broker,controller",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "log.dirs": "./kfk-data",
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
}


def _configure_logging(level: str) -> None:
    """Rich, coloured logs on a terminal; plain one-line records otherwise (files, pipes, CI), never wrapped."""
    import sys

    if sys.stderr.isatty():
        from rich.logging import RichHandler

        handler: logging.Handler = RichHandler(show_path=False, rich_tracebacks=True)
        handler.setFormatter(logging.Formatter("%(message)s", datefmt="[%X]"))
    else:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("[%(asctime)s] %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler])


def load_broker_properties(properties: Optional[str], override: Optional[list[str]]) -> dict[str, str]:
    from kfk.config import parse_overrides
    from kfk.storage.meta_properties import read_properties

    if properties is None:
        props = dict(EMBEDDED_DEFAULTS)
        if any(entry.split("=", 1)[0].strip() == "zookeeper.connect" for entry in override or []):
            # ZooKeeper mode: the broker's id comes from broker.id, and there are no KRaft roles.
            props.pop("process.roles")
            props.pop("node.id")
    else:
        try:
            props = read_properties(properties)
        except OSError as error:
            fail(f"cannot read {properties}: {error.strerror or error}")
    props.update(parse_overrides(override or []))
    return props


@app.command()
def start(
    properties: Annotated[
        Optional[str], typer.Argument(help="A server.properties file; without one, a single-node broker+controller.")
    ] = None,
    override: Annotated[
        Optional[list[str]], typer.Option("--override", help="Set a property: key=value (repeatable).")
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning or error.")] = "info",
) -> None:
    """Start a broker in the foreground; SIGTERM or Ctrl-C stops it cleanly."""
    from kfk.config import BrokerConfig
    from kfk.errors import KafkaError

    _configure_logging(log_level)
    try:
        config = BrokerConfig(load_broker_properties(properties, override))
    except KafkaError as error:
        fail(str(error))
    for name in config.unknown:
        logging.getLogger("kfk.config").warning("ignoring unknown property %s", name)
    if properties is None:
        logging.getLogger("kfk.server").info(
            "no server.properties given: %s, data in %s, group.initial.rebalance.delay.ms=%d (as Kafka's sample "
            "server.properties: a new consumer group's first rebalance does not wait for more members)",
            "a broker on ZooKeeper" if config.zookeeper_connect else "single-node broker+controller",
            os.path.abspath(config.log_dir_list[0]), config.group_initial_rebalance_delay_ms)

    from kfk.server.broker import run_broker

    try:
        code = run_broker(config)
    except KafkaError as error:
        fail(str(error))
    raise typer.Exit(code)


@app.command()
def stop(
    log_dir: Annotated[
        str, typer.Option("--log-dir", help="The log dir of the broker to stop (its kfk.pid is there).")
    ] = "./kfk-data",
) -> None:
    """Stop the broker that runs on a log dir (SIGTERM: it flushes and checkpoints before exiting)."""
    from kfk.storage.log_files import BROKER_PID_FILE

    pid_file = Path(log_dir, BROKER_PID_FILE)
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        fail(f"no running broker found: {pid_file} is missing (is --log-dir right?)")
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pid_file.unlink(missing_ok=True)
        fail(f"no broker with pid {pid} is running (removed the stale {pid_file})")
    typer.echo(f"sent SIGTERM to broker pid {pid}")
