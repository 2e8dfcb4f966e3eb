"""The versions Kafka 4.4 added to the APIs kfk serves, on the wire with kfk's own codec: topics named by id (Produce
v13, OffsetCommit/OffsetFetch v10, TxnOffsetCommit v6) with UNKNOWN_TOPIC_ID for an id the broker does not know,
Fetch v18, ListOffsets v11, ApiVersions v5's cluster and node check, ListTransactions v2's id pattern and
ListConfigResources v1's resource types. One broker serves the module (each test uses names of its own)."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Iterator

import pytest

from kfk.common.config_types import ConfigResourceType
from kfk.errors import ErrorCode
from kfk.protocol.apis import SCHEMA_VERSIONS
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.api_versions import ApiVersionsRequest
from kfk.protocol.messages.create_topics import CreateTopicsRequest
from kfk.protocol.messages.fetch import FetchRequest
from kfk.protocol.messages.find_coordinator import FindCoordinatorRequest
from kfk.protocol.messages.init_producer_id import InitProducerIdRequest
from kfk.protocol.messages.list_config_resources import ListConfigResourcesRequest
from kfk.protocol.messages.list_offsets import ListOffsetsRequest
from kfk.protocol.messages.list_transactions import ListTransactionsRequest
from kfk.protocol.messages.metadata import MetadataRequest
from kfk.protocol.messages.offset_commit import OffsetCommitRequest
from kfk.protocol.messages.offset_fetch import OffsetFetchRequest
from kfk.protocol.messages.produce import ProduceRequest
from kfk.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kfk.records import MemoryRecordsBuilder
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.integration.wire import api_versions_request, connect, request

pytestmark = pytest.mark.integration

CommitTopic = OffsetCommitRequest.OffsetCommitRequestTopic
CommitPartition = OffsetCommitRequest.OffsetCommitRequestPartition
FetchGroup = OffsetFetchRequest.OffsetFetchRequestGroup
FetchTopics = OffsetFetchRequest.OffsetFetchRequestTopics


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("kfk-44-versions"), dict(TEST_OVERRIDES))
    yield process
    process.stop()


@pytest.fixture
def sock(broker: BrokerProcess) -> Iterator[socket.socket]:
    with connect(broker.bootstrap_servers) as connection:
        yield connection


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def create_topic(sock: socket.socket, name: str, partitions: int = 1) -> uuid.UUID:
    """The new topic's id."""
    topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
    (result,) = request(sock, CreateTopicsRequest(topics=[topic], timeout_ms=10_000), 7).topics
    assert result.error_code == ErrorCode.NONE
    return result.topic_id


def records(count: int) -> bytes:
    builder = MemoryRecordsBuilder()
    for index in range(count):
        builder.append(1_700_000_000_000 + index, None, f"v{index}".encode())
    return bytes(builder.close())


def wait_for_coordinator(sock: socket.socket, key: str, key_type: int) -> None:
    """Poll FindCoordinator until the group (0) or transaction (1) coordinator of `key` is up (its internal topic is
    created on first use)."""
    deadline = time.monotonic() + 60
    while True:
        (coordinator,) = request(sock, FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key]),
                                 4).coordinators
        if coordinator.error_code == ErrorCode.NONE:
            return
        assert time.monotonic() < deadline, f"no coordinator for {key}: {ErrorCode(coordinator.error_code).name}"
        time.sleep(0.2)


def test_the_highest_versions_are_kafka_4_4_s(sock: socket.socket) -> None:
    advertised = {key.api_key: key.max_version for key in request(sock, api_versions_request(), 5).api_keys}
    for api_key, highest in [(ApiKey.PRODUCE, 13), (ApiKey.FETCH, 18), (ApiKey.LIST_OFFSETS, 11),
                             (ApiKey.OFFSET_COMMIT, 10), (ApiKey.OFFSET_FETCH, 10), (ApiKey.TXN_OFFSET_COMMIT, 6),
                             (ApiKey.API_VERSIONS, 5), (ApiKey.LIST_TRANSACTIONS, 2)]:
        assert advertised[api_key] == highest == SCHEMA_VERSIONS[api_key].highest


