"""The small value types every client API speaks: topic-partitions, offsets, record metadata, consumed records.

NamedTuples, as in aiokafka's structs.py and Java's plain classes: cheap to create on the hot path, hashable where
they are keys, and printable. Wire sentinels the client sends or receives are named here once.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "TopicPartition",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "RecordMetadata",
    "ConsumerRecord",
    "ConsumerGroupMetadata",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "UNKNOWN_OFFSET",
    "UNKNOWN_LEADER_EPOCH",
    "NO_NODE",
]

EARLIEST_TIMESTAMP = -2
"""ListOffsets target meaning "the log start offset"."""
LATEST_TIMESTAMP = -1
"""ListOffsets target meaning "the log end offset" (the high watermark, or the last stable offset under
read_committed)."""
MAX_TIMESTAMP = -3
"""ListOffsets target meaning "the offset of the record with the largest timestamp" (KIP-734, ListOffsets v7+)."""
UNKNOWN_OFFSET = -1
UNKNOWN_LEADER_EPOCH = -1
NO_NODE = -1
"""A leader id or coordinator id that names no broker (no leader elected, or none known)."""


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


class OffsetAndMetadata(NamedTuple):
    """A committed position: the offset of the next record to consume, with the leader epoch it was read under
    (KIP-320, -1 if unknown) and free-form metadata."""

    offset: int
    metadata: str = ""
    leader_epoch: int = UNKNOWN_LEADER_EPOCH


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


class ConsumerGroupMetadata(NamedTuple):
    """A consumer's standing in its group (Consumer.group_metadata()), for Producer.send_offsets_to_transaction: the
    group coordinator accepts a transactional offset commit only from the current generation's member, so a zombie
    that was rebalanced out cannot commit offsets for partitions that now belong to another member (KIP-447)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None
