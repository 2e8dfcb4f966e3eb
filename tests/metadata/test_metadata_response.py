"""How the Metadata handler reports partitions whose replicas are not all available (KRaftMetadataCache rules)."""

from __future__ import annotations

import uuid

from kfk.errors import ErrorCode
from kfk.metadata.image import MetadataImage
from kfk.protocol.metadata_records import schema_class
from kfk.server.handlers.metadata import partition_metadata
from tests.metadata.test_image import registration

TopicRecord = schema_class("TopicRecord")
PartitionRecord = schema_class("PartitionRecord")
TOPIC_ID = uuid.UUID(int=77)


def image_with(leader: int, replicas: list[int], isr: list[int]) -> MetadataImage:
    return MetadataImage().apply([
        registration(1, {"PLAINTEXT": 9091}, fenced=False),
        registration(2, {"PLAINTEXT": 9092}, fenced=True),
        registration(3, {"INTERNAL": 9193}, fenced=False),
        TopicRecord(name="t", topic_id=TOPIC_ID),
        PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=replicas, isr=isr, leader=leader,
                        leader_epoch=4, partition_epoch=0),
    ], 4)


def describe(image: MetadataImage, version: int):
    (partition,) = partition_metadata(image, image.topic("t"), "PLAINTEXT", version)
    return partition


def test_unavailable_replicas_are_offline_and_hidden_only_at_v0() -> None:
    image = image_with(1, [1, 2, 3, 9], [1, 2])
    current = describe(image, 12)
    assert (current.error_code, current.leader_id, current.leader_epoch) == (ErrorCode.NONE, 1, 4)
    assert (current.replica_nodes, current.isr_nodes, current.offline_replicas) == ([1, 2, 3, 9], [1, 2], [2, 3, 9])
    oldest = describe(image, 0)
    assert oldest.error_code == ErrorCode.REPLICA_NOT_AVAILABLE
    assert (oldest.replica_nodes, oldest.isr_nodes) == ([1], [1])


def test_a_leader_that_cannot_be_reached_on_this_listener() -> None:
    unknown = describe(image_with(9, [9], [9]), 12)
    assert (unknown.error_code, unknown.leader_id) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)
    no_listener = image_with(3, [3], [3])
    assert describe(no_listener, 12).error_code == ErrorCode.LISTENER_NOT_FOUND
    assert describe(no_listener, 5).error_code == ErrorCode.LEADER_NOT_AVAILABLE  # LISTENER_NOT_FOUND is v6+
    leaderless = describe(image_with(-1, [1], [1]), 12)
    assert (leaderless.error_code, leaderless.leader_id) == (ErrorCode.LEADER_NOT_AVAILABLE, -1)


def test_describe_cluster_v2_can_list_fenced_brokers() -> None:
    image = image_with(1, [1], [1])
    assert [broker.broker_id for broker, _ in image.alive_brokers("PLAINTEXT")] == [1]
    registered = [(broker.broker_id, broker.fenced, endpoint.port)
                  for broker, endpoint in image.registered_brokers("PLAINTEXT")]
    assert registered == [(1, False, 9091), (2, True, 9092)]  # broker 3 has no PLAINTEXT listener
