"""The transaction APIs no client library reaches, over the wire against one kfk broker: WriteTxnMarkers as a
coordinator sends it (and its fencing), DescribeProducers, DescribeTransactions, ListTransactions with its filters,
AddPartitionsToTxn v4 verify_only as partition leaders send it, and old versions' error codes."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kfk.protocol.messages.describe_producers import DescribeProducersRequest
from kfk.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kfk.protocol.messages.end_txn import EndTxnRequest
from kfk.protocol.messages.list_transactions import ListTransactionsRequest
from kfk.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from tests.integration.wire import connect, request

pytestmark = pytest.mark.integration

BROKER_OVERRIDES = {"transaction.state.log.num.partitions": "3", "offsets.topic.num.partitions": "3"}

# Kafka's error codes, spelled out where the test checks them.
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTIONAL_ID_NOT_FOUND = 105
PRODUCER_FENCED = 90
TRANSACTION_COORDINATOR_FENCED = 52
TRANSACTION_ABORTABLE = 120


@pytest.fixture
def bootstrap(kfk_broker_factory) -> str:
    address = kfk_broker_factory(BROKER_OVERRIDES).bootstrap_servers
    admin = AdminClient({"bootstrap.servers": address})
    admin.create_topics([NewTopic("wire-txn", 2, 1)])["wire-txn"].result(15)
    return address


@pytest.fixture
def open_transaction(bootstrap: str):
    """A confluent-kafka producer with a transaction open on wire-txn partition 0 (its records flushed)."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "wire-producer", "linger.ms": 0})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("wire-txn", b"in-transaction", partition=0)
    producer.flush(15)
    yield producer
    producer.abort_transaction(30)


def marker(producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
           topic: str = "wire-txn", partitions: tuple[int, ...] = (1,)) -> WriteTxnMarkersRequest.WritableTxnMarker:
    return WriteTxnMarkersRequest.WritableTxnMarker(
        producer_id=producer_id, producer_epoch=producer_epoch, transaction_result=commit,
        coordinator_epoch=coordinator_epoch,
        topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=topic, partition_indexes=list(partitions))])


def marker_errors(response) -> dict[tuple[int, str, int], int]:
    return {(m.producer_id, t.name, p.partition_index): p.error_code
            for m in response.markers for t in m.topics for p in t.partitions}


def describe_producers(sock, partition: int) -> list:
    response = request(sock, DescribeProducersRequest(topics=[DescribeProducersRequest.TopicRequest(
        name="wire-txn", partition_indexes=[partition])]), 0)
    (topic,) = response.topics
    (answer,) = topic.partitions
    assert answer.error_code == NONE
    return answer.active_producers


