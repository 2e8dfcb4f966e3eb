"""Consumer groups with confluent-kafka (librdkafka 2.16) against a kfk broker: partitions shared in a group,
rebalances on close and on kill -9, offsets that survive a broker restart, exactly-once processing across a rebalance
with synchronous commits, the range and cooperative-sticky assignors, two groups on one topic."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration

#: Short sessions keep rebalances after a crash to about a second; the broker must allow them.
BROKER_OVERRIDES = {"group.min.session.timeout.ms": "500"}
SESSION_TIMEOUT_MS = 1500


@pytest.fixture
def bootstrap(kfk_broker_factory) -> str:
    return kfk_broker_factory(BROKER_OVERRIDES).bootstrap_servers


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(15)


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, str(i).encode(), key=str(i).encode(), partition=i % partitions)
    assert producer.flush(15) == 0


def consumer(bootstrap: str, group: str, **config) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                     "session.timeout.ms": SESSION_TIMEOUT_MS, "heartbeat.interval.ms": 200,
                     "enable.partition.eof": False, **config})


def poll_until(consumers: list[Consumer], condition, timeout: float = 15.0, on_message=None, batch: int = 500) -> None:
    """Poll every consumer (librdkafka runs rebalances inside poll) until `condition()` holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        for c in consumers:
            for message in c.consume(num_messages=batch, timeout=0.02):
                if message.error() is None and on_message is not None:
                    on_message(c, message)


def assigned(c: Consumer) -> set[int]:
    return {tp.partition for tp in c.assignment()}


def test_three_consumers_share_six_partitions_and_take_over_on_close(bootstrap: str) -> None:
    create_topic(bootstrap, "shared", 6)
    consumers = [consumer(bootstrap, "g3") for _ in range(3)]
    for c in consumers:
        c.subscribe(["shared"])
    poll_until(consumers, lambda: [len(assigned(c)) for c in consumers] == [2, 2, 2])
    assert set().union(*(assigned(c) for c in consumers)) == set(range(6))
    started = time.monotonic()
    consumers[0].close()  # a graceful leave: the others rebalance at once
    rest = consumers[1:]
    poll_until(rest, lambda: sorted(len(assigned(c)) for c in rest) == [3, 3])
    assert time.monotonic() - started < SESSION_TIMEOUT_MS / 1000
    assert set().union(*(assigned(c) for c in rest)) == set(range(6))
    for c in rest:
        c.close()


CRASHING_CONSUMER = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": "crash", "session.timeout.ms": %d,
              "heartbeat.interval.ms": 200, "auto.offset.reset": "earliest"})
c.subscribe(["crashy"])
while True:
    c.poll(0.1)
    if c.assignment():
        print("assigned", flush=True)
