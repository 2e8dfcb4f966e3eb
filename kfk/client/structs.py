"""The small value types every client API speaks: topic-partitions, offsets, record metadata, consumed records.

NamedTuples, as in aiokafka's structs.py and Java's plain classes: cheap to create on the hot path, hashable where
they are keys, and printable. TopicPartition, OffsetAndMetadata and the wire sentinels live in kfk.common.
"""

from __future__ import annotations

from typing import NamedTuple

from kfk.common.constants import UNKNOWN_LEADER_EPOCH
from kfk.common.structs import TopicPartition

__all__ = ["OffsetAndTimestamp", "RecordMetadata", "ConsumerRecord"]


class OffsetAndTimestamp(NamedTuple):
    """An answer of offsets_for_times: the first offset whose timestamp is >= the target, and that timestamp."""

    offset: int
    timestamp: int
    leader_epoch: int = UNKNOWN_LEADER_EPOCH


class RecordMetadata(NamedTuple):
    """Where an acknowledged record landed. ``offset`` is -1 when acks=0 (the broker does not answer);
    ``timestamp`` is the broker's log append time for LogAppendTime topics, else the record's own timestamp."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


class ConsumerRecord(NamedTuple):
    """One record returned by Consumer.poll. ``timestamp_type`` is 0 for CreateTime, 1 for LogAppendTime."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    leader_epoch: int = UNKNOWN_LEADER_EPOCH

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)
