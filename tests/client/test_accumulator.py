"""RecordAccumulator: batches fill to batch.size, become ready on linger/full/flush, drain one per partition within
max.request.size, and buffer.memory blocks then times out."""

from __future__ import annotations

import threading
import time

import pytest

from kfk.client.cluster import BrokerMetadata, ClusterMetadata, PartitionMetadata, TopicMetadata, ZERO_TOPIC_ID
from kfk.client.network_client import monotonic_ms
from kfk.client.producer.accumulator import RecordAccumulator
from kfk.common.structs import TopicPartition
from kfk.errors import KafkaTimeoutError, RecordTooLargeError
from kfk.records import CompressionType, RecordBatch

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def cluster(leaders: dict[int, int]) -> ClusterMetadata:
    partitions = {p: PartitionMetadata("t", p, leader, 0, (leader,), (leader,)) for p, leader in leaders.items()}
    brokers = {node: BrokerMetadata(node, "h", 9092 + node) for node in set(leaders.values()) if node >= 0}
    return ClusterMetadata(brokers, {"t": TopicMetadata("t", ZERO_TOPIC_ID, False, 0, partitions)})


def accumulator(**options) -> RecordAccumulator:
    settings = dict(batch_size=1000, buffer_memory=100_000, linger_ms=50, compression_type=CompressionType.NONE,
                    compression_level=None, delivery_timeout_ms=120_000)
    settings.update(options)
    return RecordAccumulator(**settings)


def test_records_fill_a_batch_up_to_batch_size() -> None:
    acc = accumulator()
    futures = [acc.append(T0, 1, None, b"x" * 90, [], 1000)[0] for _ in range(25)]
    batches = acc.drain(cluster({0: 1}), {1}, 10**6, monotonic_ms(), lambda batch: True)[1]
    assert len(batches) == 1
    batch = batches[0]
    data = batch.close()
    assert len(data) <= 1000 and batch.record_count == 9
    assert [record.value for record in RecordBatch(bytes(data))] == [b"x" * 90] * 9
    assert futures[0]._relative_offset == 0 and futures[9]._relative_offset == 0  # the second batch starts again


def test_a_batch_is_ready_when_full_or_lingered_or_flushing() -> None:
    acc = accumulator(linger_ms=10_000)
    metadata = cluster({0: 1, 1: 2})
    acc.append(T0, 1, None, b"x", [], 1000)
    assert acc.ready(metadata, monotonic_ms()).ready_nodes == set()
    assert 9_000 < acc.ready(metadata, monotonic_ms()).next_ready_check_delay_ms <= 10_000
    for _ in range(20):
        acc.append(T1, 1, None, b"y" * 100, [], 1000)
    assert acc.ready(metadata, monotonic_ms()).ready_nodes == {2}, "partition 1 has a full batch"
    acc.begin_flush()
    assert acc.ready(metadata, monotonic_ms()).ready_nodes == {1, 2}
    acc.end_flush()
    assert acc.ready(metadata, monotonic_ms() + 10_001).ready_nodes == {1, 2}


def test_unknown_leaders_are_reported_for_a_metadata_refresh() -> None:
    acc = accumulator(linger_ms=0)
    acc.append(T0, 1, None, b"x", [], 1000)
    result = acc.ready(cluster({0: -1}), monotonic_ms())
    assert result.ready_nodes == set() and result.unknown_leader_topics == {"t"}


def test_drain_takes_one_batch_per_partition_within_max_request_size() -> None:
    acc = accumulator(linger_ms=0)
    for _ in range(30):
        acc.append(T0, 1, None, b"x" * 100, [], 1000)
        acc.append(T1, 1, None, b"y" * 100, [], 1000)
    drained = acc.drain(cluster({0: 1, 1: 1}), {1}, 1200, monotonic_ms(), lambda batch: True)
    assert len(drained[1]) == 1, "two batches would pass max.request.size"
    drained = acc.drain(cluster({0: 1, 1: 1}), {1}, 10**6, monotonic_ms(), lambda batch: True)
    assert sorted(batch.topic_partition for batch in drained[1]) == [T0, T1]


