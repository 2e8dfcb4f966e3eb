"""kfk's consumer with group.protocol=consumer (KIP-848) against a broker that serves ConsumerGroupHeartbeat: one
member, members joining and leaving (every record consumed, each partition owned by one member at a time, as the
rebalance listeners saw it), a regular expression that picks up a topic created later, a static member restarted
within the session timeout, a commit with a stale member epoch, leaving on close, the asyncio consumer, and a group
shared with confluent-kafka (librdkafka's group.protocol=consumer).

The broker is a module fixture parametrized by kind (one start per module, BROKER_KINDS): Apache Kafka today; kfk's
broker joins the list once it serves the protocol. The brokers' group.consumer.* heartbeat interval is lowered so that
rebalances take a fraction of a second instead of Kafka's 5 s heartbeat.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer as ConfluentConsumer

from kfk.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from kfk.client.aio import AIOConsumer
from kfk.client.offsets import commit_offsets, fetch_committed
from kfk.common.structs import OffsetAndMetadata
from kfk.errors import ErrorCode, KafkaError
from kfk.testing.apache_kafka import ApacheKafka, ApacheKafkaStartError, ApacheKafkaUnavailable
from kfk.testing.broker import start_broker
from kfk.testing.plugin import TEST_OVERRIDES

pytestmark = pytest.mark.integration

#: The consumer-protocol settings of the brokers under test: a short heartbeat interval (the coordinator's, which
#: members follow) so that reconciliations are quick; Kafka's bounds are lowered to allow it.
GROUP_CONSUMER_CONFIG = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
}
DEADLINE_S = 60


#: The brokers this module runs against, one module-scoped start each. kfk's broker ("kfk") joins the list once its
#: group coordinator serves ConsumerGroupHeartbeat.
BROKER_KINDS = ["apache_kafka", "kfk"]


@pytest.fixture(scope="module", params=BROKER_KINDS)
def bootstrap(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    directory = tmp_path_factory.mktemp(f"group-protocol-{request.param}")
    if request.param == "kfk":
        broker = start_broker(directory, dict(TEST_OVERRIDES, **GROUP_CONSUMER_CONFIG))
        yield broker.bootstrap_servers
        broker.stop()
        return
    try:
        node = ApacheKafka(directory, config=GROUP_CONSUMER_CONFIG).start()
    except (ApacheKafkaUnavailable, ApacheKafkaStartError) as error:
        pytest.fail(f"Apache Kafka could not be started: {error}")
    yield node.bootstrap_server
    node.stop()


@pytest.fixture
def names() -> Callable[[str], str]:
    suffix = uuid.uuid4().hex[:8]
    return lambda what: f"{what}-{suffix}"


def create(bootstrap: str, topic: str, partitions: int) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.create_topics([NewTopic(topic, partitions, 1)]) == {topic: None}


def produce(bootstrap: str, topic: str, start: int, count: int, partitions: int) -> set[bytes]:
    values = {f"{topic}-{n}".encode() for n in range(start, start + count)}
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for n in range(start, start + count):
            producer.send(topic, f"{topic}-{n}".encode(), partition=n % partitions)
    return values


class OwnershipLog:
    """Every member's listener calls, in the order they happened (members are polled from one thread, and the
    callbacks run inside poll): from it, who owned each partition at every moment."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, TopicPartition]] = []
        self.owner: dict[TopicPartition, str] = {}
        self.violations: list[str] = []
        self._lock = threading.Lock()

    def listener(self, member: str) -> OwnershipListener:
        return OwnershipListener(self, member)

    def assigned(self, member: str, partitions: list[TopicPartition]) -> None:
        with self._lock:
            for tp in partitions:
                self.events.append((member, "assigned", tp))
                previous = self.owner.get(tp)
                if previous is not None and previous != member:
                    self.violations.append(f"{tp} assigned to {member} while {previous} still owned it")
                self.owner[tp] = member

    def released(self, member: str, partitions: list[TopicPartition], how: str) -> None:
        with self._lock:
            for tp in partitions:
                self.events.append((member, how, tp))
                if self.owner.get(tp) != member:
                    self.violations.append(f"{member} {how} {tp}, which {self.owner.get(tp)} owned")
                self.owner.pop(tp, None)

    def owned_by(self, member: str) -> set[TopicPartition]:
        with self._lock:
            return {tp for tp, owner in self.owner.items() if owner == member}


