"""The `kfk` command: registers the command groups, nothing else.

Each group lives in kfk/commands/<group>.py. Heavy imports (the broker, the codec, the client) happen inside the
commands, never at module level, so that `kfk --help` and shell completion stay fast.
"""

from typing import Annotated, Optional

import typer

from kfk import KAFKA_PROTOCOL, __version__
from kfk.commands import (
    cluster,
    configs,
    console,
    dump_log,
    groups,
    perf,
    reassign,
    server,
    spark,
    storage,
    topics,
    transactions,
    zookeeper,
)

app = typer.Typer(
    name="kfk",
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
app.add_typer(groups.app)
app.add_typer(configs.app)
app.add_typer(perf.app, name="perf-test")
app.add_typer(dump_log.app)
app.add_typer(spark.app)
app.add_typer(zookeeper.app, name="zookeeper")
app.add_typer(reassign.app)
app.add_typer(transactions.app, name="transactions")


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
