"""What the client tools share: Kafka's common flags, key=value parsing, output helpers and error handling.

Every tool that talks to a cluster takes ``--bootstrap-server`` (default localhost:9092, or $KFK_BOOTSTRAP_SERVER),
``--command-config`` (a properties file of client settings, Kafka's flag, beside the tool's own Kafka name for it:
--producer.config, --consumer.config, --admin.config), ``--json`` where it prints data, and
``--debug``. Errors go through ``client_errors()``: one line on stderr and exit code 1, with the traceback only
under --debug (or KFK_DEBUG=1). Imports of the client happen inside the commands, never here at module level,
so that `kfk --help` stays fast.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from enum import Enum
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from kfk.commands.errors import exit_on_broken_pipe, fail

DEFAULT_BOOTSTRAP_SERVER = "localhost:9092"

BootstrapServer = Annotated[str, typer.Option(
    "--bootstrap-server", envvar="KFK_BOOTSTRAP_SERVER", show_envvar=True,
    help="host:port of a broker to connect to (several separated by commas).")]
#: The pair of the tools that ask either brokers or controllers (kafka-features.sh, kafka-metadata-quorum.sh).
BrokersOrControllersBootstrapServer = Annotated[Optional[str], typer.Option(
    "--bootstrap-server", envvar="KFK_BOOTSTRAP_SERVER", show_envvar=True,
    help=f"host:port of brokers to ask (default {DEFAULT_BOOTSTRAP_SERVER}).")]
BootstrapController = Annotated[Optional[str], typer.Option(
    "--bootstrap-controller", help="host:port of controllers to ask instead of brokers.")]


def command_config_option(*kafka_names: str, help: str = "A properties file of client settings (security, "
                                                         "timeouts...).") -> Any:
    """The option of a tool's client properties file: --command-config (the name most of Kafka's tools give it,
    and the one every kfk tool takes) and the tool's own Kafka names for it (kafka-leader-election.sh's
    --admin.config, the console and perf tools' --producer.config / --consumer.config)."""
    return Annotated[Optional[str], typer.Option(*kafka_names, "--command-config", help=help)]


CommandConfig = command_config_option()
ProducerConfig = command_config_option("--producer.config", "--producer-config",
                                       help="A producer properties file (security, batching...).")
ConsumerConfig = command_config_option("--consumer.config", "--consumer-config",
                                       help="A consumer properties file (security, fetch sizes...).")
JsonOutput = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")]
Topic = Annotated[str, typer.Option("--topic", help="The topic name.")]
Debug = Annotated[bool, typer.Option("--debug", envvar="KFK_DEBUG", help="Show the full traceback on errors.")]


class ConnectionOptionsFirst(TyperGroup):
    """A group of subcommands whose connection options may also come before the subcommand, where Kafka's argparse
    tools (kafka-metadata-quorum.sh, kafka-transactions.sh) take them: `--bootstrap-server X describe --status` is
    read as `describe --status --bootstrap-server X`, kfk's order, which stays valid."""

    LEADING_OPTIONS = frozenset({"--bootstrap-server", "--bootstrap-controller", "--command-config"})

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        leading, rest = [], list(args)
        while rest and rest[0].split("=", 1)[0] in self.LEADING_OPTIONS:
            taken = 1 if "=" in rest[0] else 2
            leading += rest[:taken]
            rest = rest[taken:]
        if leading and not rest:
            fail(f"{leading[0]} goes with a command: {ctx.command_path} {{{','.join(self.commands)}}} ...")
        if leading:
            args = [*rest, *leading]
        return super().parse_args(ctx, args)


class IsolationLevel(str, Enum):
    """Which records a reading tool sees: read_committed (kfk's consumer default) skips aborted transactions and
    stops at the last stable offset; read_uncommitted also returns open and aborted transactions' records."""

    read_uncommitted = "read_uncommitted"
    read_committed = "read_committed"


Timeout = Annotated[int, typer.Option("--timeout-ms", help="How long an operation may take, in ms.")]


def parse_key_values(items: Iterable[str] | None, flag: str, split_commas: bool = False,
                     keep_spaces: bool = False) -> dict[str, str]:
    """``key=value`` arguments of a repeatable flag (optionally also comma-separated, as kafka-configs.sh takes
    them: ``a=1,b=[x,y]`` keeps the list in brackets together). ``keep_spaces`` keeps the value exactly as given,
    as Kafka's console tools do with --property (a space is a valid key.separator)."""
    result: dict[str, str] = {}
    for item in items or []:
        for part in (_split_top_level(item) if split_commas else [item]):
            key, sep, value = part.partition("=")
            if not sep or not key.strip():
                fail(f"{flag} expects key=value, got {part!r}")
            if not keep_spaces:
                value = value.strip()
            if value.startswith("[") and value.endswith("]"):
                value = value[1:-1]
            result[key.strip()] = value
    return result


def _split_top_level(text: str) -> list[str]:
    parts, depth, current = [], 0, []
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if current:
        parts.append("".join(current))
    return [part for part in parts if part.strip()]


