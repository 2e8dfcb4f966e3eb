"""Produce (key 0), v0-v13.

v0-v2 carry legacy message sets (magic 0/1, from old clients), which storage's LogValidator (run by
Log.append_as_leader) converts to one v2 batch; v1 adds throttle_time_ms and v2 log_append_time_ms (set when the topic
uses LogAppendTime). From v3 a partition's records must be exactly one magic-2 batch (INVALID_RECORD otherwise) and
zstd needs v7
(UNSUPPORTED_COMPRESSION_TYPE before); v3 also brings transactional_id. v5 adds log_start_offset, v8 record_errors
and error_message (an invalid record: which one and why), v9 is the first flexible version, v10 adds the tagged
current_leader/node_endpoints of KIP-951 (nothing to report on one broker), v11 is v10 for KIP-890 clients. v12 is
v11 on the wire; it comes from a producer on transaction version 2 (KIP-890 part 2; ApiVersions finalizes
transaction.version at 2), which sends no AddPartitionsToTxn: the leader has the partition added to the transaction.
v13 (KIP-516) names each topic by its id instead of its name, in the request and in the response: a topic id
the metadata does not know answers UNKNOWN_TOPIC_ID for its partitions (before authorization, as Kafka does). Kafka
4.0 removed v0-v2; kfk still serves them.

A transactional batch is first verified with the transaction coordinator (KIP-890 part 1,
transaction.partition.verification.enable), or from v12 added to the transaction (kfk/server/txn_verification.py);
a partition failing either gets its error without being appended.

Authorization: WRITE on each topic (TOPIC_AUTHORIZATION_FAILED for the partitions of a topic refused) and, for a
transactional produce, WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition).

acks=0 gets no response at all; if a partition failed, the connection is closed instead, as Kafka does, so that
the producer notices and refreshes its metadata.

The common request -- one partition of one topic, no transactional id, acks 1 or -1, authorization off -- takes a fast
path (`produce_fast`): read straight from the frame and answered with a response frame written from a cached layout
(kfk/protocol/produce_fast.py), with the same checks, append and quota recording as the generic path; any other
request, or a result with record errors, goes the generic way.

With a producer_byte_rate quota in force, the records' bytes are recorded for the client's (user, client-id) once
appended, and a client over its quota gets throttle_time_ms (v1+) and a muted connection (kfk.security.quotas).
"""

from __future__ import annotations

import time
import uuid

from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode, KafkaError
from kfk.protocol.messages import ApiKey
from kfk.protocol.headers import encode_response
from kfk.protocol.message import Buffer
from kfk.protocol.messages.produce import ProduceRequest, ProduceResponse
from kfk.protocol.produce_fast import read_single_partition_produce, single_partition_produce_response
from kfk.records import MAGIC_VALUE_V2, CompressionType, entry_at
from kfk.replication.delayed_produce import ProducePartitionResult
from kfk.replication.replica_manager import ReplicaManager
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.security.quotas import ClientQuotaManager
from kfk.server.dispatch import NOT_SERVED, CloseConnection, Dispatcher, RequestContext
from kfk.server.txn_verification import TxnPartitionVerifier

#: From this version the request and the response name topics by id (KIP-516).
FIRST_TOPIC_ID_VERSION = 13

TopicProduceResponse = ProduceResponse.TopicProduceResponse
PartitionProduceResponse = ProduceResponse.PartitionProduceResponse
BatchIndexAndErrorMessage = ProduceResponse.BatchIndexAndErrorMessage


def validate_records(version: int, records: bytes | memoryview | None) -> ErrorCode:
    """Kafka's ProduceRequest.validateRecords: from v3 exactly one magic-2 batch, zstd only from v7."""
    if version < 3:
        return ErrorCode.NONE
    if not records:
        return ErrorCode.INVALID_RECORD
    try:
        first = entry_at(records)
        if first is None or first.magic != MAGIC_VALUE_V2:
            return ErrorCode.INVALID_RECORD
        if version < 7 and first.compression_type == CompressionType.ZSTD:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        size = first.size_in_bytes
        if size < len(records) and entry_at(records, size) is not None:
            return ErrorCode.INVALID_RECORD
    except KafkaError as error:
        return error.error_code
    return ErrorCode.NONE


