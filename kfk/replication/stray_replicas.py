"""Stray replicas: partition logs on disk that the metadata has no place for.

A broker that is down while one of its topics is deleted (or deleted and re-created under the same name) misses the
deletion: at its next start its log dirs still hold the old partitions. Once the broker's metadata has caught up (a
KRaft broker is unfenced, a ZooKeeper broker has read the znodes) and before it opens any partition, every log whose
topic id (its partition.metadata) the image does not know is set aside as `<topic>-<partition>.<id>-stray`, as Kafka
does, and never deleted: the operator decides. A log without a topic id, or whose topic id the image knows, is left
alone: kfk cannot tell it from one whose creation has not finished (the replica manager writes its id when it opens
it). Kafka also sets aside the replicas of partitions no longer assigned to this broker; kfk's replica manager leaves
those to the reassignment that removed them.
"""

from __future__ import annotations

import logging

from kfk.common.structs import TopicPartition
from kfk.errors import KafkaStorageError
from kfk.metadata.image import MetadataImage
from kfk.storage.log_manager import LogManager
from kfk.common.uuids import uuid_to_base64

logger = logging.getLogger(__name__)


def mark_stray_logs(log_manager: LogManager, image: MetadataImage) -> list[TopicPartition]:
    """Blocking (reads every partition.metadata, renames folders): set aside the logs whose topic id `image` does
    not have, and return their partitions."""
    strays: list[TopicPartition] = []
    for log in log_manager.all_logs():
        if not log.partition_metadata.exists():
            continue
        try:
            topic_id = log.partition_metadata.read()
        except KafkaStorageError as error:
            logger.warning("Cannot tell whether %s is a stray replica: %s", log.dir, error)
            continue
        if topic_id in image.topics_by_id:
            continue
        logger.info("Found stray replica %s: its topic id %s is not in the metadata (topic %s deleted or re-created)",
                    log.dir, uuid_to_base64(topic_id), log.topic_partition.topic)
        if log_manager.mark_stray(log.topic_partition) is not None:
            strays.append(log.topic_partition)
    return strays
