"""ClusterMetadata: the client's immutable picture of the cluster, built from Metadata responses.

Brokers (id -> host, port, rack), the controller, the cluster id, and per topic its id, whether it is internal, and
per partition the leader, leader epoch, replicas, in-sync replicas and offline replicas. A refresh that asked about
some topics replaces those topics and keeps the others (a producer asks only about the topics it writes to); the
broker list and controller always come from the latest response. Readers in any thread get a consistent snapshot
because a snapshot is never changed after it is built.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from kfk.common.constants import NO_NODE
from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode
from kfk.protocol.messages.metadata import MetadataResponse

__all__ = ["BrokerMetadata", "PartitionMetadata", "TopicMetadata", "ClusterMetadata"]

ZERO_TOPIC_ID = uuid.UUID(int=0)


@dataclass(frozen=True, slots=True)
class BrokerMetadata:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    in_sync_replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = ErrorCode.NONE

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class TopicMetadata:
    name: str
    topic_id: uuid.UUID
    is_internal: bool
    error_code: int
    partitions: Mapping[int, PartitionMetadata] = field(default_factory=dict)


class ClusterMetadata:
    """One immutable snapshot; ``updated_ms`` is when its Metadata response arrived (metadata.max.age.ms)."""

    def __init__(self, brokers: Mapping[int, BrokerMetadata] | None = None,
                 topics: Mapping[str, TopicMetadata] | None = None, cluster_id: str | None = None,
                 controller_id: int = NO_NODE, updated_ms: int = 0) -> None:
        self.brokers: Mapping[int, BrokerMetadata] = MappingProxyType(dict(brokers or {}))
        self.topics: Mapping[str, TopicMetadata] = MappingProxyType(dict(topics or {}))
        self.cluster_id = cluster_id
        self.controller_id = controller_id
        self.updated_ms = updated_ms
        self._available: dict[str, list[int]] = {}
        self._names_by_id = {topic.topic_id: name for name, topic in self.topics.items()
                             if topic.topic_id != ZERO_TOPIC_ID}

    def __repr__(self) -> str:
        return (f"ClusterMetadata(cluster_id={self.cluster_id!r}, brokers={sorted(self.brokers)}, "
                f"topics={sorted(self.topics)})")

    def with_response(self, response: MetadataResponse, asked_topics: frozenset[str] | None, now_ms: int
                      ) -> ClusterMetadata:
        """A new snapshot: this one updated with ``response`` to a request for ``asked_topics`` (None: all)."""
        brokers = {broker.node_id: BrokerMetadata(broker.node_id, broker.host, broker.port, broker.rack)
                   for broker in response.brokers}
        topics: dict[str, TopicMetadata] = {} if asked_topics is None else {
            name: topic for name, topic in self.topics.items() if name not in asked_topics}
        for topic in response.topics:
            if topic.name is None:
                continue
            partitions = {
                partition.partition_index: PartitionMetadata(
                    topic.name, partition.partition_index, partition.leader_id, partition.leader_epoch,
                    tuple(partition.replica_nodes), tuple(partition.isr_nodes), tuple(partition.offline_replicas),
                    partition.error_code)
                for partition in topic.partitions}
            topics[topic.name] = TopicMetadata(topic.name, topic.topic_id or ZERO_TOPIC_ID, topic.is_internal,
                                               topic.error_code, MappingProxyType(partitions))
        return ClusterMetadata(brokers, topics, response.cluster_id, response.controller_id, now_ms)

    # --- queries -----------------------------------------------------------------------------------------------------

    def broker(self, node_id: int) -> BrokerMetadata | None:
        return self.brokers.get(node_id)

    def topic(self, name: str) -> TopicMetadata | None:
        return self.topics.get(name)

    def partition(self, topic_partition: TopicPartition) -> PartitionMetadata | None:
        topic = self.topics.get(topic_partition.topic)
        return None if topic is None else topic.partitions.get(topic_partition.partition)

    def leader_for(self, topic_partition: TopicPartition) -> int:
        """The leader's node id, or NO_NODE when there is none or it is not a known broker."""
        partition = self.partition(topic_partition)
        if partition is None or partition.leader not in self.brokers:
            return NO_NODE
        return partition.leader

    def partitions_for(self, topic: str) -> list[int] | None:
        """Partition numbers of a topic that exists (sorted), else None."""
        metadata = self.topics.get(topic)
        if metadata is None or metadata.error_code != ErrorCode.NONE:
            return None
        return sorted(metadata.partitions)

    def available_partitions_for(self, topic: str) -> list[int]:
        """Partitions with a live leader: where the sticky partitioner sends keyless records (computed once per
        snapshot and topic: the producer asks for every keyless record)."""
        available = self._available.get(topic)
        if available is None:
            metadata = self.topics.get(topic)
            if metadata is None:
                return []
            available = self._available[topic] = [index for index, partition in sorted(metadata.partitions.items())
                                                  if partition.leader in self.brokers]
        return available

    def topic_id(self, topic: str) -> uuid.UUID:
        metadata = self.topics.get(topic)
        return metadata.topic_id if metadata is not None else ZERO_TOPIC_ID

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._names_by_id.get(topic_id)
