"""The Java consumer (kafka-clients, group.protocol=consumer) against one kfk broker: the KIP-848 consumer group
protocol end to end. Members join and leave one by one while records flow, a static member restarts within its
session timeout, a regular expression subscription picks up a topic created later, a member's JVM is killed with
SIGKILL. Each time: every record consumed, committed offsets never going backwards, and no partition owned by two
members at once (tests/interop/consumer_protocol_members.py)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.interop.consumer_protocol_members import (
    MemberProcess,
    check_commits_never_go_backwards,
    check_ownership_never_overlaps,
    consumed,
    current_owners,
    settled,
    wait_until,
)
from tests.interop.jvm import java_programs, unique_name  # noqa: F401


pytestmark = pytest.mark.integration

#: Short sessions (a killed member's partitions move after 6 s) and heartbeats (a rebalance takes about a second).
CONSUMER_PROTOCOL_OVERRIDES = {
    "group.consumer.min.session.timeout.ms": "3000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "500",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("kfk-kip848"), {**TEST_OVERRIDES, **CONSUMER_PROTOCOL_OVERRIDES})
    yield broker
    assert broker.stop() == 0, broker.output()[-4000:]


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


class Load:
    """Records produced in the background until stopped; `produced` holds each record's (partition, offset)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.produced: set[tuple[str, int]] = set()
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self._thread = threading.Thread(target=self._run, args=(topic, partitions), daemon=True)
        self._thread.start()

    def _delivered(self, error, message) -> None:
        if error is None:
            self.produced.add((f"{message.topic()}-{message.partition()}", message.offset()))

    def _run(self, topic: str, partitions: int) -> None:
        sequence = 0
        while not self._stop.is_set() and sequence < 50_000:
            self._producer.produce(topic, str(sequence).encode(), partition=sequence % partitions,
                                   on_delivery=self._delivered)
            sequence += 1
            if sequence % 20 == 0:
                self._producer.poll(0.02)
        self._producer.flush(30)

    def stop(self) -> set[tuple[str, int]]:
        self._stop.set()
        self._thread.join(60)
        return self.produced


def test_members_join_and_leave_one_by_one_under_load(broker: BrokerProcess, java_programs) -> None:
    topic, group = unique_name("churn"), unique_name("g")
    create_topic(broker.bootstrap_servers, topic, 6)
    partitions = {f"{topic}-{i}" for i in range(6)}
    load = Load(broker.bootstrap_servers, topic, 6)
    members = MemberProcess(java_programs, broker.bootstrap_servers, group, topic)
    processes = (members,)
    try:
        for count in range(1, 4):
            members.add()
            wait_until(lambda: settled(processes, partitions, count), f"{count} members sharing {topic}",
                       processes=processes)
        for leaving, remaining in ((0, 2), (1, 1)):
            members.remove(leaving)
            wait_until(lambda: settled(processes, partitions, remaining), f"{remaining} members after a leave",
                       processes=processes)
        produced = load.stop()
        wait_until(lambda: produced <= consumed(processes), "every record consumed", processes=processes)
        members.stop()
        check_ownership_never_overlaps(processes)
        check_commits_never_go_backwards(processes)
    finally:
        load.stop()
        members.close()


def test_static_member_restarted_within_its_session_timeout_keeps_its_partitions(
        broker: BrokerProcess, java_programs) -> None:
    topic, group = unique_name("static"), unique_name("g")
    create_topic(broker.bootstrap_servers, topic, 4)
    partitions = {f"{topic}-{i}" for i in range(4)}
    members = MemberProcess(java_programs, broker.bootstrap_servers, group, topic)
    processes = (members,)
    try:
        members.add("instance-a")
        members.add("instance-b")
        wait_until(lambda: settled(processes, partitions, 2), "two static members", processes=processes)
        before = current_owners(processes)
        a_partitions = before[(0, 0)]

        def changes_of_b() -> list[dict]:
            return [e for e in members.snapshot() if e.get("member") == 1 and e["check"] in (
                "assigned", "revoked", "lost") and e["partitions"]]

        b_changes = changes_of_b()
        members.remove(0)  # leaves with epoch -2: its partitions wait for it
        wait_until(lambda: any(e["check"] == "closed" for e in members.snapshot()), "instance-a closed")
        members.add("instance-a")
        wait_until(lambda: current_owners(processes).get((0, 2)) == a_partitions,
                   "instance-a back with its partitions", processes=processes)
        assert changes_of_b() == b_changes, "instance-b's assignment changed: a rebalance"
        members.stop()
        check_ownership_never_overlaps(processes)
    finally:
        members.close()


@pytest.mark.parametrize("kind", ["re2", "re"])
def test_regex_subscription_picks_up_a_topic_created_later(broker: BrokerProcess, java_programs, kind: str) -> None:
    """re2: the broker resolves the regular expression (SubscriptionPattern, RE2 syntax); re: the client resolves a
    java.util.regex Pattern and sends the topic names it matches."""
    prefix, group = unique_name("re"), unique_name("g")
    first, later = f"{prefix}-a", f"{prefix}-b"
    create_topic(broker.bootstrap_servers, first, 2)
    members = MemberProcess(java_programs, broker.bootstrap_servers, group, f"{kind}:{prefix}-[ab]")
    processes = (members,)
    try:
        members.add()
        wait_until(lambda: settled(processes, {f"{first}-0", f"{first}-1"}, 1), "the first topic assigned",
                   processes=processes)
        create_topic(broker.bootstrap_servers, later, 2)
        wait_until(lambda: settled(processes, {f"{first}-0", f"{first}-1", f"{later}-0", f"{later}-1"}, 1),
                   "the topic created later assigned", processes=processes)
        load = Load(broker.bootstrap_servers, later, 2)
        while len(load.produced) < 200:
            threading.Event().wait(0.05)
        produced = load.stop()
        wait_until(lambda: produced <= consumed(processes), "the new topic's records consumed", processes=processes)
        members.stop()
        check_ownership_never_overlaps(processes)
    finally:
        members.close()


def test_a_member_killed_with_sigkill_loses_its_partitions_after_its_session(
        broker: BrokerProcess, java_programs) -> None:
    topic, group = unique_name("kill"), unique_name("g")
    create_topic(broker.bootstrap_servers, topic, 4)
    partitions = {f"{topic}-{i}" for i in range(4)}
    load = Load(broker.bootstrap_servers, topic, 4)
    doomed = MemberProcess(java_programs, broker.bootstrap_servers, group, topic)
    survivor = MemberProcess(java_programs, broker.bootstrap_servers, group, topic)
    processes = (doomed, survivor)
    try:
        doomed.add()
        wait_until(lambda: settled(processes, partitions, 1), "the first member", processes=processes)
        survivor.add()
        wait_until(lambda: settled(processes, partitions, 2), "two members", processes=processes)
        doomed.kill()
        wait_until(lambda: settled(processes, partitions, 1), "the survivor owning every partition",
                   processes=processes)
        produced = load.stop()
        wait_until(lambda: produced <= consumed(processes), "every record consumed", processes=processes)
        survivor.stop()
        check_ownership_never_overlaps(processes)
        check_commits_never_go_backwards(processes)
    finally:
        load.stop()
        doomed.close()
        survivor.close()
