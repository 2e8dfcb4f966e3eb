"""The consumer's embedded protocol: what members send in JoinGroup and receive in SyncGroup, and what an assignor is.

The group coordinator does not read these bytes; consumers do, across clients and languages, so they follow
Kafka's schemas exactly: a JoinGroup protocol's metadata is an int16 version followed by ConsumerProtocolSubscription
at that version (topics, user data, owned partitions, generation, rack), and a SyncGroup assignment is an int16
version followed by ConsumerProtocolAssignment (assigned partitions, user data). Both schemas promise that newer
versions only append fields, so a newer version is read with the newest layout kfk knows (as Java's ConsumerProtocol
does), and trailing bytes are ignored.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import NamedTuple, Protocol

from kfk.common.structs import TopicPartition
from kfk.errors import KafkaError, ProtocolError
from kfk.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment
from kfk.protocol.messages.consumer_protocol_subscription import ConsumerProtocolSubscription
from kfk.protocol.primitives import INT16

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "RebalanceProtocol",
    "Subscription",
    "ConsumerPartitionAssignor",
    "encode_subscription",
    "decode_subscription",
    "encode_assignment",
    "decode_assignment",
    "decode_assignment_user_data",
    "group_partitions",
]

CONSUMER_PROTOCOL_TYPE = "consumer"
SUBSCRIPTION_VERSION = ConsumerProtocolSubscription.HIGHEST_VERSION
ASSIGNMENT_VERSION = ConsumerProtocolAssignment.HIGHEST_VERSION


class RebalanceProtocol(enum.IntEnum):
    """EAGER: every member gives up everything before a rebalance. COOPERATIVE (KIP-429): members keep what they
    keep, and only partitions that move are revoked, in a second rebalance."""

    EAGER = 0
    COOPERATIVE = 1


class Subscription(NamedTuple):
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[TopicPartition] = []
    generation_id: int = -1
    rack_id: str | None = None
    group_instance_id: str | None = None
    """Not part of the encoded subscription: the coordinator reports it beside each member's metadata."""


class ConsumerPartitionAssignor(Protocol):
    """A partition assignment strategy. The group leader calls ``assign``; every member calls ``on_assignment``.

    An assignor may also exchange user data of its own through the assignment (Java's Assignment.userData, what
    Kafka Streams sends its hosts in): the leader calls ``assignment_user_data(assignment, subscriptions)`` if the
    assignor has it (member id -> bytes), and each member ``on_assignment_user_data(user_data)`` with its share."""

    name: str
    supported_protocols: tuple[RebalanceProtocol, ...]

    def subscription_user_data(self, topics: list[str], owned: list[TopicPartition],
                               generation_id: int) -> bytes | None: ...

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]: ...

    def on_assignment(self, assignment: list[TopicPartition], generation_id: int) -> None: ...


def group_partitions(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Partitions by topic, each list sorted, topics in sorted order."""
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return {topic: sorted(by_topic[topic]) for topic in sorted(by_topic)}


def _flatten(entries: Iterable) -> list[TopicPartition]:
    return [TopicPartition(entry.topic, partition) for entry in entries for partition in entry.partitions]


def encode_subscription(subscription: Subscription, version: int = SUBSCRIPTION_VERSION) -> bytes:
    owned = [ConsumerProtocolSubscription.TopicPartition(topic=topic, partitions=partitions)
             for topic, partitions in group_partitions(subscription.owned_partitions).items()] if version >= 1 else []
    message = ConsumerProtocolSubscription(
        topics=sorted(subscription.topics), user_data=subscription.user_data, owned_partitions=owned,
        generation_id=subscription.generation_id if version >= 2 else -1,
        rack_id=subscription.rack_id if version >= 3 else None)
    return INT16.pack(version) + message.encode(version)


def decode_subscription(data: bytes | memoryview) -> Subscription:
    version = _version(data, "subscription")
    message = ConsumerProtocolSubscription.decode(data, min(version, SUBSCRIPTION_VERSION), 2)
    return Subscription(list(message.topics), _bytes(message.user_data), _flatten(message.owned_partitions),
                        message.generation_id, message.rack_id)


def encode_assignment(partitions: Iterable[TopicPartition], user_data: bytes | None = None,
                      version: int = ASSIGNMENT_VERSION) -> bytes:
    message = ConsumerProtocolAssignment(
        assigned_partitions=[ConsumerProtocolAssignment.TopicPartition(topic=topic, partitions=indexes)
                             for topic, indexes in group_partitions(partitions).items()],
        user_data=user_data)
    return INT16.pack(version) + message.encode(version)


def decode_assignment(data: bytes | memoryview) -> list[TopicPartition]:
    """The partitions of a SyncGroup assignment (empty bytes: nothing assigned, as a member outside the
    assignment receives)."""
    if len(data) == 0:
        return []
    version = _version(data, "assignment")
    message = ConsumerProtocolAssignment.decode(data, min(version, ASSIGNMENT_VERSION), 2)
    return _flatten(message.assigned_partitions)


def decode_assignment_user_data(data: bytes | memoryview) -> bytes | None:
    """The user data of a SyncGroup assignment (None when there is none, or nothing was assigned)."""
    if len(data) == 0:
        return None
    version = _version(data, "assignment")
    return _bytes(ConsumerProtocolAssignment.decode(data, min(version, ASSIGNMENT_VERSION), 2).user_data)


def _version(data: bytes | memoryview, what: str) -> int:
    if len(data) < 2:
        raise ProtocolError(f"consumer protocol {what} of {len(data)} bytes has no version")
    version = INT16.unpack_from(data, 0)[0]
    if version < 0:
        raise ProtocolError(f"consumer protocol {what} has negative version {version}")
    return version


def _bytes(value: bytes | memoryview | None) -> bytes | None:
    return bytes(value) if value is not None else None


def check_assignment(assignment: Mapping[str, list[TopicPartition]], members: Iterable[str]) -> None:
    """Every member has an entry (possibly empty): a leader must send one to each."""
    missing = set(members) - set(assignment)
    if missing:
        raise KafkaError(f"the assignor left members without an assignment: {sorted(missing)}")
