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

from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.api_versions import ApiVersionsRequest
from kfk.protocol.messages.create_partitions import CreatePartitionsRequest
from kfk.protocol.messages.create_topics import CreateTopicsRequest
from kfk.protocol.messages.delete_topics import DeleteTopicsRequest
from kfk.protocol.messages.fetch import FetchRequest
from kfk.protocol.messages.list_offsets import ListOffsetsRequest
from kfk.protocol.messages.metadata import MetadataRequest
from kfk.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from kfk.protocol.messages.produce import ProduceRequest
from kfk.records.builder import MemoryRecordsBuilder

from tests.interop.differential import BrokerSession, Scenario

#: Record timestamps are the scenario's, not a clock's, so that stored batches compare byte for byte.
RECORD_TIMESTAMP = 1_700_000_000_000
CreatableTopic = CreateTopicsRequest.CreatableTopic
TopicConfig = CreateTopicsRequest.CreatableTopicConfig


def records(count: int = 3, value_size: int = 10, base_sequence: int = -1, producer_id: int = -1,
            producer_epoch: int = -1) -> bytes:
    builder = MemoryRecordsBuilder(producer_id=producer_id, producer_epoch=producer_epoch,
                                   base_sequence=base_sequence)
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


def wait_for_leaders(session: BrokerSession, name: str, timeout: float = 10.0) -> None:
    """Poll Metadata (unrecorded) until every partition of the topic has a leader: Apache Kafka answers CreateTopics
    from its controller, and its broker learns the topic a moment later."""
    deadline = time.monotonic() + timeout
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                              allow_auto_topic_creation=False)
    while time.monotonic() < deadline:
        response = session.call(request, 12, record=False)
        if response is not None and response.topics and response.topics[0].error_code == 0 and all(
                partition.leader_id >= 0 for partition in response.topics[0].partitions):
            return
        time.sleep(0.05)
    raise AssertionError(f"topic {name} has no leader after {timeout}s")


def produce(session: BrokerSession, topic: str, data: bytes, version: int = 9, partition: int = 0,
            label: str = "setup produce") -> None:
    partition_data = ProduceRequest.PartitionProduceData(index=partition, records=data)
    session.call(ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[partition_data])]), version, label)


def topic_id(session: BrokerSession, topic: str) -> uuid.UUID:
    """The topic's id from Metadata v12 (recorded too); the zero uuid if the broker has none."""
    response = session.call(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                            allow_auto_topic_creation=False), 12, "setup topic id")
    if response is None or not response.topics:
        return uuid.UUID(int=0)
    return response.topics[0].topic_id


# --- ApiVersions ---------------------------------------------------------------------------------------------------

def api_versions(session: BrokerSession, version: int) -> None:
    request = ApiVersionsRequest()
    if version >= 3:
        request = ApiVersionsRequest(client_software_name="kfk-differential", client_software_version="1.0")
    session.call(request, version, "ApiVersions")
    if version >= 3:
        session.call(ApiVersionsRequest(client_software_name="bad name!", client_software_version="1.0"), version,
                     "ApiVersions with an invalid client software name")


def api_versions_unsupported(session: BrokerSession, version: int) -> None:
    """A version newer than both know: UNSUPPORTED_VERSION with the v0 answer (KIP-511). The request body is v3's
    (any newer body starts the same way); the header says the next version."""
    too_high = ApiVersionsRequest.HIGHEST_VERSION + 1
    body = ApiVersionsRequest(client_software_name="kfk-differential", client_software_version="1.0").encode(3)
    client_id = b"kfk-differential"
    header = struct.pack(">hhih", ApiKey.API_VERSIONS, too_high, 0, len(client_id)) + client_id + b"\x00"
    frame = struct.pack(">i", len(header) + len(body)) + header + body
    session.call_frame(frame, ApiKey.API_VERSIONS, too_high, "ApiVersions at an unknown version")


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
    session.call(DeleteTopicsRequest(topic_names=["__consumer_offsets"], timeout_ms=10_000) if version < 6 else
                 DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name="__consumer_offsets")],
                                     timeout_ms=10_000), version, "DeleteTopics of an internal topic")


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
    session.call(ProduceRequest(acks=2, timeout_ms=10_000, topic_data=[ProduceRequest.TopicProduceData(
        name=name, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=records())])]),
        version, "Produce with acks=2")


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


#: Every scenario with the API whose versions it loops.
SCENARIOS: list[tuple[int, Scenario]] = [
    (ApiKey.API_VERSIONS, api_versions),
    (ApiKey.API_VERSIONS, lambda session, version: api_versions_unsupported(session, version) if version == 0
     else None),
    (ApiKey.METADATA, metadata),
    (ApiKey.CREATE_TOPICS, create_topics),
    (ApiKey.DELETE_TOPICS, delete_topics),
    (ApiKey.CREATE_PARTITIONS, create_partitions),
    (ApiKey.PRODUCE, produce_scenario),
    (ApiKey.FETCH, fetch),
    (ApiKey.LIST_OFFSETS, list_offsets),
    (ApiKey.OFFSET_FOR_LEADER_EPOCH, offset_for_leader_epoch),
]
