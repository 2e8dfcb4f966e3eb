"""`kfk schema-registry start`: a schema registry speaking Confluent Schema Registry's REST API (so confluent-kafka's
SchemaRegistryClient and serializers, and Kafka Connect's converters, use it unchanged), its state in the
compacted ``_schemas`` topic of the cluster given by --bootstrap-server (any Kafka: kfk's or Apache Kafka's).

The listener is bound before anything else, so that a port in use is one line on stderr; the registry then reads
_schemas to its end and only then says where it serves (the line tests and scripts wait for).
"""

from __future__ import annotations

import logging
from typing import Annotated
from urllib.parse import urlsplit

import typer

from kfk.commands.client_options import BootstrapServer, CommandConfig, client_config, client_errors
from kfk.commands.errors import fail
from kfk.commands.ui import _bind

app = typer.Typer(name="schema-registry", help="A schema registry (Confluent's REST API) storing schemas in Kafka.",
                  no_args_is_help=True)


@app.command("start")
def start(
    bootstrap_server: BootstrapServer = "localhost:9092",
    command_config: CommandConfig = None,
    listeners: Annotated[str, typer.Option(
        "--listeners", help="The address to serve the REST API on, as Confluent's listeners setting "
                            "(http://HOST:PORT; port 0: any free port).")] = "http://127.0.0.1:8081",
    kafkastore_topic: Annotated[str, typer.Option(
        "--kafkastore-topic", help="The compacted topic holding the registry's state (kafkastore.topic).")]
    = "_schemas",
    group_id: Annotated[str, typer.Option(
        "--group-id", help="The group the registry instances of one cluster elect their primary in "
                           "(schema.registry.group.id).")] = "schema-registry",
) -> None:
    """Serve a schema registry whose state lives in the cluster (Ctrl-C stops it)."""
    import uvicorn

    from kfk.commands.log_setup import configure_logging
    from kfk.commands.sigterm import unwind_on_sigterm
    from kfk.registry.election import PrimaryElection
    from kfk.registry.kafka_store import KafkaStore
    from kfk.registry.rest import create_app
    from kfk.registry.service import SchemaRegistry

    url = urlsplit(listeners.split(",")[0].strip())
    if url.scheme != "http" or not url.hostname or url.port is None:
        fail(f"--listeners takes http://HOST:PORT, not {listeners!r}")
    config = client_config(bootstrap_server, command_config)
    listener = _bind(url.hostname, url.port)
    configure_logging("warning")
    bound_host, bound_port = listener.getsockname()[:2]
    advertised = f"http://{bound_host}:{bound_port}"
    store = KafkaStore(config, kafkastore_topic)
    election = None
    try:
        with client_errors():
            store.start()
            election = PrimaryElection(config, group_id, advertised, store)
            election.start()
        registry = SchemaRegistry(store)
        server = uvicorn.Server(uvicorn.Config(create_app(registry, election.forward), log_level="warning",
                                               access_log=False))
        typer.echo(f"kfk schema registry on {advertised}/ with its state in {kafkastore_topic} of the cluster at "
                   f"{bootstrap_server}; Ctrl-C stops it", err=True)
        unwind_on_sigterm()
        server.run(sockets=[listener])
    finally:
        if election is not None:
            election.close()
        store.close()
        listener.close()
        logging.shutdown()
