"""Metadata is durable: topics, partitions and configs survive a clean restart and a kill -9 right after the broker
acknowledged the change, and the epochs and ids it hands out keep growing across restarts."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from kfk.errors import ErrorCode
from kfk.protocol.messages.init_producer_id import InitProducerIdRequest
from tests.integration.wire import connect, request

pytestmark = pytest.mark.integration
TIMEOUT = 10


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def state(broker) -> tuple[dict, str]:
    client = admin(broker)
    metadata = client.list_topics(timeout=TIMEOUT)
    layout = {name: sorted((p.id, p.leader, tuple(p.replicas)) for p in topic.partitions.values())
              for name, topic in metadata.topics.items()}
    futures = client.describe_configs([ConfigResource(ResourceType.TOPIC, "kept")], request_timeout=TIMEOUT)
    retention = next(iter(futures.values())).result(timeout=TIMEOUT)["retention.ms"].value
    return layout, retention


def create_kept(broker) -> None:
    client = admin(broker)
    futures = client.create_topics([NewTopic("kept", 3, 1, config={"retention.ms": "123456"}),
                                           NewTopic("other", 1, 1)], request_timeout=TIMEOUT)
    for future in futures.values():
        future.result(timeout=TIMEOUT)


def producer_id(broker) -> int:
    with connect(broker.bootstrap_servers) as sock:
        response = request(sock, InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000), 4)
    assert response.error_code == ErrorCode.NONE
    return response.producer_id


def test_topics_and_configs_survive_a_clean_restart(kfk_broker_process) -> None:
    create_kept(kfk_broker_process)
    before = state(kfk_broker_process)
    first_id = producer_id(kfk_broker_process)
    assert kfk_broker_process.stop() == 0
    kfk_broker_process.start()
    assert state(kfk_broker_process) == before
    assert before[1] == "123456" and sorted(before[0]) == ["kept", "other"]
    assert producer_id(kfk_broker_process) >= first_id + 1000  # a fresh block: ids are never reused
    quorum = json.loads((kfk_broker_process.log_dir / "__cluster_metadata-0" / "quorum-state").read_text())
    assert quorum["leaderEpoch"] == 2 and quorum["leaderId"] == 1


def test_an_acknowledged_create_survives_kill_9(kfk_broker_process) -> None:
    create_kept(kfk_broker_process)
    before = state(kfk_broker_process)
    kfk_broker_process.kill()
    kfk_broker_process.start()
    assert state(kfk_broker_process) == before
    client = admin(kfk_broker_process)
    futures = client.create_topics([NewTopic("after-crash", 1, 1)], request_timeout=TIMEOUT)
    futures["after-crash"].result(timeout=TIMEOUT)
    kfk_broker_process.kill()
    kfk_broker_process.start()
    assert "after-crash" in admin(kfk_broker_process).list_topics(timeout=TIMEOUT).topics


def test_a_restart_loads_the_snapshot_the_log_was_trimmed_behind(kfk_broker_factory) -> None:
    """A snapshot after every metadata write and 512-byte metadata segments: the log's early segments are gone after
    the snapshot, so everything the restarted broker knows from before it came from the snapshot (topics, configs,
    the producer id block), and a kill -9 afterwards loses nothing either."""
    import time

    from kfk.backends.embedded.snapshots import list_snapshots

    broker = kfk_broker_factory({"metadata.log.max.record.bytes.between.snapshots": "1",
                                 "metadata.log.segment.bytes": "512", "metadata.log.segment.min.bytes": "512"})
    metadata_dir = broker.log_dir / "__cluster_metadata-0"
    create_kept(broker)
    before = state(broker)
    first_id = producer_id(broker)
    deadline = time.monotonic() + TIMEOUT  # the snapshots are written in the background
    while (metadata_dir / "00000000000000000000.log").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert broker.stop() == 0
    snapshots = list_snapshots(str(metadata_dir))
    segments = sorted(path.name for path in metadata_dir.glob("*.log"))
    assert len(snapshots) == 1, snapshots  # each newer one replaced the older
    assert int(segments[0].split(".")[0]) > 0 and int(segments[0].split(".")[0]) <= snapshots[0].end_offset
    broker.start()
    assert state(broker) == before
    assert producer_id(broker) >= first_id + 1000
    broker.kill()
    broker.start()
    assert state(broker) == before
