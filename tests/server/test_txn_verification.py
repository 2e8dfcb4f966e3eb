"""What a transactional Produce gets when the transaction coordinator cannot verify (or add) its partition, by the
Produce version, as Kafka 4.0's ReplicaManager and AddPartitionsToTxnManager answer: real Produce frames through
the produce handler and the TxnPartitionVerifier, to a real TransactionCoordinatorService over a replica manager
on real logs. The transaction is held prepared (its markers unanswered) so that the coordinator deterministically
answers CONCURRENT_TRANSACTIONS: a client before v12 cannot be trusted to retry that, so it is told the retriable
NOT_ENOUGH_REPLICAS; a TV2 producer (v12) is told CONCURRENT_TRANSACTIONS itself."""

from __future__ import annotations

import asyncio

import pytest

from kfk.common.internal_topics import TRANSACTION_STATE_TOPIC_NAME
from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode
from kfk.protocol.headers import decode_request_header, decode_response
from kfk.protocol.messages.produce import ProduceRequest, ProduceResponse
from kfk.records import MemoryRecordsBuilder
from kfk.server.dispatch import Dispatcher
from kfk.server.handlers.produce import ProduceHandler
from kfk.server.txn_verification import TxnPartitionVerifier
from tests.coordinator.transaction.test_service import Node, now_ms
from tests.replication.conftest import NODE_ID, Broker, ManualClock, topic_records
from tests.replication.test_handlers import request_frame

E = ErrorCode
PRODUCER_ID = 5000


def case_id(value: object) -> str:
    return value.name if isinstance(value, ErrorCode) else f"v{value}"


async def transactional_produce(dispatcher: Dispatcher, version: int, partition: int, producer_epoch: int,
                                base_sequence: int) -> ProduceResponse.PartitionProduceResponse:
    builder = MemoryRecordsBuilder(producer_id=PRODUCER_ID, producer_epoch=producer_epoch,
                                   base_sequence=base_sequence, is_transactional=True)
    builder.append(now_ms(), None, b"in a transaction")
    frame = request_frame(ProduceRequest(transactional_id="tx", acks=-1, timeout_ms=5_000, topic_data=[
        ProduceRequest.TopicProduceData(name="data", partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=builder.close())])]), version)
    header, _ = decode_request_header(frame)
    chunks = await dispatcher.dispatch(frame, "127.0.0.1", 1, "PLAINTEXT")
    _, response = decode_response(b"".join(map(bytes, chunks))[4:], header.request_api_key, version)
    return response.responses[0].partition_responses[0]


async def produce_path(broker: Broker, markers_released: asyncio.Event | None = None) -> tuple[Node, Dispatcher]:
    """The coordinator of "tx" (its producer id initialized, partition 0 of "data" in its transaction) and a
    dispatcher with the produce handler verifying through it."""
    broker.commit(topic_records(TRANSACTION_STATE_TOPIC_NAME, 2) + topic_records("data", 2))
    await broker.replica_manager.metadata_applied()
    node = Node(broker, first_producer_id=PRODUCER_ID, markers_released=markers_released)
    await node.loaded("tx")
    service = node.service
    dispatcher = Dispatcher()
    ProduceHandler(broker.replica_manager, TxnPartitionVerifier(
        NODE_ID, broker.metadata_cache, broker.replica_manager, service, channels=None)).register(dispatcher)
    assert (await service.init_producer_id("tx", 60_000, -1, -1)).producer_id == PRODUCER_ID
    assert await service.add_partitions("tx", PRODUCER_ID, 0, [TopicPartition("data", 0)], 0) == E.NONE
    return node, dispatcher


@pytest.mark.parametrize(("version", "expected"), [(3, E.NOT_ENOUGH_REPLICAS), (10, E.NOT_ENOUGH_REPLICAS),
                                                   (11, E.NOT_ENOUGH_REPLICAS), (12, E.CONCURRENT_TRANSACTIONS)],
                         ids=case_id)
