"""The TransactionManager sans I/O: its state machine, the requests it builds and what it makes of the answers.

No broker: each request the manager hands out is encoded and decoded by the real protocol codec at the version the
sender would send it at (as a broker reads it), and each answer is built and round-tripped the same way before the
manager reads it. The network side (finding coordinators, sockets) is covered by test_transactions.py.
"""

from __future__ import annotations

import time

import pytest

from kfk.client import Producer
from kfk.client.offsets import COORDINATOR_TYPE_GROUP, COORDINATOR_TYPE_TRANSACTION
from kfk.client.producer.transaction_manager import (
    CONCURRENT_TRANSACTIONS_BACKOFF_MS,
    TransactionAbortedError,
    TransactionManager,
    TransactionState,
    TxnRequest,
)
from kfk.client.structs import ConsumerGroupMetadata
from kfk.common.structs import OffsetAndMetadata, TopicPartition
from kfk.errors import (
    ErrorCode,
    InvalidTxnStateError,
    KafkaError,
    KafkaTimeoutError,
    NetworkError,
    ProducerFencedError,
    RecordTooLargeError,
    TopicAuthorizationError,
)
from kfk.protocol.apis import SUPPORTED_VERSIONS
from kfk.protocol.headers import RequestHeader, decode_request, decode_response, encode_request, encode_response
from kfk.protocol.message import Message
from kfk.protocol.messages.add_offsets_to_txn import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse
from kfk.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse
from kfk.protocol.messages.end_txn import EndTxnRequest, EndTxnResponse
from kfk.protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from kfk.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest, TxnOffsetCommitResponse

TXN_ID = "payments-1"
TP0 = TopicPartition("out", 0)
TP1 = TopicPartition("out", 1)
FAR_FUTURE = float("inf")


def version_of(request: TxnRequest) -> int:
    """The version the sender sends at against a broker of kfk's own table."""
    if request.version is not None:
        return request.version
    highest = SUPPORTED_VERSIONS[type(request.message).API_KEY].highest
    return min(highest, request.highest) if request.highest is not None else highest


def on_the_wire(request: TxnRequest) -> Message:
    """The request as the broker decodes it."""
    message = request.message
    frame = encode_request(RequestHeader(request_api_key=message.API_KEY, request_api_version=version_of(request),
                                         correlation_id=1, client_id="test"), message)
    return decode_request(frame[4:])[1]


def answer(manager: TransactionManager, request: TxnRequest, response: Message) -> None:
    version = version_of(request)
    frame = b"".join(encode_response(1, response.API_KEY, version, response))
    manager.handle_response(request, decode_response(frame[4:], response.API_KEY, version)[1])


def take(manager: TransactionManager, incomplete: bool = False, now_ms: float = FAR_FUTURE) -> TxnRequest:
    request = manager.next_request(incomplete, now_ms=now_ms)
    assert request is not None
    return request


def ready_manager(producer_id: int = 4000, epoch: int = 0, transaction_version: int = 1) -> TransactionManager:
    manager = TransactionManager(5, transactional_id=TXN_ID, transaction_timeout_ms=30_000, retry_backoff_ms=100)
    manager.update_transaction_version(transaction_version)
    result = manager.initialize_transactions()
    answer(manager, take(manager), InitProducerIdResponse(producer_id=producer_id, producer_epoch=epoch))
    assert result.done and result.error is None
    return manager


def add_partitions_ok(manager: TransactionManager, *partitions: TopicPartition) -> None:
    request = take(manager)
    assert isinstance(request.message, AddPartitionsToTxnRequest)
    answer(manager, request, AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[
        AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(name=tp.topic, results_by_partition=[
            AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(partition_index=tp.partition)])
        for tp in partitions]))


# --- init_transactions ------------------------------------------------------------------------------------------------

def test_init_transactions_sends_init_producer_id_with_the_transactional_id() -> None:
    manager = TransactionManager(5, transactional_id=TXN_ID, transaction_timeout_ms=30_000)
    assert manager.state is TransactionState.UNINITIALIZED
    result = manager.initialize_transactions()
    assert manager.state is TransactionState.INITIALIZING
    request = take(manager)
    assert (request.coordinator_type, request.coordinator_key) == (COORDINATOR_TYPE_TRANSACTION, TXN_ID)
    sent = on_the_wire(request)
    assert isinstance(sent, InitProducerIdRequest)
    assert (sent.transactional_id, sent.transaction_timeout_ms, sent.producer_id, sent.producer_epoch) == \
        (TXN_ID, 30_000, -1, -1)
    answer(manager, request, InitProducerIdResponse(producer_id=4000, producer_epoch=3))
    assert result.done and result.error is None
    assert manager.state is TransactionState.READY
    assert (manager.producer_id, manager.producer_epoch) == (4000, 3)


