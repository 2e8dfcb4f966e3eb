"""The Consumer against a real kfk broker: assign, positions, seek, pause, offsets by time, committed offsets, and
group membership with each assignor (rebalances, listener calls, commits)."""

from __future__ import annotations

import time

import pytest

from kfk.client import Admin, Consumer, NewTopic, OffsetAndMetadata, Producer, TopicPartition
from kfk.errors import KafkaError, OffsetOutOfRangeError, RebalanceInProgressError, UnknownTopicOrPartitionError

pytestmark = pytest.mark.integration

FAST_GROUP = {"heartbeat.interval.ms": 100, "session.timeout.ms": 6000, "auto.offset.reset": "earliest"}


def produce(bootstrap: str, topic: str, partitions: int, count: int, **send) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for n in range(count):
            producer.send(topic, f"{n}".encode(), partition=n % partitions, **send)


def poll_until(consumers: list[Consumer], count: int, timeout: float = 15.0) -> list:
    records: list = []
    deadline = time.monotonic() + timeout
    while len(records) < count and time.monotonic() < deadline:
        for consumer in consumers:
            records.extend(consumer.poll(0.1))
    return records


def test_assign_reads_each_partition_in_order(bootstrap: str, topic_name: str) -> None:
    produce(bootstrap, topic_name, 3, 300)
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition(topic_name, p) for p in range(3)])
        records = poll_until([consumer], 300)
        assert len(records) == 300
        for partition in range(3):
            values = [int(r.value) for r in records if r.partition == partition]
            assert values == list(range(partition, 300, 3))
            assert consumer.position(TopicPartition(topic_name, partition)) == 100
        assert consumer.poll(0.2).partitions() == []


def test_max_poll_records_bounds_each_poll(bootstrap: str, topic_name: str) -> None:
    produce(bootstrap, topic_name, 1, 100)
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                   "max.poll.records": 7}) as consumer:
        consumer.assign([TopicPartition(topic_name, 0)])
        sizes = []
        while sum(sizes) < 100:
            batch = consumer.poll(5)
            assert batch
            sizes.append(len(batch))
        assert max(sizes) == 7 and sum(sizes) == 100


def test_latest_sees_only_new_records(bootstrap: str, topic_name: str) -> None:
    produce(bootstrap, topic_name, 1, 10)
    tp = TopicPartition(topic_name, 0)
    with Consumer({"bootstrap.servers": bootstrap}) as consumer:
        consumer.assign([tp])
        assert consumer.position(tp) == 10
        with Producer({"bootstrap.servers": bootstrap}) as producer:
            producer.send(topic_name, b"new")
        assert [r.value for r in poll_until([consumer], 1)] == [b"new"]


def test_seek_pause_resume_and_edge_offsets(bootstrap: str, topic_name: str) -> None:
    produce(bootstrap, topic_name, 2, 40)
    t0, t1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    with Consumer({"bootstrap.servers": bootstrap}) as consumer:
        consumer.assign([t0, t1])
        assert consumer.beginning_offsets([t0, t1]) == {t0: 0, t1: 0}
        assert consumer.end_offsets([t0, t1]) == {t0: 20, t1: 20}
        consumer.seek(t0, 15)
        consumer.seek(t1, 18)
        consumer.pause(t1)
        records = poll_until([consumer], 5, timeout=3)
        assert [(r.partition, r.offset) for r in records] == [(0, n) for n in range(15, 20)]
        assert consumer.paused() == {t1}
        consumer.resume(t1)
        assert [(r.partition, r.offset) for r in poll_until([consumer], 2)] == [(1, 18), (1, 19)]
        consumer.seek_to_beginning(t0)
        assert poll_until([consumer], 20)[0].offset == 0


def test_offsets_for_times_finds_the_first_record_at_or_after(bootstrap: str, topic_name: str) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1)])
    base = 1_700_000_000_000
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for n in range(10):
            producer.send(topic_name, b"v", timestamp_ms=base + n * 1000)
    tp = TopicPartition(topic_name, 0)
    with Consumer({"bootstrap.servers": bootstrap}) as consumer:
        found = consumer.offsets_for_times({tp: base + 4500})
        assert found[tp].offset == 5 and found[tp].timestamp == base + 5000
        assert consumer.offsets_for_times({tp: base + 99_000}) == {tp: None}


