"""NetworkClient: the connections of one client, by broker id, and its metadata cache.

Runs entirely on the client's event loop (kfk.client.event_loop). It knows the bootstrap addresses until the first
Metadata response names the brokers; after that, requests go to brokers by node id. It owns:
- one BrokerConnection per broker, opened on first use; concurrent callers share one connect attempt;
- reconnect backoff per broker: after a failure the next attempt waits reconnect.backoff.ms, doubling per failure up
  to reconnect.backoff.max.ms, with +-20% jitter (Kafka's ExponentialBackoff) so clients do not reconnect in step;
- the metadata cache (ClusterMetadata), refreshed on demand for the topics the client cares about, when a caller
  reports it stale (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, a connection failure), and at least every
  metadata.max.age.ms. Refreshes are coalesced: callers that arrive while one covering their topics is running wait
  for it instead of sending another.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Collection, Iterable
from typing import Any

from kfk.client.cluster import ClusterMetadata
from kfk.client.config import (CLIENT_SOFTWARE_NAME, CLIENT_SOFTWARE_VERSION, ClientConfig, max_response_bytes,
                              parse_bootstrap_servers, sasl_client_factory)
from kfk.client.connection import BrokerConnection
from kfk.common.clock import system_time_ms
from kfk.common.constants import NO_NODE
from kfk.errors import INVALID_METADATA, KafkaError, KafkaTimeoutError, NetworkError
from kfk.protocol.message import Message
from kfk.protocol.messages.metadata import MetadataRequest, MetadataResponse
from kfk.security.tls import TLS_PROTOCOLS, client_context

__all__ = ["NetworkClient", "BootstrapUnreachableError", "ExponentialBackoff", "TRACKED_TOPICS", "COORDINATOR_ID_BASE",
           "monotonic_ms"]

COORDINATOR_ID_BASE = 2**31 - 1
"""Coordinator connections get their own ids, COORDINATOR_ID_BASE - broker id, as in Java's client: a group's
heartbeats and commits must not queue behind a long-poll fetch on the broker's one ordered connection."""

TRACKED_TOPICS = object()
"""refresh_metadata's default: the topics the client tracks (add_topics / set_topics / track_all_topics)."""

log = logging.getLogger("kfk.client")


class BootstrapUnreachableError(NetworkError):
    """No bootstrap server could be reached or answered a request (NetworkClient.unreachable_error)."""


def monotonic_ms() -> float:
    """For deadlines and backoff: never jumps with the wall clock."""
    return time.monotonic() * 1000


class ExponentialBackoff:
    """Kafka's ExponentialBackoff: initial * 2^attempts, capped at maximum, times a random factor in [0.8, 1.2]."""

    def __init__(self, initial_ms: float, maximum_ms: float, jitter: float = 0.2) -> None:
        self.initial_ms = initial_ms
        self.maximum_ms = max(initial_ms, maximum_ms)
        self.jitter = jitter

    def backoff_ms(self, attempts: int) -> float:
        if attempts <= 0 or self.initial_ms <= 0:
            return 0.0
        value = min(self.initial_ms * (2 ** min(attempts - 1, 32)), self.maximum_ms)
        return value * random.uniform(1 - self.jitter, 1 + self.jitter)


class _NodeState:
    __slots__ = ("connection", "connecting", "failures", "next_attempt_ms")

    def __init__(self) -> None:
        self.connection: BrokerConnection | None = None
        self.connecting: asyncio.Future | None = None
        self.failures = 0
        self.next_attempt_ms = 0.0


