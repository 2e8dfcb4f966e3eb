"""The Kafka 4.0 release over a raw socket with kfk's own codec: the APIs it brings (DescribeTopicPartitions with its
cursor, DescribeQuorum) and the versions it raised (Metadata v13, DescribeGroups v6, DescribeCluster v2, Produce
v12), plus ApiVersions advertising that release."""

from __future__ import annotations

import pytest

from kfk.common.internal_topics import CLUSTER_METADATA_TOPIC_NAME
from kfk.errors import ErrorCode
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.describe_cluster import DescribeClusterRequest
from kfk.protocol.messages.describe_groups import DescribeGroupsRequest
from kfk.protocol.messages.describe_quorum import DescribeQuorumRequest
from kfk.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest
from kfk.protocol.messages.metadata import MetadataRequest
from kfk.protocol.messages.produce import ProduceRequest
from kfk.records import MemoryRecordsBuilder
from tests.integration.test_groups_wire import find_coordinator
from tests.integration.test_metadata_wire import create
from tests.integration.wire import api_versions_request, connect, request

pytestmark = pytest.mark.integration

Wanted = DescribeTopicPartitionsRequest.TopicRequest
Cursor = DescribeTopicPartitionsRequest.Cursor
QuorumTopic = DescribeQuorumRequest.TopicData
QuorumPartition = DescribeQuorumRequest.PartitionData


def describe(sock, names: list[str], limit: int = 2000, cursor: Cursor | None = None):
    return request(sock, DescribeTopicPartitionsRequest(topics=[Wanted(name=name) for name in names],
                                                        response_partition_limit=limit, cursor=cursor), 0)


def pages(sock, names: list[str], limit: int) -> list[list[tuple[str, int]]]:
    """Every page of a paginated description: the (topic, partition) pairs of each response."""
    described, cursor = [], None
    while True:
        response = describe(sock, names, limit, cursor)
        described.append([(t.name, p.partition_index) for t in response.topics for p in t.partitions])
        if response.next_cursor is None:
            return described
        cursor = Cursor(topic_name=response.next_cursor.topic_name,
                        partition_index=response.next_cursor.partition_index)


def test_api_versions_advertises_kafka_4_4(kfk_broker: str) -> None:
    with connect(kfk_broker) as sock:
        advertised = {v.api_key: (v.min_version, v.max_version) for v in request(sock, api_versions_request(), 3).api_keys}
    assert advertised[ApiKey.PRODUCE] == (0, 13)
    assert advertised[ApiKey.LIST_OFFSETS][1] == 11 and advertised[ApiKey.METADATA][1] == 13
    assert advertised[ApiKey.DESCRIBE_TOPIC_PARTITIONS] == (0, 0)
    assert advertised[ApiKey.DESCRIBE_QUORUM] == (0, 2)
    assert advertised[ApiKey.DESCRIBE_CLUSTER] == (0, 2)


def test_describe_topic_partitions_pages_with_a_cursor(kfk_broker: str) -> None:
    with connect(kfk_broker) as sock:
        ids = {name: create(sock, name, partitions) for name, partitions in (("dtp-a", 3), ("dtp-b", 2), ("dtp-c", 1))}
        whole = describe(sock, ["dtp-c", "dtp-a", "dtp-b", "dtp-unknown"])
        assert [(t.name, t.error_code) for t in whole.topics] == [
            ("dtp-a", ErrorCode.NONE), ("dtp-b", ErrorCode.NONE), ("dtp-c", ErrorCode.NONE),
            ("dtp-unknown", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
        assert whole.next_cursor is None
        a = whole.topics[0]
        assert a.topic_id == ids["dtp-a"] and not a.is_internal
        assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes, p.eligible_leader_replicas)
                for p in a.partitions] == [(0, 1, [1], [1], []), (1, 1, [1], [1], []), (2, 1, [1], [1], [])]
        names = ["dtp-a", "dtp-b", "dtp-c"]
        # A page ends inside a topic (cursor on its next partition) or after one (cursor on the next topic).
        assert pages(sock, names, 2) == [[("dtp-a", 0), ("dtp-a", 1)], [("dtp-a", 2), ("dtp-b", 0)],
                                         [("dtp-b", 1), ("dtp-c", 0)]]
        assert pages(sock, names, 3) == [[("dtp-a", 0), ("dtp-a", 1), ("dtp-a", 2)],
                                         [("dtp-b", 0), ("dtp-b", 1), ("dtp-c", 0)]]
        assert describe(sock, names, 3).next_cursor.partition_index == 0
        # A cursor on a topic the request does not name is refused for every topic.
        refused = describe(sock, ["dtp-a"], cursor=Cursor(topic_name="dtp-b", partition_index=0))
        assert [(t.name, t.error_code) for t in refused.topics] == [("dtp-a", ErrorCode.INVALID_REQUEST)]
        # No names: every topic, in name order, from the cursor on.
        every = describe(sock, [], cursor=Cursor(topic_name="dtp-b", partition_index=1))
        listed = [(t.name, [p.partition_index for p in t.partitions]) for t in every.topics]
        assert listed[:2] == [("dtp-b", [1]), ("dtp-c", [0])]
        assert [name for name, _ in listed] == sorted(name for name, _ in listed)


