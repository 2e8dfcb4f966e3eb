"""Fetch (key 1), v0-v18: consumers (replica_id -1); a follower (replica_id >= 0) takes the same path, reading up to
the log end offset and reporting its position to the leader.

Records go out as file regions of the segment files, sent with sendfile (zero-copy), except for v0-v3: those
clients expect magic 0 (v0-v1) or magic 1 (v2-v3) message sets, so only for them is the data read and down-converted
(a zstd batch cannot be, and a zstd topic answers them UNSUPPORTED_COMPRESSION_TYPE before v10, as Kafka does).
v3 adds max_bytes and the rule that the first batch comes back whole even when it is above the limits (v0-v2 cut
it); v4 isolation_level (READ_COMMITTED reads stop at the last stable offset, with the aborted transactions listed),
last_stable_offset; v5 log_start_offset; v7 incremental fetch sessions (KIP-227, kfk/server/fetch_session.py): a
full fetch with epoch 0 opens a session, later fetches name only what changed and hear only about partitions with
news; v9 current_leader_epoch fencing (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH); v11
rack_id and preferred_read_replica (always -1: no follower fetching for consumers); v12 flexible, with the tagged
current_leader beside NOT_LEADER_OR_FOLLOWER; v13 topic ids instead of names (UNKNOWN_TOPIC_ID); v15 replica_state
instead of replica_id; v16 and v17 (KIP-951 node endpoints, KIP-853 directory ids) change nothing here, nor
does v18 (KIP-1166: a follower's high watermark in replica_state, which a leader of a static ISR has no use for).

Authorization: a follower needs CLUSTER_ACTION on the cluster, a consumer READ on each topic; a partition refused
is answered TOPIC_AUTHORIZATION_FAILED (every partition, for a follower refused).
Every fetch, a consumer's or a follower's, gets at most the broker's fetch.max.bytes whatever its max_bytes asks
(KIP-541; the first batch still comes whole), and waits for no more than that (min_bytes is capped to it too).
With a consumer_byte_rate quota in force, a consumer's fetch is limited to what its quota allows over the quota
window, the records' bytes it returns are recorded for its (user, client-id), and a consumer over its quota gets
throttle_time_ms (v1+) and a muted connection (kfk.security.quotas). Unlike Kafka, which answers a throttled fetch
with no records (and takes the bytes back), kfk sends what it read: the bytes count against the quota either way,
and the fetch session stays consistent with what the consumer received. Followers are never throttled.
A replica's fetch of `__cluster_metadata` (a follower or observer of the KRaft quorum) is Raft's, and goes to
`raft_fetch` (handlers/raft.py) whole.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import Awaitable, Callable

from kfk.backends.embedded.raft.messages import is_replica_metadata_fetch

from kfk.errors import ErrorCode, KafkaError
from kfk.protocol.fetch_session import FINAL_EPOCH, INITIAL_EPOCH, next_epoch
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.fetch import FetchRequest, FetchResponse
from kfk.records import complete_entries_length, down_convert
from kfk.replication.fetch_params import READ_COMMITTED, FetchParams, FetchPartitionRequest, LogReadResult
from kfk.replication.replica_manager import ReplicaManager
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.security.quotas import ClientQuotaManager
from kfk.server.dispatch import Dispatcher, RequestContext
from kfk.server.fetch_session import CachedPartition, FetchSession, FetchSessionCache, PartitionKey

#: The version from which fetch responses carry magic-2 batches; below it they are down-converted.
FIRST_MAGIC_V2_VERSION = 4
#: The version from which zstd batches may be returned.
FIRST_ZSTD_VERSION = 10
#: The version from which fetches name topics by id.
FIRST_TOPIC_ID_VERSION = 13
#: Down-converting more than this many bytes runs in the executor, off the event loop.
DOWN_CONVERSION_EXECUTOR_BYTES = 64 * 1024

FetchableTopicResponse = FetchResponse.FetchableTopicResponse
PartitionData = FetchResponse.PartitionData
AbortedTransaction = FetchResponse.AbortedTransaction
LeaderIdAndEpoch = FetchResponse.LeaderIdAndEpoch

_NOT_LEADER_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


class FetchHandler:
    def __init__(self, replica_manager: ReplicaManager, sessions: FetchSessionCache, fetch_max_bytes: int,
                 auth: RequestAuthorizer = ALLOW_ALL, quota: ClientQuotaManager | None = None,
                 raft_fetch: Callable[[FetchRequest], Awaitable[FetchResponse]] | None = None) -> None:
        self.replica_manager = replica_manager
        #: The broker's fetch.max.bytes: no response holds more, whatever its request asks (the first batch aside).
        self.fetch_max_bytes = fetch_max_bytes
        self.sessions = sessions
        self.auth = auth
        self.quota = quota
        self.raft_fetch = raft_fetch

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.FETCH, self.fetch)

    async def fetch(self, context: RequestContext, request: FetchRequest) -> FetchResponse:
        if self.raft_fetch is not None and is_replica_metadata_fetch(request):
            return await self.raft_fetch(request)
        version = context.api_version
        uses_topic_ids = version >= FIRST_TOPIC_ID_VERSION
        replica_id = request.replica_state.replica_id if version >= 15 else request.replica_id
        session: FetchSession | None = None
        if request.session_epoch in (FINAL_EPOCH, INITIAL_EPOCH):
            if request.session_id != 0:
                self.sessions.remove(request.session_id)
            wanted: OrderedDict[PartitionKey, CachedPartition] = OrderedDict()
            self._apply_request(wanted, request, uses_topic_ids)
        else:
            session = self.sessions.get(request.session_id)
            if session is None:
                return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0)
            if session.epoch != request.session_epoch:
                return FetchResponse(error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH, session_id=0)
            if session.uses_topic_ids != uses_topic_ids:
                return FetchResponse(error_code=ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR, session_id=0)
            # The epoch moves on before the read: a second fetch with the same epoch is refused, not answered twice.
            session.epoch = next_epoch(session.epoch)
            self.sessions.touch(session)
            self._apply_request(session.partitions, request, uses_topic_ids)
            wanted = session.partitions

        replica_manager = self.replica_manager
        topics_by_id = replica_manager.image.topics_by_id
        requests: dict[PartitionKey, FetchPartitionRequest] = {}
        for key, cached in wanted.items():
            if uses_topic_ids:
                topic = topics_by_id.get(cached.topic_id)
                if topic is None:
                    continue  # answered UNKNOWN_TOPIC_ID below
                cached.resolve_topic(topic.name)
            requests[key] = cached.read_request()
        denied = self._denied(context, replica_id, requests)
        max_bytes = min(max(request.max_bytes, 0), self.fetch_max_bytes)
        quota = self.quota if replica_id < 0 else None
        if quota is not None and quota.enabled:
            window_bytes = quota.max_value_in_quota_window(context.principal.name, context.client_id or "")
            if window_bytes is not None:
                max_bytes = min(max_bytes, int(window_bytes))
        else:
            quota = None
        params = FetchParams(
            replica_id=replica_id,
            max_wait_ms=request.max_wait_ms,
            min_bytes=min(request.min_bytes, max_bytes),
            max_bytes=max_bytes,
            isolation_level=request.isolation_level,
            hard_max_bytes_limit=version <= 2,
        )
        readable = {key: fetch for key, fetch in requests.items() if key not in denied} if denied else requests
        results = dict(zip(readable, await replica_manager.fetch_messages(params, list(readable.values()))))
        results.update((key, LogReadResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)) for key in denied)

        answered: list[tuple[CachedPartition, PartitionData]] = []
        returned_records: list[PartitionKey] = []
        incremental = session is not None
        for key, cached in list(wanted.items()):
            result = results.get(key)
            if result is None:
                data = _error_data(cached.partition, LogReadResult(ErrorCode.UNKNOWN_TOPIC_ID))
            elif incremental and result.error == ErrorCode.NONE and not result.size and cached.unchanged(
                    result.high_watermark, result.last_stable_offset, result.log_start_offset):
                continue  # nothing new: an incremental response leaves the partition out (the common case)
            else:
                data = await _partition_data(replica_manager, version, params, requests[key], result)
            must_respond = cached.must_respond(data.error_code, len(data.records), data.high_watermark,
                                               data.last_stable_offset, data.log_start_offset)
            if must_respond or not incremental:
                answered.append((cached, data))
            if len(data.records):
                returned_records.append(key)
        if quota is not None:
            context.throttle_time_ms = quota.record_and_get_throttle_time_ms(
                context.principal.name, context.client_id or "", sum(len(data.records) for _, data in answered),
                time.monotonic_ns() // 1_000_000)
        if session is None and request.session_epoch == INITIAL_EPOCH:
            session = self.sessions.create(replica_id >= 0, uses_topic_ids, wanted)
        if session is None:
            session_id = 0
        else:
            for key in returned_records:
                session.move_to_end(key)
            session_id = session.session_id
        return FetchResponse(error_code=ErrorCode.NONE, session_id=session_id, responses=_by_topic(answered))

    def _denied(self, context: RequestContext, replica_id: int,
                requests: dict[PartitionKey, FetchPartitionRequest]) -> set[PartitionKey]:
        """The partitions of `requests` the principal may not fetch."""
        if not self.auth.enabled:
            return set()
        if replica_id >= 0:
            allowed = self.auth.authorize(context, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)
            return set() if allowed else set(requests)
        readable = self.auth.authorized_names(context, AclOperation.READ, ResourceType.TOPIC,
                                              (fetch.topic_partition.topic for fetch in requests.values()))
        return {key for key, fetch in requests.items() if fetch.topic_partition.topic not in readable}

    @staticmethod
    def _apply_request(partitions: OrderedDict[PartitionKey, CachedPartition], request: FetchRequest,
                       uses_topic_ids: bool) -> None:
        """Add or update the partitions the request names, and drop the ones it forgets."""
        for fetch_topic in request.topics:
            for fetch_partition in fetch_topic.partitions:
                key = (fetch_topic.topic_id if uses_topic_ids else fetch_topic.topic, fetch_partition.partition)
                max_bytes = max(fetch_partition.partition_max_bytes, 0)
                cached = partitions.get(key)
                if cached is None:
                    partitions[key] = CachedPartition(
                        fetch_topic.topic, fetch_topic.topic_id, fetch_partition.partition,
                        fetch_partition.fetch_offset, max_bytes, fetch_partition.current_leader_epoch,
                        fetch_partition.last_fetched_epoch, fetch_partition.log_start_offset)
                else:
                    cached.update_request(fetch_partition.fetch_offset, max_bytes,
                                          fetch_partition.current_leader_epoch, fetch_partition.last_fetched_epoch,
                                          fetch_partition.log_start_offset)
        for forgotten in request.forgotten_topics_data:
            for partition in forgotten.partitions:
                partitions.pop((forgotten.topic_id if uses_topic_ids else forgotten.topic, partition), None)


def _by_topic(answered: list[tuple[CachedPartition, PartitionData]]) -> list[FetchableTopicResponse]:
    """One topic entry per run of partitions of the same topic, in the order answered (as Kafka groups them)."""
    responses: list[FetchableTopicResponse] = []
    for cached, data in answered:
        if not responses or responses[-1].topic_id != cached.topic_id or responses[-1].topic != cached.topic:
            responses.append(FetchableTopicResponse(topic=cached.topic, topic_id=cached.topic_id, partitions=[]))
        responses[-1].partitions.append(data)
    return responses


async def _partition_data(replica_manager: ReplicaManager, version: int, params: FetchParams,
                          fetch: FetchPartitionRequest, result: LogReadResult) -> PartitionData:
    index = fetch.topic_partition.partition
    if result.error != ErrorCode.NONE:
        return _error_data(index, result)
    records: object = result.records
    if version < FIRST_ZSTD_VERSION:
        if replica_manager.compression_type(fetch.topic_partition) == "zstd":
            return _error_data(index, LogReadResult(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE))
    if version < FIRST_MAGIC_V2_VERSION and len(result.records):
        try:
            records = await _down_convert(result, 0 if version <= 1 else 1, fetch.fetch_offset)
        except KafkaError as error:
            return _error_data(index, LogReadResult(error.error_code))
    aborted = None
    if params.isolation_level == READ_COMMITTED and not params.is_from_follower:
        aborted = [AbortedTransaction(producer_id=txn.producer_id, first_offset=txn.first_offset)
                   for txn in result.aborted_transactions or ()]
    return PartitionData(
        partition_index=index,
        error_code=ErrorCode.NONE,
        high_watermark=result.high_watermark,
        last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset,
        aborted_transactions=aborted if version >= 4 else [],
        preferred_read_replica=-1,
        records=records,
    )


#: Errors Kafka finds before reading (the partition is not in its metadata): those answers carry an empty list of
#: aborted transactions where a failed read carries none (null).
_UNKNOWN_PARTITION_ERRORS = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID})


def _error_data(index: int, result: LogReadResult) -> PartitionData:
    """A partition that failed: as in Kafka, no offsets (-1: a failed read tells nothing of the log) and no records."""
    data = PartitionData(partition_index=index, error_code=result.error, high_watermark=-1, last_stable_offset=-1,
                         log_start_offset=-1,
                         aborted_transactions=[] if result.error in _UNKNOWN_PARTITION_ERRORS else None, records=b"")
    if result.error in _NOT_LEADER_ERRORS:
        data.current_leader = LeaderIdAndEpoch(leader_id=result.leader_id, leader_epoch=result.leader_epoch)
    return data


async def _down_convert(result: LogReadResult, magic: int, fetch_offset: int) -> bytes:
    """Old fetchers: read the region and rewrite its whole batches as magic 0/1 (a trailing partial batch, which the
    size limit may cut, is left out: old clients would drop it anyway)."""
    data = result.records.read_bytes()

    def convert() -> bytes:
        complete = complete_entries_length(data)
        return down_convert(memoryview(data)[:complete], magic, fetch_offset)

    if len(data) >= DOWN_CONVERSION_EXECUTOR_BYTES:
        return await asyncio.get_running_loop().run_in_executor(None, convert)
    return convert()
