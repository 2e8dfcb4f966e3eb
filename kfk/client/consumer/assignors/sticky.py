"""The sticky assignors: balanced like round robin, and moving as few partitions as possible between rebalances.

AbstractStickyAssignor does the work, in three steps:
1. Ownership: each member's previous partitions, from its subscription's owned_partitions (cooperative) or its
   user data (eager "sticky", whose members own nothing any more when they rejoin). A partition claimed by two
   members goes to the one with the higher generation; partitions of topics a member no longer subscribes to, or
   that no longer exist, are dropped.
2. Keep: a member keeps its owned partitions up to its quota. When every member subscribes to the same topics the
   quotas are exact (each gets P // M, and P % M members one more; the members that owned the most get the bigger
   quotas), so the result is balanced in one pass.
3. Fill and balance: every partition still unowned goes to the eligible member with the fewest partitions; then,
   while some member has two more partitions than another member that could take one of them, one moves. That
   last step is what makes mixed subscriptions balanced as far as they can be.

Java's implementation differs in its data structures and in tie-breaking, so two clients can compute different (but
equally valid) assignments; within a group only the leader's assignor runs, so that never matters.

StickyAssignor ("sticky") is eager and carries the previous assignment and generation in its user data, in Java's
StickyAssignorUserData v1 layout (an array of topic + partitions, then an int32 generation). The
CooperativeStickyAssignor ("cooperative-sticky") uses the subscription's owned partitions and generation (v2+;
user data holds just the generation, for older leaders), and withholds any partition that changes owner in this
rebalance: its old owner revokes it first and rejoins, and the next rebalance hands it over (KIP-429).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from kfk.client.consumer.assignors.protocol import RebalanceProtocol, Subscription, group_partitions
from kfk.client.consumer.assignors.range import member_sort_key
from kfk.common.structs import TopicPartition
from kfk.errors import ProtocolError
from kfk.protocol.primitives import INT32, read_string, write_string

__all__ = ["StickyAssignor", "CooperativeStickyAssignor", "sticky_assign"]

DEFAULT_GENERATION = -1


def sticky_assign(partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription],
                  owned: Mapping[str, tuple[list[TopicPartition], int]]) -> dict[str, list[TopicPartition]]:
    """The sticky, balanced assignment. ``owned[member] = (partitions, generation)``."""
    members = sorted(subscriptions, key=lambda m: member_sort_key(m, subscriptions))
    subscribed = {member: set(subscriptions[member].topics) for member in members}
    all_partitions = [TopicPartition(topic, partition)
                      for topic in sorted({t for topics in subscribed.values() for t in topics})
                      for partition in range(partitions_per_topic.get(topic, 0))]
    existing = set(all_partitions)

    # 1. Ownership, the highest generation winning a double claim.
    owner: dict[TopicPartition, tuple[int, str]] = {}
    for member in members:
        partitions, generation = owned.get(member, ([], DEFAULT_GENERATION))
        for tp in partitions:
            if tp not in existing or tp.topic not in subscribed[member]:
                continue
            claim = owner.get(tp)
            if claim is None or generation > claim[0]:
                owner[tp] = (generation, member)
    previously: dict[str, list[TopicPartition]] = {member: [] for member in members}
    for tp, (_, member) in owner.items():
        previously[member].append(tp)

    assignment: dict[str, list[TopicPartition]] = {member: [] for member in members}
    if not members or not all_partitions:
        return assignment

    # 2. Keep owned partitions up to each member's quota.
    same_subscriptions = len({frozenset(topics) for topics in subscribed.values()}) == 1
    if same_subscriptions:
        min_quota, extra = divmod(len(all_partitions), len(members))
        by_previous_size = sorted(members, key=lambda m: -len(previously[m]))
        quota = {member: min_quota + (1 if index < extra else 0) for index, member in enumerate(by_previous_size)}
    else:
        quota = {member: len(all_partitions) for member in members}
    assigned: set[TopicPartition] = set()
    for member in members:
        kept = sorted(previously[member])[:quota[member]]
        assignment[member].extend(kept)
        assigned.update(kept)

    # 3. Fill with the fewest-first rule, then move partitions until no member has two more than one that could
    # take some of them.
    eligible = {tp: [member for member in members if tp.topic in subscribed[member]] for tp in all_partitions}
    for tp in all_partitions:
        if tp in assigned:
            continue
        candidates = eligible[tp]
        if not candidates:
            continue
        target = min(candidates, key=lambda m: len(assignment[m]))
        assignment[target].append(tp)
        assigned.add(tp)
    _balance(assignment, eligible, members)
    return {member: sorted(partitions) for member, partitions in assignment.items()}


def _balance(assignment: dict[str, list[TopicPartition]], eligible: Mapping[TopicPartition, list[str]],
             members: list[str]) -> None:
    limit = sum(len(partitions) for partitions in assignment.values()) * max(len(members), 1)
    for _ in range(limit):
        moved = False
        for source in sorted(members, key=lambda m: -len(assignment[m])):
            for tp in sorted(assignment[source], reverse=True):
                takers = [m for m in eligible[tp] if len(assignment[m]) + 1 < len(assignment[source])]
                if takers:
                    target = min(takers, key=lambda m: len(assignment[m]))
                    assignment[source].remove(tp)
                    assignment[target].append(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return


class StickyAssignor:
    name = "sticky"
    supported_protocols = (RebalanceProtocol.EAGER,)

    def __init__(self) -> None:
        self._assignment: list[TopicPartition] = []
        self._generation = DEFAULT_GENERATION

    def subscription_user_data(self, topics: list[str], owned: list[TopicPartition], generation_id: int) -> bytes:
        """The last assignment this member received and its generation (StickyAssignorUserData v1)."""
        return encode_sticky_user_data(self._assignment, self._generation)

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        owned = {}
        for member, subscription in subscriptions.items():
            if subscription.owned_partitions:
                owned[member] = (list(subscription.owned_partitions), subscription.generation_id)
            elif subscription.user_data:
                owned[member] = decode_sticky_user_data(subscription.user_data)
        return sticky_assign(partitions_per_topic, subscriptions, owned)

    def on_assignment(self, assignment: list[TopicPartition], generation_id: int) -> None:
        self._assignment = list(assignment)
        self._generation = generation_id


class CooperativeStickyAssignor:
    name = "cooperative-sticky"
    supported_protocols = (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER)

    def __init__(self) -> None:
        self._generation = DEFAULT_GENERATION

    def subscription_user_data(self, topics: list[str], owned: list[TopicPartition], generation_id: int) -> bytes:
        return INT32.pack(self._generation)

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        owned = {}
        for member, subscription in subscriptions.items():
            generation = subscription.generation_id
            if generation == DEFAULT_GENERATION and subscription.user_data and len(subscription.user_data) >= 4:
                generation = INT32.unpack_from(subscription.user_data, 0)[0]
            owned[member] = (list(subscription.owned_partitions), generation)
        assignment = sticky_assign(partitions_per_topic, subscriptions, owned)
        # A partition whose owner changes is given to nobody in this round; its owner revokes it and rejoins.
        previous_owner = {tp: member for member, (partitions, _) in owned.items() for tp in partitions}
        return {member: [tp for tp in partitions if previous_owner.get(tp, member) == member]
                for member, partitions in assignment.items()}

    def on_assignment(self, assignment: list[TopicPartition], generation_id: int) -> None:
        self._generation = generation_id


def encode_sticky_user_data(partitions: list[TopicPartition], generation_id: int) -> bytes:
    out: list[bytes] = []
    grouped = group_partitions(partitions)
    out.append(INT32.pack(len(grouped)))
    for topic, indexes in grouped.items():
        write_string(topic, out)
        out.append(INT32.pack(len(indexes)))
        out.extend(INT32.pack(index) for index in indexes)
    out.append(INT32.pack(generation_id))
    return b"".join(out)


def decode_sticky_user_data(data: bytes) -> tuple[list[TopicPartition], int]:
    """StickyAssignorUserData v1 (v0 has no generation). Malformed user data from another member counts as "owned
    nothing": stickiness is an optimisation, never a reason to fail the rebalance."""
    try:
        count = INT32.unpack_from(data, 0)[0]
        position = 4
        if not 0 <= count <= len(data):
            return [], DEFAULT_GENERATION
        partitions: list[TopicPartition] = []
        for _ in range(count):
            topic, position = read_string(data, position)
            size = INT32.unpack_from(data, position)[0]
            position += 4
            if not 0 <= size <= (len(data) - position) // 4:
                return [], DEFAULT_GENERATION
            partitions.extend(TopicPartition(topic, index)
                              for (index,) in INT32.iter_unpack(bytes(data[position:position + 4 * size])))
            position += 4 * size
        generation = INT32.unpack_from(data, position)[0] if len(data) - position >= 4 else DEFAULT_GENERATION
        return partitions, generation
    except (ProtocolError, struct.error, IndexError, UnicodeDecodeError):
        return [], DEFAULT_GENERATION
