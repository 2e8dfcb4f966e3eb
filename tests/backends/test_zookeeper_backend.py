"""The ZooKeeper backend beyond the shared contract: Kafka's znodes and JSON, several brokers on one ensemble,
controller failover and fencing by /controller_epoch, ephemeral broker registrations, leaders' conditional ISR
writes, session expiry. Against a real ZooKeeper server (the `zookeeper_connect` fixture)."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from kfk.backends.zookeeper import ZooKeeperMetadataBackend
from kfk.backends.zookeeper import znodes
from kfk.common.config_types import ConfigResourceType
from kfk.common.uuids import uuid_to_base64
from kfk.errors import InconsistentClusterIdError, InvalidUpdateVersionError, NotControllerError
from kfk.metadata.cache import MetadataCache
from kfk.metadata.image import Endpoint, MetadataImage
from kfk.protocol.metadata_records import schema_class
from tests.backends.conftest import run

pytestmark = pytest.mark.zookeeper

TopicRecord = schema_class("TopicRecord")
PartitionRecord = schema_class("PartitionRecord")
PartitionChangeRecord = schema_class("PartitionChangeRecord")
ConfigRecord = schema_class("ConfigRecord")
RemoveTopicRecord = schema_class("RemoveTopicRecord")
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


def backend(connect: str, node_id: int) -> tuple[ZooKeeperMetadataBackend, MetadataCache]:
    zookeeper = ZooKeeperMetadataBackend(connect, node_id, CLUSTER_ID, session_timeout_ms=4000)
    cache = MetadataCache(MetadataImage(cluster_id=CLUSTER_ID))
    zookeeper.add_listener(cache)
    return zookeeper, cache


async def eventually(condition, timeout: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def topic_records(name: str, replicas: list[int], partitions: int = 1) -> tuple[uuid.UUID, list]:
    topic_id = uuid.uuid4()
    records = [ConfigRecord(resource_type=ConfigResourceType.TOPIC, resource_name=name, name="retention.ms",
                            value="1000"),
               TopicRecord(name=name, topic_id=topic_id)]
    records += [PartitionRecord(partition_id=p, topic_id=topic_id, replicas=replicas, isr=replicas,
                                leader=replicas[0], leader_epoch=0, partition_epoch=0) for p in range(partitions)]
    return topic_id, records


def test_topics_are_written_in_kafkas_znode_layout(zookeeper_connect: str) -> None:
    async def scenario() -> None:
        zookeeper, cache = backend(zookeeper_connect, 1)
        await zookeeper.start()
        epoch = await zookeeper.elect_controller(1)
        topic_id, records = topic_records("orders", [1, 2, 3], partitions=2)
        await zookeeper.append(records, epoch)
        assert json.loads(await zookeeper.read_znode("/brokers/topics/orders")) == {
            "partitions": {"0": [1, 2, 3], "1": [1, 2, 3]}, "topic_id": uuid_to_base64(topic_id),
            "adding_replicas": {}, "removing_replicas": {}, "version": 3}
        assert json.loads(await zookeeper.read_znode("/brokers/topics/orders/partitions/1/state")) == {
            "controller_epoch": epoch, "leader": 1, "version": 1, "leader_epoch": 0, "isr": [1, 2, 3]}
        assert json.loads(await zookeeper.read_znode("/config/topics/orders")) == {
            "version": 1, "config": {"retention.ms": "1000"}}
        changes = await zookeeper.znode_children("/config/changes")
        assert len(changes) == 1 and changes[0].startswith("config_change_")
        assert json.loads(await zookeeper.read_znode(f"/config/changes/{changes[0]}")) == {
            "version": 2, "entity_path": "topics/orders"}
        assert json.loads(await zookeeper.read_znode("/controller"))["brokerid"] == 1
        assert int(await zookeeper.read_znode("/controller_epoch")) == epoch
        assert json.loads(await zookeeper.read_znode("/cluster/id"))["id"] == CLUSTER_ID

        await zookeeper.append([PartitionChangeRecord(partition_id=0, topic_id=topic_id, leader=2, isr=[2, 3])],
                               epoch)
        state = json.loads(await zookeeper.read_znode("/brokers/topics/orders/partitions/0/state"))
        assert (state["leader"], state["leader_epoch"], state["isr"]) == (2, 1, [2, 3])
        partition = cache.image.partition("orders", 0)
        assert (partition.leader, partition.leader_epoch, partition.isr, partition.partition_epoch) == (2, 1, (2, 3),
                                                                                                        1)
        await zookeeper.append([RemoveTopicRecord(topic_id=topic_id)], epoch)
        assert await zookeeper.read_znode("/brokers/topics/orders") is None
        assert await zookeeper.read_znode("/config/topics/orders") is None
        assert cache.image.topic("orders") is None and not cache.image.config(ConfigResourceType.TOPIC, "orders")
        await zookeeper.stop()

    run(scenario())


def test_brokers_register_ephemerally_and_every_node_follows_the_controllers_writes(zookeeper_connect: str) -> None:
    async def scenario() -> None:
        first, first_cache = backend(zookeeper_connect, 1)
        second, second_cache = backend(zookeeper_connect, 2)
        await first.start()
        await second.start()
        endpoint = Endpoint("PLAINTEXT", "127.0.0.1", 9093)
        first_epoch = await first.register_broker([Endpoint("PLAINTEXT", "127.0.0.1", 9092)], None)
        await second.register_broker([endpoint], "rack-b")
        registration = json.loads(await first.read_znode("/brokers/ids/2"))
        assert registration["endpoints"] == ["PLAINTEXT://127.0.0.1:9093"] and registration["rack"] == "rack-b"
        await eventually(lambda: set(first_cache.image.brokers) == {1, 2})
        broker = first_cache.image.brokers[2]
        assert not broker.fenced and broker.endpoints == (endpoint,) and broker.rack == "rack-b"
        assert first_cache.image.brokers[1].broker_epoch == first_epoch

        epoch = await first.elect_controller(1)
        assert await second.elect_controller(2) is None
        await eventually(lambda: second.active_controller() == (1, epoch))
        _, records = topic_records("events", [1, 2])
        await first.append(records, epoch)
        await eventually(lambda: second_cache.image.topic("events") is not None)
        assert second_cache.image.partition("events", 0).isr == (1, 2)

        await second.stop()  # its session closes: its registration goes, the others see it fenced
        await eventually(lambda: first_cache.image.brokers[2].fenced)
        await first.stop()

    run(scenario())


def test_a_failed_read_after_a_watch_is_retried_without_another_event(zookeeper_connect: str) -> None:
    """A read of ZooKeeper that fails (here once, on purpose) is tried again by the refresher itself: the watch that
    asked for it has fired and no other event may come, so waiting for one would leave the broker blind to another
    broker's registration (and forwarding to a controller it cannot find)."""
    async def scenario() -> None:
        first, first_cache = backend(zookeeper_connect, 1)
        second, _ = backend(zookeeper_connect, 2)
        await first.start()
        await second.start()
        await first.register_broker([Endpoint("PLAINTEXT", "127.0.0.1", 9092)], None)
        await eventually(lambda: set(first_cache.image.brokers) == {1})
        read, failed = first._read, []

        def fails_once(dirty):
            if not failed:
                failed.append(dirty)
                raise RuntimeError("a read that fails once")
            return read(dirty)

        first._read = fails_once
        await second.register_broker([Endpoint("PLAINTEXT", "127.0.0.1", 9093)], None)
        await eventually(lambda: set(first_cache.image.brokers) == {1, 2})
        assert failed, "the read after the registration's watch did not fail: nothing was tested"
        await second.stop()
        await first.stop()

    run(scenario())


