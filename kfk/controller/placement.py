"""Replica placement: which brokers hold the replicas of new partitions (Kafka's AdminUtils.assignReplicasToBrokers).

Without racks, for brokers b[0..n-1] (sorted by id) and a random start index s:
- the first replica (the preferred leader) of partition p is b[(p + s) mod n], so leaders go round-robin;
- replica j >= 1 of p is b[(first + 1 + (shift + j - 1) mod (n - 1)) mod n], where `shift` starts random and
  grows by one each time p wraps around the brokers. The offset 1 + (...) mod (n - 1) is never 0 mod n, so the
  replicas of a partition land on distinct brokers, and the growing shift spreads the followers of one leader over
  different brokers instead of always its neighbour.
With racks (every broker's rack set), the brokers are first interleaved rack by rack (rack-a's first, rack-b's
first, ..., rack-a's second, ...) and a follower candidate is skipped while its rack, or the broker itself,
already holds a replica of the partition and some rack (or broker) still holds none. Brokers without a rack count
as one rack of their own when others have racks, as Kafka's KRaft placer treats them.

The random start index and shift make different topics' leaders start on different brokers; tests pass a seeded
random.Random, or a fixed start index (CreatePartitions continues a topic's existing layout that way).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from kfk.errors import InvalidPartitionsError, InvalidReplicationFactorError


@dataclass(frozen=True, slots=True)
class BrokerPlacement:
    """What placement needs of a broker: its id and its rack (None: no rack)."""

    broker_id: int
    rack: str | None = None


def assign_replicas_to_brokers(brokers: Sequence[BrokerPlacement], num_partitions: int, replication_factor: int,
                               rng: random.Random, fixed_start_index: int = -1,
                               start_partition_id: int = -1) -> dict[int, list[int]]:
    """Replica lists of partitions start_partition_id (default 0) .. + num_partitions - 1, by partition id."""
    if num_partitions <= 0:
        raise InvalidPartitionsError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"The target replication factor of {replication_factor} cannot be reached because only "
            f"{len(brokers)} broker(s) are registered."
        )
    ordered = sorted(brokers, key=lambda broker: broker.broker_id)
    if all(broker.rack is None for broker in ordered):
        return _rack_unaware([broker.broker_id for broker in ordered], num_partitions, replication_factor, rng,
                             fixed_start_index, start_partition_id)
    racks = {broker.broker_id: broker.rack or "" for broker in ordered}
    return _rack_aware(racks, num_partitions, replication_factor, rng, fixed_start_index, start_partition_id)


def _replica_index(first_replica_index: int, shift: int, replica_index: int, broker_count: int) -> int:
    return (first_replica_index + 1 + (shift + replica_index) % (broker_count - 1)) % broker_count


def _rack_unaware(broker_ids: list[int], num_partitions: int, replication_factor: int, rng: random.Random,
                  fixed_start_index: int, start_partition_id: int) -> dict[int, list[int]]:
    count = len(broker_ids)
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(count)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(count)
    partition_id = max(0, start_partition_id)
    assignment: dict[int, list[int]] = {}
    for _ in range(num_partitions):
        if partition_id > 0 and partition_id % count == 0:
            shift += 1
        first = (partition_id + start_index) % count
        replicas = [broker_ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(broker_ids[_replica_index(first, shift, j, count)])
        assignment[partition_id] = replicas
        partition_id += 1
    return assignment


def rack_alternated_brokers(racks: dict[int, str]) -> list[int]:
    """Brokers interleaved across racks (racks in name order, brokers of a rack in id order)."""
    by_rack: dict[str, list[int]] = {}
    for broker_id in sorted(racks):
        by_rack.setdefault(racks[broker_id], []).append(broker_id)
    iterators = [iter(by_rack[rack]) for rack in sorted(by_rack)]
    result: list[int] = []
    index = 0
    while len(result) < len(racks):
        broker = next(iterators[index], None)
        if broker is not None:
            result.append(broker)
        index = (index + 1) % len(iterators)
    return result


def _rack_aware(racks: dict[int, str], num_partitions: int, replication_factor: int, rng: random.Random,
                fixed_start_index: int, start_partition_id: int) -> dict[int, list[int]]:
    rack_count = len(set(racks.values()))
    arranged = rack_alternated_brokers(racks)
    count = len(arranged)
    start_index = fixed_start_index if fixed_start_index >= 0 else rng.randrange(count)
    shift = fixed_start_index if fixed_start_index >= 0 else rng.randrange(count)
    partition_id = max(0, start_partition_id)
    assignment: dict[int, list[int]] = {}
    for _ in range(num_partitions):
        if partition_id > 0 and partition_id % count == 0:
            shift += 1
        first = (partition_id + start_index) % count
        leader = arranged[first]
        replicas = [leader]
        racks_with_replicas = {racks[leader]}
        brokers_with_replicas = {leader}
        k = 0
        for _ in range(replication_factor - 1):
            while True:
                broker = arranged[_replica_index(first, shift * rack_count, k, count)]
                rack = racks[broker]
                k += 1
                if ((rack not in racks_with_replicas or len(racks_with_replicas) == rack_count)
                        and (broker not in brokers_with_replicas or len(brokers_with_replicas) == count)):
                    replicas.append(broker)
                    racks_with_replicas.add(rack)
                    brokers_with_replicas.add(broker)
                    break
        assignment[partition_id] = replicas
        partition_id += 1
    return assignment