def test_a_timed_out_init_can_be_called_again_and_waits_for_the_same_request() -> None:
    manager = TransactionManager(5, transactional_id=TXN_ID)
    result = manager.initialize_transactions()
    with pytest.raises(KafkaTimeoutError):
        result.wait(0.01)
    assert manager.initialize_transactions() is result
    take(manager)
    assert manager.next_request(False, now_ms=FAR_FUTURE) is None  # no second InitProducerId


def test_init_retries_after_coordinator_errors_and_forgets_the_coordinator() -> None:
    manager = TransactionManager(5, transactional_id=TXN_ID, retry_backoff_ms=100)
    result = manager.initialize_transactions()
    manager.set_coordinator(COORDINATOR_TYPE_TRANSACTION, TXN_ID, 7)
    request = take(manager)
    answer(manager, request, InitProducerIdResponse(error_code=ErrorCode.NOT_COORDINATOR))
    assert manager.coordinator(COORDINATOR_TYPE_TRANSACTION, TXN_ID) is None
    assert not result.done and manager.state is TransactionState.INITIALIZING
    assert manager.next_request(False, now_ms=request.retry_at_ms - 1) is None  # backing off
    retry = take(manager)
    assert isinstance(retry.message, InitProducerIdRequest)
    answer(manager, retry, InitProducerIdResponse(producer_id=1, producer_epoch=0))
    assert result.done and manager.state is TransactionState.READY


def test_a_lost_connection_retries_the_request() -> None:
    manager = TransactionManager(5, transactional_id=TXN_ID)
    result = manager.initialize_transactions()
    request = take(manager)
    manager.request_failed(request, NetworkError("connection reset"))
    assert not result.done
    with pytest.raises(KafkaTimeoutError, match="connection reset"):
        result.wait(0)
    assert take(manager) is request


def test_transactional_id_authorization_failure_is_fatal() -> None:
    manager = TransactionManager(5, transactional_id=TXN_ID)
    result = manager.initialize_transactions()
    answer(manager, take(manager),
           InitProducerIdResponse(error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED))
    assert manager.state is TransactionState.FATAL_ERROR
    with pytest.raises(KafkaError) as raised:
        result.wait(0)
    assert raised.value.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert raised.value.fatal and not raised.value.txn_requires_abort
    with pytest.raises(KafkaError):
        manager.begin_transaction()


# --- the state machine ------------------------------------------------------------------------------------------------

def test_calls_out_of_order_raise_invalid_txn_state() -> None:
    manager = TransactionManager(5, transactional_id=TXN_ID)
    with pytest.raises(InvalidTxnStateError):
        manager.begin_transaction()  # before init_transactions
    manager = ready_manager()
    with pytest.raises(InvalidTxnStateError):
        manager.maybe_add_partition(TP0)  # send() outside a transaction
    with pytest.raises(InvalidTxnStateError):
        manager.begin_commit()
    with pytest.raises(InvalidTxnStateError):
        manager.begin_abort()
    manager.begin_transaction()
    with pytest.raises(InvalidTxnStateError):
        manager.begin_transaction()
    with pytest.raises(InvalidTxnStateError):
        manager.initialize_transactions()


def test_an_idempotent_producer_has_no_transactions() -> None:
    manager = TransactionManager(5)
    assert not manager.is_transactional
    manager.maybe_add_partition(TP0)  # send() needs nothing from it
    assert manager.can_send(TP0, False)
    with pytest.raises(InvalidTxnStateError):
        manager.initialize_transactions()


# --- AddPartitionsToTxn and EndTxn (transaction version 1) ---------------------------------------------------------

def test_a_partition_is_added_before_its_first_batch_and_once_per_transaction() -> None:
    manager = ready_manager()
    manager.begin_transaction()
    manager.maybe_add_partition(TP0)
    manager.maybe_add_partition(TP1)
    manager.maybe_add_partition(TP0)
    assert not manager.can_send(TP0, False) and not manager.can_send(TP1, False)
    request = take(manager, incomplete=True)
    assert request.highest == 3
    sent = on_the_wire(request)
    assert isinstance(sent, AddPartitionsToTxnRequest)
    assert (sent.v3_and_below_transactional_id, sent.v3_and_below_producer_id, sent.v3_and_below_producer_epoch) == \
        (TXN_ID, 4000, 0)
    assert [(topic.name, topic.partitions) for topic in sent.v3_and_below_topics] == [("out", [0, 1])]
    answer(manager, request, AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[
        AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(name="out", results_by_partition=[
            AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(partition_index=0),
            AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(partition_index=1)])]))
    assert manager.can_send(TP0, False) and manager.can_send(TP1, False)
    manager.maybe_add_partition(TP0)
    assert manager.next_request(True, now_ms=FAR_FUTURE) is None  # already in the transaction


