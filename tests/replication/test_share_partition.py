"""The share partition's record states (kfk.replication.share_partition), driven as the ShareFetch handler drives
it: the wire-level behaviour is checked with Kafka's Java share consumer in tests/interop/test_share_groups.py."""

from __future__ import annotations

import asyncio

from kfk.errors import ErrorCode
from kfk.records.builder import MemoryRecordsBuilder
from kfk.replication.share_partition import (ACCEPT, GAP, REJECT, RELEASE, RecordState, SharePartition,
                                             SharePartitionConfig, batch_offset_ranges)

CONFIG = SharePartitionConfig(record_lock_duration_ms=1000, delivery_count_limit=2, max_record_locks=100)


def batches(*ranges: tuple[int, int]) -> list[tuple[int, int, int, int]]:
    return [(first, last, 0, 0) for first, last in ranges]


def test_records_go_to_one_member_at_a_time() -> None:
    partition = SharePartition(CONFIG, 10)
    assert partition.acquire("a", batches((10, 14)), 3, now_ms=0) == [(10, 12, 1)]
    # b reads from where a's read started, and gets what a did not take.
    assert partition.next_fetch_offset() == 13
    assert partition.acquire("b", batches((10, 14)), 10, now_ms=0) == [(13, 14, 1)]
    assert partition.acknowledge("b", [(10, 10, [ACCEPT])], now_ms=0) == ErrorCode.INVALID_RECORD_STATE
    assert partition.acknowledge("a", [(10, 12, [ACCEPT])], now_ms=0) == ErrorCode.NONE
    assert (partition.start_offset, partition.end_offset) == (13, 15)


def test_release_reject_and_the_delivery_count_limit() -> None:
    partition = SharePartition(CONFIG, 0)
    partition.acquire("a", batches((0, 2)), 10, now_ms=0)
    assert partition.acknowledge("a", [(0, 2, [RELEASE, REJECT, ACCEPT])], now_ms=0) == ErrorCode.NONE
    assert partition.records[0].state is RecordState.AVAILABLE
    assert partition.next_fetch_offset() == 0
    assert partition.acquire("b", batches((0, 2)), 10, now_ms=0) == [(0, 0, 2)]
    # Released at its last allowed delivery: archived, and the start offset moves past everything.
    assert partition.acknowledge("b", [(0, 0, [RELEASE])], now_ms=0) == ErrorCode.NONE
    assert (partition.start_offset, partition.records) == (3, {})


def test_an_expired_lock_makes_the_records_available_again() -> None:
    partition = SharePartition(CONFIG, 0)
    partition.acquire("a", batches((0, 1)), 10, now_ms=0)
    partition.expire_locks(now_ms=999)
    assert partition.acquire("b", batches((0, 1)), 10, now_ms=999) == []
    partition.expire_locks(now_ms=1000)
    assert partition.acquire("b", batches((0, 1)), 10, now_ms=1000) == [(0, 1, 2)]
    assert partition.acknowledge("a", [(0, 1, [ACCEPT])], now_ms=1000) == ErrorCode.INVALID_RECORD_STATE


def test_a_closed_session_releases_what_its_member_held() -> None:
    partition = SharePartition(CONFIG, 0)
    partition.acquire("a", batches((0, 0)), 10, now_ms=0)
    partition.acquire("b", batches((1, 1)), 10, now_ms=0)
    partition.release_member("a")
    assert [record.state for record in partition.records.values()] == [RecordState.AVAILABLE, RecordState.ACQUIRED]


def test_record_locks_bound_the_in_flight_window() -> None:
    partition = SharePartition(SharePartitionConfig(max_record_locks=100), 0)
    assert partition.acquire("a", batches((0, 500)), 1000, now_ms=0) == [(0, 99, 1)]
    assert partition.acknowledge("a", [(0, 49, [ACCEPT])], now_ms=0) == ErrorCode.NONE
    assert partition.acquire("a", batches((0, 500)), 1000, now_ms=0) == [(100, 149, 1)]


def test_locks_exhausted_until_an_acknowledgement_or_release_frees_some() -> None:
    """What a ShareFetch waits on instead of new records (kfk.server.handlers.share_groups._wait_for_locks)."""
    partition = SharePartition(SharePartitionConfig(max_record_locks=100), 0)
    partition.acquire("a", batches((0, 149)), 60, now_ms=0)
    assert not partition.locks_exhausted()
    partition.acquire("b", batches((0, 149)), 60, now_ms=0)
    assert partition.end_offset == 100 and partition.locks_exhausted()  # new records in the log change nothing
    partition.release_member("b")
    assert not partition.locks_exhausted()  # b's records are available again
    partition.acquire("c", batches((0, 149)), 60, now_ms=0)
    assert partition.locks_exhausted()
    assert partition.acknowledge("a", [(0, 9, [ACCEPT])], now_ms=0) == ErrorCode.NONE
    assert not partition.locks_exhausted()  # the start offset moved: ten more may be acquired


