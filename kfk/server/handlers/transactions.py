"""The transaction APIs: what producers ask the transaction coordinator, what it asks partition leaders, and the
admin views of transactions and producers.

- AddPartitionsToTxn (24), v0-v5: v0-v3 come from clients, one transaction, an error per partition (partitions
  the metadata does not know are UNKNOWN_TOPIC_OR_PARTITION and the others then OPERATION_NOT_ATTEMPTED); v2 adds PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before); v3 flexible;
  v4 comes from partition leaders and batches transactions, each either added or, with verify_only, only checked
  (KIP-890: is the producer's transaction open with the partition in it?); v5 adds TRANSACTION_ABORTABLE
  (INVALID_TXN_STATE before).
- AddOffsetsToTxn (25), v0-v4 and EndTxn (26), v0-v5: v2 adds PRODUCER_FENCED, v3 flexible, v4
  TRANSACTION_ABORTABLE; EndTxn v5 comes only from a client of transaction protocol version 2 (KIP-890 part 2):
  the coordinator bumps the producer epoch at the end of every transaction and the answer carries the producer id
  and epoch to continue with. ApiVersions finalizes the `transaction.version` feature at 2, so clients that follow
  it end transactions that way; older ones end them the TV1 way, with v4 or below (no epoch bump; the answer's
  producer id and epoch stay -1).
- WriteTxnMarkers (27), v0-v2 (v1 flexible): from transaction coordinators; see kfk/server/txn_markers.py. v2
  adds each marker's transaction version (KIP-1228); the markers are written the same whatever it says.
- TxnOffsetCommit (28), v0-v6: v2 adds committed leader epochs, v3 the member id, group instance id and generation
  (checked like OffsetCommit's when given), v4 TRANSACTION_ABORTABLE, v5 comes from TV2 clients, which send no
  AddOffsetsToTxn: before committing, the group's __consumer_offsets partition is added to the transaction (through
  the transaction coordinator, as a Produce v12's partitions; an error there answers every partition, mapped as
  Kafka's group coordinator maps a failed verification). Partitions of topics the metadata does not know get
  UNKNOWN_TOPIC_OR_PARTITION before the group coordinator sees the rest, as OffsetCommit's. v6 (KIP-1319) names
  topics by id, as OffsetCommit v10 does (an unknown id's partitions answer UNKNOWN_TOPIC_ID).
- DescribeTransactions (65), v0; ListTransactions (66), v0-v2 (v1 adds the duration filter of KIP-994, v2 a
  transactional id pattern of KIP-1152: a regular expression the whole id must match, INVALID_REGULAR_EXPRESSION
  when it does not compile; null or empty lists every transaction).
- DescribeProducers (61), v0: per partition, the active producers in this replica's producer state (leader or follower).
"""

from __future__ import annotations

import re

from kfk.common.internal_topics import GROUP_METADATA_TOPIC_NAME
from kfk.coordinator.group.group_coordinator import OffsetCommitPartition
from kfk.coordinator.group.service import GroupCoordinatorService
from kfk.coordinator.transaction.metadata import TRANSACTION_VERSION_EPOCH_BUMP
from kfk.coordinator.transaction.service import TransactionCoordinatorService
from kfk.errors import ErrorCode, KafkaError
from kfk.metadata.cache import MetadataCache
from kfk.protocol.messages import ApiKey
from kfk.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from kfk.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from kfk.protocol.messages.describe_producers import DescribeProducersRequest, DescribeProducersResponse
from kfk.protocol.messages.describe_transactions import DescribeTransactionsRequest, DescribeTransactionsResponse
from kfk.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from kfk.protocol.messages.list_transactions import ListTransactionsRequest, ListTransactionsResponse
from kfk.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse
from kfk.protocol.messages.write_txn_markers import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from kfk.replication.replica_manager import ReplicaManager
from kfk.security.acl import AclOperation, ResourceType
from kfk.server.authorization import ALLOW_ALL, RequestAuthorizer
from kfk.server.dispatch import Dispatcher, RequestContext
from kfk.server.handlers.offsets import name_topics_by_id
from kfk.server.txn_markers import TxnMarkerWriter
from kfk.server.txn_verification import RETRIABLE_COORDINATOR_ERRORS, TxnPartitionVerifier
from kfk.common.structs import TopicPartition

