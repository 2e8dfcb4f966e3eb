"""The `kfk` command: registers the command groups, nothing else.

Each group lives in kfk/commands/<group>.py. Heavy imports (the broker, the codec, the client) happen inside the
commands, never at module level, so that `kfk --help` and shell completion stay fast.

Help is click's plain help for every command (rich_markup_mode=None on the root app, which Typer passes down):
it wraps every line at the terminal's width and never cuts an option name, where Typer's rich panels cut long
option names and words at 80 columns; and help text is shown as written (no markup to escape), the same as in the
man pages. Flags show no metavar, other options and arguments name their value in capitals as Kafka's docs do
(--topic TOPIC), and every command's summary is whole in its group's list (_tidy_help).
"""

from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from kfk import KAFKA_PROTOCOL, __version__
from kfk.commands import (
    acls,
    cluster,
    configs,
    connect,
    console,
    console_share,
    delegation_tokens,
    dump_log,
    features,
    groups,
    metadata,
    metadata_quorum,
    mirror_maker,
    perf,
    reassign,
    schema_registry,
    server,
    share_groups,
    spark,
    storage,
    streams,
    topics,
    transactions,
    ui,
    zookeeper,
)


def _tidy_help(command: Any) -> None:
    """Flags without a metavar, every other value named as Kafka's documentation names it (_value_name); each
    command's summary whole in its group's list (click would cut it at 45 characters with "...")."""
    for param in command.params:
        if param.metavar is None:
            param.metavar = "" if getattr(param, "is_flag", False) else _value_name(param)
        if param.param_type_name == "argument":
            # Typer prints an argument's Python type after its name in the Arguments list ("PROPERTIES <str>"),
            # whatever its metavar; the name says what to give.
            param.display_type_rich = lambda ctx: None
    if not command.short_help and command.help:
        command.short_help = command.help.strip().split("\n\n")[0].replace("\n", " ")
    for sub in getattr(command, "commands", {}).values():
        _tidy_help(sub)


def _value_name(param: Any) -> str:
    """An option's value as Kafka's tools and docs write it: the option's name in capitals (--topic TOPIC,
    --bootstrap-server BOOTSTRAP-SERVER), or its choices ([parquet|json|csv|orc]). Typer would show the Python type
    of the parameter instead (<str>, <list[str]>, <int range>)."""
    descriptor = getattr(param, "type_descriptor", None)
    if descriptor is not None and descriptor.is_choice and descriptor.choices:
        return "[" + "|".join(str(getattr(choice, "value", choice)) for choice in descriptor.choices) + "]"
    long_names = [name for name in param.opts if name.startswith("--")]
    return (long_names[0] if long_names else param.name).lstrip("-").replace("_", "-").upper()


class KfkGroup(TyperGroup):
    """The root group: tidies the help of every command below it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _tidy_help(self)


app = typer.Typer(
    name="kfk",
    cls=KfkGroup,
    rich_markup_mode=None,
    help="Apache Kafka rebuilt in Python: broker, tools and client in one command.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)
app.add_typer(server.app, name="server")
app.add_typer(storage.app, name="storage")
app.add_typer(topics.app, name="topics")
app.add_typer(cluster.app, name="cluster")
app.add_typer(console.app)
app.add_typer(console_share.app)
app.add_typer(groups.app)
app.add_typer(share_groups.app)
app.add_typer(configs.app)
app.add_typer(acls.app)
app.add_typer(delegation_tokens.app)
app.add_typer(perf.app, name="perf-test")
app.add_typer(dump_log.app)
app.add_typer(spark.app)
app.add_typer(zookeeper.app, name="zookeeper")
app.add_typer(reassign.app)
app.add_typer(transactions.app, name="transactions")
app.add_typer(metadata_quorum.app, name="metadata-quorum")
app.add_typer(features.app, name="features")
app.add_typer(metadata.app, name="metadata")
app.add_typer(ui.app)
app.add_typer(schema_registry.app, name="schema-registry")
app.add_typer(connect.app, name="connect")
app.add_typer(mirror_maker.app)
app.add_typer(streams.app, name="streams")


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"kfk {__version__} (Kafka {KAFKA_PROTOCOL} protocol)")
        raise typer.Exit()


@app.callback()
def root(
    version: Annotated[
        Optional[bool],
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the kfk version and exit."),
    ] = None,
) -> None:
    """Apache Kafka rebuilt in Python: broker, tools and client in one command."""


def main() -> None:
    """Entry point of the `kfk` console script and of `python -m kfk`."""
    app()
