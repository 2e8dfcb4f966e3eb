"""__share_group_state is never compacted: the share coordinator deletes the records that later snapshots made
redundant (share.coordinator.state.topic.prune.interval.ms) and writes an idle share partition's snapshot again
(share.coordinator.cold.partition.snapshot.interval.ms) so that it does not hold the deletion back. Here with short
intervals and a snapshot every two updates: confluent-kafka's ShareConsumer accepts records in rounds, the state
partition's log start offset moves up, and after a restart (which rebuilds the state from what is left) a new
member gets exactly the records produced since, none of the accepted ones again."""

from __future__ import annotations

import time
from typing import Iterator

import pytest
from confluent_kafka import ShareConsumer

from kfk.client import Admin, NewTopic, Producer, TopicPartition
from kfk.common.internal_topics import SHARE_GROUP_STATE_TOPIC_NAME
from kfk.errors import UnknownTopicOrPartitionError
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.cluster.helpers import wait_until

pytestmark = pytest.mark.integration

TOPIC, GROUP = "pruned-jobs", "pruned-workers"
STATE_PARTITION = TopicPartition(SHARE_GROUP_STATE_TOPIC_NAME, 0)
BROKER_CONFIG = {**TEST_OVERRIDES, "share.coordinator.state.topic.num.partitions": "1",
                 "share.coordinator.snapshot.update.records.per.snapshot": "2",
                 "share.coordinator.state.topic.prune.interval.ms": "300",
                 "share.coordinator.cold.partition.snapshot.interval.ms": "600"}


@pytest.fixture
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("kfk-share-prune"), BROKER_CONFIG)
    yield broker
    broker.stop()


def produce(bootstrap: str, first: int, count: int) -> None:
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for index in range(first, first + count):
            producer.send(TOPIC, f"job {index}".encode(), partition=0)
        producer.flush()


def consume(bootstrap: str, count: int) -> list[int]:
    """The offsets one member of the group gets until it has `count` records (accepted: implicit mode)."""
    member = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": "pruned-worker"})
    offsets: list[int] = []
    try:
        member.subscribe([TOPIC])

        def received() -> bool:
            offsets.extend(message.offset() for message in member.poll(0.2) or [] if message.error() is None)
            return len(offsets) >= count

        wait_until(received, timeout=60, what=f"{count} records")
        member.commit_sync()
    finally:
        member.close()
    return offsets


def state_log_start(bootstrap: str) -> int:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        return admin.beginning_offsets([STATE_PARTITION])[STATE_PARTITION]


def test_the_redundant_state_is_deleted_and_what_is_left_resumes_the_group(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap_servers
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, 1)])
        deadline = time.monotonic() + 30
        while (error := admin.alter_share_group_offsets(GROUP, {TopicPartition(TOPIC, 0): 0})[
                TopicPartition(TOPIC, 0)]) is not None:  # the group starts at offset 0
            assert isinstance(error, UnknownTopicOrPartitionError) and time.monotonic() < deadline, error
            time.sleep(0.1)
    for round_ in range(4):  # a state write per round at least: snapshots every two
        produce(bootstrap, round_ * 10, 10)
        assert sorted(consume(bootstrap, 10)) == list(range(round_ * 10, round_ * 10 + 10))
    wait_until(lambda: state_log_start(bootstrap) > 0, timeout=30, what="the state partition pruned")

    assert broker.stop() == 0
    broker.start()
    produce(bootstrap, 40, 5)
    assert sorted(consume(bootstrap, 5)) == list(range(40, 45))  # none of the 40 accepted ones again
    assert state_log_start(bootstrap) > 0
