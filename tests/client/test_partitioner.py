"""The murmur2 partitioner against independent implementations, and the sticky partitioner's switching rule."""

from __future__ import annotations

import random

import pytest
from kafka.partitioner.default import DefaultPartitioner
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from kfk.client.producer.partitioner import BuiltInPartitioner, murmur2, partition_for_key


def random_keys(count: int, seed: int = 8) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(rng.randint(0, 64)) for _ in range(count)]


def test_murmur2_matches_the_java_clients_test_vectors() -> None:
    # Apache Kafka's UtilsTest.testMurmur2 vectors.
    cases = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        bytes([ord("a"), ord("b"), ord("c")]): 479470107,
    }
    for key, expected in cases.items():
        assert murmur2(key) == expected, key


def test_murmur2_of_10000_random_keys_equals_kafka_pythons() -> None:
    for key in random_keys(10_000):
        assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key) & 0xFFFFFFFF


class _OracleCluster:
    """The cluster view kafka-python's DefaultPartitioner asks for: every partition available."""

    def __init__(self, topic: str, count: int) -> None:
        self.topic, self.count = topic, count

    def topics(self) -> set[str]:
        return {self.topic}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(self.count))

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(self.count))


@pytest.mark.parametrize("partitions", [1, 3, 7, 12, 100])
def test_partition_for_10000_random_keys_equals_kafka_pythons_default_partitioner(partitions: int) -> None:
    oracle = DefaultPartitioner()
    cluster = _OracleCluster("t", partitions)
    for key in random_keys(10_000, seed=partitions):
        assert partition_for_key(key, partitions) == oracle.partition("t", key, key, None, None, cluster)


def test_sticky_partitioner_keeps_one_partition_until_a_batch_worth_of_bytes() -> None:
    partitioner = BuiltInPartitioner(sticky_batch_size=1000, rng=random.Random(1))
    available = [0, 1, 2, 3]
    first = partitioner.partition("t", available, 4)
    for _ in range(9):
        assert partitioner.partition("t", available, 4) == first
        partitioner.record_appended("t", first, 100, available, 4)
    partitioner.record_appended("t", first, 100, available, 4)  # 1000 bytes: switch
    second = partitioner.partition("t", available, 4)
    assert second != first and second in available


def test_sticky_partitioner_only_picks_partitions_with_a_leader() -> None:
    partitioner = BuiltInPartitioner(sticky_batch_size=1, rng=random.Random(2))
    seen = set()
    for _ in range(200):
        partition = partitioner.partition("t", [2, 5], 8)
        seen.add(partition)
        partitioner.record_appended("t", partition, 10, [2, 5], 8)
    assert seen == {2, 5}
