"""Every API's authorization check over a raw socket with kfk's codec, the answers Kafka gives when a principal is
refused. The client is User:ANONYMOUS (PLAINTEXT); the broker has allow.everyone.if.no.acl.found=true, so the
resources without ACLs are open to it and those whose ACLs name only User:other (a topic, a group, a transactional
id, and last the cluster) are closed: the same request is answered for the open resource and refused for the
closed one."""

from __future__ import annotations

import time
import uuid

import pytest

from kfk.errors import ErrorCode
from kfk.protocol.messages.create_acls import CreateAclsRequest
from kfk.protocol.messages.create_partitions import CreatePartitionsRequest
from kfk.protocol.messages.create_topics import CreateTopicsRequest
from kfk.protocol.messages.delete_groups import DeleteGroupsRequest
from kfk.protocol.messages.delete_records import DeleteRecordsRequest
from kfk.protocol.messages.describe_acls import DescribeAclsRequest
from kfk.protocol.messages.describe_groups import DescribeGroupsRequest
from kfk.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from kfk.protocol.messages.describe_producers import DescribeProducersRequest
from kfk.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kfk.protocol.messages.elect_leaders import ElectLeadersRequest
from kfk.protocol.messages.fetch import FetchRequest
from kfk.protocol.messages.find_coordinator import FindCoordinatorRequest
from kfk.protocol.messages.init_producer_id import InitProducerIdRequest
from kfk.protocol.messages.list_groups import ListGroupsRequest
from kfk.protocol.messages.list_offsets import ListOffsetsRequest
from kfk.protocol.messages.metadata import MetadataRequest
from kfk.protocol.messages.offset_commit import OffsetCommitRequest
from kfk.protocol.messages.offset_fetch import OffsetFetchRequest
from kfk.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from kfk.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from kfk.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.integration.wire import connect, request

pytestmark = pytest.mark.integration

E = ErrorCode
SUFFIX = uuid.uuid4().hex[:6]
OPEN, CLOSED = f"open-{SUFFIX}", f"closed-{SUFFIX}"
OPEN_GROUP, CLOSED_GROUP, CLOSED_TX = f"open-g-{SUFFIX}", f"closed-g-{SUFFIX}", f"closed-tx-{SUFFIX}"


def close(sock, resource_type: ResourceType, name: str) -> None:
    """An ACL for User:other only: the resource is no longer open to everyone."""
    response = request(sock, CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
        resource_type=resource_type, resource_name=name, resource_pattern_type=PatternType.LITERAL,
        principal="User:other", host="*", operation=AclOperation.ALL, permission_type=AclPermissionType.ALLOW)]), 3)
    assert [result.error_code for result in response.results] == [E.NONE]


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    process = start_broker(tmp_path_factory.mktemp("acl-wire"), {
        **TEST_OVERRIDES, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true"})
    try:
        _set_up(process)
        yield process
    finally:
        process.stop()


def _set_up(process: BrokerProcess) -> None:
    with connect(process.bootstrap_servers) as sock:
        created = request(sock, CreateTopicsRequest(topics=[
            CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=1)
            for name in (OPEN, CLOSED)]), 7)
        assert [topic.error_code for topic in created.topics] == [E.NONE, E.NONE]
        for group in (OPEN_GROUP, CLOSED_GROUP):  # both groups exist (committed offsets) before one is closed
            deadline = time.monotonic() + 30
            while True:  # the first lookup creates __consumer_offsets, whose partitions then load
                request(sock, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)
                commit = request(sock, OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, topics=[
                    OffsetCommitRequest.OffsetCommitRequestTopic(name=OPEN, partitions=[
                        OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=0)])]),
                    8)
                error = commit.topics[0].partitions[0].error_code
                if error == E.NONE or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert error == E.NONE
        close(sock, ResourceType.TOPIC, CLOSED)
        close(sock, ResourceType.GROUP, CLOSED_GROUP)
        close(sock, ResourceType.TRANSACTIONAL_ID, CLOSED_TX)


def errors_by_topic(topics, partitions_of=lambda t: t.partitions, name_of=lambda t: t.name,
                    error_of=lambda p: p.error_code) -> dict[str, list[int]]:
    return {name_of(topic): [error_of(p) for p in partitions_of(topic)] for topic in topics}


