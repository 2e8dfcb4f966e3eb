"""A broker's registration: its ephemeral /brokers/ids/<id>, whose czxid is the broker epoch. Blocking (kazoo)."""

from __future__ import annotations

import logging
import time

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from kfk.backends.zookeeper import znodes
from kfk.errors import KafkaError

log = logging.getLogger("kfk.backends.zookeeper")


def create_registration(client: KazooClient, node_id: int, data: bytes, session_timeout_ms: int) -> int:
    """Create the broker's znode with `data`; returns the broker epoch. A znode left by this broker's previous
    session (a crash moments ago) is waited out until that session expires (twice the session timeout at most)."""
    path = znodes.broker_path(node_id)
    deadline = time.monotonic() + 2 * session_timeout_ms / 1000 + 5
    logged = False
    while True:
        try:
            client.create(path, data, ephemeral=True)
        except NodeExistsError:
            try:
                _, stat = client.get(path)
            except NoNodeError:
                continue
            if stat.ephemeralOwner == client.client_id[0]:
                return stat.czxid
            if time.monotonic() > deadline:
                raise KafkaError(f"Broker id {node_id} is registered in ZooKeeper by another session "
                                 f"(another broker with broker.id={node_id}?)")
            if not logged:
                log.info("broker id %d is still registered by an earlier session; waiting for it to expire", node_id)
                logged = True
            time.sleep(0.1)
            continue
        return client.exists(path).czxid