def test_a_new_controller_fences_the_old_one(zookeeper_connect: str) -> None:
    async def scenario() -> None:
        first, _ = backend(zookeeper_connect, 1)
        second, second_cache = backend(zookeeper_connect, 2)
        changes: list[tuple[int, int] | None] = []
        second.add_controller_listener(lambda: changes.append(second.active_controller()))
        await first.start()
        await second.start()
        old_epoch = await first.elect_controller(1)
        await eventually(lambda: (1, old_epoch) in changes)

        first.expire_session_for_testing()  # /controller vanishes with the session
        await eventually(lambda: changes[-1] is None or changes[-1][0] != 1)
        new_epoch = await second.elect_controller(2)
        assert new_epoch == old_epoch + 1
        await eventually(lambda: not first.is_controller)
        with pytest.raises(NotControllerError):
            await first.append(topic_records("stale", [1])[1], old_epoch)
        await second.append(topic_records("fresh", [2])[1], new_epoch)
        assert second_cache.image.topic("fresh") is not None and second_cache.image.topic("stale") is None
        await first.stop()
        await second.stop()

    run(scenario())


def test_an_isr_change_needs_the_current_partition_epoch(zookeeper_connect: str) -> None:
    async def scenario() -> None:
        controller, cache = backend(zookeeper_connect, 1)
        await controller.start()
        epoch = await controller.elect_controller(1)
        _, records = topic_records("isr", [1, 2, 3])
        await controller.append(records, epoch)
        assert await controller.alter_partition("isr", 0, 1, 0, [1, 2], 0) == 1
        assert cache.image.partition("isr", 0).isr == (1, 2)
        notifications = await controller.znode_children("/isr_change_notification")
        assert all(name.startswith("isr_change_") for name in notifications)
        with pytest.raises(InvalidUpdateVersionError):
            await controller.alter_partition("isr", 0, 1, 0, [1], 0)
        assert cache.image.partition("isr", 0).isr == (1, 2)
        await controller.stop()

    run(scenario())


