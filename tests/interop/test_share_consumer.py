"""kfk's own ShareConsumer (kfk.client.share_consumer) against kfk and against Apache Kafka 4.4.0: two members
splitting a partition's records, each delivered to one member only; explicit acknowledgement, a released record
delivered again with delivery count 2, a rejected one never again; a group of kfk's member and Java's
KafkaShareConsumer 4.4.0 (tests/interop/java/JavaShareMember.java).

Each group starts at offset 0 (AlterShareGroupOffsets before anyone joins), so no record produced before the
members' first fetch is missed whatever share.auto.offset.reset says.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator

import confluent_kafka
import pytest

from kfk.client import Admin, AlterConfigOp, ConfigResource, ConfigResourceType, NewTopic, Producer, TopicPartition
from kfk.client.aio import AIOShareConsumer
from kfk.client.share_consumer import AcknowledgeType, ShareConsumer, ShareConsumerRecord
from kfk.errors import UnknownTopicOrPartitionError
from kfk.protocol.messages.share_fetch import ShareFetchRequest
from kfk.testing.apache_kafka import ApacheKafka, java_command
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.interop.differential import BrokerSession
from tests.interop.jvm import java_programs, unique_name  # noqa: F401 (a fixture)
from tests.interop.scenarios import share_join, share_warm_up, topic_id, wait_for_coordinators

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def kfk_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("kfk-share-consumer"), dict(TEST_OVERRIDES))
    yield broker
    assert broker.stop() == 0, broker.output()[-4000:]


@pytest.fixture(params=["kfk", "apache-kafka"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    if request.param == "kfk":
        return request.getfixturevalue("kfk_broker").bootstrap_servers
    node: ApacheKafka = request.getfixturevalue("apache_kafka")
    with BrokerSession(node.bootstrap_server, "") as session:
        wait_for_coordinators(session)  # its group coordinator, then its share coordinator's state topic, ready
        share_warm_up(session)
    return node.bootstrap_server


def prepare(bootstrap: str, count: int) -> tuple[str, str]:
    """A one-partition topic with `count` records and a share group that starts at offset 0."""
    topic, group = unique_name("share-consumer"), unique_name("share-consumer-group")
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        deadline = time.monotonic() + 30
        # Apache Kafka's coordinator learns of the topic a moment after CreateTopics answers (from its controller).
        while (error := admin.alter_share_group_offsets(group, {TopicPartition(topic, 0): 0})[
                TopicPartition(topic, 0)]) is not None:
            assert isinstance(error, UnknownTopicOrPartitionError) and time.monotonic() < deadline, error
            time.sleep(0.1)
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for index in range(count):
            producer.send(topic, f"r{index}".encode())
        producer.flush()
    return topic, group


def poll_until(consumers: list[ShareConsumer], done, timeout: float = 60.0) -> list[list[ShareConsumerRecord]]:
    """Poll the consumers in turn until done(records per consumer) holds."""
    seen: list[list[ShareConsumerRecord]] = [[] for _ in consumers]
    deadline = time.monotonic() + timeout
    while not done(seen):
        assert time.monotonic() < deadline, f"only {[len(records) for records in seen]} records after {timeout}s"
        for index, consumer in enumerate(consumers):
            seen[index] += consumer.poll(0.5)
    return seen


def test_two_share_consumers_split_the_records(bootstrap: str) -> None:
    topic, group = prepare(bootstrap, 30)
    config = {"bootstrap.servers": bootstrap, "group.id": group, "max.poll.records": 7}
    with ShareConsumer(config) as first, ShareConsumer(config) as second:
        first.subscribe([topic])
        second.subscribe([topic])
        seen = poll_until([first, second], lambda seen: sum(map(len, seen)) >= 30)
        assert first.commit_sync() is not None
    offsets = [record.offset for records in seen for record in records]
    assert sorted(offsets) == list(range(30))  # each record delivered once, to one member
    assert {record.delivery_count for records in seen for record in records} == {1}
    assert [record.value for record in sorted(seen[0] + seen[1], key=lambda record: record.offset)][:2] == [
        b"r0", b"r1"]


def test_release_is_delivered_again_and_reject_never(bootstrap: str) -> None:
    topic, group = prepare(bootstrap, 5)
    config = {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    with ShareConsumer(config) as consumer:
        consumer.subscribe([topic])
        first = poll_until([consumer], lambda seen: len(seen[0]) >= 5)[0]
        assert [(record.offset, record.delivery_count) for record in first] == [(offset, 1) for offset in range(5)]
        with pytest.raises(ValueError, match="must be acknowledged"):
            consumer.poll(0.1)
        consumer.acknowledge(first[0], AcknowledgeType.RELEASE)
        consumer.acknowledge(first[1], AcknowledgeType.REJECT)
        for record in first[2:]:
            consumer.acknowledge(record)
        assert set(consumer.commit_sync().values()) == {None}
        again = poll_until([consumer], lambda seen: len(seen[0]) >= 1)[0]
        assert [(record.offset, record.value, record.delivery_count) for record in again] == [(0, b"r0", 2)]
        consumer.acknowledge(again[0])
        assert set(consumer.commit_sync().values()) == {None}
        assert consumer.poll(1.0) == []  # the rejected record is never delivered again


def test_acknowledgement_callback_and_the_asyncio_member(bootstrap: str) -> None:
    """The acknowledgement commit callback hears of acknowledgements sent with a poll's ShareFetch and with a
    commit, once per partition, on the caller's side; an AIOShareConsumer (network side on the caller's loop) gets
    the records the sync member released and accepts them."""
    topic, group = prepare(bootstrap, 6)
    tp = TopicPartition(topic, 0)
    heard: list = []
    config = {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    with ShareConsumer(config) as consumer:
        consumer.set_acknowledgement_commit_callback(lambda offsets, error: heard.append((offsets, error)))
        consumer.subscribe([topic])
        first = poll_until([consumer], lambda seen: len(seen[0]) >= 6)[0]
        for record in first:
            consumer.acknowledge(record, AcknowledgeType.ACCEPT if record.offset < 3 else AcknowledgeType.RELEASE)
        assert heard == []  # nothing sent yet
        deadline = time.monotonic() + 30
        while not heard:  # sent with the next ShareFetch, heard in that poll
            assert time.monotonic() < deadline
            for record in consumer.poll(0.2):
                consumer.acknowledge(record, AcknowledgeType.RELEASE)
        assert heard[0] == ({tp: {0, 1, 2, 3, 4, 5}}, None)

    async def asyncio_member() -> list[tuple[int, int]]:
        async with AIOShareConsumer({"bootstrap.servers": bootstrap, "group.id": group}, topics=[topic]) as member:
            member.set_acknowledgement_commit_callback(lambda offsets, error: heard.append((offsets, error)))
            got: list[ShareConsumerRecord] = []
            deadline = time.monotonic() + 30
            while len(got) < 3:
                assert time.monotonic() < deadline, got
                got += await member.poll(0.5)
            del heard[:]
            assert set((await member.commit()).values()) == {None}
            assert heard == [({tp: {3, 4, 5}}, None)]
            assert await member.poll(0.5) == []  # accepted: never delivered again
            return sorted((record.offset, record.delivery_count) for record in got)

    offsets = asyncio.run(asyncio_member())
    assert [offset for offset, _ in offsets] == [3, 4, 5] and all(count >= 2 for _, count in offsets)


def test_records_held_at_close_go_to_another_member(bootstrap: str) -> None:
    """Explicit mode: a member that closes holding unacknowledged records gives them back (its share session's
    final epoch); the next member gets them with delivery count 2."""
    topic, group = prepare(bootstrap, 4)
    config = {"bootstrap.servers": bootstrap, "group.id": group, "share.acknowledgement.mode": "explicit"}
    with ShareConsumer(config) as first:
        first.subscribe([topic])
        held = poll_until([first], lambda seen: len(seen[0]) >= 4)[0]
    assert [record.delivery_count for record in held] == [1, 1, 1, 1]
    with ShareConsumer(config) as second:
        second.subscribe([topic])
        again = poll_until([second], lambda seen: len(seen[0]) >= 4)[0]
        for record in again:
            second.acknowledge(record)
    assert [(record.offset, record.delivery_count) for record in again] == [(offset, 2) for offset in range(4)]


def test_mixed_group_with_javas_share_consumer(bootstrap: str, java_programs: Path) -> None:
    """A kfk ShareConsumer and Java's KafkaShareConsumer 4.4.0 in one group on one partition: together they get
    every record once (records produced one batch each, so that a broker acquiring whole batches can split them)."""
    topic, group = prepare(bootstrap, 0)
    java = subprocess.Popen(java_command("JavaShareMember", [bootstrap, topic, group, "5"],
                                         extra_classpath=[java_programs]),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    java_lines: list[str] = []
    reader = threading.Thread(target=lambda: java_lines.extend(iter(java.stdout.readline, "")), daemon=True)
    reader.start()
    try:
        config = {"bootstrap.servers": bootstrap, "group.id": group, "max.poll.records": 5}
        with ShareConsumer(config) as consumer, Admin({"bootstrap.servers": bootstrap}) as admin:
            consumer.subscribe([topic])
            deadline = time.monotonic() + 90
            while len(admin.describe_share_groups([group])[group].members) < 2:
                assert time.monotonic() < deadline and java.poll() is None, java_lines
                consumer.poll(0.2)
            with Producer({"bootstrap.servers": bootstrap, "linger.ms": 0}) as producer:
                for index in range(40):
                    producer.send(topic, f"r{index}".encode())
                    producer.flush()

            def java_records() -> list[int]:
                return [int(line.split()[0]) for line in list(java_lines) if line[0].isdigit()]

            ours: list[ShareConsumerRecord] = []
            while len(ours) + len(java_records()) < 40:
                assert time.monotonic() < deadline, (len(ours), java_lines[-5:])
                ours += consumer.poll(0.2)
        java.stdin.write("stop\n")
        java.stdin.flush()
        assert java.wait(60) == 0, java.stderr.read()[-4000:]
    finally:
        if java.poll() is None:
            java.kill()
    reader.join(10)
    theirs = java_records()
    assert sorted([record.offset for record in ours] + theirs) == list(range(40))  # each record to one member
    # Which member gets how many is the broker's choice (Apache Kafka may acquire more than max.poll.records).
    assert {str(record.delivery_count) for record in ours} | {line.split()[1] for line in java_lines
                                                             if line[0].isdigit()} == {"1"}
    assert java_lines[-1].strip() == "closed"


def test_a_fetch_waits_for_record_locks_an_acknowledgement_frees(kfk_broker_factory) -> None:
    """Every record lock of the partition held by one member: another member's ShareFetch waits for an
    acknowledgement to free some (as Kafka's delayed share fetch waits until records can be acquired), instead of
    answering nothing at once because the log has records it may not acquire."""
    bootstrap = kfk_broker_factory({"group.share.partition.max.record.locks": "100"}).bootstrap_servers
    topic, group = prepare(bootstrap, 150)
    with ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "max.poll.records": 100,
                        "share.acknowledgement.mode": "explicit"}) as holder:
        holder.subscribe([topic])
        held: list[ShareConsumerRecord] = []
        deadline = time.monotonic() + 60
        while not held:
            assert time.monotonic() < deadline, "the holder got no records"
            held = holder.poll(0.5)
        assert [record.offset for record in held] == list(range(100))  # every lock the partition has
        with BrokerSession(bootstrap, "") as session:
            share_join(session, group, topic, "waiter")
            partitions = [ShareFetchRequest.FetchPartition(partition_index=0)]
            request = ShareFetchRequest(
                group_id=group, member_id="waiter", share_session_epoch=0, max_wait_ms=60_000, min_bytes=1,
                max_records=100, batch_size=100,
                topics=[ShareFetchRequest.FetchTopic(topic_id=topic_id(session, topic), partitions=partitions)])
            answers: list = []
            waiter = threading.Thread(target=lambda: answers.append(session.call(request, 1, record=False)))
            waiter.start()
            time.sleep(1)  # the waiter's fetch reaches the broker first (were it later, it would not wait at all)
            for record in held[:10]:
                holder.acknowledge(record)
            assert holder.commit_sync() == {TopicPartition(topic, 0): None}
            waiter.join(90)
            acquired = [(ranges.first_offset, ranges.last_offset) for answer in answers for topic_data in
                        answer.responses for partition in topic_data.partitions
                        for ranges in partition.acquired_records]
            # The start offset moved to 10: ten more records may be in flight.
            assert acquired == [(100, 109)]
        for record in held[10:]:
            holder.acknowledge(record)


def test_share_sessions_beyond_the_brokers_limit_are_refused_until_one_closes(tmp_path: Path) -> None:
    """group.share.max.share.sessions bounds the broker's share sessions: past it a new session is refused with
    SHARE_SESSION_LIMIT_REACHED (133), a member that cannot open one polls nothing, without an error, as Apache
    Kafka's test of a full session cache expects of Java's consumer, and gets records once a session closes."""
    broker = start_broker(tmp_path / "broker", {**TEST_OVERRIDES, "group.share.max.share.sessions": "1"})
    try:
        bootstrap = broker.bootstrap_servers
        topic, group = prepare(bootstrap, 3)
        config = {"bootstrap.servers": bootstrap, "group.id": group}
        second = ShareConsumer(config)
        try:
            with ShareConsumer(config) as first:
                first.subscribe([topic])
                assert len(poll_until([first], lambda seen: len(seen[0]) >= 3)[0]) == 3
                with BrokerSession(bootstrap, "") as session:
                    refused = session.call(ShareFetchRequest(
                        group_id=group, member_id="not-the-first", share_session_epoch=0, max_wait_ms=0,
                        min_bytes=1, max_records=10, batch_size=10, topics=[]), 1, record=False)
                assert refused.error_code == 133  # SHARE_SESSION_LIMIT_REACHED
                second.subscribe([topic])
                with Producer({"bootstrap.servers": bootstrap}) as producer:
                    producer.send(topic, b"while the cache is full", partition=0)
                    producer.flush()
                deadline = time.monotonic() + 3
                while time.monotonic() < deadline:
                    assert second.poll(0.5) == []
            # the first member's session closed with it
            assert [record.value for record in poll_until([second], lambda seen: seen[0])[0]] == [
                b"while the cache is full"]
        finally:
            second.close()
    finally:
        assert broker.stop() == 0, broker.output()[-4000:]


def test_a_read_committed_share_group_delivers_committed_transactions_only(bootstrap: str) -> None:
    """share.isolation.level=read_committed: records of aborted transactions are never delivered, those of an open
    transaction only once it commits (the last stable offset holds the group back), on kfk as on Apache Kafka."""
    topic, group = prepare(bootstrap, 0)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        errors = admin.incremental_alter_configs({ConfigResource(ConfigResourceType.GROUP, group): [
            AlterConfigOp("share.isolation.level", "read_committed")]})
        assert set(errors.values()) == {None}, errors
    # librdkafka's transactional producer (kfk's producer once got INVALID_TXN_STATE from Apache Kafka 4.4's EndTxn
    # here under CI's load: an open question about kfk's client, not what this test is about)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "transactional.id": unique_name("share-txn")})
    producer.init_transactions(30)
    for values, commit in (([b"committed-1", b"committed-2"], True), ([b"aborted"], False), ([b"committed-3"], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value, partition=0)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    producer.begin_transaction()
    producer.produce(topic, b"open until the end", partition=0)
    producer.flush(30)
    config = {"bootstrap.servers": bootstrap, "group.id": group}
    with ShareConsumer(config) as consumer:
        consumer.subscribe([topic])
        seen = poll_until([consumer], lambda seen: len(seen[0]) >= 3)[0]
        deadline = time.monotonic() + 3  # nothing more while the last transaction is open
        while time.monotonic() < deadline:
            seen += consumer.poll(0.5)
        assert [record.value for record in seen] == [b"committed-1", b"committed-2", b"committed-3"]
        producer.commit_transaction(30)
        later = poll_until([consumer], lambda later: later[0])[0]
        assert [record.value for record in later] == [b"open until the end"]
