"""The online migration between the group protocols with real clients (confluent-kafka / librdkafka 2.16) against one
kfk broker: classic consumers (cooperative-sticky) consuming a topic, then consumers with group.protocol=consumer
joining the same group (the broker upgrades it to a consumer group and serves the classic members from the new
protocol's assignment), then the classic members leaving (a consumer group remains); and the reverse, a mixed group
whose last consumer-protocol member leaves becoming a classic group again; and kafka-python's eager members
upgraded by kfk's own consumer (group.protocol=consumer), then downgraded. Throughout: every record consumed, no
partition owned by two members at once (the rebalance callbacks' timestamps), committed offsets never going
backwards. The coordinator's side of it is in tests/coordinator/test_group_migration.py."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import ConsumerGroupType
from confluent_kafka.admin import AdminClient

from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.integration.test_consumer_groups_confluent_kip848 import (
    BROKER_OVERRIDES,
    Log,
    Member,
    PollingMember,
    consumed_records,
    create_topic,
    poll_until,
    produce,
    shared,
    unique,
)

pytestmark = pytest.mark.integration

CLASSIC = {"group.protocol": "classic", "partition.assignment.strategy": "cooperative-sticky",
           "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("kfk-migration"),
                          {**TEST_OVERRIDES, **BROKER_OVERRIDES, "group.initial.rebalance.delay.ms": "0"})
    yield broker
    assert broker.stop() == 0, broker.output()[-4000:]


def group_type(bootstrap: str, group: str) -> ConsumerGroupType:
    """The group's type as ListGroups gives it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept until the answer: destroying it cancels the call
    listed = admin.list_consumer_groups().result(30)
    types = [g.type for g in listed.valid if g.group_id == group]
    assert len(types) == 1, (group, [g.group_id for g in listed.valid], listed.errors)
    return types[0]


class Load:
    """Records produced in the background while the group changes."""

    def __init__(self, bootstrap: str, topic: str, partitions: int) -> None:
        self.produced: set[tuple[int, int]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(bootstrap, topic, partitions), daemon=True)
        self._thread.start()

    def _run(self, bootstrap: str, topic: str, partitions: int) -> None:
        while not self._stop.is_set():
            self.produced.update(produce(bootstrap, topic, 40, partitions))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def test_a_classic_group_upgraded_online_then_left_by_its_classic_members(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap_servers
    topic, group = unique("upgrade"), unique("g")
    create_topic(bootstrap, topic, 4)
    partitions = {(topic, i) for i in range(4)}
    log = Log()
    load = Load(bootstrap, topic, 4)
    members: list[Member] = []
    try:
        for name in ("classic-1", "classic-2"):
            members.append(Member(bootstrap, group, log, name, **CLASSIC))
            members[-1].subscribe([topic])
        poll_until(members, lambda: shared(members, partitions), "the classic group")
        assert group_type(bootstrap, group) == ConsumerGroupType.CLASSIC
        for name in ("consumer-1", "consumer-2"):
            members.append(Member(bootstrap, group, log, name))
            members[-1].subscribe([topic])
            poll_until(members, lambda: shared(members, partitions), f"the mixed group with {name}")
        assert group_type(bootstrap, group) == ConsumerGroupType.CONSUMER
        while members[0].name.startswith("classic"):
            members.pop(0).close()
            poll_until(members, lambda: shared(members, partitions), "the group after a classic member left")
        assert group_type(bootstrap, group) == ConsumerGroupType.CONSUMER
        load.stop()
        poll_until(members, consumed_records(log, topic, load.produced), "every record")
        log.check()
    finally:
        load.stop()
        for member in members:
            member.close()


def test_a_mixed_group_downgraded_when_its_last_consumer_protocol_member_leaves(broker: BrokerProcess) -> None:
    bootstrap = broker.bootstrap_servers
    topic, group = unique("downgrade"), unique("g")
    create_topic(bootstrap, topic, 4)
    partitions = {(topic, i) for i in range(4)}
    log = Log()
    load = Load(bootstrap, topic, 4)
    members: list[Member] = []
    try:
        members.append(Member(bootstrap, group, log, "classic-1", **CLASSIC))
        members[0].subscribe([topic])
        poll_until(members, lambda: shared(members, partitions), "the classic group")
        members.append(Member(bootstrap, group, log, "consumer-1"))
        members[1].subscribe([topic])
        poll_until(members, lambda: shared(members, partitions), "the mixed group")
        assert group_type(bootstrap, group) == ConsumerGroupType.CONSUMER
        members.pop().close()
        poll_until(members, lambda: shared(members, partitions), "the classic member alone")
        assert group_type(bootstrap, group) == ConsumerGroupType.CLASSIC
        members.append(Member(bootstrap, group, log, "classic-2", **CLASSIC))
        members[1].subscribe([topic])
        poll_until(members, lambda: shared(members, partitions), "two classic members again")
        load.stop()
        poll_until(members, consumed_records(log, topic, load.produced), "every record")
        log.check()
    finally:
        load.stop()
        for member in members:
            member.close()


class PythonMember(PollingMember):
    """A member of another client, with the same record of ownership and commits as Member: kafka-python (classic,
    eager range assignor: it gives up all its partitions before each rejoin) or kfk's consumer (group.protocol=
    consumer)."""

    def __init__(self, consumer, log: Log, name: str, records) -> None:
        self.consumer, self.log, self.name, self.owned = consumer, log, name, frozenset()
        self._records = records

    def assigned(self, partitions) -> None:
        keys = {(tp.topic, tp.partition) for tp in partitions}
        self.owned = self.owned | keys
        self.log.ownership(self.name, keys, opened=True)

    def revoked(self, partitions) -> None:
        keys = {(tp.topic, tp.partition) for tp in partitions}
        self.log.ownership(self.name, keys, opened=False)
        self.owned = self.owned - keys

    def poll_once(self) -> None:
        records = self._records()
        for topic, partition, offset in records:
            self.log.consumed.add((topic, partition, offset))
        if records:
            positions: dict[tuple[str, int], int] = {}
            for topic, partition, offset in records:
                positions[(topic, partition)] = max(positions.get((topic, partition), 0), offset + 1)
            try:
                self.commit(positions)
            except Exception:  # noqa: BLE001 - a commit refused across a rebalance: the next owner reads again
                return
            for (topic, partition), offset in positions.items():
                self.log.commits.append((time.monotonic_ns(), topic, partition, offset))

    def close(self) -> None:
        self.stop_polling()
        self.consumer.close()
        self.log.ownership(self.name, set(self.owned), opened=False)
        self.owned = frozenset()


def kafka_python_member(bootstrap: str, group: str, topic: str, log: Log, name: str) -> PythonMember:
    from kafka import KafkaConsumer, OffsetAndMetadata as KpOffset, TopicPartition as KpPartition
    from kafka.consumer.subscription_state import ConsumerRebalanceListener

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, client_id=name, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=6000, heartbeat_interval_ms=500)

    def records():
        return [(r.topic, r.partition, r.offset) for batch in consumer.poll(timeout_ms=50).values() for r in batch]

    member = PythonMember(consumer, log, name, records)

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            member.revoked(revoked)

        def on_partitions_assigned(self, assigned):
            member.assigned(assigned)

    member.commit = lambda positions: consumer.commit({KpPartition(t, p): KpOffset(o, "", -1)
                                                       for (t, p), o in positions.items()})
    consumer.subscribe([topic], listener=Listener())
    member.start_polling()
    return member


