"""What MirrorMaker's connectors and tasks share (Kafka's MirrorUtils): creating their single-partition compacted
internal topics on a cluster (a topic that exists already is fine), and reading a task's assigned partitions."""

from __future__ import annotations

import logging
from typing import Mapping

from kfk.client import Admin, NewTopic
from kfk.common.structs import TopicPartition
from kfk.connect.errors import ConnectException
from kfk.errors import ErrorCode

log = logging.getLogger("kfk.connect.mirror")


def create_single_partition_compacted_topic(admin_config: Mapping[str, str], topic: str,
                                            replication_factor: int) -> None:
    with Admin(dict(admin_config)) as admin:
        errors = admin.create_topics([NewTopic(topic, 1, replication_factor, {"cleanup.policy": "compact"})])
    error = errors.get(topic)
    if error is None:
        log.info("Created topic '%s'", topic)
    elif error.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
        raise ConnectException(f"Unable to create topic '{topic}': {error}")


def topic_partition_list(text: str) -> list[TopicPartition]:
    """`task.assigned.partitions` ("topic-0,topic-1"): Kafka's TopicPartition.toString, split at the last '-'."""
    partitions = []
    for item in (part.strip() for part in text.split(",")):
        if item:
            topic, _, partition = item.rpartition("-")
            partitions.append(TopicPartition(topic, int(partition)))
    return partitions
