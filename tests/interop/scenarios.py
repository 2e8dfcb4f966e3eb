"""The differential scenarios: per API, what is sent to Apache Kafka and to kfk at each version both advertise.

Each scenario is `scenario(session, version)`; it names its topics and groups with `session.name(...)` and the
version, so every run and every version starts from nothing, and sends the same sequence of requests whatever the
broker answers (a broker-generated value read from an answer falls back to a fixed one when it is missing), so the
two recordings pair up exchange by exchange. Error cases sit next to the happy path of their API: unknown topics,
stale and future leader epochs, out-of-range offsets, invalid configs, bad generations, oversize records,
unsupported versions, invalid partition counts and replication factors.
"""

from __future__ import annotations

import struct
import time
import uuid

from kfk.errors import ErrorCode
from kfk.common.uuids import uuid_to_base64
from kfk.protocol.message import Message
from kfk.common.config_types import ConfigResourceType
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest
from kfk.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kfk.protocol.messages.add_raft_voter import AddRaftVoterRequest
from kfk.protocol.messages.alter_configs import AlterConfigsRequest
from kfk.protocol.messages.alter_partition_reassignments import AlterPartitionReassignmentsRequest
from kfk.protocol.messages.alter_replica_log_dirs import AlterReplicaLogDirsRequest
from kfk.protocol.messages.alter_share_group_offsets import AlterShareGroupOffsetsRequest
from kfk.protocol.messages.alter_user_scram_credentials import AlterUserScramCredentialsRequest
from kfk.protocol.messages.api_versions import ApiVersionsRequest
from kfk.protocol.messages.alter_client_quotas import AlterClientQuotasRequest
from kfk.protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from kfk.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kfk.protocol.messages.create_acls import CreateAclsRequest
from kfk.protocol.messages.create_partitions import CreatePartitionsRequest
from kfk.protocol.messages.delete_acls import DeleteAclsRequest
from kfk.protocol.messages.describe_acls import DescribeAclsRequest
from kfk.protocol.messages.describe_client_quotas import DescribeClientQuotasRequest
from kfk.protocol.messages.create_topics import CreateTopicsRequest
from kfk.protocol.messages.delete_groups import DeleteGroupsRequest
from kfk.protocol.messages.delete_share_group_offsets import DeleteShareGroupOffsetsRequest
from kfk.protocol.messages.delete_records import DeleteRecordsRequest
from kfk.protocol.messages.delete_topics import DeleteTopicsRequest
from kfk.protocol.messages.describe_cluster import DescribeClusterRequest
from kfk.protocol.messages.describe_configs import DescribeConfigsRequest
from kfk.protocol.messages.describe_groups import DescribeGroupsRequest
from kfk.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from kfk.protocol.messages.describe_producers import DescribeProducersRequest
from kfk.protocol.messages.describe_quorum import DescribeQuorumRequest
from kfk.protocol.messages.describe_topic_partitions import DescribeTopicPartitionsRequest
from kfk.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kfk.protocol.messages.describe_user_scram_credentials import DescribeUserScramCredentialsRequest
from kfk.protocol.messages.create_delegation_token import CreateDelegationTokenRequest
from kfk.protocol.messages.describe_delegation_token import DescribeDelegationTokenRequest
from kfk.protocol.messages.expire_delegation_token import ExpireDelegationTokenRequest
from kfk.protocol.messages.renew_delegation_token import RenewDelegationTokenRequest
from kfk.protocol.messages.unregister_broker import UnregisterBrokerRequest
from kfk.protocol.messages.update_features import UpdateFeaturesRequest
from kfk.protocol.messages.elect_leaders import ElectLeadersRequest
from kfk.protocol.messages.end_txn import EndTxnRequest
from kfk.protocol.messages.fetch import FetchRequest
from kfk.protocol.messages.find_coordinator import FindCoordinatorRequest
from kfk.protocol.messages.heartbeat import HeartbeatRequest
from kfk.protocol.messages.incremental_alter_configs import IncrementalAlterConfigsRequest
from kfk.protocol.messages.init_producer_id import InitProducerIdRequest
from kfk.protocol.messages.join_group import JoinGroupRequest
from kfk.protocol.messages.leave_group import LeaveGroupRequest
from kfk.protocol.messages.list_config_resources import ListConfigResourcesRequest
from kfk.protocol.messages.list_groups import ListGroupsRequest
from kfk.protocol.messages.list_offsets import ListOffsetsRequest
from kfk.protocol.messages.list_partition_reassignments import ListPartitionReassignmentsRequest
from kfk.protocol.messages.list_transactions import ListTransactionsRequest
from kfk.protocol.messages.metadata import MetadataRequest
from kfk.protocol.messages.offset_commit import OffsetCommitRequest
from kfk.protocol.messages.offset_delete import OffsetDeleteRequest
from kfk.protocol.messages.offset_fetch import OffsetFetchRequest
from kfk.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from kfk.protocol.messages.produce import ProduceRequest
from kfk.protocol.messages.remove_raft_voter import RemoveRaftVoterRequest
from kfk.protocol.messages.sasl_authenticate import SaslAuthenticateRequest
from kfk.protocol.messages.sasl_handshake import SaslHandshakeRequest
from kfk.protocol.messages.describe_share_group_offsets import DescribeShareGroupOffsetsRequest
from kfk.protocol.messages.delete_share_group_state import DeleteShareGroupStateRequest
from kfk.protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest
from kfk.protocol.messages.read_share_group_state import ReadShareGroupStateRequest
from kfk.protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryRequest
from kfk.protocol.messages.write_share_group_state import WriteShareGroupStateRequest
from kfk.protocol.messages.share_acknowledge import ShareAcknowledgeRequest
from kfk.protocol.messages.share_fetch import ShareFetchRequest
from kfk.protocol.messages.share_group_describe import ShareGroupDescribeRequest
from kfk.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from kfk.protocol.messages.sync_group import SyncGroupRequest
from kfk.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kfk.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from kfk.records.builder import MemoryRecordsBuilder
from kfk.security.sasl.scram import ScramMechanism, salted_password

from tests.interop.differential import BrokerSession, Scenario

#: Record timestamps are the scenario's, not a clock's, so that stored batches compare byte for byte.
RECORD_TIMESTAMP = 1_700_000_000_000
CreatableTopic = CreateTopicsRequest.CreatableTopic
TopicConfig = CreateTopicsRequest.CreatableTopicConfig


def records(count: int = 3, value_size: int = 10, base_sequence: int = -1, producer_id: int = -1,
            producer_epoch: int = -1, is_transactional: bool = False) -> bytes:
    builder = MemoryRecordsBuilder(producer_id=producer_id, producer_epoch=producer_epoch,
                                   base_sequence=base_sequence, is_transactional=is_transactional)
    for index in range(count):
        builder.append(RECORD_TIMESTAMP + index, f"k{index}".encode(), bytes([65 + index % 26]) * value_size)
    return bytes(builder.close())


def create_topic(session: BrokerSession, name: str, partitions: int = 1, configs: dict[str, str] | None = None,
                 label: str = "setup") -> None:
    """Create a topic with CreateTopics v5 (both brokers serve it); the answer is recorded like any other."""
    topic = CreatableTopic(name=name, num_partitions=partitions, replication_factor=1,
                           configs=[TopicConfig(name=k, value=v) for k, v in (configs or {}).items()])
    session.call(CreateTopicsRequest(topics=[topic], timeout_ms=10_000), 5, label)
    wait_for_leaders(session, name)


def wait_for_leaders(session: BrokerSession, name: str, timeout: float = 30.0) -> None:
    """Poll (unrecorded) until every partition of the topic answers ListOffsets: Apache Kafka answers CreateTopics
    from its controller, and its broker learns the topic, then becomes its leader, a moment later."""
    deadline = time.monotonic() + timeout
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                              allow_auto_topic_creation=False)
    while time.monotonic() < deadline:
        response = session.call(request, 12, record=False)
        if response is not None and response.topics and response.topics[0].error_code == 0:
            partitions = [p.partition_index for p in response.topics[0].partitions]
            answer = session.call(ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(
                name=name, partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=p, timestamp=-1)
                                       for p in partitions])]), 1, record=False)
            if answer is not None and all(p.error_code == 0 for p in answer.topics[0].partitions):
                return
        time.sleep(0.05)
    raise AssertionError(f"topic {name} has no leader after {timeout}s")


def topic_by(session: BrokerSession, topic: str, by_id: bool) -> dict:
    """The fields naming a topic in a request: its name, or its id (a random one for a topic the broker does not
    know) in the versions that name topics by id."""
    if not by_id:
        return {"name": topic}
    the_id = topic_id(session, topic)
    return {"topic_id": the_id if the_id.int else uuid.uuid4()}


def produce_topic(session: BrokerSession, topic: str, version: int,
                  partition_data: list[ProduceRequest.PartitionProduceData]) -> ProduceRequest.TopicProduceData:
    """A topic of a ProduceRequest: by name, or from v13 by id."""
    return ProduceRequest.TopicProduceData(partition_data=partition_data, **topic_by(session, topic, version >= 13))


def produce(session: BrokerSession, topic: str, data: bytes, version: int = 9, partition: int = 0,
            label: str = "setup produce") -> None:
    partition_data = ProduceRequest.PartitionProduceData(index=partition, records=data)
    session.call(ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[
        produce_topic(session, topic, version, [partition_data])]), version, label)


def topic_id(session: BrokerSession, topic: str) -> uuid.UUID:
    """The topic's id from Metadata v12 (recorded too); the zero uuid if the broker has none."""
    response = session.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                            allow_auto_topic_creation=False), 12, "setup topic id")
    if response is None or not response.topics:
        return uuid.UUID(int=0)
    return response.topics[0].topic_id


#: Enough group and transactional ids that every partition of __consumer_offsets and __transaction_state (50 each
#: by default) has some: the warm-up waits until each of them answers.
WARM_UP_KEYS = [f"warm-up-{index}" for index in range(400)]
#: What a coordinator answers while it is not ready: it does not lead the partition yet, or still loads it.
_NOT_READY = (ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)


def wait_for_coordinators(session: BrokerSession, timeout: float = 60.0) -> None:
    """Poll (unrecorded) until the group and transaction coordinators (and the producer id manager) are ready for
    any key: Apache Kafka creates
    __consumer_offsets and __transaction_state on the first FindCoordinator and its partitions become ready one by
    one after that, answering COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR or COORDINATOR_LOAD_IN_PROGRESS until
    then: a moment that depends on the machine, not a difference to compare."""
    deadline = time.monotonic() + timeout
    for key_type in (0, 1):
        session.call(FindCoordinatorRequest(key_type=key_type, coordinator_keys=WARM_UP_KEYS[:1]), 4, record=False)
    for request, errors in [
        # An idempotent producer's id comes from a block the broker asks its controller for, once.
        (InitProducerIdRequest(transactional_id=None), lambda r: [r.error_code]),
        (DescribeGroupsRequest(groups=WARM_UP_KEYS), lambda r: [g.error_code for g in r.groups]),
        (DescribeTransactionsRequest(transactional_ids=WARM_UP_KEYS),
         lambda r: [t.error_code for t in r.transaction_states]),
    ]:
        while True:
            response = session.call(request, 0, record=False)
            if response is not None and not any(error in _NOT_READY for error in errors(response)):
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"the coordinators are not ready after {timeout}s")
            time.sleep(0.2)


# --- ApiVersions ---------------------------------------------------------------------------------------------------

def api_versions(session: BrokerSession, version: int) -> None:
    request = ApiVersionsRequest()
    if version >= 3:
        request = ApiVersionsRequest(client_software_name="kfk-differential", client_software_version="1.0")
    session.call(request, version, "ApiVersions")
    if version >= 3:
        session.call(ApiVersionsRequest(client_software_name="bad name!", client_software_version="1.0"), version,
                     "ApiVersions with an invalid client software name")
    if version >= 5:
        metadata = session.call(MetadataRequest(topics=[]), 12, record=False)
        own_cluster, own_node = metadata.cluster_id, metadata.brokers[0].node_id
        for label, cluster_id, node_id in [("meant for this node", own_cluster, own_node),
                                           ("meant for a node of another cluster", "AAAAAAAAAAAAAAAAAAAAAA", own_node),
                                           ("meant for another node", own_cluster, own_node + 100),
                                           ("naming a cluster and no node", own_cluster, -1),
                                           ("naming a node and no cluster", None, own_node)]:
            session.call(ApiVersionsRequest(client_software_name="kfk-differential", client_software_version="1.0",
                                            cluster_id=cluster_id, node_id=node_id), version, f"ApiVersions {label}")


def call_unknown_version(session: BrokerSession, request: Message, label: str) -> None:
    """`request` at the version after the newest both know: its newest body (a newer one starts the same way) under
    a header (v2, flexible) that names the next version."""
    too_high = request.HIGHEST_VERSION + 1
    body = request.encode(request.HIGHEST_VERSION)
    client_id = b"kfk-differential"
    header = struct.pack(">hhih", request.API_KEY, too_high, 0, len(client_id)) + client_id + b"\x00"
    frame = struct.pack(">i", len(header) + len(body)) + header + body
    session.call_frame(frame, request.API_KEY, too_high, label)


def unsupported_versions(session: BrokerSession, version: int) -> None:
    """ApiVersions at a version newer than both know: UNSUPPORTED_VERSION with the v0 answer (KIP-511). Another
    API at such a version: the broker cannot read the request and closes the connection."""
    call_unknown_version(session, ApiVersionsRequest(client_software_name="kfk-differential",
                                                     client_software_version="1.0"),
                         "ApiVersions at an unknown version")
    call_unknown_version(session, MetadataRequest(topics=[], allow_auto_topic_creation=False),
                         "Metadata at an unknown version")
    session.call(ApiVersionsRequest(), 0, "ApiVersions after a connection was closed")


