"""BrokerServer: the composition root. Builds the broker's pieces, starts them in order, stops them in reverse.

Start: lock the log dirs (one broker per dir, kfk/storage/log_dir_lock.py) and bind the listeners (their real ports
are what the broker registers) before anything is written, then check or format the log dirs (meta.properties ->
cluster id), open every partition log (recovering after an unclean shutdown), start the metadata layer,
the replica manager and the group and transaction coordinators, register the handlers (each built with the layers it uses), write
the pid file, and print the ready line that `kfk.testing` and scripts wait for. Stop (SIGTERM/SIGINT): stop
accepting, stop the layers above storage, then shut the log manager down (flush, checkpoints, clean-shutdown
marker), remove the pid file and release the log dirs' locks. The exit code is 0 after a clean stop.

Blocking storage work (recovery at start, the periodic flush/retention/checkpoint tick, shutdown) runs in the
default executor so the event loop keeps serving; compaction runs in the log manager's cleaner threads
(log.cleaner.*).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import logging
import os
import signal
import ssl
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

from kfk.backends.embedded import EmbeddedMetadataBackend
from kfk.backends.embedded.backend import DynamicQuorum
from kfk.backends.embedded.bootstrap import read_bootstrap_records
from kfk.backends.embedded.raft import RaftConfig, VoterEndpoint, parse_bootstrap_servers
from kfk.backends.embedded.raft.voter_set import ZERO_UUID
from kfk.backends.zookeeper import ZooKeeperMetadataBackend
from kfk.common.clock import system_time_ms
from kfk.common.config_types import ConfigResourceType
from kfk.common.features import METADATA_VERSION_FEATURE_NAME
from kfk.common.internal_topics import (
    GROUP_METADATA_TOPIC_NAME,
    SHARE_GROUP_STATE_TOPIC_NAME,
    TRANSACTION_STATE_TOPIC_NAME,
)
from kfk.common.structs import TopicPartition
from kfk.config import BrokerConfig, parse_host_counts
from kfk.controller.backend import MetadataBackend
from kfk.controller.cluster_control import broker_endpoints
from kfk.controller.features import DIRECTORY_ASSIGNMENT_LEVEL
from kfk.controller.producer_ids import ProducerIdManager, ProducerIdsBlock
from kfk.controller.quorum_controller import QuorumController
from kfk.coordinator.group.config import GroupCoordinatorConfig
from kfk.coordinator.group.service import GroupCoordinatorService
from kfk.coordinator.group.share_group import ShareGroupConfig, ShareGroupCoordinator, check_share_group_configs
from kfk.coordinator.share.coordinator import ShareCoordinatorConfig
from kfk.coordinator.share.service import ShareCoordinatorService
from kfk.coordinator.transaction.config import TransactionCoordinatorConfig
from kfk.coordinator.transaction.service import TransactionCoordinatorService
from kfk.errors import ErrorCode, InvalidConfigurationError, KafkaError, KafkaStorageError, raise_for_code
from kfk.metadata.cache import MetadataCache
from kfk.metadata.image import MetadataImage
from kfk.security.sasl import SaslClient
from kfk.security.sasl.settings import SASL_PROTOCOLS, controller_sasl, inter_broker_sasl
from kfk.replication.share_partition import SharePartitionConfig
from kfk.replication.broker_channel import BrokerChannel
from kfk.replication.replica_manager import ReplicaManager
from kfk.replication.stray_replicas import mark_stray_logs
from kfk.security.quotas import ClientQuotaManagers
from kfk.security.tls import TLS_PROTOCOLS, ListenerTls, client_context
from kfk.server import network
from kfk.server.connection_quotas import ConnectionQuotas, resolve_host_counts
from kfk.protocol.message import Message
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.allocate_producer_ids import AllocateProducerIdsRequest
from kfk.protocol.messages.alter_partition import AlterPartitionRequest
from kfk.server.authorization import RequestAuthorizer
from kfk.server.broker_lifecycle_manager import BrokerLifecycleManager
from kfk.server.controller_authorization import authorize_cluster_requests
from kfk.server.controller_channel import ControllerChannel
from kfk.server.dispatch import (
    CONTROLLER_SERVED_VERSIONS,
    Dispatcher,
    Handler,
    RequestContext,
    served_broker_versions,
)
from kfk.server.dynamic_config import DynamicBrokerConfig
from kfk.server.fetch_session import FetchSessionCache
from kfk.server.forwarding import FORWARDED_APIS, ForwardingManager
from kfk.server.handlers.acls import AclsHandler
from kfk.server.handlers.admin import TopicAdminHandler
from kfk.server.handlers.api_versions import ApiVersionsHandler
from kfk.server.handlers.broker_to_controller import BrokerToControllerHandler
from kfk.server.handlers.cluster import DescribeClusterHandler
from kfk.server.handlers.client_quotas import ClientQuotasHandler
from kfk.server.handlers.configs import ConfigsHandler
from kfk.server.handlers.delete_records import DeleteRecordsHandler
from kfk.server.handlers.describe_log_dirs import DescribeLogDirsHandler
from kfk.server.handlers.describe_quorum import DescribeQuorumHandler
from kfk.server.handlers.raft import RaftHandler
from kfk.server.handlers.describe_topic_partitions import DescribeTopicPartitionsHandler
from kfk.server.handlers.envelope import EnvelopeHandler
from kfk.server.handlers.features import FeaturesHandler
from kfk.server.handlers.fetch import FetchHandler
from kfk.server.handlers.find_coordinator import FindCoordinatorHandler
from kfk.server.handlers.consumer_groups import ConsumerGroupsHandler
from kfk.server.handlers.groups import GroupsHandler
from kfk.server.handlers.share_groups import ShareGroupsHandler
from kfk.server.handlers.share_state import ShareStateHandler
from kfk.server.handlers.leadership import LeadershipHandler
from kfk.server.handlers.list_offsets import ListOffsetsHandler
from kfk.server.handlers.metadata import MetadataHandler
from kfk.server.handlers.offset_for_leader_epoch import OffsetForLeaderEpochHandler
from kfk.server.handlers.offsets import OffsetsHandler
from kfk.server.handlers.produce import ProduceHandler
from kfk.server.handlers.producer_id import ProducerIdHandler
from kfk.server.handlers.sasl import SaslHandler
from kfk.server.handlers.delegation_tokens import DelegationTokensHandler
from kfk.server.handlers.scram_credentials import ScramCredentialsHandler
from kfk.server.handlers.unregister_broker import UnregisterBrokerHandler
from kfk.server.handlers.transactions import TransactionsHandler
from kfk.server.inter_broker_channels import InterBrokerChannels
from kfk.server.metrics import MetricsEndpoint
from kfk.server.sasl_authenticator import SaslAuthenticator
from kfk.server.sasl_config import SaslListenerConfig, image_scram_credentials, image_token_credentials
from kfk.server.share_persister import SharePersister
from kfk.server.txn_markers import TxnMarkerSender, TxnMarkerWriter
from kfk.server.txn_verification import TxnPartitionVerifier
from kfk.storage.format import load_cluster_id, random_cluster_id
from kfk.storage.meta_properties import MetaProperties
from kfk.common.uuids import uuid_from_base64, uuid_to_base64
from kfk.storage.log_dir_lock import LogDirLock, acquire_log_dirs, release_log_dirs
from kfk.storage.log_files import BROKER_PID_FILE
from kfk.storage.cleaner_threads import CleanerConfig
from kfk.storage.log_manager import LogManager
from kfk.storage.producer_state import AppendOrigin

log = logging.getLogger("kfk.server")

#: Kafka's controlled.shutdown.max.retries (3); the backoff is shorter than its 5 s: a retry only waits for followers.
CONTROLLED_SHUTDOWN_ATTEMPTS = 3
CONTROLLED_SHUTDOWN_RETRY_BACKOFF_S = 0.5
#: The CreateTopics version a broker forwards auto-creations with (the highest kfk serves).
CREATE_TOPICS_FORWARD_VERSION = 7
#: How much longer a WriteTxnMarkers request to another broker waits than that broker's acks=-1 append may take.
MARKER_REQUEST_MARGIN_MS = 5_000


def _share_group_config(config: BrokerConfig) -> ShareGroupConfig:
    """The share groups' settings, once checked against Kafka's bounds."""
    check_share_group_configs(lambda key: config.values[key])
    return ShareGroupConfig(session_timeout_ms=config.values["group.share.session.timeout.ms"],
                            heartbeat_interval_ms=config.values["group.share.heartbeat.interval.ms"],
                            max_size=config.values["group.share.max.size"])


def _share_partition_config(config: BrokerConfig) -> SharePartitionConfig:
    return SharePartitionConfig(record_lock_duration_ms=config.values["group.share.record.lock.duration.ms"],
                                delivery_count_limit=config.values["group.share.delivery.count.limit"],
                                max_record_locks=config.values["group.share.partition.max.record.locks"])


class BrokerServer:
    def __init__(self, config: BrokerConfig, auto_format: bool = True, started_notes: Sequence[str] = ()) -> None:
        self.config = config
        #: The caller's remarks on the configuration, logged with the ready line: a failed start prints its error alone.
        self.started_notes = list(started_notes)
        self.node_id = config.node_id
        self.auto_format = auto_format
        self.cluster_id: str | None = None
        #: Client quotas (producer_byte_rate, consumer_byte_rate, request_percentage) from the metadata image.
        self.quotas = ClientQuotaManagers(config.quota_window_num, config.quota_window_size_seconds)
        self.dispatcher = Dispatcher(
            served_broker_versions(GroupCoordinatorConfig.from_broker_config(config).consumer_protocol_enabled),
            quotas=self.quotas)
        self.dynamic_config = DynamicBrokerConfig(config, self.node_id)
        self._listener_update: asyncio.Future | None = None
        self.socket_server: network.SocketServer | None = None
        self.log_manager: LogManager | None = None
        self._log_manager_task: asyncio.Task | None = None
        # Built by start(), layer by layer:
        self.metadata_cache: MetadataCache | None = None
        self.metadata_backend: MetadataBackend | None = None
        self.controller: QuorumController | None = None
        self.controller_dispatcher: Dispatcher | None = None
        self.controller_channel: ControllerChannel | None = None
        self.lifecycle_manager: BrokerLifecycleManager | None = None
        self._zookeeper_broker_epoch = -1
        self.producer_id_manager: ProducerIdManager | None = None
        self.replica_manager: ReplicaManager | None = None
        self.group_coordinator: GroupCoordinatorService | None = None
        self.transaction_coordinator: TransactionCoordinatorService | None = None
        self.txn_marker_writer: TxnMarkerWriter | None = None
        self.txn_marker_channels: InterBrokerChannels | None = None
        self.txn_verification_channels: InterBrokerChannels | None = None
        self.txn_verifier: TxnPartitionVerifier | None = None
        self.share_coordinator: ShareCoordinatorService | None = None
        self.share_persister: SharePersister | None = None
        self.share_state_channels: InterBrokerChannels | None = None
        self._log_dir_locks: list[LogDirLock] = []
        self.metrics_endpoint: MetricsEndpoint | None = None
        #: The Produce handler, whose fast path counts its responses' error codes (read by the metrics endpoint).
        self.produce_handler: ProduceHandler | None = None
        #: What every handler asks before acting for a principal (authorizer.class.name; built by start()).
        self.auth = RequestAuthorizer(None)
        #: The client side of TLS to other brokers (replica fetchers, markers, the controller channel) when the
        #: inter-broker listener is SSL or SASL_SSL: that listener's ssl.* settings, as Kafka's inter-broker client.
        self.inter_broker_ssl: ssl.SSLContext | None = None
        #: The SASL clients of this broker's connections to the others, when the inter-broker listener uses SASL.
        self.inter_broker_sasl: Callable[[], SaslClient] | None = None
        #: The same for this node's connections to the controllers (Raft, registration, heartbeats, AlterPartition,
        #: forwarding), from the controller listener's settings (KRaft with controller.listener.names only).
        self.controller_ssl: ssl.SSLContext | None = None
        self.controller_sasl: Callable[[], SaslClient] | None = None
        self._quorum_follower: asyncio.Task | None = None

    @property
    def log_dirs(self) -> list[str]:
        return [os.path.abspath(d) for d in self.config.log_dir_list]

    def _cluster_id(self) -> str:
        """The cluster id the log dirs hold; a new one on the first start (LogManager.startup writes it)."""
        cluster_id = load_cluster_id(self.log_dirs, self.node_id)
        if cluster_id is None:
            if not self.auto_format or self._in_multi_node_quorum():
                raise KafkaStorageError(
                    f"No meta.properties found in {', '.join(self.log_dirs)}: a node of a multi-node cluster starts "
                    "on formatted storage: run `kfk storage format --cluster-id <id> --config <server.properties>` "
                    "on every node first, with one id for the whole cluster (`kfk storage random-uuid` makes one)")
            cluster_id = random_cluster_id()
            log.info("formatting %s with a new cluster id %s", ", ".join(self.log_dirs), cluster_id)
        return cluster_id

    def _in_multi_node_quorum(self) -> bool:
        """Voters other than this node, or a dynamic quorum to find: every node must share one cluster id, so none
        may invent its own (the single-node embedded default may: it is the whole cluster)."""
        config = self.config
        return bool(config.controller_quorum_bootstrap_servers) or any(
            voter != self.node_id for voter in config.quorum_voter_addresses)

    def _register_handlers(self) -> None:
        """Every API handler, built with exactly the layers it uses, once those layers are up (requests are served
        only after this); then the check that every API ApiVersions advertises has its handler."""
        config, metadata_cache, controller = self.config, self.metadata_cache, self.controller
        replica_manager, group_coordinator = self.replica_manager, self.group_coordinator
        transaction_coordinator = self.transaction_coordinator
        auth = self.auth
        controller_channel = getattr(self, "controller_channel", None)  # ZooKeeper mode: the controller may be away
        raft_handler = RaftHandler(self.metadata_backend if isinstance(self.metadata_backend, EmbeddedMetadataBackend)
                                   else None, auth)
        self.produce_handler = ProduceHandler(replica_manager, self.txn_verifier, auth, quota=self.quotas.produce)
        share_groups_handler = ShareGroupsHandler(self.share_groups, group_coordinator, replica_manager,
                                                  metadata_cache, _share_partition_config(config), system_time_ms,
                                                  self.share_persister, auth,
                                                  config.values["group.share.max.share.sessions"])
        if self.socket_server is not None:  # a member's share session ends with its connection, as in Kafka
            self.socket_server.disconnect_listeners.append(share_groups_handler.connection_closed)
        handlers = [
            ApiVersionsHandler(self.dispatcher.served_versions, lambda: metadata_cache.image,
                               lambda: controller.kraft_version(), self.cluster_id, self.node_id),
            MetadataHandler(metadata_cache, self.metadata_backend, controller, config.auto_create_topics_enable,
                            auth),
            DescribeClusterHandler(metadata_cache, self.metadata_backend, auth),
            DescribeTopicPartitionsHandler(metadata_cache, config.max_request_partition_size_limit, auth),
            DescribeQuorumHandler(self.metadata_backend if isinstance(self.metadata_backend, EmbeddedMetadataBackend)
                                  else None, metadata_cache, auth),
            TopicAdminHandler(controller, auth),
            ConfigsHandler(metadata_cache, controller, config, self.node_id, auth),
            AclsHandler(metadata_cache, controller, auth,
                        controller_channel.send if controller_channel is not None else None),
            ClientQuotasHandler(metadata_cache, controller, auth),
            LeadershipHandler(controller, auth),
            ProducerIdHandler(self.producer_id_manager, transaction_coordinator, auth),
            self.produce_handler,
            FetchHandler(replica_manager, FetchSessionCache(config.max_incremental_fetch_session_cache_slots,
                                                            system_time_ms), config.fetch_max_bytes, auth,
                         quota=self.quotas.fetch, raft_fetch=raft_handler.fetch),
            raft_handler,
            ListOffsetsHandler(replica_manager, auth),
            DeleteRecordsHandler(replica_manager, auth),
            OffsetForLeaderEpochHandler(replica_manager, auth),
            DescribeLogDirsHandler(replica_manager, auth),
            FindCoordinatorHandler(metadata_cache, controller, group_coordinator, transaction_coordinator,
                                   self.node_id, auth, self.share_coordinator),
            GroupsHandler(group_coordinator, auth, self.share_groups),
            share_groups_handler,
            ShareStateHandler(self.share_coordinator, auth),
            OffsetsHandler(metadata_cache, group_coordinator, auth),
            TransactionsHandler(transaction_coordinator, group_coordinator, replica_manager, metadata_cache,
                                self.txn_marker_writer, self.txn_verifier, auth),
            SaslHandler(),
            ScramCredentialsHandler(metadata_cache, controller, auth),
            DelegationTokensHandler(metadata_cache, controller, config.delegation_token_secret_key, auth),
            UnregisterBrokerHandler(controller, isinstance(self.metadata_backend, EmbeddedMetadataBackend), auth),
            FeaturesHandler(controller, auth),
        ]
        if ApiKey.CONSUMER_GROUP_HEARTBEAT in self.dispatcher.served_versions:
            handlers.append(ConsumerGroupsHandler(group_coordinator, lambda: metadata_cache.image.features, auth))
        for handler in handlers:
            handler.register(self.dispatcher)
        self.dispatcher.check_every_api_has_a_handler()
        if self.lifecycle_manager is not None:
            for api_key in FORWARDED_APIS:
                self.dispatcher.wrap(api_key, self._forward_unless_controller)

    def _forward_unless_controller(self, handler: Handler) -> Handler:
        """A KRaft broker serves the controller's admin requests from any client: itself when its own controller is
        active, else by forwarding the request to the active controller in an Envelope with the client's principal
        (KIP-590, kfk/server/forwarding.py; the Metadata response names any broker as the controller, so clients
        come to brokers). The controller authorizes the client, so the broker checks nothing itself."""
        # Kafka's forwarding channel: its own connection, and controller.socket.timeout.ms for the answer (a
        # CreateTopics of thousands of partitions may take the controller longer than a Raft request may).
        forwarding_manager = ForwardingManager(
            self.controller_channel.for_purpose("forwarding", self.config.controller_socket_timeout_ms))

        async def forwarding(context: RequestContext, request: Message) -> Message:
            if self.controller.is_active:
                return await handler(context, request)
            return await forwarding_manager.forward(context, request)

        return forwarding

    def _build_log_manager(self) -> LogManager:
        config = self.config
        return LogManager(
            self.log_dirs,
            config.log_config(),
            retention_check_interval_ms=config.log_retention_check_interval_ms,
            offset_checkpoint_interval_ms=config.log_flush_offset_checkpoint_interval_ms,
            producer_id_expiration_ms=config.producer_id_expiration_ms,
            cleaner_config=CleanerConfig.from_broker_config(config),
            now_ms=system_time_ms,
        )

    async def _run_log_manager(self) -> None:
        """The log manager's periodic work (flush, retention, checkpoints), off the event loop."""
        loop = asyncio.get_running_loop()
        while True:
            next_due_ms = await loop.run_in_executor(None, self.log_manager.tick, system_time_ms())
            await asyncio.sleep(min(max(next_due_ms - system_time_ms(), 10), 1000) / 1000)

    def _new_metadata_cache(self) -> MetadataCache:
        """The broker's MetadataCache, whose first listener puts the dynamic broker configs in force: every
        component called after it on the same image reads the new values (and after a restart, before any log is
        opened); the next keeps the authorizer's ACLs those of the image."""
        cache = MetadataCache(MetadataImage(cluster_id=self.cluster_id))
        cache.subscribe(self.dynamic_config.on_metadata_update)
        cache.subscribe(self.auth.on_metadata_update)
        cache.subscribe(lambda previous, image: self.quotas.update(image.client_quotas))
        return cache

    def _reconfigure_network(self, changed: set[str]) -> None:
        """Dynamic broker configs of the network layer: the connection limits apply to the next connection; a
        new `listeners` (or listener.security.protocol.map) is bound in the background (_update_listeners)."""
        if changed & {"max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
                      "max.connection.creation.rate"}:
            self.socket_server.quotas.reconfigure(
                self.config, [listener.name for listener in self.socket_server.bound],
                resolve_host_counts(parse_host_counts(self.config.max_connections_per_ip_overrides)))
        if changed & {"listeners", "listener.security.protocol.map"}:
            self._listener_update = asyncio.ensure_future(self._update_listeners(self._listener_update))
        if "num.network.threads" in changed:
            self.socket_server.resize_network_processes(self.config.num_network_threads)

    def _reconfigure_replica_fetchers(self, changed: set[str]) -> None:
        """A dynamic num.replica.fetchers spreads the followed partitions over the new number of fetchers (at
        startup the replica manager is not up yet: it starts with the new number)."""
        if "num.replica.fetchers" in changed and self.replica_manager is not None:
            self.replica_manager.fetcher_manager.resize()

    def _reconfigure_cleaner(self, changed: set[str]) -> None:
        """A dynamic log.cleaner.threads, backoff or I/O rate restarts the cleaner threads (in the executor: they
        are joined)."""
        if changed & {"log.cleaner.threads", "log.cleaner.backoff.ms", "log.cleaner.io.max.bytes.per.second"}:
            asyncio.get_running_loop().run_in_executor(None, self.log_manager.reconfigure_cleaner,
                                                       CleanerConfig.from_broker_config(self.config))

    async def _update_listeners(self, previous: asyncio.Future | None) -> None:
        """Bind the listeners a dynamic `listeners` adds and close those it drops (never the inter-broker one),
        then, once the broker is registered, publish its endpoints: in ZooKeeper its /brokers/ids znode, as
        Kafka; in the embedded metadata log a RegisterBrokerRecord with the same epoch (Kafka's KRaft brokers do
        not re-advertise: kfk does, so that clients bootstrapping on the new listener find the broker there)."""
        if previous is not None:
            await asyncio.wait([previous])
        server = self.socket_server
        wanted = {listener.name: listener for listener in map(network.Listener.parse, self.config.listeners)}
        for listener in list(server.bound):
            target = wanted.get(listener.name)
            if target is None and listener.name == server.quotas.inter_broker_listener:
                log.warning("not closing listener %s: brokers use it between themselves", listener)
            elif target is None or target.host != listener.host or target.port not in (0, listener.port):
                log.info("closing listener %s", listener)
                await server.remove_listener(listener.name)
        bound = {listener.name for listener in server.bound}
        for listener in wanted.values():
            if listener.name not in bound:
                try:
                    log.info("listening on %s", await server.add_listener(listener))
                except OSError as error:
                    log.error("cannot listen on %s: %s", listener, error.strerror or error)
                except InvalidConfigurationError as error:
                    log.error("cannot listen on %s: %s", listener, error)
        server.quotas.reconfigure(self.config, [listener.name for listener in server.bound],
                                  resolve_host_counts(parse_host_counts(self.config.max_connections_per_ip_overrides)))
        if self.broker_epoch >= 0:
            endpoints = broker_endpoints(server.bound, self.config.advertised_listeners,
                                         self.config.listener_security_protocol_map,
                                         self.config.controller_listener_names)
            if isinstance(self.metadata_backend, ZooKeeperMetadataBackend):
                await self.metadata_backend.update_registration(endpoints, self.config.broker_rack)
            elif self.controller.is_active:
                await self.controller.update_broker_endpoints(self.node_id, endpoints)
            else:  # as Kafka's KRaft brokers: the next registration (a restart) advertises them
                log.info("broker %d: the new listeners are advertised at its next registration", self.node_id)

    async def _listeners_updated(self) -> None:
        """Wait for the listener changes the metadata replayed at startup asked for (before registering)."""
        while self._listener_update is not None and not self._listener_update.done():
            await asyncio.wait([self._listener_update])

    async def _start_metadata(self) -> None:
        """The metadata layer: the embedded backend (KRaft: the __cluster_metadata log in the first log dir,
        replayed into the node's MetadataCache), the controller when this node is one (serving its controller
        listener from now on, before the broker side is up, as other nodes need it to start), then the broker's
        registration and heartbeats (BrokerLifecycleManager) with the listeners it really bound; the broker
        continues once the controller has unfenced it. Components that act on metadata subscribe to
        `self.metadata_cache`."""
        config = self.config
        if config.zookeeper_connect is not None:
            await self._start_zookeeper_metadata()
            return
        self.metadata_cache = self._new_metadata_cache()
        self.metadata_backend = backend = EmbeddedMetadataBackend(
            self.log_dirs[0], self.node_id, self.cluster_id,
            {voter: VoterEndpoint(voter, host, port) for voter, (host, port) in config.quorum_voter_addresses.items()},
            raft_config=RaftConfig.from_values(config.values), time_ms=system_time_ms,
            channel_factory=functools.partial(BrokerChannel, ssl_context=self.controller_ssl, sasl=self.controller_sasl),
            snapshot_max_new_record_bytes=config.metadata_log_max_record_bytes_between_snapshots,
            snapshot_max_interval_ms=config.metadata_log_max_snapshot_interval_ms,
            segment_bytes=config.metadata_log_segment_bytes, dynamic=self._dynamic_quorum(),
            listener_name=config.controller_listener_names[0] if config.controller_listener_names else None)
        # The single-node default has nobody to move leadership to: registration and unfencing lead its partitions.
        self.controller = QuorumController(backend, config, self.node_id,
                                           manage_leadership=not config.single_node_quorum, broker_heartbeats=True,
                                           bootstrap_records=read_bootstrap_records(self.log_dirs[0])
                                           if self.is_controller else None)
        self.controller.kraft_version = lambda: backend.kraft_version
        backend.add_listener(self.metadata_cache)
        backend.add_listener(self.controller)
        self.controller_dispatcher = self._build_controller_dispatcher()
        if self.is_controller:  # the quorum's requests are served while the log replays (NOT_CONTROLLER until won)
            names = {name.upper() for name in config.controller_listener_names}
            for name in names:
                self.socket_server.listener_dispatchers[name] = self.controller_dispatcher
            await self.socket_server.start_serving(names)
        await backend.start()
        if len(backend.voters) > 1 or backend.dynamic is not None:
            # A quorum of several voters elects its leader on its own: the controller follows it.
            leadership_changed = asyncio.Event()
            backend.add_controller_listener(leadership_changed.set)
            self._quorum_follower = asyncio.create_task(self._follow_quorum_leader(backend, leadership_changed))
        elif self.is_controller:
            await self.controller.activate()

        def active_controller() -> int | None:
            active = backend.active_controller()
            return None if active is None else active[0]

        def address_of(controller_id: int) -> tuple[str, int] | None:  # its controller listener
            endpoint = backend.endpoint_of(controller_id)
            return None if endpoint is None else (endpoint.host, endpoint.port)

        self.controller_channel = ControllerChannel(
            self.node_id, active_controller, address_of, config.controller_quorum_request_timeout_ms,
            local=self._local_controller_request if self.is_controller else None,
            ssl_context=self.controller_ssl, sasl=self.controller_sasl)
        if self.is_broker:
            await self._listeners_updated()
            self.lifecycle_manager = BrokerLifecycleManager(
                self.node_id, self.cluster_id, self.controller_channel.for_purpose("heartbeat"),
                lambda: self.metadata_cache.image.offset,
                lambda: broker_endpoints(self.socket_server.bound, config.advertised_listeners,
                                         config.listener_security_protocol_map, config.controller_listener_names),
                config.broker_rack, config.broker_heartbeat_interval_ms, self._directory_ids(),
                self.log_manager.previous_broker_epoch, self._registration_lacks_log_dirs)
            await self.lifecycle_manager.start()
            self.producer_id_manager = ProducerIdManager(self._allocate_producer_ids)
            self.controller.forward_create_topics = lambda request: self.controller_channel.send(
                request, CREATE_TOPICS_FORWARD_VERSION)

    def _registration_lacks_log_dirs(self) -> bool:
        image = self.metadata_cache.image
        registration = image.brokers.get(self.node_id)
        return registration is not None and not registration.log_dirs \
            and image.feature_level(METADATA_VERSION_FEATURE_NAME) >= DIRECTORY_ASSIGNMENT_LEVEL

    def _directory_ids(self) -> list[uuid.UUID]:
        """The directory.id of each log dir, as the broker registers them. A dir formatted before directory ids
        existed gets one now, kept in its meta.properties (as Kafka 3.7+ does on start-up)."""
        ids = []
        for log_dir in self.log_dirs:
            meta = MetaProperties.read(log_dir)
            if meta is None:
                continue
            if not meta.directory_id:
                meta = dataclasses.replace(meta, directory_id=uuid_to_base64(uuid.uuid4()))
                meta.write(log_dir)
            ids.append(uuid_from_base64(meta.directory_id))
        return ids

    def _dynamic_quorum(self) -> DynamicQuorum | None:
        """KIP-853: with controller.quorum.bootstrap.servers (and no static voters) the voters are in the metadata
        log; this node is known by its metadata log dir's directory id and its bound controller listeners."""
        config = self.config
        if config.controller_quorum_voters or not config.controller_quorum_bootstrap_servers:
            return None
        meta = MetaProperties.read(self.log_dirs[0])
        directory_id = uuid_from_base64(meta.directory_id) if meta is not None and meta.directory_id else ZERO_UUID
        names = {name.upper() for name in config.controller_listener_names} if self.is_controller else set()
        listeners = tuple((listener.name, listener.host or "localhost", listener.port)
                          for listener in self.socket_server.bound if listener.name in names)
        return DynamicQuorum(parse_bootstrap_servers(config.controller_quorum_bootstrap_servers), directory_id,
                             listeners)

    async def _follow_quorum_leader(self, backend: EmbeddedMetadataBackend, changed: asyncio.Event) -> None:
        """KRaft with several voters: the active controller is the quorum's leader. Activate the controller when
        this node becomes leader (elect_controller waits until the log is replayed up to the new epoch), and
        deactivate it as soon as it is not (brokers, this node's too, register with whichever is active through
        their BrokerLifecycleManager)."""
        controller = self.controller
        while True:
            changed.clear()
            leader = backend.active_controller()
            if controller.is_active and leader != (self.node_id, controller.controller_epoch):
                log.info("node %d is no longer the active controller", self.node_id)
                controller.deactivate()
            if not controller.is_active and backend.is_controller and self.is_controller:
                try:
                    await controller.activate()
                except KafkaError as error:
                    log.warning("activating the controller failed: %s", error)
                    continue
            await changed.wait()

    @property
    def is_broker(self) -> bool:
        return self.config.zookeeper_connect is not None or "broker" in self.config.process_roles

    @property
    def is_controller(self) -> bool:
        return self.config.zookeeper_connect is None and "controller" in self.config.process_roles

    @property
    def broker_epoch(self) -> int:
        """This broker's epoch: from its registration (ZooKeeper: the znode's creation zxid; KRaft: the
        controller's answer, renewed by a re-registration)."""
        if self.lifecycle_manager is not None:
            return self.lifecycle_manager.broker_epoch
        return self._zookeeper_broker_epoch

    def _build_controller_dispatcher(self) -> Dispatcher:
        """What the controller listener serves (CONTROLLER_SERVED_VERSIONS), built with the controller's layers
        only; a combined node's broker also calls it in-process (`_local_controller_request`). With an authorizer,
        the cluster requests need their ACL (kfk.server.controller_authorization)."""
        dispatcher = Dispatcher(CONTROLLER_SERVED_VERSIONS, subset=True)
        controller, cache = self.controller, self.metadata_cache
        auth = self.auth  # the forwarded requests' clients, and the tools that come to the controller directly
        raft_handler = RaftHandler(self.metadata_backend, auth)

        def voter_endpoints() -> dict[int, tuple[str, int]]:  # DescribeCluster on this listener lists them
            return {node_id: (endpoint.host, endpoint.port)
                    for node_id, endpoint in self.metadata_backend.endpoints.items() if endpoint is not None}

        async def raft_fetch(context: RequestContext, request: Message) -> Message:
            return await raft_handler.fetch(request)

        dispatcher.register(ApiKey.FETCH, raft_fetch)  # a controller listener serves only the metadata log's
        for handler in (ApiVersionsHandler(CONTROLLER_SERVED_VERSIONS, lambda: controller.image,
                                           lambda: controller.kraft_version(), self.cluster_id, self.node_id),
                        BrokerToControllerHandler(controller),
                        raft_handler,
                        TopicAdminHandler(controller, auth),
                        ConfigsHandler(cache, controller, self.config, self.node_id, auth),
                        LeadershipHandler(controller, auth), DescribeQuorumHandler(self.metadata_backend, cache, auth),
                        DescribeClusterHandler(cache, self.metadata_backend, controllers=voter_endpoints),
                        AclsHandler(cache, controller, auth), ClientQuotasHandler(cache, controller, auth),
                        ScramCredentialsHandler(cache, controller, auth),
                        DelegationTokensHandler(cache, controller, self.config.delegation_token_secret_key, auth),
                        UnregisterBrokerHandler(controller, kraft=True),  # ALTER: authorize_cluster_requests
                        FeaturesHandler(controller, auth),
                        EnvelopeHandler(dispatcher, auth, FORWARDED_APIS)):
            handler.register(dispatcher)
        SaslHandler().register(dispatcher)  # answers what a SASL controller listener's authenticator does not
        dispatcher.check_every_api_has_a_handler()
        authorize_cluster_requests(dispatcher, self.auth)
        return dispatcher

    async def _local_controller_request(self, request: Message, api_version: int) -> Message:
        return await self.controller_dispatcher.handle_local(request, api_version, f"broker-{self.node_id}")

    async def _allocate_producer_ids(self) -> ProducerIdsBlock:
        """A producer id block from the active controller (AllocateProducerIds)."""
        response = await self.controller_channel.send(
            AllocateProducerIdsRequest(broker_id=self.node_id, broker_epoch=self.broker_epoch), 0)
        raise_for_code(response.error_code)
        return ProducerIdsBlock(self.node_id, response.producer_id_start, response.producer_id_len)

    async def _alter_partition(self, topic: str, partition: int, leader: int, leader_epoch: int,
                               isr: tuple[int, ...], partition_epoch: int) -> int:
        """A leader's ISR change, sent to the active controller (AlterPartition v3); the new partition epoch."""
        topic_image = self.metadata_cache.image.topic(topic)
        if topic_image is None:
            raise_for_code(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        Topic, Partition = AlterPartitionRequest.TopicData, AlterPartitionRequest.PartitionData
        BrokerState = AlterPartitionRequest.BrokerState
        image_brokers = self.metadata_cache.image.brokers
        request = AlterPartitionRequest(broker_id=self.node_id, broker_epoch=self.broker_epoch, topics=[Topic(
            topic_id=topic_image.topic_id, partitions=[Partition(
                partition_index=partition, leader_epoch=leader_epoch, partition_epoch=partition_epoch,
                new_isr_with_epochs=[BrokerState(broker_id=replica, broker_epoch=image_brokers[replica].broker_epoch
                                                 if replica in image_brokers else -1) for replica in isr])])])
        response = await self.controller_channel.for_purpose("alter-partition").send(request, 3)
        raise_for_code(response.error_code or response.topics[0].partitions[0].error_code)
        return response.topics[0].partitions[0].partition_epoch

    async def _start_zookeeper_metadata(self) -> None:
        """ZooKeeper mode (`zookeeper.connect`): the backend's session is already open (start() read /cluster/id
        through it). Every broker may become the controller: the controller loop runs for it whenever /controller
        is free, and the active controller manages partition leadership as brokers come and go. This broker
        registers its ephemeral /brokers/ids znode, claims producer id blocks from ZooKeeper itself, and persists
        the ISR changes of the partitions it leads through the backend."""
        config = self.config
        backend = self.metadata_backend
        self.metadata_cache = self._new_metadata_cache()
        self.controller = QuorumController(backend, config, self.node_id, manage_leadership=True)
        backend.add_listener(self.metadata_cache)
        backend.add_listener(self.controller)
        await backend.start()
        await self._listeners_updated()
        endpoints = broker_endpoints(self.socket_server.bound, config.advertised_listeners,
                                     config.listener_security_protocol_map, config.controller_listener_names)
        self._zookeeper_broker_epoch = await backend.register_broker(endpoints, config.broker_rack)
        self.producer_id_manager = ProducerIdManager(lambda: backend.allocate_producer_ids(self.node_id))

        def active_controller() -> int | None:
            active = backend.active_controller()
            return None if active is None else active[0]

        def address_of(controller_id: int) -> tuple[str, int] | None:
            endpoint = self.metadata_cache.image.alive_endpoint(controller_id,
                                                                self.replica_manager.inter_broker_listener)
            return None if endpoint is None else (endpoint.host, endpoint.port)

        self.controller_channel = ControllerChannel(self.node_id, active_controller, address_of,
                                                    ssl_context=self.inter_broker_ssl, sasl=self.inter_broker_sasl)
        self.controller.forward_create_topics = lambda request: self.controller_channel.send(
            request, CREATE_TOPICS_FORWARD_VERSION)
        backend.set_admin_request_handler(self.controller.handle_admin_requests)
        controller_changed = asyncio.Event()
        backend.add_controller_listener(controller_changed.set)
        self._controller_election = asyncio.create_task(
            self.controller.run_for_controller(lambda: backend.is_controller, controller_changed))

    async def _controlled_shutdown(self) -> None:
        """Before a ZooKeeper-mode broker stops serving (controlled.shutdown.enable): ask the controller to move
        its leaderships to other in-sync replicas and take it out of the ISRs (ControlledShutdown), retrying while
        some partitions have nowhere to go, so clients and followers switch over before it disappears."""
        from kfk.protocol.messages.controlled_shutdown import ControlledShutdownRequest

        if self.lifecycle_manager is not None:
            await self._kraft_controlled_shutdown()
            return
        if self.config.zookeeper_connect is None or not self.config.controlled_shutdown_enable \
                or self.controller is None:
            return
        for attempt in range(CONTROLLED_SHUTDOWN_ATTEMPTS):
            try:
                if self.controller.is_active:
                    remaining = await self.controller.controlled_shutdown(self.node_id, self.broker_epoch)
                else:
                    response = await self.controller_channel.send(
                        ControlledShutdownRequest(broker_id=self.node_id, broker_epoch=self.broker_epoch), 3,
                        lambda response: response.error_code == ErrorCode.NOT_CONTROLLER)
                    if response.error_code != ErrorCode.NONE:
                        raise KafkaStorageError(f"controlled shutdown refused: {ErrorCode(response.error_code).name}")
                    remaining = response.remaining_partitions
                if not remaining:
                    log.info("controlled shutdown of broker %d succeeded", self.node_id)
                    self.replica_manager.stop_following()
                    return
                log.info("controlled shutdown: %d partition(s) still led by broker %d", len(remaining), self.node_id)
            except Exception as error:  # noqa: BLE001 - an unclean shutdown is the fallback
                log.warning("controlled shutdown attempt %d failed: %s", attempt + 1, error)
            await asyncio.sleep(CONTROLLED_SHUTDOWN_RETRY_BACKOFF_S)
        log.warning("proceeding to an uncontrolled shutdown of broker %d", self.node_id)
        self.replica_manager.stop_following()

    async def _kraft_controlled_shutdown(self) -> None:
        """A KRaft broker's controlled shutdown, through its heartbeats (want_shut_down until should_shut_down):
        skipped when no other broker is registered (nobody to hand leadership to, as in the single-node default)
        and bounded by broker.session.timeout.ms (after which the controller would fence it anyway)."""
        others = [broker_id for broker_id in self.metadata_cache.image.brokers if broker_id != self.node_id]
        if not self.config.controlled_shutdown_enable or not others:
            return
        if await self.lifecycle_manager.controlled_shutdown(self.config.broker_session_timeout_ms):
            log.info("controlled shutdown of broker %d succeeded", self.node_id)
        else:
            log.warning("proceeding to an uncontrolled shutdown of broker %d", self.node_id)
        self.replica_manager.stop_following()

    async def _stop_metadata(self) -> None:
        if self._quorum_follower is not None:
            self._quorum_follower.cancel()
            await asyncio.gather(self._quorum_follower, return_exceptions=True)
        if getattr(self, "_controller_election", None) is not None:
            self._controller_election.cancel()
        if self.lifecycle_manager is not None:
            await self.lifecycle_manager.stop()
        if self.controller_channel is not None:
            await self.controller_channel.close()
        if self.metadata_backend is not None:
            self.controller.deactivate()
            await self.metadata_backend.stop()

    async def _start_replication(self) -> None:
        """The replica manager: it follows the metadata image (opening or creating the logs of the partitions
        assigned to this broker, as leader or follower, deleting those of deleted topics) and serves the data path
        (produce, fetch, offsets). Before it opens anything, the logs of topics deleted while this broker was down
        are set aside as stray replicas: the metadata has caught up by now (_start_metadata returned)."""
        alter_partition = self.metadata_backend.alter_partition if isinstance(
            self.metadata_backend, ZooKeeperMetadataBackend) else self._alter_partition
        self.replica_manager = ReplicaManager(self.node_id, self.config, self.log_manager, system_time_ms,
                                              alter_partition, self.inter_broker_ssl)
        await asyncio.get_running_loop().run_in_executor(None, mark_stray_logs, self.log_manager,
                                                         self.metadata_cache.image)
        self.metadata_cache.subscribe(self.replica_manager.on_metadata_update)
        await self.replica_manager.metadata_applied()  # ready means every hosted partition is being served

    async def _stop_replication(self) -> None:
        """Answer the produces and fetches still waiting in the purgatories, before the logs close."""
        if self.replica_manager is not None:
            await self.replica_manager.shutdown()

    async def _start_group_coordinator(self) -> None:
        """The group coordinator: it loads the __consumer_offsets partitions this broker leads (following the
        metadata image) and writes through the replica manager with acks=-1, so an answer that depends on a write
        goes out once the write is committed."""
        config = GroupCoordinatorConfig.from_broker_config(self.config)
        replica_manager = self.replica_manager

        async def append(partition: int, records: bytes):
            topic_partition = TopicPartition(GROUP_METADATA_TOPIC_NAME, partition)
            results = await replica_manager.append_records(config.offsets_commit_timeout_ms, -1,
                                                           {topic_partition: records}, AppendOrigin.COORDINATOR)
            return results[topic_partition].error

        def log_of(partition: int):
            hosted = replica_manager.get_partition(TopicPartition(GROUP_METADATA_TOPIC_NAME, partition))
            return hosted.log if hosted is not None and hosted.is_leader else None

        self.group_coordinator = GroupCoordinatorService(config, self.node_id, append, log_of, system_time_ms)
        self.share_groups = ShareGroupCoordinator(
            _share_group_config(self.config), self._share_topic, system_time_ms,
            lambda group_id: self.metadata_cache.image.config(ConfigResourceType.GROUP, group_id))
        self.metadata_cache.subscribe(self.group_coordinator.on_metadata_update)

    def _share_topic(self, name: str) -> tuple[uuid.UUID, int] | None:
        """A topic's id and partition count, for the share groups' assignor."""
        topic = self.metadata_cache.image.topic(name)
        return (topic.topic_id, len(topic.partitions)) if topic is not None else None

    async def _stop_group_coordinator(self) -> None:
        if self.group_coordinator is not None:
            self.group_coordinator.stop()

    async def _start_transaction_coordinator(self) -> None:
        """The transaction coordinator: it loads the __transaction_state partitions this broker leads (following the
        metadata image), writes through the replica manager with acks=-1, takes producer ids from this broker's
        block, and sends markers through TxnMarkerSender (written here directly for this broker's partitions, over an
        inter-broker connection to the others'). With transaction.partition.verification.enable, the verifier that
        checks transactional produces with the coordinator (KIP-890 part 1)."""
        config = TransactionCoordinatorConfig.from_broker_config(self.config)
        replica_manager = self.replica_manager

        async def append(partition: int, records: bytes):
            topic_partition = TopicPartition(TRANSACTION_STATE_TOPIC_NAME, partition)
            results = await replica_manager.append_records(config.write_timeout_ms, -1, {topic_partition: records},
                                                           AppendOrigin.COORDINATOR)
            return results[topic_partition].error

        def log_of(partition: int):
            hosted = replica_manager.get_partition(TopicPartition(TRANSACTION_STATE_TOPIC_NAME, partition))
            return hosted.log if hosted is not None and hosted.is_leader else None

        async def generate_producer_id() -> int:  # a controller-only node has no block (and leads no partition)
            return await self.producer_id_manager.generate_producer_id()

        self.txn_marker_writer = TxnMarkerWriter(replica_manager, self.group_coordinator, system_time_ms,
                                                 config.write_timeout_ms)
        # The remote broker may wait write_timeout_ms for its replicas: the request waits a little longer.
        self.txn_marker_channels = InterBrokerChannels(self.node_id, "txn-markers", self.metadata_cache,
                                                       replica_manager.inter_broker_listener,
                                                       config.write_timeout_ms + MARKER_REQUEST_MARGIN_MS,
                                                       self.inter_broker_ssl, self.inter_broker_sasl)
        sender = TxnMarkerSender(self.node_id, self.txn_marker_writer, self.txn_marker_channels)
        self.transaction_coordinator = TransactionCoordinatorService(
            config, self.node_id, append, log_of, system_time_ms, generate_producer_id, sender.send)
        self.metadata_cache.subscribe(self.transaction_coordinator.on_metadata_update)
        # Built even with verification disabled: TV2 producers' partitions are added through it.
        self.txn_verification_channels = InterBrokerChannels(
            self.node_id, "txn-verification", self.metadata_cache, replica_manager.inter_broker_listener,
            config.write_timeout_ms, self.inter_broker_ssl, self.inter_broker_sasl)
        self.txn_verifier = TxnPartitionVerifier(self.node_id, self.metadata_cache, replica_manager,
                                                 self.transaction_coordinator, self.txn_verification_channels,
                                                 self.config.transaction_partition_verification_enable,
                                                 self.config.add_partitions_to_txn_retry_backoff_ms,
                                                 self.config.add_partitions_to_txn_retry_backoff_max_ms)

    def _start_share_coordinator(self) -> None:
        """The share coordinator (KIP-932): it loads the __share_group_state partitions this broker leads and writes
        through the replica manager with acks=-1; the persister through which this broker's share partitions keep
        their state in it (this broker's directly, the others' over an inter-broker connection)."""
        config = ShareCoordinatorConfig.from_broker_config(self.config)
        replica_manager = self.replica_manager

        async def append(partition: int, records: bytes):
            topic_partition = TopicPartition(SHARE_GROUP_STATE_TOPIC_NAME, partition)
            results = await replica_manager.append_records(config.write_timeout_ms, -1, {topic_partition: records},
                                                           AppendOrigin.COORDINATOR)
            return results[topic_partition].error

        def log_of(partition: int):
            hosted = replica_manager.get_partition(TopicPartition(SHARE_GROUP_STATE_TOPIC_NAME, partition))
            return hosted.log if hosted is not None and hosted.is_leader else None

        def delete_records(partition: int, offset: int) -> None:
            hosted = replica_manager.get_partition(TopicPartition(SHARE_GROUP_STATE_TOPIC_NAME, partition))
            if hosted is not None:
                hosted.delete_records_on_leader(offset)

        self.share_coordinator = ShareCoordinatorService(config, self.node_id, append, log_of, system_time_ms,
                                                         delete_records)
        self.metadata_cache.subscribe(self.share_coordinator.on_metadata_update)
        self.share_state_channels = InterBrokerChannels(
            self.node_id, "share-state", self.metadata_cache, replica_manager.inter_broker_listener,
            config.write_timeout_ms + MARKER_REQUEST_MARGIN_MS, self.inter_broker_ssl, self.inter_broker_sasl)
        self.share_persister = SharePersister(self.node_id, self.share_coordinator, self.metadata_cache,
                                              self.share_state_channels, self.controller.auto_create_topics,
                                              config.state_topic_num_partitions, config.write_timeout_ms * 3)

    async def _stop_share_coordinator(self) -> None:
        if self.share_coordinator is not None:
            self.share_coordinator.stop()
        if self.share_state_channels is not None:
            await self.share_state_channels.close()

    async def _stop_transaction_coordinator(self) -> None:
        if self.transaction_coordinator is not None:
            self.transaction_coordinator.stop()
        for channels in (self.txn_marker_channels, self.txn_verification_channels):
            if channels is not None:
                await channels.close()

    def _listener_tls(self, listener_name: str) -> ListenerTls | None:
        """The TLS of an SSL or SASL_SSL listener from its ssl.* settings (listener.name.<l>. prefix first), None
        for the others; InvalidConfigurationError for a listener the security protocol map does not name."""
        if self.config.listener_security_protocol(listener_name) not in TLS_PROTOCOLS:
            return None
        return ListenerTls.from_settings(lambda key: self.config.listener_override(listener_name, key), listener_name)

    def _client_ssl(self, listener: str) -> ssl.SSLContext | None:
        """The client side of TLS for this node's own connections to `listener` (the inter-broker or the controller
        listener) when it is SSL or SASL_SSL: that listener's ssl.* settings, as Kafka's channel builders."""
        if self.config.listener_security_protocol(listener) not in TLS_PROTOCOLS:
            return None
        return client_context(lambda key: self.config.listener_override(listener, key))

    def _build_controller_client_security(self) -> None:
        """TLS and SASL towards the controllers: the first of controller.listener.names, as Kafka's nodes reach
        them (a broker-only node has that listener in its map and listener.name.<l>. settings, not in listeners)."""
        config = self.config
        if config.zookeeper_connect is not None or not config.controller_listener_names:
            return
        self.controller_ssl = self._client_ssl(config.controller_listener_names[0].strip().upper())
        self.controller_sasl = controller_sasl(config)

    def _build_socket_server(self, listeners: list[network.Listener]) -> network.SocketServer:
        # Every listener's TLS is built before anything binds: a broken key store fails the start, not a connection.
        tls = {listener.name: self._listener_tls(listener.name) for listener in listeners}
        return network.SocketServer(
            self.dispatcher,
            listeners,
            max_request_bytes=self.config.socket_request_max_bytes,
            connections_max_idle_ms=self.config.connections_max_idle_ms,
            request_receive_timeout_ms=self.config.socket_request_receive_timeout_ms,
            queued_max_request_bytes=self.config.queued_max_request_bytes,
            quotas=ConnectionQuotas.from_config(
                self.config, [listener.name for listener in listeners],
                self.config.inter_broker_listener,
                resolve_host_counts(parse_host_counts(self.config.max_connections_per_ip_overrides))),
            authenticator=self._sasl_authenticators(listeners),
            tls=lambda name: tls[name] if name in tls else self._listener_tls(name),
            network_threads=self.config.num_network_threads,
            send_buffer_bytes=self.config.socket_send_buffer_bytes,
        )

    def _sasl_authenticators(self, listeners: list[network.Listener]):
        """A new connection's SaslAuthenticator by listener name, None on a listener without SASL. The listeners'
        SASL settings are checked now (a mistake fails the start); a listener added later is read when its first
        connection arrives."""
        configs: dict[str, SaslListenerConfig | None] = {}
        image = lambda: self.metadata_cache.image if self.metadata_cache else None  # noqa: E731
        credentials = image_scram_credentials(image)
        tokens = image_token_credentials(image, self.config.delegation_token_secret_key)

        def listener_config(name: str) -> SaslListenerConfig | None:
            if name not in configs:
                sasl = self.config.listener_security_protocol(name) in SASL_PROTOCOLS
                configs[name] = (SaslListenerConfig.from_broker_config(self.config, name, credentials, tokens)
                                 if sasl else None)
            return configs[name]

        for listener in listeners:
            listener_config(listener.name)
        return lambda name: (None if (config := listener_config(name)) is None
                             else SaslAuthenticator(config, self.socket_server.listener_dispatchers.get(
                                 name, self.dispatcher)))

    async def start(self) -> None:
        """Start every layer. A start that fails on the operator's mistake (a log dir in use, a port taken, a
        malformed listener) raises a KafkaError before anything in the log dirs changes: the dirs are locked and the
        listeners bound before a dir is formatted or a log recovered."""
        loop = asyncio.get_running_loop()
        for warning in self.config.check_supported():
            log.warning("%s", warning)
        self.config.check_kraft_roles()
        self.config.check_metadata_log()
        self.config.check_delegation_tokens()
        try:
            listeners = [network.Listener.parse(text) for text in self.config.listeners]
        except ValueError as error:
            raise InvalidConfigurationError(f"invalid listeners: {error}") from None
        self.inter_broker_ssl = self._client_ssl(self.config.inter_broker_listener)
        self._build_controller_client_security()
        self.auth = RequestAuthorizer.from_config(self.config)
        socket_server = self._build_socket_server(listeners)
        self.inter_broker_sasl = inter_broker_sasl(self.config)
        self._log_dir_locks = acquire_log_dirs(self.log_dirs)
        self.socket_server = socket_server
        self.dynamic_config.add_reconfigurable(self._reconfigure_network)
        self.dynamic_config.add_reconfigurable(self._reconfigure_cleaner)
        self.dynamic_config.add_reconfigurable(self._reconfigure_replica_fetchers)
        try:
            await self.socket_server.bind()
        except OSError as error:
            await self.socket_server.stop()
            release_log_dirs(self._log_dir_locks, remove_created=True)
            raise InvalidConfigurationError(f"cannot listen on {', '.join(self.config.listeners)}: "
                                            f"{error.strerror or error}") from None
        for listener in self.socket_server.bound:
            log.info("listener %s bound", listener)
        if self.config.zookeeper_connect is not None:  # the cluster id is ZooKeeper's (/cluster/id)
            self.metadata_backend = ZooKeeperMetadataBackend(
                self.config.zookeeper_connect, self.node_id,
                expected_cluster_id=load_cluster_id(self.log_dirs, self.node_id), session_timeout_ms=self.config.zookeeper_session_timeout_ms,
                connection_timeout_ms=self.config.zookeeper_connection_timeout_ms, time_ms=system_time_ms)
            self.cluster_id = await self.metadata_backend.connect()
        else:
            self.cluster_id = self._cluster_id()
        self.log_manager = self._build_log_manager()
        await loop.run_in_executor(None, self.log_manager.startup, system_time_ms(), self.node_id, self.cluster_id)
        for log_dir in self.log_dirs:
            count = sum(os.path.dirname(partition.dir) == log_dir for partition in self.log_manager.logs.values())
            log.info("log dir %s: %d partition logs loaded (the dir is locked while the broker runs)", log_dir, count)
        self._log_manager_task = asyncio.create_task(self._run_log_manager())
        await self._start_metadata()
        if self.is_broker:  # a controller-only node serves its controller listener alone
            await self._start_replication()
            await self._start_group_coordinator()
            await self._start_transaction_coordinator()
            self._start_share_coordinator()
            self._register_handlers()
        if self.config.metrics_port:
            self.metrics_endpoint = MetricsEndpoint(self)
        await self.socket_server.start_serving()
        Path(self.log_dirs[0], BROKER_PID_FILE).write_text(f"{os.getpid()}\n")
        for note in self.started_notes:
            log.info("%s", note)
        bound = ", ".join(str(listener) for listener in self.socket_server.bound)
        log.info("kfk broker %d started, listening on %s (cluster id %s, log dirs %s)", self.node_id, bound,
                 self.cluster_id, ", ".join(self.log_dirs))

    async def stop(self) -> None:
        if isinstance(self.metadata_backend, EmbeddedMetadataBackend):
            await self.metadata_backend.resign()  # the quorum elects a successor while this node shuts down
        await self._controlled_shutdown()
        if self.metrics_endpoint is not None:  # its HTTP thread may take a poll interval (0.5 s) to notice
            await asyncio.get_running_loop().run_in_executor(None, self.metrics_endpoint.stop)
            await self.metrics_endpoint.close()
        if self.socket_server is not None:
            await self.socket_server.stop()
        await self._stop_share_coordinator()
        await self._stop_transaction_coordinator()
        await self._stop_group_coordinator()
        await self._stop_replication()
        await self._stop_metadata()
        if self._log_manager_task is not None:
            self._log_manager_task.cancel()
        if self.log_manager is not None:
            # The clean-shutdown marker keeps the broker epoch: the next start tells the controller it was clean.
            broker_epoch = self.lifecycle_manager.broker_epoch if self.lifecycle_manager is not None else -1
            await asyncio.get_running_loop().run_in_executor(None, self.log_manager.shutdown, broker_epoch)
        pid_file = Path(self.log_dirs[0], BROKER_PID_FILE)
        if pid_file.exists() and pid_file.read_text().strip() == str(os.getpid()):
            pid_file.unlink()
        release_log_dirs(self._log_dir_locks)
        log.info("kfk broker %d stopped", self.node_id)

    async def run_until_signalled(self) -> None:
        loop = asyncio.get_running_loop()
        stop_requested = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop_requested.set)
        await self.start()
        await stop_requested.wait()
        log.info("shutting down")
        await self.stop()


def run_broker(config: BrokerConfig, started_notes: Sequence[str] = ()) -> int:
    """Run a broker in the foreground until SIGTERM/SIGINT; the process exit code."""
    server = BrokerServer(config, started_notes=started_notes)

    async def run() -> None:
        # num.io.threads: the threads that take the blocking file work off the event loop (Kafka's request handler
        # threads do the appends; here the event loop does, but for those of compressed or large batches).
        asyncio.get_running_loop().set_default_executor(
            concurrent.futures.ThreadPoolExecutor(config.num_io_threads, thread_name_prefix="kfk-io"))
        await server.run_until_signalled()

    asyncio.run(run())
    return 0