def include_list(raw: str, flag: str) -> re.Pattern[str]:
    """A topic include list as Kafka's tools take it (--topic of kafka-topics.sh, --include of the console
    consumer): a Java-style regular expression that must match the whole name, where commas also separate
    alternatives and spaces and surrounding quotes are dropped (so ``"a,b"`` means a or b)."""
    pattern = raw.strip().replace(",", "|").replace(" ", "").strip("\"'")
    try:
        return re.compile(pattern)
    except re.error as error:
        fail(f"{flag} {raw!r} is not a valid regular expression: {error}")


def command_config_properties(command_config: str | None) -> dict[str, str]:
    """The --command-config file's client properties (security.protocol, ssl.*...), {} without the flag."""
    if not command_config:
        return {}
    from kfk.storage.meta_properties import read_properties

    try:
        return dict(read_properties(command_config))
    except OSError as error:
        fail(f"cannot read {command_config}: {error.strerror or error}")


def client_config(bootstrap_server: str, command_config: str | None,
                  extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The client properties: the --command-config file, then the tool's own settings, then bootstrap.servers."""
    config: dict[str, Any] = command_config_properties(command_config)
    config.update(extra or {})
    config["bootstrap.servers"] = bootstrap_server
    return config


def check_reachable(config: dict[str, Any]) -> None:
    """Fail now, in one line, when no bootstrap server answers: a producer would otherwise wait max.block.ms (a
    minute by default) before saying so, which is right for an application and wrong for a command."""
    from kfk.client import Admin
    from kfk.client.config import ADMIN_CONFIG_DEF

    with Admin({key: value for key, value in config.items() if key in ADMIN_CONFIG_DEF.keys}) as admin:
        admin.describe_cluster()


def check_topic_writable(config: dict[str, Any], topic: str) -> None:
    """Fail now, in one line, when the topic does not exist and the broker will not create it on use
    (auto.create.topics.enable=false): a producer would otherwise retry UNKNOWN_TOPIC_OR_PARTITION for max.block.ms
    and only then say that the topic is "not present in metadata". Also checks that a bootstrap server answers."""
    from kfk.client import Admin, ConfigResource, ConfigResourceType
    from kfk.client.config import ADMIN_CONFIG_DEF
    from kfk.errors import UnknownTopicOrPartitionError

    with Admin({key: value for key, value in config.items() if key in ADMIN_CONFIG_DEF.keys}) as admin:
        broker = admin.describe_cluster().brokers[0].node_id
        try:
            admin.describe_topics([topic])
            return
        except UnknownTopicOrPartitionError:
            pass
        resource = ConfigResource(ConfigResourceType.BROKER, str(broker))
        auto_create = admin.describe_configs([resource])[resource].get("auto.create.topics.enable")
    if auto_create is not None and auto_create.value == "false":
        fail(f"topic {topic!r} does not exist (UNKNOWN_TOPIC_OR_PARTITION) and the broker does not create topics on "
             f"use (auto.create.topics.enable=false): kfk topics create --topic {topic}")


@contextmanager
def client_errors(debug: bool = False) -> Iterator[None]:
    """Turn client failures into one line and exit code 1 (tracebacks only with --debug)."""
    try:
        yield
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    except BrokenPipeError:
        exit_on_broken_pipe()
    except Exception as error:  # noqa: BLE001 - this is the tools' last line of defence
        if debug or os.environ.get("KFK_DEBUG") == "1":
            raise
        from kfk.errors import KafkaError

        if isinstance(error, KafkaError):
            fail(str(error))
        if isinstance(error, OSError):
            fail(f"{error.strerror or error}" + (f": {error.filename}" if error.filename else ""))
        if isinstance(error, (ValueError, TypeError)):
            fail(str(error))
        fail(f"{type(error).__name__}: {error}")


def print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def console():
    """A rich console on stdout: colours and box drawing only on a terminal."""
    from rich.console import Console

    terminal = sys.stdout.isatty()
    # Off a terminal nothing is truncated or wrapped to 80 columns: the output is for files and other programs.
    return Console(highlight=False, soft_wrap=True, no_color=not terminal, width=None if terminal else 10_000)


def table(*columns: str, title: str | None = None):
    """A rich table with Kafka's upper-case column names, compact enough to paste into an issue. On a terminal
    too narrow for it, it prints Kafka's plain lines instead (columns padded with spaces, one line per row, long
    lines left to the terminal to wrap): rich would shrink the columns and cut the header cells."""
    from rich import box
    from rich.measure import Measurement
    from rich.table import Table
    from rich.text import Text

    class _Table(Table):
        def __rich_console__(self, console, options):
            if Measurement.get(console, options.update_width(10_000), self).maximum <= options.max_width:
                yield from super().__rich_console__(console, options)
                return
            texts = [[column.header, *column.cells] for column in self.columns]
            texts = [[cell.plain if isinstance(cell, Text) else console.render_str(str(cell)).plain
                      for cell in cells] for cells in texts]
            widths = [max(len(cell) for cell in cells) for cells in texts]
            if self.title:
                yield Text(str(self.title), no_wrap=True, overflow="ignore")
            for row in zip(*texts):
                line = " ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                yield Text(line, no_wrap=True, overflow="ignore")

    grid = _Table(*columns, title=title, box=box.SIMPLE_HEAD if sys.stdout.isatty() else box.ASCII2,
                  show_edge=False, pad_edge=False, header_style="bold" if sys.stdout.isatty() else "")
    return grid
