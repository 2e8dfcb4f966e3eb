"""Formatting log dirs (Kafka's `kafka-storage.sh format`) and checking they belong to this node and cluster.

Every log dir holds a meta.properties with the cluster id and node id. A broker refuses to start on a dir of another
cluster or node, so it can never serve someone else's data. The embedded default (`kfk server start` with no
arguments) formats missing dirs itself on first start, with a fresh cluster id.
"""

from __future__ import annotations

import os
import uuid
from typing import Mapping

from kfk.errors import KafkaStorageError
from kfk.storage.meta_properties import MetaProperties
from kfk.common.uuids import random_base64_uuid, uuid_to_base64


def random_cluster_id() -> str:
    """A new cluster id: a random Uuid in Kafka's text form (22 characters, never a leading '-')."""
    return random_base64_uuid()


def format_log_dirs(log_dirs: list[str], cluster_id: str, node_id: int, ignore_formatted: bool = False,
                    directory_ids: Mapping[str, str] | None = None) -> list[str]:
    """Write meta.properties (version 1) into each log dir; returns the dirs formatted now. A dir already formatted
    is an error (before anything is written) unless `ignore_formatted`, and then it must match. `directory_ids`
    fixes the directory.id of some dirs (a controller's metadata dir named in --initial-controllers); the others
    get a random one."""
    existing = {log_dir: MetaProperties.read(log_dir) if os.path.isdir(log_dir) else None for log_dir in log_dirs}
    for log_dir, meta in existing.items():
        if meta is not None:
            if not ignore_formatted:
                raise KafkaStorageError(f"Log directory {log_dir} is already formatted. Use --ignore-formatted to "
                                        "ignore this directory and format the others.")
            _check(log_dir, meta, cluster_id, node_id)
    formatted = []
    for log_dir, meta in existing.items():
        if meta is None:
            os.makedirs(log_dir, exist_ok=True)
            directory_id = (directory_ids or {}).get(log_dir) or uuid_to_base64(uuid.uuid4())
            MetaProperties(1, cluster_id, node_id, directory_id).write(log_dir)
            formatted.append(log_dir)
    return formatted


def load_cluster_id(log_dirs: list[str], node_id: int) -> str | None:
    """The cluster id the log dirs agree on, or None if none is formatted yet. Raises KafkaStorageError when dirs
    disagree or belong to another node."""
    cluster_id: str | None = None
    for log_dir in log_dirs:
        meta = MetaProperties.read(log_dir) if os.path.isdir(log_dir) else None
        if meta is None:
            continue
        _check(log_dir, meta, cluster_id or meta.cluster_id, node_id)
        cluster_id = meta.cluster_id
    return cluster_id


def _check(log_dir: str, meta: MetaProperties, cluster_id: str | None, node_id: int) -> None:
    path = os.path.join(log_dir, "meta.properties")
    if cluster_id is not None and meta.cluster_id not in (None, cluster_id):
        raise KafkaStorageError(f"Invalid cluster.id in: {path}. Expected {cluster_id}, but read {meta.cluster_id}")
    if meta.node_id is not None and meta.node_id != node_id:
        raise KafkaStorageError(
            f"Stored node id {meta.node_id} doesn't match previous node id {node_id} in {path}. If you moved your "
            "data, make sure your configured node id matches."
        )
