"""The request dispatcher: SERVED_VERSIONS, the one table of the version range kfk serves per API, and the registry
of the handlers that serve them.

A handler registers for an API key and gets the range the table gives it; ApiVersions (handlers/api_versions.py)
answers from the same table, and the broker checks at start-up that every API in the table has a handler, so what
is advertised is exactly what is served. An API missing from the table, one registered twice, a range outside the
generated schema's, or a table row without a handler is a programming error and fails at start-up.

Failure rules, as Apache Kafka applies them:
- a frame whose header cannot be read, an unknown API key, or a version outside what we serve (other than
  ApiVersions, which answers UNSUPPORTED_VERSION itself) closes the connection: the client cannot be sent a response
  it would understand;
- a body that does not parse closes the connection too (Kafka's InvalidRequestException path);
- a handler that raises a KafkaError or anything else is logged and the connection is closed, never the broker.

Quotas (kfk.security.quotas): a handler that records a client's bytes (Produce, Fetch) puts its throttle time in
`context.throttle_time_ms`; with a request_percentage quota in force, the dispatcher also times the handler's own
execution (the slices of it that ran on the event loop, not its waits: Kafka's request handler thread time) and
records it. The larger throttle time goes into the response's throttle_time_ms and to the `on_throttle` callback,
through which the network layer mutes the connection after sending the response (KIP-219). Requests between
brokers (follower fetches, WriteTxnMarkers, ControlledShutdown) are not throttled, as in Kafka.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Set
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Coroutine, Generator, Mapping, NamedTuple

from kfk.errors import InvalidRequestError, KafkaError, ProtocolError, UnsupportedVersionError
from kfk.protocol.apis import VersionRange
from kfk.protocol.headers import RequestHeader, decode_request_header, encode_response
from kfk.protocol.message import Buffer, Message
from kfk.protocol.messages import ApiKey, request_class
from kfk.security.principal import ANONYMOUS, KafkaPrincipal
from kfk.security.quotas import NANOS_TO_PERCENTAGE_PER_SECOND, ClientQuotaManagers

log = logging.getLogger("kfk.server.dispatch")

#: The versions kfk serves, per API: what ApiVersions advertises and what the dispatcher accepts. The highest versions
#: are those of the Kafka release whose schemas kfk vendors, Kafka 4.0 (clients infer the broker's release from
#: them); the lowest are kept as a courtesy to old clients, also where Kafka 4.0 removed them (KIP-896; their layouts
#: come from scripts/kafka-protocol/kip896/). ControlledShutdown, gone from Kafka 4.0, is kept for kfk's ZooKeeper
#: mode at its pre-4.0 versions. What each version changes is in the handler module's docstring.
SERVED_VERSIONS: dict[ApiKey, VersionRange] = {
    ApiKey.PRODUCE: VersionRange(0, 13),  # handlers/produce.py
    ApiKey.FETCH: VersionRange(0, 18),  # handlers/fetch.py
    ApiKey.LIST_OFFSETS: VersionRange(0, 11),  # handlers/list_offsets.py
    ApiKey.METADATA: VersionRange(0, 13),  # handlers/metadata.py
    ApiKey.CONTROLLED_SHUTDOWN: VersionRange(1, 3),  # handlers/leadership.py
    ApiKey.OFFSET_COMMIT: VersionRange(0, 10),  # handlers/offsets.py
    ApiKey.OFFSET_FETCH: VersionRange(0, 10),  # handlers/offsets.py
    ApiKey.FIND_COORDINATOR: VersionRange(0, 6),  # handlers/find_coordinator.py
    ApiKey.JOIN_GROUP: VersionRange(0, 9),  # handlers/groups.py
    ApiKey.HEARTBEAT: VersionRange(0, 4),  # handlers/groups.py
    ApiKey.LEAVE_GROUP: VersionRange(0, 5),  # handlers/groups.py
    ApiKey.SYNC_GROUP: VersionRange(0, 5),  # handlers/groups.py
    ApiKey.DESCRIBE_GROUPS: VersionRange(0, 6),  # handlers/groups.py
    ApiKey.LIST_GROUPS: VersionRange(0, 5),  # handlers/groups.py
    ApiKey.API_VERSIONS: VersionRange(0, 5),  # handlers/api_versions.py
    ApiKey.CREATE_TOPICS: VersionRange(0, 7),  # handlers/admin.py
    ApiKey.DELETE_TOPICS: VersionRange(0, 6),  # handlers/admin.py
    ApiKey.DELETE_RECORDS: VersionRange(0, 2),  # handlers/delete_records.py
    ApiKey.INIT_PRODUCER_ID: VersionRange(0, 5),  # handlers/producer_id.py
    ApiKey.OFFSET_FOR_LEADER_EPOCH: VersionRange(0, 4),  # handlers/offset_for_leader_epoch.py
    ApiKey.DESCRIBE_ACLS: VersionRange(1, 3),  # handlers/acls.py
    ApiKey.CREATE_ACLS: VersionRange(1, 3),  # handlers/acls.py
    ApiKey.DELETE_ACLS: VersionRange(1, 3),  # handlers/acls.py
    ApiKey.DESCRIBE_CONFIGS: VersionRange(0, 4),  # handlers/configs.py
    ApiKey.ALTER_CONFIGS: VersionRange(0, 2),  # handlers/configs.py
    ApiKey.ALTER_REPLICA_LOG_DIRS: VersionRange(1, 2),  # handlers/describe_log_dirs.py
    ApiKey.DESCRIBE_LOG_DIRS: VersionRange(0, 5),  # handlers/describe_log_dirs.py
    ApiKey.CREATE_PARTITIONS: VersionRange(0, 3),  # handlers/admin.py
    ApiKey.DELETE_GROUPS: VersionRange(0, 3),  # handlers/groups.py
    ApiKey.CONSUMER_GROUP_HEARTBEAT: VersionRange(0, 1),  # handlers/consumer_groups.py
    ApiKey.CONSUMER_GROUP_DESCRIBE: VersionRange(0, 1),  # handlers/consumer_groups.py
    ApiKey.ELECT_LEADERS: VersionRange(0, 2),  # handlers/leadership.py
    ApiKey.INCREMENTAL_ALTER_CONFIGS: VersionRange(0, 1),  # handlers/configs.py
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: VersionRange(0, 1),  # handlers/leadership.py
    ApiKey.LIST_PARTITION_REASSIGNMENTS: VersionRange(0, 0),  # handlers/leadership.py
    ApiKey.OFFSET_DELETE: VersionRange(0, 0),  # handlers/offsets.py
    ApiKey.DESCRIBE_CLIENT_QUOTAS: VersionRange(0, 1),  # handlers/client_quotas.py
    ApiKey.ALTER_CLIENT_QUOTAS: VersionRange(0, 1),  # handlers/client_quotas.py
    ApiKey.DESCRIBE_QUORUM: VersionRange(0, 2),  # handlers/describe_quorum.py
    ApiKey.ADD_RAFT_VOTER: VersionRange(0, 1),  # handlers/raft.py (a KRaft broker forwards it)
    ApiKey.REMOVE_RAFT_VOTER: VersionRange(0, 0),  # handlers/raft.py (a KRaft broker forwards it)
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: VersionRange(0, 0),  # handlers/describe_topic_partitions.py
    ApiKey.DESCRIBE_CLUSTER: VersionRange(0, 2),  # handlers/cluster.py
    ApiKey.ADD_PARTITIONS_TO_TXN: VersionRange(0, 5),  # handlers/transactions.py
    ApiKey.ADD_OFFSETS_TO_TXN: VersionRange(0, 4),  # handlers/transactions.py
    ApiKey.END_TXN: VersionRange(0, 5),  # handlers/transactions.py
    ApiKey.WRITE_TXN_MARKERS: VersionRange(0, 2),  # handlers/transactions.py
    ApiKey.TXN_OFFSET_COMMIT: VersionRange(0, 6),  # handlers/transactions.py
    ApiKey.DESCRIBE_PRODUCERS: VersionRange(0, 0),  # handlers/transactions.py
    ApiKey.DESCRIBE_TRANSACTIONS: VersionRange(0, 0),  # handlers/transactions.py
    ApiKey.LIST_TRANSACTIONS: VersionRange(0, 2),  # handlers/transactions.py
    ApiKey.LIST_CONFIG_RESOURCES: VersionRange(0, 1),  # handlers/configs.py
    ApiKey.SASL_HANDSHAKE: VersionRange(0, 1),  # handlers/sasl.py, kfk/server/sasl_authenticator.py
    ApiKey.SASL_AUTHENTICATE: VersionRange(0, 2),  # handlers/sasl.py, kfk/server/sasl_authenticator.py
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: VersionRange(0, 0),  # handlers/scram_credentials.py
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: VersionRange(0, 0),  # handlers/scram_credentials.py
    ApiKey.CREATE_DELEGATION_TOKEN: VersionRange(1, 3),  # handlers/delegation_tokens.py
    ApiKey.RENEW_DELEGATION_TOKEN: VersionRange(1, 2),  # handlers/delegation_tokens.py
    ApiKey.EXPIRE_DELEGATION_TOKEN: VersionRange(1, 2),  # handlers/delegation_tokens.py
    ApiKey.DESCRIBE_DELEGATION_TOKEN: VersionRange(1, 3),  # handlers/delegation_tokens.py
    ApiKey.UNREGISTER_BROKER: VersionRange(0, 0),  # handlers/unregister_broker.py
    ApiKey.UPDATE_FEATURES: VersionRange(0, 2),  # handlers/features.py
    ApiKey.SHARE_GROUP_HEARTBEAT: VersionRange(1, 1),  # handlers/share_groups.py
    ApiKey.SHARE_GROUP_DESCRIBE: VersionRange(1, 1),  # handlers/share_groups.py
    ApiKey.SHARE_FETCH: VersionRange(1, 2),  # handlers/share_groups.py
    ApiKey.SHARE_ACKNOWLEDGE: VersionRange(1, 2),  # handlers/share_groups.py
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: VersionRange(0, 0),  # handlers/share_state.py
    ApiKey.READ_SHARE_GROUP_STATE: VersionRange(0, 0),  # handlers/share_state.py
    ApiKey.WRITE_SHARE_GROUP_STATE: VersionRange(0, 1),  # handlers/share_state.py
    ApiKey.DELETE_SHARE_GROUP_STATE: VersionRange(0, 0),  # handlers/share_state.py
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: VersionRange(0, 1),  # handlers/share_state.py
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: VersionRange(0, 1),  # handlers/share_groups.py
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: VersionRange(0, 0),  # handlers/share_groups.py
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: VersionRange(0, 0),  # handlers/share_groups.py
}

#: The consumer group protocol's APIs (KIP-848): served only while group.coordinator.rebalance.protocols names it.
CONSUMER_PROTOCOL_APIS = (ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE)


def served_broker_versions(consumer_protocol: bool) -> dict[ApiKey, VersionRange]:
    """What a broker's listeners serve: SERVED_VERSIONS, less the consumer protocol's APIs when the group coordinator
    does not serve that protocol (GroupCoordinatorConfig.consumer_protocol_enabled; Kafka then does not advertise
    them)."""
    if consumer_protocol:
        return dict(SERVED_VERSIONS)
    return {api_key: versions for api_key, versions in SERVED_VERSIONS.items() if api_key not in CONSUMER_PROTOCOL_APIS}


#: What a controller listener serves (controller.listener.names; Kafka's ApiMessageType listener CONTROLLER): the
#: requests brokers send their controller (registration, heartbeats, ISR changes, producer id blocks), the admin
#: requests brokers forward and tools send to the controller directly, and the quorum's own (Raft's Vote,
#: BeginQuorumEpoch, EndQuorumEpoch, FetchSnapshot, Fetch of __cluster_metadata by voters and observers,
#: UpdateRaftVoter: served on the controller listener only, as Kafka does; DescribeQuorum, AddRaftVoter and
#: RemoveRaftVoter, which brokers serve too). The
#: ranges are the broker listeners' where both serve an API. AlterPartition from v2 (topic ids), as Kafka 4.0.
CONTROLLER_SERVED_VERSIONS: dict[ApiKey, VersionRange] = {
    ApiKey.API_VERSIONS: SERVED_VERSIONS[ApiKey.API_VERSIONS],
    # A SASL_PLAINTEXT or SASL_SSL controller listener authenticates (the authenticator answers these).
    ApiKey.SASL_HANDSHAKE: SERVED_VERSIONS[ApiKey.SASL_HANDSHAKE],
    ApiKey.SASL_AUTHENTICATE: SERVED_VERSIONS[ApiKey.SASL_AUTHENTICATE],
    ApiKey.BROKER_REGISTRATION: VersionRange(0, 4),  # handlers/broker_to_controller.py
    ApiKey.BROKER_HEARTBEAT: VersionRange(0, 2),  # handlers/broker_to_controller.py
    ApiKey.UNREGISTER_BROKER: SERVED_VERSIONS[ApiKey.UNREGISTER_BROKER],
    ApiKey.ALTER_PARTITION: VersionRange(2, 3),  # handlers/broker_to_controller.py
    ApiKey.ALLOCATE_PRODUCER_IDS: VersionRange(0, 0),  # handlers/broker_to_controller.py
    ApiKey.VOTE: VersionRange(0, 2),  # handlers/raft.py
    ApiKey.BEGIN_QUORUM_EPOCH: VersionRange(0, 1),  # handlers/raft.py
    ApiKey.END_QUORUM_EPOCH: VersionRange(0, 1),  # handlers/raft.py
    ApiKey.FETCH_SNAPSHOT: VersionRange(0, 1),  # handlers/raft.py
    ApiKey.UPDATE_RAFT_VOTER: VersionRange(0, 0),  # handlers/raft.py
    ApiKey.FETCH: SERVED_VERSIONS[ApiKey.FETCH],
    ApiKey.ADD_RAFT_VOTER: SERVED_VERSIONS[ApiKey.ADD_RAFT_VOTER],
    ApiKey.REMOVE_RAFT_VOTER: SERVED_VERSIONS[ApiKey.REMOVE_RAFT_VOTER],
    **{api_key: SERVED_VERSIONS[api_key] for api_key in (
        ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS, ApiKey.DESCRIBE_CONFIGS,
        ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS, ApiKey.ELECT_LEADERS,
        ApiKey.ALTER_PARTITION_REASSIGNMENTS, ApiKey.LIST_PARTITION_REASSIGNMENTS, ApiKey.DESCRIBE_QUORUM,
        ApiKey.DESCRIBE_CLUSTER)},
    # A broker's forwarded request with its client's principal (KIP-590; a controller-only API, as in Kafka 4.0),
    # and the admin requests forwarded since, which tools may also send the controller directly.
    ApiKey.ENVELOPE: VersionRange(0, 0),  # handlers/envelope.py
    **{api_key: SERVED_VERSIONS[api_key] for api_key in (
        ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS, ApiKey.ALTER_CLIENT_QUOTAS, ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        ApiKey.CREATE_DELEGATION_TOKEN, ApiKey.RENEW_DELEGATION_TOKEN, ApiKey.EXPIRE_DELEGATION_TOKEN,
        ApiKey.DESCRIBE_DELEGATION_TOKEN, ApiKey.UPDATE_FEATURES)},
}


#: The listener name of a request served in-process (handle_local): the node asking itself, no connection.
LOCAL_LISTENER = "local"


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request besides its body."""

    header: RequestHeader
    api_version: int
    client_host: str
    client_port: int
    listener_name: str
    #: Who sent it: the connection's authenticated principal (User:ANONYMOUS until something authenticates it).
    principal: KafkaPrincipal = ANONYMOUS
    #: How long the client is to be throttled for exceeding a quota (set by handlers that record bytes).
    throttle_time_ms: int = 0
    #: The request as received, header and body (what a KRaft broker forwards to the controller in an Envelope).
    request_data: Buffer | None = None

    @property
    def client_id(self) -> str | None:
        return self.header.client_id


