"""ReplicaManager over real logs, fed by a MetadataCache with Kafka's metadata records: partitions follow the image,
produce and fetch semantics, the purgatories driven by appends and a manual clock, ListOffsets, DeleteRecords,
OffsetForLeaderEpoch and DescribeLogDirs."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest

from kfk.common.structs import TopicPartition
from kfk.config import LogConfig
from kfk.errors import ErrorCode, NotLeaderOrFollowerError, UnknownTopicOrPartitionError
from kfk.metadata.image import MetadataImage
from kfk.records import CompressionType, MemoryRecordsBuilder, TimestampType, iter_batches
from kfk.records.legacy import LegacyRecordsBuilder
from kfk.replication.fetch_params import FetchParams, FetchPartitionRequest
from kfk.replication.stray_replicas import mark_stray_logs
from kfk.storage.partition_metadata import PartitionMetadataFile
from kfk.storage.log_validator import append_needs_record_work
from kfk.storage.producer_state import AppendOrigin
from tests.replication.conftest import (
    Broker,
    config_record,
    partition_change,
    remove_topic,
    topic_records,
)
from tests.storage.conftest import make_batch, make_marker

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
CONSUMER = FetchParams(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0)


def produce(broker: Broker, entries: dict, acks: int = -1, timeout_ms: int = 1000) -> dict:
    return asyncio.run(broker.replica_manager.append_records(timeout_ms, acks, entries))


def fetch(broker: Broker, requests: list[FetchPartitionRequest], params: FetchParams = CONSUMER) -> list:
    return asyncio.run(broker.replica_manager.fetch_messages(params, requests))


def values(region) -> list[bytes | None]:
    return [record.value for batch in iter_batches(region.read_bytes()) for record in batch.records()]


# -- partitions follow the metadata image --------------------------------------------------------------------------


def test_a_new_topic_gets_logs_with_its_topic_id_and_configs_and_this_node_leads_it(broker: Broker) -> None:
    topic_id = uuid.uuid4()
    broker.commit(topic_records("t", 2, topic_id=topic_id, leader_epoch=3, configs={"max.message.bytes": "2000"}))
    assert set(broker.replica_manager.partitions) == {T0, T1}
    for topic_partition in (T0, T1):
        partition = broker.replica_manager.partitions[topic_partition]
        assert partition.is_leader and partition.leader_epoch == 3
        assert PartitionMetadataFile(partition.log.dir).read() == topic_id
        assert partition.log.config.max_message_bytes == 2000
        assert partition.log.leader_epoch_cache.entries == [(3, 0)]


def test_partitions_of_other_brokers_get_no_log(broker: Broker) -> None:
    broker.commit(topic_records("elsewhere", 1, replicas=(2, 3), leader=2))
    assert broker.replica_manager.partitions == {}
    assert broker.log_manager.all_logs() == []
    with pytest.raises(NotLeaderOrFollowerError):
        broker.replica_manager.get_partition_or_error(TopicPartition("elsewhere", 0))
    with pytest.raises(UnknownTopicOrPartitionError):
        broker.replica_manager.get_partition_or_error(TopicPartition("nowhere", 0))


def test_config_changes_reach_the_logs(broker: Broker) -> None:
    broker.commit(topic_records("t", 1))
    broker.commit([config_record("t", "message.timestamp.type", "LogAppendTime")])
    assert broker.replica_manager.partitions[T0].log.config.message_timestamp_type == "LogAppendTime"
    broker.commit([config_record("t", "message.timestamp.type", None)])
    assert broker.replica_manager.partitions[T0].log.config.message_timestamp_type == "CreateTime"


def test_a_deleted_topic_loses_its_logs_and_a_recreated_one_starts_empty(broker: Broker) -> None:
    old_id = uuid.uuid4()
    broker.commit(topic_records("t", 1, topic_id=old_id))
    produce(broker, {T0: make_batch(0, [b"old"] * 3)})
    old_dir = broker.replica_manager.partitions[T0].log.dir
    broker.commit([remove_topic(old_id)])
    assert broker.replica_manager.partitions == {}
    assert broker.log_manager.get_log(T0) is None
    broker.commit(topic_records("t", 1))
    log = broker.replica_manager.partitions[T0].log
    assert log.log_end_offset == 0 and log.dir == old_dir
    assert [name for name in os.listdir(os.path.dirname(old_dir)) if name.endswith("-delete")] == []


def test_a_log_left_by_an_earlier_topic_of_the_same_name_is_replaced(tmp_path, clock) -> None:
    log_dir = str(tmp_path / "logs")
    first = Broker(log_dir, clock)
    first.commit(topic_records("t", 1))
    produce(first, {T0: make_batch(0, [b"stale"])})
    first.close()
    # The topic was deleted and re-created while this broker was down: same name, new id.
    second = Broker(log_dir, clock)
    try:
        assert second.log_manager.get_log(T0).log_end_offset == 1
        second.commit(topic_records("t", 1))
        assert second.replica_manager.partitions[T0].log.log_end_offset == 0
        # the old data is set aside, not deleted
        (stray,) = [name for name in os.listdir(log_dir) if name.endswith("-stray")]
        assert stray.startswith("t-0.") and os.path.getsize(os.path.join(log_dir, stray, f"{0:020d}.log")) > 0
    finally:
        second.close()


def test_at_startup_the_logs_of_topics_the_caught_up_metadata_lacks_are_set_aside(tmp_path, clock) -> None:
    log_dir = str(tmp_path / "logs")
    first = Broker(log_dir, clock)
    deleted, recreated, kept = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    first.commit(topic_records("deleted", 1, topic_id=deleted) + topic_records("recreated", 1, topic_id=recreated)
                 + topic_records("kept", 1, topic_id=kept))
    for topic in ("deleted", "recreated", "kept"):
        produce(first, {TopicPartition(topic, 0): make_batch(0, [b"old"])})
    first.close()
    os.makedirs(os.path.join(log_dir, "unnamed-0"))  # a log whose creation did not get to its topic id
    # While the broker was down: "deleted" deleted, "recreated" deleted and created again (a new id)
    second = Broker(log_dir, clock)
    try:
        image = MetadataImage().apply(topic_records("recreated", 1) + topic_records("kept", 1, topic_id=kept), 5)
        strays = mark_stray_logs(second.log_manager, image)
        assert sorted(strays) == [TopicPartition("deleted", 0), TopicPartition("recreated", 0)]
        assert sorted(log.topic_partition.topic for log in second.log_manager.all_logs()) == ["kept", "unnamed"]
        assert sorted(name.split(".")[0] for name in os.listdir(log_dir) if name.endswith("-stray")) == [
            "deleted-0", "recreated-0"]
        assert mark_stray_logs(second.log_manager, image) == []
    finally:
        second.close()


def test_a_log_whose_topic_the_image_does_not_know_is_left_alone(tmp_path, clock) -> None:
    log_dir = str(tmp_path / "logs")
    first = Broker(log_dir, clock)
    first.commit(topic_records("t", 1))
    produce(first, {T0: make_batch(0, [b"kept"])})
    first.close()
    second = Broker(log_dir, clock)
    try:
        second.commit(topic_records("other", 1))
        assert second.log_manager.get_log(T0).log_end_offset == 1
        # DescribeLogDirs lists it with no lag to tell (its partition is not hosted), as Kafka does
        [description] = second.replica_manager.describe_log_dirs({T0})
        assert [(p.partition, p.offset_lag) for p in description.topics["t"]] == [(0, -1)]
    finally:
        second.close()


def test_leadership_moving_away_makes_the_partition_a_follower(broker: Broker) -> None:
    topic_id = uuid.uuid4()
    broker.commit(topic_records("t", 1, topic_id=topic_id, replicas=(1, 2)))
    broker.commit([partition_change(topic_id, 0, leader=2)])
    partition = broker.replica_manager.partitions[T0]
    assert not partition.is_leader and partition.leader_id == 2 and partition.leader_epoch == 1
    result = produce(broker, {T0: make_batch(0, [b"x"])}, acks=1)[T0]
    assert result.error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert fetch(broker, [FetchPartitionRequest(T0, 0, 1000)])[0].error == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # Reassigned away entirely: the log goes.
    broker.commit([partition_change(topic_id, 0, replicas=[2, 3], isr=[2, 3])])
    assert T0 not in broker.replica_manager.partitions and broker.log_manager.get_log(T0) is None


def test_a_produce_right_after_the_topic_appears_waits_for_its_log(broker: Broker) -> None:
    manager = broker.replica_manager

    async def scenario():
        broker.commit(topic_records("t", 2))  # inside the loop: the logs are being opened in the executor
        assert manager.partitions == {} and set(manager._opening) == {T0, T1}
        results = await manager.append_records(1000, -1, {T0: make_batch(0, [b"a"]), T1: make_batch(0, [b"b"])})
        fetched = await manager.fetch_messages(CONSUMER, [FetchPartitionRequest(T1, 0, 1 << 20)])
        return results, fetched

    results, fetched = asyncio.run(scenario())
    assert [(r.error, r.base_offset) for r in results.values()] == [(ErrorCode.NONE, 0)] * 2
    assert values(fetched[0].records) == [b"b"]


def test_moving_a_replica_to_another_log_dir_before_and_while_its_log_is_created(tmp_path, clock) -> None:
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    broker = Broker(first, clock, {"log.dirs": f"{first},{second}"})
    manager = broker.replica_manager
    try:
        # Not known yet: REPLICA_NOT_AVAILABLE, and the log is created where it was asked to go (as in Kafka)
        assert asyncio.run(manager.alter_replica_log_dir(T1, first)) == ErrorCode.REPLICA_NOT_AVAILABLE
        assert asyncio.run(manager.alter_replica_log_dir(T0, second)) == ErrorCode.REPLICA_NOT_AVAILABLE
        broker.commit(topic_records("t", 2))
        assert [os.path.dirname(manager.partitions[tp].log.dir) for tp in (T0, T1)] == [second, first]

        async def scenario():
            broker.commit(topic_records("u", 1))  # inside the loop: the log is being created in the executor
            assert set(manager._opening) == {TopicPartition("u", 0)}
            return await manager.alter_replica_log_dir(TopicPartition("u", 0), second)

        assert asyncio.run(scenario()) == ErrorCode.NONE  # answered once the partition is hosted
        assert TopicPartition("u", 0) in manager.partitions
    finally:
        broker.close()


def test_a_topic_deleted_and_recreated_while_its_logs_open_ends_up_new_and_empty(broker: Broker) -> None:
    manager = broker.replica_manager
    first, second = uuid.uuid4(), uuid.uuid4()

    async def scenario():
        broker.commit(topic_records("t", 1, topic_id=first))
        broker.commit([remove_topic(first)])
        broker.commit(topic_records("t", 1, topic_id=second, leader_epoch=4))
        await manager.metadata_applied()

    asyncio.run(scenario())
    partition = manager.partitions[T0]
    assert partition.topic_id == second and partition.leader_epoch == 4
    assert PartitionMetadataFile(partition.log.dir).read() == second
    assert manager._opening == {}
    assert produce(broker, {T0: make_batch(0, [b"x"])})[T0].base_offset == 0


# -- produce ---------------------------------------------------------------------------------------------------------


def test_appends_get_consecutive_offsets_and_the_log_start_offset(broker: Broker) -> None:
    broker.commit(topic_records("t", 2))
    results = produce(broker, {T0: make_batch(0, [b"a", b"b"]), T1: make_batch(0, [b"c"])})
    assert (results[T0].error, results[T0].base_offset, results[T1].base_offset) == (ErrorCode.NONE, 0, 0)
    assert results[T0].log_start_offset == 0 and results[T0].log_append_time_ms == -1
    assert produce(broker, {T0: make_batch(0, [b"d"])}, acks=1)[T0].base_offset == 2
    assert values(fetch(broker, [FetchPartitionRequest(T0, 0, 1 << 20)])[0].records) == [b"a", b"b", b"d"]


def test_invalid_acks_fail_every_partition_and_append_nothing(broker: Broker) -> None:
    broker.commit(topic_records("t", 1))
    assert produce(broker, {T0: make_batch(0, [b"a"])}, acks=2)[T0].error == ErrorCode.INVALID_REQUIRED_ACKS
    assert broker.replica_manager.partitions[T0].log.log_end_offset == 0


def test_per_partition_errors_do_not_fail_the_other_partitions(broker: Broker) -> None:
    broker.commit(topic_records("t", 1))
    corrupt = bytearray(make_batch(0, [b"a"]))
    corrupt[-1] ^= 0xFF
    results = produce(broker, {T0: bytes(corrupt), TopicPartition("missing", 0): make_batch(0, [b"b"]),
                               TopicPartition("__consumer_offsets", 0): make_batch(0, [b"c"])})
    assert results[T0].error == ErrorCode.CORRUPT_MESSAGE
    assert results[TopicPartition("missing", 0)].error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert results[TopicPartition("__consumer_offsets", 0)].error == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert produce(broker, {T0: make_batch(0, [b"ok"])})[T0].base_offset == 0


def test_log_append_time_stamps_the_batch_and_is_returned(broker: Broker, clock) -> None:
    broker.commit(topic_records("t", 1, configs={"message.timestamp.type": "LogAppendTime"}))
    result = produce(broker, {T0: make_batch(0, [b"a", b"b"], timestamp=5)})[T0]
    assert result.log_append_time_ms == clock()
    batch = next(iter_batches(fetch(broker, [FetchPartitionRequest(T0, 0, 1 << 20)])[0].records.read_bytes()))
    assert batch.timestamp_type == TimestampType.LOG_APPEND_TIME and batch.max_timestamp == clock()


def test_a_batch_above_max_message_bytes_is_message_too_large(broker: Broker) -> None:
    broker.commit(topic_records("t", 1, configs={"max.message.bytes": "100"}))
    result = produce(broker, {T0: make_batch(0, [b"x" * 200])})[T0]
    assert result.error == ErrorCode.MESSAGE_TOO_LARGE and result.base_offset == -1


def test_an_append_larger_than_a_segment_is_record_list_too_large(broker: Broker) -> None:
    broker.commit(topic_records("t", 1, configs={"segment.bytes": str(1024 * 1024),
                                                 "max.message.bytes": str(4 * 1024 * 1024)}))
    huge = make_batch(0, [os.urandom(1024) for _ in range(1100)])
    assert produce(broker, {T0: huge})[T0].error == ErrorCode.RECORD_LIST_TOO_LARGE


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd", "uncompressed"])
def test_the_topic_codec_re_encodes_what_producers_send(broker: Broker, codec: str) -> None:
    broker.commit(topic_records("t", 1, configs={"compression.type": codec}))
    builder = MemoryRecordsBuilder(compression_type=CompressionType.LZ4 if codec == "uncompressed"
                                   else CompressionType.NONE)
    for index in range(20):
        builder.append(1_000 + index, f"k{index}".encode(), b"value" * 10, [("h", b"1")])
    assert produce(broker, {T0: builder.close()})[T0].error == ErrorCode.NONE
    region = fetch(broker, [FetchPartitionRequest(T0, 0, 1 << 20)])[0].records
    batch = next(iter_batches(region.read_bytes()))
    expected = CompressionType.NONE if codec == "uncompressed" else CompressionType[codec.upper()]
    assert batch.compression_type == expected
    records = list(batch.records())
    assert [r.key for r in records] == [f"k{i}".encode() for i in range(20)]
    assert records[3].headers == [("h", b"1")] and records[3].offset == 3


def test_legacy_message_sets_are_converted_to_v2_batches(broker: Broker) -> None:
    broker.commit(topic_records("t", 1))
    for magic, codec in [(0, CompressionType.NONE), (1, CompressionType.GZIP), (1, CompressionType.NONE)]:
        builder = LegacyRecordsBuilder(magic, compression_type=codec)
        for index in range(3):
            builder.append(2_000 + index, b"k", f"m{magic}-{index}".encode())
        assert produce(broker, {T0: builder.close()}, acks=1)[T0].error == ErrorCode.NONE
    region = fetch(broker, [FetchPartitionRequest(T0, 0, 1 << 20)])[0].records
    assert all(batch.magic == 2 for batch in iter_batches(region.read_bytes()))
    assert values(region) == [f"m{m}-{i}".encode() for m in (0, 1, 1) for i in range(3)]


def test_a_keyless_record_in_a_compacted_topic_is_invalid_with_its_index(broker: Broker) -> None:
    broker.commit(topic_records("t", 1, configs={"cleanup.policy": "compact"}))
    result = produce(broker, {T0: make_batch(0, [b"a", b"b", b"c"], keys=[b"k", None, b"k"])})[T0]
    assert result.error == ErrorCode.INVALID_RECORD
    assert [index for index, _ in result.record_errors] == [1]
    assert "without key" in result.record_errors[0][1] and result.error_message


def test_idempotent_retries_are_acknowledged_with_their_first_offsets_and_not_appended(broker: Broker) -> None:
    broker.commit(topic_records("t", 1))
    first = make_batch(0, [b"a", b"b"], producer_id=7, producer_epoch=0, base_sequence=0)
    second = make_batch(0, [b"c"], producer_id=7, producer_epoch=0, base_sequence=2)
    assert produce(broker, {T0: first})[T0].base_offset == 0
    assert produce(broker, {T0: second})[T0].base_offset == 2
    retried = produce(broker, {T0: first})[T0]
    assert (retried.error, retried.base_offset) == (ErrorCode.NONE, 0)
    assert broker.replica_manager.partitions[T0].log.log_end_offset == 3
    gap = make_batch(0, [b"d"], producer_id=7, producer_epoch=0, base_sequence=5)
    assert produce(broker, {T0: gap})[T0].error == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(broker, {T0: make_batch(0, [b"e"], producer_id=7, producer_epoch=1, base_sequence=0)})[
        T0].error == ErrorCode.NONE
    stale = make_batch(0, [b"f"], producer_id=7, producer_epoch=0, base_sequence=3)
    assert produce(broker, {T0: stale})[T0].error == ErrorCode.INVALID_PRODUCER_EPOCH
    # An unknown producer id starting anywhere is accepted, as Kafka 4 does.
    assert produce(broker, {T0: make_batch(0, [b"g"], producer_id=8, producer_epoch=0, base_sequence=9)})[
        T0].error == ErrorCode.NONE


def test_appends_that_decode_re_encode_or_fsync_run_in_the_executor(broker: Broker) -> None:
    plain = make_batch(0, [b"v"] * 3)
    legacy = LegacyRecordsBuilder(1)
    legacy.append(1_000, b"k", b"old")
    lz4 = MemoryRecordsBuilder(compression_type=CompressionType.LZ4)
    lz4.append(1_000, b"k", b"v")
    default, gzip_topic, compacted = LogConfig(), LogConfig.from_properties({"compression.type": "gzip"}), \
        LogConfig.from_properties({"cleanup.policy": "compact"})
    assert not append_needs_record_work(default, plain)
    assert not append_needs_record_work(default, bytes(lz4.close()))
    assert append_needs_record_work(default, legacy.close())
    assert append_needs_record_work(gzip_topic, plain)
    assert append_needs_record_work(compacted, plain)
    assert not append_needs_record_work(LogConfig.from_properties({"compression.type": "lz4"}), bytes(lz4.close()))
    assert not append_needs_record_work(default, b"\x00" * 5)  # too short to say: validation will answer
    # Through the executor, the append works like any other; flush.messages=1 fsyncs each one.
    broker.commit(topic_records("durable", 1, configs={"flush.messages": "1", "compression.type": "gzip"}))
    durable = TopicPartition("durable", 0)
    assert produce(broker, {durable: plain})[durable].base_offset == 0
    assert produce(broker, {durable: make_batch(0, [b"w"])})[durable].base_offset == 3
    log = broker.replica_manager.partitions[durable].log
    assert log.recovery_point == log.log_end_offset == 4


# -- acks=all and the produce purgatory ----------------------------------------------------------------------------


def test_acks_all_waits_for_the_followers_and_completes_when_they_fetch(broker: Broker, clock) -> None:
    broker.commit(topic_records("t", 1, replicas=(1, 2)))
    manager = broker.replica_manager

    async def scenario():
        produced = asyncio.create_task(manager.append_records(30_000, -1, {T0: make_batch(0, [b"a", b"b"])}))
        await asyncio.sleep(0)
        assert not produced.done() and manager.produce_purgatory.delayed == 1
        follower = FetchParams(replica_id=2, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0)
        await manager.fetch_messages(follower, [FetchPartitionRequest(T0, 0, 1 << 20)])
        assert not produced.done()  # the follower fetched from 0: it has nothing yet
        read = await manager.fetch_messages(follower, [FetchPartitionRequest(T0, 2, 1 << 20)])
        assert read[0].high_watermark == 0  # the read happens before the position is recorded
        return await asyncio.wait_for(produced, 1)

    result = asyncio.run(scenario())[T0]
    assert (result.error, result.base_offset) == (ErrorCode.NONE, 0)
    assert manager.partitions[T0].log.high_watermark == 2


def test_acks_all_times_out_with_request_timed_out(broker: Broker, clock) -> None:
    broker.commit(topic_records("t", 1, replicas=(1, 2)))
    manager = broker.replica_manager

    async def scenario():
        produced = asyncio.create_task(manager.append_records(500, -1, {T0: make_batch(0, [b"a"])}))
        await asyncio.sleep(0)
        clock.advance(499)
        manager.produce_purgatory.expire(clock())
        await asyncio.sleep(0)
        assert not produced.done()
        clock.advance(1)
        assert manager.produce_purgatory.expire(clock()) is None
        return await asyncio.wait_for(produced, 1)

    assert asyncio.run(scenario())[T0].error == ErrorCode.REQUEST_TIMED_OUT
    assert manager.partitions[T0].log.log_end_offset == 1  # the records stay, as in Kafka


def test_a_waiting_acks_all_produce_fails_when_leadership_moves(broker: Broker) -> None:
    topic_id = uuid.uuid4()
    broker.commit(topic_records("t", 1, topic_id=topic_id, replicas=(1, 2)))
    manager = broker.replica_manager

    async def scenario():
        produced = asyncio.create_task(manager.append_records(30_000, -1, {T0: make_batch(0, [b"a"])}))
        await asyncio.sleep(0)
        broker.commit([partition_change(topic_id, 0, leader=2)])
        return await asyncio.wait_for(produced, 1)

    assert asyncio.run(scenario())[T0].error == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_acks_all_with_an_isr_below_min_insync_replicas_is_not_enough_replicas(broker: Broker) -> None:
    broker.commit(topic_records("t", 1, replicas=(1, 2), isr=(1,), configs={"min.insync.replicas": "2"}))
    assert produce(broker, {T0: make_batch(0, [b"a"])})[T0].error == ErrorCode.NOT_ENOUGH_REPLICAS
    assert produce(broker, {T0: make_batch(0, [b"a"])}, acks=1)[T0].error == ErrorCode.NONE


# -- fetch -------------------------------------------------------------------------------------------------------------


def test_a_long_poll_waits_for_an_append(broker: Broker) -> None:
    broker.commit(topic_records("t", 1))
    manager = broker.replica_manager
    params = FetchParams(replica_id=-1, max_wait_ms=60_000, min_bytes=1, max_bytes=1 << 20, isolation_level=0)

    async def scenario():
        fetched = asyncio.create_task(manager.fetch_messages(params, [FetchPartitionRequest(T0, 0, 1 << 20)]))
        await asyncio.sleep(0)
        assert not fetched.done() and manager.fetch_purgatory.delayed == 1
        await manager.append_records(1000, 1, {T0: make_batch(0, [b"new"])})
        return await asyncio.wait_for(fetched, 1)

    result = asyncio.run(scenario())[0]
    assert values(result.records) == [b"new"] and result.high_watermark == 1


def test_min_bytes_accumulates_across_appends_and_expiry_returns_what_is_there(broker: Broker, clock) -> None:
    broker.commit(topic_records("t", 1))
    manager = broker.replica_manager
    batch = make_batch(0, [b"x" * 100])
    params = FetchParams(replica_id=-1, max_wait_ms=1000, min_bytes=len(batch) * 3, max_bytes=1 << 20,
                         isolation_level=0)

    async def scenario(fetch_offset: int, appends: int):
        fetched = asyncio.create_task(manager.fetch_messages(params,
                                                             [FetchPartitionRequest(T0, fetch_offset, 1 << 20)]))
        await asyncio.sleep(0)
        for _ in range(appends):
            await manager.append_records(1000, 1, {T0: make_batch(0, [b"x" * 100])})
            await asyncio.sleep(0)
        if not fetched.done():
            clock.advance(1000)
            manager.fetch_purgatory.expire(clock())
        return await asyncio.wait_for(fetched, 1)

    assert len(values(asyncio.run(scenario(0, 3))[0].records)) == 3
    assert clock() == 1_700_000_000_000  # completed by the third append, not by the deadline
    # Only two more: not enough bytes, so the deadline answers with those two.
    result = asyncio.run(scenario(3, 2))[0]
    assert len(values(result.records)) == 2


def test_max_bytes_is_shared_in_request_order_and_the_first_batch_always_fits(broker: Broker) -> None:
    broker.commit(topic_records("t", 2))
    big = make_batch(0, [b"x" * 1000])
    produce(broker, {T0: big, T1: big})
    produce(broker, {T0: big, T1: big})
    params = FetchParams(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=10, isolation_level=0)
    first, second = fetch(broker, [FetchPartitionRequest(T0, 0, 10), FetchPartitionRequest(T1, 0, 10)], params)
    assert len(first.records) == len(big) and len(second.records) == 0
    # Fetch v0-v2: the hard limit cuts the first batch.
    legacy = FetchParams(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=10, isolation_level=0,
                         hard_max_bytes_limit=True)
    assert len(fetch(broker, [FetchPartitionRequest(T0, 0, 10)], legacy)[0].records) == 10
    # Enough room: both partitions, each up to its own limit.
    params = FetchParams(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0)
    first, second = fetch(broker, [FetchPartitionRequest(T0, 0, 1 << 20), FetchPartitionRequest(T1, 0, 1 << 20)],
                          params)
    assert len(first.records) == len(second.records) == 2 * len(big)


def test_fetch_errors_are_per_partition(broker: Broker) -> None:
    broker.commit(topic_records("t", 1, leader_epoch=4))
    produce(broker, {T0: make_batch(0, [b"a"])})
    results = fetch(broker, [FetchPartitionRequest(T0, 5, 1000), FetchPartitionRequest(TopicPartition("x", 0), 0, 1),
                             FetchPartitionRequest(T0, 0, 1000, current_leader_epoch=3),
                             FetchPartitionRequest(T0, 0, 1000, current_leader_epoch=5),
                             FetchPartitionRequest(T0, 0, 1000, current_leader_epoch=4)])
    assert [r.error for r in results] == [ErrorCode.OFFSET_OUT_OF_RANGE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                          ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.UNKNOWN_LEADER_EPOCH,
                                          ErrorCode.NONE]
    assert (results[0].high_watermark, results[0].log_start_offset) == (1, 0)


def test_read_committed_stops_at_the_last_stable_offset_and_lists_aborted_transactions(broker: Broker) -> None:
    broker.commit(topic_records("t", 1))
    manager = broker.replica_manager
    log = manager.partitions[T0].log

    def append_raw(data: bytes) -> None:  # transaction markers come from the coordinator, straight to the log
        info = log.append_as_leader(data, manager.partitions[T0].leader_epoch, 0, AppendOrigin.COORDINATOR)
        assert info.first_offset >= 0
        manager.partitions[T0].maybe_increment_high_watermark(0)

    append_raw(make_batch(0, [b"t1", b"t2"], producer_id=5, producer_epoch=0, base_sequence=0, transactional=True))
    append_raw(make_marker(2, 5, 0, commit=False))
    append_raw(make_batch(3, [b"open"], producer_id=6, producer_epoch=0, base_sequence=0, transactional=True))
    produce(broker, {T0: make_batch(0, [b"plain"])})
    committed = FetchParams(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=1)
    result = fetch(broker, [FetchPartitionRequest(T0, 0, 1 << 20)], committed)[0]
    assert (result.high_watermark, result.last_stable_offset) == (5, 3)
    assert [(txn.producer_id, txn.first_offset) for txn in result.aborted_transactions] == [(5, 0)]
    assert [batch.last_offset for batch in iter_batches(result.records.read_bytes())] == [1, 2]
    uncommitted = fetch(broker, [FetchPartitionRequest(T0, 0, 1 << 20)])[0]
    assert uncommitted.aborted_transactions is None
    assert values(uncommitted.records)[-2:] == [b"open", b"plain"]


# -- ListOffsets, DeleteRecords, OffsetForLeaderEpoch, DescribeLogDirs ------------------------------------------------


def test_list_offsets(broker: Broker) -> None:
    broker.commit(topic_records("t", 1, leader_epoch=2))
    manager = broker.replica_manager
    empty_latest = manager.fetch_offset_for_timestamp(T0, -1, 0, -1, True)
    assert (empty_latest.offset, empty_latest.leader_epoch) == (0, 2)
    for start, timestamp in ((0, 100), (3, 200), (6, 300)):
        produce(broker, {T0: make_batch(0, [b"v"] * 3, timestamp=timestamp)})
    latest = manager.fetch_offset_for_timestamp(T0, -1, 0, -1, True)
    assert (latest.timestamp, latest.offset, latest.leader_epoch) == (-1, 9, 2)  # the end, not the last batch
    assert manager.fetch_offset_for_timestamp(T0, -2, 0, -1, True).offset == 0
    found = manager.fetch_offset_for_timestamp(T0, 201, 0, -1, True)
    assert (found.timestamp, found.offset) == (201, 4)
    assert manager.fetch_offset_for_timestamp(T0, 250, 0, -1, True).offset == 6
    assert manager.fetch_offset_for_timestamp(T0, 10_000, 0, -1, True) is None
    maximum = manager.fetch_offset_for_timestamp(T0, -3, 0, -1, True)
    assert (maximum.timestamp, maximum.offset) == (302, 8)
    assert manager.fetch_offset_for_timestamp(T0, -4, 0, -1, True).offset == 0
    assert manager.fetch_offset_for_timestamp(T0, -5, 0, -1, True).offset == -1
    assert manager.legacy_fetch_offsets_before(T0, -1, 10, True, True) == [9, 0]
    assert manager.legacy_fetch_offsets_before(T0, -2, 10, True, True) == [0]
    assert manager.legacy_fetch_offsets_before(T0, -1, 1, True, True) == [9]


def test_delete_records_moves_the_log_start_and_never_past_the_high_watermark(broker: Broker) -> None:
    broker.commit(topic_records("t", 2))
    broker.commit(topic_records("c", 1, configs={"cleanup.policy": "compact"}))
    produce(broker, {T0: make_batch(0, [b"v"] * 10), T1: make_batch(0, [b"v"] * 4)})
    compacted = TopicPartition("c", 0)
    results = broker.replica_manager.delete_records({T0: 6, T1: 5, compacted: 0})
    assert results == {T0: (ErrorCode.NONE, 6), T1: (ErrorCode.OFFSET_OUT_OF_RANGE, -1),
                       compacted: (ErrorCode.POLICY_VIOLATION, -1)}
    assert broker.replica_manager.fetch_offset_for_timestamp(T0, -2, 0, -1, True).offset == 6
    assert fetch(broker, [FetchPartitionRequest(T0, 2, 1000)])[0].error == ErrorCode.OFFSET_OUT_OF_RANGE
    assert values(fetch(broker, [FetchPartitionRequest(T0, 6, 1 << 20)])[0].records)  # whole batch from 6 on
    assert broker.replica_manager.delete_records({T1: -1}) == {T1: (ErrorCode.NONE, 4)}


def test_offset_for_leader_epoch_answers_from_the_epoch_cache(broker: Broker) -> None:
    topic_id = uuid.uuid4()
    broker.commit(topic_records("t", 1, topic_id=topic_id, replicas=(1, 2)))
    produce(broker, {T0: make_batch(0, [b"a"] * 3)}, acks=1)
    broker.commit([partition_change(topic_id, 0, leader=2)])
    broker.commit([partition_change(topic_id, 0, leader=1)])  # epoch 2, from offset 3
    produce(broker, {T0: make_batch(0, [b"b"] * 2)}, acks=1)
    manager = broker.replica_manager
    assert manager.last_offset_for_leader_epoch(T0, -1, 0, True) == (0, 3)
    assert manager.last_offset_for_leader_epoch(T0, -1, 1, True) == (0, 3)
    assert manager.last_offset_for_leader_epoch(T0, 2, 2, True) == (2, 5)
    assert manager.last_offset_for_leader_epoch(T0, -1, 9, True) == (-1, -1)


def test_describe_log_dirs_lists_partition_sizes(broker: Broker) -> None:
    broker.commit(topic_records("t", 2))
    produce(broker, {T0: make_batch(0, [b"v"] * 5)})
    [description] = broker.replica_manager.describe_log_dirs(None)
    assert description.path == broker.log_manager.log_dirs[0] and description.error == ErrorCode.NONE
    sizes = {p.partition: (p.size, p.offset_lag) for p in description.topics["t"]}
    assert sizes == {0: (broker.replica_manager.partitions[T0].log.size, 0), 1: (0, 0)}
    assert 0 < description.usable_bytes <= description.total_bytes
    [only] = broker.replica_manager.describe_log_dirs({T1})
    assert [p.partition for p in only.topics["t"]] == [1]
