"""Share groups (KIP-932) with Kafka's own Java KafkaShareConsumer (kafka-clients 4.4.0), against kfk and against
Apache Kafka 4.4.0: the same program (tests/interop/java/JavaShareConsumer.java) must print the same lines on both.

Both brokers run with group.share.delivery.count.limit=2 (a record released twice is archived) and a 6 s
acquisition lock (the lock check waits that long once).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.testing.apache_kafka import ApacheKafka
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.interop.jvm import java_programs, run_program, unique_name  # noqa: F401

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