#: The first versions that know PRODUCER_FENCED, per API (older ones get INVALID_PRODUCER_EPOCH).
FIRST_PRODUCER_FENCED_VERSION = {ApiKey.ADD_PARTITIONS_TO_TXN: 2, ApiKey.ADD_OFFSETS_TO_TXN: 2, ApiKey.END_TXN: 2,
                                 ApiKey.INIT_PRODUCER_ID: 4}
#: The first versions that know TRANSACTION_ABORTABLE (older ones get INVALID_TXN_STATE).
FIRST_TRANSACTION_ABORTABLE_VERSION = {ApiKey.ADD_PARTITIONS_TO_TXN: 5, ApiKey.ADD_OFFSETS_TO_TXN: 4,
                                       ApiKey.END_TXN: 4, ApiKey.TXN_OFFSET_COMMIT: 4, ApiKey.INIT_PRODUCER_ID: 5}
#: TxnOffsetCommit from v6 names topics by id (KIP-1319).
FIRST_TOPIC_ID_TXN_OFFSET_COMMIT_VERSION = 6
#: AddPartitionsToTxn from v4 is the partition leaders' batched form.
FIRST_BROKER_ADD_PARTITIONS_VERSION = 4
#: What a client before EndTxn v5 / AddPartitionsToTxn v4 speaks: transaction.version 0 (no epoch bump).
CLIENT_TRANSACTION_VERSION = 0
#: EndTxn from this version comes from a TV2 client: the epoch is bumped at every end (KIP-890 part 2).
FIRST_EPOCH_BUMP_END_TXN_VERSION = 5
FIRST_DURATION_FILTER_VERSION = 1
#: TxnOffsetCommit from this version comes from a TV2 client: the offsets partition is added implicitly.
FIRST_IMPLICIT_ADD_TXN_OFFSET_COMMIT_VERSION = 5

ApiPartitionResult = AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult
ApiTopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult


def error_for_version(api_key: ApiKey, version: int, error: ErrorCode) -> ErrorCode:
    """The error an older version of `api_key` gets for a code it predates, as Kafka maps them."""
    if error == ErrorCode.PRODUCER_FENCED and version < FIRST_PRODUCER_FENCED_VERSION.get(api_key, 0):
        return ErrorCode.INVALID_PRODUCER_EPOCH
    if error == ErrorCode.TRANSACTION_ABORTABLE and version < FIRST_TRANSACTION_ABORTABLE_VERSION.get(api_key, 0):
        return ErrorCode.INVALID_TXN_STATE
    return error


def _topic_partitions(topics: list[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic]) -> list[TopicPartition]:
    return [TopicPartition(topic.name, index) for topic in topics for index in topic.partitions]


def _topic_results(errors: dict[TopicPartition, ErrorCode]) -> list[ApiTopicResult]:
    by_topic: dict[str, list[ApiPartitionResult]] = {}
    for topic_partition, error in errors.items():
        by_topic.setdefault(topic_partition.topic, []).append(ApiPartitionResult(
            partition_index=topic_partition.partition, partition_error_code=error))
    return [ApiTopicResult(name=name, results_by_partition=results) for name, results in by_topic.items()]


