"""Fetch (key 1), v0-v17: consumers (replica_id -1); a follower (replica_id >= 0) takes the same path, reading up to
the log end offset and reporting its position to the leader.

Records go out as file regions of the segment files, sent with sendfile (zero-copy), except for v0-v3: those
clients expect magic 0 (v0-v1) or magic 1 (v2-v3) message sets, so only for them is the data read and down-converted
(a zstd batch cannot be, and a zstd topic answers them UNSUPPORTED_COMPRESSION_TYPE before v10, as Kafka does).
v3 adds max_bytes and the rule that the first batch comes back whole even when it is above the limits (v0-v2 cut
it); v4 isolation_level (READ_COMMITTED reads stop at the last stable offset, with the aborted transactions listed),
last_stable_offset; v5 log_start_offset; v7 fetch sessions (KIP-227): every fetch here is answered as a full,
sessionless one (session_id 0), which clients accept, and an incremental fetch naming a session gets
FETCH_SESSION_ID_NOT_FOUND; v9 current_leader_epoch fencing (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH); v11
rack_id and preferred_read_replica (always -1: no follower fetching for consumers); v12 flexible, with the tagged
current_leader beside NOT_LEADER_OR_FOLLOWER; v13 topic ids instead of names (UNKNOWN_TOPIC_ID); v15 replica_state
instead of replica_id; v16 and v17 (KIP-951 node endpoints, KIP-853 directory ids) change nothing here.
"""

from __future__ import annotations

import asyncio
import uuid

from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode, KafkaError
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.fetch import FetchRequest, FetchResponse
from kfk.records import complete_entries_length, down_convert
from kfk.replication.fetch_params import READ_COMMITTED, FetchParams, FetchPartitionRequest, LogReadResult
from kfk.replication.replica_manager import ReplicaManager
from kfk.server.dispatch import Dispatcher, RequestContext

#: Fetch sessions (KIP-227): epoch -1 ends/avoids a session, 0 asks for a new one; anything else is incremental.
FINAL_EPOCH = -1
INITIAL_EPOCH = 0
#: The version from which fetch responses carry magic-2 batches; below it they are down-converted.
FIRST_MAGIC_V2_VERSION = 4
#: The version from which zstd batches may be returned.
FIRST_ZSTD_VERSION = 10
#: Down-converting more than this many bytes runs in the executor, off the event loop.
DOWN_CONVERSION_EXECUTOR_BYTES = 64 * 1024

FetchableTopicResponse = FetchResponse.FetchableTopicResponse
PartitionData = FetchResponse.PartitionData
AbortedTransaction = FetchResponse.AbortedTransaction
LeaderIdAndEpoch = FetchResponse.LeaderIdAndEpoch

_NOT_LEADER_ERRORS = (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH)


class FetchHandler:
    def __init__(self, replica_manager: ReplicaManager) -> None:
        self.replica_manager = replica_manager

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.FETCH, self.fetch)

    async def fetch(self, context: RequestContext, request: FetchRequest) -> FetchResponse:
        replica_manager = self.replica_manager
        version = context.api_version
        if request.session_epoch not in (FINAL_EPOCH, INITIAL_EPOCH):
            # An incremental fetch: this broker never creates sessions, so the one named cannot exist.
            return FetchResponse(error_code=ErrorCode.FETCH_SESSION_ID_NOT_FOUND, session_id=0)
        uses_topic_ids = version >= 13
        image = replica_manager.image
        requests: list[FetchPartitionRequest] = []
        unknown_topic_ids: set[uuid.UUID] = set()
        layout: list[tuple[str, uuid.UUID, list[int]]] = []
        for fetch_topic in request.topics:
            name = fetch_topic.topic
            if uses_topic_ids:
                topic = image.topics_by_id.get(fetch_topic.topic_id)
                if topic is None:
                    unknown_topic_ids.add(fetch_topic.topic_id)
                    layout.append(("", fetch_topic.topic_id, [p.partition for p in fetch_topic.partitions]))
                    continue
                name = topic.name
            for fetch_partition in fetch_topic.partitions:
                requests.append(FetchPartitionRequest(
                    TopicPartition(name, fetch_partition.partition),
                    fetch_offset=fetch_partition.fetch_offset,
                    partition_max_bytes=max(fetch_partition.partition_max_bytes, 0),
                    current_leader_epoch=fetch_partition.current_leader_epoch,
                    last_fetched_epoch=fetch_partition.last_fetched_epoch,
                    log_start_offset=fetch_partition.log_start_offset,
                ))
            layout.append((name, fetch_topic.topic_id, [p.partition for p in fetch_topic.partitions]))
        params = FetchParams(
            replica_id=request.replica_state.replica_id if version >= 15 else request.replica_id,
            max_wait_ms=request.max_wait_ms,
            min_bytes=request.min_bytes,
            max_bytes=max(request.max_bytes, 0),
            isolation_level=request.isolation_level,
            hard_max_bytes_limit=version <= 2,
        )
        results = await replica_manager.fetch_messages(params, requests)
        by_partition = {fetch.topic_partition: (fetch, result) for fetch, result in zip(requests, results)}
        responses: list[FetchableTopicResponse] = []
        for name, topic_id, partitions in layout:
            partition_data: list[PartitionData] = []
            for index in partitions:
                if name == "" and topic_id in unknown_topic_ids:
                    partition_data.append(_error_data(index, LogReadResult(ErrorCode.UNKNOWN_TOPIC_ID)))
                    continue
                fetch, result = by_partition[TopicPartition(name, index)]
                partition_data.append(await _partition_data(replica_manager, version, params, fetch, result))
            responses.append(FetchableTopicResponse(topic=name, topic_id=topic_id, partitions=partition_data))
        return FetchResponse(error_code=ErrorCode.NONE, session_id=0, responses=responses)


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
