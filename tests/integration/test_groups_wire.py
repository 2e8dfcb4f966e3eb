"""The group APIs on the wire with kfk's own codec: the error codes Kafka gives for bad input, each version's shape,
the commit metadata string round trip, and a broker that keeps serving after malformed group requests."""

from __future__ import annotations

import struct

import pytest

from kfk.errors import ErrorCode
from kfk.protocol.messages.create_topics import CreateTopicsRequest
from kfk.protocol.messages.delete_groups import DeleteGroupsRequest
from kfk.protocol.messages.describe_groups import DescribeGroupsRequest
from kfk.protocol.messages.find_coordinator import FindCoordinatorRequest
from kfk.protocol.messages.heartbeat import HeartbeatRequest
from kfk.protocol.messages.join_group import JoinGroupRequest
from kfk.protocol.messages.leave_group import LeaveGroupRequest
from kfk.protocol.messages.list_groups import ListGroupsRequest
from kfk.protocol.messages.offset_commit import OffsetCommitRequest
from kfk.protocol.messages.offset_delete import OffsetDeleteRequest
from kfk.protocol.messages.offset_fetch import OffsetFetchRequest
from kfk.protocol.messages.sync_group import SyncGroupRequest

from tests.integration.wire import api_versions_request, connect, is_closed, request

pytestmark = pytest.mark.integration

Protocol = JoinGroupRequest.JoinGroupRequestProtocol
CommitTopic = OffsetCommitRequest.OffsetCommitRequestTopic
CommitPartition = OffsetCommitRequest.OffsetCommitRequestPartition


def create_topic(sock, name: str, partitions: int = 2) -> None:
    topic = CreateTopicsRequest.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
    (result,) = request(sock, CreateTopicsRequest(topics=[topic], timeout_ms=5000), 7).topics
    assert result.error_code == ErrorCode.NONE


def commit_request(group: str, topic: str, partition: int, offset: int, metadata: str = "", **fields):
    return OffsetCommitRequest(group_id=group, topics=[CommitTopic(name=topic, partitions=[
        CommitPartition(partition_index=partition, committed_offset=offset, committed_metadata=metadata)])],
        **fields)


def find_coordinator(sock, group: str) -> None:
    (coordinator,) = request(sock, FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4).coordinators
    assert coordinator.error_code == ErrorCode.NONE


def join(sock, group: str, version: int = 5, **fields):
    values = dict(group_id=group, session_timeout_ms=10_000, rebalance_timeout_ms=10_000, member_id="",
                  protocol_type="consumer", protocols=[Protocol(name="range", metadata=b"\x00\x00")])
    values.update(fields)
    return request(sock, JoinGroupRequest(**values), version)