def test_a_store_of_another_cluster_is_refused(zookeeper_connect: str) -> None:
    async def scenario() -> None:
        zookeeper, _ = backend(zookeeper_connect, 1)
        await zookeeper.start()
        await zookeeper.stop()
        other = ZooKeeperMetadataBackend(zookeeper_connect, 1, "AAAAAAAAAAAAAAAAAAAAAA", session_timeout_ms=4000)
        with pytest.raises(InconsistentClusterIdError):
            await other.start()
        await other.stop()

    run(scenario())


def test_a_broker_registers_again_after_its_session_expired(zookeeper_connect: str) -> None:
    async def scenario() -> None:
        broker, cache = backend(zookeeper_connect, 1)
        events: list[str] = []
        broker.add_session_listener(events.append)
        await broker.start()
        first_epoch = await broker.register_broker([Endpoint("PLAINTEXT", "127.0.0.1", 9092)], None)
        broker.expire_session_for_testing()
        await eventually(lambda: events == ["expired", "reconnected"], timeout=10)
        await eventually(lambda: 1 in cache.image.brokers and not cache.image.brokers[1].fenced
                         and cache.image.brokers[1].broker_epoch > first_epoch)
        await broker.stop()

    run(scenario())


def test_the_controller_serves_requests_left_under_admin_by_kafkas_zookeeper_tools(zookeeper_connect: str) -> None:
    from kfk.config import BrokerConfig
    from kfk.controller.quorum_controller import QuorumController
    from kfk.protocol.messages.create_topics import CreateTopicsRequest

    async def scenario() -> None:
        zookeeper, cache = backend(zookeeper_connect, 1)
        config = BrokerConfig({"zookeeper.connect": zookeeper_connect, "broker.id": "1"})
        controller = QuorumController(zookeeper, config, 1, manage_leadership=True)
        zookeeper.add_listener(controller)
        zookeeper.set_admin_request_handler(controller.handle_admin_requests)
        await zookeeper.start()
        await zookeeper.register_broker([Endpoint("PLAINTEXT", "127.0.0.1", 9092)], None)
        await zookeeper.register_broker([Endpoint("PLAINTEXT", "127.0.0.1", 9092)], None)  # idempotent
        assert await controller.activate()
        Topic = CreateTopicsRequest.CreatableTopic
        response = await controller.create_topics(CreateTopicsRequest(topics=[
            Topic(name=name, num_partitions=1, replication_factor=1) for name in ("doomed", "kept")]))
        assert all(result.error_code == 0 for result in response.topics)
        await zookeeper.create_znode("/admin/delete_topics/doomed")
        await eventually(lambda: cache.image.topic("doomed") is None)
        plan = znodes.encode_reassignment({("kept", 0): [1]})
        await zookeeper.create_znode("/admin/reassign_partitions", plan)
        for _ in range(100):
            if await zookeeper.read_znode("/admin/reassign_partitions") is None \
                    and not await zookeeper.znode_children("/admin/delete_topics"):
                break
            await asyncio.sleep(0.05)
        assert await zookeeper.read_znode("/admin/reassign_partitions") is None
        assert await zookeeper.znode_children("/admin/delete_topics") == []
        assert cache.image.topic("kept") is not None
        controller.deactivate()
        await zookeeper.stop()

    run(scenario())