class NetworkClient:
    def __init__(self, config: ClientConfig, *, allow_auto_topic_creation: bool = False) -> None:
        self.config = config
        self._sasl = sasl_client_factory(config)
        self._max_response_bytes = max_response_bytes(config)
        self.bootstrap_addresses = parse_bootstrap_servers(config.bootstrap_servers)
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.cluster = ClusterMetadata()
        self.reconnect_backoff = ExponentialBackoff(config.reconnect_backoff_ms, config.reconnect_backoff_max_ms)
        self.retry_backoff = ExponentialBackoff(config.retry_backoff_ms, config.retry_backoff_max_ms)
        self._nodes: dict[int, _NodeState] = {}
        self._bootstrap_ids = [-(index + 1) for index in range(len(self.bootstrap_addresses))]
        self._interesting_topics: set[str] = set()
        self._all_topics = False
        self._metadata_stale = True
        #: Refreshes in a row whose answer had a topic or partition in error (unknown, no leader yet), and when the
        #: next one is due: Java's consumer and producer retry such metadata after retry.backoff.ms, growing to
        #: retry.backoff.max.ms, instead of waiting out metadata.max.age.ms.
        self._metadata_errors_in_a_row = 0
        self._metadata_retry_at_ms: float | None = None
        self._metadata_task: asyncio.Task | None = None
        self._metadata_task_topics: frozenset[str] | None = frozenset()
        self._metadata_listeners: list = []
        self._closed = False
        #: A broker answered a request after the connection's set-up (ApiVersions, SASL): a listener that closes
        #: every connection at its first request (one that requires SASL, met without it) never sets this.
        self.ever_answered = False
        self._finalized_features: dict[str, int] = {}
        self._finalized_features_epoch = -1
        #: Built once from the ssl.* settings (a bad trust store fails the client's creation, not each connect).
        self._ssl_context = (client_context(lambda key: config[key]) if config.security_protocol in TLS_PROTOCOLS
                             else None)

    # --- addresses ---------------------------------------------------------------------------------------------------

    def coordinator_connection_id(self, broker_id: int) -> int:
        return COORDINATOR_ID_BASE - broker_id

    def knows_node(self, node_id: int) -> bool:
        """A broker (or coordinator connection) id the current metadata can resolve to an address."""
        return node_id >= 0 and self._address(node_id) is not None

    def _address(self, node_id: int) -> tuple[str, int] | None:
        if node_id > COORDINATOR_ID_BASE // 2:
            node_id = COORDINATOR_ID_BASE - node_id
        if node_id < 0:
            index = -node_id - 1
            if index < len(self.bootstrap_addresses):
                return self.bootstrap_addresses[index]
            return None
        broker = self.cluster.brokers.get(node_id)
        return (broker.host, broker.port) if broker is not None else None

    def known_nodes(self) -> list[int]:
        """Broker ids once metadata is known, the bootstrap pseudo-ids before."""
        return sorted(self.cluster.brokers) if self.cluster.brokers else list(self._bootstrap_ids)

    # --- connections -------------------------------------------------------------------------------------------------

    def connection_if_ready(self, node_id: int) -> BrokerConnection | None:
        state = self._nodes.get(node_id)
        if state is not None and state.connection is not None and state.connection.connected:
            return state.connection
        return None

    def is_backing_off(self, node_id: int) -> bool:
        state = self._nodes.get(node_id)
        return state is not None and state.connection is None and monotonic_ms() < state.next_attempt_ms

    async def connect(self, node_id: int) -> BrokerConnection:
        """The open connection to ``node_id``, connecting (after any reconnect backoff) if needed."""
        if self._closed:
            raise NetworkError("the client is closed")
        state = self._nodes.setdefault(node_id, _NodeState())
        if state.connection is not None and state.connection.connected:
            return state.connection
        if state.connecting is None:
            state.connecting = asyncio.ensure_future(self._connect(node_id, state))
        return await asyncio.shield(state.connecting)

    async def _connect(self, node_id: int, state: _NodeState) -> BrokerConnection:
        try:
            wait_ms = state.next_attempt_ms - monotonic_ms()
            if wait_ms > 0:
                await asyncio.sleep(wait_ms / 1000)
            address = self._address(node_id)
            if address is None:
                raise NetworkError(f"broker {node_id} is not in the cluster metadata")
            connection = BrokerConnection(
                address[0], address[1], node_id=node_id, client_id=self.config.client_id,
                client_software_name=CLIENT_SOFTWARE_NAME, client_software_version=CLIENT_SOFTWARE_VERSION,
                request_timeout_ms=self.config.request_timeout_ms,
                connection_setup_timeout_ms=self.config.socket_connection_setup_timeout_ms,
                ssl_context=self._ssl_context, sasl=self._sasl, max_response_bytes=self._max_response_bytes)
            try:
                await connection.connect()
            except KafkaError:
                state.failures += 1
                state.next_attempt_ms = monotonic_ms() + self.reconnect_backoff.backoff_ms(state.failures)
                if node_id >= 0:
                    self._metadata_stale = True
                raise
            state.failures = 0
            state.connection = connection
            if connection.finalized_features_epoch > self._finalized_features_epoch:
                self._finalized_features = connection.finalized_features
                self._finalized_features_epoch = connection.finalized_features_epoch
            log.debug("connected to %r", connection)
            return connection
        finally:
            state.connecting = None

    def disconnect(self, node_id: int, error: KafkaError | None = None) -> None:
        state = self._nodes.get(node_id)
        if state is not None and state.connection is not None:
            state.connection.close(error)
            state.connection = None

    def finalized_feature_level(self, name: str) -> int:
        """The cluster's finalized level of feature ``name`` (0 when not finalized), from the ApiVersions answer with
        the newest features epoch among the connections opened so far: brokers learn a feature change at
        different times, so the newest epoch wins, as in Java's ApiVersions."""
        return self._finalized_features.get(name, 0)

    def least_loaded_node(self) -> int:
        """A connected node with the fewest in-flight requests; else a node not backing off; else any node."""
        nodes = self.known_nodes()
        random.shuffle(nodes)
        best, best_in_flight = NO_NODE, None
        for node_id in nodes:
            connection = self.connection_if_ready(node_id)
            if connection is not None:
                if best_in_flight is None or connection.in_flight_count < best_in_flight:
                    best, best_in_flight = node_id, connection.in_flight_count
        if best != NO_NODE:
            return best
        for node_id in nodes:
            if not self.is_backing_off(node_id):
                return node_id
        return min(nodes, key=lambda node: self._nodes[node].next_attempt_ms) if nodes else NO_NODE

    # --- requests ----------------------------------------------------------------------------------------------------

    async def api_version(self, node_id: int, api_key: int, highest: int | None = None, lowest: int = 0) -> int:
        """The version to send ``api_key`` to ``node_id`` at (connecting first): for requests whose shape
        depends on the version (FindCoordinator's batched keys, OffsetFetch's groups); UnsupportedVersionError when
        the broker has none in [lowest, highest]."""
        connection = await self.connect(node_id)
        return connection.version(api_key, highest, lowest)

    async def send(self, node_id: int, request: Message, **options: Any) -> Message:
        """Send to one broker. A connection failure closes that connection, marks metadata stale and raises."""
        connection = await self.connect(node_id)
        try:
            response = await connection.send(request, **options)
        except (NetworkError, KafkaTimeoutError):
            self.connection_failed(node_id, connection)
            raise
        assert response is not None
        self.ever_answered = True
        return response

    async def send_no_response(self, node_id: int, request: Message, **options: Any) -> None:
        connection = await self.connect(node_id)
        try:
            await connection.send(request, expect_response=False, **options)
        except (NetworkError, KafkaTimeoutError):
            self.connection_failed(node_id, connection)
            raise

    def connection_failed(self, node_id: int, connection: BrokerConnection) -> None:
        """A request on ``connection`` failed at the network level: forget it, back off, refresh metadata."""
        state = self._nodes.get(node_id)
        if state is not None and state.connection is connection:
            state.connection = None
            state.failures += 1
            state.next_attempt_ms = monotonic_ms() + self.reconnect_backoff.backoff_ms(state.failures)
        self._metadata_stale = True

    async def send_to_any(self, request: Message, *, timeout_ms: float | None = None, **options: Any) -> Message:
        """Send to the least loaded broker, moving to another on connection failures until ``timeout_ms``."""
        deadline = monotonic_ms() + (self.config.request_timeout_ms if timeout_ms is None else timeout_ms)
        attempts = 0
        while True:
            node_id = self.least_loaded_node()
            try:
                return await self.send(node_id, request, **options)
            except (NetworkError, KafkaTimeoutError) as error:
                attempts += 1
                if self.bootstrap_unreachable():
                    raise self.unreachable_error(error) from None
                if monotonic_ms() + self.retry_backoff.backoff_ms(attempts) >= deadline or self._closed:
                    raise
                if self._all_nodes_backing_off():
                    await asyncio.sleep(self.retry_backoff.backoff_ms(attempts) / 1000)

    def bootstrap_unreachable(self) -> bool:
        """No broker has ever answered a request and every bootstrap address has failed (refused the connection,
        or accepted it and closed it at the first request): the caller decides whether to keep trying (a producer
        waiting max.block.ms) or to report it now (the admin tools, through unreachable_error)."""
        if self.ever_answered:
            return False
        return all(node_id in self._nodes and self._nodes[node_id].failures > 0 for node_id in self._bootstrap_ids)

    def unreachable_error(self, error: KafkaError) -> BootstrapUnreachableError:
        """What to report once bootstrap_unreachable(): the bootstrap servers and the last error (which, for a
        listener that closed the connection after ApiVersions, names the security.protocol to set:
        kfk.client.connection)."""
        if isinstance(error, BootstrapUnreachableError):
            return error
        servers = ", ".join(f"{host}:{port}" for host, port in self.bootstrap_addresses)
        return BootstrapUnreachableError(f"cannot connect to any bootstrap server ({servers}): {error}")

    def _all_nodes_backing_off(self) -> bool:
        return all(self.is_backing_off(node_id) for node_id in self.known_nodes())

    # --- metadata ----------------------------------------------------------------------------------------------------

    def add_topics(self, topics: Iterable[str]) -> bool:
        """Track more topics in metadata refreshes; True if any was new (the caller should refresh)."""
        new = set(topics) - self._interesting_topics
        if new:
            self._interesting_topics |= new
            self._metadata_stale = True
        return bool(new)

    def set_topics(self, topics: Iterable[str]) -> None:
        topics = set(topics)
        if topics != self._interesting_topics:
            self._interesting_topics = topics
            self._metadata_stale = True

    def track_all_topics(self, enabled: bool = True) -> None:
        """Ask for every topic (pattern subscriptions, admin listings)."""
        self._all_topics = enabled
        self._metadata_stale = True

    def request_metadata_update(self) -> None:
        self._metadata_stale = True

    def metadata_needs_refresh(self) -> bool:
        return (self._metadata_stale or not self.cluster.brokers
                or (self._metadata_retry_at_ms is not None and monotonic_ms() >= self._metadata_retry_at_ms)
                or system_time_ms() - self.cluster.updated_ms > self.config.metadata_max_age_ms)

    def add_metadata_listener(self, listener) -> None:
        """``listener(cluster)`` runs on the loop after every refresh."""
        self._metadata_listeners.append(listener)

    async def refresh_metadata(self, topics: Collection[str] | None | object = TRACKED_TOPICS, *,
                               timeout_ms: float | None = None, allow_auto_topic_creation: bool | None = None
                               ) -> ClusterMetadata:
        """Fetch metadata for ``topics`` (None: every topic; by default the tracked topics, which are every topic
        when track_all_topics is on) and return the new snapshot."""
        wanted: frozenset[str] | None
        if topics is TRACKED_TOPICS:
            wanted = None if self._all_topics else frozenset(self._interesting_topics)
        else:
            wanted = None if topics is None else frozenset(topics)  # type: ignore[arg-type]
        running = self._metadata_task
        if running is not None and not running.done() and (
                self._metadata_task_topics is None or (wanted is not None and wanted <= self._metadata_task_topics)):
            return await asyncio.shield(running)
        auto_create = self.allow_auto_topic_creation if allow_auto_topic_creation is None else allow_auto_topic_creation
        task = asyncio.ensure_future(self._refresh(wanted, auto_create, timeout_ms))
        self._metadata_task, self._metadata_task_topics = task, wanted
        return await asyncio.shield(task)

    async def _refresh(self, topics: frozenset[str] | None, auto_create: bool,
                       timeout_ms: float | None) -> ClusterMetadata:
        self._metadata_stale = False
        try:
            response = await self.send_to_any(_metadata_request(topics, auto_create), timeout_ms=timeout_ms)
        except BaseException:
            self._metadata_stale = True
            raise
        assert isinstance(response, MetadataResponse)
        first = not self.cluster.brokers
        self.cluster = self.cluster.with_response(response, topics, system_time_ms())
        if _has_invalid_metadata(response):
            self._metadata_errors_in_a_row += 1
            self._metadata_retry_at_ms = monotonic_ms() + self.retry_backoff.backoff_ms(self._metadata_errors_in_a_row)
        else:
            self._metadata_errors_in_a_row, self._metadata_retry_at_ms = 0, None
        if first:
            for node_id in self._bootstrap_ids:  # the brokers are known by id now
                self.disconnect(node_id)
        for listener in self._metadata_listeners:
            listener(self.cluster)
        return self.cluster

    # --- teardown ----------------------------------------------------------------------------------------------------

    async def close(self) -> None:
        self._closed = True
        if self._metadata_task is not None and not self._metadata_task.done():
            self._metadata_task.cancel()
        for node_id, state in list(self._nodes.items()):
            if state.connecting is not None:
                state.connecting.cancel()
            if state.connection is not None:
                state.connection.close(NetworkError("the client is closed"))
                state.connection = None


def _has_invalid_metadata(response: MetadataResponse) -> bool:
    """A topic or partition answered with an error a later refresh fixes (a topic still being created, a partition
    between leaders)."""
    return any(topic.error_code in INVALID_METADATA
               or any(partition.error_code in INVALID_METADATA for partition in topic.partitions)
               for topic in response.topics)


def _metadata_request(topics: frozenset[str] | None, auto_create: bool) -> MetadataRequest:
    """Metadata for ``topics`` (None: all topics, a null array; an empty list asks for brokers only)."""
    entries = None if topics is None else [MetadataRequest.MetadataRequestTopic(name=name) for name in sorted(topics)]
    return MetadataRequest(topics=entries, allow_auto_topic_creation=auto_create)

