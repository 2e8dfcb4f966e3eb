"""Durable share-group state (KIP-932's share coordinator and __share_group_state): Kafka's Java
KafkaShareConsumer 4.4.0 accepts part of a topic, the kfk broker restarts (cleanly, and killed -9), and a new share
consumer of the group gets exactly the records not accepted, each once; Apache Kafka 4.4.0's kafka-share-groups.sh
shows the same share-partition start offset before and after the restart. And a share partition started afresh
through the share coordinator (what AlterShareGroupOffsets does) is read again by its leader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.common.uuids import uuid_to_base64
from kfk.protocol.messages.find_coordinator import FindCoordinatorRequest
from kfk.protocol.messages.initialize_share_group_state import InitializeShareGroupStateRequest
from kfk.protocol.messages.read_share_group_state_summary import ReadShareGroupStateSummaryRequest
from kfk.protocol.messages.share_acknowledge import ShareAcknowledgeRequest
from kfk.protocol.messages.share_fetch import ShareFetchRequest
from kfk.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.interop.differential import BrokerSession
from tests.interop.jvm import java_programs, kafka_tool, run_program, unique_name  # noqa: F401
from tests.interop.scenarios import create_topic, produce, records, share_join, topic_id

RECORDS = 20  # JavaShareRestart's
ACCEPTED = 7
#: A few partitions of __share_group_state are enough for one broker (Kafka's default is 50).
BROKER_CONFIG = {**TEST_OVERRIDES, "share.coordinator.state.topic.num.partitions": "3"}


@pytest.fixture(scope="module")
def restartable_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("kfk-share-state"), BROKER_CONFIG)
    yield broker
    broker.stop()


def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def _offsets(bootstrap: str, group: str) -> list[str]:
    """kafka-share-groups.sh --describe --offsets: the group's partitions with their start offsets."""
    return kafka_tool("share-groups", ["--bootstrap-server", bootstrap, "--describe", "--group", group,
                                       "--offsets"]).stdout.split("\n", 1)[1].splitlines()


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_a_share_group_resumes_where_it_was_after_a_broker_restart(
        restartable_broker: BrokerProcess, java_programs: Path, how: str) -> None:  # noqa: F811
    topic, group = unique_name("share-restart"), unique_name("share-restart")
    bootstrap = restartable_broker.bootstrap_servers
    _create_topic(bootstrap, topic)
    values = [f"r{index:02d}" for index in range(RECORDS)]  # what the first program sends
    # Killed: the consumer ends holding records it never acknowledged (halted, not closed); stopped: it closes.
    mode = "accept-halt" if how == "kill" else "accept"
    first = run_program(java_programs, "JavaShareRestart", [mode, bootstrap, topic, group, str(ACCEPTED)])[mode]
    accepted = first["accepted"]
    assert len(accepted) == ACCEPTED
    # The share-partition start offset: past the probes and the records accepted; the lag, the records not.
    before = _offsets(bootstrap, group)
    assert [line.split()[2:] for line in before[1:]] == [["0", str(len(first["probes"]) + ACCEPTED),
                                                          str(RECORDS - ACCEPTED)]]
    if how == "kill":
        restartable_broker.kill()
    else:
        assert restartable_broker.stop() == 0
    restartable_broker.start()
    # kfk keeps share groups' membership in memory: a member joins (and leaves) so that the tool finds the group.
    with BrokerSession(bootstrap, "") as session:
        share_join(session, group, topic, "describer")
        assert _offsets(bootstrap, group) == before
        session.call(ShareGroupHeartbeatRequest(group_id=group, member_id="describer", member_epoch=-1), 1)
    rest = run_program(java_programs, "JavaShareRestart", ["rest", bootstrap, topic, group,
                                                           str(RECORDS - ACCEPTED)])["rest"]
    assert rest == {"check": "rest", "accepted": sorted(set(values) - set(accepted)),
                    "deliveries": RECORDS - ACCEPTED, "probes": []}


def test_a_share_partition_started_afresh_in_the_share_coordinator_is_read_again_by_its_leader(
        restartable_broker: BrokerProcess) -> None:
    """InitializeShareGroupState at the next state epoch (SharePersister.set_start_offset's request) moves an
    empty group's start offset: the next member to open a share session reads from there."""
    name = unique_name("share-reset")
    with BrokerSession(restartable_broker.bootstrap_servers, "") as session:
        create_topic(session, name)
        share_join(session, name, name, "member")
        the_id = topic_id(session, name)

        def fetch(epoch: int) -> list[tuple[int, int, int]]:
            response = session.call(ShareFetchRequest(
                group_id=name, member_id="member", share_session_epoch=epoch, max_wait_ms=2000, min_bytes=1,
                max_records=100, batch_size=100, topics=[ShareFetchRequest.FetchTopic(topic_id=the_id, partitions=[
                    ShareFetchRequest.FetchPartition(partition_index=0)])] if epoch != -1 else []), 1)
            return [(acquired.first_offset, acquired.last_offset, acquired.delivery_count)
                    for topic in response.responses for partition in topic.partitions
                    for acquired in partition.acquired_records]

        fetch(0)  # the group starts at the (empty) partition's end
        produce(session, name, records(count=6))
        assert fetch(1) == [(0, 5, 1)]
        Ack = ShareAcknowledgeRequest
        session.call(Ack(group_id=name, member_id="member", share_session_epoch=2, topics=[Ack.AcknowledgeTopic(
            topic_id=the_id, partitions=[Ack.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                Ack.AcknowledgementBatch(first_offset=0, last_offset=1, acknowledge_types=[1])])])]), 1)
        fetch(-1)  # the session closes: 2-5 are released
        key = f"{name}:{uuid_to_base64(the_id)}:0"
        session.call(FindCoordinatorRequest(key_type=2, coordinator_keys=[key]), 6)
        Summary = ReadShareGroupStateSummaryRequest
        summary = session.call(Summary(group_id=name, topics=[Summary.ReadStateSummaryData(
            topic_id=the_id, partitions=[Summary.PartitionData(partition=0, leader_epoch=-1)])]), 1)
        stored = summary.results[0].partitions[0]
        assert (stored.error_code, stored.start_offset, stored.delivery_complete_count) == (0, 2, 0)
        Initialize = InitializeShareGroupStateRequest
        initialized = session.call(Initialize(group_id=name, topics=[Initialize.InitializeStateData(
            topic_id=the_id, partitions=[Initialize.PartitionData(partition=0, state_epoch=stored.state_epoch + 1,
                                                                  start_offset=4)])]), 0)
        assert initialized.results[0].partitions[0].error_code == 0
        # A new share session: offsets 4 and 5, delivered for the first time in the new state.
        assert fetch(0) == [(4, 5, 1)]
