"""Helpers of the multi-broker tests: waiting, partition state as Metadata reports it, exact produce errors, a stopped
KRaft node's metadata log."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, TypeVar

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from kfk.backends.embedded.record_serde import deserialize_record
from kfk.client import Admin, ConfigResource, ConfigResourceType
from kfk.common.config_types import ConfigSource
from kfk.common.internal_topics import CLUSTER_METADATA_TOPIC_NAME
from kfk.errors import ErrorCode
from kfk.protocol.message import Message
from kfk.protocol.messages.create_topics import CreateTopicsRequest
from kfk.protocol.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
from kfk.protocol.messages.produce import ProduceRequest
from kfk.records import MemoryRecordsBuilder, iter_batches
from tests.integration.wire import connect, request

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float = 20.0, interval: float = 0.1, what: str = "") -> T:
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except Exception as error:  # noqa: BLE001 - brokers may be restarting
            last_error = error
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what or condition} (last error: {last_error!r})")


def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 3000})


def create_topic(bootstrap: str, name: str, partitions: int = 3, replication_factor: int = 3,
                 config: dict[str, str] | None = None, assignment: list[list[int]] | None = None) -> None:
    """CreateTopics on whichever broker is the controller (kfk's codec: confluent-kafka refuses manual
    assignments)."""
    Topic = CreateTopicsRequest.CreatableTopic
    topic = Topic(name=name, num_partitions=-1 if assignment else partitions,
                  replication_factor=-1 if assignment else replication_factor,
                  assignments=[CreateTopicsRequest.CreatableReplicaAssignment(
                      partition_index=index, broker_ids=replicas) for index, replicas in enumerate(assignment or [])],
                  configs=[CreateTopicsRequest.CreatableTopicConfig(name=key, value=value)
                           for key, value in (config or {}).items()])

    def attempt() -> bool:
        for address in bootstrap.split(","):
            try:
                sock = connect(address, timeout=5)
            except OSError:
                continue
            try:
                response = request(sock, CreateTopicsRequest(topics=[topic], timeout_ms=10000), 5)
            finally:
                sock.close()
            error = response.topics[0].error_code
            if error == ErrorCode.NONE:
                return True
            if error != ErrorCode.NOT_CONTROLLER:
                raise AssertionError(f"CreateTopics {name}: {ErrorCode(error).name} {response.topics[0].error_message}")
        return False

    wait_until(attempt, timeout=15, what=f"topic {name} created")
    wait_until(lambda: all(p[0] >= 0 for p in partitions_of(bootstrap, name).values()), what=f"{name} leaders")


def partitions_of(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr) as the Metadata response of some broker says."""
    metadata = admin(bootstrap).list_topics(topic, timeout=5)
    found = metadata.topics[topic]
    if found.error is not None:
        raise AssertionError(str(found.error))
    return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in found.partitions.values()}


def controller_id(bootstrap: str) -> int:
    client = admin(bootstrap)
    return client.describe_cluster(request_timeout=5).result(10).controller.id


def consume_all(bootstrap: str, topic: str, partition_count: int, timeout: float = 30.0) -> dict[int, list[bytes]]:
    """Every record of every partition up to its end (read_committed off: up to the high watermark)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        ends = {}
        for index in range(partition_count):
            _, high = consumer.get_watermark_offsets(TopicPartition(topic, index), timeout=10)
            ends[index] = high
        consumer.assign([TopicPartition(topic, index, 0) for index in range(partition_count)])
        values: dict[int, list[bytes]] = {index: [] for index in range(partition_count)}
        positions = {index: 0 for index in range(partition_count)}
        deadline = time.monotonic() + timeout
        while any(positions[index] < ends[index] for index in ends) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            values[message.partition()].append(message.value())
            positions[message.partition()] = message.offset() + 1
        assert all(positions[index] >= ends[index] for index in ends), (positions, ends)
        return values
    finally:
        consumer.close()


def produce_error(bootstrap_of_leader: str, topic: str, partition: int, acks: int = -1,
                  timeout_ms: int = 3000) -> int:
    """Produce one record straight to a broker with kfk's codec; the partition's error code."""
    builder = MemoryRecordsBuilder()
    builder.append(int(time.time() * 1000), b"key", b"value")
    message = ProduceRequest(acks=acks, timeout_ms=timeout_ms, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=partition, records=builder.close())])])
    sock = connect(bootstrap_of_leader)
    try:
        response = request(sock, message, 9)
    finally:
        sock.close()
    return response.responses[0].partition_responses[0].error_code


def describe_quorum(controller_address: str, timeout: float = 2.0) -> DescribeQuorumResponse.PartitionData | None:
    """`__cluster_metadata`'s quorum as the node at `controller_address` (its controller listener) answers
    DescribeQuorum: the partition entry if that node leads, None if it does not (only the leader describes the
    quorum) or cannot be reached."""
    try:
        with connect(controller_address, timeout=timeout) as sock:
            response = request(sock, DescribeQuorumRequest(topics=[DescribeQuorumRequest.TopicData(
                topic_name=CLUSTER_METADATA_TOPIC_NAME,
                partitions=[DescribeQuorumRequest.PartitionData(partition_index=0)])]), 2)
    except OSError:
        return None
    (partition,) = response.topics[0].partitions
    return partition if partition.error_code == ErrorCode.NONE else None


partitions = partitions_of


def throttled_brokers(bootstrap: str, brokers: tuple[int, ...] = (1, 2, 3)) -> list[int]:
    """Which of `brokers` still carry a dynamic replication throttle rate (a reassignment's --throttle)."""
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        resources = [ConfigResource(ConfigResourceType.BROKER, str(broker)) for broker in brokers]
        described = admin.describe_configs(resources)
    return [int(resource.name) for resource in resources
            if any(key in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
                   and entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG for key, entry in described[resource].items())]


def metadata_log_batches(log_dir: Path) -> list[list[Message]]:
    """The metadata records of a KRaft node's __cluster_metadata-0 log (not its snapshots), batch by batch, read
    from its segment files (the node stopped, or at least not writing)."""
    batches = []
    for segment in sorted((log_dir / f"{CLUSTER_METADATA_TOPIC_NAME}-0").glob("*.log")):
        for batch in iter_batches(segment.read_bytes()):
            if not batch.is_control:
                batches.append([deserialize_record(record.value) for record in batch.records()])
    return batches
