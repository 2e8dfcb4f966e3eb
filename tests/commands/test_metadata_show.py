"""`kfk metadata show`: the image read offline from a snapshot and the log after it, or from a running cluster;
through `python -m kfk`."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Callable

from confluent_kafka.admin import AdminClient, NewTopic

from kfk.backends.embedded import EmbeddedMetadataBackend
from kfk.backends.embedded.snapshots import list_snapshots
from kfk.common.clock import ManualClock
from kfk.protocol.metadata_records import schema_class
from kfk.common.uuids import uuid_to_base64
from kfk.testing.broker import BrokerProcess
from tests.backends.conftest import run

TopicRecord = schema_class("TopicRecord")
PartitionRecord = schema_class("PartitionRecord")
ConfigRecord = schema_class("ConfigRecord")
FeatureLevelRecord = schema_class("FeatureLevelRecord")


def show(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfk", "metadata", "show", *args], capture_output=True, text=True,
                          timeout=60, stdin=subprocess.DEVNULL)


def test_offline_the_snapshot_and_the_log_after_it(tmp_path: Path) -> None:
    before, after = uuid.uuid4(), uuid.uuid4()

    async def write() -> None:
        backend = EmbeddedMetadataBackend(str(tmp_path), 1, "MkU3OEVBNTcwNTJENDM2Qg", time_ms=ManualClock(1000))
        await backend.start()
        epoch = await backend.elect_controller(1)
        await backend.append([FeatureLevelRecord(name="metadata.version", feature_level=7),
                              TopicRecord(name="before", topic_id=before),
                              PartitionRecord(partition_id=0, topic_id=before, replicas=[1], isr=[1], leader=1,
                                              leader_epoch=0, partition_epoch=0)], epoch)
        await backend.snapshot()
        await backend.append([TopicRecord(name="after", topic_id=after),
                              ConfigRecord(resource_type=2, resource_name="before", name="retention.ms", value="5")],
                             epoch)
        await backend.stop()

    run(write())
    assert len(list_snapshots(str(tmp_path / "__cluster_metadata-0"))) == 1
    result = show("--log-dir", str(tmp_path), "/topics/before/topicId", "/topics/after", "/configs", "/features",
                  "/offset")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {
        "/topics/before/topicId": uuid_to_base64(before),
        "/topics/after": {"topicId": uuid_to_base64(after), "partitions": {}},
        "/configs": {"TOPIC": {"before": {"retention.ms": "5"}}},
        "/features": {"metadata.version": 7},
        "/offset": 5,  # LEADER_CHANGE 0, the first batch 1-3, the second 4-5
    }
    snapshot_only = show("--snapshot", str(next((tmp_path / "__cluster_metadata-0").glob("*.checkpoint"))), "/topics")
    assert list(json.loads(snapshot_only.stdout)) == ["before"]
    missing = show("--log-dir", str(tmp_path), "/topics/nope")
    assert missing.returncode == 1 and missing.stderr.strip() == "kfk: no such path in the metadata image: /topics/nope"


def test_online_and_offline_agree_on_a_kfk_broker(kfk_broker_factory: Callable[..., BrokerProcess]) -> None:
    broker = kfk_broker_factory()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.create_topics([NewTopic("shown", 3, 1, config={"cleanup.policy": "compact"})]).values():
        future.result(30)
    online = show("--bootstrap-server", broker.bootstrap_servers, "/topics/shown", "/configs/TOPIC/shown",
                  "/brokers/1/port")
    assert online.returncode == 0, online.stderr
    online_nodes = json.loads(online.stdout)
    assert online_nodes["/configs/TOPIC/shown"] == {"cleanup.policy": "compact"}
    assert online_nodes["/brokers/1/port"] == int(broker.bootstrap_servers.rsplit(":", 1)[1])
    assert broker.stop() == 0
    offline = json.loads(show("--log-dir", str(broker.log_dir), "/topics/shown", "/configs/TOPIC/shown").stdout)
    assert offline["/configs/TOPIC/shown"] == {"cleanup.policy": "compact"}
    online_topic, offline_topic = online_nodes["/topics/shown"], offline["/topics/shown"]
    assert online_topic["topicId"] == offline_topic["topicId"]
    assert sorted(online_topic["partitions"]) == sorted(offline_topic["partitions"]) == ["0", "1", "2"]
    for number, partition in online_topic["partitions"].items():
        assert {key: offline_topic["partitions"][number][key] for key in partition} == partition


def test_one_source_is_required() -> None:
    result = show("/topics")
    assert result.returncode == 1
    assert result.stderr.strip() == "kfk: give one of --log-dir, --snapshot or --bootstrap-server"