class OwnershipListener:
    def __init__(self, log: OwnershipLog, member: str) -> None:
        self.log = log
        self.member = member

    def on_partitions_assigned(self, partitions: list[TopicPartition]) -> None:
        self.log.assigned(self.member, partitions)

    def on_partitions_revoked(self, partitions: list[TopicPartition]) -> None:
        self.log.released(self.member, partitions, "revoked")

    def on_partitions_lost(self, partitions: list[TopicPartition]) -> None:
        self.log.released(self.member, partitions, "lost")


def consumer(bootstrap: str, group: str, **extra) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", **extra})


def poll_until(consumers: list[Consumer], done: Callable[[], bool], seen: set[bytes] | None = None,
               timeout: float = DEADLINE_S) -> None:
    """Poll every consumer in turn until ``done()``; values read go to ``seen``."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "the group did not get there in time"
        for member in consumers:
            for record in member.poll(0.05):
                if seen is not None:
                    seen.add(record.value)


def test_one_member_consumes_every_partition(bootstrap: str, names: Callable[[str], str]) -> None:
    topic, group = names("one"), names("g-one")
    create(bootstrap, topic, 3)
    expected = produce(bootstrap, topic, 0, 300, 3)
    log = OwnershipLog()
    seen: set[bytes] = set()
    with consumer(bootstrap, group) as member:
        member.subscribe([topic], listener=log.listener("a"))
        poll_until([member], lambda: seen >= expected, seen)
        assert member.assignment() == {TopicPartition(topic, p) for p in range(3)}
        assert log.owned_by("a") == member.assignment()
        epoch = member.group_metadata().generation_id
        assert epoch > 0
        member.commit_sync()
        committed = member.committed([TopicPartition(topic, p) for p in range(3)])
        assert {tp: offset.offset for tp, offset in committed.items()} == {
            TopicPartition(topic, p): 100 for p in range(3)}
    assert seen == expected
    assert log.violations == []


def test_members_join_and_leave_sharing_a_topic(bootstrap: str, names: Callable[[str], str]) -> None:
    topic, group = names("share"), names("g-share")
    partitions = 6
    create(bootstrap, topic, partitions)
    log = OwnershipLog()
    seen: set[bytes] = set()
    expected = produce(bootstrap, topic, 0, 120, partitions)
    a = consumer(bootstrap, group, **{"client.id": "a"})
    a.subscribe([topic], listener=log.listener("a"))
    members = [a]
    try:
        poll_until(members, lambda: len(log.owned_by("a")) == partitions, seen)
        for name in ("b", "c"):  # each join: the partitions spread out, moving only once released
            member = consumer(bootstrap, group, **{"client.id": name})
            member.subscribe([topic], listener=log.listener(name))
            members.append(member)
            expected |= produce(bootstrap, topic, len(expected), 120, partitions)
            poll_until(members, lambda: all(log.owned_by(m.config.client_id) for m in members), seen)
        b = members.pop(1)
        b.close()  # b leaves: its partitions go to a and c
        expected |= produce(bootstrap, topic, len(expected), 120, partitions)
        poll_until(members, lambda: len(log.owned_by("a") | log.owned_by("c")) == partitions and seen >= expected,
                   seen)
    finally:
        for member in members:
            member.close()
    assert seen >= expected
    assert log.violations == []
    assert log.owned_by("b") == set()
    released_by_b = {tp for member, how, tp in log.events if member == "b" and how == "revoked"}
    assert released_by_b, "b owned partitions and gave them back on close"


def test_regex_subscription_picks_up_a_topic_created_later(bootstrap: str, names: Callable[[str], str]) -> None:
    prefix, group = names("rx"), names("g-rx")
    first, later = f"{prefix}.first", f"{prefix}.later"
    create(bootstrap, first, 1)
    expected = produce(bootstrap, first, 0, 20, 1)
    seen: set[bytes] = set()
    with consumer(bootstrap, group, **{"metadata.max.age.ms": 1000}) as member:
        member.subscribe(prefix.replace("-", "\\-") + "\\..*")
        poll_until([member], lambda: seen >= expected, seen)
        create(bootstrap, later, 2)
        expected |= produce(bootstrap, later, 0, 20, 2)
        poll_until([member], lambda: seen >= expected, seen)
        assert member.assignment() == {TopicPartition(first, 0), TopicPartition(later, 0),
                                       TopicPartition(later, 1)}


def test_static_member_restarted_within_the_session_timeout_keeps_its_partitions(
        bootstrap: str, names: Callable[[str], str]) -> None:
    topic, group = names("static"), names("g-static")
    create(bootstrap, topic, 4)
    log = OwnershipLog()
    a = consumer(bootstrap, group, **{"group.instance.id": "a"})
    b = consumer(bootstrap, group, **{"group.instance.id": "b"})
    a.subscribe([topic], listener=log.listener("a"))
    b.subscribe([topic], listener=log.listener("b"))
    try:
        poll_until([a, b], lambda: len(log.owned_by("a")) == 2 and len(log.owned_by("b")) == 2)
        before_a, before_b = a.assignment(), b.assignment()
        a.close()  # leaves with epoch -2: its partitions stay reserved for instance "a"
        events_of_b = [event for event in log.events if event[0] == "b"]
        a = consumer(bootstrap, group, **{"group.instance.id": "a"})
        a.subscribe([topic], listener=log.listener("a"))
        poll_until([a, b], lambda: a.assignment() == before_a)
        for _ in range(5):  # a few more heartbeats of b: nothing moves
            b.poll(0.2)
        assert b.assignment() == before_b
        assert [event for event in log.events if event[0] == "b"] == events_of_b
    finally:
        a.close()
        b.close()
    assert log.violations == []


def test_commit_at_an_older_member_epoch_is_checked_per_partition(
        bootstrap: str, names: Callable[[str], str]) -> None:
    """KIP-1251 (Kafka 4.3+): a commit at an older member epoch is accepted for the partitions a member has held
    since that epoch (its epoch moved on, its assignment did not); once its assignment changes, it holds all of it
    from the new epoch, so an older epoch is STALE_MEMBER_EPOCH, as is a newer one. The consumer's own commit,
    started with an old epoch, retries with the epoch its heartbeats brought, as the Java consumer does."""
    topic, other, group = names("stale"), names("other"), names("g-stale")
    create(bootstrap, topic, 2)
    create(bootstrap, other, 1)
    log = OwnershipLog()
    a = consumer(bootstrap, group, **{"enable.auto.commit": False})
    a.subscribe([topic], listener=log.listener("a"))
    others: list[Consumer] = []
    try:
        poll_until([a], lambda: len(log.owned_by("a")) == 2)
        coordinator = a._coordinator
        assert coordinator is not None
        member_id = coordinator.membership.member_id
        both = [TopicPartition(topic, 0), TopicPartition(topic, 1)]

        async def commit_with(epoch: int, offset: int) -> dict[TopicPartition, ErrorCode | None]:
            answers = await commit_offsets(coordinator.network, coordinator.coordinator_id, group,
                                           dict.fromkeys(both, OffsetAndMetadata(offset)), generation_id=epoch,
                                           member_id=member_id, highest_version=9)
            return {tp: None if error is None else error.error_code for tp, error in answers.items()}

        def member_joins(topic_name: str, owns: Callable[[], bool]) -> tuple[int, int]:
            """(a's epoch before, after) another member subscribing to `topic_name` joined."""
            before = coordinator.membership.member_epoch
            joiner = consumer(bootstrap, group, **{"enable.auto.commit": False})
            others.append(joiner)
            joiner.subscribe([topic_name], listener=log.listener(topic_name))
            poll_until([a, *others], lambda: owns() and coordinator.membership.member_epoch > before)
            return before, coordinator.membership.member_epoch

        # A member of another topic joins: a's epoch moves on, its partitions stay.
        first_epoch, second_epoch = member_joins(other, lambda: len(log.owned_by(other)) == 1)
        assert a._loop.run(commit_with(first_epoch, 3), 10) == dict.fromkeys(both, None)
        assert a._loop.run(commit_with(second_epoch + 1, 4), 10) == dict.fromkeys(both, ErrorCode.STALE_MEMBER_EPOCH)
        # A member of the same topic joins: a gives one partition up; the older epoch no longer counts for either.
        _, third_epoch = member_joins(topic, lambda: len(log.owned_by(topic)) == 1)
        assert a._loop.run(commit_with(second_epoch, 5), 10) == dict.fromkeys(both, ErrorCode.STALE_MEMBER_EPOCH)
        assert {tp: m.offset for tp, m in a.committed(both).items()} == dict.fromkeys(both, 3)
        a._loop.run(coordinator._commit(dict.fromkeys(both, OffsetAndMetadata(6)), second_epoch, member_id, 10_000),
                    15)
        assert third_epoch == coordinator.membership.member_epoch
        assert {tp: m.offset for tp, m in a.committed(both).items()} == dict.fromkeys(both, 6)
    finally:
        a.close()
        for joiner in others:
            joiner.close()


def test_committed_offsets_are_fetched_as_the_member(bootstrap: str, names: Callable[[str], str]) -> None:
    """committed() sends OffsetFetch v9 with the member id and epoch, as the Java consumer does: the coordinator
    checks them (a wrong epoch is STALE_MEMBER_EPOCH, an unknown member UNKNOWN_MEMBER_ID)."""
    topic, group = names("fetch"), names("g-fetch")
    create(bootstrap, topic, 2)
    log = OwnershipLog()
    a = consumer(bootstrap, group, **{"enable.auto.commit": False})
    a.subscribe([topic], listener=log.listener("a"))
    try:
        poll_until([a], lambda: len(log.owned_by("a")) == 2)
        coordinator = a._coordinator
        assert coordinator is not None
        member_id, epoch = coordinator.membership.member_id, coordinator.membership.member_epoch
        assert coordinator._fetch_identity() == (member_id, epoch)
        owned = TopicPartition(topic, 0)
        a.commit_sync({owned: OffsetAndMetadata(3)})
        assert a.committed([owned])[owned].offset == 3

        def fetch_as(member: tuple[str, int]):
            return a._loop.run(fetch_committed(coordinator.network, coordinator.coordinator_id, group, [owned],
                                               member=member), 10)

        assert fetch_as((member_id, epoch))[owned].offset == 3
        for member, error in [((member_id, epoch + 5), ErrorCode.STALE_MEMBER_EPOCH),
                              (("not-a-member", epoch), ErrorCode.UNKNOWN_MEMBER_ID)]:
            with pytest.raises(KafkaError) as refused:
                fetch_as(member)
            assert refused.value.error_code == error
    finally:
        a.close()


def test_a_fenced_member_loses_its_partitions_and_rejoins_with_epoch_zero(bootstrap: str,
                                                                           names: Callable[[str], str]) -> None:
    topic, group = names("fenced"), names("g-fenced")
    create(bootstrap, topic, 2)
    expected = produce(bootstrap, topic, 0, 20, 2)
    log = OwnershipLog()
    seen: set[bytes] = set()
    with consumer(bootstrap, group) as member:
        member.subscribe([topic], listener=log.listener("a"))
        poll_until([member], lambda: seen >= expected, seen)
        membership = member._coordinator.membership
        with member._coordinator._lock:  # an epoch the coordinator never gave: its next heartbeat is fenced
            membership.member_epoch += 100
        poll_until([member], lambda: any(how == "lost" for _, how, _ in log.events))
        expected |= produce(bootstrap, topic, 20, 20, 2)
        poll_until([member], lambda: seen >= expected and len(log.owned_by("a")) == 2, seen)
        assert 0 < membership.member_epoch < 100
    lost = [tp for _, how, tp in log.events if how == "lost"]
    assert sorted(lost) == [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    assert log.violations == []


def test_a_member_that_stops_polling_leaves_and_its_next_poll_rejoins(bootstrap: str,
                                                                      names: Callable[[str], str]) -> None:
    topic, group = names("stuck"), names("g-stuck")
    create(bootstrap, topic, 1)
    log = OwnershipLog()
    with consumer(bootstrap, group, **{"max.poll.interval.ms": 1000}) as member:
        member.subscribe([topic], listener=log.listener("a"))
        poll_until([member], lambda: len(log.owned_by("a")) == 1)
        membership = member._coordinator.membership
        deadline = time.monotonic() + DEADLINE_S
        while membership.member_epoch != 0:  # no poll(): the heartbeat task leaves on its own
            assert time.monotonic() < deadline, "the member did not leave"
            time.sleep(0.05)
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            assert admin.describe_consumer_groups([group])[group].members == []
        poll_until([member], lambda: len(log.owned_by("a")) == 1 and membership.member_epoch > 0)
    assert [how for _, how, _ in log.events] == ["assigned", "lost", "assigned", "revoked"]


def test_close_leaves_the_group_at_once(bootstrap: str, names: Callable[[str], str]) -> None:
    topic, group = names("leave"), names("g-leave")
    create(bootstrap, topic, 1)
    member = consumer(bootstrap, group)
    member.subscribe([topic])
    poll_until([member], lambda: bool(member.assignment()))
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        described = admin.describe_consumer_groups([group])[group]
        assert [m.member_id for m in described.members] == [member._coordinator.membership.member_id]
        member.close()
        described = admin.describe_consumer_groups([group])[group]  # no wait: the member said it left
        assert described.members == []
        assert described.state == "Empty"


def test_unsubscribe_leaves_and_a_new_subscribe_joins_again(bootstrap: str, names: Callable[[str], str]) -> None:
    topic, group = names("unsub"), names("g-unsub")
    create(bootstrap, topic, 1)
    log = OwnershipLog()
    with consumer(bootstrap, group) as member, Admin({"bootstrap.servers": bootstrap}) as admin:
        member.subscribe([topic], listener=log.listener("a"))
        poll_until([member], lambda: bool(member.assignment()))
        member.unsubscribe()
        assert admin.describe_consumer_groups([group])[group].members == []
        member.subscribe([topic], listener=log.listener("a"))
        poll_until([member], lambda: bool(member.assignment()))
        assert len(admin.describe_consumer_groups([group])[group].members) == 1
    assert [how for _, how, _ in log.events] == ["assigned", "revoked", "assigned", "revoked"]


def test_asyncio_consumer(bootstrap: str, names: Callable[[str], str]) -> None:
    topic, group = names("aio"), names("g-aio")
    create(bootstrap, topic, 2)
    expected = produce(bootstrap, topic, 0, 50, 2)

    async def consume() -> tuple[set[bytes], set[TopicPartition]]:
        seen: set[bytes] = set()
        async with AIOConsumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "CONSUMER",
                                "auto.offset.reset": "earliest"}, topics=[topic]) as member:
            deadline = time.monotonic() + DEADLINE_S
            while seen < expected and time.monotonic() < deadline:
                for records in (await member.getmany(timeout_ms=200)).values():
                    seen.update(record.value for record in records)
            return seen, member.assignment()

    seen, assignment = asyncio.run(consume())
    assert seen == expected
    assert assignment == {TopicPartition(topic, 0), TopicPartition(topic, 1)}


def test_one_group_with_confluent_kafka(bootstrap: str, names: Callable[[str], str]) -> None:
    """kfk's consumer and librdkafka's, both on the consumer protocol, share a topic: every record is read once
    the assignment settles, and the two assignments split the partitions."""
    topic, group = names("mixed"), names("g-mixed")
    create(bootstrap, topic, 4)
    expected = produce(bootstrap, topic, 0, 200, 4)
    seen: set[bytes] = set()
    confluent = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                                   "auto.offset.reset": "earliest"})
    confluent.subscribe([topic])
    member = consumer(bootstrap, group)
    member.subscribe([topic])

    def settled() -> bool:
        mine = member.assignment()
        theirs = {TopicPartition(tp.topic, tp.partition) for tp in confluent.assignment()}
        return bool(mine) and bool(theirs) and not mine & theirs and len(mine | theirs) == 4 and seen >= expected

    try:
        deadline = time.monotonic() + DEADLINE_S
        while not settled():
            assert time.monotonic() < deadline, "the mixed group did not settle"
            for record in member.poll(0.05):
                seen.add(record.value)
            message = confluent.poll(0.05)
            if message is not None and message.error() is None:
                seen.add(message.value())
    finally:
        member.close()
        confluent.close()
    assert seen == expected
