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
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from kfk.client.consumer.assignors import RangeAssignor, Subscription
from kfk.common.structs import TopicPartition
from kfk.errors import InvalidConfigurationError, KafkaError
from kfk.streams.assignment import LATEST_OFFSET, AssignmentConfigs, ClientState, TaskAssignment, assign_tasks
from kfk.streams.processor import TaskId

__all__ = ["HostInfo", "KeyQueryMetadata", "StreamsMetadata", "PartitionsByHost", "StreamsAssignor",
           "StreamsSubscription", "parse_host_info"]

#: The user data's format version: a newer leader may add fields, which older members ignore.
_USER_DATA_VERSION = 2

log = logging.getLogger("kfk.streams")


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
    the standby tasks this member keeps and which of them are warm-ups, and (to one member) the delay after which it
    starts a probing rebalance."""

    partitions_by_host: dict[HostInfo, frozenset[TopicPartition]]
    standby_partitions_by_host: dict[HostInfo, frozenset[TopicPartition]]
    standby_tasks: frozenset[TaskId]
    warmup_tasks: frozenset[TaskId] = frozenset()
    probing_rebalance_ms: int | None = None


def _encode_hosts(hosts: Mapping[HostInfo, Iterable[TopicPartition]]) -> dict[str, list[list]]:
    return {str(host): sorted([tp.topic, tp.partition] for tp in partitions) for host, partitions in hosts.items()}


def _decode_hosts(hosts: Mapping[str, list[list]]) -> dict[HostInfo, frozenset[TopicPartition]]:
    return {parse_host_info(host): frozenset(TopicPartition(topic, partition) for topic, partition in partitions)
            for host, partitions in hosts.items()}


def encode_streams_assignment(assignment: StreamsAssignment) -> bytes:
    return json.dumps({"version": _USER_DATA_VERSION,
                       "partitions_by_host": _encode_hosts(assignment.partitions_by_host),
                       "standby_partitions_by_host": _encode_hosts(assignment.standby_partitions_by_host),
                       "standby_tasks": sorted(str(task) for task in assignment.standby_tasks),
                       "warmup_tasks": sorted(str(task) for task in assignment.warmup_tasks),
                       "probing_rebalance_ms": assignment.probing_rebalance_ms},
                      sort_keys=True).encode()


def decode_streams_assignment(data: bytes | None) -> StreamsAssignment:
    """What encode_streams_assignment wrote; nothing for no or unreadable user data (another assignor's)."""
    try:
        decoded = json.loads(data) if data else {}
        probing = decoded.get("probing_rebalance_ms")
        return StreamsAssignment(_decode_hosts(decoded.get("partitions_by_host", {})),
                                 _decode_hosts(decoded.get("standby_partitions_by_host", {})),
                                 frozenset(TaskId.parse(task) for task in decoded.get("standby_tasks", [])),
                                 frozenset(TaskId.parse(task) for task in decoded.get("warmup_tasks", [])),
                                 int(probing) if probing is not None else None)
    except (ValueError, KeyError, TypeError, AttributeError, InvalidConfigurationError):
        return StreamsAssignment({}, {}, frozenset())


class StreamsSubscription(NamedTuple):
    """What each member says in its subscription's user data: its instance (the process id kept in the state
    directory, the same for every thread of one instance), the instance's application.server, the changelog
    offset sum of each stateful task the instance has state for (kfk.streams.assignment's lags), and its client
    tags (client.tag.<key>, for rack-aware standbys)."""

    process_id: str
    application_server: HostInfo | None
    task_offset_sums: Mapping[TaskId, int] = {}
    client_tags: Mapping[str, str] = {}


def encode_streams_subscription(subscription: StreamsSubscription) -> bytes:
    server = subscription.application_server
    return json.dumps({"version": _USER_DATA_VERSION, "process_id": subscription.process_id,
                       "application_server": str(server) if server is not None else None,
                       "task_offset_sums": {str(task): offset_sum
                                            for task, offset_sum in sorted(subscription.task_offset_sums.items())},
                       "client_tags": dict(subscription.client_tags)}).encode()


def decode_streams_subscription(user_data: bytes | None) -> StreamsSubscription | None:
    """None when the member sent none, or not one of kfk.streams'."""
    try:
        decoded = json.loads(user_data) if user_data else None
        if not isinstance(decoded, dict) or not isinstance(decoded.get("process_id"), str):
            return None
        return StreamsSubscription(decoded["process_id"], parse_host_info(decoded.get("application_server") or ""),
                                   {TaskId.parse(task): int(offset_sum)
                                    for task, offset_sum in (decoded.get("task_offset_sums") or {}).items()},
                                   {str(key): str(value) for key, value in (decoded.get("client_tags") or {}).items()})
    except (ValueError, TypeError, AttributeError, InvalidConfigurationError):
        return None


class StreamsAssignor(RangeAssignor):
    """The range assignor kfk.streams' threads use (see kfk.streams.kafka_streams), with what Kafka Streams'
    assignor adds: each subscription carries the member's instance, its application.server and its instance's task
    offset sums; the leader keeps stateful tasks on caught-up instances, gives standbys and warm-ups
    (kfk.streams.assignment), and sends every member the partitions each host holds, actively and as standby, the
    standby tasks the member keeps (``standby_tasks`` and ``warmup_tasks`` once received) and, to one member, when
    to start a probing rebalance (``probing_rebalance_ms``).

    ``changelog_topics``: each stateful sub-topology's changelog topics; ``task_offset_sums``: this instance's, read
    at each join; ``changelog_end_offsets``: the leader's reader of the changelogs' end offsets."""

    def __init__(self, subscription: StreamsSubscription, partitions_by_host: PartitionsByHost,
                 configs: AssignmentConfigs = AssignmentConfigs(), topic_subtopology: Mapping[str, int] | None = None,
                 changelog_topics: Mapping[int, list[str]] | None = None,
                 task_offset_sums: Callable[[], Mapping[TaskId, int]] = dict,
                 changelog_end_offsets: Callable[[list[TopicPartition]], Mapping[TopicPartition, int]] | None = None
                 ) -> None:
        self.subscription = subscription
        self.partitions_by_host = partitions_by_host
        self.configs = configs
        self.topic_subtopology = dict(topic_subtopology or {})
        self.changelog_topics = dict(changelog_topics or {})
        self.task_offset_sums = task_offset_sums
        self.changelog_end_offsets = changelog_end_offsets
        self.standby_tasks: frozenset[TaskId] = frozenset()
        self.warmup_tasks: frozenset[TaskId] = frozenset()
        self.probing_rebalance_ms: int | None = None
        #: The leader's decision, between assign() and assignment_user_data().
        self._decided: TaskAssignment | None = None

    def subscription_user_data(self, topics: list[str], owned: list[TopicPartition],
                               generation_id: int) -> bytes | None:  # type: ignore[override]
        return encode_streams_subscription(self.subscription._replace(task_offset_sums=self.task_offset_sums()))

    def _task_of(self, partition: TopicPartition) -> TaskId:
        return TaskId(self.topic_subtopology.get(partition.topic, -1), partition.partition)

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        target = super().assign(partitions_per_topic, subscriptions)
        members_of: dict[str, list[str]] = {}
        offset_sums: dict[str, dict[TaskId, int]] = {}
        tags: dict[str, Mapping[str, str]] = {}
        for member, subscription in sorted(subscriptions.items()):
            streams_subscription = decode_streams_subscription(subscription.user_data)
            if streams_subscription is None:
                continue
            members_of.setdefault(streams_subscription.process_id, []).append(member)
            tags[streams_subscription.process_id] = streams_subscription.client_tags
            merged = offset_sums.setdefault(streams_subscription.process_id, {})
            for task, offset_sum in streams_subscription.task_offset_sums.items():  # the threads' reports, merged
                known = merged.get(task, offset_sum)
                merged[task] = LATEST_OFFSET if LATEST_OFFSET in (known, offset_sum) else max(known, offset_sum)
        clients = {process_id: ClientState(members, offset_sums[process_id], tags[process_id])
                   for process_id, members in members_of.items()}
        stateful = {self._task_of(partition) for assigned in target.values() for partition in assigned
                    if self._task_of(partition).subtopology in self.changelog_topics}
        self._decided = assign_tasks(target, clients, self._task_of, stateful,
                                     self._end_offset_sums(stateful) if len(clients) > 1 else None, self.configs)
        return self._decided.partitions

    def _end_offset_sums(self, stateful: set[TaskId]) -> dict[TaskId, int] | None:
        """Each stateful task's changelogs' end offsets, summed; None when they cannot be read."""
        if self.changelog_end_offsets is None or not stateful:
            return None
        changelogs = {task: [TopicPartition(topic, task.partition) for topic in self.changelog_topics[task.subtopology]]
                      for task in stateful}
        try:
            ends = self.changelog_end_offsets([partition for partitions in changelogs.values() for partition in partitions])
        except KafkaError as error:
            log.warning("the changelogs' end offsets could not be read, every task goes to its target: %s", error)
            return None
        return {task: sum(ends.get(partition, 0) for partition in partitions) for task, partitions in changelogs.items()}

    def assignment_user_data(self, assignment: Mapping[str, list[TopicPartition]],
                             subscriptions: Mapping[str, Subscription]) -> dict[str, bytes]:
        decided = self._decided
        self._decided = None
        standbys = decided.standbys if decided is not None else {}
        warmups = decided.warmups if decided is not None else {}
        members = {member: decode_streams_subscription(subscription.user_data)
                   for member, subscription in subscriptions.items()}
        hosts: dict[HostInfo, set[TopicPartition]] = {}
        for member, streams_subscription in members.items():
            if streams_subscription is not None and streams_subscription.application_server is not None:
                hosts.setdefault(streams_subscription.application_server, set()).update(assignment.get(member, []))
        standby_hosts: dict[HostInfo, set[TopicPartition]] = {}
        for member, tasks in standbys.items():
            server = members[member].application_server  # type: ignore[union-attr]
            if server is not None:
                standby_hosts.setdefault(server, set()).update(
                    tp for partitions in assignment.values() for tp in partitions if self._task_of(tp) in tasks)
        host_sets = {host: frozenset(partitions) for host, partitions in hosts.items()}
        standby_sets = {host: frozenset(partitions) for host, partitions in standby_hosts.items()}
        # one member starts the probing rebalance: the whole group rebalances with it
        prober = min(subscriptions) if decided is not None and decided.probing else None
        return {member: encode_streams_assignment(StreamsAssignment(
                    host_sets, standby_sets, frozenset(standbys.get(member, ())), frozenset(warmups.get(member, ())),
                    self.configs.probing_rebalance_interval_ms if member == prober else None))
                for member in subscriptions}

    def on_assignment_user_data(self, user_data: bytes | None) -> None:
        received = decode_streams_assignment(user_data)
        self.partitions_by_host.update(received.partitions_by_host, received.standby_partitions_by_host)
        self.standby_tasks = received.standby_tasks
        self.warmup_tasks = received.warmup_tasks
        self.probing_rebalance_ms = received.probing_rebalance_ms
