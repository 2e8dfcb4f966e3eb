"""Metadata, DescribeCluster, DescribeConfigs and InitProducerId at every version we serve, over a raw socket with
kfk's own codec: the version rules (null vs empty topic lists, auto-creation, topic ids, authorized operations)."""

from __future__ import annotations

import uuid

import pytest

from kfk.config import DYNAMIC_BROKER_CONFIGS
from kfk.errors import ErrorCode
from kfk.protocol.messages.create_topics import CreateTopicsRequest
from kfk.protocol.messages.describe_cluster import DescribeClusterRequest
from kfk.protocol.messages.describe_configs import DescribeConfigsRequest
from kfk.protocol.messages.init_producer_id import InitProducerIdRequest
from kfk.protocol.messages.metadata import MetadataRequest
from tests.integration.wire import connect, request

pytestmark = pytest.mark.integration

Wanted = MetadataRequest.MetadataRequestTopic
TOPIC_OPERATIONS = 3576  # READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS
CLUSTER_OPERATIONS = 8096  # CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE
OMITTED = -2147483648


def create(sock, name: str, partitions: int = 2) -> uuid.UUID:
    topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
    (result,) = request(sock, CreateTopicsRequest(topics=[topic]), 7).topics
    assert result.error_code == ErrorCode.NONE
    return result.topic_id


def metadata(sock, version: int, names=None, **fields):
    topics = None if names is None else [Wanted(name=name) for name in names]
    return request(sock, MetadataRequest(topics=topics, **fields), version)


def test_every_version_describes_brokers_and_topics(kfk_broker: str) -> None:
    port = int(kfk_broker.rsplit(":", 1)[1])
    with connect(kfk_broker) as sock:
        topic_id = create(sock, "t")
        for version in range(13):
            named = metadata(sock, version, ["t"])
            everything = metadata(sock, version, [] if version == 0 else None)
            for response in (named, everything):
                assert [(b.node_id, b.host, b.port) for b in response.brokers] == [(1, "127.0.0.1", port)]
                (topic,) = response.topics
                assert (topic.error_code, topic.name) == (ErrorCode.NONE, "t")
                assert [p.partition_index for p in topic.partitions] == [0, 1]
                for partition in topic.partitions:
                    assert (partition.error_code, partition.leader_id, partition.replica_nodes,
                            partition.isr_nodes) == (ErrorCode.NONE, 1, [1], [1])
                    assert partition.leader_epoch == (0 if version >= 7 else -1)
                assert topic.topic_id == (topic_id if version >= 10 else uuid.UUID(int=0))
                assert topic.topic_authorized_operations == OMITTED
            if version >= 1:
                assert named.controller_id == 1
                assert metadata(sock, version, []).topics == []
            if version >= 2:
                assert named.cluster_id


def test_unknown_topics_are_created_when_allowed_and_answered_unknown_topic_or_partition(kfk_broker_factory) -> None:
    broker = kfk_broker_factory({"num.partitions": "3"})
    with connect(broker.bootstrap_servers) as sock:
        (first,) = metadata(sock, 12, ["auto"]).topics
        # Apache Kafka 4.0 answers the request that creates a topic UNKNOWN_TOPIC_OR_PARTITION (tests/interop).
        assert (first.error_code, first.partitions) == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, [])
        (second,) = metadata(sock, 12, ["auto"]).topics
        assert second.error_code == ErrorCode.NONE and len(second.partitions) == 3
        (refused,) = metadata(sock, 12, ["manual"], allow_auto_topic_creation=False).topics
        assert refused.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        (old,) = metadata(sock, 3, ["old-client"]).topics  # before v4 creation is always allowed
        assert old.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        (invalid,) = metadata(sock, 12, ["bad name"]).topics
        assert invalid.error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
        for _ in range(2):
            (hidden,) = metadata(sock, 12, ["__cluster_metadata"]).topics
            assert hidden.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        (offsets,) = metadata(sock, 12, ["__consumer_offsets"]).topics
        assert offsets.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and offsets.is_internal
        topics = {t.name: t for t in metadata(sock, 12).topics}
        assert sorted(topics) == ["__consumer_offsets", "auto", "old-client"]
        assert topics["__consumer_offsets"].is_internal and len(topics["__consumer_offsets"].partitions) == 50


def test_auto_creation_disabled_on_the_broker(kfk_broker_factory) -> None:
    broker = kfk_broker_factory({"auto.create.topics.enable": "false"})
    with connect(broker.bootstrap_servers) as sock:
        (topic,) = metadata(sock, 12, ["nope"]).topics
        assert topic.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert metadata(sock, 12).topics == []