def test_commit_waits_for_every_batch_then_sends_end_txn() -> None:
    manager = ready_manager()
    manager.begin_transaction()
    manager.maybe_add_partition(TP0)
    add_partitions_ok(manager, TP0)
    result = manager.begin_commit()
    assert manager.state is TransactionState.COMMITTING_TRANSACTION
    assert manager.next_request(True, now_ms=FAR_FUTURE) is None  # a batch is still unanswered
    request = take(manager, incomplete=False)
    sent = on_the_wire(request)
    assert isinstance(sent, EndTxnRequest) and version_of(request) == 4
    assert (sent.transactional_id, sent.producer_id, sent.producer_epoch, sent.committed) == (TXN_ID, 4000, 0, True)
    answer(manager, request, EndTxnResponse())
    assert result.done and result.error is None
    assert manager.state is TransactionState.READY and not manager.partitions_in_transaction
    assert (manager.producer_id, manager.producer_epoch) == (4000, 0)  # TV1: same epoch for the next one
    manager.begin_transaction()
    manager.maybe_add_partition(TP0)
    assert not manager.can_send(TP0, False)  # every transaction adds its partitions again


def test_a_transaction_that_reached_no_coordinator_ends_without_a_request() -> None:
    manager = ready_manager()
    manager.begin_transaction()
    result = manager.begin_commit()
    assert manager.next_request(False, now_ms=FAR_FUTURE) is None
    assert result.done and manager.state is TransactionState.READY


def test_concurrent_transactions_is_retried_after_a_short_backoff() -> None:
    manager = ready_manager()
    manager.begin_transaction()
    manager.maybe_add_partition(TP0)
    request = take(manager)
    answer(manager, request, AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[
        AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(name="out", results_by_partition=[
            AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(
                partition_index=0, partition_error_code=ErrorCode.CONCURRENT_TRANSACTIONS)])]))
    assert manager.state is TransactionState.IN_TRANSACTION
    delay = manager.retry_delay_ms()
    assert delay is not None and 0 < delay <= CONCURRENT_TRANSACTIONS_BACKOFF_MS
    assert take(manager) is request
    assert not manager.can_send(TP0, False)


def test_producer_fenced_is_fatal_and_marks_the_error() -> None:
    manager = ready_manager()
    manager.begin_transaction()
    manager.maybe_add_partition(TP0)
    add_partitions_ok(manager, TP0)
    result = manager.begin_commit()
    answer(manager, take(manager), EndTxnResponse(error_code=ErrorCode.PRODUCER_FENCED))
    assert manager.state is TransactionState.FATAL_ERROR
    with pytest.raises(ProducerFencedError) as raised:
        result.wait(0)
    assert raised.value.fatal
    with pytest.raises(ProducerFencedError):
        manager.fail_if_not_ready_for_send()
    with pytest.raises(ProducerFencedError):
        manager.begin_abort()


def test_invalid_producer_epoch_on_a_current_batch_is_fatal_but_not_on_an_older_one() -> None:
    manager = ready_manager(epoch=5)
    manager.begin_transaction()
    manager.handle_failed_batch(ProducerFencedError("stale"), batch_epoch=4, sequenced=True)
    assert manager.state is TransactionState.IN_TRANSACTION
    manager.handle_failed_batch(ProducerFencedError("fenced"), batch_epoch=5, sequenced=True)
    assert manager.state is TransactionState.FATAL_ERROR and manager.last_error.fatal


# --- abortable errors and abort --------------------------------------------------------------------------------------

def test_topic_authorization_failure_makes_the_transaction_abortable() -> None:
    manager = ready_manager()
    manager.begin_transaction()
    manager.maybe_add_partition(TP0)
    answer(manager, take(manager), AddPartitionsToTxnResponse(results_by_topic_v3_and_below=[
        AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult(name="out", results_by_partition=[
            AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult(
                partition_index=0, partition_error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)])]))
    assert manager.state is TransactionState.ABORTABLE_ERROR
    error = manager.last_error
    assert isinstance(error, TopicAuthorizationError) and error.txn_requires_abort and not error.fatal
    with pytest.raises(TopicAuthorizationError):
        manager.maybe_add_partition(TP1)
    with pytest.raises(TopicAuthorizationError):
        manager.begin_commit()
    result = manager.begin_abort()
    assert manager.next_request(False, now_ms=FAR_FUTURE) is None  # nothing was added: nothing to end
    assert result.done and result.error is None
    assert manager.state is TransactionState.READY and manager.last_error is None
    manager.begin_transaction()


