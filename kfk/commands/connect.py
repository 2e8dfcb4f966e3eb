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


def _cluster_id(worker_config: dict[str, str], listener) -> str | None:
    from kfk.client import Admin
    from kfk.errors import KafkaError

    try:
        with Admin({"bootstrap.servers": worker_config["bootstrap.servers"]}) as admin:
            return admin.describe_cluster_id()
    except KafkaError as error:
        listener.close()
        fail(f"the cluster at {worker_config['bootstrap.servers']} does not answer ({error})")


def _serve(herder, listener, cluster_id: str | None, mode: str, host: str) -> None:
    import uvicorn

    from kfk.commands.sigterm import unwind_on_sigterm
    from kfk.connect.rest import build_app

    unwind_on_sigterm()  # the herder stops its tasks in the finally below
    try:
        server = uvicorn.Server(uvicorn.Config(build_app(herder, cluster_id), log_level="warning", access_log=False))
        typer.echo(f"kfk connect {mode} worker {herder.worker_id}, REST API on "
                   f"http://{host}:{listener.getsockname()[1]}/; Ctrl-C stops it", err=True)
        server.run(sockets=[listener])
    finally:
        herder.stop()
        listener.close()


def _listen(worker_config: dict[str, str]):
    from kfk.commands.log_setup import configure_logging
    from kfk.commands.ui import _bind
    from kfk.connect.errors import ConnectException
    from kfk.connect.standalone import listener_address

    configure_logging("warning")
    logging.getLogger("kfk.connect").setLevel(logging.INFO)
    try:
        host, port = listener_address(worker_config)
    except ConnectException as error:
        fail(str(error))
    return host, _bind(host, port)


@app.command("standalone")
def standalone(
    worker_properties: Annotated[Path, typer.Argument(help="The worker's properties (Kafka's keys).")],
    connector_properties: Annotated[list[Path] | None, typer.Argument(
        help="Connector properties files to start (name, connector.class, ...).")] = None,
) -> None:
    """Run a standalone Connect worker (as connect-standalone.sh): offsets in a local file, REST API on listeners."""
    from kfk.connect.errors import ConnectException
    from kfk.connect.standalone import build_herder

    worker_config = _read_properties(worker_properties)
    connectors = [_read_properties(path) for path in connector_properties or []]
    host, listener = _listen(worker_config)
    try:
        herder = build_herder(worker_config, listener.getsockname()[1])
    except ConnectException as error:
        listener.close()
        fail(str(error))
    cluster_id = _cluster_id(worker_config, listener)
    try:
        for config in connectors:
            name = config.get("name")
            if not name:
                fail("a connector's properties need a name")
            try:
                herder.put_connector_config(name, config, allow_replace=False)
            except ConnectException as error:
                fail(f"connector {name}: " + str(error).split("\nYou can also find")[0].replace("\n", " "))
    except BaseException:
        herder.stop()
        listener.close()
        raise
    _serve(herder, listener, cluster_id, "standalone", host)


@app.command("distributed")
def distributed(
    worker_properties: Annotated[Path, typer.Argument(help="The worker's properties (Kafka's keys: group.id, "
                                                           "config/offset/status.storage.topic, ...).")],
) -> None:
    """Run a distributed Connect worker (as connect-distributed.sh): workers sharing group.id split the connectors
    and tasks; configs, offsets and statuses live in Kafka topics; REST writes go to the group's leader."""
    from kfk.connect.distributed import DistributedHerder, check_worker_config
    from kfk.connect.errors import ConnectException
    from kfk.connect.standalone import advertised_url, worker_id
    from kfk.errors import KafkaError

    worker_config = _read_properties(worker_properties)
    try:
        check_worker_config(worker_config)
    except ConnectException as error:
        fail(str(error))
    host, listener = _listen(worker_config)
    port = listener.getsockname()[1]
    cluster_id = _cluster_id(worker_config, listener)
    try:
        herder = DistributedHerder(worker_config, worker_id(worker_config, host, port),
                                   advertised_url(worker_config, host, port))
    except (ConnectException, KafkaError) as error:
        listener.close()
        fail(str(error))
    _serve(herder, listener, cluster_id, "distributed", host)
