"""Which partition a record goes to: murmur2 of the key, or a sticky partition for records without one.

Keyed records: ``(murmur2(key) & 0x7fffffff) % num_partitions``, the Java client's BuiltInPartitioner.partitionForKey
(and kafka-python's DefaultPartitioner, and librdkafka's ``murmur2_random``). Producers in different languages
writing the same key must agree on its partition, or a compacted topic and every per-key ordering guarantee break,
so murmur2 here is Kafka's variant bit for bit: seed 0x9747b28c, little-endian 4-byte blocks, 32-bit wrap-around.

Keyless records (KIP-794, Kafka 3.3+): all of them go to one partition, chosen at random among those with a leader,
until batch.size bytes have been produced to it; then another is chosen. That fills batches (fewer, larger requests)
while still spreading load over time, instead of round-robin's one-record batches.
"""

from __future__ import annotations

import random
import struct
import threading

__all__ = ["murmur2", "partition_for_key", "to_positive", "BuiltInPartitioner"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash of ``data`` as a signed 32-bit int (Java's ``Utils.murmur2``)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    blocks = length >> 2
    if blocks:
        for k in struct.unpack_from(f"<{blocks}I", data):
            k = (k * _M) & _MASK32
            k ^= k >> 24
            k = (k * _M) & _MASK32
            h = ((h * _M) & _MASK32) ^ k
    tail = length & 3
    if tail:
        base = length & ~3
        if tail == 3:
            h ^= data[base + 2] << 16
        if tail >= 2:
            h ^= data[base + 1] << 8
        h ^= data[base]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(number: int) -> int:
    """Java's Utils.toPositive: clear the sign bit (not abs(), which differs for negative values)."""
    return number & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return to_positive(murmur2(key)) % num_partitions


class BuiltInPartitioner:
    """The sticky partition of each topic for keyless records, switched after ``sticky_batch_size`` bytes.

    Called from the threads that call send(); switching partitions takes a lock, counting bytes does not."""

    def __init__(self, sticky_batch_size: int, rng: random.Random | None = None) -> None:
        self.sticky_batch_size = max(1, sticky_batch_size)
        self._random = rng or random.Random()
        self._sticky: dict[str, list[int]] = {}  # topic -> [partition, produced bytes]
        self._lock = threading.Lock()

    def partition(self, topic: str, available: list[int], num_partitions: int) -> int:
        """The current sticky partition of ``topic`` (choosing one if there is none)."""
        state = self._sticky.get(topic)
        if state is not None and state[0] < num_partitions:
            return state[0]
        with self._lock:
            partition = self._choose(available, num_partitions, None)
            self._sticky[topic] = [partition, 0]
            return partition

    def record_appended(self, topic: str, partition: int, size_bytes: int, available: list[int],
                        num_partitions: int) -> None:
        """Count bytes produced to the sticky partition; past the batch size, move to another partition."""
        state = self._sticky.get(topic)
        if state is None or state[0] != partition:
            return
        state[1] += size_bytes  # racy across sender threads, harmlessly: the count only decides when to move on
        if state[1] >= self.sticky_batch_size:
            with self._lock:
                if self._sticky.get(topic) is state:
                    self._sticky[topic] = [self._choose(available, num_partitions, partition), 0]

    def _choose(self, available: list[int], num_partitions: int, previous: int | None) -> int:
        candidates = available if available else list(range(num_partitions))
        if len(candidates) > 1 and previous is not None:
            candidates = [partition for partition in candidates if partition != previous]
        return self._random.choice(candidates)
