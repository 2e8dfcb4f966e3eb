"""A consumer-protocol group (Java consumers, group.protocol=consumer) on three KRaft brokers whose group coordinator
is killed with kill -9 while records flow: the broker that takes over __consumer_offsets' partition replays the
group's records and serves the members at the epochs and assignments they had. Every record is consumed, committed
offsets never go backwards, no partition has two owners at once, and no member loses its partitions."""

from __future__ import annotations

import pytest

from kfk.common.internal_topics import GROUP_METADATA_TOPIC_NAME
from kfk.coordinator.partitioning import partition_for
from tests.cluster.helpers import create_topic, partitions_of
from tests.interop.consumer_protocol_members import (
    MemberProcess,
    check_commits_never_go_backwards,
    check_ownership_never_overlaps,
    consumed,
    settled,
    wait_until,
)
from tests.interop.jvm import java_programs, unique_name  # noqa: F401
from tests.interop.test_java_consumer_protocol import CONSUMER_PROTOCOL_OVERRIDES, Load

pytestmark = [pytest.mark.integration]


@pytest.fixture
def kfk_metadata_mode() -> str:
    return "kraft"


def test_coordinator_failover_resumes_every_member(kfk_cluster_factory, java_programs) -> None:
    cluster = kfk_cluster_factory(3, CONSUMER_PROTOCOL_OVERRIDES, combined=True)
    bootstrap = cluster.bootstrap_servers
    topic, group = unique_name("failover"), unique_name("g")
    create_topic(bootstrap, topic, 4)
    topic_partitions = {f"{topic}-{i}" for i in range(4)}
    load = Load(bootstrap, topic, 4)
    members = MemberProcess(java_programs, bootstrap, group, topic)
    processes = (members,)
    try:
        members.add()
        members.add()
        wait_until(lambda: settled(processes, topic_partitions, 2), "two members", processes=processes)
        wait_until(lambda: len(consumed(processes)) >= 200, "records flowing", processes=processes)
        offsets_partition = partition_for(group, 3)
        coordinator = partitions_of(bootstrap, GROUP_METADATA_TOPIC_NAME)[offsets_partition][0]
        cluster.kill(coordinator)
        survivors = ",".join(broker.bootstrap_servers for broker_id, broker in cluster.brokers.items()
                             if broker_id != coordinator)
        wait_until(lambda: partitions_of(survivors, GROUP_METADATA_TOPIC_NAME)[offsets_partition][0]
                   not in (coordinator, -1), "a new coordinator", processes=processes)
        before = len(consumed(processes))
        wait_until(lambda: len(consumed(processes)) >= before + 200, "records flowing again", processes=processes)
        produced = load.stop()
        wait_until(lambda: produced <= consumed(processes), "every record consumed", processes=processes)
        assert settled(processes, topic_partitions, 2)
        members.stop()
        events = members.snapshot()
        assert not [e for e in events if e["check"] == "lost"], "a member lost its partitions in the failover"
        check_ownership_never_overlaps(processes)
        check_commits_never_go_backwards(processes)
    finally:
        load.stop()
        members.close()
