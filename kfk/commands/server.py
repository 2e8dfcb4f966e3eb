"""`kfk server ...`: run and stop a broker (Kafka's kafka-server-start.sh / kafka-server-stop.sh)."""

from typing import Annotated, Optional

import typer

app = typer.Typer(help="Run a kfk broker.", no_args_is_help=True)


@app.command()
def start(
    properties: Annotated[
        Optional[str], typer.Argument(help="A server.properties file; without one, a single-node broker+controller.")
    ] = None,
    override: Annotated[
        Optional[list[str]], typer.Option("--override", help="Override a property: key=value (repeatable).")
    ] = None,
) -> None:
    """Start a broker in the foreground."""
    typer.echo("kfk: the broker is not built yet (see the broker issue); the wire codec and CLI are in place.", err=True)
    raise typer.Exit(code=1)
