"""The server-side assignors of the consumer protocol (`group.consumer.assignors`; a member may name one in its
heartbeat's ServerAssignor, else the first configured one serves): Kafka's `uniform` and `range`.

An assignor maps (each member's subscribed topic ids, each topic's partition count, the current target assignment) to
a new target assignment. Both are deterministic, so every coordinator computes the same target from the same state.

- uniform: every partition of a subscribed topic goes to one of the members subscribing to it, members' partition
  counts differing by at most one where their subscriptions allow, and partitions staying where they were as far as
  balance allows (a member joining or leaving moves only the partitions it must).
- range: per topic, the members subscribing to it sorted by member id, each takes a contiguous range of
  partitions, the first (partitions % members) one more: members subscribed to co-partitioned topics get the same
  partition numbers of each.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from kfk.coordinator.group.consumer_group import Assignment, normalized

#: member id -> the topic ids it subscribes to (existing topics only).
Subscriptions = Mapping[str, frozenset[uuid.UUID]]
#: topic id -> its partition count.
TopicPartitionCounts = Mapping[uuid.UUID, int]
Assignor = Callable[[Subscriptions, TopicPartitionCounts, Mapping[str, Assignment]], dict[str, Assignment]]

UNIFORM = "uniform"
RANGE = "range"


def uniform_assign(subscriptions: Subscriptions, partition_counts: TopicPartitionCounts,
                   current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    owned: dict[str, set[tuple[uuid.UUID, int]]] = {member_id: set() for member_id in subscriptions}
    taken: set[tuple[uuid.UUID, int]] = set()
    # Stickiness: every member keeps what it had of the topics it still subscribes to.
    for member_id in sorted(subscriptions):
        topics = subscriptions[member_id]
        for topic_id, partitions in current.get(member_id, {}).items():
            if topic_id not in topics:
                continue
            for partition in partitions:
                key = (topic_id, partition)
                if partition < partition_counts.get(topic_id, 0) and key not in taken:
                    owned[member_id].add(key)
                    taken.add(key)
    subscribers: dict[uuid.UUID, list[str]] = {}
    for member_id in sorted(subscriptions):
        for topic_id in subscriptions[member_id]:
            if topic_id in partition_counts:
                subscribers.setdefault(topic_id, []).append(member_id)
    # Every partition nobody has goes to the least loaded member that subscribes to its topic.
    for topic_id in sorted(subscribers, key=str):
        for partition in range(partition_counts[topic_id]):
            if (topic_id, partition) not in taken:
                receiver = min(subscribers[topic_id], key=lambda m: (len(owned[m]), m))
                owned[receiver].add((topic_id, partition))
                taken.add((topic_id, partition))
    _balance(owned, subscriptions)
    return {member_id: _to_assignment(partitions) for member_id, partitions in owned.items()}


def _balance(owned: dict[str, set[tuple[uuid.UUID, int]]], subscriptions: Subscriptions) -> None:
    """Move partitions from the most to the least loaded members (that subscribe to their topic) until no move
    leaves the counts closer: each move lowers the sum of squared counts, so this ends."""
    moved = True
    while moved:
        moved = False
        by_load = sorted(owned, key=lambda m: (len(owned[m]), m))
        for giver in reversed(by_load):
            for receiver in by_load:
                if len(owned[receiver]) + 1 >= len(owned[giver]):
                    break
                movable = sorted((key for key in owned[giver] if key[0] in subscriptions[receiver]),
                                 key=lambda key: (str(key[0]), key[1]))
                if movable:
                    key = movable[-1]
                    owned[giver].remove(key)
                    owned[receiver].add(key)
                    moved = True
                    break
            if moved:
                break


def range_assign(subscriptions: Subscriptions, partition_counts: TopicPartitionCounts,
                 current: Mapping[str, Assignment]) -> dict[str, Assignment]:
    owned: dict[str, set[tuple[uuid.UUID, int]]] = {member_id: set() for member_id in subscriptions}
    for topic_id, count in partition_counts.items():
        members = sorted(member_id for member_id, topics in subscriptions.items() if topic_id in topics)
        if not members:
            continue
        quota, extra = divmod(count, len(members))
        start = 0
        for index, member_id in enumerate(members):
            size = quota + (1 if index < extra else 0)
            owned[member_id].update((topic_id, partition) for partition in range(start, start + size))
            start += size
    return {member_id: _to_assignment(partitions) for member_id, partitions in owned.items()}


def _to_assignment(partitions: set[tuple[uuid.UUID, int]]) -> Assignment:
    by_topic: dict[uuid.UUID, set[int]] = {}
    for topic_id, partition in partitions:
        by_topic.setdefault(topic_id, set()).add(partition)
    return normalized(by_topic)


ASSIGNORS: dict[str, Assignor] = {UNIFORM: uniform_assign, RANGE: range_assign}