def test_a_failed_batch_fails_the_pending_commit_and_abort_ends_the_transaction() -> None:
    manager = ready_manager()
    manager.begin_transaction()
    manager.maybe_add_partition(TP0)
    add_partitions_ok(manager, TP0)
    commit = manager.begin_commit()
    manager.handle_failed_batch(RecordTooLargeError("too large"), batch_epoch=0, sequenced=False)
    assert manager.state is TransactionState.ABORTABLE_ERROR
    assert manager.next_request(False, now_ms=FAR_FUTURE) is None
    with pytest.raises(RecordTooLargeError) as raised:
        commit.wait(0)
    assert raised.value.txn_requires_abort
    abort = manager.begin_abort()
    request = take(manager)
    sent = on_the_wire(request)
    assert isinstance(sent, EndTxnRequest) and sent.committed is False
    answer(manager, request, EndTxnResponse())
    assert abort.done and abort.error is None and manager.state is TransactionState.READY


def test_an_abort_after_broken_sequences_bumps_the_epoch_with_init_producer_id() -> None:
    manager = ready_manager(producer_id=4000, epoch=2)
    manager.begin_transaction()
    manager.maybe_add_partition(TP0)
    add_partitions_ok(manager, TP0)
    assert manager.next_sequence(TP0, 10) == 0
    manager.handle_failed_batch(KafkaError("lost"), batch_epoch=2, sequenced=True)
    abort = manager.begin_abort()
    answer(manager, take(manager), EndTxnResponse())
    assert manager.state is TransactionState.INITIALIZING and not abort.done
    request = take(manager)
    sent = on_the_wire(request)
    assert isinstance(sent, InitProducerIdRequest)
    assert (sent.transactional_id, sent.producer_id, sent.producer_epoch) == (TXN_ID, 4000, 2)
    answer(manager, request, InitProducerIdResponse(producer_id=4000, producer_epoch=3))
    assert abort.done and abort.error is None and manager.state is TransactionState.READY
    assert manager.producer_epoch == 3 and manager.next_sequence(TP0, 1) == 0


def test_batches_aborted_unsent_do_not_fail_the_next_transaction() -> None:
    manager = ready_manager()
    manager.begin_transaction()
    manager.maybe_add_partition(TP0)
    manager.begin_abort()
    manager.handle_failed_batch(TransactionAbortedError("aborted"), batch_epoch=-1, sequenced=False)
    assert manager.next_request(False, now_ms=FAR_FUTURE) is None  # TP0 was never added: no AddPartitionsToTxn
    assert manager.state is TransactionState.READY


# --- send_offsets_to_transaction ------------------------------------------------------------------------------------

GROUP = ConsumerGroupMetadata("billing", 7, "member-1", "instance-1")


def test_offsets_go_to_the_transaction_coordinator_then_the_group_coordinator() -> None:
    manager = ready_manager()
    manager.begin_transaction()
    result = manager.send_offsets_to_transaction({TP0: OffsetAndMetadata(42, "m", 3)}, GROUP)
    request = take(manager)
    assert request.coordinator_type == COORDINATOR_TYPE_TRANSACTION
    sent = on_the_wire(request)
    assert isinstance(sent, AddOffsetsToTxnRequest)
    assert (sent.transactional_id, sent.producer_id, sent.producer_epoch, sent.group_id) == \
        (TXN_ID, 4000, 0, "billing")
    answer(manager, request, AddOffsetsToTxnResponse())
    assert not result.done
    request = take(manager)
    assert (request.coordinator_type, request.coordinator_key) == (COORDINATOR_TYPE_GROUP, "billing")
    sent = on_the_wire(request)
    assert isinstance(sent, TxnOffsetCommitRequest)
    assert (sent.transactional_id, sent.group_id, sent.producer_id, sent.producer_epoch, sent.generation_id_or_member_epoch,
            sent.member_id, sent.group_instance_id) == (TXN_ID, "billing", 4000, 0, 7, "member-1", "instance-1")
    assert [(topic.name, [(p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
                          for p in topic.partitions]) for topic in sent.topics] == [("out", [(0, 42, 3, "m")])]
    answer(manager, request, TxnOffsetCommitResponse(topics=[
        TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(name="out", partitions=[
            TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(partition_index=0)])]))
    assert result.done and result.error is None
    commit = manager.begin_commit()
    assert isinstance(take(manager).message, EndTxnRequest)  # the offsets started the transaction
    assert not commit.done


def test_a_rebalanced_member_cannot_commit_offsets_in_the_transaction() -> None:
    manager = ready_manager()
    manager.begin_transaction()
    result = manager.send_offsets_to_transaction({TP0: OffsetAndMetadata(1)}, GROUP)
    answer(manager, take(manager), AddOffsetsToTxnResponse())
    manager.set_coordinator(COORDINATOR_TYPE_GROUP, "billing", 3)
    request = take(manager)
    answer(manager, request, TxnOffsetCommitResponse(topics=[
        TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(name="out", partitions=[
            TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
                partition_index=0, error_code=ErrorCode.NOT_COORDINATOR)])]))
    assert manager.coordinator(COORDINATOR_TYPE_GROUP, "billing") is None and not result.done
    answer(manager, take(manager), TxnOffsetCommitResponse(topics=[
        TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic(name="out", partitions=[
            TxnOffsetCommitResponse.TxnOffsetCommitResponsePartition(
                partition_index=0, error_code=ErrorCode.ILLEGAL_GENERATION)])]))
    assert manager.state is TransactionState.ABORTABLE_ERROR
    with pytest.raises(KafkaError) as raised:
        result.wait(0)
    assert raised.value.error_code == ErrorCode.ILLEGAL_GENERATION and raised.value.txn_requires_abort


