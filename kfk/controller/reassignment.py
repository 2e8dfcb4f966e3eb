"""Partition reassignment (KIP-455, Kafka's ReplicationControlManager.alterPartitionReassignments), pure logic.

A reassignment of a partition from replicas R to target T is carried out in steps, each one committed metadata:
1. Start: replicas become T followed by the replicas of R not in T, with adding = T - R and removing = R - T. The
   brokers in adding open the partition as followers and fetch from the leader.
2. Catch-up: an adding replica joins the ISR like any follower, when it has reached the leader's high watermark.
3. Completion, once every adding replica is in the ISR: replicas = T, the removing replicas leave the ISR, adding
   and removing are cleared, and if the leader was being removed the first live in-sync replica of T leads (a new
   leader epoch). The removed brokers see they are no longer replicas and delete their logs.
A target equal to the current replicas is a no-op; a null target cancels a reassignment in progress (back to the
original replicas, the adding ones leave the ISR). Targets must be non-empty, name registered brokers, have no
duplicates and, unless the request allows it, keep the replication factor.
"""

from __future__ import annotations

import random
from typing import Collection, Mapping, Sequence

from kfk.controller.partition_change import PartitionChange, placed
from kfk.controller.placement import BrokerPlacement, assign_replicas_to_brokers
from kfk.controller.result import ApiError, ControllerResult
from kfk.errors import ErrorCode
from kfk.metadata.image import NO_LEADER, MetadataImage, PartitionRegistration
from kfk.protocol.message import Message
from kfk.protocol.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from kfk.protocol.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

TopicResponse = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
PartitionResponse = AlterPartitionReassignmentsResponse.ReassignablePartitionResponse


class _Invalid(Exception):
    def __init__(self, error: ApiError) -> None:
        super().__init__(error.message)
        self.error = error


def original_replicas(registration: PartitionRegistration) -> tuple[int, ...]:
    return tuple(replica for replica in registration.replicas if replica not in registration.adding_replicas)


def target_replicas(registration: PartitionRegistration) -> tuple[int, ...]:
    return tuple(replica for replica in registration.replicas if replica not in registration.removing_replicas)


def _leader_among(registration: PartitionRegistration, replicas: Sequence[int], isr: Sequence[int],
                  live: Collection[int]) -> int | None:
    """The new leader if the current one is not in `replicas` (None: keep it)."""
    if registration.leader in replicas:
        return None
    candidates = [replica for replica in replicas if replica in isr and replica in live]
    return candidates[0] if candidates else NO_LEADER


def start_reassignment(registration: PartitionRegistration, target: Sequence[int],
                       live: Collection[int]) -> PartitionChange | None:
    current = original_replicas(registration)
    target = tuple(target)
    if target == current and not registration.adding_replicas and not registration.removing_replicas:
        return None
    adding = tuple(replica for replica in target if replica not in current)
    removing = tuple(replica for replica in current if replica not in target)
    replicas = target + removing
    if not adding:  # nothing to copy: finish at once
        return _complete(registration, target, live)
    return PartitionChange(replicas=replicas, adding_replicas=adding, removing_replicas=removing,
                           isr=tuple(replica for replica in registration.isr if replica in replicas))


def cancel_reassignment(registration: PartitionRegistration, live: Collection[int]) -> PartitionChange | None:
    if not registration.adding_replicas and not registration.removing_replicas:
        return None
    original = original_replicas(registration)
    isr = tuple(replica for replica in registration.isr if replica in original) or registration.isr
    leader = _leader_among(registration, original, isr, live)
    return PartitionChange(leader=leader, isr=isr, replicas=original, adding_replicas=(), removing_replicas=())


def _complete(registration: PartitionRegistration, target: tuple[int, ...],
              live: Collection[int]) -> PartitionChange:
    isr = tuple(replica for replica in registration.isr if replica in target)
    leader = _leader_among(registration, target, isr, live)
    if not isr:
        isr = registration.isr  # never empty: nothing of the target is in sync (cannot happen after catch-up)
    return PartitionChange(leader=leader, isr=isr, replicas=target, adding_replicas=(), removing_replicas=())


def reassignment_progress(image: MetadataImage, live: Collection[int]) -> list[Message]:
    """Complete every reassignment whose adding replicas are all in sync."""
    records: list[Message] = []
    for topic in image.topics_by_id.values():
        for partition_id, registration in topic.partitions.items():
            if not registration.adding_replicas and not registration.removing_replicas:
                continue
            if all(replica in registration.isr for replica in registration.adding_replicas):
                change = _complete(registration, target_replicas(registration), live)
                records.append(placed(image, registration, change).record(topic.topic_id, partition_id))
    return records


