"""The online migration of a group between the two protocols (KIP-848's group.consumer.migration.policy; Kafka's
ConsumerGroup.fromClassicGroup and ClassicGroup.fromConsumerGroup): what a group of one protocol is as a group of the
other.

- Upgrade: the first ConsumerGroupHeartbeat to a classic group with members converts it. Each classic member
  becomes a member of the consumer group at an epoch equal to the classic generation, subscribed to the topics of its
  JoinGroup metadata, owning the partitions of its SyncGroup assignment (which is also its target: nothing moves
  until the new member's subscription bumps the group epoch). The classic group's record is deleted and the consumer
  group's records written, so a reload gives the consumer group.
- Downgrade: when the last member of the consumer protocol leaves a group whose other members all use the classic
  protocol, the group becomes a classic group at a generation equal to the group epoch, each member keeping its
  current partitions as its assignment; the consumer group's records are deleted and the classic group's written,
  and the group rebalances (a member left).

Kafka's refusals: the upgrade needs the policy to allow it, a group of the `consumer` protocol type and no more
members than group.consumer.max.size; the downgrade needs the policy, at least one member left and no more members
than group.max.size. A refused upgrade is GROUP_ID_NOT_FOUND to the heartbeat; a refused downgrade leaves the
consumer group as it is (its classic members go on being served in it).
"""

from __future__ import annotations

import logging
import uuid

from kfk.coordinator.group.classic_group import (
    ClassicGroup,
    ClassicGroupMember,
    ClassicGroupState,
    parse_subscription,
)
from kfk.coordinator.group.config import GroupCoordinatorConfig
from kfk.coordinator.group.consumer_group import (
    CONSUMER_PROTOCOL_TYPE,
    Assignment,
    ConsumerGroup,
    ConsumerGroupMember,
    MemberState,
    normalized,
)
from kfk.errors import KafkaError
from kfk.metadata.image import MetadataImage
from kfk.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment

log = logging.getLogger("kfk.coordinator.group")


def can_upgrade(group: ClassicGroup, config: GroupCoordinatorConfig) -> bool:
    """Kafka's validateOnlineUpgrade."""
    if not config.online_upgrade_enabled:
        log.info("Cannot upgrade classic group %s to consumer group because the online upgrade is disabled.",
                 group.group_id)
        return False
    if not group.uses_consumer_protocol():
        log.info("Cannot upgrade classic group %s to consumer group because the group does not use the consumer "
                 "embedded protocol.", group.group_id)
        return False
    if len(group.members) > config.consumer_group_max_size:
        log.info("Cannot upgrade classic group %s to consumer group because the group size exceeds the consumer "
                 "group maximum size.", group.group_id)
        return False
    return True


def can_downgrade(group: ConsumerGroup, leaving_member_id: str, config: GroupCoordinatorConfig) -> bool:
    """Kafka's validateOnlineDowngradeWithFencedMember: the leaving member is the last of the consumer protocol."""
    if not group.all_members_use_classic_protocol_except(leaving_member_id):
        return False
    if len(group.members) <= 1:
        return False  # the group becomes empty: it stays a consumer group
    if not config.online_downgrade_enabled:
        log.info("Cannot downgrade consumer group %s to classic group because the online downgrade is disabled.",
                 group.group_id)
        return False
    if len(group.members) - 1 > config.max_size:
        log.info("Cannot downgrade consumer group %s to classic group because its group size is greater than "
                 "classic group max size.", group.group_id)
        return False
    return True


