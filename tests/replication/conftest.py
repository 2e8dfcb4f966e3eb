"""Helpers for the replication tests: a manual clock, metadata images built from Kafka's metadata records, and a
replica manager over real logs in tmp_path."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import pytest

from kfk.common.clock import ManualClock
from kfk.common.config_types import ConfigResourceType
from kfk.config import BrokerConfig
from kfk.metadata.cache import MetadataCache
from kfk.metadata.image import MetadataImage
from kfk.protocol.message import Message
from kfk.protocol.metadata_records import schema_class
from kfk.replication.replica_manager import ReplicaManager
from kfk.storage.log_manager import LogManager

NODE_ID = 1


def topic_records(name: str, partitions: int = 1, *, topic_id: uuid.UUID | None = None,
                  replicas: Sequence[int] = (NODE_ID,), isr: Sequence[int] | None = None, leader: int = NODE_ID,
                  leader_epoch: int = 0, configs: dict[str, str] | None = None) -> list[Message]:
    """TopicRecord, one PartitionRecord per partition and ConfigRecords, as a controller writes them."""
    topic_id = topic_id or uuid.uuid4()
    records: list[Message] = [schema_class("TopicRecord")(name=name, topic_id=topic_id)]
    for index in range(partitions):
        records.append(schema_class("PartitionRecord")(
            partition_id=index, topic_id=topic_id, replicas=list(replicas),
            isr=list(isr if isr is not None else replicas), leader=leader, leader_epoch=leader_epoch,
            partition_epoch=0))
    for key, value in (configs or {}).items():
        records.append(config_record(name, key, value))
    return records


def config_record(topic: str, key: str, value: str | None) -> Message:
    return schema_class("ConfigRecord")(resource_type=ConfigResourceType.TOPIC, resource_name=topic, name=key,
                                        value=value)


def partition_change(topic_id: uuid.UUID, partition: int, *, leader: int = -2, isr: Sequence[int] | None = None,
                     replicas: Sequence[int] | None = None) -> Message:
    return schema_class("PartitionChangeRecord")(
        partition_id=partition, topic_id=topic_id, leader=leader, isr=None if isr is None else list(isr),
        replicas=None if replicas is None else list(replicas))


def remove_topic(topic_id: uuid.UUID) -> Message:
    return schema_class("RemoveTopicRecord")(topic_id=topic_id)


class Broker:
    """A replica manager over a LogManager in a temporary dir, fed by a MetadataCache."""

    def __init__(self, log_dir: str, clock: ManualClock, overrides: dict[str, str] | None = None) -> None:
        props = {"process.roles": "broker", "node.id": str(NODE_ID), "log.dirs": log_dir,
                 "log.segment.delete.delay.ms": "0"}
        props.update(overrides or {})
        self.config = BrokerConfig(props)
        self.clock = clock
        self.log_manager = LogManager(self.config.log_dir_list, self.config.log_config())
        self.log_manager.startup(clock())
        self.metadata_cache = MetadataCache(MetadataImage())
        self.replica_manager = ReplicaManager(NODE_ID, self.config, self.log_manager, clock)
        self.metadata_cache.subscribe(self.replica_manager.on_metadata_update)
        self._offset = 0

    def commit(self, records: Sequence[Message]) -> None:
        """Commit metadata records. Outside an event loop this also waits for the logs to be opened or deleted;
        inside one (a test's scenario) role changes apply at once and file work is left to the loop."""
        self._offset += len(records)
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            asyncio.run(self._commit_and_apply(records, self._offset))
        else:
            self.metadata_cache.handle_commit(records, self._offset)

    async def _commit_and_apply(self, records: Sequence[Message], offset: int) -> None:
        self.metadata_cache.handle_commit(records, offset)
        await self.replica_manager.metadata_applied()

    def close(self) -> None:
        asyncio.run(self.replica_manager.shutdown())
        self.log_manager.shutdown()


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def broker(tmp_path, clock: ManualClock):
    broker = Broker(str(tmp_path / "logs"), clock)
    yield broker
    broker.close()
