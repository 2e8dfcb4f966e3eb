"""Descriptors a broker holds per partition: one per segment, its .log. Index files are closed once mapped, and mapped
only when first read or written (Python's mmap keeps a duplicate of the descriptor it maps), so 2,000 partitions
with a record each hold about 2,000 descriptors, where they held 10,000 (the .log, and each index twice)."""

from __future__ import annotations

import os
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

pytestmark = pytest.mark.integration

PARTITIONS = 2000
#: The .log, plus slack for the broker's sockets and files of its own.
MAX_DESCRIPTORS_PER_PARTITION = 1.1


def open_files(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_two_thousand_partitions_hold_one_descriptor_each(kfk_broker_factory) -> None:
    broker = kfk_broker_factory()
    pid = broker.process.pid
    baseline = open_files(pid)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic("many", PARTITIONS, 1)])["many"].result(60)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        created = sum(1 for name in os.listdir(broker.log_dir) if name.startswith("many-"))
        topic = admin.list_topics("many", timeout=10).topics["many"]
        if created == PARTITIONS and len(topic.partitions) == PARTITIONS and all(
                partition.leader >= 0 for partition in topic.partitions.values()):
            break
        time.sleep(0.5)
    else:
        pytest.fail("the partitions were not all created in time")
    time.sleep(1)  # let the last logs finish opening
    idle = open_files(pid)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20})
    for partition in range(PARTITIONS):
        producer.produce("many", b"value", key=b"key", partition=partition)
    assert producer.flush(60) == 0
    written = open_files(pid)
    for label, count in (("idle", idle), ("with a record each", written)):
        per_partition = (count - baseline) / PARTITIONS
        print(f"open files: {baseline} before the topic, {count} with {PARTITIONS} partitions {label}: "
              f"{per_partition:.2f} per partition")
        assert per_partition <= MAX_DESCRIPTORS_PER_PARTITION