def test_api_versions_v5_refuses_a_client_meant_for_another_cluster_or_node(sock: socket.socket) -> None:
    metadata = request(sock, MetadataRequest(topics=[]), 12)
    own_cluster, own_node = metadata.cluster_id, metadata.brokers[0].node_id
    software = dict(client_software_name="kfk-tests", client_software_version="1.0")
    right = request(sock, ApiVersionsRequest(cluster_id=own_cluster, node_id=own_node, **software), 5)
    assert right.error_code == ErrorCode.NONE and right.api_keys
    for cluster_id, node_id, error in [("AAAAAAAAAAAAAAAAAAAAAA", own_node, ErrorCode.REBOOTSTRAP_REQUIRED),
                                       (own_cluster, own_node + 100, ErrorCode.REBOOTSTRAP_REQUIRED),
                                       (own_cluster, -1, ErrorCode.INVALID_REQUEST),
                                       (None, own_node, ErrorCode.INVALID_REQUEST)]:
        wrong = request(sock, ApiVersionsRequest(cluster_id=cluster_id, node_id=node_id, **software), 5)
        assert (wrong.error_code, wrong.api_keys) == (error, [])


def test_produce_v13_and_fetch_v18_name_topics_by_id(sock: socket.socket) -> None:
    name = unique("by-id")
    topic_id = create_topic(sock, name)
    unknown_id = uuid.uuid4()
    response = request(sock, ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(topic_id=the_id, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=records(3))]) for the_id in (topic_id, unknown_id)]),
        13)
    answers = {topic.topic_id: topic.partition_responses[0] for topic in response.responses}
    assert (answers[topic_id].error_code, answers[topic_id].base_offset) == (ErrorCode.NONE, 0)
    assert answers[unknown_id].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    fetched = request(sock, FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, session_epoch=-1, topics=[
        FetchRequest.FetchTopic(topic_id=topic_id, partitions=[FetchRequest.FetchPartition(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])]), 18)
    (partition,) = fetched.responses[0].partitions
    assert (fetched.responses[0].topic_id, partition.error_code, partition.high_watermark) == (topic_id, 0, 3)
    offsets = request(sock, ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
        name=name, partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-6)])]), 11)
    pending = offsets.topics[0].partitions[0]
    assert (pending.error_code, pending.offset) == (ErrorCode.NONE, -1)  # nothing waits for a tiered upload


def test_offset_commit_and_fetch_v10_name_topics_by_id(sock: socket.socket) -> None:
    name, group = unique("commit-by-id"), unique("group-by-id")
    topic_id = create_topic(sock, name, partitions=2)
    unknown_id = uuid.uuid4()
    wait_for_coordinator(sock, group, 0)
    committed = request(sock, OffsetCommitRequest(group_id=group, topics=[
        CommitTopic(topic_id=the_id, partitions=[CommitPartition(partition_index=1, committed_offset=7,
                                                                 committed_metadata="m")])
        for the_id in (topic_id, unknown_id)]), 10)
    assert {topic.topic_id: topic.partitions[0].error_code for topic in committed.topics} == {
        topic_id: ErrorCode.NONE, unknown_id: ErrorCode.UNKNOWN_TOPIC_ID}
    (answer,) = request(sock, OffsetFetchRequest(groups=[FetchGroup(group_id=group, topics=[
        FetchTopics(topic_id=the_id, partition_indexes=[1]) for the_id in (topic_id, unknown_id)])]), 10).groups
    found = {topic.topic_id: (topic.partitions[0].committed_offset, topic.partitions[0].error_code)
             for topic in answer.topics}
    assert found == {topic_id: (7, ErrorCode.NONE), unknown_id: (-1, ErrorCode.UNKNOWN_TOPIC_ID)}
    (every,) = request(sock, OffsetFetchRequest(groups=[FetchGroup(group_id=group, topics=None)]), 10).groups
    assert [(topic.topic_id, [p.committed_offset for p in topic.partitions]) for topic in every.topics] == [
        (topic_id, [7])]
    # A v9 client still names the topic.
    (by_name,) = request(sock, OffsetFetchRequest(groups=[FetchGroup(group_id=group, topics=[
        FetchTopics(name=name, partition_indexes=[1])])]), 9).groups
    assert (by_name.topics[0].name, by_name.topics[0].partitions[0].committed_offset) == (name, 7)