def test_the_broker_caps_a_page_at_max_request_partition_size_limit(kfk_broker_factory) -> None:
    broker = kfk_broker_factory({"max.request.partition.size.limit": "2"})
    with connect(broker.bootstrap_servers) as sock:
        create(sock, "capped", 3)
        response = describe(sock, ["capped"], limit=100)
        assert [p.partition_index for p in response.topics[0].partitions] == [0, 1]
        assert (response.next_cursor.topic_name, response.next_cursor.partition_index) == ("capped", 2)


def test_describe_quorum_at_every_version(kfk_broker: str) -> None:
    wanted = [QuorumTopic(topic_name=CLUSTER_METADATA_TOPIC_NAME, partitions=[QuorumPartition(partition_index=0)])]
    with connect(kfk_broker) as sock:
        create(sock, "quorum-grows", 1)
        for version in (0, 1, 2):
            response = request(sock, DescribeQuorumRequest(topics=wanted), version)
            assert response.error_code == ErrorCode.NONE
            (topic,) = response.topics
            (partition,) = topic.partitions
            assert (topic.topic_name, partition.error_code, partition.leader_id) == (
                CLUSTER_METADATA_TOPIC_NAME, ErrorCode.NONE, 1)
            assert partition.leader_epoch >= 1 and partition.high_watermark > 0
            (voter,) = partition.current_voters
            assert (voter.replica_id, voter.log_end_offset) == (1, partition.high_watermark)
            assert partition.observers == []
            if version >= 1:
                assert voter.last_fetch_timestamp > 0 and voter.last_caught_up_timestamp > 0
            if version >= 2:
                (node,) = response.nodes
                port = int(kfk_broker.rsplit(":", 1)[1])
                assert node.node_id == 1 and port in [listener.port for listener in node.listeners]
        # Another partition: answered in its entry, UNKNOWN_TOPIC_OR_PARTITION (as Apache Kafka, see tests/interop);
        # a request naming two partitions is INVALID_REQUEST.
        other = [QuorumTopic(topic_name="not-metadata", partitions=[QuorumPartition(partition_index=0)])]
        answer = request(sock, DescribeQuorumRequest(topics=other), 2)
        assert answer.error_code == ErrorCode.NONE
        assert [(t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in answer.topics] == [
            ("not-metadata", [(0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)])]
        two = [QuorumTopic(topic_name=CLUSTER_METADATA_TOPIC_NAME, partitions=[QuorumPartition(partition_index=0),
                                                                             QuorumPartition(partition_index=1)])]
        assert request(sock, DescribeQuorumRequest(topics=two), 2).error_code == ErrorCode.INVALID_REQUEST


def test_raised_versions(kfk_broker: str) -> None:
    with connect(kfk_broker) as sock:
        create(sock, "raised", 1)
        # Metadata v13: the top-level error code is NONE.
        response = request(sock, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="raised")]), 13)
        assert response.error_code == ErrorCode.NONE and response.topics[0].error_code == ErrorCode.NONE
        # DescribeGroups v6: a group that does not exist is GROUP_ID_NOT_FOUND (before: Dead with no error).
        find_coordinator(sock, "no-such-group")
        (old,) = request(sock, DescribeGroupsRequest(groups=["no-such-group"]), 5).groups
        assert (old.error_code, old.group_state) == (ErrorCode.NONE, "Dead")
        (new,) = request(sock, DescribeGroupsRequest(groups=["no-such-group"]), 6).groups
        assert new.error_code == ErrorCode.GROUP_ID_NOT_FOUND and "no-such-group" in new.error_message
        # DescribeCluster v2: this broker is not fenced, asked with or without the fenced ones.
        for include in (False, True):
            cluster = request(sock, DescribeClusterRequest(include_fenced_brokers=include), 2)
            assert [(b.broker_id, b.is_fenced) for b in cluster.brokers] == [(1, False)]
        # Produce v12 is v11 for a non-transactional producer.
        builder = MemoryRecordsBuilder()
        builder.append(1_000, b"k", b"v")
        data = ProduceRequest.TopicProduceData(name="raised", partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=bytes(builder.close()))])
        produced = request(sock, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[data]), 12)
        partition = produced.responses[0].partition_responses[0]
        assert (partition.error_code, partition.base_offset) == (ErrorCode.NONE, 0)