def test_write_txn_markers_and_coordinator_epoch_fencing(bootstrap: str) -> None:
    sock = connect(bootstrap)
    producer_id = 4242
    first = request(sock, WriteTxnMarkersRequest(markers=[
        marker(producer_id, 3, coordinator_epoch=5, commit=True),
        marker(producer_id + 1, 0, coordinator_epoch=0, commit=False, topic="no-such-topic", partitions=(0,)),
    ]), 1)
    assert marker_errors(first) == {(producer_id, "wire-txn", 1): NONE,
                                    (producer_id + 1, "no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
    (entry,) = [p for p in describe_producers(sock, 1) if p.producer_id == producer_id]
    assert (entry.producer_epoch, entry.coordinator_epoch, entry.current_txn_start_offset) == (3, 5, -1)

    # A marker from an older coordinator epoch is a zombie coordinator's; one for an older producer epoch too.
    stale_coordinator = request(sock, WriteTxnMarkersRequest(markers=[marker(producer_id, 3, 4, True)]), 0)
    assert marker_errors(stale_coordinator) == {(producer_id, "wire-txn", 1): TRANSACTION_COORDINATOR_FENCED}
    stale_producer = request(sock, WriteTxnMarkersRequest(markers=[marker(producer_id, 2, 5, False)]), 1)
    assert marker_errors(stale_producer) == {(producer_id, "wire-txn", 1): INVALID_PRODUCER_EPOCH}
    # The same or a newer coordinator epoch is accepted.
    newer = request(sock, WriteTxnMarkersRequest(markers=[marker(producer_id, 3, 6, False)]), 1)
    assert marker_errors(newer) == {(producer_id, "wire-txn", 1): NONE}
    (entry,) = [p for p in describe_producers(sock, 1) if p.producer_id == producer_id]
    assert entry.coordinator_epoch == 6
    sock.close()


def test_an_open_transaction_as_the_admin_apis_see_it(bootstrap: str, open_transaction: Producer) -> None:
    sock = connect(bootstrap)
    described = request(sock, DescribeTransactionsRequest(transactional_ids=["wire-producer", "nobody"]), 0)
    state, unknown = described.transaction_states
    assert (state.error_code, state.transaction_state) == (NONE, "Ongoing")
    assert [(t.topic, list(t.partitions)) for t in state.topics] == [("wire-txn", [0])]
    assert state.transaction_start_time_ms > 0
    assert unknown.error_code == TRANSACTIONAL_ID_NOT_FOUND
    producer_id, producer_epoch = state.producer_id, state.producer_epoch

    (active,) = [p for p in describe_producers(sock, 0) if p.producer_id == producer_id]
    assert (active.producer_epoch, active.current_txn_start_offset, active.last_sequence) == (producer_epoch, 0, 0)
    assert active.last_timestamp > 0

    def listed(**filters) -> tuple[list[tuple[str, int, str]], list[str]]:
        response = request(sock, ListTransactionsRequest(**filters), 1)
        assert response.error_code == NONE
        return ([(t.transactional_id, t.producer_id, t.transaction_state) for t in response.transaction_states],
                list(response.unknown_state_filters))

    ongoing = ("wire-producer", producer_id, "Ongoing")
    assert listed() == ([ongoing], [])
    assert listed(state_filters=["Ongoing"]) == ([ongoing], [])
    assert listed(state_filters=["CompleteCommit"]) == ([], [])
    assert listed(state_filters=["Ongoing", "Bogus"]) == ([ongoing], ["Bogus"])
    assert listed(producer_id_filters=[producer_id]) == ([ongoing], [])
    assert listed(producer_id_filters=[producer_id + 1]) == ([], [])
    assert listed(duration_filter=0) == ([ongoing], [])
    assert listed(duration_filter=3_600_000) == ([], [])
    sock.close()


def test_add_partitions_to_txn_verify_only(bootstrap: str, open_transaction: Producer) -> None:
    sock = connect(bootstrap)
    state = request(sock, DescribeTransactionsRequest(transactional_ids=["wire-producer"]), 0).transaction_states[0]

    def verify(version: int, epoch: int, partitions: list[int]) -> dict[int, int]:
        response = request(sock, AddPartitionsToTxnRequest(transactions=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                transactional_id="wire-producer", producer_id=state.producer_id, producer_epoch=epoch,
                verify_only=True,
                topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="wire-txn", partitions=partitions)])
        ]), version)
        assert response.error_code == NONE
        (result,) = response.results_by_transaction
        assert result.transactional_id == "wire-producer"
        return {p.partition_index: p.partition_error_code for t in result.topic_results
                for p in t.results_by_partition}

    assert verify(5, state.producer_epoch, [0, 1]) == {0: NONE, 1: TRANSACTION_ABORTABLE}
    assert verify(4, state.producer_epoch, [0, 1]) == {0: NONE, 1: INVALID_TXN_STATE}  # v4 predates ABORTABLE
    assert verify(5, state.producer_epoch - 1, [0]) == {0: PRODUCER_FENCED}
    # Verification writes nothing: the transaction still holds only partition 0.
    after = request(sock, DescribeTransactionsRequest(transactional_ids=["wire-producer"]), 0).transaction_states[0]
    assert [(t.topic, list(t.partitions)) for t in after.topics] == [("wire-txn", [0])]
    sock.close()


def test_old_end_txn_versions_get_invalid_producer_epoch_for_a_fenced_producer(
        bootstrap: str, open_transaction: Producer) -> None:
    sock = connect(bootstrap)
    state = request(sock, DescribeTransactionsRequest(transactional_ids=["wire-producer"]), 0).transaction_states[0]
    stale = EndTxnRequest(transactional_id="wire-producer", producer_id=state.producer_id,
                          producer_epoch=state.producer_epoch - 1, committed=True)
    assert request(sock, stale, 2).error_code == PRODUCER_FENCED
    assert request(sock, stale, 1).error_code == INVALID_PRODUCER_EPOCH
    sock.close()
