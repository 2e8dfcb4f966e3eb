"""Which partition of a coordinator topic owns a key: Kafka's `Utils.abs(key.hashCode()) % partitions`.

Both coordinators place their keys this way (a group id in __consumer_offsets, a transactional id in
__transaction_state), and clients find the coordinator by asking for the leader of that partition, so the hash must
be Java's String.hashCode exactly: over UTF-16 code units, as a signed 32-bit int.
"""

from __future__ import annotations

import struct


def java_string_hashcode(text: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as a signed 32-bit int."""
    hash_code = 0
    encoded = text.encode("utf-16-be")
    for (unit,) in struct.iter_unpack(">H", encoded):
        hash_code = (31 * hash_code + unit) & 0xFFFFFFFF
    return hash_code - (1 << 32) if hash_code & 0x80000000 else hash_code


def partition_for(key: str, num_partitions: int) -> int:
    """The coordinator partition of `key`. Kafka's Utils.abs maps Integer.MIN_VALUE to 0."""
    hash_code = java_string_hashcode(key)
    return (0 if hash_code == -(1 << 31) else abs(hash_code)) % num_partitions
