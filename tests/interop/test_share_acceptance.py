"""Share groups (KIP-932) with confluent-kafka's ShareConsumer (librdkafka 2.16) and Java's KafkaShareConsumer 4.4.0
against kfk: issue 33's acceptance scenario.

First confluent-kafka's share consumer on its own, against kfk and against Apache Kafka 4.4.0 (the same test on
both): implicit acknowledgement accepts every record, explicit RELEASE redelivers a record with delivery count 2 and
REJECT never does.

Then five members in one share group on a three-partition topic (three confluent-kafka members in processes of their
own, tests/interop/share_member.py, and two Java ones, tests/interop/java/JavaShareAcknowledger.java), each
releasing about 10 % of its first deliveries and rejecting 1 % (a hash of the record's place decides, the same in
every member). Two confluent-kafka members stop while each holds a batch it acquired: one is frozen (SIGSTOP: its
connections stay open, so its records come back when their acquisition locks expire), the other killed -9 (its
connection closes, and with it its share session: its records come back at once, as on Apache Kafka 4.4.0). Every
member prints a line per delivery; the accounting over all of them: every record accepted once or rejected, none
lost; a released or held record delivered again with a higher delivery count, and not before it was given back; a
rejected or accepted one never again; so never held by two members at once.

The broker runs with a 4 s acquisition lock and a 6 s session timeout (the stopped members leave the group after it,
so a partition that was assigned to them alone is served again).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer

from kfk.client import Admin, NewTopic, TopicPartition
from kfk.errors import UnknownTopicOrPartitionError
from kfk.testing.apache_kafka import ApacheKafka, java_command
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.interop.differential import BrokerSession
from tests.interop.jvm import java_programs, unique_name  # noqa: F401 (a fixture)
from tests.interop.scenarios import share_warm_up, wait_for_coordinators
from tests.interop.share_member import DELIVERY_FIELDS, decision

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
LOCK_DURATION_MS = 4000
SHARE_CONFIG = {
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": str(LOCK_DURATION_MS),
    "group.share.min.session.timeout.ms": "2000",
    "group.share.session.timeout.ms": "6000",
    "group.share.min.heartbeat.interval.ms": "500",
    "group.share.heartbeat.interval.ms": "1000",
}
#: The acceptance scenario's size (the issue asks for 100,000 records).
RECORDS = 100_000
PARTITIONS = 3
PYTHON_MEMBERS, JAVA_MEMBERS = 3, 2


@pytest.fixture(scope="module")
def share_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("kfk-share-acceptance"), {**TEST_OVERRIDES, **SHARE_CONFIG})
    yield broker
    assert broker.stop() == 0, broker.output()[-4000:]


@pytest.fixture(params=["kfk", "apache-kafka"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    if request.param == "kfk":
        return request.getfixturevalue("share_broker").bootstrap_servers
    return apache_kafka_ready(request)


def apache_kafka_ready(request: pytest.FixtureRequest) -> str:
    """The session's Apache Kafka node, once its share groups read records."""
    node: ApacheKafka = request.getfixturevalue("apache_kafka")
    with BrokerSession(node.bootstrap_server, "") as session:
        wait_for_coordinators(session)  # its group coordinator, then its share coordinator's state topic, ready
        share_warm_up(session)
    return node.bootstrap_server


def share_topic(bootstrap: str, partitions: int, count: int) -> tuple[str, str]:
    """A topic of `partitions` partitions with `count` records dealt out in turn (value r<index>), and a share
    group that starts at offset 0 of each (set before anyone joins, so whenever a member's first fetch comes, it
    misses nothing)."""
    topic, group = unique_name("share-acceptance"), unique_name("share-acceptance-group")
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, partitions, 1)])
        starts = {TopicPartition(topic, partition): 0 for partition in range(partitions)}
        deadline = time.monotonic() + 30
        # Apache Kafka's coordinator learns of the topic a moment after CreateTopics answers (from its controller).
        while errors := [error for error in admin.alter_share_group_offsets(group, starts).values() if error]:
            assert all(isinstance(error, UnknownTopicOrPartitionError) for error in errors), errors
            assert time.monotonic() < deadline, errors
            time.sleep(0.1)
    produce(bootstrap, topic, partitions, count)
    return topic, group