# --- transaction version 2 (KIP-890 part 2) ---------------------------------------------------------------------------

def test_transaction_version_2_skips_add_partitions_and_bumps_the_epoch_at_every_end() -> None:
    manager = ready_manager(producer_id=4000, epoch=0, transaction_version=2)
    manager.begin_transaction()
    manager.maybe_add_partition(TP0)
    assert manager.can_send(TP0, False)  # the transactional Produce adds the partition
    assert manager.next_request(True, now_ms=FAR_FUTURE) is None  # no AddPartitionsToTxn
    assert manager.next_sequence(TP0, 3) == 0
    manager.batch_sent(TP0)
    manager.batch_done(TP0)
    result = manager.begin_commit()
    request = take(manager)
    assert version_of(request) == 5
    sent = on_the_wire(request)
    assert isinstance(sent, EndTxnRequest) and (sent.producer_id, sent.producer_epoch) == (4000, 0)
    answer(manager, request, EndTxnResponse(producer_id=4000, producer_epoch=1))
    assert result.done and manager.state is TransactionState.READY
    assert manager.producer_epoch == 1 and manager.next_sequence(TP0, 1) == 0  # new epoch, sequences restart


def test_the_transaction_version_does_not_change_inside_a_transaction() -> None:
    manager = ready_manager(transaction_version=1)
    manager.begin_transaction()
    manager.update_transaction_version(2)
    assert manager.transaction_version == 1
    manager.maybe_add_partition(TP0)
    assert isinstance(take(manager).message, AddPartitionsToTxnRequest)


def test_an_answer_after_a_fatal_error_does_not_revive_the_producer() -> None:
    manager = TransactionManager(5, transactional_id=TXN_ID)
    result = manager.initialize_transactions()
    request = take(manager)
    manager.handle_failed_batch(ProducerFencedError("fenced elsewhere"), batch_epoch=-1, sequenced=False)
    assert manager.state is TransactionState.FATAL_ERROR and result.done
    answer(manager, request, InitProducerIdResponse(producer_id=1, producer_epoch=0))
    assert manager.state is TransactionState.FATAL_ERROR and manager.producer_id == -1


def test_the_producer_refuses_transactional_calls_out_of_order_without_waiting() -> None:
    producer = Producer({"bootstrap.servers": "127.0.0.1:1", "transactional.id": TXN_ID, "max.block.ms": 60_000})
    plain = Producer({"bootstrap.servers": "127.0.0.1:1"})
    try:
        started = time.monotonic()
        with pytest.raises(InvalidTxnStateError, match="inside a transaction"):
            producer.send("out", b"v")
        with pytest.raises(InvalidTxnStateError, match="init_transactions"):
            producer.begin_transaction()
        with pytest.raises(InvalidTxnStateError):
            producer.commit_transaction(1)
        with pytest.raises(InvalidTxnStateError):
            producer.abort_transaction(1)
        assert time.monotonic() - started < 5  # no metadata wait (max.block.ms is a minute)
        with pytest.raises(InvalidTxnStateError, match="transactional.id"):
            plain.init_transactions(1)
    finally:
        producer.close(0)
        plain.close(0)
