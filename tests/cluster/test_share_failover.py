"""Issue 33's share-group scenario on three brokers (KRaft): three confluent-kafka share consumers (processes of their
own, tests/interop/share_member.py, explicit mode: about 10 % of first deliveries released, 1 % rejected, the rest
accepted) read a three-partition topic (replication factor 3, min.insync.replicas 2) while the broker leading most of
its partitions is killed -9, and then the broker whose share coordinator keeps the group's state (the leader of
those __share_group_state partitions, replication factor 3) is killed -9; each comes back before the next kill.

The accounting over every member's lines (one per delivery, printed once the commit carrying its acknowledgement
answered) holds KIP-932's at-least-once promise to its exact window:
- an ACCEPT or REJECT the broker answered without error is durable: that record is never delivered again, by any
  leader that follows (so the share coordinator, and its successor, had it before the answer went out);
- a record is delivered again only after a RELEASE the broker took, or after an acknowledgement the broker refused
  or never answered (its leader died while the record was in flight, or its lock expired first): the only
  acceptances that may not have been made durable, so the only records a member may accept twice;
- none lost: every record delivered and settled (its last delivery accepted or rejected), and at the end the
  group's share-partition start offsets (DescribeShareGroupOffsets) are the log end offsets, so the brokers took
  even the last acceptances whose answers died with their leader (refused in a kill's window, never redelivered).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import defaultdict
from typing import Callable, NamedTuple

import pytest

from kfk.client import Admin, TopicPartition
from kfk.common.internal_topics import SHARE_GROUP_STATE_TOPIC_NAME
from tests.cluster.helpers import create_topic, partitions_of
from tests.cluster.helpers import wait_until as wait_for
from tests.cluster.test_share_state_failover import _share_coordinator
from tests.interop.jvm import unique_name
from tests.interop.share_member import decision
from tests.interop.test_share_acceptance import LOCK_DURATION_MS, SHARE_CONFIG, Delivery, Member, produce, wait_until

pytestmark = [pytest.mark.integration]

#: Records produced twice: before the members start, and once the first killed broker is back (so records are
#: still in flight when the share coordinator is killed, however fast the members are).
HALF, PARTITIONS, MEMBERS = 20_000, 3, 3
#: The log end offset of each partition at the end (produce() deals each half out in turn).
END_OFFSETS = {partition: 2 * len(range(partition, HALF, PARTITIONS)) for partition in range(PARTITIONS)}
RECORDS = sum(END_OFFSETS.values())
OVERRIDES = {**SHARE_CONFIG, "share.coordinator.state.topic.num.partitions": "3"}


@pytest.fixture
def kfk_metadata_mode() -> str:
    return "kraft"


class Kill(NamedTuple):
    """A broker killed -9 (wall-clock microseconds, as the members print), and when it was back in every ISR
    after its restart (the cluster moved on without it, then took it back: leaders may move either time)."""

    broker: int
    killed_us: int
    back_us: int


def now_us() -> int:
    return time.time_ns() // 1000


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    return {partition: leader for partition, (leader, _, _) in partitions_of(bootstrap, topic).items()}


def fully_replicated(bootstrap: str, topics: list[str]) -> bool:
    """Every partition of `topics` led, its ISR all three brokers."""
    return all(leader >= 0 and len(isr) == 3 for topic in topics
               for leader, _, isr in partitions_of(bootstrap, topic).values())


def explained(delivery: Delivery, kills: list[Kill]) -> bool:
    """Whether an acknowledgement the broker refused (or never answered) is one a kill or a lock explains: the
    record was acquired before the killed broker was back, and acknowledged no more than a lock duration before
    the kill (a request still in flight when it came); or it was acknowledged after its lock expired."""
    lock_us = LOCK_DURATION_MS * 1000
    return delivery.ack_start_us - delivery.poll_start_us >= lock_us or any(
        delivery.poll_start_us <= kill.back_us and delivery.ack_start_us >= kill.killed_us - lock_us
        for kill in kills)


def check_accounting(deliveries: list[Delivery], kills: list[Kill]) -> dict[str, int]:
    """The module's accounting (see the docstring) over every member's lines; returns the tallies."""
    by_record: dict[tuple[int, int], list[Delivery]] = defaultdict(list)
    for delivery in deliveries:
        by_record[(delivery.partition, delivery.offset)].append(delivery)
    missing = {(partition, offset) for partition, end in END_OFFSETS.items() for offset in range(end)} - set(by_record)
    assert not missing, f"{len(missing)} records never delivered, e.g. {sorted(missing)[:10]}"
    assert len(by_record) == RECORDS
    tallies: dict[str, int] = defaultdict(int)
    for place, history in by_record.items():
        history.sort(key=lambda delivery: delivery.poll_return_us)
        assert history[0].decision == decision(*place, history[0].delivery_count), history
        *earlier, last = history
        assert last.decision in ("ACCEPT", "REJECT"), history
        assert last.result == "ok" or explained(last, kills), history
        for before, after in zip(earlier, history[1:]):
            if before.result == "ok":
                # Durable once answered: only a release gives a record back, and not before it was sent.
                assert before.decision == "RELEASE", f"settled and then delivered again: {history}"
                assert after.poll_return_us >= before.ack_start_us, history
                tallies["released, delivered again"] += 1
            else:
                assert explained(before, kills), history
                tallies[f"{before.decision} refused ({before.result}), delivered again"] += 1
        tallies[last.decision if last.result == "ok" else f"{last.decision} refused, yet settled"] += 1
        tallies["deliveries"] += len(history)
    return tallies


def test_share_group_durable_across_leader_and_share_coordinator_kills(kfk_cluster_factory) -> None:
    cluster = kfk_cluster_factory(overrides=OVERRIDES)
    bootstrap = cluster.bootstrap_servers
    topic, group = unique_name("share-failover"), unique_name("share-failover-group")
    create_topic(bootstrap, topic, partitions=PARTITIONS, replication_factor=3,
                 config={"min.insync.replicas": "2"})
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        # From offset 0 (before anyone joins); this also creates __share_group_state, replicated three ways.
        assert set(admin.alter_share_group_offsets(
            group, {TopicPartition(topic, partition): 0 for partition in range(PARTITIONS)}).values()) == {None}
    wait_for(lambda: fully_replicated(bootstrap, [topic, SHARE_GROUP_STATE_TOPIC_NAME]), timeout=30,
             what="the topics fully replicated")
    produce(bootstrap, topic, PARTITIONS, HALF)
    command = [sys.executable, "-m", "tests.interop.share_member", bootstrap, topic, group]
    members = [Member(index, command) for index in range(MEMBERS)]
    settled: set[tuple[int, int]] = set()  # the records some member accepted or rejected, the broker said ok
    seen = [0] * MEMBERS

    def settled_count() -> int:
        for member in members:
            deliveries = member.deliveries()
            settled.update((d.partition, d.offset) for d in deliveries[seen[member.index]:]
                           if d.decision in ("ACCEPT", "REJECT") and d.result == "ok")
            seen[member.index] = len(deliveries)
        return len(settled)

    kills: list[Kill] = []

    def kill(broker: int, moved_on: Callable[[], bool], produced: int) -> None:
        """Kill -9 `broker` while the members still have some of the `produced` records to settle; once the
        cluster moved on without it, start it again, and wait until it is back in every ISR."""
        assert settled_count() < produced, f"every record was settled before broker {broker} was killed"
        killed_us = now_us()
        cluster.kill(broker)
        wait_for(moved_on, timeout=30, what=f"the cluster to move on from broker {broker}")
        cluster.start([broker])
        wait_for(lambda: fully_replicated(cluster.bootstrap_servers, [topic, SHARE_GROUP_STATE_TOPIC_NAME]),
                 timeout=60, what=f"broker {broker} back in every ISR")
        kills.append(Kill(broker, killed_us, now_us()))

    try:
        # The first kill: the broker leading the most of the topic's partitions, early in the first half.
        wait_until(lambda: settled_count() >= HALF // 8, "records settled", members)
        led = leaders(bootstrap, topic)
        leader = max(set(led.values()), key=list(led.values()).count)
        kill(leader, lambda: all(broker not in (-1, leader)
                                 for broker in leaders(cluster.bootstrap_servers, topic).values()), HALF)
        # The second: the broker of the group's share coordinator (of partition 0's state; it may lead the other
        # partitions' state too), while records of the second half are in flight.
        produce(cluster.bootstrap_servers, topic, PARTITIONS, HALF)
        wait_until(lambda: settled_count() >= HALF + HALF // 8, "records of the second half settled", members)
        coordinator = _share_coordinator(cluster.bootstrap_servers, group, topic)
        kill(coordinator, lambda: _share_coordinator(cluster.bootstrap_servers, group, topic) != coordinator, RECORDS)
        # Done when the broker has every record done with (a member may not know: an acknowledgement its leader
        # took, made durable, and died before answering).
        with Admin({"bootstrap.servers": cluster.bootstrap_servers}) as admin:
            ends = admin.end_offsets([TopicPartition(topic, partition) for partition in range(PARTITIONS)])
            assert ends == {TopicPartition(topic, partition): end for partition, end in END_OFFSETS.items()}
            wait_until(lambda: {tp: offsets[0] for tp, offsets in admin.list_share_group_offsets(group, ends).items()}
                       == ends, "the share-partition start offsets at the log end offsets", members)
        for member in members:
            member.stop()
        for member in members:
            assert member.process.wait(60) == 0, "".join(member.errors[-30:])
        tallies = check_accounting([d for member in members for d in member.deliveries()], kills)
        print(f"kills {kills}: {dict(tallies)}")
        assert tallies["released, delivered again"] > 0 and tallies["REJECT"] > 0
    finally:
        for member in members:
            if member.process.poll() is None:
                os.killpg(member.process.pid, signal.SIGKILL)
                member.process.wait(30)
