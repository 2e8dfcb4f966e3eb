"""The value types every layer passes around: a topic-partition and a committed position.

NamedTuples: cheap to create on the hot path, hashable and ordered (topic, then partition) where they are keys, and
printable the way Kafka prints them. The client's public API (kfk.client) re-exports them.
"""

from __future__ import annotations

from typing import NamedTuple

from kfk.common.constants import UNKNOWN_LEADER_EPOCH

__all__ = ["TopicPartition", "OffsetAndMetadata"]


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
