"""Which instance of an application holds what (Kafka Streams' StreamsMetadata, KeyQueryMetadata, HostInfo), for
interactive queries across instances.

Each instance's `application.server` (host:port, where its own query layer listens: kfk.streams serves none, as
Kafka Streams serves none) travels in its threads' group subscriptions. The group leader's assignor (kfk.streams'
range assignor, StreamsAssignor) sends every member the partitions each host was given, in the assignment's user
data, as Kafka Streams' StreamsPartitionAssignor sends partitionsByHost; every thread hands what it receives to its
instance's PartitionsByHost. KafkaStreams.query_metadata_for_key then finds the host of the partition a key goes to
without asking anyone.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from kfk.client.consumer.assignors import RangeAssignor, Subscription
from kfk.common.structs import TopicPartition
from kfk.errors import InvalidConfigurationError
from kfk.streams.processor import TaskId

__all__ = ["HostInfo", "KeyQueryMetadata", "StreamsMetadata", "PartitionsByHost", "StreamsAssignor",
           "StreamsSubscription", "parse_host_info"]

#: The user data's format version: a newer leader may add fields, which older members ignore.
_USER_DATA_VERSION = 2


class HostInfo(NamedTuple):
    """An instance's application.server."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


#: What Kafka Streams answers while it does not know (its HostInfo.unavailable()).
UNAVAILABLE = HostInfo("unavailable", -1)


class KeyQueryMetadata(NamedTuple):
    """Where a key's store is: the host running its active task, the hosts keeping standby replicas of it, and the
    partition the key belongs to."""

    active_host: HostInfo
    standby_hosts: frozenset[HostInfo]
    partition: int


#: Kafka Streams' KeyQueryMetadata.NOT_AVAILABLE: before the first assignment, or without application.server.
NOT_AVAILABLE = KeyQueryMetadata(UNAVAILABLE, frozenset(), -1)


class StreamsMetadata(NamedTuple):
    """One instance: its host, the stores its tasks hold, and the source partitions it was given."""

    host_info: HostInfo
    state_store_names: frozenset[str]
    topic_partitions: frozenset[TopicPartition]


def parse_host_info(value: str) -> HostInfo | None:
    """application.server's host:port (None when it is empty), refused with Kafka's message when malformed."""
    if not value:
        return None
    host, _, port = value.rpartition(":")
    if not host or not port.isdigit():
        raise InvalidConfigurationError(f"Error parsing host address {value}. Expected format host:port.")
    return HostInfo(host, int(port))


