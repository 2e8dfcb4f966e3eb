"""The share coordinator's state machine (kfk.coordinator.share): state batches combined as Kafka's persister
combines them, the epochs that fence a stale leader, snapshots between updates, and a load (the replay of what was
written) rebuilding the same state. The RPCs on the wire are compared with Apache Kafka's in the differential
suite (tests/interop/scenarios.py share_state); the restart of a broker in tests/interop/test_share_state_restart.py."""

from __future__ import annotations

import uuid

from kfk.coordinator.share.coordinator import ShareCoordinator, ShareCoordinatorConfig
from kfk.coordinator.share.record_serde import (SHARE_SNAPSHOT_RECORD_TYPE, SHARE_UPDATE_RECORD_TYPE,
                                                deserialize_record)
from kfk.coordinator.share.state_batches import StateBatch, combine
from kfk.errors import ErrorCode

TOPIC_ID = uuid.UUID("6b2c33f4-3a5b-4f3e-9a3c-1f0d8c1e2a7b")
KEY = ("group", TOPIC_ID, 0)
ACKNOWLEDGED, ARCHIVED, AVAILABLE = 2, 4, 0


def coordinator(updates_per_snapshot: int = 500) -> ShareCoordinator:
    machine = ShareCoordinator(ShareCoordinatorConfig(state_topic_num_partitions=3,
                                                      snapshot_update_records_per_snapshot=updates_per_snapshot),
                               lambda topic_id, partition: topic_id == TOPIC_ID and partition < 2)
    for partition in range(3):
        machine.begin_loading(partition)
        machine.complete_loading(partition)
    return machine


def test_combining_state_batches() -> None:
    stored = [StateBatch(0, 10, AVAILABLE, 1)]
    assert combine(stored, [StateBatch(3, 4, ACKNOWLEDGED, 1)], 2) == [
        StateBatch(2, 2, AVAILABLE, 1), StateBatch(3, 4, ACKNOWLEDGED, 1), StateBatch(5, 10, AVAILABLE, 1)]
    # Adjacent batches of one state and count become one; everything below the start offset goes.
    assert combine([StateBatch(0, 4, ACKNOWLEDGED, 1)], [StateBatch(5, 9, ACKNOWLEDGED, 1)], 0) == [
        StateBatch(0, 9, ACKNOWLEDGED, 1)]
    assert combine([StateBatch(0, 4, ACKNOWLEDGED, 1)], [], 5) == []


def test_read_initialize_write_and_fencing() -> None:
    machine = coordinator()
    assert machine.read(KEY, 0).error == ErrorCode.INVALID_REQUEST  # never initialized
    assert machine.initialize(KEY, 1, 5, now_ms=1).error == ErrorCode.NONE
    read = machine.read(KEY, 3)
    assert (read.error, read.state_epoch, read.start_offset, read.state_batches) == (ErrorCode.NONE, 1, 5, ())
    written = machine.write(KEY, 1, 3, 5, [StateBatch(5, 6, ACKNOWLEDGED, 1), StateBatch(7, 9, AVAILABLE, 2)], -1, 2)
    assert written.error == ErrorCode.NONE
    assert machine.write(KEY, 1, 3, 7, [StateBatch(8, 8, ARCHIVED, 2)], -1, 3).error == ErrorCode.NONE
    assert machine.read(KEY, 3).state_batches == (StateBatch(7, 7, AVAILABLE, 2), StateBatch(8, 8, ARCHIVED, 2),
                                                  StateBatch(9, 9, AVAILABLE, 2))
    # The leader of epoch 3 read it: the previous leader's writes and reads are fenced, and an older state epoch.
    assert machine.write(KEY, 1, 2, 9, [], -1, 4).error == ErrorCode.FENCED_LEADER_EPOCH
    assert machine.read(KEY, 2).error == ErrorCode.FENCED_LEADER_EPOCH
    assert machine.write(KEY, 0, 3, 9, [], -1, 4).error == ErrorCode.FENCED_STATE_EPOCH
    assert machine.read(("group", TOPIC_ID, 5), 0).error == ErrorCode.INVALID_REQUEST
    assert machine.write(("group", TOPIC_ID, 5), 0, 0, 0, [], -1, 4).error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert machine.delete(KEY).error == ErrorCode.NONE
    assert machine.read(KEY, 3).error == ErrorCode.INVALID_REQUEST


