"""Admin's transaction calls (list_transactions, describe_transactions, describe_producers) against a real broker,
with the transactions made by confluent-kafka's (librdkafka's) transactional producer."""

from __future__ import annotations

import time
import uuid

import pytest

from kfk.client import Admin, NewTopic, TopicPartition
from kfk.client.structs import TransactionDescription
from kfk.errors import TransactionalIdNotFoundError

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.integration


def test_an_open_then_committed_transaction_as_the_admin_sees_it(kfk_broker: str) -> None:
    topic = f"t-{uuid.uuid4().hex[:10]}"
    transactional_id = f"txn-{uuid.uuid4().hex[:8]}"
    tp = TopicPartition(topic, 0)
    with Admin({"bootstrap.servers": kfk_broker}) as admin:
        assert admin.create_topics([NewTopic(topic, 2, 1)]) == {topic: None}
        producer = confluent_kafka.Producer({"bootstrap.servers": kfk_broker, "transactional.id": transactional_id,
                                             "linger.ms": 0})
        producer.init_transactions(30)
        producer.begin_transaction()
        for n in range(3):
            producer.produce(topic, f"v{n}".encode(), partition=0)
        assert producer.flush(10) == 0
        started_ms = int(time.time() * 1000)

        listings = [item for item in admin.list_transactions() if item.transactional_id == transactional_id]
        assert len(listings) == 1
        listing = listings[0]
        assert listing.state == "Ongoing" and listing.coordinator_id == 1 and listing.producer_id >= 0
        assert transactional_id in {item.transactional_id for item in admin.list_transactions(["Ongoing"])}
        assert transactional_id not in {item.transactional_id for item in admin.list_transactions(["CompleteCommit"])}
        assert [item.transactional_id for item in admin.list_transactions(
            producer_id_filters=[listing.producer_id])] == [transactional_id]

        described = admin.describe_transactions([transactional_id, "no-such-transactional-id"])
        assert isinstance(described["no-such-transactional-id"], TransactionalIdNotFoundError)
        ongoing = described[transactional_id]
        assert isinstance(ongoing, TransactionDescription)
        assert (ongoing.coordinator_id, ongoing.state, ongoing.producer_id) == (1, "Ongoing", listing.producer_id)
        assert ongoing.topic_partitions == {tp}
        assert ongoing.transaction_start_time_ms is not None
        assert started_ms - 30_000 < ongoing.transaction_start_time_ms <= started_ms

        producers = admin.describe_producers([tp, TopicPartition(topic, 1)])
        assert producers[TopicPartition(topic, 1)].active_producers == []
        [state] = producers[tp].active_producers
        assert state.producer_id == listing.producer_id and state.producer_epoch == ongoing.producer_epoch
        assert state.current_transaction_start_offset == 0
        assert state.last_sequence == 2

        producer.commit_transaction(30)
        # EndTxn answers once PrepareCommit is logged; the markers, then CompleteCommit, follow.
        deadline = time.monotonic() + 10
        while True:
            committed = admin.describe_transactions([transactional_id])[transactional_id]
            assert isinstance(committed, TransactionDescription)
            if committed.state != "PrepareCommit" or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert committed.state == "CompleteCommit" and committed.topic_partitions == frozenset()
        [state] = admin.describe_producers([tp])[tp].active_producers
        assert state.current_transaction_start_offset is None
        assert state.coordinator_epoch is not None  # the COMMIT marker recorded it