def members_of_classic_group(group: ClassicGroup, image: MetadataImage) -> list[ConsumerGroupMember]:
    """The classic group's members as members of a consumer group at the generation's epoch; KafkaError when a
    member's embedded consumer protocol does not parse."""
    epoch = group.generation_id
    members = []
    for member in group.members.values():
        protocols = tuple(member.supported_protocols)
        metadata = member.metadata(group.protocol_name) if group.protocol_name in member.protocol_names() \
            else protocols[0][1]
        subscription = parse_subscription(metadata)
        if subscription is None:
            raise KafkaError(f"the subscription of member {member.member_id} does not parse")
        assigned = _assignment_from_bytes(member.assignment, image)
        members.append(ConsumerGroupMember(
            member_id=member.member_id, instance_id=member.group_instance_id, rack_id=subscription.rack_id,
            client_id=member.client_id, client_host=member.client_host,
            subscribed_topic_names=tuple(sorted(set(subscription.topics))),
            rebalance_timeout_ms=member.rebalance_timeout_ms, member_epoch=epoch, previous_member_epoch=epoch,
            state=MemberState.STABLE, assigned_partitions=assigned, classic_protocols=protocols,
            classic_session_timeout_ms=member.session_timeout_ms))
    return members


def classic_group_of(group: ConsumerGroup, leaving_member_id: str, image: MetadataImage,
                     now_ms: int) -> tuple[ClassicGroup, dict[str, bytes]]:
    """The consumer group without the leaving member as a Stable classic group, and each member's assignment (its
    current partitions in the consumer protocol's format)."""
    remaining = [member for member_id, member in group.members.items() if member_id != leaving_member_id]
    classic = ClassicGroup(group.group_id, now_ms, ClassicGroupState.STABLE)
    classic.generation_id = group.group_epoch
    classic.protocol_type = CONSUMER_PROTOCOL_TYPE
    assignments: dict[str, bytes] = {}
    for member in remaining:
        assert member.classic_protocols is not None
        assignment = assignment_bytes(member.assigned_partitions, image)
        classic.add(ClassicGroupMember(
            member.member_id, member.instance_id, member.client_id, member.client_host, member.rebalance_timeout_ms,
            member.classic_session_timeout_ms, CONSUMER_PROTOCOL_TYPE, list(member.classic_protocols), assignment))
        assignments[member.member_id] = assignment
    classic.protocol_name = classic.select_protocol()
    classic.subscribed_topics = classic.compute_subscribed_topics()
    return classic, assignments


def assignment_bytes(assignment: Assignment, image: MetadataImage) -> bytes:
    """A SyncGroup assignment (ConsumerProtocolAssignment, by topic name) of the partitions; topics no longer in
    the metadata are left out."""
    names = {topic.topic_id: name for name, topic in image.topics_by_name.items()}
    version = ConsumerProtocolAssignment.HIGHEST_VERSION
    message = ConsumerProtocolAssignment(assigned_partitions=[
        ConsumerProtocolAssignment.TopicPartition(topic=names[topic_id], partitions=sorted(partitions))
        for topic_id, partitions in sorted(assignment.items(), key=lambda item: names.get(item[0], ""))
        if topic_id in names])
    return version.to_bytes(2, "big", signed=True) + message.encode(version)


def owned_assignment(subscription_metadata: bytes, image: MetadataImage) -> Assignment:
    """The partitions a classic member says it owns in its JoinGroup metadata (cooperative members list them; eager
    ones revoked all before joining), by topic id."""
    subscription = parse_subscription(subscription_metadata)
    if subscription is None:
        return {}
    return _by_topic_id(((entry.topic, entry.partitions) for entry in subscription.owned_partitions), image)


def _assignment_from_bytes(data: bytes, image: MetadataImage) -> Assignment:
    if len(data) < 2:
        return {}
    version = int.from_bytes(data[:2], "big", signed=True)
    try:
        message = ConsumerProtocolAssignment.decode(data, min(max(version, 0),
                                                              ConsumerProtocolAssignment.HIGHEST_VERSION), 2)
    except KafkaError:
        return {}
    return _by_topic_id(((entry.topic, entry.partitions) for entry in message.assigned_partitions), image)


def _by_topic_id(entries, image: MetadataImage) -> Assignment:
    by_id: dict[uuid.UUID, set[int]] = {}
    for name, partitions in entries:
        topic = image.topic(name)
        if topic is not None:
            by_id.setdefault(topic.topic_id, set()).update(partitions)
    return normalized(by_id)