class PartitionsByHost:
    """The latest partitions-by-host an instance's threads received (they all receive the same map): the source
    partitions of each host's active tasks, and of its standby tasks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hosts: dict[HostInfo, frozenset[TopicPartition]] = {}
        self._standby_hosts: dict[HostInfo, frozenset[TopicPartition]] = {}

    def update(self, hosts: Mapping[HostInfo, frozenset[TopicPartition]],
               standby_hosts: Mapping[HostInfo, frozenset[TopicPartition]]) -> None:
        with self._lock:
            self._hosts, self._standby_hosts = dict(hosts), dict(standby_hosts)

    def hosts(self) -> dict[HostInfo, frozenset[TopicPartition]]:
        with self._lock:
            return dict(self._hosts)

    def host_of(self, partition: TopicPartition) -> HostInfo | None:
        return next((host for host, partitions in self.hosts().items() if partition in partitions), None)

    def standby_hosts_of(self, partition: TopicPartition) -> frozenset[HostInfo]:
        with self._lock:
            return frozenset(host for host, partitions in self._standby_hosts.items() if partition in partitions)


class StreamsAssignment(NamedTuple):
    """What the leader sends one member beside its partitions: every host's active and standby source partitions,
    and the standby tasks this member keeps."""

    partitions_by_host: dict[HostInfo, frozenset[TopicPartition]]
    standby_partitions_by_host: dict[HostInfo, frozenset[TopicPartition]]
    standby_tasks: frozenset[TaskId]


def _encode_hosts(hosts: Mapping[HostInfo, Iterable[TopicPartition]]) -> dict[str, list[list]]:
    return {str(host): sorted([tp.topic, tp.partition] for tp in partitions) for host, partitions in hosts.items()}


def _decode_hosts(hosts: Mapping[str, list[list]]) -> dict[HostInfo, frozenset[TopicPartition]]:
    return {parse_host_info(host): frozenset(TopicPartition(topic, partition) for topic, partition in partitions)
            for host, partitions in hosts.items()}


def encode_streams_assignment(assignment: StreamsAssignment) -> bytes:
    return json.dumps({"version": _USER_DATA_VERSION,
                       "partitions_by_host": _encode_hosts(assignment.partitions_by_host),
                       "standby_partitions_by_host": _encode_hosts(assignment.standby_partitions_by_host),
                       "standby_tasks": sorted(str(task) for task in assignment.standby_tasks)},
                      sort_keys=True).encode()


def decode_streams_assignment(data: bytes | None) -> StreamsAssignment:
    """What encode_streams_assignment wrote; nothing for no or unreadable user data (another assignor's)."""
    try:
        decoded = json.loads(data) if data else {}
        return StreamsAssignment(_decode_hosts(decoded.get("partitions_by_host", {})),
                                 _decode_hosts(decoded.get("standby_partitions_by_host", {})),
                                 frozenset(TaskId.parse(task) for task in decoded.get("standby_tasks", [])))
    except (ValueError, KeyError, TypeError, AttributeError, InvalidConfigurationError):
        return StreamsAssignment({}, {}, frozenset())


class StreamsSubscription(NamedTuple):
    """What each member says in its subscription's user data: its instance (the process id kept in the state
    directory, the same for every thread of one instance) and the instance's application.server."""

    process_id: str
    application_server: HostInfo | None


def encode_streams_subscription(subscription: StreamsSubscription) -> bytes:
    server = subscription.application_server
    return json.dumps({"version": _USER_DATA_VERSION, "process_id": subscription.process_id,
                       "application_server": str(server) if server is not None else None}).encode()


def decode_streams_subscription(user_data: bytes | None) -> StreamsSubscription | None:
    """None when the member sent none, or not one of kfk.streams'."""
    try:
        decoded = json.loads(user_data) if user_data else None
        if not isinstance(decoded, dict) or not isinstance(decoded.get("process_id"), str):
            return None
        return StreamsSubscription(decoded["process_id"], parse_host_info(decoded.get("application_server") or ""))
    except (ValueError, InvalidConfigurationError):
        return None


class StreamsAssignor(RangeAssignor):
    """The range assignor kfk.streams' threads use (see kfk.streams.kafka_streams), with what Kafka Streams'
    assignor adds: each subscription carries the member's instance and application.server; the leader gives each
    stateful task `num.standby.replicas` standbys on other instances (the instances with the fewest standbys
    first, and in an instance its member with the fewest tasks), and sends every member the partitions each host
    holds, actively and as standby, and the standby tasks the member keeps (``standby_tasks`` once received)."""

    def __init__(self, subscription: StreamsSubscription, partitions_by_host: PartitionsByHost,
                 standby_replicas: int = 0, topic_subtopology: Mapping[str, int] | None = None,
                 stateful_subtopologies: frozenset[int] = frozenset()) -> None:
        self.subscription = subscription
        self.partitions_by_host = partitions_by_host
        self.standby_replicas = standby_replicas
        self.topic_subtopology = dict(topic_subtopology or {})
        self.stateful_subtopologies = stateful_subtopologies
        self.standby_tasks: frozenset[TaskId] = frozenset()

    def subscription_user_data(self, topics: list[str], owned: list[TopicPartition],
                               generation_id: int) -> bytes | None:  # type: ignore[override]
        return encode_streams_subscription(self.subscription)

    def assignment_user_data(self, assignment: Mapping[str, list[TopicPartition]],
                             subscriptions: Mapping[str, Subscription]) -> dict[str, bytes]:
        members = {member: decode_streams_subscription(subscription.user_data)
                   for member, subscription in subscriptions.items()}
        hosts: dict[HostInfo, set[TopicPartition]] = {}
        for member, streams_subscription in members.items():
            if streams_subscription is not None and streams_subscription.application_server is not None:
                hosts.setdefault(streams_subscription.application_server, set()).update(assignment.get(member, []))
        standbys = self._standby_tasks(assignment, members)
        standby_hosts: dict[HostInfo, set[TopicPartition]] = {}
        for member, tasks in standbys.items():
            server = members[member].application_server  # type: ignore[union-attr]
            if server is not None:
                standby_hosts.setdefault(server, set()).update(
                    tp for partitions in assignment.values() for tp in partitions
                    if TaskId(self.topic_subtopology.get(tp.topic, -1), tp.partition) in tasks)
        host_sets = {host: frozenset(partitions) for host, partitions in hosts.items()}
        standby_sets = {host: frozenset(partitions) for host, partitions in standby_hosts.items()}
        return {member: encode_streams_assignment(StreamsAssignment(
                    host_sets, standby_sets, frozenset(standbys.get(member, ()))))
                for member in subscriptions}

    def _standby_tasks(self, assignment: Mapping[str, list[TopicPartition]],
                       members: Mapping[str, StreamsSubscription | None]) -> dict[str, set[TaskId]]:
        """Each member's standby tasks: for every stateful active task, up to standby_replicas instances other
        than the one running it (fewer when there are not that many other instances, as Kafka Streams)."""
        if self.standby_replicas <= 0:
            return {}
        instance_members: dict[str, list[str]] = {}
        for member, streams_subscription in sorted(members.items()):
            if streams_subscription is not None:
                instance_members.setdefault(streams_subscription.process_id, []).append(member)
        load = {member: len({tp.partition for tp in assignment.get(member, [])}) for member in members}
        active: dict[TaskId, str] = {}
        for member, partitions in assignment.items():
            for tp in partitions:
                subtopology = self.topic_subtopology.get(tp.topic)
                if subtopology in self.stateful_subtopologies and members.get(member) is not None:
                    active[TaskId(subtopology, tp.partition)] = members[member].process_id  # type: ignore[union-attr]
        standbys: dict[str, set[TaskId]] = {}
        instance_standbys = dict.fromkeys(instance_members, 0)
        for task, active_instance in sorted(active.items()):
            others = sorted((instance for instance in instance_members if instance != active_instance),
                            key=lambda instance: (instance_standbys[instance], instance))
            for instance in others[:self.standby_replicas]:
                member = min(instance_members[instance], key=lambda name: (load[name], name))
                standbys.setdefault(member, set()).add(task)
                load[member] += 1
                instance_standbys[instance] += 1
        return standbys

    def on_assignment_user_data(self, user_data: bytes | None) -> None:
        received = decode_streams_assignment(user_data)
        self.partitions_by_host.update(received.partitions_by_host, received.standby_partitions_by_host)
        self.standby_tasks = received.standby_tasks
