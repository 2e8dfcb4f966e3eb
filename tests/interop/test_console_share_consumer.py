"""`kfk console-share-consume` beside Apache Kafka 4.4.0's kafka-console-share-consumer.sh, against kfk and against
Apache Kafka 4.4.0: the same records printed the same way (delivery counts included), "Processed a total of N
messages" on stderr; --reject (a rejected record is never delivered again) and --release (delivered again, its
delivery count 2).

Each group starts at offset 0 (AlterShareGroupOffsets before anyone joins), so what a tool prints does not depend
on when its member's first fetch came.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Iterator

import pytest

from kfk.client import Admin, NewTopic, Producer, TopicPartition
from kfk.errors import UnknownTopicOrPartitionError
from kfk.testing.apache_kafka import ApacheKafka
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.interop.differential import BrokerSession
from tests.interop.jvm import kafka_tool, unique_name
from tests.interop.scenarios import share_warm_up, wait_for_coordinators

pytestmark = pytest.mark.integration

PRINT = ["print.key=true", "print.partition=true", "print.offset=true", "print.delivery=true",
         "print.headers=true"]


@pytest.fixture(scope="module")
def kfk_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    broker = start_broker(tmp_path_factory.mktemp("kfk-console-share"), dict(TEST_OVERRIDES))
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


def prepare(bootstrap: str, count: int, groups: list[str]) -> str:
    """A one-partition topic with `count` keyed records (the odd ones with a header), read from offset 0 by each
    of `groups`."""
    topic = unique_name("console-share")
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1)])
        deadline = time.monotonic() + 30
        for group in groups:
            # Apache Kafka's coordinator learns of the topic a moment after CreateTopics answers.
            while (error := admin.alter_share_group_offsets(group, {TopicPartition(topic, 0): 0})[
                    TopicPartition(topic, 0)]) is not None:
                assert isinstance(error, UnknownTopicOrPartitionError) and time.monotonic() < deadline, error
                time.sleep(0.1)
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for index in range(count):
            producer.send(topic, f"value-{index}".encode(), key=f"key-{index}".encode(),
                          headers=[("n", str(index).encode())] if index % 2 else [])
        producer.flush()
    return topic


def kfk_command(bootstrap: str, *args: str) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", "kfk", "console-share-consume", "--bootstrap-server", bootstrap,
                             *args], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result


def formatter_properties() -> list[str]:
    return [arg for setting in PRINT for arg in ("--formatter-property", setting)]


def test_kafka_tool_and_kfk_print_the_same_records(bootstrap: str) -> None:
    kafka_group, kfk_group = unique_name("console-share-kafka"), unique_name("console-share-kfk")
    topic = prepare(bootstrap, 6, [kafka_group, kfk_group])
    common = ["--topic", topic, "--max-messages", "6", "--timeout-ms", "30000", *formatter_properties()]
    kafka = kafka_tool("console-share-consumer", ["--bootstrap-server", bootstrap, "--group", kafka_group, *common])
    ours = kfk_command(bootstrap, "--group", kfk_group, *common)
    expected = [f"Partition:0\tOffset:{index}\tDelivery:1\t{f'n:{index}' if index % 2 else 'NO_HEADERS'}\t"
                f"key-{index}\tvalue-{index}" for index in range(6)]
    assert sorted(kafka.stdout.splitlines()) == expected
    assert sorted(ours.stdout.splitlines()) == expected
    assert "Processed a total of 6 messages" in kafka.stderr.splitlines()
    assert ours.stderr.splitlines() == ["Processed a total of 6 messages"]


def test_reject_and_release(bootstrap: str) -> None:
    rejecting, releasing = unique_name("console-share-reject"), unique_name("console-share-release")
    topic = prepare(bootstrap, 3, [rejecting, releasing])
    read = ["--topic", topic, "--formatter-property", "print.delivery=true"]
    rejected = kfk_command(bootstrap, *read, "--group", rejecting, "--reject", "--max-messages", "3")
    assert sorted(rejected.stdout.splitlines()) == [f"Delivery:1\tvalue-{index}" for index in range(3)]
    again = kfk_command(bootstrap, *read, "--group", rejecting, "--timeout-ms", "3000")
    assert (again.stdout, again.stderr) == ("", "Processed a total of 0 messages\n")

    # One record at a time, so that each run holds only the record it prints.
    one = [*read, "--group", releasing, "--max-messages", "1", "--command-property", "max.poll.records=1"]
    assert kfk_command(bootstrap, *one, "--release").stdout == "Delivery:1\tvalue-0\n"
    assert kfk_command(bootstrap, *one).stdout == "Delivery:2\tvalue-0\n"


def test_reject_and_release_together_is_one_line() -> None:
    result = subprocess.run([sys.executable, "-m", "kfk", "console-share-consume", "--topic", "t", "--reject",
                             "--release"], capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert result.stderr.strip().splitlines()[-1].endswith("--reject and --release cannot be used together")
    assert "Traceback" not in result.stderr
