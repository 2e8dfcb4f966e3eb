"""A topic deleted while one of its brokers is down (kill -9), on ZooKeeper and on KRaft: the broker that comes back
sets its old partition folder aside as `<topic>-<partition>.<id>-stray`, data intact, touches the partitions that
still exist, and serves a new topic of the same name from a new, empty log."""

from __future__ import annotations

import os

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from kfk.storage.partition_metadata import PartitionMetadataFile
from tests.cluster.helpers import admin, consume_all, create_topic, partitions, wait_until

pytestmark = [pytest.mark.integration]


@pytest.fixture(params=[pytest.param("zookeeper", marks=pytest.mark.zookeeper), "kraft"])
def kfk_metadata_mode(request: pytest.FixtureRequest) -> str:
    """Every test on both metadata backends: brokers on ZooKeeper, and brokers on a KRaft controller."""
    return request.param


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 20000})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0


def delete_topic(bootstrap: str, topic: str) -> bool:
    """Whether `topic` is gone, after asking for its deletion (in vain while a new controller takes over from the
    killed broker: ZooKeeper moves the controllership once the killed broker's session expires)."""
    client = admin(bootstrap)
    try:
        client.delete_topics([topic], operation_timeout=10)[topic].result(15)
    except KafkaException as error:
        if error.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
            return False
    return topic not in client.list_topics(timeout=5).topics


def topic_id_on_broker(broker_dir: str, topic: str):
    return PartitionMetadataFile(os.path.join(broker_dir, f"{topic}-0")).read()


def test_a_topic_deleted_while_a_broker_was_down_is_set_aside_there_as_stray(kfk_cluster_factory) -> None:
    cluster = kfk_cluster_factory(size=2)
    bootstrap = cluster.bootstrap_servers
    for topic in ("gone", "kept"):
        create_topic(bootstrap, topic, assignment=[[1, 2]])
        wait_until(lambda: partitions(bootstrap, topic)[0][2] == [1, 2], what=f"{topic} fully in sync")
        produce(bootstrap, topic, [b"old-%d" % index for index in range(20)])
    restarted = str(cluster.broker(2).log_dir)
    wait_until(lambda: all(os.path.getsize(os.path.join(restarted, f"{topic}-0", f"{0:020d}.log")) > 0
                           for topic in ("gone", "kept")), what="broker 2 has the records")
    old_id = topic_id_on_broker(restarted, "gone")

    cluster.kill(2)
    leader = cluster.broker(1).bootstrap_servers
    wait_until(lambda: delete_topic(leader, "gone"), timeout=60, what="gone deleted")
    cluster.start([2])

    (stray,) = [name for name in os.listdir(restarted) if name.startswith("gone-0.") and name.endswith("-stray")]
    assert not os.path.exists(os.path.join(restarted, "gone-0"))
    stray_dir = os.path.join(restarted, stray)
    assert PartitionMetadataFile(stray_dir).read() == old_id
    assert os.path.getsize(os.path.join(stray_dir, f"{0:020d}.log")) > 0
    assert "marked stray and renamed to" in cluster.broker(2).output()
    assert os.path.isdir(os.path.join(restarted, "kept-0"))  # a partition that still exists is untouched
    assert not any(name.startswith("kept-0.") for name in os.listdir(restarted))

    # A new topic of the same name, led by the restarted broker, starts empty; the stray folder stays.
    create_topic(bootstrap, "gone", assignment=[[2, 1]])
    wait_until(lambda: partitions(bootstrap, "gone")[0][2] in ([1, 2], [2, 1]), what="new gone in sync")
    produce(bootstrap, "gone", [b"new-%d" % index for index in range(5)])
    assert consume_all(bootstrap, "gone", 1)[0] == [b"new-%d" % index for index in range(5)]
    assert topic_id_on_broker(restarted, "gone") not in (None, old_id)
    assert os.path.isdir(stray_dir) and PartitionMetadataFile(stray_dir).read() == old_id
    assert consume_all(bootstrap, "kept", 1)[0] == [b"old-%d" % index for index in range(20)]