# --- Metadata ------------------------------------------------------------------------------------------------------

def metadata(session: BrokerSession, version: int) -> None:
    known = session.name(f"meta-v{version}")
    create_topic(session, known, partitions=2)
    unknown = session.name(f"meta-missing-v{version}")
    names = [known, unknown]
    fields: dict = {}
    if version >= 4:
        fields["allow_auto_topic_creation"] = False
    if 8 <= version <= 10:
        fields["include_cluster_authorized_operations"] = True
    if version >= 8:
        fields["include_topic_authorized_operations"] = True
    session.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names], **fields),
                 version, "Metadata of a known and an unknown topic")
    session.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=session.name("bad name!"))],
                                 **fields), version, "Metadata of an invalid topic name")
    if version >= 10:
        session.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=None, topic_id=uuid.uuid4())],
                                     **fields), version, "Metadata of an unknown topic id")
    if version >= 1:
        session.call(MetadataRequest(topics=[], **fields), version, "Metadata of no topics")
    auto = session.name(f"meta-auto-v{version}")
    auto_fields = dict(fields, allow_auto_topic_creation=True) if version >= 4 else fields
    session.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=auto)], **auto_fields),
                 version, "Metadata auto-creating a topic")


# --- CreateTopics, DeleteTopics, CreatePartitions -------------------------------------------------------------------

def create_topics(session: BrokerSession, version: int) -> None:
    def call(label: str, *topics: CreatableTopic, validate_only: bool = False) -> None:
        fields = {"validate_only": validate_only} if version >= 1 else {}
        session.call(CreateTopicsRequest(topics=list(topics), timeout_ms=10_000, **fields), version, label)

    name = session.name(f"create-v{version}")
    call("CreateTopics", CreatableTopic(name=name, num_partitions=3, replication_factor=1,
                                        configs=[TopicConfig(name="retention.ms", value="3600000")]))
    call("CreateTopics of an existing topic", CreatableTopic(name=name, num_partitions=1, replication_factor=1))
    call("CreateTopics with defaults", CreatableTopic(name=session.name(f"create-defaults-v{version}"),
                                                      num_partitions=-1, replication_factor=-1))
    call("CreateTopics with a bad config value", CreatableTopic(
        name=session.name(f"create-badconfig-v{version}"), num_partitions=1, replication_factor=1,
        configs=[TopicConfig(name="cleanup.policy", value="bogus")]))
    call("CreateTopics with an unknown config", CreatableTopic(
        name=session.name(f"create-unknownconfig-v{version}"), num_partitions=1, replication_factor=1,
        configs=[TopicConfig(name="no.such.config", value="1")]))
    call("CreateTopics with 0 partitions", CreatableTopic(
        name=session.name(f"create-nopartitions-v{version}"), num_partitions=0, replication_factor=1))
    call("CreateTopics with replication factor 3 on one broker", CreatableTopic(
        name=session.name(f"create-rf3-v{version}"), num_partitions=1, replication_factor=3))
    call("CreateTopics with an invalid name", CreatableTopic(name="bad name!", num_partitions=1,
                                                             replication_factor=1))
    call("CreateTopics validate only", CreatableTopic(name=session.name(f"create-validate-v{version}"),
                                                      num_partitions=2, replication_factor=1), validate_only=True)
    call("CreateTopics of two, one of them bad",
         CreatableTopic(name=session.name(f"create-pair-a-v{version}"), num_partitions=1, replication_factor=1),
         CreatableTopic(name=session.name(f"create-pair-b-v{version}"), num_partitions=1, replication_factor=0))


def delete_topics(session: BrokerSession, version: int) -> None:
    name = session.name(f"delete-v{version}")
    create_topic(session, name)
    missing = session.name(f"delete-missing-v{version}")
    if version >= 6:
        State = DeleteTopicsRequest.DeleteTopicState
        request = DeleteTopicsRequest(topics=[State(name=name), State(name=missing)], timeout_ms=10_000)
    else:
        request = DeleteTopicsRequest(topic_names=[name, missing], timeout_ms=10_000)
    session.call(request, version, "DeleteTopics of a topic and an unknown one")
    if version >= 6:
        session.call(DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(topic_id=uuid.uuid4())],
                                         timeout_ms=10_000), version, "DeleteTopics of an unknown topic id")
    # Not sent: DeleteTopics of __consumer_offsets. Apache Kafka 4.0 deletes it (its KRaft controller does not
    # protect internal topics), which would take the shared node's groups away from every other test.


def create_partitions(session: BrokerSession, version: int) -> None:
    name = session.name(f"partitions-v{version}")
    create_topic(session, name, partitions=2)
    Topic = CreatePartitionsRequest.CreatePartitionsTopic

    def call(label: str, *topics: CreatePartitionsRequest.CreatePartitionsTopic, validate_only: bool = False):
        session.call(CreatePartitionsRequest(topics=list(topics), timeout_ms=10_000, validate_only=validate_only),
                     version, label)

    call("CreatePartitions validate only", Topic(name=name, count=5, assignments=None), validate_only=True)
    call("CreatePartitions to 4", Topic(name=name, count=4, assignments=None))
    call("CreatePartitions to fewer", Topic(name=name, count=3, assignments=None))
    call("CreatePartitions to the same count", Topic(name=name, count=4, assignments=None))
    call("CreatePartitions of an unknown topic", Topic(name=session.name(f"partitions-missing-v{version}"), count=2,
                                                       assignments=None))
    call("CreatePartitions with a bad assignment", Topic(name=name, count=5, assignments=[
        CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=[7])]))


# --- Produce, Fetch, ListOffsets, OffsetForLeaderEpoch ------------------------------------------------------------

def produce_scenario(session: BrokerSession, version: int) -> None:
    name = session.name(f"produce-v{version}")
    create_topic(session, name, partitions=2, configs={"max.message.bytes": "1024"})
    for label, topic, partition, data in [
        ("Produce", name, 0, records()),
        ("Produce again", name, 0, records(count=2)),
        ("Produce to another partition", name, 1, records(count=1)),
        ("Produce over max.message.bytes", name, 0, records(count=2, value_size=2000)),
        ("Produce to an unknown partition", name, 5, records()),
        ("Produce to an unknown topic", session.name(f"produce-missing-v{version}"), 0, records()),
    ]:
        produce(session, topic, data, version, partition, label)
    bad = bytearray(records())
    bad[-1] ^= 0xFF  # the CRC no longer matches
    produce(session, name, bytes(bad), version, 0, "Produce a corrupt batch")
    session.call(ProduceRequest(acks=2, timeout_ms=10_000, topic_data=[produce_topic(
        session, name, version, [ProduceRequest.PartitionProduceData(index=0, records=records())])]),
        version, "Produce with acks=2")
    if version >= 3:  # a transactional batch (magic 2) for a partition never added to the transaction: refused by
        # the coordinator's verification, answered by version (TRANSACTION_ABORTABLE from v11); v12 adds it (TV2)
        transactional_id = session.name(f"produce-txn-v{version}")
        producer_id, producer_epoch = init_producer(session, transactional_id)
        session.call(ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=10_000, topic_data=[
            produce_topic(session, name, version, [ProduceRequest.PartitionProduceData(
                index=1, records=records(count=1, base_sequence=0, producer_id=producer_id,
                                         producer_epoch=producer_epoch, is_transactional=True))])]),
            version, "Transactional produce to a partition outside the transaction")


def fetch(session: BrokerSession, version: int) -> None:
    name = session.name(f"fetch-v{version}")
    create_topic(session, name)
    produce(session, name, records(count=5))
    produce(session, name, records(count=2))
    topic_uuid = topic_id(session, name) if version >= 13 else uuid.UUID(int=0)

    def call(label: str, offset: int, leader_epoch: int = -1, topic: str = name, the_id: uuid.UUID = topic_uuid,
             max_bytes: int = 1 << 20) -> None:
        partition_fields: dict = {"fetch_offset": offset, "partition_max_bytes": max_bytes}
        if version >= 9:
            partition_fields["current_leader_epoch"] = leader_epoch
        if version >= 5:
            partition_fields["log_start_offset"] = -1
        fields: dict = {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20}
        if version >= 4:
            fields["isolation_level"] = 0
        if version >= 7:
            fields.update(session_id=0, session_epoch=-1)
        fetch_topic = FetchRequest.FetchTopic(topic=topic if version < 13 else "", topic_id=the_id, partitions=[
            FetchRequest.FetchPartition(partition=0, **partition_fields)])
        session.call(FetchRequest(topics=[fetch_topic], **fields), version, label)

    call("Fetch from 0", 0)
    call("Fetch from the middle of a batch", 6)
    call("Fetch at the log end", 7)
    call("Fetch past the log end", 100)
    call("Fetch a small max bytes", 0, max_bytes=10)
    if version >= 9:
        call("Fetch with the current leader epoch", 0, leader_epoch=0)
        call("Fetch with a future leader epoch", 0, leader_epoch=1000)
    if version >= 13:
        call("Fetch of an unknown topic id", 0, the_id=uuid.uuid4())
    else:
        call("Fetch of an unknown topic", 0, topic=session.name(f"fetch-missing-v{version}"))


def list_offsets(session: BrokerSession, version: int) -> None:
    name = session.name(f"offsets-v{version}")
    create_topic(session, name)
    produce(session, name, records(count=4))

    def call(label: str, timestamp: int, leader_epoch: int = -1, topic: str = name, partition: int = 0) -> None:
        partition_fields: dict = {"partition_index": partition, "timestamp": timestamp}
        if version >= 4:
            partition_fields["current_leader_epoch"] = leader_epoch
        fields: dict = {"replica_id": -1}
        if version >= 2:
            fields["isolation_level"] = 0
        if version >= 10:
            fields["timeout_ms"] = 10_000
        session.call(ListOffsetsRequest(topics=[ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
            ListOffsetsRequest.ListOffsetsPartition(**partition_fields)])], **fields), version, label)

    call("ListOffsets earliest", -2)
    call("ListOffsets latest", -1)
    call("ListOffsets by timestamp", RECORD_TIMESTAMP + 2)
    call("ListOffsets by a timestamp after every record", RECORD_TIMESTAMP + 100)
    if version >= 7:
        call("ListOffsets max timestamp", -3)
    if version >= 8:
        call("ListOffsets earliest local", -4)
    if version >= 9:
        call("ListOffsets latest tiered", -5)
    if version >= 11:
        call("ListOffsets earliest pending upload", -6)
    if version >= 4:
        call("ListOffsets with the current leader epoch", -1, leader_epoch=0)
        call("ListOffsets with a future leader epoch", -1, leader_epoch=1000)
    call("ListOffsets of an unknown partition", -1, partition=3)
    call("ListOffsets of an unknown topic", -1, topic=session.name(f"offsets-missing-v{version}"))


def offset_for_leader_epoch(session: BrokerSession, version: int) -> None:
    name = session.name(f"epochs-v{version}")
    create_topic(session, name)
    produce(session, name, records(count=4))

    def call(label: str, leader_epoch: int, current_leader_epoch: int = -1, topic: str = name) -> None:
        partition = OffsetForLeaderEpochRequest.OffsetForLeaderPartition(
            partition=0, leader_epoch=leader_epoch, current_leader_epoch=current_leader_epoch if version >= 2 else -1)
        fields = {"replica_id": -1} if version >= 3 else {}
        session.call(OffsetForLeaderEpochRequest(topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
            topic=topic, partitions=[partition])], **fields), version, label)

    call("OffsetForLeaderEpoch of epoch 0", 0)
    call("OffsetForLeaderEpoch of a future epoch", 7)
    call("OffsetForLeaderEpoch with the current leader epoch", 0, current_leader_epoch=0)
    call("OffsetForLeaderEpoch with a future current leader epoch", 0, current_leader_epoch=1000)
    call("OffsetForLeaderEpoch of an unknown topic", 0, topic=session.name(f"epochs-missing-v{version}"))




# --- consumer groups (the classic protocol) ------------------------------------------------------------------------

Protocol = JoinGroupRequest.JoinGroupRequestProtocol
CommitTopic = OffsetCommitRequest.OffsetCommitRequestTopic
CommitPartition = OffsetCommitRequest.OffsetCommitRequestPartition
#: A consumer's subscription metadata (ConsumerProtocolSubscription v0, no topics) and an empty assignment.
SUBSCRIPTION = b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"
ASSIGNMENT = b"\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff"


def join_request(group: str, version: int, member_id: str = "", session_timeout_ms: int = 10_000,
                 protocol_type: str = "consumer", instance_id: str | None = None) -> JoinGroupRequest:
    fields: dict = {}
    if version >= 1:
        fields["rebalance_timeout_ms"] = 10_000
    if version >= 5:
        fields["group_instance_id"] = instance_id
    if version >= 8:
        fields["reason"] = "differential test"
    return JoinGroupRequest(group_id=group, session_timeout_ms=session_timeout_ms, member_id=member_id,
                            protocol_type=protocol_type, protocols=[Protocol(name="range", metadata=SUBSCRIPTION)],
                            **fields)


def find_group_coordinator(session: BrokerSession, group: str) -> None:
    session.call(FindCoordinatorRequest(key=group, key_type=0), 2, "setup FindCoordinator")


def join(session: BrokerSession, group: str, version: int = 5, label: str = "setup join") -> tuple[str, int]:
    """Join `group` as its only member (two JoinGroups from v4: the first asks for a member id); returns the member
    id and generation ("" and -1 if the broker refused)."""
    response = session.call(join_request(group, version), version, label)
    member_id = response.member_id if response is not None else ""
    if version >= 4:
        response = session.call(join_request(group, version, member_id), version, label + " with the member id")
    if response is None or response.error_code != 0:
        return member_id, -1
    return response.member_id, response.generation_id


