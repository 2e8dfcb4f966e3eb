"""KIP-890 part 1: before a partition leader appends a transactional batch, the transaction coordinator confirms
that the producer's transaction is open with this partition in it (`transaction.partition.verification.enable`,
default true, as Kafka). Without it, a batch arriving after its transaction was aborted (a delayed retry, a zombie)
would open a transaction on the partition that no coordinator knows about and no marker will ever close, holding
the last stable offset back for good.

The question goes to the coordinator of the producer's transactional id (the leader of its __transaction_state
partition): this broker's own TransactionCoordinatorService directly, another broker with AddPartitionsToTxn v5
verify_only over an inter-broker channel. A positive answer is kept in the partition's producer state itself: once
the producer's first transactional batch is appended the partition has its transaction open at that epoch, so
later batches of the same transaction need no question; the COMMIT/ABORT marker closes it, and the next
transaction is verified again. The question is asked with a guard from the partition's log
(Log.start_transaction_verification) that the append presents: a marker that lands while the question is out
drops the guard, and the append is refused (INVALID_TXN_STATE) instead of opening a transaction that no
coordinator knows.

A produce that fails verification gets the coordinator's answer as Kafka 4.0 maps it by the Produce version (what
its clients understand): NOT_ENOUGH_REPLICAS (retriable, and no metadata refresh) when the coordinator cannot
answer now (moved, loading, unreachable), and for CONCURRENT_TRANSACTIONS (the transaction is being completed)
below v12; from v12 (a TV2 producer, which knows to retry it) CONCURRENT_TRANSACTIONS itself, once the broker's
own retries of the add (add.partitions.to.txn.retry.backoff.ms, 20 ms, for up to .max.ms, 100 ms, as Kafka's) have
not outlasted the completion. A fenced producer
gets INVALID_PRODUCER_EPOCH; a partition not in the transaction TRANSACTION_ABORTABLE from v11, INVALID_TXN_STATE
("Partition was not added to the transaction") below; other errors as the coordinator answered them.

Transaction version 2 (KIP-890 part 2): a producer on TV2 sends no AddPartitionsToTxn; its Produce v12 (and its
TxnOffsetCommit v5, for the group's __consumer_offsets partition) makes the leader *add* the partition instead of
verifying it: the same question with verify_only false (locally the service's add_partitions at client transaction
version 2), under the same guard. Those adds happen even with verification disabled, as Kafka's, since nothing
else would put the partition into the transaction.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

from kfk.coordinator.partitioning import partition_for
from kfk.common.internal_topics import TRANSACTION_STATE_TOPIC_NAME
from kfk.coordinator.transaction.metadata import TRANSACTION_VERSION_EPOCH_BUMP
from kfk.coordinator.transaction.service import TransactionCoordinatorService
from kfk.errors import ErrorCode, KafkaError
from kfk.metadata.cache import MetadataCache
from kfk.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from kfk.records import MAGIC_VALUE_V2, entry_at
from kfk.replication.delayed_produce import ProducePartitionResult
from kfk.replication.replica_manager import ReplicaManager
from kfk.server.inter_broker_channels import InterBrokerChannels
from kfk.storage.log import ONGOING_TRANSACTION, VerificationGuard
from kfk.common.structs import TopicPartition

log = logging.getLogger("kfk.server.txn_verification")

#: The AddPartitionsToTxn version partition leaders verify with (the highest: it knows TRANSACTION_ABORTABLE).
VERIFY_VERSION = 5

#: The coordinator cannot answer now: the producer retries the produce (or the TxnOffsetCommit).
RETRIABLE_COORDINATOR_ERRORS = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.CONCURRENT_TRANSACTIONS,
                        ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT})
#: From this Produce version a client knows TRANSACTION_ABORTABLE (KIP-890; Kafka's GENERIC_ERROR_SUPPORTED).
FIRST_TRANSACTION_ABORTABLE_PRODUCE_VERSION = 11
#: From this version a transactional produce comes from a TV2 producer: its partitions are added implicitly, and
#: it is told CONCURRENT_TRANSACTIONS as such (Kafka's ADD_PARTITION, whose supportsEpochBump keeps the error).
FIRST_IMPLICIT_ADD_PRODUCE_VERSION = 12


def produce_error(error: ErrorCode, version: int) -> ProducePartitionResult:
    """What a produce of ``version`` gets for a failed verification (Kafka's message where it sets one)."""
    if error in RETRIABLE_COORDINATOR_ERRORS and not (
            error == ErrorCode.CONCURRENT_TRANSACTIONS and version >= FIRST_IMPLICIT_ADD_PRODUCE_VERSION):
        return ProducePartitionResult(ErrorCode.NOT_ENOUGH_REPLICAS, error_message=(
            f"Unable to verify the partition has been added to the transaction. Underlying error: {error.name}"))
    if error == ErrorCode.PRODUCER_FENCED:
        return ProducePartitionResult(ErrorCode.INVALID_PRODUCER_EPOCH)
    if (error == ErrorCode.TRANSACTION_ABORTABLE and version < FIRST_TRANSACTION_ABORTABLE_PRODUCE_VERSION) \
            or error in (ErrorCode.INVALID_TXN_STATE, ErrorCode.CLUSTER_AUTHORIZATION_FAILED):
        return ProducePartitionResult(ErrorCode.INVALID_TXN_STATE,
                                      error_message="Partition was not added to the transaction")
    return ProducePartitionResult(error)


class TxnPartitionVerifier:
    """`verification_enabled` is transaction.partition.verification.enable: without it only TV2 adds are asked."""

    def __init__(self, node_id: int, metadata_cache: MetadataCache, replica_manager: ReplicaManager,
                 transaction_coordinator: TransactionCoordinatorService, channels: InterBrokerChannels,
                 verification_enabled: bool = True, add_retry_backoff_ms: int = 20,
                 add_retry_backoff_max_ms: int = 100) -> None:
        self.node_id = node_id
        self.verification_enabled = verification_enabled
        #: add.partitions.to.txn.retry.backoff.ms and .max.ms: a TV2 add answered CONCURRENT_TRANSACTIONS (the
        #: producer's previous transaction still being completed) is asked again this often, for up to this long,
        #: before the producer is told: its own retry backoff (100 ms in Kafka's Java producer) is far longer than
        #: the markers take.
        self.add_retry_backoff_ms = add_retry_backoff_ms
        self.add_retry_backoff_max_ms = add_retry_backoff_max_ms
        self.metadata_cache = metadata_cache
        self.replica_manager = replica_manager
        self.transaction_coordinator = transaction_coordinator
        self.channels = channels

    async def verify(self, transactional_id: str, entries: dict[TopicPartition, bytes | memoryview], version: int
                     ) -> tuple[dict[TopicPartition, ProducePartitionResult], dict[TopicPartition, VerificationGuard]]:
        """The produce answer of each partition whose transactional batch failed verification (the others, and
        partitions without a transactional batch, are absent), and the guard each transactional batch's append
        must present. From Produce v12 (a TV2 producer) a partition not yet in the transaction is added to it
        instead of failing."""
        add = version >= FIRST_IMPLICIT_ADD_PRODUCE_VERSION
        if not (add or self.verification_enabled):
            return {}, {}
        to_verify: dict[tuple[int, int], list[TopicPartition]] = defaultdict(list)
        guards: dict[TopicPartition, VerificationGuard] = {}
        for topic_partition, records in entries.items():
            try:
                batch = entry_at(records)
            except KafkaError:
                continue  # the append reports it
            if batch is None or batch.magic != MAGIC_VALUE_V2 or not batch.is_transactional or batch.is_control:
                continue
            producer_id, producer_epoch = batch.producer_id, batch.producer_epoch
            guard = self.replica_manager.start_transaction_verification(topic_partition, producer_id, producer_epoch)
            if guard is None:
                continue  # not this broker's to lead: the append answers
            guards[topic_partition] = guard
            if guard is not ONGOING_TRANSACTION:
                to_verify[(producer_id, producer_epoch)].append(topic_partition)
        failed: dict[TopicPartition, ProducePartitionResult] = {}
        for (producer_id, producer_epoch), partitions in to_verify.items():
            answers = await self._ask_coordinator(transactional_id, producer_id, producer_epoch, partitions, add)
            if add:
                answers = await self._retry_concurrent(transactional_id, producer_id, producer_epoch, answers,
                                                       guards)
            for topic_partition in partitions:
                error = answers.get(topic_partition, ErrorCode.INVALID_TXN_STATE)
                if error != ErrorCode.NONE:
                    log.debug("Transactional produce of %s (producer %d epoch %d) to %s failed verification: %s",
                              transactional_id, producer_id, producer_epoch, topic_partition, error.name)
                    failed[topic_partition] = produce_error(error, version)
        return failed, guards

    async def _retry_concurrent(self, transactional_id: str, producer_id: int, producer_epoch: int,
                                answers: dict[TopicPartition, ErrorCode],
                                guards: dict[TopicPartition, VerificationGuard]) -> dict[TopicPartition, ErrorCode]:
        """Ask again for the partitions answered CONCURRENT_TRANSACTIONS, every add_retry_backoff_ms until
        add_retry_backoff_max_ms have passed (Kafka's server-side retry of the add, KIP-890). Each retry starts the
        partition's verification afresh, as Kafka's retry of the whole append does: the markers that completed the
        previous transaction meanwhile ended the verification its first guard belonged to."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.add_retry_backoff_max_ms / 1000
        while True:
            pending = [tp for tp, error in answers.items() if error == ErrorCode.CONCURRENT_TRANSACTIONS]
            if not pending or loop.time() + self.add_retry_backoff_ms / 1000 > deadline:
                return answers
            await asyncio.sleep(self.add_retry_backoff_ms / 1000)
            ask = []
            for topic_partition in pending:
                guard = self.replica_manager.start_transaction_verification(topic_partition, producer_id,
                                                                            producer_epoch)
                if guard is None:  # no longer this broker's to lead: the append answers
                    guards.pop(topic_partition, None)
                    answers[topic_partition] = ErrorCode.NONE
                    continue
                guards[topic_partition] = guard
                if guard is ONGOING_TRANSACTION:
                    answers[topic_partition] = ErrorCode.NONE
                else:
                    ask.append(topic_partition)
            if ask:
                answers = {**answers, **await self._ask_coordinator(transactional_id, producer_id, producer_epoch,
                                                                     ask, add=True)}

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: list[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """Have the coordinator add `partitions` to a TV2 producer's transaction (the coordinator's own errors,
        e.g. for TxnOffsetCommit v5's __consumer_offsets partition)."""
        return await self._ask_coordinator(transactional_id, producer_id, producer_epoch, partitions, add=True)

    async def _ask_coordinator(self, transactional_id: str, producer_id: int, producer_epoch: int,
                               partitions: list[TopicPartition], add: bool) -> dict[TopicPartition, ErrorCode]:
        coordinator = self._coordinator_of(transactional_id)
        if coordinator is None:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if coordinator == self.node_id:
            if add:
                return dict.fromkeys(partitions, await self.transaction_coordinator.add_partitions(
                    transactional_id, producer_id, producer_epoch, partitions, TRANSACTION_VERSION_EPOCH_BUMP))
            return self.transaction_coordinator.verify_partitions(transactional_id, producer_id, producer_epoch,
                                                                  partitions)
        topics: dict[str, list[int]] = defaultdict(list)
        for topic_partition in partitions:
            topics[topic_partition.topic].append(topic_partition.partition)
        request = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
            transactional_id=transactional_id, producer_id=producer_id, producer_epoch=producer_epoch,
            verify_only=not add,
            topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=name, partitions=indexes)
                    for name, indexes in topics.items()])])
        try:
            response: AddPartitionsToTxnResponse = await self.channels.request(coordinator, request, VERIFY_VERSION)
        except KafkaError as error:
            log.info("Verifying the transaction of %s with broker %d failed: %s", transactional_id, coordinator,
                     error)
            return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        if response.error_code != ErrorCode.NONE:
            return dict.fromkeys(partitions, ErrorCode(response.error_code))
        return {TopicPartition(topic.name, result.partition_index): ErrorCode(result.partition_error_code)
                for transaction in response.results_by_transaction for topic in transaction.topic_results
                for result in topic.results_by_partition}

    def _coordinator_of(self, transactional_id: str) -> int | None:
        """The broker leading the transactional id's __transaction_state partition (None: none now)."""
        topic = self.metadata_cache.image.topic(TRANSACTION_STATE_TOPIC_NAME)
        if topic is None or not topic.partitions:
            return None
        registration = topic.partitions.get(partition_for(transactional_id, len(topic.partitions)))
        if registration is None or registration.leader < 0:
            return None
        return registration.leader
