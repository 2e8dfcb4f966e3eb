"""Requests that Kafka's ZooKeeper-based tools leave under /admin (topic deletions, a reassignment plan): the
controller serves them through its handler, then removes their znodes. The reassignment goes on through the
partitions' adding/removing replicas."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from kfk.backends.zookeeper import znodes

#: The controller's handler of the requests: (topics to delete, partition -> target replicas).
AdminRequestHandler = Callable[[list[str], dict[tuple[str, int], list[int]]], Awaitable[None]]


def delete_served_requests(client: KazooClient, deletions: list[str],
                           reassignment: dict[tuple[str, int], list[int]]) -> None:
    paths = [f"{znodes.DELETE_TOPICS_PATH}/{topic}" for topic in deletions]
    if reassignment:
        paths.append(znodes.REASSIGN_PARTITIONS_PATH)
    for path in paths:
        try:
            client.delete(path)
        except NoNodeError:
            pass