def test_txn_offset_commit_v6_answers_an_unknown_topic_id(sock: socket.socket) -> None:
    unknown_id = uuid.uuid4()
    response = request(sock, TxnOffsetCommitRequest(
        transactional_id=unique("txn"), group_id=unique("txn-group"), producer_id=1, producer_epoch=0,
        topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(topic_id=unknown_id, partitions=[
            TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=1)])]), 6)
    (topic,) = response.topics
    assert (topic.topic_id, topic.partitions[0].error_code) == (unknown_id, ErrorCode.UNKNOWN_TOPIC_ID)


def test_list_transactions_v2_filters_by_a_pattern_of_the_whole_id(sock: socket.socket) -> None:
    transactional_id = unique("pattern-txn")
    wait_for_coordinator(sock, transactional_id, 1)
    initialised = request(sock, InitProducerIdRequest(transactional_id=transactional_id,
                                                      transaction_timeout_ms=60_000), 5)
    assert initialised.error_code == ErrorCode.NONE

    def listed(pattern: str | None) -> tuple[int, list[str]]:
        deadline = time.monotonic() + 60
        while True:  # the other partitions of __transaction_state may still be loading
            response = request(sock, ListTransactionsRequest(transactional_id_pattern=pattern), 2)
            if response.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS or time.monotonic() > deadline:
                return response.error_code, [state.transactional_id for state in response.transaction_states]
            time.sleep(0.2)

    suffix = transactional_id.rsplit("-", 1)[1]
    assert listed(f"pattern-txn-{suffix}") == (ErrorCode.NONE, [transactional_id])
    assert listed(f".*{suffix}") == (ErrorCode.NONE, [transactional_id])
    assert listed(suffix) == (ErrorCode.NONE, [])  # the whole id must match
    assert transactional_id in listed(None)[1] and transactional_id in listed("")[1]
    assert listed("pattern-txn-[(") == (ErrorCode.INVALID_REGULAR_EXPRESSION, [])


def test_list_config_resources_v1_lists_the_types_asked_for(sock: socket.socket) -> None:
    name = unique("listed")
    create_topic(sock, name)

    def listed(types: list[int], version: int = 1) -> tuple[int, set[tuple[str, int]]]:
        response = request(sock, ListConfigResourcesRequest(resource_types=types), version)
        return response.error_code, {(resource.resource_name, resource.resource_type)
                                     for resource in response.config_resources}

    error, topics = listed([ConfigResourceType.TOPIC])
    assert error == ErrorCode.NONE and (name, ConfigResourceType.TOPIC) in topics
    assert {kind for _, kind in topics} == {ConfigResourceType.TOPIC}
    node_id = str(request(sock, MetadataRequest(topics=[]), 12).brokers[0].node_id)
    assert listed([ConfigResourceType.BROKER]) == (ErrorCode.NONE, {(node_id, ConfigResourceType.BROKER)})
    error, every = listed([])
    assert error == ErrorCode.NONE and {(node_id, ConfigResourceType.BROKER_LOGGER),
                                        (name, ConfigResourceType.TOPIC)} <= every
    assert listed([99]) == (ErrorCode.UNSUPPORTED_VERSION, set())
    assert listed([], 0) == (ErrorCode.NONE, set())  # v0: the client metrics resources only, of which there are none
