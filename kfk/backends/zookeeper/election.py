"""Kafka's ZooKeeper controller election: the ephemeral /controller znode, then /controller_epoch bumped with a
conditional set whose zkVersion fences every later write of the winner (see writes.py). Blocking (kazoo)."""

from __future__ import annotations

import logging

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from kfk.backends.zookeeper import znodes

log = logging.getLogger("kfk.backends.zookeeper")


def elect(client: KazooClient, node_id: int, now_ms: int) -> tuple[int, int] | None:
    """Try to become the controller: (controller epoch, its zkVersion) if `node_id` won, else None (another broker
    holds /controller, or bumped the epoch meanwhile)."""
    try:
        client.create(znodes.CONTROLLER_PATH, znodes.encode_controller(node_id, now_ms), ephemeral=True)
    except NodeExistsError:
        try:
            data, stat = client.get(znodes.CONTROLLER_PATH)
        except NoNodeError:
            return None  # gone meanwhile: the next watch event retries
        if stat.ephemeralOwner != client.client_id[0] or znodes.decode_controller(data) != node_id:
            return None
    while True:
        try:
            data, stat = client.get(znodes.CONTROLLER_EPOCH_PATH)
        except NoNodeError:
            try:
                client.create(znodes.CONTROLLER_EPOCH_PATH, znodes.encode_controller_epoch(1))
                return 1, 0
            except NodeExistsError:
                continue
        epoch = znodes.decode_controller_epoch(data) + 1
        try:
            stat = client.set(znodes.CONTROLLER_EPOCH_PATH, znodes.encode_controller_epoch(epoch),
                              version=stat.version)
            return epoch, stat.version
        except BadVersionError:
            # Another broker bumped the epoch after we created /controller: it cannot be ours.
            log.warning("controller epoch moved while broker %d was being elected; resigning", node_id)
            try:
                client.delete(znodes.CONTROLLER_PATH)
            except NoNodeError:
                pass
            return None
