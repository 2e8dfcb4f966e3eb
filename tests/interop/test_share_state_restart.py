"""Durable share-group state (KIP-932's share coordinator and __share_group_state): Kafka's Java
KafkaShareConsumer 4.4.0 accepts part of a topic, the kfk broker restarts (cleanly, and killed -9), and a new share
consumer of the group gets exactly the records not accepted, each once; Apache Kafka 4.4.0's kafka-share-groups.sh
shows the same share-partition start offset before and after the restart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.interop.differential import BrokerSession
from tests.interop.jvm import java_programs, kafka_tool, run_program, unique_name  # noqa: F401
from tests.interop.scenarios import share_join

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
