"""`connect-standalone`: one worker, its connectors from properties files, offsets in a local file.

Worker keys are Kafka's (bootstrap.servers, key.converter, value.converter and their `.`-prefixed settings,
offset.storage.file.filename, offset.flush.interval.ms, listeners, rest.advertised.host.name/port, producer.* and
consumer.* overrides); keys kfk has no use for (plugin.path: plugins are found through Python entry points) are
accepted and ignored, so a worker.properties written for Kafka runs unchanged.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Mapping
from urllib.parse import urlsplit

from kfk.connect.config_def import ConfigException
from kfk.connect.herder import StandaloneHerder
from kfk.connect.offsets import OffsetStore

DEFAULT_LISTENER = "http://:8083"


def listener_address(worker_config: Mapping[str, str]) -> tuple[str, int]:
    """The (host, port) of the first of `listeners` (Kafka's default http://:8083; an empty host is every
    interface)."""
    listeners = worker_config.get("listeners", DEFAULT_LISTENER).split(",")[0].strip()
    parts = urlsplit(listeners)
    if parts.scheme.lower() != "http":
        raise ConfigException(f"Invalid value {listeners} for configuration listeners: kfk serves http listeners only")
    try:
        port = parts.port if parts.port is not None else 8083
    except ValueError:
        raise ConfigException(f"Invalid value {listeners} for configuration listeners: not a valid port") from None
    return parts.hostname or "0.0.0.0", port


def worker_id(worker_config: Mapping[str, str], host: str, port: int) -> str:
    """What status calls `worker_id`: the advertised host and port, as Kafka's workers name themselves."""
    advertised_host = worker_config.get("rest.advertised.host.name") or (
        host if host not in ("0.0.0.0", "::") else socket.getfqdn())
    return f"{advertised_host}:{worker_config.get('rest.advertised.port') or port}"


def advertised_url(worker_config: Mapping[str, str], host: str, port: int) -> str:
    """The URL other workers reach this one at (the group's metadata, where writes are forwarded)."""
    return f"http://{worker_id(worker_config, host, port)}/"


def build_herder(worker_config: Mapping[str, str], bound_port: int) -> StandaloneHerder:
    if not worker_config.get("bootstrap.servers"):
        raise ConfigException('Missing required configuration "bootstrap.servers" which has no default value.')
    filename = worker_config.get("offset.storage.file.filename")
    if not filename:
        raise ConfigException('Missing required configuration "offset.storage.file.filename" which has no default '
                              "value.")
    host, _ = listener_address(worker_config)
    return StandaloneHerder(worker_config, worker_id(worker_config, host, bound_port), OffsetStore(Path(filename)))