def test_metadata_lists_only_what_may_be_described(broker: BrokerProcess) -> None:
    with connect(broker.bootstrap_servers) as sock:
        every = request(sock, MetadataRequest(topics=None), 12)
        names = {topic.name for topic in every.topics}
        assert OPEN in names and CLOSED not in names
        named = request(sock, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=CLOSED),
                                                      MetadataRequest.MetadataRequestTopic(name=OPEN)],
                                              include_topic_authorized_operations=True), 12)
        assert [(t.name, t.error_code) for t in named.topics] == [(CLOSED, E.TOPIC_AUTHORIZATION_FAILED),
                                                                  (OPEN, E.NONE)]
        assert named.topics[1].topic_authorized_operations == sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11))


def test_data_apis_refuse_the_closed_topic(broker: BrokerProcess) -> None:
    with connect(broker.bootstrap_servers) as sock:
        fetch = request(sock, FetchRequest(replica_id=-1, max_wait_ms=0, topics=[
            FetchRequest.FetchTopic(topic=name, partitions=[FetchRequest.FetchPartition(
                partition=0, fetch_offset=0, partition_max_bytes=1024)]) for name in (OPEN, CLOSED)]), 12)
        assert errors_by_topic(fetch.responses, name_of=lambda t: t.topic) == {
            OPEN: [E.NONE], CLOSED: [E.TOPIC_AUTHORIZATION_FAILED]}
        offsets = request(sock, ListOffsetsRequest(replica_id=-1, topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=name, partitions=[ListOffsetsRequest.ListOffsetsPartition(
                partition_index=0, timestamp=-1)]) for name in (OPEN, CLOSED)]), 7)
        assert errors_by_topic(offsets.topics) == {OPEN: [E.NONE], CLOSED: [E.TOPIC_AUTHORIZATION_FAILED]}
        deleted = request(sock, DeleteRecordsRequest(timeout_ms=5000, topics=[
            DeleteRecordsRequest.DeleteRecordsTopic(name=name, partitions=[
                DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=0)])
            for name in (OPEN, CLOSED)]), 2)
        assert errors_by_topic(deleted.topics) == {OPEN: [E.NONE], CLOSED: [E.TOPIC_AUTHORIZATION_FAILED]}
        producers = request(sock, DescribeProducersRequest(topics=[
            DescribeProducersRequest.TopicRequest(name=CLOSED, partition_indexes=[0])]), 0)
        assert errors_by_topic(producers.topics) == {CLOSED: [E.TOPIC_AUTHORIZATION_FAILED]}
        grown = request(sock, CreatePartitionsRequest(timeout_ms=5000, topics=[
            CreatePartitionsRequest.CreatePartitionsTopic(name=CLOSED, count=2)]), 3)
        assert [(r.name, r.error_code) for r in grown.results] == [(CLOSED, E.TOPIC_AUTHORIZATION_FAILED)]


def test_group_apis_refuse_the_closed_group(broker: BrokerProcess) -> None:
    with connect(broker.bootstrap_servers) as sock:
        def commit(group: str, topic: str) -> int:
            response = request(sock, OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, topics=[
                OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[
                    OffsetCommitRequest.OffsetCommitRequestPartition(partition_index=0, committed_offset=0)])]), 8)
            return response.topics[0].partitions[0].error_code

        assert commit(CLOSED_GROUP, OPEN) == E.GROUP_AUTHORIZATION_FAILED
        assert commit(OPEN_GROUP, CLOSED) == E.TOPIC_AUTHORIZATION_FAILED
        assert commit(OPEN_GROUP, OPEN) == E.NONE
        fetched = request(sock, OffsetFetchRequest(groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id=group, topics=None)
            for group in (OPEN_GROUP, CLOSED_GROUP)]), 8)
        assert [(g.group_id, g.error_code) for g in fetched.groups] == [(OPEN_GROUP, E.NONE),
                                                                        (CLOSED_GROUP, E.GROUP_AUTHORIZATION_FAILED)]
        described = request(sock, DescribeGroupsRequest(groups=[OPEN_GROUP, CLOSED_GROUP]), 5)
        assert [(g.group_id, g.error_code) for g in described.groups] == [
            (OPEN_GROUP, E.NONE), (CLOSED_GROUP, E.GROUP_AUTHORIZATION_FAILED)]
        listed = {group.group_id for group in request(sock, ListGroupsRequest(), 4).groups}
        assert {OPEN_GROUP, CLOSED_GROUP} <= listed  # DESCRIBE on the cluster (still open) lists every group
        coordinator = request(sock, FindCoordinatorRequest(key_type=0, coordinator_keys=[CLOSED_GROUP]), 4)
        assert coordinator.coordinators[0].error_code == E.GROUP_AUTHORIZATION_FAILED
        deleted = request(sock, DeleteGroupsRequest(groups_names=[CLOSED_GROUP]), 2)
        assert [(r.group_id, r.error_code) for r in deleted.results] == [(CLOSED_GROUP, E.GROUP_AUTHORIZATION_FAILED)]