#: APIs only brokers send (Kafka's cluster actions): never throttled by client quotas.
_INTER_BROKER_APIS = frozenset({ApiKey.CONTROLLED_SHUTDOWN, ApiKey.WRITE_TXN_MARKERS})


def is_follower_fetch(api_version: int, request: Message) -> bool:
    """A Fetch from a follower replica (its replica id, in replica_state from v15), not a consumer's."""
    return (request.replica_state.replica_id if api_version >= 15 else request.replica_id) >= 0


def _is_inter_broker(api_key: int, api_version: int, request: Message) -> bool:
    if api_key == ApiKey.FETCH:
        return is_follower_fetch(api_version, request)
    return api_key in _INTER_BROKER_APIS


class _TimedCoroutine:
    """Awaits a coroutine while adding up the time it runs between its suspensions: the loop time a handler itself
    takes, without the time it waits (for replication, a long-poll fetch, the disk executor)."""

    __slots__ = ("coroutine", "nanos")

    def __init__(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        self.coroutine = coroutine
        self.nanos = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        coroutine = self.coroutine
        value: Any = None
        error: BaseException | None = None
        while True:
            started = time.perf_counter_ns()
            try:
                yielded = coroutine.send(value) if error is None else coroutine.throw(error)
            except StopIteration as stop:
                self.nanos += time.perf_counter_ns() - started
                return stop.value
            self.nanos += time.perf_counter_ns() - started
            try:
                value, error = (yield yielded), None
            except BaseException as thrown:  # noqa: BLE001 - cancellation and all: passed on to the coroutine
                value, error = None, thrown


Handler = Callable[[RequestContext, Message], Awaitable[Message | None]]

#: What a fast handler returns for a request it leaves to the generic path.
NOT_SERVED: Any = object()

#: A handler of an API's common request shape, straight from the frame (the context, the frame, where its body
#: starts): the response chunks (None for no response), or NOT_SERVED when the request is not of that shape and the
#: generic decoder and handler serve it. It is skipped while a request_percentage quota times handlers.
FastHandler = Callable[[RequestContext, Buffer, int], Awaitable[list | None]]


class Registration(NamedTuple):
    api_key: ApiKey
    versions: VersionRange
    handler: Handler
    request_class: type[Message]
    fast: FastHandler | None = None


def _handler_failed(registration: Registration, api_version: int, client_host: str,
                    error: Exception) -> CloseConnection:
    """A handler raised: logged, and the connection is closed (a handler bug costs one connection, never the
    broker)."""
    log.exception("error handling %s v%d from %s", registration.api_key.name, api_version, client_host)
    return CloseConnection(f"{registration.api_key.name} handler failed: {error}")


async def _serve_fast(registration: Registration, context: RequestContext, frame: Buffer, position: int,
                      on_throttle: Callable[[int], None] | None) -> list | None:
    """The fast handler's response chunks (its throttle passed to `on_throttle`), or NOT_SERVED."""
    try:
        chunks = await registration.fast(context, frame, position)  # type: ignore[misc]
    except CloseConnection:
        raise
    except Exception as error:  # as for the generic handler (dispatch)
        raise _handler_failed(registration, context.api_version, context.client_host, error) from error
    if chunks is not NOT_SERVED and context.throttle_time_ms and on_throttle is not None:
        on_throttle(context.throttle_time_ms)
    return chunks


class CloseConnection(Exception):
    """Raised to the network layer when the connection must be closed instead of answered, or (with `response`)
    after that last response is written and `close_delay_ms` more: a failed SASL authentication, whose client must
    get to read why before the connection goes (Kafka's connection.failed.authentication.delay.ms)."""

    def __init__(self, reason: str, response: list | None = None, close_delay_ms: int = 0) -> None:
        super().__init__(reason)
        self.response = response
        self.close_delay_ms = close_delay_ms


class Dispatcher:
    def __init__(self, served_versions: Mapping[ApiKey, VersionRange] = SERVED_VERSIONS,
                 quotas: ClientQuotaManagers | None = None, *, subset: bool = False) -> None:
        """`subset`: the table serves part of what the handlers offer (a controller listener's dispatcher is given
        the broker's handlers: it serves the APIs of its table and skips the others)."""
        self.served_versions = served_versions
        self.quotas = quotas
        self.subset = subset
        self._registrations: dict[int, Registration] = {}
        #: Called with (api key, version, request, response) for each response the generic path builds, when the
        #: metrics endpoint is on (kfk.server.metrics: error codes, FetchConsumer/FetchFollower); None otherwise.
        self.response_observer: Callable[[int, int, Message, Message], None] | None = None

    def register(self, api_key: ApiKey, handler: Handler, fast: FastHandler | None = None) -> None:
        """Serve `api_key` with `handler`, at the versions `served_versions` gives it; with `fast`, requests of the
        shape it serves skip the generic decode, handler and encode (see FastHandler)."""
        versions = self.served_versions.get(api_key)
        if versions is None and self.subset:
            return
        if versions is None:
            raise ValueError(f"{api_key.name} has no row in the served versions table")
        if api_key in self._registrations:
            raise ValueError(f"{api_key.name} is registered twice")
        cls = request_class(api_key)
        if not cls.LOWEST_VERSION <= versions.lowest <= versions.highest <= cls.HIGHEST_VERSION:
            raise ValueError(f"{api_key.name} versions {versions.lowest}-{versions.highest} are outside the schema")
        self._registrations[api_key] = Registration(ApiKey(api_key), versions, handler, cls, fast)

    def wrap(self, api_key: ApiKey, wrapper: Callable[[Handler], Handler]) -> None:
        """Replace a registered handler by `wrapper(handler)` (a KRaft broker forwards controller requests); a fast
        handler it had is dropped, so that every request goes through the wrapper."""
        registration = self._registrations[api_key]
        self._registrations[api_key] = registration._replace(handler=wrapper(registration.handler), fast=None)

    async def handle_local(self, request: Message, api_version: int, client_id: str) -> Message:
        """Serve a request from this process itself, with no connection and no encoding (a combined node's broker
        talking to its own active controller)."""
        registration = self._registrations[request.API_KEY]
        header = RequestHeader(request_api_key=request.API_KEY, request_api_version=api_version,
                               correlation_id=0, client_id=client_id)
        return await registration.handler(RequestContext(header, api_version, "", 0, LOCAL_LISTENER), request)

    def check_every_api_has_a_handler(self) -> None:
        """Called by the composition root once every handler is registered: ApiVersions advertises the whole table,
        so a row nobody serves would send clients requests that close their connection."""
        missing = [ApiKey(key).name for key in self.served_versions if key not in self._registrations]
        if missing:
            raise ValueError(f"no handler registered for {', '.join(missing)}")

    async def dispatch(
        self, frame: Buffer, client_host: str, client_port: int, listener_name: str,
        principal: KafkaPrincipal = ANONYMOUS, on_throttle: Callable[[int], None] | None = None,
    ) -> list | None:
        """Handle one request frame (size prefix stripped; a bytearray the network layer gives up, or bytes).
        Returns the response chunks, or None when no response is due (acks=0 produce). Raises CloseConnection when
        the connection must be closed. `on_throttle(ms)` is called when a quota throttles the client."""
        try:
            header, position = decode_request_header(frame)
        except KafkaError as error:
            raise CloseConnection(f"unreadable request header: {error}") from error
        api_key, api_version = header.request_api_key, header.request_api_version
        registration = self._registrations.get(api_key)
        if registration is None:
            raise CloseConnection(f"unsupported api key {api_key} from {client_host}:{client_port}")
        context = RequestContext(header, api_version, client_host, client_port, listener_name, principal)
        if api_version not in registration.versions:
            if api_key != ApiKey.API_VERSIONS:
                raise CloseConnection(f"unsupported version {api_version} of {registration.api_key.name}")
            # KIP-511: answer with UNSUPPORTED_VERSION at version 0, whatever the body holds.
            response = await registration.handler(context, None)
            return encode_response(header.correlation_id, api_key, 0, response)
        if isinstance(frame, bytearray):
            # Produce decodes from a writable view, so its records field is a view into the frame that the validator
            # edits in place (no copy between socket and file); every other request from immutable bytes, so the
            # handlers' bytes fields are ordinary hashable bytes (a copy of a small frame).
            frame = memoryview(frame) if api_key == ApiKey.PRODUCE else bytes(frame)
        context.request_data = frame
        quotas = self.quotas
        if registration.fast is not None and (quotas is None or not quotas.request.enabled):
            chunks = await _serve_fast(registration, context, frame, position, on_throttle)
            if chunks is not NOT_SERVED:
                return chunks
        try:
            request = registration.request_class.decode(frame, api_version, position)
        except ProtocolError as error:
            raise CloseConnection(f"malformed {registration.api_key.name} v{api_version}: {error}") from error
        try:
            if quotas is not None and quotas.request.enabled and not _is_inter_broker(api_key, api_version, request):
                timed = _TimedCoroutine(registration.handler(context, request))
                response = await timed
                throttle_ms = quotas.request.record_and_get_throttle_time_ms(
                    principal.name, header.client_id or "", timed.nanos * NANOS_TO_PERCENTAGE_PER_SECOND,
                    time.monotonic_ns() // 1_000_000)
                if throttle_ms > context.throttle_time_ms:
                    context.throttle_time_ms = throttle_ms
            else:
                response = await registration.handler(context, request)
        except CloseConnection:
            raise
        except Exception as error:  # a handler bug must cost one connection, never the broker
            raise _handler_failed(registration, api_version, client_host, error) from error
        if context.throttle_time_ms:
            if response is not None and hasattr(response, "throttle_time_ms"):
                response.throttle_time_ms = max(response.throttle_time_ms, context.throttle_time_ms)
            if on_throttle is not None:
                on_throttle(context.throttle_time_ms)
        if response is None:
            return None
        if self.response_observer is not None:
            self.response_observer(api_key, api_version, request, response)
        return encode_response(header.correlation_id, api_key, api_version, response)

    def serves_fast(self, frame: Buffer) -> bool:
        """Whether `frame` is a request of an API with a fast handler, which dispatch_fast may serve (the network
        layer asks before trying); False for a frame too short to name its API (dispatch() closes the connection)."""
        if len(frame) < 2:
            return False
        registration = self._registrations.get((frame[0] << 8) | frame[1])
        return registration is not None and registration.fast is not None

    async def dispatch_fast(
        self, frame: bytearray, client_host: str, client_port: int, listener_name: str,
        principal: KafkaPrincipal = ANONYMOUS, on_throttle: Callable[[int], None] | None = None,
    ) -> list | None:
        """dispatch() for a request a fast handler serves, else NOT_SERVED with nothing done (the frame is then for
        dispatch()). The network layer runs it outside any task, in the callback that received the frame, so that
        the common request is answered there when the handler does not suspend; it never reaches a generic handler,
        which may expect to run in a task (asyncio.timeout)."""
        try:
            header, position = decode_request_header(frame)
        except KafkaError:
            return NOT_SERVED  # dispatch() closes the connection, saying why
        api_version = header.request_api_version
        registration = self._registrations.get(header.request_api_key)
        quotas = self.quotas
        if registration is None or registration.fast is None or api_version not in registration.versions \
                or (quotas is not None and quotas.request.enabled):
            return NOT_SERVED
        view = memoryview(frame)  # Produce's records are edited in place (see dispatch)
        context = RequestContext(header, api_version, client_host, client_port, listener_name, principal,
                                 request_data=view)
        return await _serve_fast(registration, context, view, position, on_throttle)

    async def handle_forwarded(self, request_data: bytes, client_host: str, listener_name: str,
                               principal: KafkaPrincipal, forwardable: Set[int]) -> tuple[RequestHeader, Message]:
        """Serve the request an Envelope carries (KIP-590) as if its client had sent it here: with the client's
        principal and host, so the handler authorizes the client, not the broker that forwarded it. Returns the
        request's header (its correlation id answers the client) and the response. InvalidRequestError for bytes
        that are not a request of a `forwardable` API, UnsupportedVersionError for a version not served here."""
        try:
            header, position = decode_request_header(request_data)
        except KafkaError as error:
            raise InvalidRequestError(f"the forwarded request's header does not parse: {error}") from None
        api_key, api_version = header.request_api_key, header.request_api_version
        registration = self._registrations.get(api_key)
        if registration is None or api_key not in forwardable:
            raise InvalidRequestError(f"API {api_key} is not enabled or is not eligible for forwarding")
        if api_version not in registration.versions:
            raise UnsupportedVersionError(f"{registration.api_key.name} v{api_version} is not served here")
        try:
            request = registration.request_class.decode(request_data, api_version, position)
        except KafkaError as error:
            raise InvalidRequestError(f"malformed forwarded {registration.api_key.name} v{api_version}: {error}"
                                      ) from None
        context = RequestContext(header, api_version, client_host, 0, listener_name, principal)
        return header, await registration.handler(context, request)
