"""Leaders and in-sync replicas as brokers come and go (Kafka's PartitionChangeBuilder and the partition state
machine of its controller): pure functions of the image that return PartitionChangeRecords.

- Broker failure (`handle_broker_changes`): a replica on a broker that is not live (its registration fenced, or it is
  in controlled shutdown) leaves the ISR at once, so acks=all writes stop waiting for it; but the ISR never becomes
  empty: when no member is live it is kept as it was (they are the replicas known to hold every committed record,
  and the first of them to return may lead again). A partition whose
  leader is not live gets a new leader: the first live ISR member in replica order (a clean election). If no ISR
  member is live the partition stays offline (leader -1) until one returns, unless unclean.leader.election.enable
  lets the first live out-of-sync replica lead (with a log line: acknowledged records may be lost). A broker that
  returns while its partition is offline and it is in the ISR becomes the leader again.
- Preferred leader election (`elect_preferred_leaders`, `imbalanced_partitions`): move leadership to the first
  replica when it is live and in the ISR (ELECTION_NOT_NEEDED when it already leads, PREFERRED_LEADER_NOT_AVAILABLE
  otherwise).
- Controlled shutdown (`controlled_shutdown`): the broker's leaderships move to another live ISR member and it leaves
  the ISR of every partition it follows; the partitions it still leads (no other ISR member) are returned, and
  the broker retries.
- Unclean election on demand (ElectLeaders with election type UNCLEAN): only when no ISR member is live.

A change of leader starts a new leader epoch (PartitionRegistration.merge); an ISR change alone does not.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, replace
from typing import Callable, Collection, Iterable

from kfk.common.config_types import ConfigResourceType
from kfk.common.features import ELIGIBLE_LEADER_REPLICAS_VERSION_FEATURE_NAME, METADATA_VERSION_FEATURE_NAME
from kfk.controller.features import DIRECTORY_ASSIGNMENT_LEVEL, ELR_LEVEL
from kfk.errors import ErrorCode
from kfk.metadata.directories import default_directory
from kfk.metadata.image import NO_LEADER, NO_LEADER_CHANGE, MetadataImage, PartitionRegistration
from kfk.protocol.message import Message
from kfk.protocol.metadata_records import schema_class

log = logging.getLogger("kfk.controller")

PartitionChangeRecord = schema_class("PartitionChangeRecord")

#: ElectLeaders' election types.
PREFERRED, UNCLEAN = 0, 1


@dataclass(frozen=True, slots=True)
class PartitionChange:
    """What to change in one partition: None keeps a field."""

    leader: int | None = None
    isr: tuple[int, ...] | None = None
    replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None
    directories: tuple[uuid.UUID, ...] | None = None
    elr: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None

    def record(self, topic_id: uuid.UUID, partition_id: int) -> Message:
        return PartitionChangeRecord(
            partition_id=partition_id, topic_id=topic_id,
            leader=NO_LEADER_CHANGE if self.leader is None else self.leader,
            isr=None if self.isr is None else list(self.isr),
            replicas=None if self.replicas is None else list(self.replicas),
            adding_replicas=None if self.adding_replicas is None else list(self.adding_replicas),
            removing_replicas=None if self.removing_replicas is None else list(self.removing_replicas),
            directories=None if self.directories is None else list(self.directories),
            eligible_leader_replicas=None if self.elr is None else list(self.elr),
            last_known_elr=None if self.last_known_elr is None else list(self.last_known_elr))


def replica_directories(image: MetadataImage, replicas: Iterable[int],
                        current: PartitionRegistration | None = None) -> tuple[uuid.UUID, ...] | None:
    """The log dir of each of `replicas` from metadata.version 3.7-IV2 on (None before: records carry no dirs): a
    replica the partition already has keeps its dir, a new one gets its broker's default (Kafka's
    PartitionChangeBuilder with ClusterControlManager.defaultDir)."""
    if image.feature_level(METADATA_VERSION_FEATURE_NAME) < DIRECTORY_ASSIGNMENT_LEVEL:
        return None
    kept = dict(zip(current.replicas, current.directories)) if current is not None else {}
    return tuple(kept.get(replica) or default_directory(_log_dirs(image, replica)) for replica in replicas)


def _log_dirs(image: MetadataImage, broker_id: int) -> tuple[uuid.UUID, ...] | None:
    broker = image.brokers.get(broker_id)
    return None if broker is None else broker.log_dirs


def placed(image: MetadataImage, registration: PartitionRegistration, change: PartitionChange) -> PartitionChange:
    """`change` with the dirs of its new replica list, when it changes the replicas (see replica_directories)."""
    if change.replicas is None:
        return change
    return replace(change, directories=replica_directories(image, change.replicas, registration))


def live_brokers(image: MetadataImage, shutting_down: Collection[int] = ()) -> set[int]:
    """Registered, unfenced brokers that are not shutting down: the ones that may lead or be in sync."""
    return {broker_id for broker_id, broker in image.brokers.items()
            if not broker.fenced and not broker.in_controlled_shutdown and broker_id not in shutting_down}


def _partitions(image: MetadataImage) -> Iterable[tuple[str, uuid.UUID, int, PartitionRegistration]]:
    for topic in image.topics_by_id.values():
        for partition_id, registration in topic.partitions.items():
            yield topic.name, topic.topic_id, partition_id, registration


def _change(registration: PartitionRegistration, leader: int, isr: tuple[int, ...]) -> PartitionChange | None:
    new_leader = None if leader == registration.leader else leader
    new_isr = None if isr == registration.isr else isr
    if new_leader is None and new_isr is None:
        return None
    return PartitionChange(leader=new_leader, isr=new_isr)


def elr_enabled(image: MetadataImage) -> bool:
    """Whether partitions keep eligible leader replicas (KIP-966): metadata.version 4.0-IV1 or later with
    eligible.leader.replicas.version 1 (Kafka's FeatureControlManager.isElrFeatureEnabled)."""
    return image.feature_level(METADATA_VERSION_FEATURE_NAME) >= ELR_LEVEL \
        and image.feature_level(ELIGIBLE_LEADER_REPLICAS_VERSION_FEATURE_NAME) >= 1


def min_insync_replicas(image: MetadataImage, topic: str, default: int) -> int:
    """The topic's min.insync.replicas, else the broker default (what ELR compares the ISR's size with)."""
    value = image.config(ConfigResourceType.TOPIC, topic).get("min.insync.replicas")
    return default if value is None else int(value)


def elect_after_broker_changes(registration: PartitionRegistration, live: Collection[int],
                               unclean_allowed: bool, topic_partition: str = "",
                               min_isr: int | None = None) -> PartitionChange | None:
    """One partition's new leader and ISR given which brokers are live (see the module docstring). With `min_isr`
    (eligible leader replicas enabled) the ISR may empty, its members left for the ELR, and a live ELR member
    leads alone when no ISR member is live."""
    isr = tuple(replica for replica in registration.isr if replica in live)
    if not isr and min_isr is None:
        isr = registration.isr
    leader = registration.leader
    elr = _target_elr(registration, isr, min_isr) if min_isr is not None else None
    if leader not in live:
        candidates = [replica for replica in registration.replicas if replica in isr and replica in live]
        eligible = [replica for replica in registration.replicas if replica in (elr or ()) and replica in live]
        if candidates:
            leader = candidates[0]
        elif eligible:
            leader, isr = eligible[0], (eligible[0],)
            log.info("%s: eligible leader replica %d leads, no in-sync replica being live", topic_partition, leader)
        else:
            out_of_sync = [replica for replica in registration.replicas if replica in live]
            if unclean_allowed and out_of_sync:
                leader = out_of_sync[0]
                isr = (leader,)
                elr = ()  # an unclean leader's log is the truth now: nobody else is known to hold all of it
                log.warning("Unclean leader election for %s: replica %d (out of sync) leads; records acknowledged "
                            "by the previous in-sync replicas may be lost", topic_partition, leader)
            else:
                leader = NO_LEADER
    change = _change(registration, leader, isr)
    if min_isr is not None:
        change = with_elr(registration, change, min_isr, elr)
    return change


def _target_elr(registration: PartitionRegistration, isr: tuple[int, ...], min_isr: int,
                unclean_shutdown: Collection[int] = ()) -> tuple[int, ...]:
    """KIP-966: while the ISR is below min.insync.replicas, the members it lost (and the ELR so far) stay eligible
    to lead, unless they shut down uncleanly; at or above it, the ELR is empty."""
    if len(isr) >= min_isr:
        return ()
    candidates = set(registration.elr) | set(registration.isr)
    return tuple(sorted(replica for replica in candidates if replica not in isr and replica not in unclean_shutdown))


def with_elr(registration: PartitionRegistration, change: PartitionChange | None, min_isr: int,
             elr: tuple[int, ...] | None = None, unclean_shutdown: Collection[int] = ()) -> PartitionChange | None:
    """`change` with the ELR its ISR leaves (Kafka's PartitionChangeBuilder): `elr` when the election already
    decided it, else computed from the new ISR; a leader taken from the ELR leaves it. The last known ELR is Kafka
    4.4's default (its balanced recovery): the last leader, recorded when the partition loses its leader, cleared
    when it has one again."""
    isr = registration.isr if change is None or change.isr is None else change.isr
    if elr is None:
        elr = _target_elr(registration, isr, min_isr, unclean_shutdown)
    leader = registration.leader if change is None or change.leader is None else change.leader
    elr = tuple(replica for replica in elr if replica != leader and replica not in isr)
    updates = {}
    if elr != registration.elr:
        updates["elr"] = elr
    new_leader = None if change is None else change.leader
    if new_leader == NO_LEADER and not registration.last_known_elr:
        updates["last_known_elr"] = (registration.leader,)
    elif new_leader is not None and new_leader != NO_LEADER and registration.last_known_elr:
        updates["last_known_elr"] = ()
    if not updates:
        return change
    return replace(change or PartitionChange(), **updates)


def handle_broker_changes(image: MetadataImage, live: Collection[int],
                          unclean_allowed: Callable[[str], bool],
                          min_isr: Callable[[str], int] | None = None) -> list[Message]:
    """Records that bring every partition in line with the live brokers (`min_isr`: a topic's
    min.insync.replicas, used when eligible leader replicas are enabled)."""
    records: list[Message] = []
    elr = min_isr is not None and elr_enabled(image)
    for topic_name, topic_id, partition_id, registration in _partitions(image):
        change = elect_after_broker_changes(registration, live, unclean_allowed(topic_name),
                                            f"{topic_name}-{partition_id}", min_isr(topic_name) if elr else None)
        if change is not None:
            records.append(change.record(topic_id, partition_id))
    return records


def forget_unclean_shutdown(image: MetadataImage, broker_id: int, min_isr: Callable[[str], int]) -> list[Message]:
    """A broker registering with a previous broker epoch that is not its registration's did not shut down cleanly:
    its log may lack what it acknowledged, so it leaves every ELR, as Kafka's handleBrokerUncleanShutdown does."""
    records: list[Message] = []
    for topic_name, topic_id, partition_id, registration in _partitions(image):
        if broker_id in registration.elr:
            change = with_elr(registration, None, min_isr(topic_name), unclean_shutdown={broker_id})
            if change is not None:
                records.append(change.record(topic_id, partition_id))
    return records


def elect_preferred_leader(registration: PartitionRegistration, live: Collection[int]) -> tuple[ErrorCode,
                                                                                                PartitionChange | None]:
    preferred = registration.preferred_leader
    if registration.leader == preferred:
        return ErrorCode.ELECTION_NOT_NEEDED, None
    if preferred not in live or preferred not in registration.isr:
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, None
    return ErrorCode.NONE, PartitionChange(leader=preferred)


def elect_unclean_leader(registration: PartitionRegistration, live: Collection[int]) -> tuple[ErrorCode,
                                                                                             PartitionChange | None]:
    if registration.leader in live:
        return ErrorCode.ELECTION_NOT_NEEDED, None
    change = elect_after_broker_changes(registration, live, True)
    if change is None or change.leader in (None, NO_LEADER):
        return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, None
    return ErrorCode.NONE, change


def imbalanced_partitions(image: MetadataImage, live: Collection[int],
                          imbalance_percentage: int) -> list[tuple[str, int]]:
    """Kafka's auto leader rebalance: for each broker that is the preferred leader of some partitions, the ratio
    of those it does not lead; where it exceeds leader.imbalance.per.broker.percentage, its partitions whose
    preferred leader is live and in sync are moved back to it."""
    preferred: dict[int, list[tuple[str, int, PartitionRegistration]]] = {}
    for topic_name, _, partition_id, registration in _partitions(image):
        if registration.replicas:
            preferred.setdefault(registration.preferred_leader, []).append((topic_name, partition_id,
                                                                            registration))
    moves: list[tuple[str, int]] = []
    for broker_id, partitions in sorted(preferred.items()):
        if broker_id not in live:
            continue
        not_led = [(name, index) for name, index, registration in partitions if registration.leader != broker_id
                   and broker_id in registration.isr]
        if len(not_led) * 100 > imbalance_percentage * len(partitions):
            moves.extend(not_led)
    return moves


def controlled_shutdown(image: MetadataImage, broker_id: int, live: Collection[int],
                        min_isr: Callable[[str], int] | None = None) -> tuple[list[Message], list[tuple[str, int]]]:
    """Move leadership off `broker_id` and take it out of the ISRs; returns the records and the partitions it
    still leads (no other live ISR member: they stay with it until it is gone). A clean shutdown keeps the broker
    eligible: with eligible leader replicas enabled it joins the ELR of an ISR it leaves below min.insync.replicas."""
    others = set(live) - {broker_id}
    elr = min_isr is not None and elr_enabled(image)
    records: list[Message] = []
    remaining: list[tuple[str, int]] = []
    for topic_name, topic_id, partition_id, registration in _partitions(image):
        if broker_id not in registration.replicas:
            continue
        change = None
        if registration.leader == broker_id:
            candidates = [r for r in registration.replicas if r in registration.isr and r in others]
            if not candidates:
                remaining.append((topic_name, partition_id))
                continue
            change = PartitionChange(leader=candidates[0], isr=tuple(r for r in registration.isr if r != broker_id))
        elif broker_id in registration.isr and len(registration.isr) > 1:
            change = PartitionChange(isr=tuple(r for r in registration.isr if r != broker_id))
        if change is not None:
            if elr:
                change = with_elr(registration, change, min_isr(topic_name))
            records.append(change.record(topic_id, partition_id))
    return records, remaining


def alter_partition(registration: PartitionRegistration, broker_id: int, leader_epoch: int, partition_epoch: int,
                    new_isr: tuple[int, ...], live: Collection[int]) -> tuple[ErrorCode, PartitionChange | None]:
    """A leader's ISR change (AlterPartition, KRaft's path for what a ZooKeeper-mode leader writes itself): accepted
    only from the current leader at the current leader epoch, computed from the current partition epoch, and only
    with live replicas of the partition that include the leader (Kafka's checks and error codes)."""
    if registration.leader != broker_id:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
    if leader_epoch < registration.leader_epoch:
        return ErrorCode.FENCED_LEADER_EPOCH, None
    if leader_epoch > registration.leader_epoch:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, None
    if partition_epoch != registration.partition_epoch:
        return ErrorCode.INVALID_UPDATE_VERSION, None
    if broker_id not in new_isr or any(replica not in registration.replicas for replica in new_isr):
        return ErrorCode.INVALID_REQUEST, None
    if any(replica not in live for replica in new_isr if replica not in registration.isr):
        return ErrorCode.INELIGIBLE_REPLICA, None
    if new_isr == registration.isr:
        return ErrorCode.NONE, None
    return ErrorCode.NONE, PartitionChange(isr=new_isr)
