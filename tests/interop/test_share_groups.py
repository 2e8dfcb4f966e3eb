"""Share groups (KIP-932) with Kafka's own Java KafkaShareConsumer (kafka-clients 4.4.0), against kfk and against
Apache Kafka 4.4.0: the same program (tests/interop/java/JavaShareConsumer.java) must print the same lines on both.

Both brokers run with group.share.delivery.count.limit=2 (a record released twice is archived) and a 6 s
acquisition lock (the lock check waits that long once).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.testing.apache_kafka import ApacheKafka
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.protocol.messages.share_fetch import ShareFetchRequest
from kfk.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from kfk.testing.plugin import TEST_OVERRIDES
from tests.interop.differential import BrokerSession
from tests.interop.jvm import java_programs, kafka_tool, run_program, unique_name  # noqa: F401
from tests.interop.scenarios import (create_topic, produce, records, share_join, share_warm_up, topic_id,
                                     wait_for_coordinators)

SHARE_CONFIG = {
    "group.share.delivery.count.limit": "2",
    "group.share.min.record.lock.duration.ms": "1000",
    "group.share.record.lock.duration.ms": "6000",
}
CHECKS = ("spread", "close", "lock", "ack", "poison")

#: What the program must print on any broker.
EXPECTED = {
    "spread": {"check": "spread", "disjoint": True, "distinct": 30, "deliveries": 30, "delivery_counts": [1]},
    "close": {"check": "close", "delivery_counts_of_held": [2], "distinct": 6},
    "lock": {"check": "lock", "delivery_counts_of_held": [2], "distinct": 6},
    # r0 released once and redelivered; r1 rejected, never again; the others accepted at their first delivery.
    "ack": {"check": "ack", "seen": ["end#1", "r0#1", "r0#2", "r1#1", "r2#1", "r3#1", "r4#1"]},
    "poison": {"check": "poison", "poison_delivery_counts": [1, 2]},
}


@pytest.fixture(scope="module")
def share_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("kfk-share"), {**TEST_OVERRIDES, **SHARE_CONFIG})
    yield broker
    code = broker.stop()
    assert code == 0, f"kfk broker exited with {code}:\n{broker.output()[-4000:]}"


def run_checks(bootstrap: str, java_programs: Path) -> dict[str, dict]:
    topics, groups = unique_name("share"), unique_name("share-group")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(f"{topics}-{check}", 1, 1) for check in CHECKS]).values():
        future.result(30)
    return run_program(java_programs, "JavaShareConsumer", [bootstrap, topics, groups], timeout=300)


def test_java_share_consumer_against_kfk(share_server: BrokerProcess, java_programs: Path) -> None:
    assert run_checks(share_server.bootstrap_servers, java_programs) == EXPECTED


def test_java_share_consumer_against_apache_kafka(tmp_path_factory: pytest.TempPathFactory,
                                                 java_programs: Path) -> None:
    with ApacheKafka(tmp_path_factory.mktemp("kafka-share"), config=SHARE_CONFIG) as node:
        assert run_checks(node.bootstrap_server, java_programs) == EXPECTED


def test_share_groups_tools_list_and_describe_kfk_share_groups(share_server: BrokerProcess) -> None:
    """Apache Kafka 4.4.0's kafka-share-groups.sh over kfk, and `kfk share-groups` printing the same lines: --list,
    --describe --members, --state and --offsets (two members joined with ShareGroupHeartbeat; they stay members for
    the 45 s session timeout, longer than the tools run)."""
    group, topic = unique_name("share-tool"), unique_name("share-tool")
    bootstrap = share_server.bootstrap_servers
    with BrokerSession(bootstrap, "") as session:
        create_topic(session, topic, partitions=2)
        share_join(session, group, topic, "member-a")
        share_join(session, group, topic, "member-b")
        session.call(ShareGroupHeartbeatRequest(group_id=group, member_id="member-a", member_epoch=2), 1)
        # member-a reads 3 records of partition 0 (the group starts at its end: open the session first).
        the_id = topic_id(session, topic)
        for epoch in (0, 1):
            if epoch:
                produce(session, topic, records(count=3))
            session.call(ShareFetchRequest(
                group_id=group, member_id="member-a", share_session_epoch=epoch, max_wait_ms=1000, min_bytes=1,
                max_records=10, batch_size=10, topics=[ShareFetchRequest.FetchTopic(topic_id=the_id, partitions=[
                    ShareFetchRequest.FetchPartition(partition_index=0)])]), 1)

    def tool(*args: str) -> list[str]:
        """Kafka's tool's lines, which `kfk share-groups` must print the same."""
        lines = kafka_tool("share-groups", ["--bootstrap-server", bootstrap, *args]).stdout.splitlines()
        ours = subprocess.run([sys.executable, "-m", "kfk", "share-groups", "--bootstrap-server", bootstrap, *args],
                              capture_output=True, text=True, timeout=60)
        assert ours.returncode == 0, ours.stderr
        if args[0] == "--list":  # other tests' groups come and go on the shared broker (and widen the column)
            mine = [line.split() for line in ours.stdout.splitlines() if group in line or "GROUP" in line]
            assert mine == [line.split() for line in lines if group in line or "GROUP" in line]
        else:
            assert ours.stdout.splitlines() == lines
        return lines

    assert group in tool("--list")
    assert [group, "Stable"] in [line.split() for line in tool("--list", "--state")]
    assert [group, "Stable"] in [line.split() for line in tool("--list", "--state", "Stable,Empty")]
    assert tool("--describe", "--group", group, "--members") == [
        "",
        f"{'GROUP':<{len(group)}} CONSUMER-ID     HOST            CLIENT-ID        #PARTITIONS  ASSIGNMENT",
        f"{group} member-a        /127.0.0.1      kfk-differential 1            {topic}:0",
        f"{group} member-b        /127.0.0.1      kfk-differential 1            {topic}:1",
    ]
    port = bootstrap.rsplit(":", 1)[1]
    assert tool("--describe", "--group", group, "--state")[1:] == [
        f"{'GROUP':<{len(group)}} COORDINATOR (ID)          STATE           #MEMBERS",
        f"{group} {f'127.0.0.1:{port}  (1)':<25} Stable          2",
    ]
    # Acquired, not yet acknowledged: the share-partition start offset is still 0 and the 3 records are the lag.
    assert tool("--describe", "--group", group, "--offsets", "--verbose")[1:] == [
        f"{'GROUP':<{len(group)}} {'TOPIC':<{len(topic)}} PARTITION  LEADER-EPOCH  START-OFFSET  LAG",
        f"{group} {topic} 0          0             0             3",
    ]
    assert tool("--describe", "--group", group)[2:] == [f"{group} {topic} 0          0             3"]


#: kafka-share-groups.sh commands that change or read a group, run by Kafka's tool on one group and by `kfk
#: share-groups` on its twin (GROUP stands for the group's id): the same lines, up to the group's name.
TOOL_STEPS = [
    ("--reset-offsets", "--group", "GROUP", "--topic", "TOPIC", "--to-offset", "1", "--execute"),
    ("--reset-offsets", "--group", "GROUP", "--topic", "TOPIC:1", "--topic", "OTHER", "--to-offset", "2",
     "--dry-run", "--export"),
    ("--reset-offsets", "--group", "GROUP", "--all-topics", "--to-latest", "--execute"),
    ("--describe", "--group", "GROUP"),
    ("--delete-offsets", "--group", "GROUP", "--topic", "OTHER", "--topic", "TOPIC"),
    ("--delete", "--group", "GROUP", "--group", "MISSING"),
]


def tools_side_by_side(bootstrap: str) -> list[list[str]]:
    """Each of TOOL_STEPS by Kafka 4.4.0's kafka-share-groups.sh and by `kfk share-groups` against the broker at
    `bootstrap`, each on a group of its own (the steps change them); returns Kafka's lines, after checking kfk's
    are the same."""
    topic, other = unique_name("share-reset"), unique_name("share-reset-other")
    with BrokerSession(bootstrap, "") as session:
        wait_for_coordinators(session)  # Apache Kafka: its group coordinator, then its share coordinator's
        share_warm_up(session)  # state topic, ready
        create_topic(session, topic, partitions=2)
        create_topic(session, other)
        produce(session, topic, records(count=5))
        produce(session, topic, records(count=3), partition=1)
        produce(session, other, records(count=4))
    base = unique_name("share-reset-group")
    kafka_group, kfk_group = f"{base}-k", f"{base}-f"
    seen = []
    for step in TOOL_STEPS:
        def filled(group: str) -> list[str]:
            names = {"GROUP": group, "TOPIC": topic, "OTHER": other, "MISSING": f"{group}-missing"}
            return [next((arg.replace(key, value) for key, value in names.items() if arg.startswith(key)), arg)
                    for arg in step]

        kafka = kafka_tool("share-groups", ["--bootstrap-server", bootstrap, *filled(kafka_group)]).stdout
        ours = subprocess.run([sys.executable, "-m", "kfk", "share-groups", "--bootstrap-server", bootstrap,
                               *filled(kfk_group)], capture_output=True, text=True, timeout=60)
        assert ours.stdout.replace(kfk_group, kafka_group) == kafka, (step, ours.stderr)
        seen.append(kafka.splitlines())
    return seen


def check_tool_lines(lines: list[list[str]]) -> None:
    """What Kafka's tool printed (on either broker): the plan and the offsets it set, the CSV of a dry run, the
    deletions."""
    reset, export, latest, describe, delete_offsets, delete = ([line.split() for line in step if line.strip()]
                                                               for step in lines)
    # The partitions come in Kafka's hash-map order (kfk's checked to be the same above), sorted here.
    assert sorted(row[2:] for row in reset[1:]) == [["0", "1"], ["1", "1"]]
    assert sorted(row[0].rsplit(",", 2)[1:] for row in export) == [["0", "2"], ["1", "2"]]
    assert sorted(row[2:] for row in latest[1:]) == [["0", "5"], ["1", "3"]]
    assert [row[2:] for row in describe[1:]] == [["0", "5", "0"], ["1", "3", "0"]]
    assert [row[1:] for row in delete_offsets] == [["STATUS"], ["Successful"],
                                                   "Error: There is no offset information to delete.".split()]
    assert delete[0] == "Error: Deletion of some share groups failed:".split()
    assert delete[-1][:6] == "These share groups were deleted successfully:".split()


def test_share_groups_tools_reset_delete_kfk(share_server: BrokerProcess) -> None:
    check_tool_lines(tools_side_by_side(share_server.bootstrap_servers))


def test_share_groups_tools_reset_delete_apache_kafka(apache_kafka: ApacheKafka) -> None:
    check_tool_lines(tools_side_by_side(apache_kafka.bootstrap_server))