""" % SESSION_TIMEOUT_MS


def test_killed_consumer_partitions_reassigned_after_session_timeout(bootstrap: str) -> None:
    create_topic(bootstrap, "crashy", 6)
    survivor = consumer(bootstrap, "crash")
    survivor.subscribe(["crashy"])
    poll_until([survivor], lambda: len(assigned(survivor)) == 6)
    victim = subprocess.Popen([sys.executable, "-c", CRASHING_CONSUMER, bootstrap], stdout=subprocess.PIPE,
                              text=True)
    try:
        poll_until([survivor], lambda: len(assigned(survivor)) == 3, timeout=20)
        assert victim.stdout.readline().strip() == "assigned"
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(5)
        killed_at = time.monotonic()
        poll_until([survivor], lambda: len(assigned(survivor)) == 6, timeout=15)
        elapsed = time.monotonic() - killed_at
        # Not before the session timeout (no LeaveGroup came), and soon after it.
        assert SESSION_TIMEOUT_MS / 1000 * 0.8 <= elapsed < SESSION_TIMEOUT_MS / 1000 + 5
    finally:
        if victim.poll() is None:
            victim.kill()
        survivor.close()


def test_committed_offsets_survive_a_broker_restart(kfk_broker_factory) -> None:
    broker = kfk_broker_factory(BROKER_OVERRIDES)
    bootstrap = broker.bootstrap_servers
    create_topic(bootstrap, "durable", 3)
    produce(bootstrap, "durable", 30, 3)
    c = consumer(bootstrap, "keeper", **{"enable.auto.commit": False})
    c.subscribe(["durable"])
    seen = []
    poll_until([c], lambda: len(seen) == 30, on_message=lambda _c, m: seen.append(m))
    c.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in c.committed([ConfluentTopicPartition("durable", p)
                                                                 for p in range(3)])}
    assert committed == {0: 10, 1: 10, 2: 10}
    c.close()
    broker.stop()
    broker.start()
    c = consumer(bootstrap, "keeper", **{"enable.auto.commit": False})
    after = {tp.partition: tp.offset for tp in c.committed([ConfluentTopicPartition("durable", p)
                                                             for p in range(3)], timeout=15)}
    assert after == committed
    # And the group resumes there: nothing is read again.
    produce(bootstrap, "durable", 3, 3)
    c.subscribe(["durable"])
    again = []
    poll_until([c], lambda: len(again) == 3, on_message=lambda _c, m: again.append(int(m.value())))
    assert sorted(again) == [0, 1, 2]
    c.close()


def test_no_message_lost_or_processed_twice_across_a_rebalance(bootstrap: str) -> None:
    create_topic(bootstrap, "exactly", 4)
    total = 400
    produce(bootstrap, "exactly", total, 4)
    processed: Counter = Counter()

    def process(c: Consumer, message) -> None:
        time.sleep(0.003)  # some work, so that the rebalance lands in the middle of the stream
        processed[int(message.value())] += 1
        c.commit(message=message, asynchronous=False)  # commit after processing, synchronously

    first = consumer(bootstrap, "once", **{"enable.auto.commit": False, "max.poll.interval.ms": 10000})
    first.subscribe(["exactly"])
    poll_until([first], lambda: sum(processed.values()) >= total // 4, on_message=process, batch=5)
    second = consumer(bootstrap, "once", **{"enable.auto.commit": False})
    second.subscribe(["exactly"])  # a rebalance in the middle of the stream
    poll_until([first, second], lambda: sum(processed.values()) >= total, timeout=30, on_message=process,
               batch=5)
    assert assigned(first) and assigned(second)
    # Nothing more arrives: poll a little longer to catch a late duplicate.
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        for c in (first, second):
            for message in c.consume(num_messages=5, timeout=0.02):
                if message.error() is None:
                    process(c, message)
    assert set(processed) == set(range(total))
    assert [value for value, count in processed.items() if count != 1] == []
    first.close()
    second.close()


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_assignors(bootstrap: str, strategy: str) -> None:
    create_topic(bootstrap, "assigned", 6)
    consumers = [consumer(bootstrap, f"assign-{strategy}", **{"partition.assignment.strategy": strategy})]
    consumers[0].subscribe(["assigned"])
    poll_until(consumers, lambda: len(assigned(consumers[0])) == 6)
    before = assigned(consumers[0])
    for _ in range(2):
        c = consumer(bootstrap, f"assign-{strategy}", **{"partition.assignment.strategy": strategy})
        c.subscribe(["assigned"])
        consumers.append(c)
    poll_until(consumers, lambda: sorted(len(assigned(c)) for c in consumers) == [2, 2, 2], timeout=20)
    owned = [assigned(c) for c in consumers]
    assert set().union(*owned) == set(range(6)) and sum(len(o) for o in owned) == 6
    if strategy == "cooperative-sticky":
        # Incremental: the first member kept a subset of what it had.
        assert owned[0] <= before
    for c in consumers:
        c.close()


def test_two_groups_each_receive_every_message(bootstrap: str) -> None:
    create_topic(bootstrap, "fanout", 3)
    produce(bootstrap, "fanout", 90, 3)
    received = {"blue": [], "green": []}
    consumers = {}
    for group in received:
        consumers[group] = consumer(bootstrap, group)
        consumers[group].subscribe(["fanout"])

    def on_message(c: Consumer, message) -> None:
        group = next(name for name, owner in consumers.items() if owner is c)
        received[group].append(int(message.value()))

    poll_until(list(consumers.values()), lambda: all(len(v) >= 90 for v in received.values()),
               on_message=on_message)
    assert sorted(received["blue"]) == sorted(received["green"]) == list(range(90))
    for c in consumers.values():
        c.close()


def test_kcat_balanced_consumer(bootstrap: str) -> None:
    """kcat -G (Debian's, librdkafka 2.0.2: JoinGroup v5, SyncGroup v3, OffsetCommit v7, LeaveGroup v1)."""
    create_topic(bootstrap, "kc", 2)
    produce(bootstrap, "kc", 10, 2)

    def kcat(*args: str) -> list[str]:
        result = subprocess.run(["kcat", "-b", bootstrap, "-G", "kcat-group", "-e", "-f", "%s\n", *args, "kc"],
                                capture_output=True, text=True, timeout=30, check=True)
        return sorted(result.stdout.split(), key=int)

    assert kcat("-o", "beginning") == [str(i) for i in range(10)]
    c = consumer(bootstrap, "kcat-group")
    committed = c.committed([ConfluentTopicPartition("kc", p) for p in range(2)], timeout=10)
    assert [tp.offset for tp in committed] == [5, 5]
    c.close()
    produce(bootstrap, "kc", 2, 2)
    assert kcat() == ["0", "1"]  # the group resumes from its committed offsets


def test_static_member_rejoins_within_session_timeout_without_rebalance(bootstrap: str) -> None:
    create_topic(bootstrap, "static", 4)
    peer_assignments: list[set[int]] = []
    peer = consumer(bootstrap, "static-group", **{"session.timeout.ms": 6000})
    peer.subscribe(["static"], on_assign=lambda c, partitions: peer_assignments.append(
        {tp.partition for tp in partitions}))
    static = consumer(bootstrap, "static-group", **{"group.instance.id": "instance-1", "session.timeout.ms": 6000})
    static.subscribe(["static"])
    poll_until([peer, static], lambda: len(assigned(peer)) == 2 and len(assigned(static)) == 2, timeout=20)
    mine = assigned(static)
    rebalances = len(peer_assignments)
    static.close()  # a static member leaves no LeaveGroup behind: the group waits for its session timeout
    restarted = consumer(bootstrap, "static-group", **{"group.instance.id": "instance-1",
                                                       "session.timeout.ms": 6000})
    restarted.subscribe(["static"])
    poll_until([peer, restarted], lambda: assigned(restarted) == mine, timeout=10)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        peer.poll(0.05)
        restarted.poll(0.05)
    assert len(peer_assignments) == rebalances  # the peer never rebalanced
    assert len(assigned(peer)) == 2
    peer.close()
    restarted.close()