def kfk_member(bootstrap: str, group: str, topic: str, log: Log, name: str) -> PythonMember:
    from kfk.client import Consumer as KfkConsumer, TopicPartition as KfkPartition

    consumer = KfkConsumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
                            "client.id": name, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    member = PythonMember(consumer, log, name, lambda: [(r.topic, r.partition, r.offset) for r in consumer.poll(0.05)])

    class Listener:
        def on_partitions_assigned(self, partitions):
            member.assigned(partitions)

        def on_partitions_revoked(self, partitions):
            member.revoked(partitions)

        on_partitions_lost = on_partitions_revoked

    member.commit = lambda positions: consumer.commit_sync({KfkPartition(t, p): o for (t, p), o in positions.items()})
    consumer.subscribe([topic], listener=Listener())
    member.start_polling()
    return member


def test_kafka_python_eager_members_upgraded_by_kfk_consumers_and_downgraded(broker: BrokerProcess,
                                                                            caplog: pytest.LogCaptureFixture) -> None:
    """kafka-python's eager members rejoin owning nothing: the coordinator takes their JoinGroup as the revocation of
    everything; kfk's consumer-protocol member then leaves and the group is classic again."""
    # Twice, under the full suite's load only, kafka-python alone in the new group owned nothing for 60 s after
    # assigning with no metadata for the topic yet: its group and metadata steps are kept for the next time.
    caplog.set_level(logging.DEBUG, logger="kafka.coordinator")
    caplog.set_level(logging.DEBUG, logger="kafka.cluster")
    bootstrap = broker.bootstrap_servers
    topic, group = unique("eager"), unique("g")
    create_topic(bootstrap, topic, 4)
    partitions = {(topic, i) for i in range(4)}
    log = Log()
    load = Load(bootstrap, topic, 4)
    members: list = []
    try:
        members.append(kafka_python_member(bootstrap, group, topic, log, "kafka-python"))
        try:
            poll_until(members, lambda: shared(members, partitions), "the classic group")
        except AssertionError as error:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            described = admin.describe_consumer_groups([group])[group].result(30)
            raise AssertionError(f"{error}; the broker describes the group as {described}") from None
        members.append(kfk_member(bootstrap, group, topic, log, "kfk"))
        poll_until(members, lambda: shared(members, partitions), "the mixed group")
        assert group_type(bootstrap, group) == ConsumerGroupType.CONSUMER
        members.pop().close()
        poll_until(members, lambda: shared(members, partitions), "the classic member alone")
        assert group_type(bootstrap, group) == ConsumerGroupType.CLASSIC
        load.stop()
        poll_until(members, consumed_records(log, topic, load.produced), "every record")
        log.check()
    finally:
        load.stop()
        for member in members:
            member.close()
