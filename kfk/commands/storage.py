"""`kfk storage format|random-uuid`: prepare log dirs before the first start (kafka-storage.sh)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from kfk.commands.errors import fail

app = typer.Typer(help="Format log directories.", no_args_is_help=True)


@app.command("random-uuid")
def random_uuid() -> None:
    """Print a new random UUID (a cluster id or a directory id)."""
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
    release_version: Annotated[Optional[str], typer.Option(
        "--release-version", "-r", help="The metadata.version to start at, 3.3-IV3 to 4.4-IV2 (the default), "
                                        "with that release's feature levels.")] = None,
    feature: Annotated[Optional[list[str]], typer.Option(
        "--feature", "-f", help="A feature level FEATURE=LEVEL (repeatable), e.g. transaction.version=2.")
    ] = None,
    standalone: Annotated[bool, typer.Option(
        "--standalone", "-s", help="Start a dynamic quorum with this controller as its only voter.")] = False,
    initial_controllers: Annotated[Optional[str], typer.Option(
        "--initial-controllers", "-I",
        help="Start a dynamic quorum with these voters: id@host:port:directory-id,... (the same on every node).")
    ] = None,
    no_initial_controllers: Annotated[bool, typer.Option(
        "--no-initial-controllers", "-N", help="A node joining an existing dynamic quorum.")] = False,
    add_scram: Annotated[Optional[list[str]], typer.Option(
        "--add-scram", "-S",
        help="A SCRAM credential the controller writes into the metadata when the cluster first starts (repeatable): "
             "'SCRAM-SHA-256=[name=alice,password=alice-secret]' or "
             "'SCRAM-SHA-512=[name=alice,iterations=8192,salt=\"N3E=\",saltedpassword=\"YCE=\"]'.")] = None,
) -> None:
    """Write meta.properties (cluster id, node id, directory id) and bootstrap.checkpoint (the metadata.version and
    the --add-scram credentials) into every log dir of the node, and with --standalone or --initial-controllers the
    initial voter set of a dynamic quorum (refused while a broker runs on one of them)."""
    from kfk.commands.server import load_broker_properties
    from kfk.common.clock import system_time_ms
    from kfk.config import BrokerConfig
    from kfk.errors import KafkaError
    from kfk.server.storage_format import format_storage
    from kfk.storage.format import random_cluster_id
    from kfk.storage.log_dir_lock import log_dirs_locked

    try:
        broker = BrokerConfig(load_broker_properties(config, override))
        with log_dirs_locked(broker.log_dir_list):  # never under a running broker's feet
            lines = format_storage(broker, cluster_id or random_cluster_id(), system_time_ms(),
                                   standalone=standalone, initial_controllers=initial_controllers,
                                   no_initial_controllers=no_initial_controllers, release_version=release_version,
                                   features=feature or (), ignore_formatted=ignore_formatted,
                                   add_scram=add_scram or ())
    except KafkaError as error:
        fail(str(error))
    for line in lines:
        typer.echo(line)
