"""Snapshot-based catch-up on real processes (KIP-630): 3 controller-only nodes and 1 broker with small metadata
segments and frequent snapshots. One controller is killed and the broker frozen (SIGSTOP); meanwhile the others
create enough topics to snapshot and trim their metadata logs past where the stopped ones are, and delete one that
the broker holds. The controller restarted (it loads the snapshot while it starts) and the broker resumed (it loads
it while it runs, its image replaced whole) both catch up through FetchSnapshot: their logs say so, DescribeQuorum
and `kfk metadata-quorum describe --replication` show them caught up, the broker serves every topic to
confluent-kafka, and the deleted topic is gone from it, partition folder included."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from confluent_kafka import Consumer, Producer

from kfk.errors import ErrorCode
from kfk.protocol.messages.create_topics import CreateTopicsRequest
from kfk.protocol.messages.delete_topics import DeleteTopicsRequest
from kfk.storage.log_files import snapshot_id_from_file_name
from tests.cluster.helpers import admin, wait_until
from tests.cluster.test_kraft_cluster import quorum_leader
from tests.integration.wire import connect, request

pytestmark = [pytest.mark.integration]

TOPICS = 300
TOPICS_PER_REQUEST = 20
OVERRIDES = {
    "metadata.log.max.record.bytes.between.snapshots": "8192",
    # Small, but above the largest batch here (fencing the broker changes every partition in one batch).
    "metadata.log.segment.bytes": "16384",
    "metadata.log.segment.min.bytes": "16384",  # below Kafka's 8 MiB floor, as Kafka's own tests lower it
    # Long enough that the frozen broker stays unfenced while the topics are placed on it.
    "broker.session.timeout.ms": "12000",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "default.replication.factor": "1",
    "num.partitions": "1",
}
BROKER = 1


@pytest.fixture
def kfk_metadata_mode() -> str:
    return "kraft"


def metadata_dir(node) -> str:
    return os.path.join(node.log_dir, "__cluster_metadata-0")


def snapshots_and_log_start(node) -> tuple[list[tuple[int, int]], int]:
    """The node's snapshot ids on disk and the base offset of its first metadata segment."""
    names = os.listdir(metadata_dir(node))
    snapshots = sorted(found for found in map(snapshot_id_from_file_name, names) if found is not None)
    segments = sorted(int(name.split(".")[0]) for name in names if name.endswith(".log"))
    return snapshots, segments[0]


def describe_replication(controller_port: int) -> dict[int, tuple[int, int]]:
    """`kfk metadata-quorum describe --replication` through a controller: (log end offset, lag) by node id."""
    done = subprocess.run([sys.executable, "-m", "kfk", "metadata-quorum", "describe", "--bootstrap-controller",
                           f"127.0.0.1:{controller_port}", "--replication"],
                          capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    rows = {}
    for line in done.stdout.splitlines()[1:]:  # NodeId DirectoryId LogEndOffset Lag LastFetchTimestamp ...
        fields = line.split()
        rows[int(fields[0])] = (int(fields[2]), int(fields[3]))
    return rows


def create_topics(controller_port: int, names: list[str]) -> None:
    with connect(f"127.0.0.1:{controller_port}") as sock:
        response = request(sock, CreateTopicsRequest(timeout_ms=10_000, topics=[
            CreateTopicsRequest.CreatableTopic(name=name, num_partitions=1, replication_factor=1)
            for name in names]), 7)
    errors = {topic.name: ErrorCode(topic.error_code).name for topic in response.topics if topic.error_code}
    assert not errors, errors


def delete_topic(controller_port: int, name: str) -> None:
    with connect(f"127.0.0.1:{controller_port}") as sock:
        response = request(sock, DeleteTopicsRequest(topic_names=[name], timeout_ms=10_000), 5)
    assert response.responses[0].error_code == ErrorCode.NONE, response


def test_a_controller_and_a_broker_down_while_the_others_trimmed_catch_up_through_fetch_snapshot(
        kfk_cluster_factory) -> None:
    cluster = kfk_cluster_factory(size=1, controllers=3, overrides=OVERRIDES)
    leader = wait_until(lambda: quorum_leader(cluster), what="the active controller")
    away = max(node_id for node_id in cluster.voters if node_id != leader)
    create_topics(cluster.voters[leader], ["doomed"])
    doomed_dir = os.path.join(cluster.broker(BROKER).log_dir, "doomed-0")
    wait_until(lambda: os.path.isdir(doomed_dir), what="the broker creating doomed-0")
    cluster.kill(away)
    cluster.pause(BROKER)
    # Whatever the stopped nodes had, the leader had too: its log end bounds theirs.
    stopped_at = describe_replication(cluster.voters[leader])[leader][0]

    names = [f"snap-{index:04d}" for index in range(TOPICS)]
    for start in range(0, TOPICS, TOPICS_PER_REQUEST):
        create_topics(cluster.voters[leader], names[start:start + TOPICS_PER_REQUEST])
    delete_topic(cluster.voters[leader], "doomed")
    live = [node_id for node_id in cluster.voters if node_id != away]

    def trimmed_past_the_stopped() -> bool:
        for node_id in live:
            snapshots, first_segment = snapshots_and_log_start(cluster.nodes[node_id])
            if not snapshots or first_segment <= stopped_at:
                return False
        return True

    wait_until(trimmed_past_the_stopped, what="the live controllers' logs trimmed past the stopped nodes' ends")
    leader_snapshots, _ = snapshots_and_log_start(cluster.nodes[leader])

    cluster.start([away], timeout=60)
    cluster.resume(BROKER)
    for node_id in (away, BROKER):
        node = cluster.nodes[node_id]
        wait_until(lambda node=node: "fetched from the leader loaded" in node.output(),
                   what=f"node {node_id} loading a snapshot fetched from the leader")
        assert "fetching the metadata snapshot" in node.output()
        snapshots, first_segment = snapshots_and_log_start(node)
        assert snapshots and snapshots[-1][0] > stopped_at and snapshots[-1][0] >= leader_snapshots[0][0]
        assert first_segment >= leader_snapshots[0][0]  # its old log went: it restarted at the snapshot's end

    def caught_up() -> dict[int, tuple[int, int]] | None:
        rows = describe_replication(cluster.voters[leader])
        return rows if all(node_id in rows and rows[node_id][1] <= 5 for node_id in (away, BROKER)) else None

    rows = wait_until(caught_up, what="the restarted nodes caught up in DescribeQuorum")
    for node_id in (away, BROKER):
        assert rows[node_id][0] >= leader_snapshots[-1][0], (node_id, rows)

    bootstrap = cluster.broker(BROKER).bootstrap_servers
    listed = wait_until(lambda: (topics := admin(bootstrap).list_topics(timeout=10).topics)
                        and all(name in topics for name in names) and topics,
                        what="every topic listed by the restarted broker")
    assert all(not listed[name].error for name in names)
    assert "doomed" not in listed
    wait_until(lambda: not os.path.exists(doomed_dir), what="the deleted topic's partition folder removed")
    sample = [names[0], names[TOPICS // 2], names[-1]]
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for name in sample:
        producer.produce(name, value=name.encode())
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fsnap", "auto.offset.reset": "earliest"})
    consumer.subscribe(sample)
    seen: set[str] = set()
    deadline = time.monotonic() + 30
    while seen != set(sample) and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.add(message.value().decode())
    consumer.close()
    assert seen == set(sample)