def test_commit_before_the_offsets_topic_exists_is_not_coordinator(kfk_broker: str) -> None:
    with connect(kfk_broker) as sock:
        create_topic(sock, "known")
        response = request(sock, OffsetCommitRequest(group_id="g", topics=[
            CommitTopic(name="known", partitions=[CommitPartition(partition_index=0, committed_offset=1)]),
            CommitTopic(name="unknown", partitions=[CommitPartition(partition_index=0, committed_offset=1)]),
        ]), 8)
        errors = {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
        assert errors == {("known", 0): ErrorCode.NOT_COORDINATOR, ("unknown", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        fetched = request(sock, OffsetFetchRequest(group_id="g", topics=None), 7)
        assert fetched.error_code == ErrorCode.NOT_COORDINATOR
        assert request(sock, api_versions_request(), 3).error_code == ErrorCode.NONE


def test_find_coordinator_versions_and_key_types(kfk_broker: str, kfk_broker_process) -> None:
    port = int(kfk_broker.rsplit(":", 1)[1])
    with connect(kfk_broker) as sock:
        v0 = request(sock, FindCoordinatorRequest(key="g"), 0)
        assert v0.error_code in (ErrorCode.NONE, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        v0 = request(sock, FindCoordinatorRequest(key="g"), 0)
        assert (v0.error_code, v0.node_id, v0.host, v0.port) == (ErrorCode.NONE, 1, "127.0.0.1", port)
        batched = request(sock, FindCoordinatorRequest(key_type=0, coordinator_keys=["a", "b", ""]), 4)
        assert [(c.key, c.error_code, c.node_id) for c in batched.coordinators] == [
            ("a", ErrorCode.NONE, 1), ("b", ErrorCode.NONE, 1), ("", ErrorCode.NONE, 1)]
        # Transactional ids have a coordinator now (the first lookup creates __transaction_state, as for groups).
        transaction = request(sock, FindCoordinatorRequest(key_type=1, coordinator_keys=["tx"]), 6)
        assert transaction.coordinators[0].error_code in (ErrorCode.NONE, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        transaction = request(sock, FindCoordinatorRequest(key_type=1, coordinator_keys=["tx"]), 6)
        (found,) = transaction.coordinators
        assert (found.key, found.error_code, found.node_id, found.port) == ("tx", ErrorCode.NONE, 1, port)
        share = request(sock, FindCoordinatorRequest(key_type=2, coordinator_keys=["s"]), 6)
        assert share.coordinators[0].error_code == ErrorCode.INVALID_REQUEST
        bogus = request(sock, FindCoordinatorRequest(key="g", key_type=7), 3)
        assert bogus.error_code == ErrorCode.INVALID_REQUEST


def test_join_group_errors(kfk_broker: str) -> None:
    with connect(kfk_broker) as sock:
        find_coordinator(sock, "bad")
        assert join(sock, "bad", protocols=[]).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert join(sock, "bad", protocol_type="").error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        assert join(sock, "bad", session_timeout_ms=10**9).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
        assert join(sock, "bad", session_timeout_ms=-5).error_code == ErrorCode.INVALID_SESSION_TIMEOUT
        assert join(sock, "", version=5).error_code == ErrorCode.INVALID_GROUP_ID
        assert join(sock, "bad", member_id="invented").error_code == ErrorCode.UNKNOWN_MEMBER_ID
        first = join(sock, "bad", version=5)
        assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id
        # A known static instance with another member id is fenced.
        find_coordinator(sock, "static")
        static = join(sock, "static", group_instance_id="i-1")
        assert static.error_code == ErrorCode.NONE
        fenced = join(sock, "static", member_id="someone-else", group_instance_id="i-1")
        assert fenced.error_code == ErrorCode.FENCED_INSTANCE_ID
        assert request(sock, api_versions_request(), 3).error_code == ErrorCode.NONE


def test_classic_round_trip_at_old_versions(kfk_broker: str) -> None:
    """JoinGroup v0 (old librdkafka's fallback): no MEMBER_ID_REQUIRED step, protocol name never null."""
    with connect(kfk_broker) as sock:
        find_coordinator(sock, "old")
        joined = join(sock, "old", version=0, rebalance_timeout_ms=-1)
        assert joined.error_code == ErrorCode.NONE and joined.generation_id == 1
        assert joined.protocol_name == "range" and joined.leader == joined.member_id
        member = joined.member_id
        synced = request(sock, SyncGroupRequest(group_id="old", generation_id=1, member_id=member, assignments=[
            SyncGroupRequest.SyncGroupRequestAssignment(member_id=member, assignment=b"mine")]), 0)
        assert synced.error_code == ErrorCode.NONE and synced.assignment == b"mine"
        heartbeat = request(sock, HeartbeatRequest(group_id="old", generation_id=1, member_id=member), 0)
        assert heartbeat.error_code == ErrorCode.NONE
        bad = request(sock, HeartbeatRequest(group_id="old", generation_id=9, member_id=member), 0)
        assert bad.error_code == ErrorCode.ILLEGAL_GENERATION
        commit = request(sock, commit_request("old", "__consumer_offsets", 0, 5, "my metadata",
                                              generation_id_or_member_epoch=1, member_id=member), 1)
        assert commit.topics[0].partitions[0].error_code == ErrorCode.NONE
        fetched = request(sock, OffsetFetchRequest(group_id="old", topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name="__consumer_offsets", partition_indexes=[0, 1])]), 1)
        partitions = {p.partition_index: (p.committed_offset, p.metadata) for p in fetched.topics[0].partitions}
        assert partitions == {0: (5, "my metadata"), 1: (-1, "")}
        left = request(sock, LeaveGroupRequest(group_id="old", member_id=member), 0)
        assert left.error_code == ErrorCode.NONE
        again = request(sock, LeaveGroupRequest(group_id="old", member_id=member), 0)
        assert again.error_code == ErrorCode.UNKNOWN_MEMBER_ID


def test_membership_errors_and_admin_answers(kfk_broker: str) -> None:
    with connect(kfk_broker) as sock:
        find_coordinator(sock, "g")
        assert request(sock, HeartbeatRequest(group_id="g", generation_id=1, member_id="x"), 4).error_code == \
            ErrorCode.UNKNOWN_MEMBER_ID
        assert request(sock, HeartbeatRequest(group_id="", generation_id=1, member_id="x"), 4).error_code == \
            ErrorCode.INVALID_GROUP_ID
        assert request(sock, SyncGroupRequest(group_id="g", generation_id=1, member_id="x"), 5).error_code == \
            ErrorCode.UNKNOWN_MEMBER_ID
        leave = request(sock, LeaveGroupRequest(group_id="g", members=[
            LeaveGroupRequest.MemberIdentity(member_id="x")]), 5)
        # As Apache Kafka (tests/interop): the request succeeds, the member is unknown.
        assert (leave.error_code, [(m.member_id, m.error_code) for m in leave.members]) == (
            ErrorCode.NONE, [("x", ErrorCode.UNKNOWN_MEMBER_ID)])
        deleted = request(sock, DeleteGroupsRequest(groups_names=["g"]), 2)
        assert [(r.group_id, r.error_code) for r in deleted.results] == [("g", ErrorCode.GROUP_ID_NOT_FOUND)]
        offset_delete = request(sock, OffsetDeleteRequest(group_id="g", topics=[]), 0)
        assert offset_delete.error_code == ErrorCode.GROUP_ID_NOT_FOUND
        (described,) = request(sock, DescribeGroupsRequest(groups=["g"]), 5).groups
        assert (described.error_code, described.group_state) == (ErrorCode.NONE, "Dead")
        # A simple group: commits with generation -1, visible to ListGroups, deletable once empty.
        create_topic(sock, "t")
        find_coordinator(sock, "simple")
        find_coordinator(sock, "nobody")
        commit = request(sock, commit_request("simple", "t", 1, 42, "x" * 5000), 8)
        assert commit.topics[0].partitions[0].error_code == ErrorCode.OFFSET_METADATA_TOO_LARGE
        commit = request(sock, commit_request("simple", "t", 1, 42, "checkpoint"), 9)
        assert commit.topics[0].partitions[0].error_code == ErrorCode.NONE
        fetched = request(sock, OffsetFetchRequest(groups=[
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id="simple", topics=None),
            OffsetFetchRequest.OffsetFetchRequestGroup(group_id="nobody", topics=[
                OffsetFetchRequest.OffsetFetchRequestTopics(name="t", partition_indexes=[0])])]), 8)
        simple, nobody = fetched.groups
        assert [(t.name, [(p.partition_index, p.committed_offset, p.metadata) for p in t.partitions])
                for t in simple.topics] == [("t", [(1, 42, "checkpoint")])]
        assert nobody.error_code == ErrorCode.NONE and nobody.topics[0].partitions[0].committed_offset == -1
        listed = request(sock, ListGroupsRequest(states_filter=["EMPTY"]), 4)
        assert [(g.group_id, g.group_state) for g in listed.groups] == [("simple", "Empty")]
        assert request(sock, ListGroupsRequest(types_filter=["consumer"]), 5).groups == []
        deleted = request(sock, DeleteGroupsRequest(groups_names=["simple"]), 2)
        assert deleted.results[0].error_code == ErrorCode.NONE
        fetched = request(sock, OffsetFetchRequest(group_id="simple", topics=None), 7)
        assert fetched.topics == []


def test_malformed_group_requests_close_only_their_connection(kfk_broker: str) -> None:
    good = join(connect(kfk_broker), "x", version=5)  # warms up the coordinator
    assert good.error_code in (ErrorCode.MEMBER_ID_REQUIRED, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                               ErrorCode.NOT_COORDINATOR)
    body = JoinGroupRequest(group_id="x", session_timeout_ms=10_000, member_id="", protocol_type="consumer",
                            protocols=[Protocol(name="range", metadata=b"")]).encode(5)
    header = struct.pack(">hhih", 11, 5, 7, 4) + b"test"
    for frame in (header + body[:7], header + body[:-3], header + b"\xff" * 40,
                  header + body[:2] + b"\x7f\xff\xff\xff"):
        sock = connect(kfk_broker)
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        assert is_closed(sock)
        sock.close()
    with connect(kfk_broker) as sock:
        assert request(sock, api_versions_request(), 3).error_code == ErrorCode.NONE


def test_every_version_of_every_group_api_answers(kfk_broker: str) -> None:
    """Each version the broker advertises is answered with a frame the codec reads at that version."""
    with connect(kfk_broker) as sock:
        create_topic(sock, "v")
        for group in ("versions", "simple-v"):
            find_coordinator(sock, group)
        for version in range(7):
            key_fields = {"coordinator_keys": ["versions"]} if version >= 4 else {"key": "versions"}
            response = request(sock, FindCoordinatorRequest(**key_fields), version)
            error = response.coordinators[0].error_code if version >= 4 else response.error_code
            assert error == ErrorCode.NONE, version
        for version in range(10):
            response = join(sock, "versions", version=version, group_instance_id=None)
            assert response.error_code in (ErrorCode.NONE, ErrorCode.MEMBER_ID_REQUIRED), version
            if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
                response = join(sock, "versions", version=version, member_id=response.member_id)
            assert response.error_code == ErrorCode.NONE, version
            member, generation = response.member_id, response.generation_id
            sync = request(sock, SyncGroupRequest(group_id="versions", generation_id=generation, member_id=member,
                                                  assignments=[SyncGroupRequest.SyncGroupRequestAssignment(
                                                      member_id=member, assignment=b"a")]), min(version, 5))
            assert (sync.error_code, sync.assignment) == (ErrorCode.NONE, b"a"), version
            heartbeat = request(sock, HeartbeatRequest(group_id="versions", generation_id=generation,
                                                       member_id=member), min(version, 4))
            assert heartbeat.error_code == ErrorCode.NONE, version
            describe_version = min(version, 5)
            (described,) = request(sock, DescribeGroupsRequest(
                groups=["versions"], include_authorized_operations=describe_version >= 3), describe_version).groups
            assert described.group_state == "Stable" and described.members[0].member_assignment == b"a"
            if describe_version >= 3:
                # READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: Apache Kafka 4.0's (tests/interop).
                assert described.authorized_operations == (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
            listed = request(sock, ListGroupsRequest(), min(version, 5))
            assert "versions" in [g.group_id for g in listed.groups], version
            commit = request(sock, commit_request("versions", "v", 0, version, f"m{version}",
                                                  generation_id_or_member_epoch=generation, member_id=member),
                             version)
            # v0 carries no member id or generation: a group with members refuses it, as Kafka does.
            expected = ErrorCode.UNKNOWN_MEMBER_ID if version == 0 else ErrorCode.NONE
            assert commit.topics[0].partitions[0].error_code == expected, version
            if version >= 8:
                fetched = request(sock, OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
                    group_id="versions", topics=[OffsetFetchRequest.OffsetFetchRequestTopics(
                        name="v", partition_indexes=[0])])]), version)
                partition = fetched.groups[0].topics[0].partitions[0]
            else:
                fetched = request(sock, OffsetFetchRequest(group_id="versions", topics=[
                    OffsetFetchRequest.OffsetFetchRequestTopic(name="v", partition_indexes=[0])]), version)
                partition = fetched.topics[0].partitions[0]
            committed = (-1, "") if version == 0 else (version, f"m{version}")
            assert (partition.committed_offset, partition.metadata) == committed, version
            if min(version, 5) >= 3:
                leave = request(sock, LeaveGroupRequest(group_id="versions", members=[
                    LeaveGroupRequest.MemberIdentity(member_id=member)]), min(version, 5))
                assert leave.members[0].error_code == ErrorCode.NONE
            else:
                leave = request(sock, LeaveGroupRequest(group_id="versions", member_id=member), version)
            assert leave.error_code == ErrorCode.NONE, version
        request(sock, commit_request("simple-v", "v", 0, 1), 8)
        offset_delete = request(sock, OffsetDeleteRequest(group_id="simple-v", topics=[
            OffsetDeleteRequest.OffsetDeleteRequestTopic(name="v", partitions=[
                OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
        assert offset_delete.error_code == ErrorCode.NONE
        for version in range(3):
            deleted = request(sock, DeleteGroupsRequest(groups_names=["versions"]), version)
            expected = ErrorCode.NONE if version == 0 else ErrorCode.GROUP_ID_NOT_FOUND
            assert deleted.results[0].error_code == expected, version