def test_a_snapshot_follows_the_configured_number_of_updates_and_a_load_rebuilds_the_state() -> None:
    machine = coordinator(updates_per_snapshot=2)
    log = []
    for start in range(5):
        result = machine.write(KEY, 0, 0, start, [StateBatch(start + 1, start + 1, ARCHIVED, 1)], start, start)
        log.extend(result.records)
    types = [int.from_bytes(key[:2], "big") for key, _ in log]
    assert types == [SHARE_SNAPSHOT_RECORD_TYPE, SHARE_UPDATE_RECORD_TYPE, SHARE_UPDATE_RECORD_TYPE,
                     SHARE_SNAPSHOT_RECORD_TYPE, SHARE_UPDATE_RECORD_TYPE]
    assert deserialize_record(*log[3]).value.snapshot_epoch == 1
    loaded = coordinator()
    for key, value in log:
        loaded.replay(key, value)
    assert loaded.states == machine.states
    assert loaded.read(KEY, 0).start_offset == 4
    assert loaded.read(KEY, 0).state_batches == (StateBatch(4, 5, ARCHIVED, 1),)


def test_only_the_loaded_partitions_are_served() -> None:
    machine = ShareCoordinator(ShareCoordinatorConfig(state_topic_num_partitions=3), lambda topic_id, p: True)
    assert machine.read(KEY, 0).error == ErrorCode.NOT_COORDINATOR
    machine.begin_loading(machine.partition_of(KEY))
    assert machine.write(KEY, 0, 0, 0, [], -1, 0).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def test_the_prefix_before_every_latest_snapshot_is_redundant_and_idle_partitions_are_snapshotted_again() -> None:
    machine = coordinator(updates_per_snapshot=2)
    partition = machine.partition_of(KEY)
    other = next(key for key in ((f"group-{n}", TOPIC_ID, 0) for n in range(100))
                 if machine.partition_of(key) == partition)
    log: list = []

    def commit(result) -> None:
        """Append the write's records to the log and report them committed, as the service does."""
        assert result.error == ErrorCode.NONE
        floor = len(log)
        log.extend(result.records)
        machine.committed(result.records, floor)

    def latest_snapshot(key) -> int:
        return max(offset for offset, record in enumerate(log) if deserialize_record(*record).key == key
                   and int.from_bytes(record[0][:2], "big") == SHARE_SNAPSHOT_RECORD_TYPE)

    commit(machine.initialize(other, 0, 0, now_ms=0))  # offset 0; then idle
    commit(machine.initialize(KEY, 0, 0, now_ms=0))
    for start in range(5):
        commit(machine.write(KEY, 0, 0, start, [StateBatch(start + 1, start + 1, ARCHIVED, 1)], -1, start))
    assert latest_snapshot(KEY) > 1
    assert machine.redundant_offset(partition, high_watermark=len(log)) == 0  # the idle one holds it back
    assert machine.redundant_offset(partition, high_watermark=0) is None  # a latest snapshot not committed

    # An idle share partition's snapshot is written again once it is older than the interval (5 minutes here).
    assert machine.cold_snapshots(partition, now_ms=1_000) == []
    writes = machine.cold_snapshots(partition, now_ms=10 * 60 * 1000)
    assert {deserialize_record(*write.records[0]).key for write in writes} == {KEY, other}
    assert machine.redundant_offset(partition, high_watermark=10**6) == 0  # handed out, not committed yet
    for write in writes:
        commit(write)
    redundant = machine.redundant_offset(partition, high_watermark=len(log))
    assert redundant == min(latest_snapshot(KEY), latest_snapshot(other)) > 0

    # What is left once the prefix is deleted rebuilds the same state.
    loaded = coordinator()
    for offset in range(redundant, len(log)):
        loaded.replay(*log[offset], offset=offset)
    assert loaded.states == machine.states
    assert loaded.redundant_offset(partition, high_watermark=len(log)) == redundant

    # A deleted share partition no longer holds anything back.
    commit(machine.delete(other))
    assert machine.redundant_offset(partition, high_watermark=len(log)) == latest_snapshot(KEY)