def alter_partition_reassignments(image: MetadataImage, request: AlterPartitionReassignmentsRequest,
                                  live: Collection[int],
                                  allow_replication_factor_change: bool = True
                                  ) -> ControllerResult[AlterPartitionReassignmentsResponse]:
    records: list[Message] = []
    responses: list[TopicResponse] = []
    for reassignable in request.topics:
        topic = image.topic(reassignable.name)
        results: list[PartitionResponse] = []
        for wanted in reassignable.partitions:
            try:
                registration = topic.partitions.get(wanted.partition_index) if topic is not None else None
                if registration is None:
                    raise _Invalid(ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                            f"Unable to find partition {reassignable.name}:{wanted.partition_index}."))
                if wanted.replicas is None:
                    change = cancel_reassignment(registration, live)
                    if change is None:
                        raise _Invalid(ApiError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS))  # no message, as Kafka
                else:
                    _validate_target(image, registration, wanted.replicas, allow_replication_factor_change)
                    change = start_reassignment(registration, wanted.replicas, live)
                if change is not None:
                    records.append(placed(image, registration, change).record(topic.topic_id,
                                                                              wanted.partition_index))
                results.append(PartitionResponse(partition_index=wanted.partition_index, error_code=ErrorCode.NONE,
                                                 error_message=None))
            except _Invalid as invalid:
                results.append(PartitionResponse(partition_index=wanted.partition_index,
                                                 error_code=invalid.error.error_code,
                                                 error_message=invalid.error.message))
        responses.append(TopicResponse(name=reassignable.name, partitions=results))
    return ControllerResult(AlterPartitionReassignmentsResponse(
        error_code=ErrorCode.NONE, error_message=None, responses=responses,
        allow_replication_factor_change=allow_replication_factor_change), records)


def _validate_target(image: MetadataImage, registration: PartitionRegistration, target: Sequence[int],
                     allow_replication_factor_change: bool) -> None:
    if not target:
        raise _Invalid(ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes "
                                                                     "an empty replica list."))
    if len(set(target)) != len(target):
        raise _Invalid(ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                f"The proposed assignment {list(target)} contains duplicate replicas."))
    unknown = [replica for replica in target if replica not in image.brokers]
    if unknown:
        raise _Invalid(ApiError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                f"The proposed assignment contains unknown broker(s) {unknown}."))
    if not allow_replication_factor_change and len(target) != len(original_replicas(registration)):
        raise _Invalid(ApiError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                "The replication factor is changed from "
                                f"{len(original_replicas(registration))} to {len(target)}"))


def list_partition_reassignments(image: MetadataImage,
                                 request: ListPartitionReassignmentsRequest) -> ListPartitionReassignmentsResponse:
    Ongoing = ListPartitionReassignmentsResponse.OngoingTopicReassignment
    OngoingPartition = ListPartitionReassignmentsResponse.OngoingPartitionReassignment
    wanted: Mapping[str, Collection[int] | None]
    if request.topics is None:
        wanted = {name: None for name in image.topics_by_name}
    else:
        wanted = {entry.name: set(entry.partition_indexes) for entry in request.topics}
    topics = []
    for name, indexes in sorted(wanted.items()):
        topic = image.topic(name)
        if topic is None:
            continue
        ongoing = [OngoingPartition(partition_index=index, replicas=list(registration.replicas),
                                    adding_replicas=list(registration.adding_replicas),
                                    removing_replicas=list(registration.removing_replicas))
                   for index, registration in sorted(topic.partitions.items())
                   if (indexes is None or index in indexes)
                   and (registration.adding_replicas or registration.removing_replicas)]
        if ongoing:
            topics.append(Ongoing(name=name, partitions=ongoing))
    return ListPartitionReassignmentsResponse(error_code=ErrorCode.NONE, error_message=None, topics=topics)


def propose_assignment(current: Mapping[str, Mapping[int, Sequence[int]]], broker_ids: Sequence[int],
                       rng: random.Random | None = None) -> dict[str, dict[int, list[int]]]:
    """`kfk reassign-partitions --generate`: a placement of the topics' partitions (same replication factor) on
    `broker_ids`, by the same algorithm as topic creation (AdminUtils.assignReplicasToBrokers)."""
    rng = rng or random.Random()
    brokers = [BrokerPlacement(broker_id) for broker_id in sorted(set(broker_ids))]
    proposal: dict[str, dict[int, list[int]]] = {}
    for topic, partitions in sorted(current.items()):
        replication_factor = len(next(iter(partitions.values())))
        proposal[topic] = assign_replicas_to_brokers(brokers, len(partitions), replication_factor, rng)
    return proposal
