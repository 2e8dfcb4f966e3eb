"""Produce over real sockets with kfk's own codec (tests/integration/wire.py): the answers a client sees for bad
input and topic settings, and that the broker keeps serving after them."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

from kfk.errors import ErrorCode
from kfk.protocol.headers import RequestHeader, encode_request
from kfk.protocol.messages.produce import ProduceRequest
from kfk.records import MemoryRecordsBuilder
from tests.integration.test_clients import create_topic, consume_all
from tests.integration.wire import api_versions_request, connect, request

pytestmark = pytest.mark.integration

TopicProduceData = ProduceRequest.TopicProduceData
PartitionProduceData = ProduceRequest.PartitionProduceData


def batch(values: list[bytes], keys: list[bytes | None] | None = None, timestamp: int = 1_000) -> bytes:
    builder = MemoryRecordsBuilder()
    for index, value in enumerate(values):
        builder.append(timestamp + index, keys[index] if keys else b"k", value)
    return bytes(builder.close())


def produce_request(topic: str, records: bytes, acks: int = 1, partition: int = 0) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=5000, topic_data=[TopicProduceData(
        name=topic, partition_data=[PartitionProduceData(index=partition, records=records)])])


def answer(response) -> tuple:
    partition = response.responses[0].partition_responses[0]
    return partition.error_code, partition.base_offset


def test_a_corrupt_batch_is_corrupt_message_and_the_broker_keeps_serving(kfk_broker: str) -> None:
    create_topic(kfk_broker, "corrupt")
    corrupt = bytearray(batch([b"a", b"b"]))
    corrupt[-3] ^= 0x55  # inside the records: the CRC no longer matches
    with connect(kfk_broker) as sock:
        assert answer(request(sock, produce_request("corrupt", bytes(corrupt)), 9)) == (ErrorCode.CORRUPT_MESSAGE, -1)
        # A batch cut short is no batch at all: from v3 a partition needs exactly one, so Kafka says INVALID_RECORD.
        truncated = batch([b"c"])[:-5]
        assert answer(request(sock, produce_request("corrupt", truncated), 9, 2))[0] == ErrorCode.INVALID_RECORD
        assert answer(request(sock, produce_request("corrupt", batch([b"ok"])), 9, 3)) == (ErrorCode.NONE, 0)
    assert [value for _, _, value, _ in consume_all(kfk_broker, "corrupt", 1, 1)[0]] == [b"ok"]


def test_acks_0_gets_no_response_and_the_connection_goes_on(kfk_broker: str) -> None:
    create_topic(kfk_broker, "fire-and-forget")
    with connect(kfk_broker) as sock:
        header = RequestHeader(request_api_key=0, request_api_version=9, correlation_id=41, client_id="t")
        sock.sendall(encode_request(header, produce_request("fire-and-forget", batch([b"x"]), acks=0)))
        # The next answer on this connection is the ApiVersions one: nothing came for the produce.
        assert request(sock, api_versions_request(), 3, correlation_id=42).error_code == ErrorCode.NONE
    assert consume_all(kfk_broker, "fire-and-forget", 1, 1)[0][0][2] == b"x"


def test_invalid_acks_and_unknown_partitions(kfk_broker: str) -> None:
    create_topic(kfk_broker, "acks")
    with connect(kfk_broker) as sock:
        assert answer(request(sock, produce_request("acks", batch([b"x"]), acks=2), 9))[0] == \
            ErrorCode.INVALID_REQUIRED_ACKS
        assert answer(request(sock, produce_request("acks", batch([b"x"]), partition=7), 9, 2))[0] == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert answer(request(sock, produce_request("no-such-topic-here", batch([b"x"])), 9, 3))[0] == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_log_append_time_is_returned_and_stamped(kfk_broker: str) -> None:
    create_topic(kfk_broker, "append-time", config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    with connect(kfk_broker) as sock:
        response = request(sock, produce_request("append-time", batch([b"a", b"b"], timestamp=5)), 9)
    partition = response.responses[0].partition_responses[0]
    assert partition.error_code == ErrorCode.NONE
    assert before <= partition.log_append_time_ms <= int(time.time() * 1000)
    assert partition.log_start_offset == 0


def test_topic_limits_and_compacted_topics(kfk_broker: str) -> None:
    create_topic(kfk_broker, "small", config={"max.message.bytes": "200"})
    create_topic(kfk_broker, "compacted", config={"cleanup.policy": "compact"})
    with connect(kfk_broker) as sock:
        assert answer(request(sock, produce_request("small", batch([b"x" * 500])), 9))[0] == \
            ErrorCode.MESSAGE_TOO_LARGE
        response = request(sock, produce_request("compacted", batch([b"a", b"b"], keys=[b"k", None])), 9, 2)
    partition = response.responses[0].partition_responses[0]
    assert partition.error_code == ErrorCode.INVALID_RECORD
    assert [error.batch_index for error in partition.record_errors] == [1]
    assert partition.error_message


def test_deleting_a_topic_removes_its_log_and_a_recreated_topic_starts_empty(kfk_broker_process) -> None:
    bootstrap = kfk_broker_process.bootstrap_servers
    create_topic(bootstrap, "doomed")
    with connect(bootstrap) as sock:
        assert answer(request(sock, produce_request("doomed", batch([b"a", b"b"])), 9)) == (ErrorCode.NONE, 0)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics(["doomed"])["doomed"].result(15)
    data_dir = kfk_broker_process.log_dir
    deadline = time.monotonic() + 10
    while (data_dir / "doomed-0").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not (data_dir / "doomed-0").exists()
    with connect(bootstrap) as sock:
        assert answer(request(sock, produce_request("doomed", batch([b"c"])), 9))[0] == \
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    create_topic(bootstrap, "doomed")
    with connect(bootstrap) as sock:
        assert answer(request(sock, produce_request("doomed", batch([b"new"])), 9)) == (ErrorCode.NONE, 0)


def test_a_topic_config_change_applies_to_the_next_append(kfk_broker: str) -> None:
    create_topic(kfk_broker, "reconfigured")
    admin = AdminClient({"bootstrap.servers": kfk_broker})
    resource = ConfigResource(ResourceType.TOPIC, "reconfigured", incremental_configs=[
        ConfigEntry("message.timestamp.type", "LogAppendTime", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(15)
    with connect(kfk_broker) as sock:
        response = request(sock, produce_request("reconfigured", batch([b"a"], timestamp=5)), 9)
    partition = response.responses[0].partition_responses[0]
    assert partition.error_code == ErrorCode.NONE and partition.log_append_time_ms > 5