def test_out_of_range_positions_reset_or_raise(bootstrap: str, topic_name: str) -> None:
    produce(bootstrap, topic_name, 1, 5)
    tp = TopicPartition(topic_name, 0)
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 1000)
        assert [r.offset for r in poll_until([consumer], 5)] == [0, 1, 2, 3, 4]
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "none"}) as consumer:
        consumer.assign([tp])
        with pytest.raises(OffsetOutOfRangeError):
            consumer.poll(1)
        consumer.seek(tp, 1000)
        with pytest.raises(OffsetOutOfRangeError):
            poll_until([consumer], 1, timeout=3)


def test_partitions_for_an_unknown_topic(bootstrap: str) -> None:
    with Consumer({"bootstrap.servers": bootstrap, "allow.auto.create.topics": False}) as consumer:
        with pytest.raises(UnknownTopicOrPartitionError):
            consumer.partitions_for("does-not-exist-anywhere")


@pytest.mark.parametrize("broker", ["kfk", "apache_kafka"])
def test_a_group_member_reads_a_topic_created_after_it_subscribed(broker: str, request: pytest.FixtureRequest,
                                                                  topic_name: str) -> None:
    """A subscribed topic that does not exist yet (or that Apache Kafka answers LEADER_NOT_AVAILABLE for while it
    creates it) is asked again after retry.backoff.ms, as Java's consumer does, not after metadata.max.age.ms."""
    bootstrap = (request.getfixturevalue("bootstrap") if broker == "kfk"
                 else request.getfixturevalue("apache_kafka").bootstrap_server)
    with Consumer(dict(FAST_GROUP, **{"bootstrap.servers": bootstrap, "group.id": f"g-{topic_name}",
                                      "allow.auto.create.topics": False, "metadata.max.age.ms": 300_000})) as consumer:
        consumer.subscribe([topic_name])
        assert poll_until([consumer], 1, timeout=2) == []
        produce(bootstrap, topic_name, 1, 1)
        records = poll_until([consumer], 1, timeout=20)
        assert [record.value for record in records] == [b"0"]


def test_commits_with_assign_and_a_group_id(bootstrap: str, topic_name: str) -> None:
    produce(bootstrap, topic_name, 1, 10)
    tp = TopicPartition(topic_name, 0)
    group = f"g-{topic_name}"
    with Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                   "enable.auto.commit": False}) as consumer:
        consumer.assign([tp])
        assert len(poll_until([consumer], 10)) == 10
        assert consumer.committed([tp]) == {tp: None}
        consumer.commit_sync({tp: OffsetAndMetadata(7, "meta")})
        assert consumer.committed([tp])[tp].offset == 7
        results = []
        consumer.commit_async(callback=lambda offsets, error: results.append((offsets, error)))
        deadline = time.monotonic() + 5
        while not results and time.monotonic() < deadline:
            consumer.poll(0.1)
        assert results and results[0][1] is None and results[0][0][tp].offset == 10
    with Consumer({"bootstrap.servers": bootstrap, "group.id": group}) as consumer:
        consumer.assign([tp])
        assert consumer.position(tp) == 10, "a new consumer starts from the committed offset"


def commit_when_stable(consumers: list[Consumer], timeout: float = 10.0) -> None:
    """Commit each consumer's positions, polling through a rebalance that is still finishing (a cooperative group
    rebalances twice; a commit in between fails with RebalanceInProgressError, as in Java)."""
    deadline = time.monotonic() + timeout
    pending = list(consumers)
    while pending:
        consumer = pending[0]
        try:
            consumer.commit_sync()
            pending.pop(0)
        except RebalanceInProgressError:
            assert time.monotonic() < deadline, "the group never became stable"
            for other in consumers:
                other.poll(0.05)


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, list[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: list[TopicPartition]) -> None:
        self.events.append(("revoked", sorted(revoked)))

    def on_partitions_assigned(self, assigned: list[TopicPartition]) -> None:
        self.events.append(("assigned", sorted(assigned)))