class TransactionsHandler:
    def __init__(self, transaction_coordinator: TransactionCoordinatorService,
                 group_coordinator: GroupCoordinatorService, replica_manager: ReplicaManager,
                 metadata_cache: MetadataCache, marker_writer: TxnMarkerWriter,
                 txn_verifier: TxnPartitionVerifier, auth: RequestAuthorizer = ALLOW_ALL) -> None:
        self.transaction_coordinator = transaction_coordinator
        self.auth = auth
        self.txn_verifier = txn_verifier
        self.group_coordinator = group_coordinator
        self.replica_manager = replica_manager
        self.metadata_cache = metadata_cache
        self.marker_writer = marker_writer

    def _may_write(self, context: RequestContext, transactional_id: str) -> bool:
        return self.auth.authorize(context, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)

    def _may_cluster_action(self, context: RequestContext) -> bool:
        return self.auth.authorize(context, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER)

    def register(self, dispatcher: Dispatcher) -> None:
        dispatcher.register(ApiKey.ADD_PARTITIONS_TO_TXN, self.add_partitions_to_txn)
        dispatcher.register(ApiKey.ADD_OFFSETS_TO_TXN, self.add_offsets_to_txn)
        dispatcher.register(ApiKey.END_TXN, self.end_txn)
        dispatcher.register(ApiKey.WRITE_TXN_MARKERS, self.write_txn_markers)
        dispatcher.register(ApiKey.TXN_OFFSET_COMMIT, self.txn_offset_commit)
        dispatcher.register(ApiKey.DESCRIBE_TRANSACTIONS, self.describe_transactions)
        dispatcher.register(ApiKey.LIST_TRANSACTIONS, self.list_transactions)
        dispatcher.register(ApiKey.DESCRIBE_PRODUCERS, self.describe_producers)

    async def add_partitions_to_txn(self, context: RequestContext,
                                    request: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
        version = context.api_version
        if version < FIRST_BROKER_ADD_PARTITIONS_VERSION:
            partitions = _topic_partitions(request.v3_and_below_topics)
            errors = self._unauthorized_partitions(context, request.v3_and_below_transactional_id, partitions) \
                or self._unknown_partitions(partitions)
            if errors is None:
                error = await self.transaction_coordinator.add_partitions(
                    request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                    request.v3_and_below_producer_epoch, partitions, CLIENT_TRANSACTION_VERSION)
                errors = dict.fromkeys(partitions, error_for_version(ApiKey.ADD_PARTITIONS_TO_TXN, version, error))
            return AddPartitionsToTxnResponse(results_by_topic_v3_and_below=_topic_results(errors))
        if not self._may_cluster_action(context):  # v4+ comes from partition leaders only
            return AddPartitionsToTxnResponse(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        results = []
        for transaction in request.transactions:
            partitions = _topic_partitions(transaction.topics)
            unknown = self._unknown_partitions(partitions)
            if unknown is not None:
                errors = unknown
            elif transaction.verify_only:
                errors = self.transaction_coordinator.verify_partitions(
                    transaction.transactional_id, transaction.producer_id, transaction.producer_epoch, partitions)
            else:
                # Only a TV2 producer's partition leader adds partitions for it (KIP-890 part 2).
                error = await self.transaction_coordinator.add_partitions(
                    transaction.transactional_id, transaction.producer_id, transaction.producer_epoch, partitions,
                    TRANSACTION_VERSION_EPOCH_BUMP)
                errors = dict.fromkeys(partitions, error)
            errors = {tp: error_for_version(ApiKey.ADD_PARTITIONS_TO_TXN, version, error)
                      for tp, error in errors.items()}
            results.append(AddPartitionsToTxnResponse.AddPartitionsToTxnResult(
                transactional_id=transaction.transactional_id, topic_results=_topic_results(errors)))
        return AddPartitionsToTxnResponse(error_code=ErrorCode.NONE, results_by_transaction=results)

    def _unauthorized_partitions(self, context: RequestContext, transactional_id: str,
                                 partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode] | None:
        """None when the principal may WRITE the transactional id and every topic; otherwise the errors of a refused
        request (TRANSACTIONAL_ID_AUTHORIZATION_FAILED everywhere, or TOPIC_AUTHORIZATION_FAILED for the topics
        refused and OPERATION_NOT_ATTEMPTED for the rest), as Kafka answers."""
        if not self._may_write(context, transactional_id):
            return dict.fromkeys(partitions, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        writable = self.auth.authorized_names(context, AclOperation.WRITE, ResourceType.TOPIC,
                                              (tp.topic for tp in partitions))
        if all(tp.topic in writable for tp in partitions):
            return None
        return {tp: ErrorCode.OPERATION_NOT_ATTEMPTED if tp.topic in writable else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                for tp in partitions}

    def _unknown_partitions(self, partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode] | None:
        """None when the metadata knows every partition; otherwise UNKNOWN_TOPIC_OR_PARTITION for the unknown ones
        and OPERATION_NOT_ATTEMPTED for the rest, and the coordinator is not asked (as Kafka answers)."""
        image = self.metadata_cache.image
        unknown = {tp for tp in partitions if image.partition(tp.topic, tp.partition) is None}
        if not unknown:
            return None
        return {tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
                for tp in partitions}

    async def add_offsets_to_txn(self, context: RequestContext,
                                 request: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
        if not self._may_write(context, request.transactional_id):
            return AddOffsetsToTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not self.auth.authorize(context, AclOperation.READ, ResourceType.GROUP, request.group_id):
            return AddOffsetsToTxnResponse(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
        error = await self.transaction_coordinator.add_offsets(
            request.transactional_id, request.producer_id, request.producer_epoch, request.group_id)
        return AddOffsetsToTxnResponse(error_code=error_for_version(ApiKey.ADD_OFFSETS_TO_TXN, context.api_version,
                                                                    error))

    async def end_txn(self, context: RequestContext, request: EndTxnRequest) -> EndTxnResponse:
        if not self._may_write(context, request.transactional_id):
            return EndTxnResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        epoch_bump = context.api_version >= FIRST_EPOCH_BUMP_END_TXN_VERSION
        result = await self.transaction_coordinator.end_txn(
            request.transactional_id, request.producer_id, request.producer_epoch, request.committed,
            TRANSACTION_VERSION_EPOCH_BUMP if epoch_bump else CLIENT_TRANSACTION_VERSION)
        response = EndTxnResponse(error_code=error_for_version(ApiKey.END_TXN, context.api_version, result.error))
        if epoch_bump:
            response.producer_id, response.producer_epoch = result.producer_id, result.producer_epoch
        return response

    async def write_txn_markers(self, context: RequestContext,
                                request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
        if not self._may_cluster_action(context):
            Result = WriteTxnMarkersResponse
            return WriteTxnMarkersResponse(markers=[Result.WritableTxnMarkerResult(
                producer_id=marker.producer_id, topics=[Result.WritableTxnMarkerTopicResult(
                    name=topic.name, partitions=[Result.WritableTxnMarkerPartitionResult(
                        partition_index=index, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                        for index in topic.partition_indexes]) for topic in marker.topics])
                for marker in request.markers])
        return await self.marker_writer.write(request)

    async def txn_offset_commit(self, context: RequestContext,
                                request: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
        image = self.metadata_cache.image
        errors: dict[tuple[str, int], ErrorCode] = {}
        accepted: list[OffsetCommitPartition] = []
        auth = self.auth
        unknown_ids = (name_topics_by_id(image, request.topics)
                       if context.api_version >= FIRST_TOPIC_ID_TXN_OFFSET_COMMIT_VERSION else set())
        if not self._may_write(context, request.transactional_id):
            refused = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        elif not auth.authorize(context, AclOperation.READ, ResourceType.GROUP, request.group_id):
            refused = ErrorCode.GROUP_AUTHORIZATION_FAILED
        else:
            refused = ErrorCode.NONE
        readable = auth.authorized_names(context, AclOperation.READ, ResourceType.TOPIC,
                                         (topic.name for topic in request.topics if topic.topic_id not in unknown_ids))
        for topic in request.topics:
            if topic.topic_id in unknown_ids:
                continue
            for partition in topic.partitions:
                if refused != ErrorCode.NONE or topic.name not in readable:
                    errors[(topic.name, partition.partition_index)] = \
                        refused if refused != ErrorCode.NONE else ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    continue
                if image.partition(topic.name, partition.partition_index) is None:
                    errors[(topic.name, partition.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    continue
                accepted.append(OffsetCommitPartition(
                    topic.name, partition.partition_index, partition.committed_offset,
                    partition.committed_leader_epoch, partition.committed_metadata))
        if accepted and context.api_version >= FIRST_IMPLICIT_ADD_TXN_OFFSET_COMMIT_VERSION:
            error = await self._add_offsets_partition(request)
            if error != ErrorCode.NONE:
                errors.update({(p.topic, p.partition): error for p in accepted})
                accepted = []
        if accepted:
            committed = await self.group_coordinator.commit_transactional_offsets(
                request.group_id, request.producer_id, request.producer_epoch, request.member_id,
                request.group_instance_id, request.generation_id_or_member_epoch, accepted)
            errors.update({key: error_for_version(ApiKey.TXN_OFFSET_COMMIT, context.api_version, error)
                           for key, error in committed.items()})
        return TxnOffsetCommitResponse(topics=[
            TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(name=topic.name, topic_id=topic.topic_id, partitions=[
                TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
                    partition_index=p.partition_index,
                    error_code=ErrorCode.UNKNOWN_TOPIC_ID if topic.topic_id in unknown_ids
                    else errors[(topic.name, p.partition_index)])
                for p in topic.partitions])
            for topic in request.topics])

    async def _add_offsets_partition(self, request: TxnOffsetCommitRequest) -> ErrorCode:
        """A TV2 producer's implicit AddOffsetsToTxn: the group's __consumer_offsets partition joins its
        transaction, so that the commit marker reaches the offsets committed here."""
        offsets_partition = TopicPartition(GROUP_METADATA_TOPIC_NAME,
                                           self.group_coordinator.partition_for(request.group_id))
        answers = await self.txn_verifier.add_partitions(request.transactional_id, request.producer_id,
                                                         request.producer_epoch, [offsets_partition])
        error = answers.get(offsets_partition, ErrorCode.INVALID_TXN_STATE)
        # As Kafka's group coordinator answers a failed verification: "try again" as COORDINATOR_NOT_AVAILABLE.
        if error in RETRIABLE_COORDINATOR_ERRORS:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if error == ErrorCode.PRODUCER_FENCED:
            return ErrorCode.INVALID_PRODUCER_EPOCH
        return error

    async def describe_transactions(self, context: RequestContext,
                                    request: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
        describable = self.auth.authorized_names(context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                                 request.transactional_ids)
        states = self.transaction_coordinator.describe([tid for tid in request.transactional_ids
                                                        if tid in describable])
        by_id = {state.transactional_id: state for state in states}
        return DescribeTransactionsResponse(transaction_states=[
            by_id.get(tid) or DescribeTransactionsResponse.TransactionState(
                error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, transactional_id=tid)
            for tid in request.transactional_ids])

    async def list_transactions(self, context: RequestContext,
                                request: ListTransactionsRequest) -> ListTransactionsResponse:
        duration_filter_ms = request.duration_filter if context.api_version >= FIRST_DURATION_FILTER_VERSION else -1
        pattern = None
        if request.transactional_id_pattern:
            try:
                pattern = re.compile(request.transactional_id_pattern)
            except re.error:
                return ListTransactionsResponse(error_code=ErrorCode.INVALID_REGULAR_EXPRESSION)
        response = self.transaction_coordinator.list_transactions(list(request.state_filters),
                                                                  list(request.producer_id_filters), duration_filter_ms)
        if pattern is not None:
            response.transaction_states = [state for state in response.transaction_states
                                           if pattern.fullmatch(state.transactional_id)]
        if self.auth.enabled:  # only the transactional ids the principal may DESCRIBE
            describable = self.auth.authorized_names(context, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                                     (state.transactional_id for state in response.transaction_states))
            response.transaction_states = [state for state in response.transaction_states
                                           if state.transactional_id in describable]
        return response

    async def describe_producers(self, context: RequestContext,
                                 request: DescribeProducersRequest) -> DescribeProducersResponse:
        topics = []
        readable = self.auth.authorized_names(context, AclOperation.READ, ResourceType.TOPIC,
                                              (topic.name for topic in request.topics))
        for topic in request.topics:
            partitions = []
            for index in topic.partition_indexes:
                answer = DescribeProducersResponse.PartitionResponse(partition_index=index)
                if topic.name not in readable:
                    answer.error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    partitions.append(answer)
                    continue
                try:
                    producers = self.replica_manager.active_producers(TopicPartition(topic.name, index))
                except KafkaError as error:
                    answer.error_code = error.error_code
                    # As Kafka: a partition missing from a known topic is answered without a message.
                    known_topic = (error.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                                   and self.replica_manager.image.topic(topic.name) is not None)
                    answer.error_message = None if known_topic else str(error)
                else:
                    answer.active_producers = [DescribeProducersResponse.ProducerState(
                        producer_id=entry.producer_id, producer_epoch=entry.producer_epoch,
                        last_sequence=entry.last_sequence, last_timestamp=entry.last_timestamp,
                        coordinator_epoch=entry.coordinator_epoch,
                        current_txn_start_offset=-1 if entry.current_txn_first_offset is None
                        else entry.current_txn_first_offset)
                        for entry in producers]
                partitions.append(answer)
            topics.append(DescribeProducersResponse.TopicResponse(name=topic.name, partitions=partitions))
        return DescribeProducersResponse(topics=topics)
