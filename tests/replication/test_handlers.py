"""The data-path handlers in process: real request frames sent by librdkafka, kafka-python, aiokafka and kcat
(tests/data/golden) go through the dispatcher into a replica manager over real logs, and the answers are decoded
with kfk's codec at the version asked. Real clients over sockets are in tests/integration."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode
from kfk.protocol.headers import RequestHeader, decode_request_header, decode_response, encode_request
from kfk.protocol.messages import ApiKey, request_class
from kfk.protocol.messages.delete_records import DeleteRecordsRequest
from kfk.protocol.messages.describe_log_dirs import DescribeLogDirsRequest
from kfk.protocol.messages.fetch import FetchRequest
from kfk.protocol.messages.list_offsets import ListOffsetsRequest
from kfk.protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from kfk.protocol.messages.produce import ProduceRequest
from kfk.records import LegacyRecordsBuilder, iter_batches
from kfk.server.dispatch import SERVED_VERSIONS, CloseConnection, Dispatcher
from kfk.server.handlers.delete_records import DeleteRecordsHandler
from kfk.server.handlers.describe_log_dirs import DescribeLogDirsHandler
from kfk.common.clock import system_time_ms
from kfk.server.fetch_session import FetchSessionCache
from kfk.server.handlers.fetch import FetchHandler
from kfk.server.handlers.list_offsets import ListOffsetsHandler
from kfk.server.handlers.offset_for_leader_epoch import OffsetForLeaderEpochHandler
from kfk.server.handlers.produce import FIRST_TOPIC_ID_VERSION, ProduceHandler
from kfk.storage.fetch_data_info import FileRegion
from tests.protocol.golden import frame, request_entries
from tests.replication.conftest import Broker, topic_records
from tests.storage.conftest import make_batch

DATA_APIS = {ApiKey.PRODUCE: "Produce", ApiKey.FETCH: "Fetch", ApiKey.LIST_OFFSETS: "ListOffsets",
             ApiKey.DELETE_RECORDS: "DeleteRecords", ApiKey.OFFSET_FOR_LEADER_EPOCH: "OffsetForLeaderEpoch",
             ApiKey.DESCRIBE_LOG_DIRS: "DescribeLogDirs"}


def golden(api_name: str) -> list[dict]:
    return [entry for entry in request_entries() if entry["api_name"] == api_name]


def served(api_key: ApiKey) -> range:
    """Every version kfk serves of the API."""
    versions = SERVED_VERSIONS[api_key]
    return range(versions.lowest, versions.highest + 1)


def dispatcher_for(broker: Broker) -> Dispatcher:
    dispatcher = Dispatcher()
    for handler_class in (ProduceHandler, ListOffsetsHandler, DeleteRecordsHandler, OffsetForLeaderEpochHandler,
                          DescribeLogDirsHandler):
        handler_class(broker.replica_manager).register(dispatcher)
    FetchHandler(broker.replica_manager, FetchSessionCache(10, system_time_ms),
                 broker.config.fetch_max_bytes).register(dispatcher)
    return dispatcher


def dispatch(broker: Broker, request_frame: bytes):
    """The decoded response (None for no response), after sending the frame through the handlers."""
    header, _ = decode_request_header(request_frame)
    chunks = asyncio.run(dispatcher_for(broker).dispatch(request_frame, "127.0.0.1", 1, "PLAINTEXT"))
    if chunks is None:
        return None
    data = b"".join(chunk.read_bytes() if isinstance(chunk, FileRegion) else bytes(chunk) for chunk in chunks)
    correlation_id, response = decode_response(data[4:], header.request_api_key, header.request_api_version)
    assert correlation_id == header.correlation_id
    return response


def decode_request(request_frame: bytes):
    header, position = decode_request_header(request_frame)
    return header, request_class(header.request_api_key).decode(request_frame, header.request_api_version, position)


def create_topics_for(broker: Broker, topics: dict[str, tuple[uuid.UUID | None, int]]) -> None:
    """Topics named (or identified) by a request, with enough partitions for every index it uses."""
    records = []
    for name, (topic_id, max_partition) in topics.items():
        records += topic_records(name, max_partition + 1, topic_id=topic_id)
    broker.commit(records)


@pytest.mark.parametrize("entry", golden("Produce"), ids=lambda entry: entry["request"].split("/", 1)[1])
def test_every_golden_produce_is_appended(broker: Broker, entry: dict) -> None:
    # The captured records carry their capture time; the broker's clock must not be over an hour behind it (Kafka
    # 4's default message.timestamp.after.max.ms), so it reads the wall clock here.
    broker.clock.now = int(time.time() * 1000)
    request_frame = frame(entry["request"])
    header, request = decode_request(request_frame)
    create_topics_for(broker, {t.name: (None, max(p.index for p in t.partition_data)) for t in request.topic_data})
    response = dispatch(broker, request_frame)
    if request.acks == 0:
        assert response is None
        return
    errors = {(t.name, p.index): (p.error_code, p.base_offset) for t in response.responses
              for p in t.partition_responses}
    assert errors == {(t.name, p.index): (ErrorCode.NONE, 0) for t in request.topic_data for p in t.partition_data}
    for topic in request.topic_data:
        for partition in topic.partition_data:
            log = broker.replica_manager.partitions[TopicPartition(topic.name, partition.index)].log
            assert log.log_end_offset > 0 and log.high_watermark == log.log_end_offset


@pytest.mark.parametrize("entry", golden("Fetch"), ids=lambda entry: entry["request"].split("/", 1)[1])
def test_every_golden_fetch_is_answered_in_the_format_of_its_version(broker: Broker, entry: dict) -> None:
    request_frame = frame(entry["request"])
    header, request = decode_request(request_frame)
    version = header.request_api_version
    topics = {}
    for topic in request.topics:
        name = topic.topic if version < 13 else f"topic-{topic.topic_id}"
        topics[name] = (topic.topic_id if version >= 13 else None, max(p.partition for p in topic.partitions))
    create_topics_for(broker, topics)
    expected_records = {}
    for topic, name in zip(request.topics, topics):
        for partition in topic.partitions:
            count = partition.fetch_offset + 3
            asyncio.run(broker.replica_manager.append_records(
                1000, 1, {TopicPartition(name, partition.partition): make_batch(0, [b"v"] * count)}))
            expected_records[(name, partition.partition)] = count
    response = dispatch(broker, request_frame)
    assert response.error_code == ErrorCode.NONE
    # A full fetch with session epoch 0 opens an incremental fetch session (kafka-python asks for one; librdkafka
    # and aiokafka fetch sessionless, epoch -1).
    assert (response.session_id != 0) == (version >= 7 and request.session_epoch == 0)
    for topic, name in zip(response.responses, topics):
        assert (topic.topic if version < 13 else f"topic-{topic.topic_id}") == name
        for partition in topic.partitions:
            assert partition.error_code == ErrorCode.NONE
            assert partition.high_watermark == expected_records[(name, partition.partition_index)]
            magics = {batch.magic for batch in iter_batches(partition.records)}
            assert magics == ({2} if version >= 4 else {1} if version >= 2 else {0})


@pytest.mark.parametrize("entry", golden("ListOffsets"), ids=lambda entry: entry["request"].split("/", 1)[1])
def test_every_golden_list_offsets_is_answered(broker: Broker, entry: dict) -> None:
    request_frame = frame(entry["request"])
    header, request = decode_request(request_frame)
    create_topics_for(broker, {t.name: (None, max(p.partition_index for p in t.partitions)) for t in request.topics})
    for topic in request.topics:
        for partition in topic.partitions:
            asyncio.run(broker.replica_manager.append_records(
                1000, 1, {TopicPartition(topic.name, partition.partition_index): make_batch(0, [b"v"] * 5)}))
    response = dispatch(broker, request_frame)
    version = header.request_api_version
    for topic, asked in zip(response.topics, request.topics):
        for partition, question in zip(topic.partitions, asked.partitions):
            assert partition.error_code == ErrorCode.NONE
            if version == 0:
                assert partition.old_style_offsets[0] == (0 if question.timestamp == -2 else 5)
            elif question.timestamp == -1:
                assert partition.offset == 5
            elif question.timestamp == -2:
                assert partition.offset == 0


@pytest.mark.parametrize("entry", golden("DeleteRecords") + golden("DescribeLogDirs"),
                         ids=lambda entry: entry["request"].split("/", 1)[1])
def test_golden_delete_records_and_describe_log_dirs(broker: Broker, entry: dict) -> None:
    request_frame = frame(entry["request"])
    header, request = decode_request(request_frame)
    if header.request_api_key == ApiKey.DESCRIBE_LOG_DIRS:
        response = dispatch(broker, request_frame)
        assert [r.log_dir for r in response.results] == broker.log_manager.log_dirs
        return
    create_topics_for(broker, {t.name: (None, max(p.partition_index for p in t.partitions)) for t in request.topics})
    for topic in request.topics:
        for partition in topic.partitions:
            asyncio.run(broker.replica_manager.append_records(
                1000, 1, {TopicPartition(topic.name, partition.partition_index): make_batch(0, [b"v"] * 50)}))
    response = dispatch(broker, request_frame)
    for topic, asked in zip(response.topics, request.topics):
        for partition, question in zip(topic.partitions, asked.partitions):
            assert partition.error_code == ErrorCode.NONE
            assert partition.low_watermark == (50 if question.offset == -1 else question.offset)


def test_every_data_api_has_golden_frames() -> None:
    for name in DATA_APIS.values():
        if name != "OffsetForLeaderEpoch":  # no client sent one in the capture
            assert golden(name), name


def test_a_failed_acks_0_produce_closes_the_connection(broker: Broker) -> None:
    request = ProduceRequest(acks=0, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        name="missing", partition_data=[ProduceRequest.PartitionProduceData(index=0,
                                                                            records=make_batch(0, [b"x"]))])])
    header = RequestHeader(request_api_key=ApiKey.PRODUCE, request_api_version=9, correlation_id=3, client_id="t")
    with pytest.raises(CloseConnection):
        dispatch(broker, encode_request(header, request)[4:])


# -- every version each handler registers, built with kfk's codec -------------------------------------------------


def request_frame(message, version: int) -> bytes:
    header = RequestHeader(request_api_key=message.API_KEY, request_api_version=version, correlation_id=7,
                           client_id="sweep")
    return encode_request(header, message)[4:]


def records_for_produce_version(version: int) -> bytes:
    if version >= 3:
        return make_batch(0, [b"a", b"b"])
    builder = LegacyRecordsBuilder(0 if version < 2 else 1)
    builder.append(1_000, b"k", b"a")
    builder.append(1_001, b"k", b"b")
    return builder.close()


def _produce_topic(name: str, topic_id: uuid.UUID, version: int) -> dict:
    """How a Produce request of `version` names a topic: by name, or by id from v13 (KIP-516)."""
    return {"topic_id": topic_id} if version >= FIRST_TOPIC_ID_VERSION else {"name": name}


@pytest.mark.parametrize("version", served(ApiKey.PRODUCE))
def test_produce_at_every_version(broker: Broker, version: int) -> None:
    topic_id = uuid.uuid4()
    broker.commit(topic_records("t", 1, topic_id=topic_id, configs={"message.timestamp.type": "LogAppendTime"}))
    request = ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(**_produce_topic(name, id_, version), partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=records_for_produce_version(version))])
        for name, id_ in (("t", topic_id), ("missing", uuid.uuid4()))])
    response = dispatch(broker, request_frame(request, version))
    ok, missing = (topic.partition_responses[0] for topic in response.responses)
    assert (ok.error_code, ok.base_offset) == (ErrorCode.NONE, 0)
    assert ok.log_append_time_ms == (broker.clock() if version >= 2 else -1)
    assert ok.log_start_offset == (0 if version >= 5 else -1)
    assert missing.error_code == (ErrorCode.UNKNOWN_TOPIC_ID if version >= FIRST_TOPIC_ID_VERSION
                                  else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


@pytest.mark.parametrize("version", range(3, SERVED_VERSIONS[ApiKey.PRODUCE].highest + 1))
def test_produce_v3_and_later_needs_exactly_one_v2_batch(broker: Broker, version: int) -> None:
    topic_id = uuid.uuid4()
    broker.commit(topic_records("t", 3, topic_id=topic_id))
    legacy = LegacyRecordsBuilder(1)
    legacy.append(1_000, None, b"old")
    request = ProduceRequest(acks=1, timeout_ms=1000, topic_data=[ProduceRequest.TopicProduceData(
        **_produce_topic("t", topic_id, version), partition_data=[
        ProduceRequest.PartitionProduceData(index=0, records=make_batch(0, [b"a"]) + make_batch(0, [b"b"])),
        ProduceRequest.PartitionProduceData(index=1, records=legacy.close()),
        ProduceRequest.PartitionProduceData(index=2, records=b""),
    ])])
    response = dispatch(broker, request_frame(request, version))
    assert [p.error_code for p in response.responses[0].partition_responses] == [ErrorCode.INVALID_RECORD] * 3


@pytest.mark.parametrize("version", served(ApiKey.FETCH))
def test_fetch_at_every_version(broker: Broker, version: int) -> None:
    topic_id = uuid.uuid4()
    broker.commit(topic_records("t", 1, topic_id=topic_id))
    asyncio.run(broker.replica_manager.append_records(1000, 1, {TopicPartition("t", 0): make_batch(0, [b"a", b"b"])}))
    topics = [FetchRequest.FetchTopic(topic="t", topic_id=topic_id, partitions=[
        FetchRequest.FetchPartition(partition=0, fetch_offset=1, partition_max_bytes=1 << 20)])]
    missing_id = uuid.uuid4()
    topics.append(FetchRequest.FetchTopic(topic="missing", topic_id=missing_id, partitions=[
        FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)]))
    request = FetchRequest(max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, topics=topics,
                           replica_state=FetchRequest.ReplicaState(replica_id=-1))
    response = dispatch(broker, request_frame(request, version))
    found, absent = response.responses
    partition = found.partitions[0]
    assert (partition.error_code, partition.high_watermark) == (ErrorCode.NONE, 2)
    batches = list(iter_batches(partition.records))
    assert {batch.magic for batch in batches} == ({2} if version >= 4 else {1} if version >= 2 else {0})
    records = [record for batch in batches for record in batch.records()]
    if version < 4:  # down-conversion starts at the offset asked for
        assert [(r.offset, r.value) for r in records] == [(1, b"b")]
    else:  # the whole stored batch; the client skips what is below its offset
        assert [r.offset for r in records] == [0, 1]
    assert partition.log_start_offset == (0 if version >= 5 else -1)
    if version >= 13:
        assert found.topic_id == topic_id and absent.topic_id == missing_id
        assert absent.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_ID
    else:
        assert found.topic == "t"
        assert absent.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.parametrize("session", [(0, 1), (5, 3), (5, -2)])
def test_an_incremental_fetch_gets_fetch_session_id_not_found(broker: Broker, session: tuple[int, int]) -> None:
    session_id, epoch = session
    request = FetchRequest(max_wait_ms=0, session_id=session_id, session_epoch=epoch)
    response = dispatch(broker, request_frame(request, 12))
    assert response.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND and response.responses == []


def test_a_full_fetch_naming_an_unknown_session_opens_a_new_one(broker: Broker) -> None:
    broker.commit(topic_records("t", 1))
    request = FetchRequest(max_wait_ms=0, session_id=99, session_epoch=0, topics=[FetchRequest.FetchTopic(
        topic="t", partitions=[FetchRequest.FetchPartition(partition=0, partition_max_bytes=100)])])
    response = dispatch(broker, request_frame(request, 12))
    assert response.error_code == ErrorCode.NONE and response.session_id not in (0, 99)
    assert response.responses[0].partitions[0].error_code == ErrorCode.NONE


def test_a_final_fetch_is_served_without_a_session(broker: Broker) -> None:
    broker.commit(topic_records("t", 1))
    request = FetchRequest(max_wait_ms=0, session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(
        topic="t", partitions=[FetchRequest.FetchPartition(partition=0, partition_max_bytes=100)])])
    response = dispatch(broker, request_frame(request, 12))
    assert (response.error_code, response.session_id) == (ErrorCode.NONE, 0)
    assert response.responses[0].partitions[0].error_code == ErrorCode.NONE


@pytest.mark.parametrize("version", [0, 3, 9])
def test_old_fetch_versions_of_a_zstd_topic_get_unsupported_compression_type(broker: Broker, version: int) -> None:
    broker.commit(topic_records("z", 1, configs={"compression.type": "zstd"}))
    asyncio.run(broker.replica_manager.append_records(1000, 1, {TopicPartition("z", 0): make_batch(0, [b"a"])}))
    request = FetchRequest(max_wait_ms=0, max_bytes=1 << 20, topics=[FetchRequest.FetchTopic(
        topic="z", partitions=[FetchRequest.FetchPartition(partition=0, partition_max_bytes=1 << 20)])])
    response = dispatch(broker, request_frame(request, version))
    assert response.responses[0].partitions[0].error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE


@pytest.mark.parametrize("version", served(ApiKey.LIST_OFFSETS))
def test_list_offsets_at_every_version(broker: Broker, version: int) -> None:
    broker.commit(topic_records("t", 4, leader_epoch=6))
    for index in range(4):
        asyncio.run(broker.replica_manager.append_records(
            1000, 1, {TopicPartition("t", index): make_batch(0, [b"a", b"b", b"c"], timestamp=500)}))
    timestamps = (-1, -2) if version == 0 else (-1, -2, 501, 10_000)
    partitions = [ListOffsetsRequest.ListOffsetsPartition(partition_index=index, timestamp=timestamp,
                                                          max_num_offsets=5 if version == 0 else 1)
                  for index, timestamp in enumerate(timestamps)]
    request = ListOffsetsRequest(replica_id=-1, topics=[
        ListOffsetsRequest.ListOffsetsTopic(name="t", partitions=partitions),
        ListOffsetsRequest.ListOffsetsTopic(
            name="missing", partitions=[ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1)])])
    response = dispatch(broker, request_frame(request, version))
    answers, missing = response.topics
    assert missing.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    if version == 0:
        assert [p.old_style_offsets for p in answers.partitions] == [[3, 0], [0]]
        return
    assert [(p.error_code, p.offset, p.timestamp) for p in answers.partitions] == [
        (ErrorCode.NONE, 3, -1), (ErrorCode.NONE, 0, -1), (ErrorCode.NONE, 1, 501), (ErrorCode.NONE, -1, -1)]
    assert answers.partitions[0].leader_epoch == (6 if version >= 4 else -1)


def test_list_offsets_refuses_a_partition_asked_twice(broker: Broker) -> None:
    broker.commit(topic_records("t", 1))
    twice = [ListOffsetsRequest.ListOffsetsPartition(partition_index=0, timestamp=-1) for _ in range(2)]
    request = ListOffsetsRequest(replica_id=-1, topics=[ListOffsetsRequest.ListOffsetsTopic(name="t",
                                                                                             partitions=twice)])
    response = dispatch(broker, request_frame(request, 5))
    assert [p.error_code for p in response.topics[0].partitions] == [ErrorCode.INVALID_REQUEST] * 2


@pytest.mark.parametrize("version", served(ApiKey.DELETE_RECORDS))
def test_delete_records_at_every_version(broker: Broker, version: int) -> None:
    broker.commit(topic_records("t", 2))
    for index in (0, 1):
        asyncio.run(broker.replica_manager.append_records(
            1000, 1, {TopicPartition("t", index): make_batch(0, [b"a"] * 4)}))
    request = DeleteRecordsRequest(timeout_ms=1000, topics=[
        DeleteRecordsRequest.DeleteRecordsTopic(name=name, partitions=[
            DeleteRecordsRequest.DeleteRecordsPartition(partition_index=index, offset=offset)])
        for name, index, offset in (("t", 0, 2), ("t", 1, 9), ("missing", 0, 0))])
    response = dispatch(broker, request_frame(request, version))
    assert [(t.partitions[0].error_code, t.partitions[0].low_watermark) for t in response.topics] == [
        (ErrorCode.NONE, 2), (ErrorCode.OFFSET_OUT_OF_RANGE, -1), (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1)]


@pytest.mark.parametrize("version", served(ApiKey.OFFSET_FOR_LEADER_EPOCH))
def test_offset_for_leader_epoch_at_every_version(broker: Broker, version: int) -> None:
    broker.commit(topic_records("t", 1, leader_epoch=2))
    asyncio.run(broker.replica_manager.append_records(1000, 1, {TopicPartition("t", 0): make_batch(0, [b"a"] * 4)}))
    Partition = OffsetForLeaderEpochRequest.OffsetForLeaderPartition
    request = OffsetForLeaderEpochRequest(replica_id=-1, topics=[OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
        topic="t", partitions=[Partition(partition=0, leader_epoch=2, current_leader_epoch=2),
                               Partition(partition=0, leader_epoch=1, current_leader_epoch=2),
                               Partition(partition=0, leader_epoch=2, current_leader_epoch=1)])])
    response = dispatch(broker, request_frame(request, version))
    answers = [(p.error_code, p.leader_epoch, p.end_offset) for p in response.topics[0].partitions]
    epoch = 2 if version >= 1 else -1
    # Epoch 1 predates the log's first epoch (2, from offset 0): it "ends" where epoch 2 starts.
    expected = [(ErrorCode.NONE, epoch, 4), (ErrorCode.NONE, 1 if version >= 1 else -1, 0)]
    # current_leader_epoch exists from v2: an older epoch is fenced.
    expected.append((ErrorCode.FENCED_LEADER_EPOCH, -1, -1) if version >= 2 else (ErrorCode.NONE, epoch, 4))
    assert answers == expected


@pytest.mark.parametrize("version", served(ApiKey.DESCRIBE_LOG_DIRS))
def test_describe_log_dirs_at_every_version(broker: Broker, version: int) -> None:
    broker.commit(topic_records("t", 2))
    asyncio.run(broker.replica_manager.append_records(1000, 1, {TopicPartition("t", 1): make_batch(0, [b"a"] * 4)}))
    request = DescribeLogDirsRequest(topics=[DescribeLogDirsRequest.DescribableLogDirTopic(topic="t", partitions=[1])])
    [result] = dispatch(broker, request_frame(request, version)).results
    assert result.error_code == ErrorCode.NONE and result.log_dir == broker.log_manager.log_dirs[0]
    [topic] = result.topics
    [partition] = topic.partitions
    size = broker.replica_manager.partitions[TopicPartition("t", 1)].log.size
    assert (topic.name, partition.partition_index, partition.partition_size, partition.offset_lag,
            partition.is_future_key) == ("t", 1, size, 0, False)
    assert (result.total_bytes > 0) == (version >= 4)
    everything = dispatch(broker, request_frame(DescribeLogDirsRequest(topics=None), version))
    assert sorted(p.partition_index for p in everything.results[0].topics[0].partitions) == [0, 1]
