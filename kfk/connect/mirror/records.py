"""The records MirrorMaker 2 writes to its internal topics, byte for byte as Kafka's connect-mirror writes them, so
Java's MirrorClient/RemoteClusterUtils read kfk's and kfk reads Java's.

Each is a struct of Kafka's protocol types (org.apache.kafka.common.protocol.types: STRING = int16 length + UTF-8,
INT16/INT32/INT64 big-endian), written one field after another:

- OffsetSync (mm2-offset-syncs.<cluster>.internal): key {topic STRING, partition INT32},
  value {upstreamOffset INT64, offset INT64} (no version header);
- Checkpoint (<source>.checkpoints.internal): key {group STRING, topic STRING, partition INT32},
  value {version INT16 = 0} then {upstreamOffset INT64, offset INT64, metadata STRING};
- Heartbeat (heartbeats): key {sourceClusterAlias STRING, targetClusterAlias STRING},
  value {version INT16 = 0} then {timestamp INT64}.

The `connect_partition` of each is the source partition its record is stored under in the worker's offsets, with
its keys in the order Java's HashMap iterates them (the JSON key bytes must match for either worker to find them).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from kfk.common.structs import TopicPartition

VERSION = 0


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.position = data, 0

    def _take(self, size: int) -> bytes:
        if self.position + size > len(self.data):
            raise ValueError("record too short for its schema")
        chunk = self.data[self.position:self.position + size]
        self.position += size
        return chunk

    def int16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self._take(8))[0]

    def string(self) -> str:
        size = self.int16()
        if size < 0:
            raise ValueError("a STRING field may not be null")
        return self._take(size).decode("utf-8")


def _string(text: str) -> bytes:
    encoded = text.encode("utf-8")
    return struct.pack(">h", len(encoded)) + encoded


def _version(reader: _Reader) -> None:
    version = reader.int16()
    if version != VERSION:
        raise ValueError(f"unknown record version {version}")


@dataclass(frozen=True)
class OffsetSync:
    """A replicated record's offset upstream and where it landed downstream (Kafka's OffsetSync)."""
    topic_partition: TopicPartition
    upstream_offset: int
    downstream_offset: int

    def record_key(self) -> bytes:
        return _string(self.topic_partition.topic) + struct.pack(">i", self.topic_partition.partition)

    def record_value(self) -> bytes:
        return struct.pack(">qq", self.upstream_offset, self.downstream_offset)

    @classmethod
    def deserialize(cls, key: bytes, value: bytes) -> OffsetSync:
        key_reader, value_reader = _Reader(key), _Reader(value)
        topic_partition = TopicPartition(key_reader.string(), key_reader.int32())
        return cls(topic_partition, value_reader.int64(), value_reader.int64())


@dataclass(frozen=True)
class Checkpoint:
    """A consumer group's upstream committed offset and its translation downstream (Kafka's Checkpoint)."""
    consumer_group_id: str
    topic_partition: TopicPartition
    upstream_offset: int
    downstream_offset: int
    metadata: str

    def record_key(self) -> bytes:
        return (_string(self.consumer_group_id) + _string(self.topic_partition.topic)
                + struct.pack(">i", self.topic_partition.partition))

    def record_value(self) -> bytes:
        return (struct.pack(">hqq", VERSION, self.upstream_offset, self.downstream_offset)
                + _string(self.metadata))

    def connect_partition(self) -> dict[str, Any]:
        return {"partition": self.topic_partition.partition, "topic": self.topic_partition.topic,
                "group": self.consumer_group_id}

    @classmethod
    def deserialize(cls, key: bytes, value: bytes) -> Checkpoint:
        value_reader = _Reader(value)
        _version(value_reader)
        upstream_offset, downstream_offset, metadata = value_reader.int64(), value_reader.int64(), value_reader.string()
        key_reader = _Reader(key)
        group, topic, partition = key_reader.string(), key_reader.string(), key_reader.int32()
        return cls(group, TopicPartition(topic, partition), upstream_offset, downstream_offset, metadata)


@dataclass(frozen=True)
class Heartbeat:
    """A timestamped beat from one cluster alias to another (Kafka's Heartbeat)."""
    source_cluster_alias: str
    target_cluster_alias: str
    timestamp: int

    def record_key(self) -> bytes:
        return _string(self.source_cluster_alias) + _string(self.target_cluster_alias)

    def record_value(self) -> bytes:
        return struct.pack(">hq", VERSION, self.timestamp)

    def connect_partition(self) -> dict[str, Any]:
        return {"sourceClusterAlias": self.source_cluster_alias, "targetClusterAlias": self.target_cluster_alias}

    @classmethod
    def deserialize(cls, key: bytes, value: bytes) -> Heartbeat:
        value_reader = _Reader(value)
        _version(value_reader)
        key_reader = _Reader(key)
        return cls(key_reader.string(), key_reader.string(), value_reader.int64())


def wrap_partition(topic_partition: TopicPartition, source_cluster_alias: str) -> dict[str, Any]:
    """The source partition MirrorSourceTask stores a replicated partition's offset under (Kafka's
    MirrorUtils.wrapPartition), keys in Java's HashMap order."""
    return {"cluster": source_cluster_alias, "partition": topic_partition.partition, "topic": topic_partition.topic}


def wrap_offset(offset: int) -> dict[str, Any]:
    return {"offset": offset}


def unwrap_offset(wrapped: Any) -> int:
    """The stored offset, -1 when there is none (Kafka's MirrorUtils.unwrapOffset)."""
    if not wrapped or wrapped.get("offset") is None:
        return -1
    return int(wrapped["offset"])