def test_a_produce_while_its_transaction_completes(tmp_path, version: int, expected: ErrorCode) -> None:
    broker = Broker(str(tmp_path / "logs"), ManualClock(now_ms()))

    async def scenario() -> None:
        markers_released = asyncio.Event()
        node, dispatcher = await produce_path(broker, markers_released)
        service = node.service
        written = await transactional_produce(dispatcher, version, partition=0, producer_epoch=0, base_sequence=0)
        assert written.error_code == E.NONE
        # The commit (without an epoch bump) is prepared; its marker waits for the data partitions' leader.
        assert (await service.end_txn("tx", PRODUCER_ID, 0, True, 0)).error == E.NONE
        assert service.describe(["tx"])[0].transaction_state == "PrepareCommit"

        refused = await transactional_produce(dispatcher, version, partition=1, producer_epoch=0, base_sequence=0)
        assert refused.error_code == expected
        if expected == E.NOT_ENOUGH_REPLICAS and version >= 8:  # error_message is v8+
            assert refused.error_message == ("Unable to verify the partition has been added to the transaction. "
                                             "Underlying error: CONCURRENT_TRANSACTIONS")
        assert broker.replica_manager.get_partition(TopicPartition("data", 1)).log.log_end_offset == 0

        markers_released.set()
        await node.wait_for(lambda: service.describe(["tx"])[0].transaction_state == "CompleteCommit")
        node.service.stop()

    try:
        asyncio.run(scenario())
    finally:
        broker.close()


def test_a_tv2_produce_waits_out_a_transaction_completing_within_the_retry_backoff(tmp_path) -> None:
    """Kafka's add.partitions.to.txn.retry.backoff.ms/.max.ms (KIP-890): a Produce v12 whose add meets the previous
    transaction's markers still being written is asked again every 20 ms for up to 100 ms on the broker, so the
    producer is not sent back to its own, longer, retry backoff (the case above: markers held past 100 ms)."""
    broker = Broker(str(tmp_path / "logs"), ManualClock(now_ms()))

    async def scenario() -> None:
        markers_released = asyncio.Event()
        node, dispatcher = await produce_path(broker, markers_released)
        service = node.service
        assert (await transactional_produce(dispatcher, 12, partition=0, producer_epoch=0,
                                            base_sequence=0)).error_code == E.NONE
        assert (await service.end_txn("tx", PRODUCER_ID, 0, True, 0)).error == E.NONE
        produce = asyncio.ensure_future(transactional_produce(dispatcher, 12, partition=1, producer_epoch=0,
                                                              base_sequence=0))
        await asyncio.sleep(0.03)
        assert not produce.done()  # waiting for the coordinator, not refused
        markers_released.set()
        assert (await produce).error_code == E.NONE
        assert broker.replica_manager.get_partition(TopicPartition("data", 1)).log.log_end_offset == 1
        node.service.stop()

    try:
        asyncio.run(scenario())
    finally:
        broker.close()


@pytest.mark.parametrize(("version", "expected"), [(10, E.INVALID_TXN_STATE), (11, E.TRANSACTION_ABORTABLE)],
                         ids=case_id)
def test_a_produce_to_a_partition_outside_the_transaction(tmp_path, version: int, expected: ErrorCode) -> None:
    broker = Broker(str(tmp_path / "logs"), ManualClock(now_ms()))

    async def scenario() -> None:
        node, dispatcher = await produce_path(broker)
        # Partition 1 was never added: a client that knows TRANSACTION_ABORTABLE (v11) is told so and can abort
        # and go on; an older one gets INVALID_TXN_STATE.
        refused = await transactional_produce(dispatcher, version, partition=1, producer_epoch=0, base_sequence=0)
        assert refused.error_code == expected
        assert refused.error_message == (
            "Partition was not added to the transaction" if expected == E.INVALID_TXN_STATE else None)
        node.service.stop()

    try:
        asyncio.run(scenario())
    finally:
        broker.close()
