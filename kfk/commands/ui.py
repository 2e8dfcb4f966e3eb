"""`kfk ui`: the web console (cluster overview with Kafka Manager's statistics, topics, messages, consumer groups,
preferred-replica election, reassignment) served on localhost, talking to the cluster as a client does.

The listening socket is bound here, before uvicorn starts, so that a port already in use is one line on stderr.
The cluster is contacted once first, so that a wrong --bootstrap-server says so at once; but the console starts
anyway, because an operator opens it exactly when the cluster is down, and its pages show that (and recover when the
cluster does).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from typing import Annotated

import typer

from kfk.commands.client_options import BootstrapServer, CommandConfig, client_config, client_errors
from kfk.commands.errors import fail
from kfk.errors import KafkaError

app = typer.Typer()


@app.command("ui")
def ui(
    bootstrap_server: BootstrapServer = "localhost:9092",
    command_config: CommandConfig = None,
    host: Annotated[str, typer.Option("--host", help="Address to serve the console on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to serve the console on (0: any free port).")] = 9021,
    read_only: Annotated[bool, typer.Option("--read-only", help="Show everything, change nothing.")] = False,
    refresh_ms: Annotated[int, typer.Option("--refresh-ms", min=250,
                                            help="How often live figures (lag, throughput) refresh.")] = 2000,
) -> None:
    """Serve a web console for the cluster (open the printed address in a browser)."""
    import uvicorn

    from kfk.commands.log_setup import configure_logging
    from kfk.ui.app import ConsoleSettings, create_app
    from kfk.ui.cluster_view import ClusterView

    config = client_config(bootstrap_server, command_config)
    listener = _bind(host, port)
    configure_logging("warning")
    logging.getLogger("kfk.ui.actions").setLevel(logging.INFO)  # every state-changing request, and who sent it
    with client_errors():  # settings the client refuses (a missing truststore, say) are still fatal
        view = ClusterView(config)
    try:
        try:
            view.admin.describe_cluster()
        except KafkaError as error:
            typer.echo(f"the cluster at {bootstrap_server} does not answer ({error}); the console shows it as down "
                       "until it does", err=True)
        settings = ConsoleSettings(read_only, refresh_ms, allowed_hosts=_allowed_hosts(host))
        server = uvicorn.Server(uvicorn.Config(create_app(view, settings),
                                               log_level="warning", access_log=False))
        bound_host, bound_port = listener.getsockname()[:2]
        typer.echo(f"kfk console on http://{bound_host}:{bound_port}/ for the cluster at {bootstrap_server}"
                   f"{' (read-only)' if read_only else ''}; Ctrl-C stops it", err=True)
        server.run(sockets=[listener])
    finally:
        view.close()
        listener.close()


def _allowed_hosts(host: str) -> tuple[str, ...] | None:
    """On a loopback address the console answers only to the names of loopback (see ConsoleSettings); elsewhere the
    names it is reached by (a DNS alias, a proxy) are not known here, so any."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        return None
    return (f"[{host}]" if ":" in host else host, "localhost", "127.0.0.1", "[::1]")  # as Host headers spell them


def _bind(host: str, port: int) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        fail(f"cannot resolve host {host}")
    family, kind, proto, _, address = infos[0]
    listener = socket.socket(family, kind, proto)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind(address)
    except OSError as error:
        listener.close()
        fail(f"cannot listen on {host}:{port}: {error.strerror or error}")
    listener.listen(128)
    return listener
