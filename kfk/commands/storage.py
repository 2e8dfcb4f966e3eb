"""`kfk storage format|random-uuid`: prepare log dirs before the first start (kafka-storage.sh)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from kfk.commands.errors import fail

app = typer.Typer(help="Format log directories.", no_args_is_help=True)


@app.command("random-uuid")
def random_uuid() -> None:
    """Print a new cluster id."""
    from kfk.storage.format import random_cluster_id

    typer.echo(random_cluster_id())


@app.command()
def format(
    config: Annotated[Optional[str], typer.Option("--config", "-c", help="The broker's server.properties.")] = None,
    cluster_id: Annotated[Optional[str], typer.Option("--cluster-id", "-t", help="The cluster id to write.")] = None,
    override: Annotated[Optional[list[str]], typer.Option("--override", help="Set a property: key=value.")] = None,
    ignore_formatted: Annotated[
        bool, typer.Option("--ignore-formatted", "-g", help="Skip dirs that are already formatted.")
    ] = False,
) -> None:
    """Write meta.properties (cluster id, node id) into every log dir of the broker (refused while a broker runs on
    one of them)."""
    from kfk.commands.server import load_broker_properties
    from kfk.config import BrokerConfig
    from kfk.errors import KafkaError
    from kfk.storage.format import format_log_dirs, random_cluster_id
    from kfk.storage.log_dir_lock import log_dirs_locked

    try:
        broker = BrokerConfig(load_broker_properties(config, override))
        with log_dirs_locked(broker.log_dir_list):  # never under a running broker's feet
            formatted = format_log_dirs(broker.log_dir_list, cluster_id or random_cluster_id(), broker.node_id,
                                        ignore_formatted)
    except KafkaError as error:
        fail(str(error))
    for log_dir in formatted:
        typer.echo(f"Formatting {log_dir}")
