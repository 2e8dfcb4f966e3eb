"""`kfk connect standalone worker.properties [connector.properties ...]`: Kafka Connect's standalone worker
(connect-standalone.sh), with Kafka's worker and connector properties and its REST API."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from kfk.commands.errors import fail

app = typer.Typer(help="Kafka Connect workers: run connectors that move data between Kafka and other systems.")


def _read_properties(path: Path) -> dict[str, str]:
    import javaproperties
    try:
        with open(path, encoding="utf-8") as handle:
            return dict(javaproperties.load(handle))
    except OSError as error:
        fail(f"cannot read {path}: {error.strerror or error}")


@app.command("standalone")
def standalone(
    worker_properties: Annotated[Path, typer.Argument(help="The worker's properties (Kafka's keys).")],
    connector_properties: Annotated[list[Path] | None, typer.Argument(
        help="Connector properties files to start (name, connector.class, ...).")] = None,
) -> None:
    """Run a standalone Connect worker (as connect-standalone.sh): offsets in a local file, REST API on listeners."""
    import uvicorn

    from kfk.client import Admin
    from kfk.commands.log_setup import configure_logging
    from kfk.commands.ui import _bind
    from kfk.connect.errors import ConnectException
    from kfk.connect.rest import build_app
    from kfk.connect.standalone import build_herder, listener_address
    from kfk.errors import KafkaError

    worker_config = _read_properties(worker_properties)
    connectors = [_read_properties(path) for path in connector_properties or []]
    configure_logging("warning")
    logging.getLogger("kfk.connect").setLevel(logging.INFO)
    try:
        host, port = listener_address(worker_config)
    except ConnectException as error:
        fail(str(error))
    listener = _bind(host, port)
    bound_port = listener.getsockname()[1]
    try:
        herder = build_herder(worker_config, bound_port)
    except ConnectException as error:
        listener.close()
        fail(str(error))
    cluster_id = None
    try:
        with Admin({"bootstrap.servers": worker_config["bootstrap.servers"]}) as admin:
            cluster_id = admin.describe_cluster_id()
    except KafkaError as error:
        listener.close()
        fail(f"the cluster at {worker_config['bootstrap.servers']} does not answer ({error})")
    try:
        for config in connectors:
            name = config.get("name")
            if not name:
                fail("a connector's properties need a name")
            try:
                herder.put_connector_config(name, config, allow_replace=False)
            except ConnectException as error:
                fail(f"connector {name}: " + str(error).split("\nYou can also find")[0].replace("\n", " "))
        server = uvicorn.Server(uvicorn.Config(build_app(herder, cluster_id), log_level="warning", access_log=False))
        typer.echo(f"kfk connect standalone worker {herder.worker_id}, REST API on "
                   f"http://{host}:{bound_port}/; Ctrl-C stops it", err=True)
        server.run(sockets=[listener])
    finally:
        herder.stop()
        listener.close()