def test_acknowledgements_are_all_or_nothing_and_gaps_pass() -> None:
    partition = SharePartition(CONFIG, 0)
    partition.acquire("a", batches((0, 1), (3, 3)), 10, now_ms=0)
    assert partition.acknowledge("a", [(0, 1, [ACCEPT]), (5, 5, [ACCEPT])], now_ms=0) \
        == ErrorCode.INVALID_RECORD_STATE
    assert partition.records[0].state is RecordState.ACQUIRED
    assert partition.acknowledge("a", [(0, 1, [ACCEPT, ACCEPT, ACCEPT])], now_ms=0) == ErrorCode.INVALID_REQUEST
    # Offset 2 was never a record (a gap in the batches read): a GAP acknowledgement of it passes.
    assert partition.acknowledge("a", [(0, 3, [ACCEPT, ACCEPT, GAP, ACCEPT])], now_ms=0) == ErrorCode.NONE


def test_batch_offset_ranges_of_a_log_read() -> None:
    first = MemoryRecordsBuilder(base_offset=5)
    for index in range(3):
        first.append(0, None, b"v%d" % index)
    second = MemoryRecordsBuilder(base_offset=8)
    second.append(0, None, b"w")
    data = bytes(first.close() + second.close())
    ranges = list(batch_offset_ranges(data + data[:20]))  # a read may end in part of a batch
    assert [(base, last) for base, last, _, _ in ranges] == [(5, 7), (8, 8)]
    assert ranges[1][3] == len(data)


def test_state_updates_carry_what_changed_and_the_start_offset() -> None:
    partition = SharePartition(CONFIG, 0)
    assert partition.take_state_update() is None
    partition.acquire("a", batches((0, 5)), 10, now_ms=0)
    assert partition.take_state_update() is None  # acquisitions are not durable
    assert partition.acknowledge("a", [(0, 1, [ACCEPT]), (3, 4, [REJECT, RELEASE])], now_ms=0) == ErrorCode.NONE
    # 0 and 1 accepted: the start offset moves to 2; 3 archived, 4 available again after one delivery.
    assert partition.take_state_update() == (2, [(3, 3, RecordState.ARCHIVED.value, 1),
                                                 (4, 4, RecordState.AVAILABLE.value, 1)])
    assert partition.take_state_update() is None
    partition.expire_locks(now_ms=CONFIG.record_lock_duration_ms)  # 2 and 5 come back
    assert partition.take_state_update() == (2, [(2, 2, 0, 1), (5, 5, 0, 1)])


def test_writes_reach_the_share_coordinator_in_the_order_their_changes_were_taken() -> None:
    """The first write waits (its share coordinator moves); a second one, taken later, goes only once the first is
    answered. Landing first, it would have the first lay its older start offset over it: record 0, accepted in
    between, would be stored as never done with, and delivered again by the next leader."""
    partition = SharePartition(CONFIG, 0)
    landed: list[tuple[int, list]] = []

    async def scenario() -> list[ErrorCode]:
        coordinator_back = asyncio.Event()
        sent: list[int] = []

        async def write(start_offset: int, state_batches: list) -> ErrorCode:
            sent.append(start_offset)
            if len(sent) == 1:
                await coordinator_back.wait()
            landed.append((start_offset, state_batches))
            return ErrorCode.NONE

        partition.acquire("a", batches((0, 1)), 10, now_ms=0)
        assert partition.acknowledge("a", [(1, 1, [ACCEPT])], now_ms=0) == ErrorCode.NONE
        first = asyncio.ensure_future(partition.write_state(write))
        await asyncio.sleep(0)
        assert partition.acknowledge("a", [(0, 0, [ACCEPT])], now_ms=0) == ErrorCode.NONE
        second = asyncio.ensure_future(partition.write_state(write))
        for _ in range(5):
            await asyncio.sleep(0)
        assert (sent, landed) == ([0], [])  # the second waits for the first
        coordinator_back.set()
        return list(await asyncio.gather(first, second))

    assert asyncio.run(scenario()) == [ErrorCode.NONE, ErrorCode.NONE]
    assert landed == [(0, [(1, 1, RecordState.ACKNOWLEDGED.value, 1)]), (2, [])]


def test_a_failed_write_goes_again_with_the_next() -> None:
    partition = SharePartition(CONFIG, 0)
    partition.acquire("a", batches((0, 2)), 10, now_ms=0)
    assert partition.acknowledge("a", [(1, 1, [REJECT])], now_ms=0) == ErrorCode.NONE

    async def refused(start_offset: int, state_batches: list) -> ErrorCode:
        return ErrorCode.NOT_COORDINATOR

    assert asyncio.run(partition.write_state(refused)) == ErrorCode.NOT_COORDINATOR
    assert partition.take_state_update() == (0, [(1, 1, RecordState.ARCHIVED.value, 1)])


def test_a_restored_share_partition_honours_the_stored_states() -> None:
    """A new leader's share partition: stored start offset 2, 3 archived, 4 available after two deliveries; 5 on
    was never acknowledged (acquired when the old leader went: available, its count lost with the lock)."""
    partition = SharePartition(CONFIG, 2, leader_epoch=1)
    partition.restore([(3, 3, RecordState.ARCHIVED.value, 1), (4, 4, RecordState.AVAILABLE.value, 1)])
    assert partition.next_fetch_offset() == 2
    assert partition.acquire("a", batches((2, 6)), 10, now_ms=0) == [(2, 2, 1), (4, 4, 2), (5, 6, 1)]
    assert partition.acknowledge("a", [(2, 2, [ACCEPT]), (4, 6, [ACCEPT])], now_ms=0) == ErrorCode.NONE
    assert (partition.start_offset, partition.records) == (7, {})
