"""confluent-kafka (librdkafka 2.16) with group.protocol=consumer against one kfk broker: the KIP-848 consumer group
protocol. Consumers join and leave one by one while records flow (every record consumed, commits never going
backwards, one owner per partition at a time from the rebalance callbacks), a regular expression subscription
(resolved by the broker) picks up a topic created later, a static member comes back within its session without
moving anyone else's partitions, and the admin client lists and describes the group as a consumer group.

Each member polls on a thread of its own, as an application does: a member whose synchronous commit waits behind its
own JoinGroup (a classic member's rejoin, held until every member has rejoined) must not keep the other members
from polling, or the group waits on a member the test itself has stopped."""

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


class PollingMember:
    """A member polled by a thread of its own once it has subscribed (`start_polling`) until `stop_polling`. What
    the test reads while it runs is rebound, never changed in place (`owned` is a frozenset), and an error on the
    thread is kept for `poll_until` to raise."""

    name: str
    owned: frozenset[tuple[str, int]]
    error: BaseException | None = None
    _thread: threading.Thread | None = None

    def poll_once(self) -> None:
        raise NotImplementedError

    def start_polling(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name=f"member-{self.name}", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        try:
            while not self._stop.is_set():
                self.poll_once()
        except BaseException as error:  # noqa: BLE001 - raised in the test's thread by poll_until
            self.error = error

    def stop_polling(self) -> None:
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(120)
        assert not self._thread.is_alive(), f"member {self.name} still polling"


class Member(PollingMember):
    """A consumer whose rebalance callbacks and commits are recorded with timestamps."""

    def __init__(self, bootstrap: str, group: str, log: Log, name: str, **config) -> None:
        self.name = name
        self.log = log
        self.owned = frozenset()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False,
                                  "topic.metadata.refresh.interval.ms": 1000, **config})

    def subscribe(self, topics: list[str]) -> None:
        self.consumer.subscribe(topics, on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked)
        self.start_polling()

    def _assigned(self, consumer, partitions) -> None:
        keys = {(p.topic, p.partition) for p in partitions}
        self.owned = self.owned | keys
        self.log.ownership(self.name, keys, opened=True)
        consumer.incremental_assign(partitions)

    def _revoked(self, consumer, partitions) -> None:
        keys = {(p.topic, p.partition) for p in partitions}
        self.log.ownership(self.name, keys, opened=False)
        self.owned = self.owned - keys
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
        self.stop_polling()
        self.consumer.close()
        self.log.ownership(self.name, set(self.owned), opened=False)
        self.owned = frozenset()


class Log:
    """What the members did, written from their threads: records consumed (set.add and list.append are atomic),
    and each partition's spans of ownership (under a lock: a span is closed in place)."""

    def __init__(self) -> None:
        self.consumed: set[tuple[str, int, int]] = set()
        self.commits: list[tuple[int, str, int, int]] = []
        self.spans: dict[tuple[str, int], list[tuple[int, int | None, str]]] = defaultdict(list)
        self._lock = threading.Lock()

    def ownership(self, member: str, partitions: set[tuple[str, int]], opened: bool) -> None:
        with self._lock:
            now = time.monotonic_ns()
            for key in partitions:
                spans = self.spans[key]
                if opened:
                    spans.append((now, None, member))
                else:
                    for index, (start, end, owner) in enumerate(spans):
                        if owner == member and end is None:
                            spans[index] = (start, now, owner)

    def spans_now(self) -> dict[tuple[str, int], list[tuple[int, int | None, str]]]:
        with self._lock:
            return {key: list(spans) for key, spans in self.spans.items()}

    def check(self) -> None:
        for key, spans in self.spans_now().items():
            ordered = sorted(spans)
            for (start, end, owner), (next_start, _, next_owner) in zip(ordered, ordered[1:]):
                assert end is not None and next_start >= end, f"{key} owned by {owner} and {next_owner} at once"
        last: dict[tuple[str, int], int] = {}
        for _, topic, partition, offset in sorted(self.commits):
            assert offset >= last.get((topic, partition), 0), f"{topic}-{partition} committed backwards"
            last[(topic, partition)] = offset


def poll_until(members: list[PollingMember], condition, what: str, timeout: float = 60.0) -> None:
    """Wait, while the members poll on their threads, until `condition` holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        for member in members:
            if member.error is not None:
                raise AssertionError(f"member {member.name} failed while polling") from member.error
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def consumed_records(log: Log, topic: str, produced: set[tuple[int, int]]):
    """A condition: every (partition, offset) produced to the topic consumed. The set is built once: it can hold
    tens of thousands of records, and the condition is tested every few milliseconds."""
    expected = frozenset((topic, partition, offset) for partition, offset in produced)
    return lambda: expected <= log.consumed


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
        poll_until(members, consumed_records(log, topic, produced), "every record")
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
        poll_until([member], consumed_records(log, f"{prefix}-b", produced), "its records")
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
        a_partitions, b_spans = set(a.owned), log.spans_now()
        a.close()
        back = Member(bootstrap, group, log, "a-again", **{"group.instance.id": "a"})
        back.subscribe([topic])
        members = [back, b]
        poll_until(members, lambda: back.owned == a_partitions, "instance a back with its partitions")
        spans = log.spans_now()
        for key in partitions - a_partitions:
            assert spans[key] == b_spans[key], f"{key} moved while instance a was away"
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