def test_transaction_apis_refuse_the_closed_transactional_id(broker: BrokerProcess) -> None:
    with connect(broker.bootstrap_servers) as sock:
        coordinator = request(sock, FindCoordinatorRequest(key_type=1, coordinator_keys=[CLOSED_TX]), 4)
        assert coordinator.coordinators[0].error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        init = request(sock, InitProducerIdRequest(transactional_id=CLOSED_TX, transaction_timeout_ms=60000,
                                                   producer_id=-1, producer_epoch=-1), 4)
        assert init.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        described = request(sock, DescribeTransactionsRequest(transactional_ids=[CLOSED_TX]), 0)
        assert [s.error_code for s in described.transaction_states] == [E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED]


def test_cluster_apis_once_the_cluster_is_closed(broker: BrokerProcess) -> None:
    """Runs last in the module: after it, User:ANONYMOUS may no longer create ACLs."""
    with connect(broker.bootstrap_servers) as sock:
        assert request(sock, DescribeLogDirsRequest(topics=None), 4).error_code == E.NONE
        close(sock, ResourceType.CLUSTER, "kafka-cluster")
        assert request(sock, DescribeLogDirsRequest(topics=None), 4).error_code == E.CLUSTER_AUTHORIZATION_FAILED
        assert request(sock, ElectLeadersRequest(election_type=0, topic_partitions=None, timeout_ms=5000),
                       2).error_code == E.CLUSTER_AUTHORIZATION_FAILED
        assert request(sock, DescribeAclsRequest(resource_type_filter=1, pattern_type_filter=1, operation=1,
                                                 permission_type=1, resource_name_filter=None,
                                                 principal_filter=None, host_filter=None),
                       3).error_code == E.CLUSTER_AUTHORIZATION_FAILED
        created = request(sock, CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
            resource_type=ResourceType.TOPIC, resource_name=OPEN, resource_pattern_type=PatternType.LITERAL,
            principal="User:ANONYMOUS", host="*", operation=AclOperation.ALL,
            permission_type=AclPermissionType.ALLOW)]), 3)
        assert [r.error_code for r in created.results] == [E.CLUSTER_AUTHORIZATION_FAILED]
        markers = request(sock, WriteTxnMarkersRequest(markers=[WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=1, producer_epoch=0, transaction_result=True, coordinator_epoch=0, topics=[
                WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=OPEN, partition_indexes=[0])])]), 1)
        assert markers.markers[0].topics[0].partitions[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED
        follower = request(sock, FetchRequest(replica_id=2, max_wait_ms=0, topics=[FetchRequest.FetchTopic(
            topic=OPEN, partitions=[FetchRequest.FetchPartition(partition=0, fetch_offset=0,
                                                                partition_max_bytes=1024)])]), 12)
        assert follower.responses[0].partitions[0].error_code == E.TOPIC_AUTHORIZATION_FAILED
        create = request(sock, CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=1, replication_factor=1) for name in (CLOSED, f"new-{SUFFIX}")]), 7)
        # No CREATE on the cluster any more: only on topics without ACLs (refused before "already exists").
        assert [(t.name, t.error_code) for t in create.topics] == [(CLOSED, E.TOPIC_AUTHORIZATION_FAILED),
                                                                   (f"new-{SUFFIX}", E.NONE)]
        # Without DESCRIBE on the cluster, ListGroups lists the groups the principal may describe.
        listed = {group.group_id for group in request(sock, ListGroupsRequest(), 4).groups}
        assert OPEN_GROUP in listed and CLOSED_GROUP not in listed
        # Without CLUSTER_ACTION, OffsetForLeaderEpoch needs DESCRIBE on each topic (KIP-320's consumers).
        epochs = request(sock, OffsetForLeaderEpochRequest(replica_id=-1, topics=[
            OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=name, partitions=[
                OffsetForLeaderEpochRequest.OffsetForLeaderPartition(partition=0, leader_epoch=0)])
            for name in (OPEN, CLOSED)]), 4)
        assert errors_by_topic(epochs.topics, name_of=lambda t: t.topic) == {
            OPEN: [E.NONE], CLOSED: [E.TOPIC_AUTHORIZATION_FAILED]}
        metadata = request(sock, MetadataRequest(topics=[], include_cluster_authorized_operations=True), 10)
        assert metadata.cluster_authorized_operations == 0
