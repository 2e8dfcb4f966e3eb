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

__all__ = ["HostInfo", "KeyQueryMetadata", "StreamsMetadata", "PartitionsByHost", "StreamsAssignor",
           "parse_host_info"]

#: The user data's format version: a newer leader may add fields, which older members ignore.
_USER_DATA_VERSION = 1


class HostInfo(NamedTuple):
    """An instance's application.server."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


#: What Kafka Streams answers while it does not know (its HostInfo.unavailable()).
UNAVAILABLE = HostInfo("unavailable", -1)


class KeyQueryMetadata(NamedTuple):
    """Where a key's store is: the host running its active task, the hosts of its standbys (none: kfk.streams keeps
    no standby replicas), and the partition the key belongs to."""

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
    """The latest partitions-by-host an instance's threads received (they all receive the same map)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hosts: dict[HostInfo, frozenset[TopicPartition]] = {}

    def update(self, hosts: Mapping[HostInfo, frozenset[TopicPartition]]) -> None:
        with self._lock:
            self._hosts = dict(hosts)

    def hosts(self) -> dict[HostInfo, frozenset[TopicPartition]]:
        with self._lock:
            return dict(self._hosts)

    def host_of(self, partition: TopicPartition) -> HostInfo | None:
        return next((host for host, partitions in self.hosts().items() if partition in partitions), None)


def encode_partitions_by_host(hosts: Mapping[HostInfo, Iterable[TopicPartition]]) -> bytes:
    return json.dumps({"version": _USER_DATA_VERSION, "partitions_by_host": {
        str(host): sorted([tp.topic, tp.partition] for tp in partitions) for host, partitions in hosts.items()}},
        sort_keys=True).encode()


def decode_partitions_by_host(data: bytes | None) -> dict[HostInfo, frozenset[TopicPartition]]:
    """What encode_partitions_by_host wrote; nothing for no or unreadable user data (another assignor's)."""
    if not data:
        return {}
    try:
        hosts = json.loads(data)["partitions_by_host"]
        return {parse_host_info(host): frozenset(TopicPartition(topic, partition) for topic, partition in partitions)
                for host, partitions in hosts.items()}
    except (ValueError, KeyError, TypeError, InvalidConfigurationError):
        return {}


class StreamsAssignor(RangeAssignor):
    """The range assignor kfk.streams' threads use (see kfk.streams.kafka_streams), exchanging the members' hosts:
    each subscription carries the instance's application.server, and the leader sends every member the
    partitions each host was given."""

    def __init__(self, application_server: HostInfo | None, partitions_by_host: PartitionsByHost) -> None:
        self.application_server = application_server
        self.partitions_by_host = partitions_by_host

    def subscription_user_data(self, topics: list[str], owned: list[TopicPartition],
                               generation_id: int) -> bytes | None:  # type: ignore[override]
        return str(self.application_server).encode() if self.application_server is not None else None

    def assignment_user_data(self, assignment: Mapping[str, list[TopicPartition]],
                             subscriptions: Mapping[str, Subscription]) -> dict[str, bytes]:
        hosts: dict[HostInfo, set[TopicPartition]] = {}
        for member, subscription in subscriptions.items():
            host = host_of_subscription(subscription.user_data)
            if host is not None:
                hosts.setdefault(host, set()).update(assignment.get(member, []))
        data = encode_partitions_by_host(hosts)
        return dict.fromkeys(subscriptions, data)

    def on_assignment_user_data(self, user_data: bytes | None) -> None:
        self.partitions_by_host.update(decode_partitions_by_host(user_data))


def host_of_subscription(user_data: bytes | None) -> HostInfo | None:
    """A member's application.server from its subscription's user data (None: it has none, or it is not one)."""
    try:
        return parse_host_info(user_data.decode()) if user_data else None
    except (UnicodeDecodeError, InvalidConfigurationError):
        return None
