"""The transaction APIs no client library reaches, over the wire against one kfk broker: WriteTxnMarkers as a
coordinator sends it (and its fencing), DescribeProducers, DescribeTransactions, ListTransactions with its filters,
AddPartitionsToTxn v4 verify_only as partition leaders send it, old versions' error codes, and the partition
leader's verification of transactional produces (KIP-890 part 1), on and off; transaction version 2 (KIP-890 part
2): the finalized feature, partitions added by Produce v12 and TxnOffsetCommit v5, the epoch bump of EndTxn v5 and
the fencing of a late batch of the old epoch."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.protocol.messages.add_partitions_to_txn import AddPartitionsToTxnRequest
from kfk.protocol.messages.api_versions import ApiVersionsRequest
from kfk.protocol.messages.describe_producers import DescribeProducersRequest
from kfk.protocol.messages.describe_transactions import DescribeTransactionsRequest
from kfk.protocol.messages.end_txn import EndTxnRequest
from kfk.protocol.messages.find_coordinator import FindCoordinatorRequest
from kfk.protocol.messages.init_producer_id import InitProducerIdRequest
from kfk.protocol.messages.list_transactions import ListTransactionsRequest
from kfk.protocol.messages.offset_fetch import OffsetFetchRequest
from kfk.protocol.messages.produce import ProduceRequest
from kfk.protocol.messages.txn_offset_commit import TxnOffsetCommitRequest
from kfk.protocol.messages.write_txn_markers import WriteTxnMarkersRequest
from kfk.records.builder import MemoryRecordsBuilder
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
OPERATION_NOT_ATTEMPTED = 55
GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


def start_broker(kfk_broker_factory, **overrides: str) -> str:
    address = kfk_broker_factory({**BROKER_OVERRIDES, **overrides}).bootstrap_servers
    admin = AdminClient({"bootstrap.servers": address})
    admin.create_topics([NewTopic("wire-txn", 2, 1)])["wire-txn"].result(15)
    return address


@pytest.fixture
def bootstrap(kfk_broker_factory) -> str:
    return start_broker(kfk_broker_factory)


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


def init_transactional_producer(sock, transactional_id: str) -> tuple[int, int]:
    """The producer id and epoch InitProducerId gives the id (after FindCoordinator created __transaction_state)."""
    deadline = time.monotonic() + 15
    while True:
        found = request(sock, FindCoordinatorRequest(key_type=TRANSACTION_KEY_TYPE,
                                                     coordinator_keys=[transactional_id]), 4)
        if found.coordinators[0].error_code == NONE or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    response = request(sock, InitProducerIdRequest(transactional_id=transactional_id,
                                                   transaction_timeout_ms=60_000), 4)
    assert response.error_code == NONE
    return response.producer_id, response.producer_epoch


def transactional_produce(sock, transactional_id: str, producer_id: int, producer_epoch: int, sequence: int,
                          partition: int, version: int = 9) -> int:
    builder = MemoryRecordsBuilder(producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=sequence,
                                   is_transactional=True)
    builder.append(int(time.time() * 1000), None, b"raw")
    response = request(sock, ProduceRequest(transactional_id=transactional_id, acks=-1, timeout_ms=10_000, topic_data=[
        ProduceRequest.TopicProduceData(name="wire-txn", partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=builder.close())])]), version)
    return response.responses[0].partition_responses[0].error_code


def add_partition(sock, transactional_id: str, producer_id: int, producer_epoch: int, partition: int) -> int:
    response = request(sock, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=transactional_id, v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=producer_epoch,
        v3_and_below_topics=[AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="wire-txn",
                                                                               partitions=[partition])]), 3)
    return response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


def test_the_leader_refuses_a_transactional_produce_outside_the_transaction(bootstrap: str) -> None:
    sock = connect(bootstrap)
    producer_id, epoch = init_transactional_producer(sock, "raw-producer")
    # Never added to a transaction: the coordinator says no, nothing is appended.
    assert transactional_produce(sock, "raw-producer", producer_id, epoch, 0, partition=1) == INVALID_TXN_STATE
    assert not [p for p in describe_producers(sock, 1) if p.producer_id == producer_id]
    # Added: accepted, and the next batch of the same transaction too (the partition knows it is open now).
    assert add_partition(sock, "raw-producer", producer_id, epoch, 1) == NONE
    assert transactional_produce(sock, "raw-producer", producer_id, epoch, 0, partition=1) == NONE
    assert transactional_produce(sock, "raw-producer", producer_id, epoch, 1, partition=1) == NONE
    # Partition 0 is still not in the transaction.
    assert transactional_produce(sock, "raw-producer", producer_id, epoch, 0, partition=0) == INVALID_TXN_STATE
    # Once the transaction is aborted (its marker written), a late batch of it is refused again. While the abort is
    # being completed the coordinator cannot say yet: the produce gets the retriable NOT_ENOUGH_REPLICAS.
    end = request(sock, EndTxnRequest(transactional_id="raw-producer", producer_id=producer_id, producer_epoch=epoch,
                                      committed=False), 3)
    assert end.error_code == NONE
    deadline = time.monotonic() + 10
    while request(sock, DescribeTransactionsRequest(transactional_ids=["raw-producer"]), 0) \
            .transaction_states[0].transaction_state != "CompleteAbort":
        assert time.monotonic() < deadline, "the abort never completed"
        time.sleep(0.05)
    assert next(p for p in describe_producers(sock, 1) if p.producer_id == producer_id).current_txn_start_offset == -1
    assert transactional_produce(sock, "raw-producer", producer_id, epoch, 2, partition=1) == INVALID_TXN_STATE
    sock.close()


def test_verification_can_be_turned_off(kfk_broker_factory) -> None:
    bootstrap = start_broker(kfk_broker_factory, **{"transaction.partition.verification.enable": "false"})
    sock = connect(bootstrap)
    producer_id, epoch = init_transactional_producer(sock, "unverified-producer")
    assert transactional_produce(sock, "unverified-producer", producer_id, epoch, 0, partition=1) == NONE
    (entry,) = [p for p in describe_producers(sock, 1) if p.producer_id == producer_id]
    assert entry.current_txn_start_offset >= 0
    # A TV2 producer's Produce v12 still has its partition added: nothing else would put it into the transaction.
    tv2_id, tv2_epoch = init_transactional_producer(sock, "unverified-tv2-producer")
    assert transactional_produce(sock, "unverified-tv2-producer", tv2_id, tv2_epoch, 0, partition=0,
                                 version=12) == NONE
    state = request(sock, DescribeTransactionsRequest(transactional_ids=["unverified-tv2-producer"]), 0) \
        .transaction_states[0]
    assert [(t.topic, list(t.partitions)) for t in state.topics] == [("wire-txn", [0])]
    sock.close()


def test_add_partitions_with_an_unknown_topic_attempts_nothing(bootstrap: str) -> None:
    sock = connect(bootstrap)
    producer_id, epoch = init_transactional_producer(sock, "unknown-topic-producer")
    response = request(sock, AddPartitionsToTxnRequest(
        v3_and_below_transactional_id="unknown-topic-producer", v3_and_below_producer_id=producer_id,
        v3_and_below_producer_epoch=epoch, v3_and_below_topics=[
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="wire-txn", partitions=[0]),
            AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name="no-such-topic", partitions=[0])]), 3)
    errors = {(t.name, p.partition_index): p.partition_error_code for t in response.results_by_topic_v3_and_below
              for p in t.results_by_partition}
    assert errors == {("wire-txn", 0): OPERATION_NOT_ATTEMPTED, ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
    # Nothing was added: the id's transaction is not open.
    described = request(sock, DescribeTransactionsRequest(transactional_ids=["unknown-topic-producer"]), 0)
    assert described.transaction_states[0].transaction_state == "Empty"
    sock.close()


def transaction_state(sock, transactional_id: str):
    return request(sock, DescribeTransactionsRequest(transactional_ids=[transactional_id]), 0).transaction_states[0]


def wait_for_state(sock, transactional_id: str, state: str) -> None:
    deadline = time.monotonic() + 10
    while transaction_state(sock, transactional_id).transaction_state != state:
        assert time.monotonic() < deadline, f"{transactional_id} never reached {state}"
        time.sleep(0.05)


def test_api_versions_finalizes_transaction_version_2(bootstrap: str) -> None:
    sock = connect(bootstrap)
    response = request(sock, ApiVersionsRequest(client_software_name="wire", client_software_version="1"), 4)
    assert [(f.name, f.min_version, f.max_version) for f in response.supported_features] == [
        ("eligible.leader.replicas.version", 0, 1), ("group.version", 0, 1), ("kraft.version", 0, 1),
        ("metadata.version", 7, 33), ("transaction.version", 0, 2)]
    # v3 lists no supported feature whose versions start at 0 (KIP-1022), as Apache Kafka (tests/interop); the
    # finalized levels are there all the same.
    older = request(sock, ApiVersionsRequest(client_software_name="wire", client_software_version="1"), 3)
    assert [f.name for f in older.supported_features] == ["metadata.version"]
    assert [(f.name, f.max_version_level) for f in older.finalized_features] == [
        ("eligible.leader.replicas.version", 1), ("group.version", 1), ("metadata.version", 33),
        ("transaction.version", 2)]
    assert [(f.name, f.min_version_level, f.max_version_level) for f in response.finalized_features] == [
        ("eligible.leader.replicas.version", 1, 1), ("group.version", 1, 1), ("metadata.version", 33, 33),
        ("transaction.version", 2, 2)]
    assert response.finalized_features_epoch >= 0
    # v0-v2 have no place for features.
    assert request(sock, ApiVersionsRequest(), 2).finalized_features == []
    sock.close()


def end_txn_v5(sock, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool):
    return request(sock, EndTxnRequest(transactional_id=transactional_id, producer_id=producer_id,
                                       producer_epoch=producer_epoch, committed=commit), 5)


def test_produce_v12_adds_the_partition_and_end_txn_v5_bumps_the_epoch(bootstrap: str) -> None:
    sock = connect(bootstrap)
    producer_id, epoch = init_transactional_producer(sock, "tv2-producer")
    # No AddPartitionsToTxn: Produce v12 has the leader add partition 1, then partition 0.
    assert transactional_produce(sock, "tv2-producer", producer_id, epoch, 0, partition=1, version=12) == NONE
    assert transactional_produce(sock, "tv2-producer", producer_id, epoch, 1, partition=1, version=12) == NONE
    assert transactional_produce(sock, "tv2-producer", producer_id, epoch, 0, partition=0, version=12) == NONE
    state = transaction_state(sock, "tv2-producer")
    assert state.transaction_state == "Ongoing"
    assert [(t.topic, sorted(t.partitions)) for t in state.topics] == [("wire-txn", [0, 1])]
    # A Produce below v12 still only verifies: a partition outside the transaction is refused, not added (v11
    # knows TRANSACTION_ABORTABLE, as Apache Kafka 4.0.2 answers it; v10 gets INVALID_TXN_STATE).
    producer_id_v11, epoch_v11 = init_transactional_producer(sock, "tv1-producer")
    assert transactional_produce(sock, "tv1-producer", producer_id_v11, epoch_v11, 0, partition=1,
                                 version=11) == TRANSACTION_ABORTABLE
    assert transactional_produce(sock, "tv1-producer", producer_id_v11, epoch_v11, 0, partition=1,
                                 version=10) == INVALID_TXN_STATE
    assert transaction_state(sock, "tv1-producer").transaction_state == "Empty"

    # EndTxn v5 ends the transaction with an epoch bump and answers the epoch to continue with.
    ended = end_txn_v5(sock, "tv2-producer", producer_id, epoch, commit=True)
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (NONE, producer_id, epoch + 1)
    wait_for_state(sock, "tv2-producer", "CompleteCommit")
    for partition in (0, 1):
        (entry,) = [p for p in describe_producers(sock, partition) if p.producer_id == producer_id]
        assert (entry.producer_epoch, entry.current_txn_start_offset) == (epoch + 1, -1)
    # The next transaction runs at the new epoch, and its end bumps again.
    assert transactional_produce(sock, "tv2-producer", producer_id, epoch + 1, 0, partition=1, version=12) == NONE
    ended = end_txn_v5(sock, "tv2-producer", producer_id, epoch + 1, commit=False)
    assert (ended.error_code, ended.producer_id, ended.producer_epoch) == (NONE, producer_id, epoch + 2)
    sock.close()


def test_a_late_batch_of_the_old_epoch_is_fenced_under_tv2(bootstrap: str) -> None:
    """No hanging transaction from a late produce: after EndTxn v5 the old epoch is fenced, both by the coordinator
    (Produce v12 asks it to add the partition) and by the partition itself (its marker carried the new epoch)."""
    sock = connect(bootstrap)
    producer_id, epoch = init_transactional_producer(sock, "late-producer")
    assert transactional_produce(sock, "late-producer", producer_id, epoch, 0, partition=1, version=12) == NONE
    ended = end_txn_v5(sock, "late-producer", producer_id, epoch, commit=False)
    assert (ended.error_code, ended.producer_epoch) == (NONE, epoch + 1)
    wait_for_state(sock, "late-producer", "CompleteAbort")
    # The late retry of the aborted transaction's batch, to the same partition and to one it never touched.
    assert transactional_produce(sock, "late-producer", producer_id, epoch, 1, partition=1,
                                 version=12) == INVALID_PRODUCER_EPOCH
    assert transactional_produce(sock, "late-producer", producer_id, epoch, 0, partition=0,
                                 version=12) == INVALID_PRODUCER_EPOCH
    # Nothing was opened: no partition holds a transaction of the producer, the coordinator has none either.
    for partition in (0, 1):
        assert all(p.current_txn_start_offset == -1 for p in describe_producers(sock, partition)
                   if p.producer_id == producer_id)
    state = transaction_state(sock, "late-producer")
    assert (state.transaction_state, state.producer_epoch, state.topics) == ("CompleteAbort", epoch + 1, [])
    sock.close()


def test_txn_offset_commit_v5_adds_the_offsets_partition(bootstrap: str) -> None:
    sock = connect(bootstrap)
    deadline = time.monotonic() + 15
    while request(sock, FindCoordinatorRequest(key_type=GROUP_KEY_TYPE, coordinator_keys=["tv2-group"]), 4) \
            .coordinators[0].error_code != NONE:
        assert time.monotonic() < deadline, "no group coordinator"
        time.sleep(0.1)
    producer_id, epoch = init_transactional_producer(sock, "tv2-offsets")
    assert transactional_produce(sock, "tv2-offsets", producer_id, epoch, 0, partition=0, version=12) == NONE
    # No AddOffsetsToTxn: TxnOffsetCommit v5 has the group's offsets partition added.
    committed = request(sock, TxnOffsetCommitRequest(
        transactional_id="tv2-offsets", group_id="tv2-group", producer_id=producer_id, producer_epoch=epoch,
        topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name="wire-txn", partitions=[
            TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=7)])]), 5)
    assert [(t.name, p.partition_index, p.error_code) for t in committed.topics for p in t.partitions] == [
        ("wire-txn", 0, NONE)]
    state = transaction_state(sock, "tv2-offsets")
    assert sorted(t.topic for t in state.topics) == ["__consumer_offsets", "wire-txn"]
    # A fenced epoch is refused before anything is committed.
    stale = request(sock, TxnOffsetCommitRequest(
        transactional_id="tv2-offsets", group_id="tv2-group", producer_id=producer_id, producer_epoch=epoch - 1,
        topics=[TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name="wire-txn", partitions=[
            TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(partition_index=0, committed_offset=9)])]), 5)
    assert stale.topics[0].partitions[0].error_code == INVALID_PRODUCER_EPOCH
    assert end_txn_v5(sock, "tv2-offsets", producer_id, epoch, commit=True).error_code == NONE
    wait_for_state(sock, "tv2-offsets", "CompleteCommit")
    # The commit marker reached the offsets partition: the offset is visible.
    deadline = time.monotonic() + 10
    while True:
        fetched = request(sock, OffsetFetchRequest(group_id="tv2-group", topics=[
            OffsetFetchRequest.OffsetFetchRequestTopic(name="wire-txn", partition_indexes=[0])]), 1)
        offset = fetched.topics[0].partitions[0].committed_offset
        if offset == 7 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert offset == 7
    sock.close()