def sync_request(group: str, version: int, generation: int, member_id: str,
                 protocol_type: str = "consumer", protocol_name: str = "range") -> SyncGroupRequest:
    fields = {"protocol_type": protocol_type, "protocol_name": protocol_name} if version >= 5 else {}
    return SyncGroupRequest(group_id=group, generation_id=generation, member_id=member_id, assignments=[
        SyncGroupRequest.SyncGroupRequestAssignment(member_id=member_id, assignment=ASSIGNMENT)], **fields)


def joined_member(session: BrokerSession, group: str) -> tuple[str, int]:
    """A stable group with one member (JoinGroup v5, SyncGroup v3): its member id and generation."""
    find_group_coordinator(session, group)
    member_id, generation = join(session, group)
    session.call(sync_request(group, 3, generation, member_id), 3, "setup sync")
    return member_id, generation


def join_group(session: BrokerSession, version: int) -> None:
    group = session.name(f"join-v{version}")
    find_group_coordinator(session, group)
    member_id, generation = join(session, group, version, "JoinGroup")
    session.call(join_request(group, version, member_id), version, "JoinGroup again as the same member")
    session.call(join_request(group, version, "", protocol_type="connect"), version,
                 "JoinGroup with another protocol type")
    session.call(join_request(group, version, "no-such-member"), version, "JoinGroup as an unknown member")
    session.call(join_request(session.name(f"join-timeout-v{version}"), version, session_timeout_ms=1), version,
                 "JoinGroup with a session timeout below group.min.session.timeout.ms")
    if version >= 5:
        static = session.name(f"join-static-v{version}")
        find_group_coordinator(session, static)
        session.call(join_request(static, version, instance_id="instance-1"), version, "JoinGroup as a static member")


def sync_group(session: BrokerSession, version: int) -> None:
    group = session.name(f"sync-v{version}")
    find_group_coordinator(session, group)
    member_id, generation = join(session, group)
    session.call(sync_request(group, version, generation + 1, member_id), version,
                 "SyncGroup with a bad generation")
    session.call(sync_request(group, version, generation, "no-such-member"), version,
                 "SyncGroup as an unknown member")
    if version >= 5:
        session.call(sync_request(group, version, generation, member_id, protocol_name="roundrobin"), version,
                     "SyncGroup naming another protocol")
    session.call(sync_request(group, version, generation, member_id), version, "SyncGroup")
    session.call(sync_request(session.name(f"sync-missing-v{version}"), version, 1, "no-such-member"), version,
                 "SyncGroup of an unknown group")


def heartbeat(session: BrokerSession, version: int) -> None:
    group = session.name(f"heartbeat-v{version}")
    member_id, generation = joined_member(session, group)

    def call(label: str, group_id: str, generation_id: int, member: str) -> None:
        session.call(HeartbeatRequest(group_id=group_id, generation_id=generation_id, member_id=member), version,
                     label)

    call("Heartbeat", group, generation, member_id)
    call("Heartbeat with a bad generation", group, generation + 1, member_id)
    call("Heartbeat as an unknown member", group, generation, "no-such-member")
    call("Heartbeat of an unknown group", session.name(f"heartbeat-missing-v{version}"), 1, "no-such-member")


def leave_group(session: BrokerSession, version: int) -> None:
    group = session.name(f"leave-v{version}")
    member_id, _ = joined_member(session, group)

    def call(label: str, group_id: str, member: str) -> None:
        if version >= 3:
            request = LeaveGroupRequest(group_id=group_id, members=[LeaveGroupRequest.MemberIdentity(
                member_id=member, reason="differential test" if version >= 5 else None)])
        else:
            request = LeaveGroupRequest(group_id=group_id, member_id=member)
        session.call(request, version, label)

    call("LeaveGroup as an unknown member", group, "no-such-member")
    call("LeaveGroup", group, member_id)
    call("LeaveGroup of an unknown group", session.name(f"leave-missing-v{version}"), "no-such-member")


def offset_commit(session: BrokerSession, version: int) -> None:
    topic = session.name(f"commit-v{version}")
    create_topic(session, topic, partitions=2)
    group = session.name(f"commit-v{version}")
    member_id, generation = joined_member(session, group)

    def call(label: str, generation_id: int, member: str, topic_name: str = topic, partition: int = 0,
             group_id: str = group, metadata: str | None = "meta") -> None:
        partition_fields: dict = {"partition_index": partition, "committed_offset": 5, "committed_metadata": metadata}
        if version >= 6:
            partition_fields["committed_leader_epoch"] = 0
        fields: dict = {}
        if 2 <= version <= 4:
            fields["retention_time_ms"] = -1
        session.call(OffsetCommitRequest(group_id=group_id, generation_id_or_member_epoch=generation_id,
                                         member_id=member, topics=[CommitTopic(
                                             partitions=[CommitPartition(**partition_fields)],
                                             **topic_by(session, topic_name, version >= 10))], **fields),
                     version, label)

    call("OffsetCommit as the member", generation, member_id)
    call("OffsetCommit with a bad generation", generation + 1, member_id)
    call("OffsetCommit as an unknown member", generation, "no-such-member")
    call("OffsetCommit of an unknown partition", generation, member_id, partition=9)
    call("OffsetCommit of an unknown topic", generation, member_id, topic_name=session.name(f"commit-missing-v{version}"))
    call("OffsetCommit with metadata over offset.metadata.max.bytes", generation, member_id, metadata="m" * 5000)
    call("OffsetCommit outside a group (simple consumer)", -1, "", group_id=session.name(f"commit-simple-v{version}"))
    call("OffsetCommit outside a group to a group with members", -1, "")
    consumer_group = session.name(f"commit-consumer-v{version}")
    member = f"member-{session.suffix}-{version}"
    epoch = consumer_member(session, consumer_group, topic, member)
    call("OffsetCommit of a consumer protocol member", epoch, member, group_id=consumer_group)
    call("OffsetCommit of a consumer protocol member at a stale epoch", epoch + 1, member, group_id=consumer_group)
    call("OffsetCommit of an unknown member of a consumer protocol group", epoch, "no-such-member",
         group_id=consumer_group)


def offset_fetch(session: BrokerSession, version: int) -> None:
    topic = session.name(f"fetch-offsets-v{version}")
    create_topic(session, topic, partitions=2)
    group = session.name(f"fetch-offsets-v{version}")
    session.call(OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        CommitTopic(name=topic, partitions=[CommitPartition(partition_index=0, committed_offset=3,
                                                            committed_leader_epoch=0, committed_metadata="m")])]),
        8, "setup commit")
    missing_group = session.name(f"fetch-offsets-missing-v{version}")
    missing_topic = session.name(f"fetch-offsets-missing-topic-v{version}")

    def call(label: str, group_id: str, topics: list[tuple[str, list[int]]] | None) -> None:
        fields: dict = {"require_stable": True} if version >= 7 else {}
        if version >= 8:
            wanted = None if topics is None else [OffsetFetchRequest.OffsetFetchRequestTopics(
                partition_indexes=partitions, **topic_by(session, name, version >= 10)) for name, partitions in topics]
            request = OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id=group_id, topics=wanted)], **fields)
        else:
            wanted = None if topics is None else [OffsetFetchRequest.OffsetFetchRequestTopic(
                name=name, partition_indexes=partitions) for name, partitions in topics]
            request = OffsetFetchRequest(group_id=group_id, topics=wanted, **fields)
        session.call(request, version, label)

    call("OffsetFetch", group, [(topic, [0, 1])])
    if version >= 9:
        consumer_group = session.name(f"fetch-offsets-consumer-v{version}")
        member = f"member-{session.suffix}-{version}"
        epoch = consumer_member(session, consumer_group, topic, member)
        for label, member_id, member_epoch in [("at its epoch", member, epoch), ("at a stale epoch", member, epoch + 1),
                                               ("as an unknown member", "no-such-member", epoch)]:
            session.call(OffsetFetchRequest(groups=[OffsetFetchRequest.OffsetFetchRequestGroup(
                group_id=consumer_group, member_id=member_id, member_epoch=member_epoch, topics=[
                    OffsetFetchRequest.OffsetFetchRequestTopics(name=topic, partition_indexes=[0])])],
                require_stable=True), version, f"OffsetFetch of a consumer protocol member {label}")
    call("OffsetFetch of an unknown topic", group, [(missing_topic, [0])])
    call("OffsetFetch of an unknown group", missing_group, [(topic, [0])])
    if version >= 2:
        call("OffsetFetch of every partition", group, None)
        call("OffsetFetch of every partition of an unknown group", missing_group, None)


def describe_groups(session: BrokerSession, version: int) -> None:
    group = session.name(f"describe-v{version}")
    joined_member(session, group)
    topic = session.name(f"describe-v{version}")
    create_topic(session, topic)
    consumer_group = session.name(f"describe-consumer-v{version}")
    consumer_member(session, consumer_group, topic, f"member-{session.suffix}-{version}")
    fields = {"include_authorized_operations": True} if version >= 3 else {}
    session.call(DescribeGroupsRequest(groups=[group, session.name(f"describe-missing-v{version}")], **fields),
                 version, "DescribeGroups of a group and an unknown one")
    session.call(DescribeGroupsRequest(groups=[consumer_group], **fields), version,
                 "DescribeGroups of a consumer protocol group")


def list_groups(session: BrokerSession, version: int) -> None:
    group = session.name(f"list-v{version}")
    joined_member(session, group)
    topic = session.name(f"list-v{version}")
    create_topic(session, topic)
    consumer_member(session, session.name(f"list-consumer-v{version}"), topic, f"member-{session.suffix}-{version}")
    simple = session.name(f"list-simple-v{version}")
    session.call(OffsetCommitRequest(group_id=simple, generation_id_or_member_epoch=-1, member_id="", topics=[]), 8,
                 "setup commit")
    fields: dict = {}
    if version >= 4:
        fields["states_filter"] = []
    session.call(ListGroupsRequest(**fields), version, "ListGroups")
    keep_own(session, "groups", "group_id", "list-")
    if version >= 4:
        session.call(ListGroupsRequest(states_filter=["Stable"]), version, "ListGroups of stable groups")
        keep_own(session, "groups", "group_id", "list-")
    if version >= 5:
        session.call(ListGroupsRequest(states_filter=[], types_filter=["consumer"]), version,
                     "ListGroups of consumer groups")
        keep_own(session, "groups", "group_id", "list-")
        session.call(ListGroupsRequest(states_filter=[], types_filter=["classic"]), version,
                     "ListGroups of classic groups")
        keep_own(session, "groups", "group_id", "list-")


def keep_own(session: BrokerSession, field: str, key: str, prefix: str) -> None:
    """Keep in the last answer's list `field` only the items this scenario made (named `prefix`...-suffix): not
    what other tests left on a shared broker, nor other scenarios' groups, whose state moves with the clock (a
    member that joined and never synced leaves when its session times out)."""
    response = session.exchanges[-1].response
    if isinstance(response, dict):
        response[field] = [item for item in response[field]
                           if item[key].startswith(prefix) and item[key].endswith(session.suffix)]


def delete_groups(session: BrokerSession, version: int) -> None:
    active = session.name(f"delete-active-v{version}")
    joined_member(session, active)
    empty = session.name(f"delete-empty-v{version}")
    session.call(OffsetCommitRequest(group_id=empty, generation_id_or_member_epoch=-1, member_id="", topics=[]), 8,
                 "setup commit")
    topic = session.name(f"delete-groups-v{version}")
    create_topic(session, topic)
    committed = session.name(f"delete-committed-v{version}")
    session.call(OffsetCommitRequest(group_id=committed, generation_id_or_member_epoch=-1, member_id="", topics=[
        CommitTopic(name=topic, partitions=[CommitPartition(partition_index=0, committed_offset=1)])]), 8,
        "setup commit")
    session.call(DeleteGroupsRequest(groups_names=[active, empty, committed, session.name(f"delete-none-v{version}")]),
                 version, "DeleteGroups of an active, an empty, a committed and an unknown group")
    consumer_group = session.name(f"delete-consumer-v{version}")
    member = f"member-{session.suffix}-{version}"
    consumer_member(session, consumer_group, topic, member)
    session.call(DeleteGroupsRequest(groups_names=[consumer_group]), version,
                 "DeleteGroups of a consumer protocol group with a member")
    session.call(consumer_heartbeat_request(consumer_group, member, -1), 0, "setup leave")
    session.call(DeleteGroupsRequest(groups_names=[consumer_group]), version,
                 "DeleteGroups of a consumer protocol group left empty")


def offset_delete(session: BrokerSession, version: int) -> None:
    topic = session.name(f"offset-delete-v{version}")
    create_topic(session, topic, partitions=2)
    group = session.name(f"offset-delete-v{version}")
    session.call(OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=-1, member_id="", topics=[
        CommitTopic(name=topic, partitions=[CommitPartition(partition_index=0, committed_offset=1)])]), 8,
        "setup commit")

    def call(label: str, group_id: str, topic_name: str, partitions: list[int]) -> None:
        session.call(OffsetDeleteRequest(group_id=group_id, topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
            name=topic_name, partitions=[OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=p)
                                         for p in partitions])]), version, label)

    call("OffsetDelete", group, topic, [0, 1])
    call("OffsetDelete of an unknown topic", group, session.name(f"offset-delete-missing-v{version}"), [0])
    call("OffsetDelete of an unknown group", session.name(f"offset-delete-none-v{version}"), topic, [0])
    active = session.name(f"offset-delete-active-v{version}")
    member_id, generation = joined_member(session, active)
    session.call(OffsetCommitRequest(group_id=active, generation_id_or_member_epoch=generation, member_id=member_id,
                                     topics=[CommitTopic(name=topic, partitions=[CommitPartition(
                                         partition_index=0, committed_offset=1)])]), 8, "setup commit")
    call("OffsetDelete of a group with members (subscribed topics unknown: consumer protocol without topics)",
         active, topic, [0])


