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
import ssl
from pathlib import Path
from typing import Annotated, Optional

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
    auth: Annotated[Optional[str], typer.Option(
        "--auth", metavar="[basic|sasl]", help="Make every visitor log in: 'basic' (a login form, or HTTP Basic for "
        "scripts; users from --users-file), or 'sasl' (each operator's own Kafka user and password, so the "
        "cluster's ACLs decide what they may do; --command-config sets security.protocol and sasl.mechanism).",
    )] = None,
    users_file: Annotated[Optional[Path], typer.Option(
        "--users-file", metavar="FILE", help="With --auth basic: one 'name: password' per line (the realm properties "
        "format of Kafka Connect's REST basic authentication).")] = None,
    cluster: Annotated[Optional[list[str]], typer.Option(
        "--cluster", metavar="CLUSTER", help="NAME=BOOTSTRAP: a cluster of a console over several (repeat the "
        "option): its name in the console's URLs and its bootstrap servers (host:port[,host:port...]); "
        "--command-config applies to each. Replaces --bootstrap-server.")] = None,
    certfile: Annotated[Optional[Path], typer.Option(
        "--certfile", metavar="FILE", help="Serve the console over HTTPS with this PEM certificate (chain).")] = None,
    keyfile: Annotated[Optional[Path], typer.Option(
        "--keyfile", metavar="FILE", help="The PEM private key of --certfile (if not in the same file).")] = None,
) -> None:
    """Serve a web console for the cluster (open the printed address in a browser)."""
    import uvicorn

    from kfk.commands.log_setup import configure_logging
    from kfk.commands.sigterm import unwind_on_sigterm
    from kfk.ui.app import ConsoleSettings, create_app
    from kfk.ui.cluster_view import ClusterView

    from kfk.ui.operator_sessions import OperatorClients

    kafka_login = auth == "sasl"
    users = None if kafka_login else _users(auth, users_file)
    ssl_context = _ssl_context(certfile, keyfile)
    bootstraps = _clusters(cluster or [], kafka_login)
    config = client_config(bootstrap_server, command_config)
    if kafka_login:
        _check_sasl_config(config, users_file)
    listener = _bind(host, port)
    configure_logging("warning")
    logging.getLogger("kfk.ui.actions").setLevel(logging.INFO)  # every state-changing request, and who sent it
    view, operators, views = None, None, {}
    with client_errors():  # settings the client refuses (a missing truststore, say) are still fatal
        if kafka_login:
            operators = OperatorClients(config)  # each operator's own client, made at their first request
        elif bootstraps:
            views = {name: ClusterView(client_config(servers, command_config)) for name, servers in bootstraps.items()}
        else:
            view = ClusterView(config)
    if bootstraps:
        bootstrap_server = ", ".join(f"{name}={servers}" for name, servers in bootstraps.items())
    try:
        for name, checked in (views or ({bootstrap_server: view} if view is not None else {})).items():
            try:
                checked.admin.describe_cluster()
            except KafkaError as error:
                typer.echo(f"the cluster {name} does not answer ({error}); the console shows it as down until it "
                           "does", err=True)
        settings = ConsoleSettings(read_only, refresh_ms, allowed_hosts=_allowed_hosts(host), users=users)
        tls = ({"ssl_certfile": str(certfile), "ssl_keyfile": str(keyfile) if keyfile else None}
               if ssl_context is not None else {})  # checked by _ssl_context; uvicorn loads them again
        server = uvicorn.Server(uvicorn.Config(create_app(view, settings, operators, views or None),
                                               log_level="warning", access_log=False, **tls))
        bound_host, bound_port = listener.getsockname()[:2]
        if (users is not None or kafka_login) and ssl_context is None and _allowed_hosts(host) is None:
            typer.echo(f"warning: --auth {auth} without --certfile sends passwords in clear text over the network",
                       err=True)
        scheme = "https" if ssl_context is not None else "http"
        login = " (login required)" if users else " (login with Kafka credentials)" if kafka_login else ""
        typer.echo(f"kfk console on {scheme}://{bound_host}:{bound_port}/ for the cluster at {bootstrap_server}"
                   f"{' (read-only)' if read_only else ''}{login}; Ctrl-C stops it", err=True)
        unwind_on_sigterm()
        server.run(sockets=[listener])
    finally:
        for opened in [view, *views.values()]:
            if opened is not None:
                opened.close()
        if operators is not None:
            operators.close()
        listener.close()


def _clusters(specs: list[str], kafka_login: bool) -> dict[str, str]:
    """--cluster NAME=BOOTSTRAP options, in the order given (the first is where / leads)."""
    clusters: dict[str, str] = {}
    for spec in specs:
        name, separator, servers = spec.partition("=")
        name, servers = name.strip(), servers.strip()
        if not separator or not name or not servers:
            fail(f"--cluster is NAME=BOOTSTRAP (as prod=kafka1:9092,kafka2:9092), not {spec!r}")
        if "/" in name:
            fail(f"a cluster's name goes in the console's URLs: no '/' in {name!r}")
        if name in clusters:
            fail(f"--cluster {name} is given twice")
        clusters[name] = servers
    if clusters and kafka_login:
        fail("--auth sasl works with one cluster (--bootstrap-server), not with --cluster")
    return clusters


def _check_sasl_config(config: dict, users_file: Path | None) -> None:
    """--auth sasl logs operators in with a user and password: the client settings must speak SASL with a
    mechanism that takes them (PLAIN or SCRAM)."""
    if users_file is not None:
        fail("--users-file is for --auth basic; --auth sasl takes each operator's Kafka user and password")
    protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
    mechanism = str(config.get("sasl.mechanism", "GSSAPI")).upper()
    if not protocol.startswith("SASL_"):
        fail("--auth sasl needs --command-config with security.protocol=SASL_PLAINTEXT or SASL_SSL")
    if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
        fail("--auth sasl needs sasl.mechanism=PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 in --command-config, "
             f"not {mechanism}")


def _users(auth: str | None, users_file: Path | None) -> dict[str, str] | None:
    """The console's users (--auth basic), or None for no login."""
    from kfk.ui.auth import read_users_file

    if auth is None:
        if users_file is not None:
            fail("--users-file needs --auth basic")
        return None
    if auth != "basic":
        fail(f"--auth takes 'basic' or 'sasl', not {auth!r}")
    if users_file is None:
        fail("--auth basic needs --users-file FILE (one 'name: password' per line)")
    try:
        return read_users_file(users_file)
    except OSError as error:
        fail(f"cannot read --users-file {users_file}: {error.strerror or error}")
    except ValueError as error:
        fail(str(error))


def _ssl_context(certfile: Path | None, keyfile: Path | None) -> ssl.SSLContext | None:
    """The console's own TLS (--certfile, --keyfile), or None for plain HTTP: loaded here so that a wrong file is
    one line, before anything starts."""
    if certfile is None:
        if keyfile is not None:
            fail("--keyfile needs --certfile")
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(str(certfile), str(keyfile) if keyfile is not None else None)
    except OSError as error:
        fail(f"cannot read --certfile/--keyfile: {error.strerror or error}")
    except ssl.SSLError as error:
        fail(f"--certfile/--keyfile is not a PEM certificate and its key: {error.reason or error}")
    return context


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
