"""The admin APIs at every version we serve, over a raw socket: what each version carries back."""

from __future__ import annotations

import uuid

import pytest

from kfk.errors import ErrorCode
from kfk.protocol.messages.alter_configs import AlterConfigsRequest
from kfk.protocol.messages.create_partitions import CreatePartitionsRequest
from kfk.protocol.messages.create_topics import CreateTopicsRequest
from kfk.protocol.messages.delete_topics import DeleteTopicsRequest
from kfk.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kfk.protocol.messages.metadata import MetadataRequest
from tests.integration.wire import connect, request

pytestmark = pytest.mark.integration

CreatableTopic = CreateTopicsRequest.CreatableTopic
CreatableTopicConfig = CreateTopicsRequest.CreatableTopicConfig


def topic_names(sock) -> list[str]:
    return sorted(t.name for t in request(sock, MetadataRequest(topics=None), 12).topics)


def test_create_topics_at_every_version(kfk_broker: str) -> None:
    with connect(kfk_broker) as sock:
        for version in range(8):
            name = f"v{version}"
            topic = CreatableTopic(name=name, num_partitions=2, replication_factor=1,
                                   configs=[CreatableTopicConfig(name="retention.ms", value="1000")])
            (result,) = request(sock, CreateTopicsRequest(topics=[topic], timeout_ms=5000), version).topics
            assert (result.name, result.error_code) == (name, ErrorCode.NONE)
            if version >= 5:
                configs = {c.name: c for c in result.configs}
                assert (result.num_partitions, result.replication_factor) == (2, 1)
                assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == ("1000", 1)
                assert configs["segment.bytes"].config_source == 5
            else:
                assert (result.num_partitions, result.configs) == (-1, [])
            assert (result.topic_id != uuid.UUID(int=0)) == (version >= 7)
            (again,) = request(sock, CreateTopicsRequest(topics=[topic]), version).topics
            assert again.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
            assert again.error_message == ("" if version == 0 else f"Topic '{name}' already exists.")
        assert topic_names(sock) == [f"v{v}" for v in range(8)]
        for version in range(1, 8):
            topic = CreatableTopic(name=f"dry{version}", num_partitions=1, replication_factor=1)
            (result,) = request(sock, CreateTopicsRequest(topics=[topic], validate_only=True), version).topics
            assert result.error_code == ErrorCode.NONE
        assert not any(name.startswith("dry") for name in topic_names(sock))


def test_delete_topics_at_every_version(kfk_broker: str) -> None:
    with connect(kfk_broker) as sock:
        topics = [CreatableTopic(name=f"d{v}", num_partitions=1, replication_factor=1) for v in range(8)]
        ids = {r.name: r.topic_id for r in request(sock, CreateTopicsRequest(topics=topics), 7).topics}
        for version in range(6):
            (result,) = request(sock, DeleteTopicsRequest(topic_names=[f"d{version}"]), version).responses
            assert (result.name, result.error_code) == (f"d{version}", ErrorCode.NONE)
            (missing,) = request(sock, DeleteTopicsRequest(topic_names=[f"d{version}"]), version).responses
            assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        State = DeleteTopicsRequest.DeleteTopicState
        by_id, by_name = request(sock, DeleteTopicsRequest(topics=[State(name=None, topic_id=ids["d6"]),
                                                                   State(name="d7")]), 6).responses
        assert (by_id.name, by_id.topic_id, by_id.error_code) == ("d6", ids["d6"], ErrorCode.NONE)
        assert (by_name.name, by_name.error_code) == ("d7", ErrorCode.NONE)
        assert topic_names(sock) == []


def test_create_partitions_and_alter_configs_at_every_version(kfk_broker: str) -> None:
    with connect(kfk_broker) as sock:
        request(sock, CreateTopicsRequest(topics=[CreatableTopic(name="p", num_partitions=1,
                                                                 replication_factor=1)]), 7)
        for version in range(4):
            topic = CreatePartitionsRequest.CreatePartitionsTopic(name="p", count=version + 2, assignments=None)
            (result,) = request(sock, CreatePartitionsRequest(topics=[topic], timeout_ms=5000), version).results
            assert (result.name, result.error_code) == ("p", ErrorCode.NONE)
        metadata = request(sock, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="p")]), 12)
        assert len(metadata.topics[0].partitions) == 5

        Legacy = AlterConfigsRequest
        for version in range(3):
            resource = Legacy.AlterConfigsResource(resource_type=2, resource_name="p", configs=[
                Legacy.AlterableConfig(name="retention.ms", value=str(version + 1))])
            (result,) = request(sock, Legacy(resources=[resource]), version).responses
            assert (result.error_code, result.resource_name) == (ErrorCode.NONE, "p")
        Incremental = IncrementalAlterConfigsRequest
        for version in range(2):
            resource = Incremental.AlterConfigsResource(resource_type=2, resource_name="p", configs=[
                Incremental.AlterableConfig(name="retention.ms", config_operation=0, value="x")])
            (result,) = request(sock, Incremental(resources=[resource]), version).responses
            assert result.error_code == ErrorCode.INVALID_CONFIG
            assert result.error_message == "Invalid value x for configuration retention.ms: Not a number of type LONG"