# --- the consumer group protocol (KIP-848) --------------------------------------------------------------------------

def consumer_heartbeat_request(group: str, member_id: str, epoch: int, *, topics: list[str] | None = None,
                               owned: list[tuple[uuid.UUID, list[int]]] | None = None,
                               instance_id: str | None = None, server_assignor: str | None = None
                               ) -> ConsumerGroupHeartbeatRequest:
    """A ConsumerGroupHeartbeat as the Java consumer sends it: a join (epoch 0) carries its subscription, timeout
    and (empty) owned partitions, a later heartbeat what it owns."""
    joining = epoch == 0
    return ConsumerGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=epoch, instance_id=instance_id,
        rebalance_timeout_ms=30_000 if joining else -1, subscribed_topic_names=topics,
        server_assignor=server_assignor,
        topic_partitions=None if owned is None else [ConsumerGroupHeartbeatRequest.TopicPartitions(
            topic_id=topic, partitions=partitions) for topic, partitions in owned])


def settle_group_coordinator() -> None:
    """Apache Kafka's group coordinator learns a new topic from a metadata image its shards apply after the broker
    leads the topic's partitions (what wait_for_leaders sees): a join in between gets an empty assignment, and the
    topic's arrival bumps the group epoch once more. A moment's pause makes that ordering hold on a loaded machine."""
    time.sleep(0.5)


def consumer_member(session: BrokerSession, group: str, topic: str, member_id: str, version: int = 0,
                    instance_id: str | None = None) -> int:
    """Join `group` through the consumer protocol as its only member; its member epoch (0 if refused)."""
    settle_group_coordinator()
    find_group_coordinator(session, group)
    response = session.call(consumer_heartbeat_request(group, member_id, 0, topics=[topic], owned=[],
                                                       instance_id=instance_id), version, "setup join")
    return response.member_epoch if response is not None and response.error_code == 0 else 0


def consumer_group_heartbeat(session: BrokerSession, version: int) -> None:
    topic = session.name(f"cgh-v{version}")
    create_topic(session, topic, partitions=2)
    topic_uuid = topic_id(session, topic)
    group = session.name(f"cgh-v{version}")
    member = f"member-{session.suffix}-{version}"
    settle_group_coordinator()
    find_group_coordinator(session, group)

    def call(label: str, request: ConsumerGroupHeartbeatRequest) -> None:
        session.call(request, version, label)

    joined = session.call(consumer_heartbeat_request(group, member, 0, topics=[topic], owned=[]), version,
                          "ConsumerGroupHeartbeat joining")
    epoch = joined.member_epoch if joined is not None and joined.error_code == 0 else 1
    call("ConsumerGroupHeartbeat owning its assignment",
         consumer_heartbeat_request(group, member, epoch, owned=[(topic_uuid, [0, 1])]))
    call("ConsumerGroupHeartbeat with nothing changed", consumer_heartbeat_request(group, member, epoch))
    call("ConsumerGroupHeartbeat from a future epoch",
         consumer_heartbeat_request(group, member, epoch + 5, owned=[(topic_uuid, [0, 1])]))
    call("ConsumerGroupHeartbeat of an unknown member", consumer_heartbeat_request(group, "no-such-member", epoch))
    call("ConsumerGroupHeartbeat of an unknown group",
         consumer_heartbeat_request(session.name(f"cgh-missing-v{version}"), member, 1))
    call("ConsumerGroupHeartbeat without a group id", consumer_heartbeat_request("", member, 0, topics=[topic],
                                                                                  owned=[]))
    call("ConsumerGroupHeartbeat with an invalid epoch", consumer_heartbeat_request(group, member, -3))
    call("ConsumerGroupHeartbeat joining without a subscription",
         consumer_heartbeat_request(group, member + "-2", 0, owned=[]))
    call("ConsumerGroupHeartbeat naming an unknown assignor",
         consumer_heartbeat_request(group, member + "-2", 0, topics=[topic], owned=[], server_assignor="sticky"))
    call("ConsumerGroupHeartbeat leaving", consumer_heartbeat_request(group, member, -1))
    static = session.name(f"cgh-static-v{version}")
    find_group_coordinator(session, static)
    call("ConsumerGroupHeartbeat joining as a static member",
         consumer_heartbeat_request(static, member, 0, topics=[topic], owned=[], instance_id="instance-1"))
    call("ConsumerGroupHeartbeat of a second member with the same instance id",
         consumer_heartbeat_request(static, member + "-2", 0, topics=[topic], owned=[], instance_id="instance-1"))
    call("ConsumerGroupHeartbeat of a static member leaving for a while",
         consumer_heartbeat_request(static, member, -2, instance_id="instance-1"))
    call("ConsumerGroupHeartbeat of the static member's next incarnation",
         consumer_heartbeat_request(static, member + "-2", 0, topics=[topic], owned=[], instance_id="instance-1"))


def consumer_group_describe(session: BrokerSession, version: int) -> None:
    topic = session.name(f"cgd-v{version}")
    create_topic(session, topic, partitions=2)
    group = session.name(f"cgd-v{version}")
    consumer_member(session, group, topic, f"member-{session.suffix}-{version}")
    classic = session.name(f"cgd-classic-v{version}")
    joined_member(session, classic)
    missing = session.name(f"cgd-missing-v{version}")
    session.call(ConsumerGroupDescribeRequest(group_ids=[group, classic, missing]), version,
                 "ConsumerGroupDescribe of a consumer group, a classic group and an unknown group")
    session.call(ConsumerGroupDescribeRequest(group_ids=[group], include_authorized_operations=True), version,
                 "ConsumerGroupDescribe with the authorized operations")


def find_coordinator(session: BrokerSession, version: int) -> None:
    def call(label: str, key: str, key_type: int) -> None:
        if version >= 4:
            request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
        else:
            request = FindCoordinatorRequest(key=key, key_type=key_type if version >= 1 else 0)
        session.call(request, version, label)

    call("FindCoordinator of a group", session.name(f"coordinator-v{version}"), 0)
    if version >= 1:
        call("FindCoordinator of a transactional id", session.name(f"coordinator-txn-v{version}"), 1)
        call("FindCoordinator of an unknown key type", session.name(f"coordinator-bad-v{version}"), 7)


# --- idempotence and transactions ---------------------------------------------------------------------------------

def init_producer(session: BrokerSession, transactional_id: str | None, version: int = 4,
                  label: str = "setup InitProducerId") -> tuple[int, int]:
    """InitProducerId; the producer id and epoch, or (-1, -1) if refused."""
    if transactional_id is not None:
        session.call(FindCoordinatorRequest(key_type=1, coordinator_keys=[transactional_id]), 4,
                     "setup FindCoordinator")
    response = session.call(InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=60_000),
                            version, label)
    if response is None or response.error_code != 0:
        return -1, -1
    return response.producer_id, response.producer_epoch


def init_producer_id(session: BrokerSession, version: int) -> None:
    init_producer(session, None, version, "InitProducerId without a transactional id")
    transactional_id = session.name(f"init-v{version}")
    producer_id, epoch = init_producer(session, transactional_id, version, "InitProducerId")
    init_producer(session, transactional_id, version, "InitProducerId again (bumps the epoch)")
    if version >= 3:
        session.call(InitProducerIdRequest(transactional_id=transactional_id, transaction_timeout_ms=60_000,
                                           producer_id=producer_id, producer_epoch=epoch), version,
                     "InitProducerId with a stale epoch")
    session.call(InitProducerIdRequest(transactional_id=session.name(f"init-timeout-v{version}"),
                                       transaction_timeout_ms=10 * 24 * 3600 * 1000), version,
                 "InitProducerId with a timeout over transaction.max.timeout.ms")


def add_partitions_to_txn(session: BrokerSession, version: int) -> None:
    topic = session.name(f"txn-add-v{version}")
    create_topic(session, topic)
    transactional_id = session.name(f"txn-add-v{version}")
    producer_id, epoch = init_producer(session, transactional_id)

    def call(label: str, topic_name: str, partitions: list[int], pid: int = producer_id, pepoch: int = epoch,
             txn_id: str = transactional_id) -> None:
        topics = [AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic_name, partitions=partitions)]
        if version >= 4:
            request = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                transactional_id=txn_id, producer_id=pid, producer_epoch=pepoch, topics=topics)])
        else:
            request = AddPartitionsToTxnRequest(v3_and_below_transactional_id=txn_id, v3_and_below_producer_id=pid,
                                                v3_and_below_producer_epoch=pepoch, v3_and_below_topics=topics)
        session.call(request, version, label)

    call("AddPartitionsToTxn", topic, [0])
    call("AddPartitionsToTxn of an unknown topic", session.name(f"txn-add-missing-v{version}"), [0])
    call("AddPartitionsToTxn with a stale epoch", topic, [0], pepoch=epoch - 1)
    call("AddPartitionsToTxn with a wrong producer id", topic, [0], pid=producer_id + 1000)
    call("AddPartitionsToTxn of an unknown transactional id", topic, [0],
         txn_id=session.name(f"txn-add-none-v{version}"))


def end_txn(session: BrokerSession, version: int) -> None:
    topic = session.name(f"txn-end-v{version}")
    create_topic(session, topic)
    transactional_id = session.name(f"txn-end-v{version}")
    producer_id, epoch = init_producer(session, transactional_id)

    def call(label: str, committed: bool, pepoch: int) -> None:
        session.call(EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id,
                                   producer_epoch=pepoch, committed=committed), version, label)

    call("EndTxn with no transaction open", True, epoch)
    session.call(AddPartitionsToTxnRequest(v3_and_below_transactional_id=transactional_id,
                                           v3_and_below_producer_id=producer_id, v3_and_below_producer_epoch=epoch,
                                           v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(
                                               name=topic, partitions=[0])]), 3, "setup AddPartitionsToTxn")
    call("EndTxn with a stale epoch", True, epoch - 1)
    call("EndTxn commit", True, epoch)


def add_offsets_to_txn(session: BrokerSession, version: int) -> None:
    topic = session.name(f"txn-offsets-v{version}")
    create_topic(session, topic)
    transactional_id = session.name(f"txn-offsets-v{version}")
    group = session.name(f"txn-offsets-v{version}")
    producer_id, epoch = init_producer(session, transactional_id)
    session.call(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4, "setup FindCoordinator")

    def call(label: str, pepoch: int, group_id: str = group) -> None:
        session.call(AddOffsetsToTxnRequest(transactional_id=transactional_id, producer_id=producer_id,
                                            producer_epoch=pepoch, group_id=group_id), version, label)

    call("AddOffsetsToTxn", epoch)
    call("AddOffsetsToTxn with a stale epoch", epoch - 1)
    Topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    Partition = TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition
    session.call(TxnOffsetCommitRequest(transactional_id=transactional_id, group_id=group, producer_id=producer_id,
                                        producer_epoch=epoch, topics=[Topic(name=topic, partitions=[
                                            Partition(partition_index=0, committed_offset=1)])]), 3,
                 "setup TxnOffsetCommit")
    session.call(EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch,
                               committed=False), 4, "setup EndTxn abort")


def txn_offset_commit(session: BrokerSession, version: int) -> None:
    topic = session.name(f"txn-commit-v{version}")
    create_topic(session, topic)
    transactional_id = session.name(f"txn-commit-v{version}")
    group = session.name(f"txn-commit-v{version}")
    producer_id, epoch = init_producer(session, transactional_id)
    session.call(FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4, "setup FindCoordinator")
    session.call(AddOffsetsToTxnRequest(transactional_id=transactional_id, producer_id=producer_id,
                                        producer_epoch=epoch, group_id=group), 3, "setup AddOffsetsToTxn")
    Topic = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    Partition = TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition

    def call(label: str, pepoch: int, topic_name: str = topic, generation: int = -1, member: str = "") -> None:
        partition_fields: dict = {"partition_index": 0, "committed_offset": 4, "committed_metadata": "m"}
        if version >= 2:
            partition_fields["committed_leader_epoch"] = 0
        fields: dict = {"generation_id_or_member_epoch": generation, "member_id": member} if version >= 3 else {}
        session.call(TxnOffsetCommitRequest(transactional_id=transactional_id, group_id=group,
                                            producer_id=producer_id, producer_epoch=pepoch, topics=[Topic(
                                                partitions=[Partition(**partition_fields)],
                                                **topic_by(session, topic_name, version >= 6))],
                                            **fields), version, label)

    call("TxnOffsetCommit", epoch)
    call("TxnOffsetCommit with a stale epoch", epoch - 1)
    call("TxnOffsetCommit of an unknown topic", epoch, topic_name=session.name(f"txn-commit-missing-v{version}"))
    if version >= 3:
        call("TxnOffsetCommit with a generation of a group without members", epoch, generation=3,
             member="no-such-member")
    session.call(EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id, producer_epoch=epoch,
                               committed=True), 4, "setup EndTxn commit")


