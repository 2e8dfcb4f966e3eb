"""KRaft snapshots (kfk/backends/embedded/snapshots/): Kafka's .checkpoint format, image -> snapshot -> image, the
backend writing them as the log grows, loading the newest on start, skipping a corrupt one, trimming the log."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest

from kfk.backends.embedded import EmbeddedMetadataBackend
from kfk.backends.embedded.snapshots import (
    SnapshotId,
    image_records,
    latest_valid_snapshot,
    list_snapshots,
    read_snapshot,
    snapshot_path,
    write_snapshot,
)
from kfk.backends.embedded.snapshots.image_records import CHANGE_RECORDS, SNAPSHOT_RECORDS
from kfk.backends.embedded.snapshots.writer import VotersRecord
from kfk.common.clock import ManualClock
from kfk.common.config_types import ConfigResourceType
from kfk.errors import CorruptRecordError, KafkaStorageError
from kfk.metadata import image as image_module
from kfk.metadata.image import MetadataImage
from kfk.protocol.metadata_records import schema_class
from kfk.records import ControlRecordType, control_record_type, iter_batches
from tests.backends.conftest import RecordingListener, run

TopicRecord = schema_class("TopicRecord")
PartitionRecord = schema_class("PartitionRecord")
PartitionChangeRecord = schema_class("PartitionChangeRecord")
RemoveTopicRecord = schema_class("RemoveTopicRecord")
ConfigRecord = schema_class("ConfigRecord")
FeatureLevelRecord = schema_class("FeatureLevelRecord")
RegisterBrokerRecord = schema_class("RegisterBrokerRecord")
BrokerRegistrationChangeRecord = schema_class("BrokerRegistrationChangeRecord")
ProducerIdsRecord = schema_class("ProducerIdsRecord")
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


def topic_records(name: str, partitions: int = 2) -> list:
    topic_id = uuid.uuid4()
    return [TopicRecord(name=name, topic_id=topic_id)] + [
        PartitionRecord(partition_id=p, topic_id=topic_id, replicas=[1, 2, 3], isr=[1, 2], leader=1 + p % 2,
                        leader_epoch=3, partition_epoch=5, adding_replicas=[3] if p else [])
        for p in range(partitions)]


def every_kind_of_state() -> MetadataImage:
    """An image holding every kind of state the image models, built through change records too."""
    doomed = topic_records("doomed")
    kept = topic_records("kept", 3)
    records = [
        FeatureLevelRecord(name="metadata.version", feature_level=7),
        FeatureLevelRecord(name="group.version", feature_level=1),
        RegisterBrokerRecord(broker_id=1, incarnation_id=uuid.uuid4(), broker_epoch=10, rack="r1", fenced=False,
                             end_points=[RegisterBrokerRecord.BrokerEndpoint(name="PLAINTEXT", host="h1", port=9092,
                                                                             security_protocol=0)]),
        RegisterBrokerRecord(broker_id=2, incarnation_id=uuid.uuid4(), broker_epoch=11, rack=None,
                             end_points=[RegisterBrokerRecord.BrokerEndpoint(name="SSL", host="h2", port=9093,
                                                                             security_protocol=1)]),
        BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=11, fenced=-1, in_controlled_shutdown=1),
        *doomed, *kept,
        PartitionChangeRecord(partition_id=1, topic_id=kept[0].topic_id, leader=2, isr=[2]),
        ConfigRecord(resource_type=2, resource_name="kept", name="retention.ms", value="1000"),
        ConfigRecord(resource_type=2, resource_name="doomed", name="cleanup.policy", value="compact"),
        ConfigRecord(resource_type=4, resource_name="1", name="log.retention.ms", value="5"),
        ConfigRecord(resource_type=4, resource_name="", name="num.io.threads", value="4"),
        RemoveTopicRecord(topic_id=doomed[0].topic_id),
        ProducerIdsRecord(broker_id=1, broker_epoch=10, next_producer_id=2000),
    ]
    return MetadataImage(cluster_id=CLUSTER_ID).apply(records, 41)


def test_every_record_type_the_image_applies_is_in_a_snapshot() -> None:
    """A new kind of image state (ACLs, quotas...) must be written by image_records, or the snapshot drops it."""
    assert set(image_module._HANDLERS) <= SNAPSHOT_RECORDS | CHANGE_RECORDS


def test_image_to_snapshot_to_image_is_equal(tmp_path) -> None:
    image = every_kind_of_state()
    path = write_snapshot(str(tmp_path), SnapshotId(image.offset + 1, 4), image_records(image),
                          last_contained_log_timestamp=123, now_ms=456)
    assert os.path.basename(path) == "00000000000000000042-0000000004.checkpoint"
    snapshot = read_snapshot(path)
    assert snapshot.snapshot_id == (42, 4) and snapshot.last_contained_log_timestamp == 123
    rebuilt = MetadataImage(cluster_id=CLUSTER_ID).apply(snapshot.records, snapshot.snapshot_id.end_offset - 1)
    assert rebuilt == image
    assert rebuilt.brokers[2].in_controlled_shutdown and not rebuilt.brokers[2].fenced
    assert "doomed" not in rebuilt.topics_by_name and rebuilt.next_producer_id == 2000
    assert [record.NAME for record in snapshot.records[:2]] == ["FeatureLevelRecord"] * 2
    assert snapshot.records[0].name == "metadata.version"


def test_the_file_is_kafkas_layout(tmp_path) -> None:
    """Header control batch, data batches, footer control batch; offsets from 0, the epoch on every batch."""
    image = every_kind_of_state()
    voters = VotersRecord(voters=[VotersRecord.Voter(voter_id=1, voter_directory_id=uuid.uuid4())])
    path = write_snapshot(str(tmp_path), SnapshotId(42, 4), image_records(image), last_contained_log_timestamp=1,
                          now_ms=2, voters=voters)
    batches = list(iter_batches(open(path, "rb").read()))
    assert [batch.is_control for batch in batches] == [True, False, True]
    assert [batch.partition_leader_epoch for batch in batches] == [4, 4, 4]
    assert [batch.base_offset for batch in batches] == [0, 3, 3 + len(image_records(image))]
    header = [control_record_type(record.key) for record in batches[0].records()]
    assert header == [ControlRecordType.SNAPSHOT_HEADER, ControlRecordType.KRAFT_VERSION,
                      ControlRecordType.KRAFT_VOTERS]
    assert [control_record_type(r.key) for r in batches[2].records()] == [ControlRecordType.SNAPSHOT_FOOTER]
    snapshot = read_snapshot(path)
    assert snapshot.kraft_version == 1 and snapshot.voters.voters[0].voter_id == 1


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_a_damaged_snapshot_does_not_read_and_the_older_one_is_loaded(tmp_path, damage: str) -> None:
    image = every_kind_of_state()
    write_snapshot(str(tmp_path), SnapshotId(10, 1), image_records(image), last_contained_log_timestamp=1, now_ms=1)
    newer = write_snapshot(str(tmp_path), SnapshotId(42, 1), image_records(image), last_contained_log_timestamp=1,
                           now_ms=1)
    data = bytearray(open(newer, "rb").read())
    if damage == "truncated":
        data = data[:-20]
    else:
        data[len(data) // 2] ^= 0xFF
    open(newer, "wb").write(data)
    with pytest.raises(CorruptRecordError):
        read_snapshot(newer)
    assert latest_valid_snapshot(str(tmp_path)).snapshot_id == (10, 1)


def backend(log_dir, clock: ManualClock, **kw) -> EmbeddedMetadataBackend:
    return EmbeddedMetadataBackend(str(log_dir), 1, CLUSTER_ID, time_ms=clock, **kw)


def test_snapshot_round_trip_with_100000_records(tmp_path) -> None:
    """100,000 metadata records: snapshots written as the log grows, the log trimmed behind them (whole segments
    deleted, log start advanced), and a restart loads the newest snapshot, replays the rest, and has the same
    image its listeners see."""
    clock = ManualClock(1_000)
    records_total = 100_000
    per_append = 100
    metadata_dir = tmp_path / "__cluster_metadata-0"

    async def write() -> tuple[MetadataImage, int]:
        store = backend(tmp_path, clock, snapshot_max_new_record_bytes=1024 * 1024, segment_bytes=256 * 1024)
        await store.start()
        epoch = await store.elect_controller(1)
        written = 0
        topic_id = uuid.uuid4()
        await store.append([TopicRecord(name="t", topic_id=topic_id)], epoch)
        while written < records_total:
            await store.append([ConfigRecord(resource_type=2, resource_name=f"r{(written + i) % 2000}",
                                             name=f"k{(written + i) % 7}", value=str(written + i))
                                for i in range(per_append)], epoch)
            written += per_append
        log_start_offset = store.metadata_log.log.log_start_offset
        await store.stop()
        return store.image, log_start_offset

    image, log_start_offset = run(write())
    snapshots = list_snapshots(str(metadata_dir))
    assert len(snapshots) == 1, snapshots  # older ones deleted as newer were written
    assert log_start_offset > 0 and log_start_offset <= snapshots[0].end_offset
    segments = sorted(name for name in os.listdir(metadata_dir) if name.endswith(".log"))
    assert int(segments[0].split(".")[0]) > 0  # whole segments went

    async def restart() -> tuple[MetadataImage, RecordingListener, int]:
        store = backend(tmp_path, clock)
        listener = RecordingListener()
        store.add_listener(listener)
        await store.start()
        loaded = store.latest_snapshot_id
        await store.stop()
        return store.image, listener, loaded

    reloaded, listener, loaded = run(restart())
    assert loaded == snapshots[0]
    assert reloaded == image
    assert len(image.config_resource_names(ConfigResourceType.TOPIC)) == 2000
    # the listener saw the snapshot's records as one commit ending below the snapshot's end offset, then the rest
    assert listener.batches[0][1] == snapshots[0].end_offset - 1
    assert MetadataImage(cluster_id=CLUSTER_ID).apply(listener.records, image.offset) == image


def test_a_log_trimmed_behind_a_lost_snapshot_refuses_to_load(tmp_path) -> None:
    clock = ManualClock(1_000)

    async def write() -> None:
        store = backend(tmp_path, clock, segment_bytes=1024)
        await store.start()
        epoch = await store.elect_controller(1)
        for index in range(20):
            await store.append(topic_records(f"t{index}"), epoch)
        await store.snapshot()
        await store.stop()

    run(write())
    directory = str(tmp_path / "__cluster_metadata-0")
    (snapshot_id,) = list_snapshots(directory)
    os.unlink(snapshot_path(directory, snapshot_id))
    with pytest.raises(KafkaStorageError, match="no snapshot below it reads"):
        run(backend(tmp_path, clock).start())


def test_a_snapshot_is_due_after_the_interval_when_anything_was_appended(tmp_path) -> None:
    clock = ManualClock(1_000)
    directory = str(tmp_path / "__cluster_metadata-0")

    async def scenario() -> list[list[SnapshotId]]:
        store = backend(tmp_path, clock, snapshot_max_interval_ms=60_000)
        await store.start()
        epoch = await store.elect_controller(1)
        seen = []
        await store.append(topic_records("a"), epoch)
        clock.advance(59_999)
        await store.append(topic_records("b"), epoch)
        seen.append(list_snapshots(directory))
        clock.advance(1)
        await store.append(topic_records("c"), epoch)
        await store.stop()
        seen.append(list_snapshots(directory))
        return seen

    before, after = run(scenario())
    assert before == [] and after == [SnapshotId(10, 1)]  # LEADER_CHANGE at 0, then 3 batches of 3 records
    # the header tells when the last record it holds was appended
    assert read_snapshot(snapshot_path(directory, after[0])).last_contained_log_timestamp == 61_000


def test_the_last_write_is_snapshotted_while_the_log_is_trimmed_under_the_writes(tmp_path) -> None:
    """A snapshot after every write, small segments deleted by each snapshot while the next writes go on: the
    writes that land during a snapshot are counted all the same, and the last one ends up in a snapshot."""
    clock = ManualClock(1_000)

    async def scenario() -> tuple[SnapshotId | None, int]:
        store = backend(tmp_path, clock, snapshot_max_new_record_bytes=1, segment_bytes=300)
        await store.start()
        epoch = await store.elect_controller(1)
        for index in range(60):
            await store.append(topic_records(f"t{index}"), epoch)
        while not store._snapshot_task.done():
            await asyncio.sleep(0.01)
        last = store.latest_snapshot_id, store.image.offset
        await store.stop()
        return last

    snapshot_id, offset = run(scenario())
    assert snapshot_id == (offset + 1, 1)