@pytest.mark.parametrize("strategy", ["range", "roundrobin", "sticky", "cooperative-sticky"])
def test_a_group_splits_the_partitions_and_each_record_is_read_once(bootstrap: str, topic_name: str,
                                                                    strategy: str) -> None:
    produce(bootstrap, topic_name, 4, 400)
    config = dict(FAST_GROUP, **{"bootstrap.servers": bootstrap, "group.id": f"g-{topic_name}",
                                 "partition.assignment.strategy": strategy})
    first_listener, second_listener = Recorder(), Recorder()
    first, second = Consumer(config), Consumer(config)
    try:
        first.subscribe([topic_name], first_listener)
        records = poll_until([first], 1, timeout=10)
        assert first.assignment() == {TopicPartition(topic_name, p) for p in range(4)}
        second.subscribe([topic_name], second_listener)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not (len(first.assignment()) == 2 and len(second.assignment()) == 2):
            records.extend(first.poll(0.05))
            records.extend(second.poll(0.05))
        assert len(first.assignment()) == 2 and len(second.assignment()) == 2
        assert first.assignment().isdisjoint(second.assignment())
        records.extend(poll_until([first, second], 400 - len(records)))
        commit_when_stable([first, second])
        keys = {(r.partition, r.offset) for r in records}
        assert len(keys) == 400
    finally:
        first.close()
        second.close()
    if strategy == "cooperative-sticky":
        # The first member never gives up all it has: it revokes only the two partitions that move.
        revoked = [partitions for event, partitions in first_listener.events if event == "revoked"]
        assert revoked and all(len(partitions) <= 2 for partitions in revoked[:-1])
    else:
        assert ("revoked", sorted(TopicPartition(topic_name, p) for p in range(4))) in first_listener.events
    assert second_listener.events[0][0] == "assigned"


def test_a_member_that_leaves_hands_its_partitions_over_from_the_committed_offsets(bootstrap: str,
                                                                                     topic_name: str) -> None:
    produce(bootstrap, topic_name, 2, 100)
    config = dict(FAST_GROUP, **{"bootstrap.servers": bootstrap, "group.id": f"g-{topic_name}"})
    with Consumer(config) as leaving:
        leaving.subscribe([topic_name])
        assert len(poll_until([leaving], 100)) == 100
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.send(topic_name, b"after", partition=1)
    with Consumer(config) as staying:
        staying.subscribe([topic_name])
        assert [r.value for r in poll_until([staying], 1)] == [b"after"]


def test_read_committed_reads_non_transactional_records(bootstrap: str, topic_name: str) -> None:
    produce(bootstrap, topic_name, 1, 20)
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest",
                   "isolation.level": "read_committed"}) as consumer:
        tp = TopicPartition(topic_name, 0)
        consumer.assign([tp])
        assert len(poll_until([consumer], 20)) == 20
        assert consumer.end_offsets([tp]) == {tp: 20}


class LostRecorder(Recorder):
    def on_partitions_lost(self, lost: list[TopicPartition]) -> None:
        self.events.append(("lost", sorted(lost)))


def test_a_member_that_stops_polling_leaves_and_rejoins_with_its_partitions_lost(bootstrap: str,
                                                                                 topic_name: str) -> None:
    produce(bootstrap, topic_name, 1, 5)
    listener = LostRecorder()
    config = dict(FAST_GROUP, **{"bootstrap.servers": bootstrap, "group.id": f"g-{topic_name}",
                                 "max.poll.interval.ms": 500})
    with Consumer(config) as consumer:
        consumer.subscribe([topic_name], listener)
        assert len(poll_until([consumer], 5)) == 5
        time.sleep(1.0)  # longer than max.poll.interval.ms: the heartbeat task leaves the group
        poll_until([consumer], 1, timeout=3)
        assert ("lost", [TopicPartition(topic_name, 0)]) in listener.events
        assert listener.events[-1] == ("assigned", [TopicPartition(topic_name, 0)])


def test_enforce_rebalance_makes_the_group_assign_again(bootstrap: str, topic_name: str) -> None:
    """enforce_rebalance (Java's enforceRebalance): the member rejoins at its next poll, and the group goes to the
    next generation with the same members; without a group subscription it is refused, as in Java."""
    produce(bootstrap, topic_name, 2, 0)
    joins: list[list[TopicPartition]] = []

    class Listener:
        def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
            pass

        def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
            joins.append(sorted(partitions))

    with Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic_name}", **FAST_GROUP}) as consumer:
        with pytest.raises(KafkaError, match="Tried to force a rebalance but consumer does not have a group."):
            consumer.enforce_rebalance()
        consumer.subscribe([topic_name], listener=Listener())
        deadline = time.monotonic() + 15
        while not joins:
            assert time.monotonic() < deadline
            consumer.poll(0.1)
        generation = consumer.group_metadata().generation_id
        consumer.enforce_rebalance("the test asks")
        while len(joins) < 2:
            assert time.monotonic() < deadline, "no second assignment"
            consumer.poll(0.1)
        assert consumer.group_metadata().generation_id == generation + 1
        assert joins == [[TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]] * 2
