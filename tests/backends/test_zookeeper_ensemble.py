"""The ZooKeeper backend on a three-server ensemble (QuorumPeerMain, server.N lines and myid files): a server
going down, even the ensemble's leader, leaves the session and the controller in place."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kfk.backends.zookeeper import ZooKeeperMetadataBackend
from kfk.metadata.cache import MetadataCache
from kfk.metadata.image import MetadataImage
from kfk.protocol.metadata_records import schema_class
from kfk.testing.zookeeper import ZooKeeperNotInstalledError, four_letter_word, start_ensemble
from tests.backends.conftest import run

pytestmark = pytest.mark.zookeeper

TopicRecord = schema_class("TopicRecord")
PartitionRecord = schema_class("PartitionRecord")


def topic(name: str) -> list:
    topic_id = uuid.uuid4()
    return [TopicRecord(name=name, topic_id=topic_id),
            PartitionRecord(partition_id=0, topic_id=topic_id, replicas=[1], isr=[1], leader=1, leader_epoch=0,
                            partition_epoch=0)]


def test_the_backend_survives_the_loss_of_the_ensembles_leader(tmp_path, zookeeper_server) -> None:
    try:
        servers = start_ensemble(tmp_path, 3)
    except ZooKeeperNotInstalledError as error:  # zookeeper_server already skipped or failed the test
        pytest.skip(str(error))
    try:
        connect = ",".join(server.connect_string for server in servers) + "/kfk"

        async def scenario() -> None:
            backend = ZooKeeperMetadataBackend(connect, 1, session_timeout_ms=6000)
            cache = MetadataCache(MetadataImage())
            backend.add_listener(cache)
            await backend.start()
            epoch = await backend.elect_controller(1)
            await backend.append(topic("before"), epoch)
            leader = next(server for server in servers
                          if "Mode: leader" in (four_letter_word(server.host, server.client_port, "srvr") or ""))
            leader.kill()
            for _ in range(200):  # the ensemble elects a new leader; the client moves to a live server
                try:
                    await backend.append(topic("after"), epoch)
                    break
                except Exception:  # noqa: BLE001 - connection loss while the client moves over
                    await asyncio.sleep(0.05)
            assert cache.image.topic("after") is not None and cache.image.topic("before") is not None
            assert backend.is_controller and backend.active_controller() == (1, epoch)
            await backend.stop()

        run(scenario())
    finally:
        for server in servers:
            server.kill()
