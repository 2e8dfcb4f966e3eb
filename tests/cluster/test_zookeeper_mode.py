"""One broker in ZooKeeper mode started the way Kafka's docs start one: a server.properties with broker.id and
zookeeper.connect (chroot included). kafka-python produces and consumes; the znodes hold Kafka's layout; the
cluster id is ZooKeeper's, and a log dir of another cluster is refused."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from kafka import KafkaConsumer, KafkaProducer

from kfk.backends.zookeeper import ZooKeeperMetadataBackend
from kfk.testing.broker import BrokerProcess

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper]


def read_znode(connect: str, path: str) -> bytes | None:
    async def read() -> bytes | None:
        backend = ZooKeeperMetadataBackend(connect, 99, session_timeout_ms=4000)
        await backend.connect()
        try:
            return await backend.read_znode(path)
        finally:
            await backend.stop()

    return asyncio.run(read())


def test_a_server_properties_broker_on_zookeeper_serves_kafka_python(tmp_path, zookeeper_connect) -> None:
    properties = tmp_path / "server.properties"
    properties.write_text(f"broker.id=7\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs={tmp_path / 'data'}\n"
                          f"zookeeper.connect={zookeeper_connect}\nzookeeper.session.timeout.ms=4000\n"
                          "offsets.topic.replication.factor=1\nnum.partitions=2\ngroup.initial.rebalance.delay.ms=0\n")
    broker = BrokerProcess(log_dir=tmp_path / "data", overrides={}, log_path=tmp_path / "broker.log",
                           extra_args=[str(properties)])
    broker.start()
    try:
        assert broker.node_id == 7
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, acks="all")
        for index in range(50):
            producer.send("zk-mode", f"value-{index}".encode(), partition=index % 2)
        producer.flush(20)
        producer.close()
        consumer = KafkaConsumer("zk-mode", bootstrap_servers=broker.bootstrap_servers, group_id="zk-mode",
                                 auto_offset_reset="earliest", consumer_timeout_ms=10000)
        values = []
        for message in consumer:
            values.append(message.value)
            if len(values) == 50:
                break
        consumer.close()
        values.sort()
        assert values == sorted(f"value-{index}".encode() for index in range(50))
        registration = json.loads(read_znode(zookeeper_connect, "/brokers/ids/7"))
        assert registration["endpoints"] == [f"PLAINTEXT://127.0.0.1:{broker.port}"]
        assert json.loads(read_znode(zookeeper_connect, "/brokers/topics/zk-mode"))["partitions"] == {
            "0": [7], "1": [7]}
        assert json.loads(read_znode(zookeeper_connect, "/controller"))["brokerid"] == 7
        cluster_id = json.loads(read_znode(zookeeper_connect, "/cluster/id"))["id"]
        assert f"cluster.id={cluster_id}" in (tmp_path / "data" / "meta.properties").read_text()
        # kafka-cluster.sh's commands: the id; no UnregisterBroker in ZooKeeper mode (a registration is a session's).
        tool = [sys.executable, "-m", "kfk", "cluster"]
        server = ["--bootstrap-server", broker.bootstrap_servers]
        assert subprocess.run([*tool, "cluster-id", *server], capture_output=True, text=True, timeout=60,
                              check=True).stdout == f"Cluster ID: {cluster_id}\n"
        assert subprocess.run([*tool, "unregister", "--id", "7", *server], capture_output=True, text=True,
                              timeout=60, check=True).stdout \
            == "The target cluster does not support the broker unregistration API.\n"
    finally:
        assert broker.stop() == 0
    assert read_znode(zookeeper_connect, "/brokers/ids/7") is None  # a clean stop closes the session at once

    # Another cluster's ZooKeeper (another chroot) refuses this log dir.
    other = properties.read_text().replace(zookeeper_connect, zookeeper_connect + "-other")
    properties.write_text(other)
    completed = subprocess.run([sys.executable, "-m", "kfk", "server", "start", str(properties)],
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 1
    assert "does not match the cluster id" in completed.stderr


def test_delegation_tokens_are_refused_in_zookeeper_mode(tmp_path) -> None:
    """kfk keeps tokens in the KRaft metadata log only: a secret key in ZooKeeper mode fails the start in one line
    (before ZooKeeper is asked anything), rather than promising tokens that never come."""
    completed = subprocess.run([sys.executable, "-m", "kfk", "server", "start", "--override",
                                "zookeeper.connect=127.0.0.1:1", "--override", "delegation.token.secret.key=s",
                                "--override", f"log.dirs={tmp_path}"], capture_output=True, text=True, timeout=60)
    assert completed.returncode == 1
    assert "kfk issues delegation tokens in KRaft mode only" in completed.stderr
    assert "Traceback" not in completed.stderr


def test_an_unreachable_zookeeper_is_a_clear_error(tmp_path) -> None:
    completed = subprocess.run([sys.executable, "-m", "kfk", "server", "start", "--override",
                                "zookeeper.connect=127.0.0.1:1", "--override", "broker.id=1", "--override",
                                "zookeeper.connection.timeout.ms=1000", "--override", f"log.dirs={tmp_path}"],
                               capture_output=True, text=True, timeout=60)
    assert completed.returncode == 1
    assert "Timed out connecting to ZooKeeper at 127.0.0.1:1" in completed.stderr