def test_buffer_memory_blocks_send_then_times_out() -> None:
    acc = accumulator(buffer_memory=2000, batch_size=1000)
    acc.append(T0, 1, None, b"x" * 900, [], 100)
    acc.append(T0, 1, None, b"x" * 900, [], 100)
    start = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match="buffer.memory"):
        acc.append(T0, 1, None, b"x" * 900, [], 100)
    assert 0.09 < time.monotonic() - start < 1


def test_memory_freed_by_a_completed_batch_unblocks_send() -> None:
    acc = accumulator(buffer_memory=2000, batch_size=1000, linger_ms=0)
    acc.append(T0, 1, None, b"x" * 900, [], 100)
    acc.append(T0, 1, None, b"x" * 900, [], 100)
    batch = acc.drain(cluster({0: 1}), {1}, 10**6, monotonic_ms(), lambda batch: True)[1][0]
    acc.deallocate(batch)
    future, _ = acc.append(T0, 1, None, b"x" * 900, [], 100)
    assert not future.done()


def test_a_blocked_send_is_woken_once_a_few_batches_of_memory_are_free() -> None:
    """Waking a blocked send for every freed batch handed the GIL back and forth once per request: it is woken
    when four batches' worth is free (or half of buffer.memory, when that is less)."""
    acc = accumulator(buffer_memory=8000, batch_size=1000, linger_ms=0)
    for _ in range(8):
        acc.append(T0, 1, None, b"x" * 900, [], 100)
    appended = threading.Event()
    blocked = threading.Thread(target=lambda: (acc.append(T0, 1, None, b"x" * 900, [], 10_000), appended.set()))
    blocked.start()
    drained = [acc.drain(cluster({0: 1}), {1}, 10**6, monotonic_ms(), lambda batch: True)[1][0] for _ in range(4)]
    for batch in drained[:3]:
        acc.deallocate(batch)
    assert not appended.wait(0.2)  # 3000 bytes free: still waiting
    acc.deallocate(drained[3])
    assert appended.wait(5)
    blocked.join()


def test_a_record_larger_than_buffer_memory_is_refused() -> None:
    with pytest.raises(RecordTooLargeError):
        accumulator(buffer_memory=500).append(T0, 1, None, b"x" * 600, [], 100)


def test_retried_batches_go_back_in_sequence_order() -> None:
    acc = accumulator(linger_ms=0, batch_size=100)
    for _ in range(3):
        acc.append(T0, 1, None, b"x" * 80, [], 100)
    batches = []
    for sequence in range(3):
        batch = acc.drain(cluster({0: 1}), {1}, 10**6, monotonic_ms(), lambda batch: True)[1][0]
        batch.base_sequence = sequence
        batches.append(batch)
    for batch in (batches[2], batches[0], batches[1]):
        acc.reenqueue(batch, monotonic_ms(), 0)
    order = [acc.drain(cluster({0: 1}), {1}, 10**6, monotonic_ms() + 1, lambda batch: True)[1][0].base_sequence
             for _ in range(3)]
    assert order == [0, 1, 2]


def test_drain_next_takes_the_partitions_first_batch_only_when_it_may_go() -> None:
    """The sender's one-partition produce cycle judges the head batch as ready() and drain() do."""
    acc = accumulator(linger_ms=10_000)
    assert acc.only_partition() is None
    acc.append(T0, 1, None, b"x", [], 1000)
    assert acc.only_partition() == T0
    assert acc.drain_next(T0, monotonic_ms(), lambda batch: True) is None  # lingering, not full
    for _ in range(12):
        acc.append(T0, 1, None, b"x" * 90, [], 1000)  # fills the first batch, starts a second
    assert acc.drain_next(T0, monotonic_ms(), lambda batch: False) is None  # held back (idempotence)
    first = acc.drain_next(T0, monotonic_ms(), lambda batch: True)
    assert first is not None and first.is_full
    assert acc.drain_next(T0, monotonic_ms(), lambda batch: True) is None  # the second one lingers
    acc.reenqueue(first, monotonic_ms(), 10_000)
    assert acc.drain_next(T0, monotonic_ms(), lambda batch: True) is None  # in its retry backoff
    assert acc.drain_next(T0, monotonic_ms() + 20_000, lambda batch: True) is first
    acc.append(T1, 1, None, b"x", [], 1000)
    assert acc.only_partition() is None  # two partitions: the sender's rounds keep them fair
