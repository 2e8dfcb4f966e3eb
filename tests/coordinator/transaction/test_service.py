"""TransactionCoordinatorService over a real replica manager (real logs, acks=-1 writes, a metadata cache): loading
on leadership, a committed transaction's markers landing in the data partition, reloading after a restart, and
unloading when leadership moves away."""

from __future__ import annotations

import asyncio
import time

from kfk.common.internal_topics import TRANSACTION_STATE_TOPIC_NAME
from kfk.common.structs import TopicPartition
from kfk.controller.producer_ids import ProducerIdManager, ProducerIdsBlock
from kfk.coordinator.transaction.config import TransactionCoordinatorConfig
from kfk.coordinator.transaction.service import TransactionCoordinatorService
from kfk.errors import ErrorCode
from kfk.protocol.messages.write_txn_markers import (
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kfk.records import MemoryRecordsBuilder
from kfk.records.control import (
    ControlRecordType,
    EndTransactionMarker,
    build_end_transaction_marker_batch,
)
from kfk.storage.producer_state import AppendOrigin
from tests.replication.conftest import (
    NODE_ID,
    Broker,
    ManualClock,
    partition_change,
    topic_records,
)

E = ErrorCode
DATA = TopicPartition("data", 0)


def now_ms() -> int:
    return int(time.time() * 1000)


class Node:
    """The service wired to the broker the way the composition root wires it. With `markers_released`, the data
    partitions' leader answers WriteTxnMarkers only once that is set (a transaction stays prepared until then)."""

    def __init__(self, broker: Broker, first_producer_id: int, markers_released: asyncio.Event | None = None) -> None:
        self.broker = broker
        replica_manager = broker.replica_manager
        config = TransactionCoordinatorConfig(transaction_state_log_num_partitions=2)

        async def append(partition: int, records: bytes) -> ErrorCode:
            topic_partition = TopicPartition(TRANSACTION_STATE_TOPIC_NAME, partition)
            results = await replica_manager.append_records(5_000, -1, {topic_partition: records},
                                                           AppendOrigin.COORDINATOR)
            return results[topic_partition].error

        def log_of(partition: int):
            hosted = replica_manager.get_partition(TopicPartition(TRANSACTION_STATE_TOPIC_NAME, partition))
            return hosted.log if hosted is not None and hosted.is_leader else None

        async def allocate_block() -> ProducerIdsBlock:
            return ProducerIdsBlock(NODE_ID, first_producer_id, 1000)

        async def send_markers(broker_id: int, request: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
            """What the WriteTxnMarkers handler of `broker_id` (this broker) does: append each marker."""
            assert broker_id == NODE_ID
            if markers_released is not None:
                await markers_released.wait()
            results = []
            for marker in request.markers:
                topics = []
                for topic in marker.topics:
                    entries = {TopicPartition(topic.name, index): build_end_transaction_marker_batch(
                        base_offset=0, timestamp=now_ms(), partition_leader_epoch=0, producer_id=marker.producer_id,
                        producer_epoch=marker.producer_epoch, marker=EndTransactionMarker(
                            ControlRecordType.COMMIT if marker.transaction_result else ControlRecordType.ABORT,
                            marker.coordinator_epoch)) for index in topic.partition_indexes}
                    answers = await replica_manager.append_records(5_000, -1, entries, AppendOrigin.COORDINATOR)
                    topics.append(WriteTxnMarkersResponse.WritableTxnMarkerTopicResult(name=topic.name, partitions=[
                        WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult(
                            partition_index=tp.partition, error_code=answer.error)
                        for tp, answer in answers.items()]))
                results.append(WriteTxnMarkersResponse.WritableTxnMarkerResult(producer_id=marker.producer_id,
                                                                               topics=topics))
            return WriteTxnMarkersResponse(markers=results)

        self.service = TransactionCoordinatorService(config, NODE_ID, append, log_of, now_ms,
                                                     ProducerIdManager(allocate_block).generate_producer_id,
                                                     send_markers)
        broker.metadata_cache.subscribe(self.service.on_metadata_update)

    async def wait_for(self, condition, timeout_s: float = 10) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            assert time.monotonic() < deadline, "timed out"
            await asyncio.sleep(0.01)

    async def loaded(self, transactional_id: str) -> None:
        await self.wait_for(lambda: self.service.coordinator.state.coordinator_error(transactional_id) == E.NONE)


async def produce_transactional(broker: Broker, producer_id: int, producer_epoch: int) -> None:
    builder = MemoryRecordsBuilder(producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=0,
                                   is_transactional=True)
    builder.append(now_ms(), None, b"in a transaction")
    answers = await broker.replica_manager.append_records(5_000, -1, {DATA: builder.close()})
    assert answers[DATA].error == E.NONE


def test_service_commits_reloads_and_unloads(tmp_path) -> None:
    # The coordinators stamp their records with the wall clock: the broker's clock starts there too, or Kafka 4's
    # bound on future timestamps (an hour) would reject them.
    broker = Broker(str(tmp_path / "logs"), ManualClock(now_ms()))

    async def scenario() -> None:
        records = topic_records(TRANSACTION_STATE_TOPIC_NAME, 2) + topic_records("data", 1)
        broker.commit(records)
        await broker.replica_manager.metadata_applied()
        node = Node(broker, first_producer_id=5000)
        await node.loaded("tx")
        service = node.service

        producer = await service.init_producer_id("tx", 60_000, -1, -1)
        assert (producer.error, producer.producer_id, producer.producer_epoch) == (E.NONE, 5000, 0)
        assert (await service.init_producer_id(None, 0, -1, -1)).producer_id == 5001
        assert await service.add_partitions("tx", 5000, 0, [DATA], 0) == E.NONE
        assert service.verify_partitions("tx", 5000, 0, [DATA]) == {DATA: E.NONE}
        await produce_transactional(broker, 5000, 0)
        data_log = broker.replica_manager.get_partition(DATA).log
        assert data_log.first_unstable_offset == 0
        ended = await service.end_txn("tx", 5000, 0, True, 0)
        assert ended.error == E.NONE
        await node.wait_for(lambda: data_log.first_unstable_offset is None)
        await node.wait_for(lambda: service.describe(["tx"])[0].transaction_state == "CompleteCommit")
        assert [t.transactional_id for t in service.list_transactions(["CompleteCommit"], []).transaction_states] \
            == ["tx"]

        # A restarted coordinator over the same logs knows the id, its producer id and epoch.
        service.stop()
        again = Node(broker, first_producer_id=9000)
        await again.loaded("tx")
        described = again.service.describe(["tx"])[0]
        assert (described.error_code, described.transaction_state, described.producer_id,
                described.producer_epoch) == (E.NONE, "CompleteCommit", 5000, 0)
        bumped = await again.service.init_producer_id("tx", 60_000, -1, -1)
        assert (bumped.producer_id, bumped.producer_epoch) == (5000, 1)

        # Leadership of its partition moves to another broker: the id is no longer ours.
        partition = again.service.coordinator.partition_for("tx")
        topic_id = broker.metadata_cache.image.topic(TRANSACTION_STATE_TOPIC_NAME).topic_id
        broker.commit([partition_change(topic_id, partition, leader=NODE_ID + 1, replicas=[NODE_ID, NODE_ID + 1],
                                        isr=[NODE_ID, NODE_ID + 1])])
        assert (await again.service.init_producer_id("tx", 60_000, -1, -1)).error == E.NOT_COORDINATOR
        assert again.service.coordinator.state.partitions.keys() == {1 - partition}
        again.service.stop()

    try:
        asyncio.run(scenario())
    finally:
        broker.close()