def test_topic_ids_and_authorized_operations(kfk_broker: str) -> None:
    with connect(kfk_broker) as sock:
        topic_id = create(sock, "by-id", 1)
        unknown = uuid.uuid4()
        response = request(sock, MetadataRequest(topics=[Wanted(name=None, topic_id=topic_id),
                                                         Wanted(name=None, topic_id=unknown)]), 12)
        known, missing = response.topics
        assert (known.name, known.topic_id, known.error_code) == ("by-id", topic_id, ErrorCode.NONE)
        assert (missing.name, missing.topic_id, missing.error_code) == (None, unknown, ErrorCode.UNKNOWN_TOPIC_ID)
        refused = request(sock, MetadataRequest(topics=[Wanted(name="by-id", topic_id=topic_id)]), 10)
        assert [t.error_code for t in refused.topics] == [ErrorCode.INVALID_REQUEST]
        for version in (8, 9, 10):
            response = metadata(sock, version, ["by-id"], include_topic_authorized_operations=True,
                                include_cluster_authorized_operations=True)
            assert response.topics[0].topic_authorized_operations == TOPIC_OPERATIONS
            assert response.cluster_authorized_operations == CLUSTER_OPERATIONS
        assert metadata(sock, 12, ["by-id"]).topics[0].topic_authorized_operations == OMITTED


def test_describe_cluster(kfk_broker: str) -> None:
    with connect(kfk_broker) as sock:
        cluster_id = metadata(sock, 12, []).cluster_id
        for version in (0, 1):
            response = request(sock, DescribeClusterRequest(include_cluster_authorized_operations=True), version)
            assert (response.error_code, response.cluster_id, response.controller_id) == (
                ErrorCode.NONE, cluster_id, 1)
            assert [b.broker_id for b in response.brokers] == [1]
            assert response.cluster_authorized_operations == CLUSTER_OPERATIONS
        wrong = request(sock, DescribeClusterRequest(endpoint_type=2), 1)
        assert wrong.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE and wrong.brokers == []
        assert request(sock, DescribeClusterRequest(endpoint_type=7), 1).error_code == \
            ErrorCode.UNSUPPORTED_ENDPOINT_TYPE


def test_describe_configs_at_every_version(kfk_broker: str) -> None:
    Resource = DescribeConfigsRequest.DescribeConfigsResource
    with connect(kfk_broker) as sock:
        create(sock, "c", 1)
        for version in range(5):
            fields = {}
            if version >= 1:
                fields["include_synonyms"] = True
            if version >= 3:
                fields["include_documentation"] = True
            response = request(sock, DescribeConfigsRequest(resources=[
                Resource(resource_type=2, resource_name="c", configuration_keys=["segment.bytes", "retention.ms"]),
                Resource(resource_type=4, resource_name="1", configuration_keys=None),
                Resource(resource_type=2, resource_name="missing", configuration_keys=None),
            ], **fields), version)
            topic, broker, missing = response.results
            assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            entries = {entry.name: entry for entry in topic.configs}
            assert set(entries) == {"segment.bytes", "retention.ms"}
            segment = entries["segment.bytes"]
            assert segment.value == "1073741824" and not segment.is_sensitive and not segment.read_only
            if version == 0:
                assert segment.is_default and segment.synonyms == []
            else:
                assert segment.config_source == 5
                assert [(s.name, s.value, s.source) for s in segment.synonyms] == [
                    ("log.segment.bytes", "1073741824", 5)]
            if version >= 3:
                assert segment.config_type == 3 and segment.documentation
            assert len(broker.configs) > 80
            assert all(entry.read_only == (entry.name not in DYNAMIC_BROKER_CONFIGS) for entry in broker.configs)


def test_init_producer_id(kfk_broker: str) -> None:
    with connect(kfk_broker) as sock:
        seen = []
        for version in range(6):
            response = request(sock, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000),
                               version)
            assert (response.error_code, response.producer_epoch) == (ErrorCode.NONE, 0)
            seen.append(response.producer_id)
        assert seen == sorted(set(seen)) and seen[0] >= 0
        transactional = request(sock, InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), 4)
        assert (transactional.error_code, transactional.producer_id, transactional.producer_epoch) == (
            ErrorCode.NOT_COORDINATOR, -1, -1)
        assert request(sock, InitProducerIdRequest(transactional_id="", transaction_timeout_ms=60000), 4
                       ).error_code == ErrorCode.INVALID_REQUEST
        assert request(sock, InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=10**9), 4
                       ).error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
        assert request(sock, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1, producer_id=5,
                                                   producer_epoch=-1), 3).error_code == ErrorCode.INVALID_REQUEST
