"""confluent-kafka (librdkafka 2.16) with group.protocol=consumer against one kfk broker: the KIP-848 consumer group
protocol. Consumers join and leave one by one while records flow (every record consumed, commits never going
backwards, one owner per partition at a time from the rebalance callbacks), a regular expression subscription
(resolved by the broker) picks up a topic created later, a static member comes back within its session without
moving anyone else's partitions, and the admin client lists and describes the group as a consumer group."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES

pytestmark = pytest.mark.integration

BROKER_OVERRIDES = {
    "group.consumer.min.session.timeout.ms": "3000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "500",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("kfk-kip848-confluent"), {**TEST_OVERRIDES, **BROKER_OVERRIDES})
    yield broker
    assert broker.stop() == 0, broker.output()[-4000:]


def unique(prefix: str) -> str:
    return f"{prefix}-{time.time_ns() % 10**12}"


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> set[tuple[int, int]]:
    delivered: set[tuple[int, int]] = set()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, str(i).encode(), partition=i % partitions,
                         on_delivery=lambda error, m: error is None and delivered.add((m.partition(), m.offset())))
    assert producer.flush(30) == 0
    return delivered


class Member:
    """A consumer whose rebalance callbacks and commits are recorded with timestamps."""

    def __init__(self, bootstrap: str, group: str, log: Log, name: str, **config) -> None:
        self.name = name
        self.log = log
        self.owned: set[tuple[str, int]] = set()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "topic.metadata.refresh.interval.ms": 1000, **config})

    def subscribe(self, topics: list[str]) -> None:
        self.consumer.subscribe(topics, on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked)

    def _assigned(self, consumer, partitions) -> None:
        keys = {(p.topic, p.partition) for p in partitions}
        self.owned |= keys
        self.log.ownership(self.name, keys, opened=True)
        consumer.incremental_assign(partitions)

    def _revoked(self, consumer, partitions) -> None:
        keys = {(p.topic, p.partition) for p in partitions}
        self.log.ownership(self.name, keys, opened=False)
        self.owned -= keys
        consumer.incremental_unassign(partitions)

    def poll_once(self) -> None:
        messages = self.consumer.consume(num_messages=200, timeout=0.05)
        records = [m for m in messages if m.error() is None]
        for message in records:
            self.log.consumed.add((message.topic(), message.partition(), message.offset()))
        if records:
            positions = {(m.topic(), m.partition()): m.offset() + 1 for m in records}
            try:
                committed = self.consumer.commit(offsets=[TopicPartition(topic, partition, offset)
                                                          for (topic, partition), offset in positions.items()],
                                                 asynchronous=False)
            except Exception:  # noqa: BLE001 - a commit refused across a rebalance: the next owner reads again
                return
            for tp in committed or []:
                if tp.error is None:
                    self.log.commits.append((time.monotonic_ns(), tp.topic, tp.partition, tp.offset))

    def close(self) -> None:
        self.consumer.close()
        self.log.ownership(self.name, set(self.owned), opened=False)
        self.owned.clear()


class Log:
    def __init__(self) -> None:
        self.consumed: set[tuple[str, int, int]] = set()
        self.commits: list[tuple[int, str, int, int]] = []
        self.spans: dict[tuple[str, int], list[tuple[int, int | None, str]]] = defaultdict(list)

    def ownership(self, member: str, partitions: set[tuple[str, int]], opened: bool) -> None:
        now = time.monotonic_ns()
        for key in partitions:
            spans = self.spans[key]
            if opened:
                spans.append((now, None, member))
            else:
                for index, (start, end, owner) in enumerate(spans):
                    if owner == member and end is None:
                        spans[index] = (start, now, owner)

    def check(self) -> None:
        for key, spans in self.spans.items():
            ordered = sorted(spans)
            for (start, end, owner), (next_start, _, next_owner) in zip(ordered, ordered[1:]):
                assert end is not None and next_start >= end, f"{key} owned by {owner} and {next_owner} at once"
        last: dict[tuple[str, int], int] = {}
        for _, topic, partition, offset in sorted(self.commits):
            assert offset >= last.get((topic, partition), 0), f"{topic}-{partition} committed backwards"
            last[(topic, partition)] = offset


def poll_until(members: list[Member], condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for member in members:
            member.poll_once()


def shared(members: list[Member], partitions: set[tuple[str, int]]) -> bool:
    owned = [member.owned for member in members]
    return all(owned) and set().union(*owned) == partitions and sum(map(len, owned)) == len(partitions)


def test_consumers_join_and_leave_one_by_one_under_load(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap_servers
    topic, group = unique("churn"), unique("g")
    create_topic(bootstrap, topic, 6)
    partitions = {(topic, i) for i in range(6)}
    log = Log()
    produced: set[tuple[int, int]] = set()
    stop = threading.Event()

    def load() -> None:
        while not stop.is_set():
            produced.update(produce(bootstrap, topic, 60, 6))

    producer = threading.Thread(target=load, daemon=True)
    producer.start()
    members: list[Member] = []
    try:
        for index in range(3):
            member = Member(bootstrap, group, log, f"m{index}")
            member.subscribe([topic])
            members.append(member)
            poll_until(members, lambda: shared(members, partitions), f"{len(members)} members")
        while len(members) > 1:
            members.pop(0).close()
            poll_until(members, lambda: shared(members, partitions), f"{len(members)} members after a leave")
        stop.set()
        producer.join(60)
        poll_until(members, lambda: {(topic, p, o) for p, o in produced} <= log.consumed, "every record")
        members.pop().close()
        log.check()
    finally:
        stop.set()
        for member in members:
            member.close()


def test_regex_subscription_resolved_by_the_broker_picks_up_a_later_topic(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap_servers
    prefix, group = unique("regex"), unique("g")
    create_topic(bootstrap, f"{prefix}-a", 2)
    log = Log()
    member = Member(bootstrap, group, log, "m")
    member.subscribe([f"^{prefix}-.*"])
    try:
        poll_until([member], lambda: member.owned == {(f"{prefix}-a", 0), (f"{prefix}-a", 1)}, "the first topic")
        create_topic(bootstrap, f"{prefix}-b", 2)
        poll_until([member], lambda: {(f"{prefix}-b", 0), (f"{prefix}-b", 1)} <= member.owned, "the later topic")
        produced = produce(bootstrap, f"{prefix}-b", 50, 2)
        poll_until([member], lambda: {(f"{prefix}-b", p, o) for p, o in produced} <= log.consumed, "its records")
    finally:
        member.close()


def test_static_member_back_within_its_session_moves_nothing(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap_servers
    topic, group = unique("static"), unique("g")
    create_topic(bootstrap, topic, 4)
    partitions = {(topic, i) for i in range(4)}
    log = Log()
    a = Member(bootstrap, group, log, "a", **{"group.instance.id": "a"})
    b = Member(bootstrap, group, log, "b", **{"group.instance.id": "b"})
    a.subscribe([topic])
    b.subscribe([topic])
    members = [a, b]
    try:
        poll_until(members, lambda: shared(members, partitions), "two static members")
        a_partitions, b_spans = set(a.owned), {key: list(spans) for key, spans in log.spans.items()}
        a.close()
        back = Member(bootstrap, group, log, "a-again", **{"group.instance.id": "a"})
        back.subscribe([topic])
        members = [back, b]
        poll_until(members, lambda: back.owned == a_partitions, "instance a back with its partitions")
        for key in partitions - a_partitions:
            assert log.spans[key] == b_spans[key], f"{key} moved while instance a was away"
        log.check()
    finally:
        for member in members:
            member.close()


def test_admin_client_lists_and_describes_a_consumer_group(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap_servers
    topic, group = unique("admin"), unique("g")
    create_topic(bootstrap, topic, 3)
    log = Log()
    member = Member(bootstrap, group, log, "m", **{"client.id": "described"})
    member.subscribe([topic])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        poll_until([member], lambda: len(member.owned) == 3, "the assignment")
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(30)
        found = [g for g in listed.valid if g.group_id == group]
        assert [(g.type, g.state) for g in found] == [(ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE)]
        classic = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(30)
        assert group not in {g.group_id for g in classic.valid}
        description = admin.describe_consumer_groups([group])[group].result(30)
        assert (description.type, description.state) == (ConsumerGroupType.CONSUMER, ConsumerGroupState.STABLE)
        assert [m.client_id for m in description.members] == ["described"]
        assigned = {(tp.topic, tp.partition) for tp in description.members[0].assignment.topic_partitions}
        assert assigned == {(topic, i) for i in range(3)}
    finally:
        member.close()
