"""The reconciliation of one member's assignment toward its target (Kafka's CurrentAssignmentBuilder).

From the member as the coordinator knows it, the target assignment (and its epoch) and the partitions the member says
it owns (its heartbeat's TopicPartitions; None when the heartbeat left them out), the member's next state:

- partitions it owns that the target no longer gives it are revoked first: the member stays at its epoch, in
  UNREVOKED_PARTITIONS, keeping only what it keeps, until a heartbeat shows it no longer owns the revoked ones;
- then it moves to the target epoch and gets the partitions of its target that no other member owns any more; those
  still owned by another member (not yet revoked there) wait: UNRELEASED_PARTITIONS, handed over by a later
  heartbeat once released;
- with nothing to revoke and nothing unreleased it is STABLE at the target epoch.

So a partition is never owned by two members at once: it is given only when the group's partition epochs show no
owner (a member's assigned and pending-revocation partitions both count as owned).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from kfk.coordinator.group.consumer_group import (
    NO_OWNER_EPOCH,
    Assignment,
    ConsumerGroupMember,
    MemberState,
    copy_member,
    normalized,
)

#: (topic id, partition) -> the epoch of its owner, NO_OWNER_EPOCH when free.
PartitionEpoch = Callable[[uuid.UUID, int], int]


def reconcile(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
              owned: Assignment | None, partition_epoch: PartitionEpoch) -> ConsumerGroupMember:
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _still_owns(owned, member.partitions_pending_revocation):
            return member
        return _next_assignment(member, target_epoch, target, owned, partition_epoch)
    if member.member_epoch != target_epoch or member.state is MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(member, target_epoch, target, owned, partition_epoch)
    return member


def _still_owns(owned: Assignment | None, revoking: Assignment) -> bool:
    """Whether the member still holds any partition it must revoke (a heartbeat without its owned partitions is
    taken as still holding them)."""
    if owned is None:
        return True
    return any(partitions & owned.get(topic_id, frozenset()) for topic_id, partitions in revoking.items())


def _next_assignment(member: ConsumerGroupMember, target_epoch: int, target: Assignment,
                     owned: Assignment | None, partition_epoch: PartitionEpoch) -> ConsumerGroupMember:
    kept: dict[uuid.UUID, set[int]] = {}
    revoking: dict[uuid.UUID, set[int]] = {}
    pending: dict[uuid.UUID, set[int]] = {}
    has_unreleased = False
    for topic_id in set(target) | set(member.assigned_partitions):
        wanted = target.get(topic_id, frozenset())
        current = member.assigned_partitions.get(topic_id, frozenset())
        kept[topic_id] = set(current & wanted)
        revoking[topic_id] = set(current - wanted)
        free = set()
        for partition in wanted - current:
            if partition_epoch(topic_id, partition) == NO_OWNER_EPOCH:
                free.add(partition)
            else:
                has_unreleased = True
        pending[topic_id] = free
    revoking_assignment = normalized(revoking)
    if revoking_assignment and _still_owns(owned, revoking_assignment):
        kept_assignment = normalized(kept)
        return copy_member(member, state=MemberState.UNREVOKED_PARTITIONS, assigned_partitions=kept_assignment,
                           partitions_pending_revocation=revoking_assignment,
                           assignment_epochs=_assignment_epochs(member, (kept_assignment, revoking_assignment)))
    assigned = normalized({topic_id: kept[topic_id] | pending[topic_id] for topic_id in kept})
    return copy_member(member, state=MemberState.UNRELEASED_PARTITIONS if has_unreleased else MemberState.STABLE,
                       previous_member_epoch=member.member_epoch if member.member_epoch != target_epoch
                       else member.previous_member_epoch, member_epoch=target_epoch,
                       assigned_partitions=assigned, partitions_pending_revocation={},
                       assignment_epochs=member.assignment_epochs
                       if assigned == member.assigned_partitions and not member.partitions_pending_revocation
                       else _assignment_epochs(member, (assigned,), target_epoch))


def _assignment_epochs(member: ConsumerGroupMember, holdings: tuple[Assignment, ...],
                       epoch: int | None = None) -> dict[tuple[uuid.UUID, int], int]:
    """The assignment epoch of every partition in `holdings`: `epoch`, or (None) the one the member holds it
    since. As in Kafka 4.4, a member whose assignment changes holds all of its new assignment from the epoch it
    moves to; one whose assignment stays keeps its epochs (KIP-1251: its commits at an older epoch still count)."""
    return {(topic_id, partition): member.assignment_epoch(topic_id, partition) if epoch is None else epoch
            for assignment in holdings for topic_id, partitions in assignment.items() for partition in partitions}