def produce(bootstrap: str, topic: str, partitions: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for index in range(count):
        while True:
            try:
                producer.produce(topic, f"r{index}".encode(), partition=index % partitions)
                break
            except BufferError:  # the producer's queue is full: let it send
                producer.poll(0.1)
    assert producer.flush(60) == 0


def poll_until(consumer: ShareConsumer, done: Callable[[list], bool], timeout: float = 60.0) -> list:
    """Poll until done(the messages so far) holds."""
    seen: list = []
    deadline = time.monotonic() + timeout
    while not done(seen):
        assert time.monotonic() < deadline, f"only {len(seen)} records after {timeout}s"
        for message in consumer.poll(0.5):
            assert message.error() is None, message.error()
            seen.append(message)
    return seen


def places(messages: list) -> list[tuple[int, int, int]]:
    return sorted((message.partition(), message.offset(), message.delivery_count()) for message in messages)


def committed(consumer: ShareConsumer) -> dict[tuple[str, int], object]:
    """commit_sync's outcome per (topic, partition)."""
    return {(partition.topic, partition.partition): error for partition, error in consumer.commit_sync().items()}


def test_confluent_implicit_mode_accepts_every_record(bootstrap: str) -> None:
    topic, group = share_topic(bootstrap, PARTITIONS, 300)
    config = {"bootstrap.servers": bootstrap, "group.id": group, "log_level": 3}
    with ShareConsumer(config) as consumer:
        consumer.subscribe([topic])
        seen = poll_until(consumer, lambda seen: len(seen) >= 300)
        assert set(consumer.commit_sync().values()) <= {None}
    # Each record once: r<index> at offset index // 3 of partition index % 3.
    assert places(seen) == sorted((index % PARTITIONS, index // PARTITIONS, 1) for index in range(300)) == sorted(
        (message.partition(), int(message.value()[1:]) // PARTITIONS, 1) for message in seen)
    with ShareConsumer(config) as again:  # every record was accepted: none comes again
        again.subscribe([topic])
        assert [message for message in again.poll(2.0) if message.error() is None] == []


def test_confluent_explicit_mode_release_and_reject(bootstrap: str) -> None:
    topic, group = share_topic(bootstrap, 1, 6)
    config = {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit",
              "log_level": 3}
    with ShareConsumer(config) as consumer:
        consumer.subscribe([topic])
        first = poll_until(consumer, lambda seen: len(seen) >= 6)
        assert places(first) == [(0, offset, 1) for offset in range(6)]
        for message in first:
            kind = {0: AcknowledgeType.RELEASE, 1: AcknowledgeType.REJECT}.get(message.offset(), AcknowledgeType.ACCEPT)
            consumer.acknowledge(message, kind)
        assert committed(consumer) == {(topic, 0): None}
        again = poll_until(consumer, lambda seen: len(seen) >= 1)
        assert [(message.offset(), message.value(), message.delivery_count()) for message in again] == [
            (0, b"r0", 2)]
        consumer.acknowledge(again[0], AcknowledgeType.ACCEPT)
        assert committed(consumer) == {(topic, 0): None}
        assert [message for message in consumer.poll(2.0) if message.error() is None] == []  # r1: rejected


@pytest.fixture(params=["kfk", "apache-kafka"])
def long_lock_bootstrap(request: pytest.FixtureRequest) -> str:
    """A broker whose acquisition locks last longer than any test waits: kfk with a 60 s lock, Apache Kafka with its
    default 30 s."""
    if request.param == "kfk":
        factory = request.getfixturevalue("kfk_broker_factory")
        return factory({"group.share.record.lock.duration.ms": "60000"}).bootstrap_servers
    return apache_kafka_ready(request)


def test_a_killed_members_records_come_back_at_once(long_lock_bootstrap: str) -> None:
    """A member killed -9 while it holds records: its connection closes, and with it its share session, so the
    broker gives its records back at once (Kafka's share session cache listens for disconnects), delivery count 2,
    long before their locks would expire."""
    topic, group = share_topic(long_lock_bootstrap, 1, 5)
    holder = Member(0, [sys.executable, "-m", "tests.interop.share_member", long_lock_bootstrap, topic, group, "0"])
    try:
        wait_until(lambda: holder.printed("holding"), "the member to hold its first batch", [holder], timeout=60)
        assert [(d.offset, d.delivery_count, d.decision) for d in holder.deliveries()] == [
            (offset, 1, "HOLD") for offset in range(5)]
        holder.kill()
    finally:
        if holder.process.poll() is None:
            os.killpg(holder.process.pid, signal.SIGKILL)
            holder.process.wait(30)
    config = {"bootstrap.servers": long_lock_bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit",
              "log_level": 3}
    with ShareConsumer(config) as consumer:
        consumer.subscribe([topic])
        again = poll_until(consumer, lambda seen: len(seen) >= 5, timeout=20)  # the locks last 30 s or more
        assert places(again) == [(0, offset, 2) for offset in range(5)]
        for message in again:
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        assert committed(consumer) == {(topic, 0): None}


# --- the acceptance scenario ------------------------------------------------------------------------------------


class Delivery(NamedTuple):
    """One line a member printed (share_member.DELIVERY_FIELDS), and which member printed it."""

    partition: int
    offset: int
    delivery_count: int
    decision: str
    poll_start_us: int
    poll_return_us: int
    ack_start_us: int
    result: str
    member: int


class Member:
    """A member's process; `lines` is what it printed so far."""

    def __init__(self, index: int, command: list[str]) -> None:
        self.index = index
        self._deliveries: list[Delivery] = []
        self._parsed = 0
        self.process = subprocess.Popen(command, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True, start_new_session=True)
        self.lines: list[str] = []
        self.errors: list[str] = []
        self.killed_at_us: int | None = None
        self.frozen = False
        threading.Thread(target=lambda: self.lines.extend(iter(self.process.stdout.readline, "")),
                         daemon=True).start()
        threading.Thread(target=lambda: self.errors.extend(iter(self.process.stderr.readline, "")),
                         daemon=True).start()

    def printed(self, line: str) -> bool:
        return line + "\n" in self.lines

    def deliveries(self) -> list[Delivery]:
        """Its delivery lines so far (parsed once each)."""
        lines = self.lines[self._parsed:]
        self._parsed += len(lines)
        for values in (line.split() for line in lines if line[0].isdigit()):
            assert len(values) == len(DELIVERY_FIELDS), values
            self._deliveries.append(Delivery(*map(int, values[:3]), values[3], *map(int, values[4:7]), values[7],
                                             self.index))
        return self._deliveries

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.write("stop\n")
            self.process.stdin.flush()

    def kill(self) -> None:
        """kill -9: its connections close, and with them its share session."""
        self.killed_at_us = time.time_ns() // 1000
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(30)

    def freeze(self) -> None:
        """SIGSTOP: it stops polling and heartbeating, but its connections stay open (a hung process, or a host
        cut off): what it holds comes back only when the acquisition locks expire."""
        self.frozen = True
        os.killpg(self.process.pid, signal.SIGSTOP)


def wait_until(condition: Callable[[], bool], what: str, members: list[Member], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        for member in members:
            assert member.process.poll() is None or member.killed_at_us, "".join(member.errors[-30:])
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def check_accounting(deliveries: list[Delivery], count: int, frozen: int, killed: int, killed_at_us: int
                     ) -> dict[str, int]:
    """Issue 33's final accounting over every member's lines; returns the tallies."""
    by_record: dict[tuple[int, int], list[Delivery]] = defaultdict(list)
    for delivery in deliveries:
        by_record[(delivery.partition, delivery.offset)].append(delivery)
    assert sorted(by_record) == sorted((index % PARTITIONS, index // PARTITIONS) for index in range(count))
    tallies: dict[str, int] = defaultdict(int)
    for place, history in by_record.items():
        history.sort(key=lambda delivery: delivery.poll_return_us)
        # Each acquisition counts one delivery. The confluent-kafka members print every record they acquire (their
        # client fetches only inside poll); a Java member may give back records it buffered and never returned
        # (e.g. of a partition taken from it when the killed member left): counts no member printed.
        counts = [delivery.delivery_count for delivery in history]
        assert counts == sorted(set(counts)) and counts[0] >= 1, history
        tallies["deliveries no member printed"] += counts[-1] - len(history)
        *earlier, last = history
        # The last delivery is the one that settled it: accepted once or rejected, and nothing after.
        assert last.decision in ("ACCEPT", "REJECT") and last.result == "ok", history
        for before, after in zip(earlier, history[1:]):
            # Given back, then delivered again, and not before: an acknowledged release frees it once the commit
            # carrying it is sent; a record the frozen member held, once its lock expired (the lock began no
            # earlier than the member's poll_start_us); one the killed member held, once it was killed.
            if before.decision == "HOLD" and before.member == frozen:
                assert after.poll_return_us >= before.poll_start_us + LOCK_DURATION_MS * 1000, history
                tallies["held by the frozen member, delivered again"] += 1
            elif before.decision == "HOLD":  # (its locks may have expired first, on a machine slow to kill it)
                assert before.member == killed, history
                assert after.poll_return_us >= min(killed_at_us, before.poll_start_us + LOCK_DURATION_MS * 1000), \
                    history
                tallies["held by the killed member, delivered again"] += 1
            elif before.result == "ok":
                assert before.decision == "RELEASE", history
                assert after.poll_return_us >= before.ack_start_us, history
            else:
                # A member slower than the lock: the broker refused its acknowledgement (the record was no longer
                # its own) and delivered the record again.
                tallies["lock expired before the acknowledgement"] += 1
        first = history[0]
        assert first.decision in ("HOLD", decision(*place, first.delivery_count)), history
        tallies[first.decision] += 1
        tallies["deliveries"] += len(history)
    return tallies


def test_five_members_release_reject_and_a_kill(share_broker: BrokerProcess, java_programs: Path) -> None:
    bootstrap = share_broker.bootstrap_servers
    topic, group = share_topic(bootstrap, PARTITIONS, 0)
    python = [sys.executable, "-m", "tests.interop.share_member", bootstrap, topic, group]
    java = java_command("JavaShareAcknowledger", [bootstrap, topic, group], extra_classpath=[java_programs])
    # The first two confluent-kafka members hold a batch once they have printed a share of their own.
    holding = [python + [str(RECORDS // 50)]] * 2
    commands = holding + [python] * (PYTHON_MEMBERS - len(holding)) + [java] * JAVA_MEMBERS
    members = [Member(index, command) for index, command in enumerate(commands)]
    frozen, killed = members[:2]
    try:
        with Admin({"bootstrap.servers": bootstrap}) as admin:
            wait_until(lambda: len(admin.describe_share_groups([group])[group].members) == len(members),
                       "every member to join", members)
        started = time.monotonic()
        produce(bootstrap, topic, PARTITIONS, RECORDS)
        while not (frozen.frozen and killed.killed_at_us):  # each stopped as soon as it holds a batch
            wait_until(lambda: frozen.printed("holding") != frozen.frozen or
                       killed.printed("holding") != bool(killed.killed_at_us), "two members to hold a batch", members)
            if frozen.printed("holding") and not frozen.frozen:
                frozen.freeze()
            if killed.printed("holding") and not killed.killed_at_us:
                killed.kill()

        settled: set[tuple[int, int]] = set()  # the records some member accepted or rejected, the broker said ok
        seen = [0] * len(members)

        def all_settled() -> bool:
            for member in members:
                deliveries = member.deliveries()
                settled.update((d.partition, d.offset) for d in deliveries[seen[member.index]:]
                               if d.decision in ("ACCEPT", "REJECT") and d.result == "ok")
                seen[member.index] = len(deliveries)
            return len(settled) == RECORDS

        wait_until(all_settled, "every record settled", members)
        elapsed = time.monotonic() - started
        for member in members[2:]:
            member.stop()
        for member in members[2:]:
            assert member.process.wait(60) == 0, "".join(member.errors[-30:])
            assert member.printed("closed")
        tallies = check_accounting([d for member in members for d in member.deliveries()], RECORDS,
                                   frozen=frozen.index, killed=killed.index, killed_at_us=killed.killed_at_us)
        print(f"{RECORDS} records settled in {elapsed:.1f}s ({RECORDS / elapsed:.0f} records/s): {dict(tallies)}")
        # Both held records when they were stopped, and those came back.
        assert tallies["held by the frozen member, delivered again"] > 0
        assert tallies["held by the killed member, delivered again"] > 0
        assert tallies["REJECT"] > 0 and tallies["RELEASE"] > 0
        # Every member took part: the two Java ones as well as the confluent-kafka ones.
        assert all(member.deliveries() for member in members)
    finally:
        for member in members:
            if member.process.poll() is None:
                os.killpg(member.process.pid, signal.SIGKILL)
                member.process.wait(30)
