"""`kfk connect-mirror-maker mm2.properties`: MirrorMaker 2 in dedicated mode (connect-mirror-maker.sh), with
Kafka's mm2.properties (clusters, `<alias>.bootstrap.servers`, `A->B.enabled`, `A->B.topics`, ...)."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from typing import Annotated

import typer

from kfk.commands.connect import _read_properties
from kfk.commands.errors import fail

app = typer.Typer()


@app.command("connect-mirror-maker")
def connect_mirror_maker(
    config: Annotated[Path, typer.Argument(help="The MirrorMaker 2 properties (Kafka's mm2.properties keys).")],
    clusters: Annotated[list[str] | None, typer.Option(
        "--clusters", help="Target cluster(s) this node runs the flows into (repeat, or comma separated); "
                           "default: every cluster.")] = None,
) -> None:
    """Run MirrorMaker 2 (as connect-mirror-maker.sh): replicate topics, consumer group offsets (checkpoints) and
    heartbeats between the clusters of the properties file, as Kafka's MirrorSourceConnector,
    MirrorCheckpointConnector and MirrorHeartbeatConnector on one Connect herder per source->target flow."""
    from kfk.commands.log_setup import configure_logging
    from kfk.connect.errors import ConnectException
    from kfk.connect.mirror.mirror_maker import MirrorMaker
    from kfk.errors import KafkaError

    props = _read_properties(config)
    targets = [alias.strip() for value in clusters or [] for alias in value.replace(",", " ").split()]
    configure_logging("warning")
    logging.getLogger("kfk.connect").setLevel(logging.INFO)
    try:
        mirror_maker = MirrorMaker(props, targets)
        unknown = sorted(set(targets) - set(mirror_maker.config.clusters))
        if unknown:
            fail(f"--clusters names {', '.join(unknown)}, which {config} does not define (clusters = "
                 f"{', '.join(mirror_maker.config.clusters)})")
        mirror_maker.start()
    except (ConnectException, KafkaError) as error:
        fail(str(error))
    stopped = threading.Event()
    for signal_number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signal_number, lambda *_: stopped.set())
    typer.echo(f"kfk connect-mirror-maker: flows {', '.join(map(str, mirror_maker.pairs))}; Ctrl-C stops it",
               err=True)
    try:
        stopped.wait()
    finally:
        mirror_maker.stop()