class ProduceHandler:
    """Without `txn_verifier`, transactional batches are appended unverified (tests of the append alone); without
    `quota`, nothing is throttled."""

    def __init__(self, replica_manager: ReplicaManager, txn_verifier: TxnPartitionVerifier | None = None,
                 auth: RequestAuthorizer = ALLOW_ALL, quota: ClientQuotaManager | None = None) -> None:
        self.replica_manager = replica_manager
        self.txn_verifier = txn_verifier
        self.auth = auth
        self.quota = quota
        #: Error code -> responses of the fast path with it (one dict update per request; the generic path's are
        #: counted by the dispatcher's response observer): the metrics endpoint's ErrorsPerSec for Produce.
        self.fast_error_counts: dict[int, int] = {}

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.PRODUCE, self.produce, self.produce_fast)

    async def produce_fast(self, context: RequestContext, frame: Buffer, position: int) -> list | None:
        """The common request (see the module's docstring) from the frame itself, or NOT_SERVED."""
        version = context.api_version
        request = read_single_partition_produce(frame, position, version)
        if request is None or request.acks == 0 or self.auth.enabled:
            return NOT_SERVED
        replica_manager = self.replica_manager
        topic, index, records = request.topic, request.partition, request.records
        error = _partition_error(replica_manager, version, topic, index, records)
        if error == ErrorCode.NONE:
            topic_partition = TopicPartition(topic, index)
            result = (await replica_manager.append_records(request.timeout_ms, request.acks,
                                                           {topic_partition: records}))[topic_partition]
        else:
            result = ProducePartitionResult(error)
        self._record_bytes(context, len(records))
        counts = self.fast_error_counts
        counts[result.error] = counts.get(result.error, 0) + 1
        if result.record_errors or result.error_message is not None:
            return encode_response(context.header.correlation_id, ApiKey.PRODUCE, version, ProduceResponse(
                responses=[TopicProduceResponse(name=topic, partition_responses=[_partition_response(index, result)])],
                throttle_time_ms=context.throttle_time_ms))
        return [single_partition_produce_response(
            context.header.correlation_id, version, topic, index, result.error, result.base_offset,
            result.log_append_time_ms, result.log_start_offset, context.throttle_time_ms)]

    async def produce(self, context: RequestContext, request: ProduceRequest) -> ProduceResponse | None:
        replica_manager = self.replica_manager
        version = context.api_version
        entries: dict[TopicPartition, bytes | memoryview] = {}
        early: dict[TopicPartition, ProducePartitionResult] = {}
        order: list[tuple[str, uuid.UUID, list[int]]] = []
        unknown_ids: set[uuid.UUID] = set()
        if version >= FIRST_TOPIC_ID_VERSION:
            topics_by_id = replica_manager.image.topics_by_id
            for topic_data in request.topic_data:
                topic_image = topics_by_id.get(topic_data.topic_id)
                if topic_image is None:
                    unknown_ids.add(topic_data.topic_id)
                else:
                    topic_data.name = topic_image.name
        refused = self._refused(context, request, unknown_ids)
        for topic_data in request.topic_data:
            indexes: list[int] = []
            order.append((topic_data.name, topic_data.topic_id, indexes))
            if topic_data.topic_id in unknown_ids:
                indexes.extend(partition_data.index for partition_data in topic_data.partition_data)
                continue
            for partition_data in topic_data.partition_data:
                topic_partition = TopicPartition(topic_data.name, partition_data.index)
                indexes.append(partition_data.index)
                error = refused.get(topic_data.name, ErrorCode.NONE)
                if error == ErrorCode.NONE:
                    error = _partition_error(replica_manager, version, topic_data.name, partition_data.index,
                                             partition_data.records)
                if error != ErrorCode.NONE:
                    early[topic_partition] = ProducePartitionResult(error)
                    continue
                entries[topic_partition] = partition_data.records or b""
        guards = None
        if self.txn_verifier is not None and request.transactional_id and entries:
            failed, guards = await self.txn_verifier.verify(request.transactional_id, entries, version)
            for topic_partition, result in failed.items():
                del entries[topic_partition]
                early[topic_partition] = result
        results = await replica_manager.append_records(request.timeout_ms, request.acks, entries,
                                                       verification_guards=guards)
        results.update(early)
        if self.quota is not None and self.quota.enabled:
            self._record_bytes(context, sum(len(partition_data.records or b"") for topic_data in request.topic_data
                                            for partition_data in topic_data.partition_data))
        if request.acks == 0:
            failed = [str(tp) for tp, result in results.items() if result.error != ErrorCode.NONE]
            failed.extend(str(topic_id) for topic_id in unknown_ids)
            if failed:
                raise CloseConnection(f"acks=0 produce failed for {', '.join(failed)}")
            return None
        unknown = ProducePartitionResult(ErrorCode.UNKNOWN_TOPIC_ID)
        return ProduceResponse(responses=[
            TopicProduceResponse(name=name, topic_id=topic_id, partition_responses=[
                _partition_response(index, unknown if topic_id in unknown_ids else results[TopicPartition(name, index)])
                for index in indexes])
            for name, topic_id, indexes in order
        ])

    def _record_bytes(self, context: RequestContext, size: int) -> None:
        """With a producer_byte_rate quota in force, record the request's record bytes for its client and set the
        throttle time the client is due."""
        quota = self.quota
        if quota is not None and quota.enabled:
            context.throttle_time_ms = quota.record_and_get_throttle_time_ms(
                context.principal.name, context.client_id or "", size, time.monotonic_ns() // 1_000_000)

    def _refused(self, context: RequestContext, request: ProduceRequest,
                 unknown_ids: set[uuid.UUID]) -> dict[str, ErrorCode]:
        """The topics of the request the principal may not write to, with the error their partitions answer (topics
        of unknown ids aside: they answer UNKNOWN_TOPIC_ID)."""
        auth = self.auth
        if not auth.enabled:
            return {}
        names = [topic_data.name for topic_data in request.topic_data if topic_data.topic_id not in unknown_ids]
        if request.transactional_id and not auth.authorize(context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                                                           request.transactional_id):
            return dict.fromkeys(names, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        writable = auth.authorized_names(context, AclOperation.WRITE, ResourceType.TOPIC, names)
        return {name: ErrorCode.TOPIC_AUTHORIZATION_FAILED for name in names if name not in writable}


def _partition_error(replica_manager: ReplicaManager, version: int, topic: str, index: int,
                     records: bytes | memoryview | None) -> ErrorCode:
    """What refuses a partition's records before they reach its log: an unknown topic or partition, or records of
    the wrong shape for the request version."""
    topic_image = replica_manager.image.topic(topic)
    if topic_image is None or index not in topic_image.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return validate_records(version, records)


def _partition_response(index: int, result: ProducePartitionResult) -> PartitionProduceResponse:
    return PartitionProduceResponse(
        index=index,
        error_code=result.error,
        base_offset=result.base_offset,
        log_append_time_ms=result.log_append_time_ms,
        log_start_offset=result.log_start_offset,
        record_errors=[BatchIndexAndErrorMessage(batch_index=batch_index, batch_index_error_message=message)
                       for batch_index, message in result.record_errors] if result.record_errors else [],
        error_message=result.error_message,
    )