def write_txn_markers(session: BrokerSession, version: int) -> None:
    topic = session.name(f"markers-v{version}")
    create_topic(session, topic)
    Marker = WriteTxnMarkersRequest.WritableTxnMarker
    MarkerTopic = WriteTxnMarkersRequest.WritableTxnMarkerTopic

    def call(label: str, topic_name: str) -> None:
        session.call(WriteTxnMarkersRequest(markers=[Marker(
            producer_id=123456, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
            topics=[MarkerTopic(name=topic_name, partition_indexes=[0])])]), version, label)

    call("WriteTxnMarkers abort of a producer with no transaction", topic)
    call("WriteTxnMarkers of an unknown topic", session.name(f"markers-missing-v{version}"))
    if version >= 2:
        session.call(WriteTxnMarkersRequest(markers=[Marker(
            producer_id=123457, producer_epoch=0, transaction_result=True, coordinator_epoch=0, transaction_version=2,
            topics=[MarkerTopic(name=topic, partition_indexes=[0])])]), version,
            "WriteTxnMarkers commit of transaction version 2")


def describe_transactions(session: BrokerSession, version: int) -> None:
    transactional_id = session.name(f"describe-txn-v{version}")
    init_producer(session, transactional_id)
    session.call(DescribeTransactionsRequest(transactional_ids=[
        transactional_id, session.name(f"describe-txn-none-v{version}")]), version,
        "DescribeTransactions of an id and an unknown one")


def list_transactions(session: BrokerSession, version: int) -> None:
    transactional_id = session.name(f"list-txn-v{version}")
    init_producer(session, transactional_id)
    fields = {"duration_filter": -1} if version >= 1 else {}
    session.call(ListTransactionsRequest(state_filters=[], producer_id_filters=[], **fields), version,
                 "ListTransactions")
    keep_own(session, "transaction_states", "transactional_id", "list-txn-")
    session.call(ListTransactionsRequest(state_filters=["Empty"], producer_id_filters=[], **fields), version,
                 "ListTransactions of Empty ones")
    keep_own(session, "transaction_states", "transactional_id", "list-txn-")
    session.call(ListTransactionsRequest(state_filters=["NoSuchState"], producer_id_filters=[], **fields),
                 version, "ListTransactions of an unknown state")
    keep_own(session, "transaction_states", "transactional_id", "list-txn-")
    if version >= 1:
        session.call(ListTransactionsRequest(state_filters=[], producer_id_filters=[], duration_filter=3_600_000),
                     version, "ListTransactions running for over an hour")
        keep_own(session, "transaction_states", "transactional_id", "list-txn-")
    if version >= 2:
        session.call(ListTransactionsRequest(state_filters=[], producer_id_filters=[], duration_filter=-1,
                                             transactional_id_pattern=f".*{transactional_id[-12:]}"),
                     version, "ListTransactions of ids matching a pattern")
        session.call(ListTransactionsRequest(state_filters=[], producer_id_filters=[], duration_filter=-1,
                                             transactional_id_pattern="list-txn"),
                     version, "ListTransactions of a pattern no whole id matches")
        session.call(ListTransactionsRequest(state_filters=[], producer_id_filters=[], duration_filter=-1,
                                             transactional_id_pattern="list-txn-[("),
                     version, "ListTransactions of an invalid pattern")


def describe_producers(session: BrokerSession, version: int) -> None:
    topic = session.name(f"producers-v{version}")
    create_topic(session, topic, partitions=2)
    producer_id, epoch = init_producer(session, None)
    produce(session, topic, records(count=2, base_sequence=0, producer_id=producer_id, producer_epoch=epoch))
    Request = DescribeProducersRequest.TopicRequest
    session.call(DescribeProducersRequest(topics=[Request(name=topic, partition_indexes=[0, 1, 7]), Request(
        name=session.name(f"producers-missing-v{version}"), partition_indexes=[0])]), version,
        "DescribeProducers of a partition with a producer, one without, an unknown one and an unknown topic")


# --- configs -------------------------------------------------------------------------------------------------------

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
#: Broker configs whose values both brokers hold at Kafka's defaults (the rest of a broker's configs: kfk knows
#: Kafka's keys for what it implements, not all of Kafka's).
BROKER_KEYS = ["num.partitions", "log.retention.hours", "message.max.bytes", "auto.create.topics.enable",
               "default.replication.factor", "log.segment.bytes", "log.cleanup.policy", "compression.type",
               "min.insync.replicas", "offsets.topic.num.partitions", "unclean.leader.election.enable"]


def describe_configs(session: BrokerSession, version: int) -> None:
    topic = session.name(f"describe-configs-v{version}")
    create_topic(session, topic, configs={"retention.ms": "3600000", "cleanup.policy": "compact"})
    Resource = DescribeConfigsRequest.DescribeConfigsResource

    def call(label: str, *resources: DescribeConfigsRequest.DescribeConfigsResource) -> None:
        fields: dict = {}
        if version >= 1:
            fields["include_synonyms"] = True
        if version >= 3:
            fields["include_documentation"] = False
        session.call(DescribeConfigsRequest(resources=list(resources), **fields), version, label)

    call("DescribeConfigs of a topic", Resource(resource_type=TOPIC_RESOURCE, resource_name=topic,
                                                configuration_keys=None))
    call("DescribeConfigs of some keys of a topic", Resource(
        resource_type=TOPIC_RESOURCE, resource_name=topic, configuration_keys=["retention.ms", "no.such.config"]))
    call("DescribeConfigs of an unknown topic", Resource(
        resource_type=TOPIC_RESOURCE, resource_name=session.name(f"describe-configs-missing-v{version}"),
        configuration_keys=None))
    call("DescribeConfigs of broker configs", Resource(resource_type=BROKER_RESOURCE, resource_name="1",
                                                       configuration_keys=BROKER_KEYS))
    call("DescribeConfigs of another broker", Resource(resource_type=BROKER_RESOURCE, resource_name="7",
                                                       configuration_keys=["num.partitions"]))
    call("DescribeConfigs of an unknown resource type", Resource(resource_type=99, resource_name="x",
                                                                 configuration_keys=None))


def alter_configs(session: BrokerSession, version: int) -> None:
    topic = session.name(f"alter-configs-v{version}")
    create_topic(session, topic)
    Resource = AlterConfigsRequest.AlterConfigsResource
    Config = AlterConfigsRequest.AlterableConfig

    def call(label: str, name: str, configs: dict[str, str | None], validate_only: bool = False,
             resource_type: int = TOPIC_RESOURCE) -> None:
        session.call(AlterConfigsRequest(validate_only=validate_only, resources=[Resource(
            resource_type=resource_type, resource_name=name,
            configs=[Config(name=k, value=v) for k, v in configs.items()])]), version, label)

    call("AlterConfigs of a topic", topic, {"retention.ms": "7200000", "segment.bytes": "1048576"})
    call("AlterConfigs validate only", topic, {"retention.ms": "1"}, validate_only=True)
    call("AlterConfigs with a bad value", topic, {"retention.ms": "soon"})
    call("AlterConfigs with an unknown config", topic, {"no.such.config": "1"})
    call("AlterConfigs with a value out of range", topic, {"min.insync.replicas": "0"})
    call("AlterConfigs of an unknown topic", session.name(f"alter-configs-missing-v{version}"),
         {"retention.ms": "1"})
    call("AlterConfigs of a read-only broker config", "1", {"log.dirs": "/tmp/elsewhere"},
         resource_type=BROKER_RESOURCE)
    describe = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=topic, configuration_keys=["retention.ms", "segment.bytes"])])
    session.call(describe, 4, "DescribeConfigs after AlterConfigs")


def incremental_alter_configs(session: BrokerSession, version: int) -> None:
    topic = session.name(f"incremental-configs-v{version}")
    create_topic(session, topic, configs={"retention.ms": "3600000"})
    Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    Config = IncrementalAlterConfigsRequest.AlterableConfig
    SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

    def call(label: str, name: str, *configs: tuple[str, int, str | None], validate_only: bool = False) -> None:
        session.call(IncrementalAlterConfigsRequest(validate_only=validate_only, resources=[Resource(
            resource_type=TOPIC_RESOURCE, resource_name=name,
            configs=[Config(name=k, config_operation=op, value=v) for k, op, v in configs])]), version, label)

    call("IncrementalAlterConfigs set and delete", topic, ("segment.ms", SET, "600000"),
         ("retention.ms", DELETE, None))
    call("IncrementalAlterConfigs append to a list", topic, ("cleanup.policy", APPEND, "compact"))
    call("IncrementalAlterConfigs subtract from a list", topic, ("cleanup.policy", SUBTRACT, "delete"))
    call("IncrementalAlterConfigs append to a non-list", topic, ("retention.ms", APPEND, "1"))
    call("IncrementalAlterConfigs with a bad value", topic, ("retention.ms", SET, "soon"))
    call("IncrementalAlterConfigs with an unknown config", topic, ("no.such.config", SET, "1"))
    call("IncrementalAlterConfigs with an unknown operation", topic, ("retention.ms", 9, "1"))
    call("IncrementalAlterConfigs naming a config twice", topic, ("retention.ms", SET, "1"), ("retention.ms", SET, "2"))
    call("IncrementalAlterConfigs of an unknown topic", session.name(f"incremental-configs-missing-v{version}"),
         ("retention.ms", SET, "1"))
    session.call(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=TOPIC_RESOURCE, resource_name=topic,
        configuration_keys=["retention.ms", "segment.ms", "cleanup.policy"])]), 4,
        "DescribeConfigs after IncrementalAlterConfigs")
    group_configs(session, version)


def group_configs(session: BrokerSession, version: int) -> None:
    """A group's configs (kafka-configs --entity-type groups): Kafka's checks of each key (its type and validator,
    the broker's bounds, the session timeout above the heartbeat interval), then every group config described
    with where its value comes from."""
    group = session.name(f"group-configs-v{version}")
    SET, DELETE, APPEND = 0, 1, 2

    def call(label: str, name: str, *configs: tuple[str, int, str | None]) -> None:
        Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
        Config = IncrementalAlterConfigsRequest.AlterableConfig
        session.call(IncrementalAlterConfigsRequest(validate_only=False, resources=[Resource(
            resource_type=ConfigResourceType.GROUP, resource_name=name,
            configs=[Config(name=k, config_operation=op, value=v) for k, op, v in configs])]), version, label)

    call("IncrementalAlterConfigs of a group", group, ("share.auto.offset.reset", SET, "earliest"),
         ("consumer.session.timeout.ms", SET, "50000"), ("share.isolation.level", SET, "read_committed"))
    call("IncrementalAlterConfigs of a group: by_duration", group, ("share.auto.offset.reset", SET, "by_duration:PT1H"))
    call("IncrementalAlterConfigs of a group: a bad reset", group, ("share.auto.offset.reset", SET, "sometime"))
    call("IncrementalAlterConfigs of a group: not a number", group, ("consumer.session.timeout.ms", SET, "abc"))
    call("IncrementalAlterConfigs of a group: under the broker's bounds", group,
         ("consumer.session.timeout.ms", SET, "1000"))
    call("IncrementalAlterConfigs of a group: under the key's floor", group,
         ("share.record.lock.duration.ms", SET, "100"))
    call("IncrementalAlterConfigs of a group: over the broker's bounds", group,
         ("share.delivery.count.limit", SET, "100"))
    call("IncrementalAlterConfigs of a group: an unknown key", group, ("no.such.group.config", SET, "1"))
    call("IncrementalAlterConfigs of a group: append to a non-list", group, ("share.auto.offset.reset", APPEND, "x"))
    call("IncrementalAlterConfigs of a group: delete a key", group, ("share.isolation.level", DELETE, None))
    call("IncrementalAlterConfigs of the default group", "", ("share.auto.offset.reset", SET, "earliest"))
    describe = DescribeConfigsRequest.DescribeConfigsResource
    session.call(DescribeConfigsRequest(include_synonyms=True, resources=[
        describe(resource_type=ConfigResourceType.GROUP, resource_name=group, configuration_keys=None)]), 4,
        "DescribeConfigs of every config of a group")
    session.call(DescribeConfigsRequest(include_synonyms=True, resources=[
        describe(resource_type=ConfigResourceType.GROUP, resource_name="", configuration_keys=None)]), 4,
        "DescribeConfigs of the default group")


# --- cluster and partitions administration ------------------------------------------------------------------------

def delete_records(session: BrokerSession, version: int) -> None:
    topic = session.name(f"delete-records-v{version}")
    create_topic(session, topic, partitions=2)
    produce(session, topic, records(count=5))
    Topic = DeleteRecordsRequest.DeleteRecordsTopic
    Partition = DeleteRecordsRequest.DeleteRecordsPartition

    def call(label: str, topic_name: str, partition: int, offset: int) -> None:
        session.call(DeleteRecordsRequest(timeout_ms=10_000, topics=[Topic(name=topic_name, partitions=[
            Partition(partition_index=partition, offset=offset)])]), version, label)

    call("DeleteRecords before offset 2", topic, 0, 2)
    call("DeleteRecords to the high watermark (-1)", topic, 0, -1)
    call("DeleteRecords past the high watermark", topic, 0, 50)
    call("DeleteRecords of an empty partition", topic, 1, 0)
    call("DeleteRecords of an unknown partition", topic, 9, 0)
    call("DeleteRecords of an unknown topic", session.name(f"delete-records-missing-v{version}"), 0, 0)


def describe_log_dirs(session: BrokerSession, version: int) -> None:
    topic = session.name(f"log-dirs-v{version}")
    create_topic(session, topic, partitions=2)
    Topic = DescribeLogDirsRequest.DescribableLogDirTopic
    session.call(DescribeLogDirsRequest(topics=[Topic(topic=topic, partitions=[0, 1, 5]), Topic(
        topic=session.name(f"log-dirs-missing-v{version}"), partitions=[0])]), version,
        "DescribeLogDirs of partitions, an unknown one and an unknown topic")


def alter_replica_log_dirs(session: BrokerSession, version: int) -> None:
    topic = session.name(f"alter-dirs-v{version}")
    create_topic(session, topic)
    Dir = AlterReplicaLogDirsRequest.AlterReplicaLogDir
    Topic = AlterReplicaLogDirsRequest.AlterReplicaLogDirTopic
    session.call(AlterReplicaLogDirsRequest(dirs=[Dir(path="/no/such/log/dir", topics=[
        Topic(name=topic, partitions=[0])])]), version, "AlterReplicaLogDirs to a directory that is not a log dir")


