"""franz-go (github.com/twmb/franz-go, a Go client that shares no code with librdkafka or the JVM) against kfk:
produce with each codec it supports, a two-member consumer group that rebalances while it reads and commits, kadm's
create topic and list offsets, and a transactional producer read back read_committed by confluent-kafka."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer

from tests.integration.test_clients import create_topic, produce_all
from tests.interop.clients.checks import committed_offsets, confluent_rows, program_rows

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("codec", ["lz4", "zstd", "gzip", "snappy"])
def test_produce_with_codec_read_by_confluent(franz_go: Callable[..., Any], bootstrap: str, topic_name: str,
                                              codec: str) -> None:
    create_topic(bootstrap, topic_name, partitions=3)
    produced = program_rows(franz_go("produce", brokers=bootstrap, topic=topic_name, count=90, partitions=3,
                                     codec=codec))
    # Record i went to partition i % 3, so each partition got offsets 0..29 in order.
    assert [row[:3] for row in produced] == [(i % 3, i // 3, f"key-{i}") for i in range(90)]
    assert produced[7][3:] == ("franz-go-value-7", (("client", "franz-go"), ("index", "7")))
    assert confluent_rows(bootstrap, topic_name, 3, 90) == sorted(produced)


def test_group_of_two_rebalances_and_commits(franz_go: Callable[..., Any], bootstrap: str, topic_name: str) -> None:
    create_topic(bootstrap, topic_name, partitions=4)
    produced = program_rows(franz_go("produce", brokers=bootstrap, topic=topic_name, count=160, partitions=4,
                                     codec="lz4"))
    # Records from librdkafka in the same topic: the group reads both clients' batches.
    produce_all(bootstrap, topic_name, [(i % 4, f"key-{i}".encode(), f"confluent-value-{i}".encode(),
                                         [("index", str(i).encode()), ("client", b"confluent-kafka")])
                                        for i in range(160, 200)], **{"compression.type": "zstd"})
    everything = confluent_rows(bootstrap, topic_name, 4, 200)
    assert [row for row in everything if row[3].startswith("franz-go")] == sorted(produced)

    group = f"franz-go-{topic_name}"
    answer = franz_go("group", brokers=bootstrap, topic=topic_name, group=group, count=200)
    consumed = program_rows(answer["records"])
    assert sorted(consumed) == everything, "each record exactly once, as the broker stores it"
    members = Counter(record["member"] for record in answer["records"])
    assert members["first"] >= 100 and members["second"] > 0, members
    assert answer["assignments"]["first"][0] == [0, 1, 2, 3], "alone, the first member had every partition"
    owned = answer["owned"]
    assert owned["first"] and owned["second"], owned
    assert sorted(owned["first"] + owned["second"]) == [0, 1, 2, 3], "after the rebalance, one owner each"
    assert committed_offsets(bootstrap, group, topic_name, 4) == {p: 50 for p in range(4)}


def test_kadm_creates_topic_and_lists_offsets(franz_go: Callable[..., Any], bootstrap: str,
                                              topic_name: str) -> None:
    created = franz_go("create", brokers=bootstrap, topic=topic_name, partitions=3,
                       config=["retention.ms=3600000", "cleanup.policy=compact"])
    assert (created["topic"], created["partitions"], created["replication_factor"]) == (topic_name, 3, 1)
    assert created["topic_id"] != "00000000-0000-0000-0000-000000000000"
    assert created["config"]["retention.ms"] == "3600000"
    assert created["config"]["cleanup.policy"] == "compact"

    base = int(time.time() * 1000) - 60_000
    producer = Producer({"bootstrap.servers": bootstrap})
    for index in range(10):  # partition 0: timestamps base, base+1000, ..., base+9000; partition 1: 4 records
        producer.produce(topic_name, f"v{index}".encode(), key=f"k{index}".encode(), partition=0,
                         timestamp=base + 1000 * index)
    for index in range(4):
        producer.produce(topic_name, b"x", key=f"k{index}".encode(), partition=1, timestamp=base)
    assert producer.flush(30) == 0

    offsets = franz_go("offsets", brokers=bootstrap, topic=topic_name, after_ms=base + 5500)
    assert offsets["start"] == {"0": 0, "1": 0, "2": 0}
    assert offsets["end"] == {"0": 10, "1": 4, "2": 0}
    # The first record at or after base+5500 in partition 0 is the one at base+6000; partitions with no such
    # record answer with their end offset (kadm's reading of Kafka's -1).
    assert offsets["after"] == {"0": 6, "1": 4, "2": 0}


def test_transactional_producer_read_committed_by_confluent(franz_go: Callable[..., Any], bootstrap: str,
                                                             topic_name: str) -> None:
    create_topic(bootstrap, topic_name)
    answer = franz_go("transact", brokers=bootstrap, topic=topic_name, transactional_id=f"tx-{topic_name}",
                      count=20)
    # Each transaction ends with a commit or abort marker, which takes an offset of its own.
    assert [r["offset"] for r in answer["committed-1"]] == list(range(20))
    assert [r["offset"] for r in answer["aborted"]] == list(range(21, 41))
    assert [r["offset"] for r in answer["committed-2"]] == list(range(42, 62))
    committed = program_rows(answer["committed-1"] + answer["committed-2"])
    everything = program_rows(answer["committed-1"] + answer["aborted"] + answer["committed-2"])
    assert confluent_rows(bootstrap, topic_name, 1, 40, **{"isolation.level": "read_committed"}) == committed
    assert confluent_rows(bootstrap, topic_name, 1, 60, **{"isolation.level": "read_uncommitted"}) == everything
