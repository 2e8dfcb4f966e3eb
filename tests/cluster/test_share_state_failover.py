"""Durable share-group state across brokers (KIP-932): Kafka's Java KafkaShareConsumer 4.4.0 accepts part of a
replicated topic; the broker of the share partition's share coordinator is killed -9 (its __share_group_state
partition moves to another broker, which loads it), comes back, then the partition's leader is killed -9 (the new
leader reads the state from the share coordinator, over the inter-broker connection when it is another broker);
a new share consumer gets exactly the records not accepted, each once."""

from __future__ import annotations

from pathlib import Path

import pytest

from kfk.common.uuids import uuid_to_base64
from kfk.errors import ErrorCode
from kfk.protocol.messages.find_coordinator import FindCoordinatorRequest
from kfk.protocol.messages.metadata import MetadataRequest
from tests.cluster.helpers import create_topic, partitions_of, wait_until
from tests.integration.wire import connect, request
from tests.interop.jvm import java_programs, run_program, unique_name  # noqa: F401

pytestmark = [pytest.mark.integration]

RECORDS, ACCEPTED = 20, 7  # JavaShareRestart sends 20 records
OVERRIDES = {"share.coordinator.state.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0"}


@pytest.fixture
def kfk_metadata_mode() -> str:
    return "kraft"


def _share_coordinator(bootstrap: str, group: str, topic: str) -> int:
    """The broker whose share coordinator keeps the group's state of partition 0 (FindCoordinator key type 2)."""
    def found() -> int | None:
        for address in bootstrap.split(","):
            try:
                sock = connect(address, timeout=5)
            except OSError:
                continue
            try:
                metadata = request(sock, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                                         allow_auto_topic_creation=False), 12)
                key = f"{group}:{uuid_to_base64(metadata.topics[0].topic_id)}:0"
                answer = request(sock, FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 6).coordinators[0]
            finally:
                sock.close()
            return answer.node_id if answer.error_code == ErrorCode.NONE else None
        return None
    return wait_until(found, what="the share coordinator")


def test_share_state_carries_over_a_share_coordinator_move_and_a_leader_change(kfk_cluster_factory,
                                                                               java_programs: Path) -> None:  # noqa: F811
    cluster = kfk_cluster_factory(overrides=OVERRIDES)
    topic, group = unique_name("share-failover"), unique_name("share-failover")
    create_topic(cluster.bootstrap_servers, topic, partitions=1, replication_factor=3)
    first = run_program(java_programs, "JavaShareRestart",
                        ["accept-halt", cluster.bootstrap_servers, topic, group, str(ACCEPTED)])["accept-halt"]
    assert len(first["accepted"]) == ACCEPTED
    coordinator = _share_coordinator(cluster.bootstrap_servers, group, topic)
    cluster.kill(coordinator)
    moved = wait_until(lambda: (node := _share_coordinator(cluster.bootstrap_servers, group, topic)) != coordinator
                       and node, what="the share coordinator moved")
    cluster.start([coordinator])
    wait_until(lambda: len(partitions_of(cluster.bootstrap_servers, topic)[0][2]) == 3, what="a full ISR")
    leader = partitions_of(cluster.bootstrap_servers, topic)[0][0]
    cluster.kill(leader)
    wait_until(lambda: partitions_of(cluster.bootstrap_servers, topic)[0][0] not in (-1, leader), what="a new leader")
    rest = run_program(java_programs, "JavaShareRestart", ["rest", cluster.bootstrap_servers, topic, group,
                                                           str(RECORDS - ACCEPTED)])["rest"]
    values = {f"r{index:02d}" for index in range(RECORDS)}
    assert rest == {"check": "rest", "accepted": sorted(values - set(first["accepted"])),
                    "deliveries": RECORDS - ACCEPTED, "probes": []}, f"coordinator {coordinator} -> {moved}"