def elect_leaders(session: BrokerSession, version: int) -> None:
    topic = session.name(f"elect-v{version}")
    create_topic(session, topic)
    Partitions = ElectLeadersRequest.TopicPartitions

    def call(label: str, partitions: list | None, election_type: int = 0) -> None:
        fields = {"election_type": election_type} if version >= 1 else {}
        session.call(ElectLeadersRequest(topic_partitions=partitions, timeout_ms=10_000, **fields), version, label)

    call("ElectLeaders preferred of a partition led by its preferred replica", [Partitions(topic=topic,
                                                                                          partitions=[0])])
    call("ElectLeaders of an unknown partition", [Partitions(topic=topic, partitions=[4])])
    call("ElectLeaders of an unknown topic", [Partitions(topic=session.name(f"elect-missing-v{version}"),
                                                         partitions=[0])])
    if version >= 1:
        call("ElectLeaders unclean of a partition with a leader", [Partitions(topic=topic, partitions=[0])], 1)


def partition_reassignments(session: BrokerSession, version: int) -> None:
    topic = session.name(f"reassign-v{version}")
    create_topic(session, topic, partitions=2)
    Topic = AlterPartitionReassignmentsRequest.ReassignableTopic
    Partition = AlterPartitionReassignmentsRequest.ReassignablePartition

    def alter(label: str, topic_name: str, partition: int, replicas: list[int] | None, **fields: bool) -> None:
        session.call(AlterPartitionReassignmentsRequest(timeout_ms=10_000, topics=[Topic(name=topic_name, partitions=[
            Partition(partition_index=partition, replicas=replicas)])], **fields), version, label)

    alter("AlterPartitionReassignments to the same replicas", topic, 0, [1])
    alter("AlterPartitionReassignments to an unknown broker", topic, 0, [7])
    alter("AlterPartitionReassignments cancelling none", topic, 1, None)
    alter("AlterPartitionReassignments of an unknown partition", topic, 5, [1])
    alter("AlterPartitionReassignments of an unknown topic", session.name(f"reassign-missing-v{version}"), 0, [1])
    alter("AlterPartitionReassignments to no replicas", topic, 0, [])
    alter("AlterPartitionReassignments to a broker twice", topic, 0, [1, 1])
    if version >= 1:
        alter("AlterPartitionReassignments to the same replicas, the replication factor fixed", topic, 0, [1],
              allow_replication_factor_change=False)
        alter("AlterPartitionReassignments to no replicas, the replication factor fixed", topic, 0, [],
              allow_replication_factor_change=False)
    ListTopic = ListPartitionReassignmentsRequest.ListPartitionReassignmentsTopics
    if version == 0:  # ListPartitionReassignments has the one version
        session.call(ListPartitionReassignmentsRequest(timeout_ms=10_000, topics=[ListTopic(
            name=topic, partition_indexes=[0, 1, 5])]), 0, "ListPartitionReassignments of a topic")
        session.call(ListPartitionReassignmentsRequest(timeout_ms=10_000, topics=[ListTopic(
            name=session.name(f"reassign-none-v{version}"), partition_indexes=[0])]), 0,
            "ListPartitionReassignments of an unknown topic")


def describe_cluster(session: BrokerSession, version: int) -> None:
    fields: dict = {"include_cluster_authorized_operations": True}
    if version >= 1:
        fields["endpoint_type"] = 1
    if version >= 2:
        fields["include_fenced_brokers"] = True
    session.call(DescribeClusterRequest(**fields), version, "DescribeCluster")
    if version >= 1:
        session.call(DescribeClusterRequest(endpoint_type=2), version, "DescribeCluster of controller endpoints")
        session.call(DescribeClusterRequest(endpoint_type=7), version, "DescribeCluster of an unknown endpoint type")


def describe_quorum(session: BrokerSession, version: int) -> None:
    Topic = DescribeQuorumRequest.TopicData
    Partition = DescribeQuorumRequest.PartitionData
    session.call(DescribeQuorumRequest(topics=[Topic(topic_name="__cluster_metadata", partitions=[
        Partition(partition_index=0)])]), version, "DescribeQuorum")
    session.call(DescribeQuorumRequest(topics=[Topic(topic_name="__cluster_metadata", partitions=[
        Partition(partition_index=3)])]), version, "DescribeQuorum of an unknown partition")


def add_raft_voter(session: BrokerSession, version: int) -> None:
    """KIP-853 on a broker listener (forwarded to the controller): a controller that does not run."""
    for ack_when_committed in ([True, False] if version >= 1 else [True]):
        session.call(AddRaftVoterRequest(cluster_id=None, timeout_ms=2_000, voter_id=9,
                                         voter_directory_id=uuid.UUID(int=9), ack_when_committed=ack_when_committed,
                                         listeners=[AddRaftVoterRequest.Listener(name="CONTROLLER", host="127.0.0.1",
                                                                                 port=1)]),
                     version, f"AddRaftVoter of a controller that does not run (ack_when_committed "
                              f"{ack_when_committed})")


def remove_raft_voter(session: BrokerSession, version: int) -> None:
    session.call(RemoveRaftVoterRequest(cluster_id=None, voter_id=9, voter_directory_id=uuid.UUID(int=9)), version,
                 "RemoveRaftVoter of a controller that is no voter")


def list_config_resources(session: BrokerSession, version: int) -> None:
    session.call(ListConfigResourcesRequest(), version, "ListConfigResources")
    if version >= 1:
        keep_own(session, "config_resources", "resource_name", "")  # this run's topics, not the other tests'
        for label, types in [("of brokers", [ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER]),
                             ("of groups and client metrics", [ConfigResourceType.GROUP,
                                                               ConfigResourceType.CLIENT_METRICS]),
                             ("of an unknown type", [99])]:
            session.call(ListConfigResourcesRequest(resource_types=types), version, f"ListConfigResources {label}")
        session.call(ListConfigResourcesRequest(resource_types=[ConfigResourceType.TOPIC]), version,
                     "ListConfigResources of topics")
        keep_own(session, "config_resources", "resource_name", "")


def describe_topic_partitions(session: BrokerSession, version: int) -> None:
    first, second = session.name(f"describe-partitions-a-v{version}"), session.name(f"describe-partitions-b-v{version}")
    create_topic(session, first, partitions=3)
    create_topic(session, second, partitions=2)
    Topic = DescribeTopicPartitionsRequest.TopicRequest
    Cursor = DescribeTopicPartitionsRequest.Cursor

    def call(label: str, names: list[str], limit: int = 2000, cursor=None) -> None:
        session.call(DescribeTopicPartitionsRequest(topics=[Topic(name=n) for n in names],
                                                    response_partition_limit=limit, cursor=cursor), version, label)

    call("DescribeTopicPartitions", [first, second, session.name(f"describe-partitions-missing-v{version}")])
    call("DescribeTopicPartitions with a partition limit", [first, second], limit=2)
    call("DescribeTopicPartitions from a cursor", [first, second], cursor=Cursor(topic_name=first, partition_index=2))
    call("DescribeTopicPartitions from a cursor on an unknown topic", [first],
         cursor=Cursor(topic_name=session.name(f"describe-partitions-none-v{version}"), partition_index=0))


#: Every scenario with the API whose versions it loops.
def sasl_handshake(session: BrokerSession, version: int) -> None:
    """On a PLAINTEXT listener no SASL exchange can start: ILLEGAL_SASL_STATE, no mechanisms."""
    session.call(SaslHandshakeRequest(mechanism="PLAIN"), version, "SaslHandshake on a PLAINTEXT listener")


def sasl_authenticate(session: BrokerSession, version: int) -> None:
    session.call(SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"), version,
                 "SaslAuthenticate on a PLAINTEXT listener")


def _scram_upsertion(user: str, iterations: int = 4096, mechanism: int = ScramMechanism.SCRAM_SHA_256):
    salt = b"0123456789abcdef"
    salted = salted_password(ScramMechanism.SCRAM_SHA_256, b"secret", salt, 4096)
    return AlterUserScramCredentialsRequest.ScramCredentialUpsertion(
        name=user, mechanism=mechanism, iterations=iterations, salt=salt, salted_password=salted)


def alter_user_scram_credentials(session: BrokerSession, version: int) -> None:
    """One user per request (the order of several users' results is the broker's own)."""
    Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion
    user = session.name(f"scram-v{version}")
    for label, upsertions, deletions in [
            ("AlterUserScramCredentials", [_scram_upsertion(user)], []),
            ("AlterUserScramCredentials with too few iterations", [_scram_upsertion(user + "-few", 100)], []),
            ("AlterUserScramCredentials with too many iterations", [_scram_upsertion(user + "-many", 20000)], []),
            ("AlterUserScramCredentials of an unknown mechanism", [_scram_upsertion(user + "-mech", mechanism=7)], []),
            ("AlterUserScramCredentials of an empty user name", [_scram_upsertion("")], []),
            ("AlterUserScramCredentials of one credential twice", [_scram_upsertion(user)],
             [Deletion(name=user, mechanism=ScramMechanism.SCRAM_SHA_256)]),
            ("AlterUserScramCredentials deleting what does not exist", [],
             [Deletion(name=user + "-none", mechanism=ScramMechanism.SCRAM_SHA_512)])]:
        session.call(AlterUserScramCredentialsRequest(upsertions=upsertions, deletions=deletions), version, label)


def describe_user_scram_credentials(session: BrokerSession, version: int) -> None:
    UserName = DescribeUserScramCredentialsRequest.UserName
    user = session.name(f"scram-described-v{version}")
    session.call(AlterUserScramCredentialsRequest(upsertions=[_scram_upsertion(user, 8192)], deletions=[]), version,
                 record=False)
    request = DescribeUserScramCredentialsRequest(users=[UserName(name=user)])
    deadline = time.monotonic() + 30  # the broker's metadata learns the credential a moment after the controller
    while time.monotonic() < deadline:
        answer = session.call(request, version, record=False)
        if answer is not None and answer.results and answer.results[0].error_code == 0:
            break
        time.sleep(0.1)
    session.call(request, version, "DescribeUserScramCredentials")
    session.call(DescribeUserScramCredentialsRequest(users=[UserName(name=user + "-none")]), version,
                 "DescribeUserScramCredentials of a user without credentials")
    session.call(DescribeUserScramCredentialsRequest(users=[UserName(name=user), UserName(name=user)]), version,
                 "DescribeUserScramCredentials of one user twice")


# Delegation tokens: both nodes serve PLAINTEXT only (no token may be asked for by an unauthenticated client) and
# have no delegation.token.secret.key; this compares the refusals (tests/interop/test_delegation_tokens.py has the
# authenticated walk beside Apache Kafka).
def create_delegation_token(session: BrokerSession, version: int) -> None:
    Renewer = CreateDelegationTokenRequest.CreatableRenewers
    owner = {"owner_principal_type": "User", "owner_principal_name": "carol"} if version >= 3 else {}
    session.call(CreateDelegationTokenRequest(renewers=[Renewer(principal_type="User", principal_name="bob")],
                                              max_lifetime_ms=-1, **owner),
                 version, "CreateDelegationToken without authentication")


def renew_delegation_token(session: BrokerSession, version: int) -> None:
    session.call(RenewDelegationTokenRequest(hmac=b"\x01" * 64, renew_period_ms=60000), version,
                 "RenewDelegationToken without authentication")


def expire_delegation_token(session: BrokerSession, version: int) -> None:
    session.call(ExpireDelegationTokenRequest(hmac=b"\x01" * 64, expiry_time_period_ms=-1), version,
                 "ExpireDelegationToken without authentication")


def describe_delegation_token(session: BrokerSession, version: int) -> None:
    Owner = DescribeDelegationTokenRequest.DescribeDelegationTokenOwner
    for label, owners in [("of every owner", None), ("of no owner", []),
                          ("of one owner", [Owner(principal_type="User", principal_name="alice")])]:
        session.call(DescribeDelegationTokenRequest(owners=owners), version,
                     f"DescribeDelegationToken {label} without authentication")


def unregister_broker(session: BrokerSession, version: int) -> None:
    session.call(UnregisterBrokerRequest(broker_id=4242), version, "UnregisterBroker of a broker never registered")


def update_features(session: BrokerSession, version: int) -> None:
    """Refusals and dry runs only: both nodes are shared, and finalize transaction.version 2 (Kafka 4's default)."""
    Key = UpdateFeaturesRequest.FeatureUpdateKey

    def call(update: Key, what: str, validate_only: bool = False) -> None:
        session.call(UpdateFeaturesRequest(feature_updates=[update], validate_only=validate_only), version, what)

    call(Key(feature="kfk.no.such.feature", max_version_level=1), "UpdateFeatures of a feature no node knows")
    call(Key(feature="transaction.version", max_version_level=9), "UpdateFeatures above the supported range")
    call(Key(feature="transaction.version", max_version_level=-1), "UpdateFeatures to a negative level")
    call(Key(feature="transaction.version", max_version_level=1), "UpdateFeatures downgrading with an upgrade")
    if version >= 1:
        call(Key(feature="transaction.version", max_version_level=1, upgrade_type=2),
             "UpdateFeatures safe downgrade, validate only", validate_only=True)
        call(Key(feature="transaction.version", max_version_level=2, upgrade_type=2),
             "UpdateFeatures downgrade type to the current level, validate only", validate_only=True)
        call(Key(feature="transaction.version", max_version_level=1, upgrade_type=7),
             "UpdateFeatures with an upgrade type no one knows", validate_only=True)


