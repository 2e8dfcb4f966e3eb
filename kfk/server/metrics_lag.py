"""Consumer lag for the metrics endpoint: every partition of every group this broker coordinates.

Where it is computed, and why here: on the group's coordinator broker, which fetches the high watermarks of the
partitions it does not lead from their leaders (ListOffsets, LATEST, read-uncommitted: the LOG-END-OFFSET that
`kafka-consumer-groups.sh --describe` shows) over its own inter-broker connections, once per scrape. A group has
exactly one coordinator, so each (group, topic, partition) series comes from exactly one broker and summing over the
brokers' endpoints gives the cluster's lag with nothing counted twice or missing; an operator scrapes the brokers
and needs no further process. The other place, a separate exporter process over the Admin client (the way
kafka-exporter does it), would need its own deployment, credentials and ACLs, and would ask every group's offsets
of the cluster from one place; on the coordinator the committed offsets are already in memory and only the end
offsets travel, one request per leader broker per scrape. Before, a coordinator exported lag only for the partitions
it also led (about a third on three brokers).

A leader that does not answer within LEADER_TIMEOUT_S (down, partitioned, a partition offline) costs its partitions'
lag series, not the scrape: kafka-exporter omits them the same way, and the committed offsets are still exported.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

from kfk.common.constants import LATEST_TIMESTAMP
from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode, KafkaError
from kfk.metadata.cache import MetadataCache
from kfk.protocol.messages.list_offsets import ListOffsetsRequest
from kfk.replication.replica_manager import ReplicaManager
from kfk.server.inter_broker_channels import InterBrokerChannels

__all__ = ["HighWatermarks", "LEADER_TIMEOUT_S"]

log = logging.getLogger("kfk.server.metrics")

#: How long a scrape waits for one leader's end offsets: well under Prometheus' default scrape timeout (10 s).
LEADER_TIMEOUT_S = 3.0
#: ListOffsets v7 (timestamps, isolation level, leader epochs; not flexible, which every kfk and Kafka broker serves).
LIST_OFFSETS_VERSION = 7
#: A consumer's replica id: the answer is the high watermark, as the group tool's.
CONSUMER_REPLICA_ID = -1
READ_UNCOMMITTED = 0


class HighWatermarks:
    """The high watermarks of a set of partitions: this broker's own for those it leads, the leaders' for the
    others (asked concurrently, one request per leader)."""

    def __init__(self, node_id: int, replica_manager: ReplicaManager, metadata_cache: MetadataCache,
                 channels: InterBrokerChannels) -> None:
        self.node_id = node_id
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.channels = channels

    async def of(self, partitions: set[TopicPartition]) -> dict[TopicPartition, int]:
        """The partitions whose high watermark is known now; a leaderless partition, or one whose leader failed to
        answer, is left out."""
        known: dict[TopicPartition, int] = {}
        by_leader: dict[int, list[TopicPartition]] = defaultdict(list)
        image = self.metadata_cache.image
        for topic_partition in partitions:
            hosted = self.replica_manager.get_partition(topic_partition)
            if hosted is not None and hosted.is_leader:
                known[topic_partition] = hosted.log.high_watermark
                continue
            registration = image.partition(topic_partition.topic, topic_partition.partition)
            if registration is not None and registration.leader >= 0 and registration.leader != self.node_id:
                by_leader[registration.leader].append(topic_partition)
        answers = await asyncio.gather(*(self._ask(leader, asked) for leader, asked in by_leader.items()))
        for answer in answers:
            known.update(answer)
        return known

    async def _ask(self, leader: int, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic_partition in partitions:
            by_topic[topic_partition.topic].append(topic_partition.partition)
        request = ListOffsetsRequest(
            replica_id=CONSUMER_REPLICA_ID, isolation_level=READ_UNCOMMITTED,
            topics=[ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                ListOffsetsRequest.ListOffsetsPartition(partition_index=index, timestamp=LATEST_TIMESTAMP)
                for index in sorted(indexes)]) for topic, indexes in sorted(by_topic.items())])
        try:
            async with asyncio.timeout(LEADER_TIMEOUT_S):
                response = await self.channels.request(leader, request, LIST_OFFSETS_VERSION)
        except (KafkaError, OSError, asyncio.TimeoutError) as error:
            log.debug("metrics: no end offsets from broker %d: %s", leader, error)
            return {}
        return {TopicPartition(topic.name, partition.partition_index): partition.offset
                for topic in response.topics for partition in topic.partitions
                if partition.error_code == ErrorCode.NONE and partition.offset >= 0}
