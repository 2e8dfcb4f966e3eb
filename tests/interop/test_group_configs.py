"""Group configs (`kafka-configs.sh --entity-type groups`): Apache Kafka 4.4.0's tool sets and describes a group's
configs on kfk as on Apache Kafka, `kfk configs --group` prints the same lines, and the settings take effect on
either broker: a share group set to share.auto.offset.reset=earliest gives confluent-kafka's ShareConsumer the
records produced before it joined, and the heartbeat intervals a group sets are the ones its members are told."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer, ShareConsumer

from kfk.client import Admin, NewTopic
from kfk.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kfk.protocol.messages.share_group_heartbeat import ShareGroupHeartbeatRequest
from kfk.testing.apache_kafka import ApacheKafka, run_kafka_tool
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.interop.differential import BrokerSession
from tests.interop.jvm import unique_name
from tests.interop.scenarios import find_group_coordinator

pytestmark = pytest.mark.integration

SETTINGS = ("share.auto.offset.reset=earliest,share.heartbeat.interval.ms=6000,consumer.heartbeat.interval.ms=7000,"
            "share.record.lock.duration.ms=20000")


@pytest.fixture(scope="module")
def kfk_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("kfk-group-configs"), dict(TEST_OVERRIDES))
    yield broker
    broker.stop()


@pytest.fixture(params=["kfk", "apache-kafka"])
def bootstrap(request: pytest.FixtureRequest, kfk_node: BrokerProcess) -> str:
    if request.param == "kfk":
        return kfk_node.bootstrap_servers
    return request.getfixturevalue("apache_kafka").bootstrap_server


def kafka_configs(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    return run_kafka_tool("configs", ["--bootstrap-server", bootstrap, *args])


def described(bootstrap: str, group: str) -> list[str]:
    result = kafka_configs(bootstrap, "--describe", "--entity-type", "groups", "--entity-name", group)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_kafka_configs_sets_and_describes_a_groups_configs_alike(kfk_node: BrokerProcess,
                                                                 apache_kafka: ApacheKafka) -> None:
    group = unique_name("configured")
    lines = {}
    for name, bootstrap in (("kfk", kfk_node.bootstrap_servers), ("kafka", apache_kafka.bootstrap_server)):
        altered = kafka_configs(bootstrap, "--alter", "--entity-type", "groups", "--entity-name", group,
                                "--add-config", SETTINGS)
        assert altered.stdout.strip() == f"Completed updating config for group {group}.", altered.stderr
        refused = kafka_configs(bootstrap, "--alter", "--entity-type", "groups", "--entity-name", group,
                                "--add-config", "share.delivery.count.limit=100")
        assert "share.delivery.count.limit must be in the range 2 to 10 inclusive." in refused.stdout + refused.stderr
        lines[name] = described(bootstrap, group)
    assert lines["kfk"] == lines["kafka"]
    assert lines["kfk"][0] == f"Dynamic configs for group {group} are:"
    assert "  share.auto.offset.reset=earliest sensitive=false synonyms={DYNAMIC_GROUP_CONFIG:share.auto.offset." \
           "reset=earliest, DEFAULT_CONFIG:share.auto.offset.reset=latest}" in lines["kfk"]
    assert len(lines["kfk"]) == 5
    # kfk's own tool prints the same lines.
    ours = subprocess.run([sys.executable, "-m", "kfk", "configs", "--describe", "--group", group,
                           "--bootstrap-server", kfk_node.bootstrap_servers], capture_output=True, text=True,
                          timeout=60)
    assert ours.stdout.splitlines() == lines["kafka"], ours.stderr


def test_a_groups_configs_take_effect(bootstrap: str) -> None:
    topic, group = unique_name("configured-topic"), unique_name("configured-share")
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.create_topics([NewTopic(topic, 1, 1)]) == {topic: None}
    altered = kafka_configs(bootstrap, "--alter", "--entity-type", "groups", "--entity-name", group,
                            "--add-config", SETTINGS)
    assert altered.returncode == 0, altered.stderr
    producer = Producer({"bootstrap.servers": bootstrap})
    for index in range(5):
        producer.produce(topic, f"before-{index}".encode())
    assert producer.flush(30) == 0
    # share.auto.offset.reset=earliest: the records produced before anyone joined are delivered.
    member = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    values: list[bytes] = []
    try:
        member.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(values) < 5 and time.monotonic() < deadline:
            values.extend(message.value() for message in member.poll(0.5) or [] if message.error() is None)
    finally:
        member.close()
    assert sorted(values) == [f"before-{index}".encode() for index in range(5)]
    # The heartbeat intervals the group sets are what its members are told.
    with BrokerSession(bootstrap, "") as session:
        find_group_coordinator(session, group)
        share = session.call(ShareGroupHeartbeatRequest(group_id=group, member_id=str(uuid.uuid4()), member_epoch=0,
                                                        subscribed_topic_names=[topic]), 1, record=False)
        assert share.error_code == 0 and share.heartbeat_interval_ms == 6000
        consumer_group = unique_name("configured-consumer")
        configured = kafka_configs(bootstrap, "--alter", "--entity-type", "groups", "--entity-name", consumer_group,
                                   "--add-config", "consumer.heartbeat.interval.ms=7000")
        assert configured.returncode == 0, configured.stderr
        find_group_coordinator(session, consumer_group)
        joined = session.call(ConsumerGroupHeartbeatRequest(
            group_id=consumer_group, member_id=str(uuid.uuid4()), member_epoch=0, rebalance_timeout_ms=30000,
            subscribed_topic_names=[topic], topic_partitions=[]), 0, record=False)
        assert joined.error_code == 0 and joined.heartbeat_interval_ms == 7000
