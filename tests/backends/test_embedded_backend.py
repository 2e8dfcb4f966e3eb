"""The embedded backend's own side (the MetadataBackend contract is test_backend_contract.py): the log and the
quorum-state file are Kafka's formats, a crash loses nothing acknowledged, and nothing else touches that log."""

from __future__ import annotations

import json
import os
import uuid

import pytest

from kfk.backends.embedded import EmbeddedMetadataBackend
from kfk.backends.embedded.metadata_log import KafkaMetadataLog
from kfk.common.clock import ManualClock
from kfk.config import LogConfig
from kfk.errors import InvalidConfigurationError, KafkaStorageError
from kfk.protocol.metadata_records import schema_class
from kfk.records import ControlRecordType, LeaderChangeMessage, control_record_type, iter_batches
from kfk.storage.log_manager import LogManager
from tests.backends.conftest import RecordingListener, run

TopicRecord = schema_class("TopicRecord")
PartitionRecord = schema_class("PartitionRecord")
ConfigRecord = schema_class("ConfigRecord")
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


def topic(name: str) -> list:
    topic_id = uuid.uuid4()
    return [TopicRecord(name=name, topic_id=topic_id),
            PartitionRecord(partition_id=0, topic_id=topic_id, replicas=[1], isr=[1], leader=1, leader_epoch=0,
                            partition_epoch=0)]


def backend(log_dir, clock: ManualClock, node_id: int = 1, voters=()) -> EmbeddedMetadataBackend:
    return EmbeddedMetadataBackend(str(log_dir), node_id, CLUSTER_ID, voters, time_ms=clock)


def log_bytes(log_dir) -> bytes:
    directory = os.path.join(log_dir, "__cluster_metadata-0")
    return b"".join(open(os.path.join(directory, name), "rb").read()
                    for name in sorted(os.listdir(directory)) if name.endswith(".log"))


def test_quorum_state_is_kafkas_json_and_is_written_before_the_epoch_is_used(tmp_path, clock) -> None:
    async def scenario() -> int:
        store = backend(tmp_path, clock)
        await store.start()
        epoch = await store.elect_controller(1)
        await store.stop()
        return epoch

    epoch = run(scenario())
    state = json.loads((tmp_path / "__cluster_metadata-0" / "quorum-state").read_text())
    assert state == {"clusterId": "", "leaderId": 1, "leaderEpoch": epoch, "votedId": 1, "appliedOffset": 0,
                     "currentVoters": [{"voterId": 1}], "data_version": 0}


def test_the_log_holds_kafka_batches_stamped_with_the_epoch(tmp_path, clock) -> None:
    async def scenario() -> int:
        store = backend(tmp_path, clock)
        await store.start()
        epoch = await store.elect_controller(1)
        clock.advance(5)
        await store.append([ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value="1")],
                           epoch)
        await store.stop()
        return epoch

    epoch = run(scenario())
    batches = list(iter_batches(log_bytes(tmp_path)))
    assert [b.base_offset for b in batches] == [0, 1]
    for batch in batches:
        batch.validate()
        assert batch.partition_leader_epoch == epoch and batch.magic == 2
    leader_change = next(iter(batches[0].records()))
    assert batches[0].is_control and control_record_type(leader_change.key) == ControlRecordType.LEADER_CHANGE
    assert LeaderChangeMessage.deserialize(leader_change.value).leader_id == 1
    record = next(iter(batches[1].records()))
    assert record.key is None and record.timestamp == clock.now
    assert record.value[:3] == b"\x01\x04\x00"  # frame version 1, ConfigRecord, version 0
    assert (tmp_path / "__cluster_metadata-0" / "partition.metadata").read_text().endswith(
        "AAAAAAAAAAAAAAAAAAAAAQ")


def test_a_crash_after_the_acknowledged_append_loses_nothing_and_a_torn_tail_is_dropped(tmp_path, clock) -> None:
    async def write_without_clean_stop() -> None:
        store = backend(tmp_path, clock)
        await store.start()
        epoch = await store.elect_controller(1)
        await store.append(topic("kept"), epoch)
        # no stop(): the process "dies" here, with the append fsynced

    run(write_without_clean_stop())
    segment = tmp_path / "__cluster_metadata-0" / "00000000000000000000.log"
    with open(segment, "ab") as file:
        file.write(b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00\x01\x00garbage")  # half a batch

    async def reopen() -> list:
        store = backend(tmp_path, clock)
        listener = RecordingListener()
        store.add_listener(listener)
        await store.start()
        epoch = await store.elect_controller(1)
        await store.append(topic("after"), epoch)
        await store.stop()
        return listener.records

    names = [r.name for r in run(reopen()) if r.NAME == "TopicRecord"]
    assert names == ["kept", "after"]


def test_a_log_ahead_of_its_quorum_state_is_refused(tmp_path, clock) -> None:
    async def scenario() -> None:
        store = backend(tmp_path, clock)
        await store.start()
        await store.elect_controller(1)
        await store.elect_controller(1)
        await store.append(topic("x"), 2)
        await store.stop()
        (tmp_path / "__cluster_metadata-0" / "quorum-state").unlink()
        with pytest.raises(KafkaStorageError, match="beyond the epoch"):
            await backend(tmp_path, clock).start()

    run(scenario())


def test_other_voters_need_an_endpoint(tmp_path, clock) -> None:
    with pytest.raises(InvalidConfigurationError, match=r"host:port of every voter.*\[2, 3\]"):
        backend(tmp_path, clock, voters=[1, 2, 3])


def test_the_log_manager_never_loads_the_metadata_log(tmp_path, clock) -> None:
    async def scenario() -> None:
        store = backend(tmp_path, clock)
        await store.start()
        await store.append(topic("t"), await store.elect_controller(1))
        await store.stop()

    run(scenario())
    manager = LogManager([str(tmp_path)], LogConfig.from_properties({"retention.ms": 1}))
    manager.startup(clock())
    assert manager.all_logs() == []
    clock.advance(10**9)
    manager.tick(clock())
    manager.shutdown()
    metadata_log = KafkaMetadataLog.open(str(tmp_path), clock())
    assert metadata_log.log.config.retention_ms == -1 and metadata_log.log.config.retention_bytes == -1
    assert [b.base_offset for b in metadata_log.read_batches()] == [0, 1]
    metadata_log.close()


def test_only_the_quorum_leader_describes_the_quorum(tmp_path, clock) -> None:
    async def scenario():
        store = backend(tmp_path, clock)
        await store.start()
        unattached = store.describe_quorum()
        epoch = await store.elect_controller(1)
        await store.append(topic("described"), epoch)
        clock.advance(7)
        described = store.describe_quorum()
        await store.stop()
        return unattached, epoch, described

    unattached, epoch, described = run(scenario())
    assert unattached is None  # unattached after start: only the leader knows the quorum
    assert (described.leader_id, described.leader_epoch, described.high_watermark) == (1, epoch, 3)
    (voter,) = described.voters
    assert (voter.replica_id, voter.log_end_offset) == (1, 3)  # the leader change, then the two records
    assert voter.last_fetch_timestamp == voter.last_caught_up_timestamp == clock.now
    assert described.observers == ()