# ACL ids (Kafka's): resource type ANY 1, TOPIC 2; pattern ANY 1, LITERAL 3; operation ANY 1, READ 3; permission
# ANY 1, ALLOW 3. Neither node runs an authorizer: both answer SECURITY_DISABLED, and this compares how.
def describe_acls(session: BrokerSession, version: int) -> None:
    session.call(DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
                                     principal_filter=None, host_filter=None, operation=1, permission_type=1),
                 version, "DescribeAcls of every ACL without an authorizer")


def create_acls(session: BrokerSession, version: int) -> None:
    creation = CreateAclsRequest.AclCreation(resource_type=2, resource_name=session.name("acl-topic"),
                                             resource_pattern_type=3, principal="User:alice", host="*", operation=3,
                                             permission_type=3)
    session.call(CreateAclsRequest(creations=[creation]), version, "CreateAcls without an authorizer")


def delete_acls(session: BrokerSession, version: int) -> None:
    acl_filter = DeleteAclsRequest.DeleteAclsFilter(resource_type_filter=2, resource_name_filter=None,
                                                    pattern_type_filter=1, principal_filter="User:alice",
                                                    host_filter=None, operation=1, permission_type=1)
    session.call(DeleteAclsRequest(filters=[acl_filter]), version, "DeleteAcls without an authorizer")


def alter_client_quotas(session: BrokerSession, version: int) -> None:
    Entry, Entity, Op = (AlterClientQuotasRequest.EntryData, AlterClientQuotasRequest.EntityData,
                         AlterClientQuotasRequest.OpData)
    client = session.name(f"quota-client-v{version}")
    entity = [Entity(entity_type="client-id", entity_name=client)]
    for label, ops, validate_only in [
            ("AlterClientQuotas validate only", [Op(key="producer_byte_rate", value=1024.0)], True),
            ("AlterClientQuotas", [Op(key="producer_byte_rate", value=1024.0)], False),
            ("AlterClientQuotas of an unknown key", [Op(key="no_such_quota", value=1.0)], False),
            ("AlterClientQuotas removing a key", [Op(key="producer_byte_rate", remove=True)], False)]:
        session.call(AlterClientQuotasRequest(entries=[Entry(entity=entity, ops=ops)], validate_only=validate_only),
                     version, label)


def describe_client_quotas(session: BrokerSession, version: int) -> None:
    Entry, Entity, Op = (AlterClientQuotasRequest.EntryData, AlterClientQuotasRequest.EntityData,
                         AlterClientQuotasRequest.OpData)
    client = session.name(f"quota-described-v{version}")
    session.call(AlterClientQuotasRequest(entries=[Entry(
        entity=[Entity(entity_type="client-id", entity_name=client)],
        ops=[Op(key="consumer_byte_rate", value=2048.0)])]), version, "AlterClientQuotas before a describe")
    Component = DescribeClientQuotasRequest.ComponentData
    request = DescribeClientQuotasRequest(components=[Component(entity_type="client-id", match_type=0, match=client)],
                                          strict=True)
    deadline = time.monotonic() + 30  # the broker's metadata learns the quota a moment after the controller
    while time.monotonic() < deadline:
        answer = session.call(request, version, record=False)
        if answer is not None and answer.entries:
            break
        time.sleep(0.1)
    session.call(request, version, "DescribeClientQuotas of one client-id")
    session.call(DescribeClientQuotasRequest(components=[Component(entity_type="client-id", match_type=0,
                                                                   match=client + "-none")], strict=True),
                 version, "DescribeClientQuotas of a client-id without quotas")


# --- share groups (KIP-932) ----------------------------------------------------------------------------------------

def share_join(session: BrokerSession, group: str, topic: str, member_id: str) -> None:
    """A share group member's first heartbeat, unrecorded: Apache Kafka assigns a partition only once its share
    coordinator has initialized the partition's state, a moment later (so the epochs and assignments it answers
    depend on the moment; kfk assigns at once)."""
    find_group_coordinator(session, group)
    session.call(ShareGroupHeartbeatRequest(group_id=group, member_id=member_id, member_epoch=0,
                                            subscribed_topic_names=[topic]), 1, record=False)


def share_group_reads_from_earliest(session: BrokerSession, group: str, timeout: float = 30.0) -> None:
    """Unrecorded: set the group's share.auto.offset.reset to earliest and wait until the broker describes it.
    Apache Kafka initializes a share partition a moment after the first fetch, at the log end offset of that moment
    (the default, latest): records produced right after the first fetch were acquired or not depending on the
    machine. From the earliest offset, the same records are acquired on either broker."""
    Resource = IncrementalAlterConfigsRequest.AlterConfigsResource
    Config = IncrementalAlterConfigsRequest.AlterableConfig
    session.call(IncrementalAlterConfigsRequest(validate_only=False, resources=[Resource(
        resource_type=ConfigResourceType.GROUP, resource_name=group, configs=[Config(
            name="share.auto.offset.reset", config_operation=0, value="earliest")])]), 1, record=False)
    describe = DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=ConfigResourceType.GROUP, resource_name=group,
        configuration_keys=["share.auto.offset.reset"])])
    deadline = time.monotonic() + timeout
    while True:
        response = session.call(describe, 4, record=False)
        if response is not None and any(config.value == "earliest" for result in response.results
                                        for config in result.configs):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"share.auto.offset.reset of group {group} not described after {timeout}s")
        time.sleep(0.1)


def share_warm_up(session: BrokerSession, timeout: float = 60.0) -> None:
    """Once per session, unrecorded: wait until a share group gets records. Apache Kafka creates its share
    coordinator's __share_group_state topic for the first share group, and until that one's partitions are
    initialized the group reads nothing (a moment that depends on the machine)."""
    if getattr(session, "share_warmed_up", False):
        return
    name = session.name("share-warm-up")
    create_topic(session, name)
    member_id = str(uuid.uuid4())
    share_join(session, name, name, member_id)
    the_id = topic_id(session, name)
    deadline = time.monotonic() + timeout
    for epoch in range(1_000_000):
        session.call(ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[ProduceRequest.TopicProduceData(
            name=name, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records(1))])]), 9,
            record=False)
        response = session.call(ShareFetchRequest(
            group_id=name, member_id=member_id, share_session_epoch=epoch, max_wait_ms=500, min_bytes=1,
            max_records=100, batch_size=100, topics=[ShareFetchRequest.FetchTopic(topic_id=the_id, partitions=[
                ShareFetchRequest.FetchPartition(partition_index=0)])]), 1, record=False)
        if response is not None and any(p.acquired_records for t in response.responses for p in t.partitions):
            session.share_warmed_up = True
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"no share group reads records after {timeout}s")


def share_group_heartbeat(session: BrokerSession, version: int) -> None:
    group, topic = session.name(f"share-heartbeat-v{version}"), session.name(f"share-heartbeat-v{version}")
    create_topic(session, topic, partitions=3)
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    share_join(session, group, topic, first)
    share_join(session, group, topic, second)

    def beat(label: str, member_id: str, member_epoch: int, topics: list[str] | None = None,
             group_id: str = group) -> None:
        session.call(ShareGroupHeartbeatRequest(group_id=group_id, member_id=member_id, member_epoch=member_epoch,
                                                subscribed_topic_names=topics), version, label)

    beat("ShareGroupHeartbeat of an unknown member", str(uuid.uuid4()), 5)
    beat("ShareGroupHeartbeat joining without a subscription", str(uuid.uuid4()), 0)
    beat("ShareGroupHeartbeat without a member id", "", 0, [topic])
    beat("ShareGroupHeartbeat without a group id", first, 0, [topic], group_id="")
    beat("ShareGroupHeartbeat: the second member leaves", second, -1)
    session.call(ListGroupsRequest(states_filter=[], types_filter=["share"]), 5, "ListGroups of share groups")
    keep_own(session, "groups", "group_id", "share-")
    session.call(DescribeGroupsRequest(groups=[group], include_authorized_operations=False), 5,
                 "DescribeGroups v5 of a share group")
    session.call(DescribeGroupsRequest(groups=[group], include_authorized_operations=False), 6,
                 "DescribeGroups v6 of a share group")


def share_group_describe(session: BrokerSession, version: int) -> None:
    session.call(ShareGroupDescribeRequest(group_ids=[session.name(f"share-describe-missing-v{version}")],
                                           include_authorized_operations=True), version,
                 "ShareGroupDescribe of an unknown group")


def share_records(session: BrokerSession, api: str, fetch_version: int, acknowledge_version: int,
                  offsets_version: int = 0) -> None:
    """One member through a share session: acquire, acknowledge, and the session errors; `api` names the topic and
    group after the API whose versions the run goes through."""
    share_warm_up(session)
    name = session.name(f"share-records-{api}-f{fetch_version}-a{acknowledge_version}-o{offsets_version}")
    create_topic(session, name)
    share_group_reads_from_earliest(session, name)
    member_id = str(uuid.uuid4())
    share_join(session, name, name, member_id)
    the_id = topic_id(session, name)
    Fetch, Ack = ShareFetchRequest, ShareAcknowledgeRequest

    def fetch(label: str | None, epoch: int, acks: list | None = None, max_wait_ms: int = 5000,
              member: str = member_id, partitions: bool = True) -> None:
        topics = [Fetch.FetchTopic(topic_id=the_id, partitions=[Fetch.FetchPartition(
            partition_index=0, acknowledgement_batches=acks or [])])] if partitions else []
        session.call(Fetch(group_id=name, member_id=member, share_session_epoch=epoch, max_wait_ms=max_wait_ms,
                           min_bytes=1, max_bytes=1 << 20, max_records=100, batch_size=100, topics=topics),
                     fetch_version, label or "", record=label is not None)

    def acknowledge(label: str, epoch: int, first: int, last: int, types: list[int]) -> None:
        session.call(Ack(group_id=name, member_id=member_id, share_session_epoch=epoch, topics=[Ack.AcknowledgeTopic(
            topic_id=the_id, partitions=[Ack.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                Ack.AcknowledgementBatch(first_offset=first, last_offset=last, acknowledge_types=types)])])]),
            acknowledge_version, label)

    def describe_offsets() -> None:
        Group, Topic = (DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup,
                        DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestTopic)
        session.call(DescribeShareGroupOffsetsRequest(groups=[
            Group(group_id=name, topics=[Topic(topic_name=name, partitions=[0])])]), offsets_version,
            "DescribeShareGroupOffsets of a partition the group read")
        session.call(DescribeShareGroupOffsetsRequest(groups=[Group(group_id=name, topics=None)]), offsets_version,
                     "DescribeShareGroupOffsets of every topic of the group")
        session.call(DescribeShareGroupOffsetsRequest(groups=[Group(
            group_id=session.name("share-offsets-unknown-group"), topics=[Topic(topic_name=name, partitions=[0])])]),
            offsets_version, "DescribeShareGroupOffsets of an unknown group")

    # Opening the session starts the group on the (empty) partition: what Apache Kafka answers depends on whether
    # its share coordinator has initialized the partition yet, so it is not compared (the group reads from the
    # earliest offset, so the records produced next are acquired whenever that happens).
    fetch(None, 0, max_wait_ms=1000)
    produce(session, name, records(count=3))
    fetch("ShareFetch acquiring three records", 1)
    acknowledge("ShareAcknowledge accepting two records and releasing one", 2, 0, 2, [1, 1, 2])
    if api == "offsets":
        describe_offsets()  # the start offset at the released record, the lag of that one record
    fetch("ShareFetch acquiring the released record again", 3)
    acknowledge("ShareAcknowledge with a stale session epoch", 3, 2, 2, [1])
    acknowledge("ShareAcknowledge rejecting the redelivered record", 4, 2, 2, [3])
    acknowledge("ShareAcknowledge of records done with", 5, 0, 2, [1])
    acknowledge("ShareAcknowledge opening a session", 0, 0, 0, [1])
    fetch("ShareFetch of a member without a session", 1, member=str(uuid.uuid4()))
    fetch("ShareFetch closing the share session", -1, partitions=False)
    fetch("ShareFetch after the session closed", 6)


def share_coordinator_knows_topic(session: BrokerSession, probe_group: str, the_id: uuid.UUID,
                                  timeout: float = 60.0) -> None:
    """Unrecorded: wait until the share coordinator knows a new topic, by initializing partition 0 of it for a group
    of its own. Apache Kafka's share coordinator learns of the topic from the metadata a moment after CreateTopics
    answers, and until then answers UNKNOWN_TOPIC_OR_PARTITION (CI saw it)."""
    key = f"{probe_group}:{uuid_to_base64(the_id)}:0"
    deadline = time.monotonic() + timeout
    while True:
        found = session.call(FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 6, record=False)
        if found is not None and found.coordinators[0].error_code == ErrorCode.NONE:
            answer = session.call(InitializeShareGroupStateRequest(group_id=probe_group, topics=[
                InitializeShareGroupStateRequest.InitializeStateData(topic_id=the_id, partitions=[
                    InitializeShareGroupStateRequest.PartitionData(partition=0, state_epoch=1, start_offset=0)])]),
                0, record=False)
            if answer is not None and answer.results[0].partitions[0].error_code == ErrorCode.NONE:
                return
        if time.monotonic() > deadline:
            raise AssertionError(f"the share coordinator did not learn of topic {the_id} in {timeout}s")
        time.sleep(0.1)


