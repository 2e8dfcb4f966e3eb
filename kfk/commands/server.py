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
from kfk.commands.log_setup import LEVELS, LogFormat, configure_logging

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
    log_format: Annotated[LogFormat, typer.Option(
        "--log-format", help="text, or json: one JSON object per line (time, level, logger, message).")
    ] = LogFormat.text,
) -> None:
    """Start a broker in the foreground; SIGTERM or Ctrl-C stops it cleanly."""
    from kfk.config import BrokerConfig
    from kfk.errors import KafkaError

    if log_level.lower() not in LEVELS:
        fail(f"unknown --log-level {log_level!r}: use one of {', '.join(LEVELS)}")
    try:
        config = BrokerConfig(load_broker_properties(properties, override))
    except KafkaError as error:
        fail(str(error))
    try:
        configure_logging(log_level, log_format, config.log_file, config.log_file_max_bytes, config.log_file_backups)
    except OSError as error:
        fail(f"cannot open log.file {config.log_file}: {error.strerror or error}")
    for name in config.unknown:
        logging.getLogger("kfk.config").warning("ignoring unknown property %s", name)
    notes = []
    if properties is None:
        notes.append(
            f"no server.properties given: "
            f"{_describe_roles(config)}, data in "
            f"{os.path.abspath(config.log_dir_list[0])}, "
            f"{_describe_initial_rebalance_delay(config.group_initial_rebalance_delay_ms)}")

    from kfk.server.broker import run_broker

    try:
        code = run_broker(config, notes)
    except KafkaError as error:
        fail(str(error))
    raise typer.Exit(code)


def _describe_initial_rebalance_delay(delay_ms: int) -> str:
    """The start note's words for group.initial.rebalance.delay.ms: the embedded default (0) or what --override
    set, described as what it does to a new group."""
    setting = f"group.initial.rebalance.delay.ms={delay_ms}"
    if delay_ms == 0:
        return (f"{setting} (as Kafka's sample server.properties: a new consumer group's first rebalance does not "
                f"wait for more members)")
    return (f"{setting} (a new consumer group's first rebalance waits {delay_ms:,} ms for more members, and "
            f"longer while more join)")


def _describe_roles(config) -> str:
    """What the node runs as, for the start note."""
    if config.zookeeper_connect:
        return "a broker on ZooKeeper"
    if config.single_node_quorum:
        return "single-node broker+controller"
    roles = set(config.process_roles)
    return {"broker": "a KRaft broker", "controller": "a KRaft controller"}.get(
        " ".join(sorted(roles)), "a KRaft broker+controller")


def _command_line(pid: int) -> list[str] | None:
    """A live process's arguments (from /proc), None when there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def _is_kfk_broker(command_line: list[str]) -> bool:
    """`kfk server start ...` or `python -m kfk server start ...`."""
    for index, argument in enumerate(command_line):
        if Path(argument).name == "kfk":
            return command_line[index + 1:index + 3] == ["server", "start"]
    return False


@app.command()
def stop(
    log_dir: Annotated[
        str, typer.Option("--log-dir", help="The log dir of the broker to stop (its kfk.pid is there).")
    ] = "./kfk-data",
) -> None:
    """Stop the broker that runs on a log dir (SIGTERM: it flushes and checkpoints before exiting).

    Only the process that holds the log dir's lock, and is a kfk broker, is signalled: a pid file left by a killed
    broker may name a process that has nothing to do with kfk now."""
    from kfk.storage.log_dir_lock import lock_holder
    from kfk.storage.log_files import BROKER_PID_FILE

    pid_file = Path(log_dir, BROKER_PID_FILE)
    holder = lock_holder(log_dir)
    if holder is None:
        if not pid_file.exists():
            fail(f"no running broker found: {pid_file} is missing (is --log-dir right?)")
        fail(f"no broker is running on {log_dir}: its lock is free, so {pid_file} is stale (pid "
             f"{pid_file.read_text().strip()}; that process, if any, was left alone)")
    command_line = _command_line(holder) if holder > 0 else None
    if command_line is None or not _is_kfk_broker(command_line):
        what = " ".join(command_line)[:80] if command_line else "its pid is unknown"
        fail(f"the process holding {log_dir} is not a kfk broker ({what}): left alone")
    os.kill(holder, signal.SIGTERM)
    typer.echo(f"sent SIGTERM to broker pid {holder}")