def share_state(session: BrokerSession, api: str, write_version: int = 1, summary_version: int = 1) -> None:
    """The share coordinator's state RPCs (what partition leaders' persisters send) for one share partition of a
    group of its own: initialized, read, written (and fenced), summarized, deleted. The share coordinator of the key
    is found first (unrecorded: the key holds the broker's own topic id; Apache Kafka's topic appears with the first
    share group, share_warm_up)."""
    share_warm_up(session)
    group = session.name(f"share-state-{api}-w{write_version}-s{summary_version}")
    topic = session.name(f"share-state-{api}-w{write_version}-s{summary_version}")
    create_topic(session, topic)
    the_id = topic_id(session, topic)
    key = f"{group}:{uuid_to_base64(the_id)}:0"
    deadline = time.monotonic() + 60
    while True:
        found = session.call(FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 6, record=False)
        if found is not None and found.coordinators[0].error_code == ErrorCode.NONE:
            break
        if time.monotonic() > deadline:
            raise AssertionError(f"no share coordinator for {key}")
        time.sleep(0.1)
    share_coordinator_knows_topic(session, f"{group}-probe", the_id)
    if api == "initialize":
        session.call(FindCoordinatorRequest(key_type=2, coordinator_keys=[f"{group}:not-a-topic-id:0"]), 6,
                     "FindCoordinator of a malformed share-partition key")
    Batch = WriteShareGroupStateRequest.StateBatch

    def initialize(label: str, state_epoch: int, start_offset: int) -> None:
        session.call(InitializeShareGroupStateRequest(group_id=group, topics=[
            InitializeShareGroupStateRequest.InitializeStateData(topic_id=the_id, partitions=[
                InitializeShareGroupStateRequest.PartitionData(partition=0, state_epoch=state_epoch,
                                                               start_offset=start_offset)])]), 0, label)

    def read(label: str, leader_epoch: int, partition: int = 0) -> None:
        session.call(ReadShareGroupStateRequest(group_id=group, topics=[ReadShareGroupStateRequest.ReadStateData(
            topic_id=the_id, partitions=[ReadShareGroupStateRequest.PartitionData(
                partition=partition, leader_epoch=leader_epoch)])]), 0, label)

    def write(label: str, leader_epoch: int, start_offset: int, batches: list, state_epoch: int = 1) -> None:
        session.call(WriteShareGroupStateRequest(group_id=group, topics=[WriteShareGroupStateRequest.WriteStateData(
            topic_id=the_id, partitions=[WriteShareGroupStateRequest.PartitionData(
                partition=0, state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
                state_batches=batches)])]), write_version, label)

    def summary(label: str, leader_epoch: int) -> None:
        session.call(ReadShareGroupStateSummaryRequest(group_id=group, topics=[
            ReadShareGroupStateSummaryRequest.ReadStateSummaryData(topic_id=the_id, partitions=[
                ReadShareGroupStateSummaryRequest.PartitionData(partition=0, leader_epoch=leader_epoch)])]),
            summary_version, label)

    read("ReadShareGroupState of a share partition with no state", 0)
    initialize("InitializeShareGroupState at offset 5", 1, 5)
    read("ReadShareGroupState after the initialization", 0)
    write("WriteShareGroupState of two batches", 1, 5, [Batch(first_offset=5, last_offset=6, delivery_state=2,
                                                            delivery_count=1),
                                                      Batch(first_offset=7, last_offset=9, delivery_state=0,
                                                            delivery_count=2)])
    write("WriteShareGroupState moving the start offset", 1, 7, [Batch(first_offset=8, last_offset=8,
                                                                        delivery_state=4, delivery_count=2)])
    read("ReadShareGroupState of the combined batches", 1)
    write("WriteShareGroupState of an older leader epoch", 0, 9, [])
    write("WriteShareGroupState of an older state epoch", 1, 9, [], state_epoch=0)
    summary("ReadShareGroupStateSummary", 1)
    read("ReadShareGroupState of a partition the topic has not", 0, partition=7)
    session.call(DeleteShareGroupStateRequest(group_id=group, topics=[DeleteShareGroupStateRequest.DeleteStateData(
        topic_id=the_id, partitions=[DeleteShareGroupStateRequest.PartitionData(partition=0)])]), 0,
        "DeleteShareGroupState")
    read("ReadShareGroupState after the deletion", 1)


def share_group_offsets(session: BrokerSession, api: str, version: int) -> None:
    """The share-group offsets admin APIs on an empty group: AlterShareGroupOffsets (which creates the group),
    DescribeShareGroupOffsets of what it set, the refusals while a member is in the group, DeleteShareGroupOffsets
    of whole topics, and DeleteGroups of the share group; `api` names the group and topics after the API whose
    versions the run goes through."""
    share_warm_up(session)
    group = session.name(f"share-admin-{api}-v{version}")
    topic, unread = session.name(f"share-admin-{api}-v{version}"), session.name(f"share-admin-unread-{api}-v{version}")
    missing = session.name(f"share-admin-missing-{api}-v{version}")
    create_topic(session, topic, partitions=2)
    create_topic(session, unread)
    produce(session, topic, records(count=5))
    find_group_coordinator(session, group)
    Alter, Delete = AlterShareGroupOffsetsRequest, DeleteShareGroupOffsetsRequest

    def alter(label: str, partitions: dict[str, list[tuple[int, int]]], group_id: str = group) -> None:
        session.call(Alter(group_id=group_id, topics=[Alter.AlterShareGroupOffsetsRequestTopic(
            topic_name=name, partitions=[Alter.AlterShareGroupOffsetsRequestPartition(
                partition_index=index, start_offset=offset) for index, offset in offsets])
            for name, offsets in partitions.items()]), version if api == "alter" else 0, label)

    def delete(label: str, topics: list[str], group_id: str = group) -> None:
        session.call(Delete(group_id=group_id, topics=[Delete.DeleteShareGroupOffsetsRequestTopic(topic_name=name)
                                                       for name in topics]),
                     version if api == "delete" else 0, label)

    def describe(label: str) -> None:
        session.call(DescribeShareGroupOffsetsRequest(groups=[
            DescribeShareGroupOffsetsRequest.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]), 1,
            label)

    alter("AlterShareGroupOffsets creating the group", {topic: [(0, 2), (1, 0)]})
    describe("DescribeShareGroupOffsets of the offsets set")
    alter("AlterShareGroupOffsets of an unknown topic", {missing: [(0, 1)]})
    alter("AlterShareGroupOffsets of an unknown partition", {topic: [(7, 1)]})
    alter("AlterShareGroupOffsets past the end and before the start", {topic: [(0, 100), (1, -5)]})
    alter("AlterShareGroupOffsets without a group id", {topic: [(0, 1)]}, group_id="")
    alter("AlterShareGroupOffsets of no topics", {})
    member_id = str(uuid.uuid4())
    share_join(session, group, topic, member_id)
    alter("AlterShareGroupOffsets of a group with a member", {topic: [(0, 1)]})
    delete("DeleteShareGroupOffsets of a group with a member", [topic])
    session.call(DeleteGroupsRequest(groups_names=[group]), 2, "DeleteGroups of a share group with a member")
    session.call(ShareGroupHeartbeatRequest(group_id=group, member_id=member_id, member_epoch=-1), 1,
                 record=False)
    delete("DeleteShareGroupOffsets of an unknown group", [topic], group_id=session.name(f"share-admin-none-{api}"))
    delete("DeleteShareGroupOffsets of an unknown topic", [missing])
    delete("DeleteShareGroupOffsets of a topic the group has no state for", [unread])
    delete("DeleteShareGroupOffsets", [topic])
    delete("DeleteShareGroupOffsets of a topic already deleted", [topic])
    delete("DeleteShareGroupOffsets without a group id", [topic], group_id="")
    delete("DeleteShareGroupOffsets of no topics", [])
    describe("DescribeShareGroupOffsets after the topic's offsets were deleted")
    session.call(DeleteGroupsRequest(groups_names=[group]), 2, "DeleteGroups of an empty share group")
    session.call(DeleteGroupsRequest(groups_names=[group]), 2, "DeleteGroups of a deleted share group")


SCENARIOS: list[tuple[int, Scenario]] = [
    (ApiKey.API_VERSIONS, api_versions),
    (ApiKey.API_VERSIONS, lambda session, version: unsupported_versions(session, version) if version == 0
     else None),
    (ApiKey.METADATA, metadata),
    (ApiKey.CREATE_TOPICS, create_topics),
    (ApiKey.DELETE_TOPICS, delete_topics),
    (ApiKey.CREATE_PARTITIONS, create_partitions),
    (ApiKey.PRODUCE, produce_scenario),
    (ApiKey.FETCH, fetch),
    (ApiKey.LIST_OFFSETS, list_offsets),
    (ApiKey.OFFSET_FOR_LEADER_EPOCH, offset_for_leader_epoch),
    (ApiKey.FIND_COORDINATOR, find_coordinator),
    (ApiKey.JOIN_GROUP, join_group),
    (ApiKey.SYNC_GROUP, sync_group),
    (ApiKey.HEARTBEAT, heartbeat),
    (ApiKey.LEAVE_GROUP, leave_group),
    (ApiKey.OFFSET_COMMIT, offset_commit),
    (ApiKey.OFFSET_FETCH, offset_fetch),
    (ApiKey.DESCRIBE_GROUPS, describe_groups),
    (ApiKey.LIST_GROUPS, list_groups),
    (ApiKey.DELETE_GROUPS, delete_groups),
    (ApiKey.CONSUMER_GROUP_HEARTBEAT, consumer_group_heartbeat),
    (ApiKey.CONSUMER_GROUP_DESCRIBE, consumer_group_describe),
    (ApiKey.OFFSET_DELETE, offset_delete),
    (ApiKey.INIT_PRODUCER_ID, init_producer_id),
    (ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_to_txn),
    (ApiKey.ADD_OFFSETS_TO_TXN, add_offsets_to_txn),
    (ApiKey.END_TXN, end_txn),
    (ApiKey.TXN_OFFSET_COMMIT, txn_offset_commit),
    (ApiKey.WRITE_TXN_MARKERS, write_txn_markers),
    (ApiKey.DESCRIBE_TRANSACTIONS, describe_transactions),
    (ApiKey.LIST_TRANSACTIONS, list_transactions),
    (ApiKey.DESCRIBE_PRODUCERS, describe_producers),
    (ApiKey.DESCRIBE_CONFIGS, describe_configs),
    (ApiKey.ALTER_CONFIGS, alter_configs),
    (ApiKey.INCREMENTAL_ALTER_CONFIGS, incremental_alter_configs),
    (ApiKey.DELETE_RECORDS, delete_records),
    (ApiKey.DESCRIBE_LOG_DIRS, describe_log_dirs),
    (ApiKey.ALTER_REPLICA_LOG_DIRS, alter_replica_log_dirs),
    (ApiKey.ELECT_LEADERS, elect_leaders),
    (ApiKey.ALTER_PARTITION_REASSIGNMENTS, partition_reassignments),
    (ApiKey.LIST_PARTITION_REASSIGNMENTS, lambda session, version: None),  # sent by partition_reassignments
    (ApiKey.DESCRIBE_CLUSTER, describe_cluster),
    (ApiKey.DESCRIBE_QUORUM, describe_quorum),
    (ApiKey.ADD_RAFT_VOTER, add_raft_voter),
    (ApiKey.REMOVE_RAFT_VOTER, remove_raft_voter),
    (ApiKey.LIST_CONFIG_RESOURCES, list_config_resources),
    (ApiKey.DESCRIBE_TOPIC_PARTITIONS, describe_topic_partitions),
    (ApiKey.SASL_HANDSHAKE, sasl_handshake),
    (ApiKey.SASL_AUTHENTICATE, sasl_authenticate),
    (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, alter_user_scram_credentials),
    (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, describe_user_scram_credentials),
    (ApiKey.CREATE_DELEGATION_TOKEN, create_delegation_token),
    (ApiKey.RENEW_DELEGATION_TOKEN, renew_delegation_token),
    (ApiKey.EXPIRE_DELEGATION_TOKEN, expire_delegation_token),
    (ApiKey.DESCRIBE_DELEGATION_TOKEN, describe_delegation_token),
    (ApiKey.UNREGISTER_BROKER, unregister_broker),
    (ApiKey.UPDATE_FEATURES, update_features),
    (ApiKey.DESCRIBE_ACLS, describe_acls),
    (ApiKey.CREATE_ACLS, create_acls),
    (ApiKey.DELETE_ACLS, delete_acls),
    (ApiKey.ALTER_CLIENT_QUOTAS, alter_client_quotas),
    (ApiKey.DESCRIBE_CLIENT_QUOTAS, describe_client_quotas),
    (ApiKey.SHARE_GROUP_HEARTBEAT, share_group_heartbeat),
    (ApiKey.SHARE_GROUP_DESCRIBE, share_group_describe),
    (ApiKey.SHARE_FETCH, lambda session, version: share_records(session, "fetch", version, 1)),
    (ApiKey.SHARE_ACKNOWLEDGE, lambda session, version: share_records(session, "acknowledge", 1, version)),
    (ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, lambda session, version: share_records(session, "offsets", 1, 1, version)),
    (ApiKey.INITIALIZE_SHARE_GROUP_STATE, lambda session, version: share_state(session, "initialize")),
    (ApiKey.READ_SHARE_GROUP_STATE, lambda session, version: None),  # sent by share_state
    (ApiKey.DELETE_SHARE_GROUP_STATE, lambda session, version: None),  # sent by share_state
    (ApiKey.WRITE_SHARE_GROUP_STATE, lambda session, version: share_state(session, "write", write_version=version)),
    (ApiKey.READ_SHARE_GROUP_STATE_SUMMARY,
     lambda session, version: share_state(session, "summary", summary_version=version)),
    (ApiKey.ALTER_SHARE_GROUP_OFFSETS, lambda session, version: share_group_offsets(session, "alter", version)),
    (ApiKey.DELETE_SHARE_GROUP_OFFSETS, lambda session, version: share_group_offsets(session, "delete", version)),
]
