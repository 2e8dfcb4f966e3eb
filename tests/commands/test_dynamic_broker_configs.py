"""Dynamic broker configs through `python -m kfk configs` against a real broker, on both metadata backends: set per
broker and cluster-wide, applied live (a new log.segment.bytes rolls a topic without an override, message.max.bytes
changes what Produce accepts, a listener added to `listeners` serves clients at once), described with Kafka's
sources, refused as Kafka refuses them, and still in force after a restart (in ZooKeeper, in Kafka's
/config/brokers znodes); and broker-loggers."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import confluent_kafka
import pytest

from kfk.testing.ports import free_port

pytestmark = pytest.mark.integration

SEGMENT_BYTES = 1024 * 1024  # log.segment.bytes' floor


def kfk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfk", *args], capture_output=True, text=True, timeout=60)


def produce(bootstrap: str, topic: str, count: int, size: int) -> list[str | None]:
    """Send `count` records of `size` bytes; the error name of each (None when delivered)."""
    errors: list[str | None] = []
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                                         "message.max.bytes": 10_000_000, "retries": 0})
    for _ in range(count):
        producer.produce(topic, b"x" * size,
                         on_delivery=lambda error, _: errors.append(None if error is None else error.name()))
        producer.poll(0)
    assert producer.flush(30) == 0
    return errors


def port_open(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def segments(log_dir: Path, topic: str) -> int:
    return len(list((log_dir / f"{topic}-0").glob("*.log")))


@pytest.fixture(params=["embedded", "zookeeper"])
def broker(request):
    """One broker (id 1), with the embedded metadata log or on ZooKeeper."""
    if request.param == "embedded":
        process = request.getfixturevalue("kfk_broker_factory")()
    else:
        process = request.getfixturevalue("kfk_cluster_factory")(size=1, overrides={
            "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1"}).broker(1)
    return request.param, process


def test_dynamic_broker_configs_apply_live_and_survive_a_restart(broker) -> None:
    backend, process = broker
    server = ["--bootstrap-server", process.bootstrap_servers]
    created = kfk("topics", "create", "--topic", "t", "--partitions", "1", "--replication-factor", "1", *server)
    assert created.returncode == 0, created.stderr

    # Cluster-wide: the topic has no segment.bytes of its own, so it rolls at the new default.
    altered = kfk("configs", "--alter", "--broker-defaults", "--add-config", f"log.segment.bytes={SEGMENT_BYTES}",
                  *server)
    assert (altered.returncode, altered.stdout) == (0, "Completed updating default config for brokers in the "
                                                       "cluster.\n"), altered.stderr
    assert produce(process.bootstrap_servers, "t", 300, 10_000) == [None] * 300
    assert segments(process.log_dir, "t") >= 3

    # Per broker: message.max.bytes is what Produce accepts.
    altered = kfk("configs", "--alter", "--broker", "1", "--add-config", "message.max.bytes=5000", *server)
    assert (altered.returncode, altered.stdout) == (0, "Completed updating config for broker 1.\n"), altered.stderr
    assert produce(process.bootstrap_servers, "t", 1, 10_000) == ["MSG_SIZE_TOO_LARGE"]

    expected_broker = ("Dynamic configs for broker 1 are:\n"
                       "  message.max.bytes=5000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:message.max.bytes"
                       "=5000, DEFAULT_CONFIG:message.max.bytes=1048588}\n")
    expected_default = ("Default configs for brokers in the cluster are:\n"
                        "  log.segment.bytes=1048576 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
                        "log.segment.bytes=1048576}\n")
    if backend == "embedded":  # KRaft with eligible leader replicas: min.insync.replicas is cluster-wide
        expected_default += ("  min.insync.replicas=1 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:"
                             "min.insync.replicas=1}\n")
    assert kfk("configs", "--describe", "--broker", "1", *server).stdout == expected_broker
    assert kfk("configs", "--describe", "--entity-type", "brokers", "--entity-default", *server).stdout \
        == expected_default
    assert kfk("configs", "--describe", "--entity-type", "brokers", *server).stdout \
        == expected_broker + expected_default

    # What Kafka refuses, in one line and in Python's terms.
    for flags, message in [
        (["--broker", "1", "--add-config", "log.retention.hours=1"],
         "Cannot update these configs dynamically: log.retention.hours"),
        (["--broker-defaults", "--add-config", "listeners=PLAINTEXT://127.0.0.1:0"],
         "Cannot update these configs at default cluster level, broker id must be specified: listeners"),
        (["--broker", "1", "--add-config", "message.max.bytes=big"], "message.max.bytes"),
    ]:
        refused = kfk("configs", "--alter", *flags, *server)
        assert refused.returncode == 1 and refused.stdout == "", refused
        assert refused.stderr.startswith("kfk: ") and message in refused.stderr and "Set(" not in refused.stderr
        assert len(refused.stderr.splitlines()) == 1

    # A listener added without a restart: clients bootstrapping on it find the broker there.
    extra = free_port()
    listeners = f"PLAINTEXT://127.0.0.1:{process.port},EXTRA://127.0.0.1:{extra}"
    altered = kfk("configs", "--alter", "--broker", "1", "--add-config",
                  f"listeners=[{listeners}],listener.security.protocol.map=[PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT]",
                  *server)
    assert altered.returncode == 0, altered.stderr
    assert produce(f"127.0.0.1:{extra}", "t", 1, 100) == [None]
    assert f"  listeners={listeners} sensitive=false synonyms={{DYNAMIC_BROKER_CONFIG:listeners={listeners}, " \
        in kfk("configs", "--describe", "--broker", "1", *server).stdout

    # A restart reads them back from the metadata (ZooKeeper: Kafka's znodes).
    if backend == "zookeeper":
        from kazoo.client import KazooClient

        client = KazooClient(hosts=process.overrides["zookeeper.connect"])
        client.start()
        try:
            assert json.loads(client.get("/config/brokers/<default>")[0]) == {
                "version": 1, "config": {"log.segment.bytes": str(SEGMENT_BYTES)}}
            assert json.loads(client.get("/config/brokers/1")[0]) == {"version": 1, "config": {
                "message.max.bytes": "5000", "listeners": listeners,
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTRA:PLAINTEXT"}}
            endpoints = json.loads(client.get("/brokers/ids/1")[0])["endpoints"]
            assert f"EXTRA://127.0.0.1:{extra}" in endpoints
        finally:
            client.stop()
    process.stop()
    process.start()
    described = kfk("configs", "--describe", "--broker", "1", *server).stdout.splitlines()
    assert expected_broker.splitlines()[1] in described and described[2].startswith(f"  listeners={listeners} ")
    assert produce(process.bootstrap_servers, "t", 1, 10_000) == ["MSG_SIZE_TOO_LARGE"]
    assert produce(f"127.0.0.1:{extra}", "t", 1, 100) == [None]  # bound again at startup
    topic = json.loads(kfk("configs", "--describe", "--all", "--topic", "t", "--json", *server).stdout)
    segment = next(entry for entry in topic if entry["name"] == "segment.bytes")
    assert (segment["value"], segment["source"]) == (str(SEGMENT_BYTES), "DYNAMIC_DEFAULT_BROKER_CONFIG")

    # Deleting the per-broker values falls back to the default and server.properties again: EXTRA closes.
    assert kfk("configs", "--alter", "--broker", "1", "--delete-config",
               "message.max.bytes,listeners,listener.security.protocol.map", *server).returncode == 0
    assert produce(process.bootstrap_servers, "t", 1, 10_000) == [None]
    assert kfk("configs", "--describe", "--broker", "1", *server).stdout == "Dynamic configs for broker 1 are:\n"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and port_open(extra):
        time.sleep(0.1)
    assert not port_open(extra)


def test_connection_limits_and_cleaner_threads_change_at_run_time(kfk_broker_process) -> None:
    process = kfk_broker_process
    server = ["--bootstrap-server", process.bootstrap_servers]
    altered = kfk("configs", "--alter", "--broker-defaults", "--add-config",
                  "max.connections.per.ip=3,log.cleaner.threads=2", *server)
    assert altered.returncode == 0, altered.stderr
    deadline = time.monotonic() + 10
    while "Log cleaner restarted with 2 thread(s)" not in process.output() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "Log cleaner restarted with 2 thread(s)" in process.output()

    sockets = [socket.create_connection(("127.0.0.1", process.port)) for _ in range(4)]
    try:
        for probe in sockets:
            probe.settimeout(10)
        assert sockets[3].recv(1) == b""  # the fourth from this address is closed at once
        sockets[0].settimeout(0.5)
        with pytest.raises(socket.timeout):  # the first three stay open
            sockets[0].recv(1)
    finally:
        for probe in sockets:
            probe.close()
    assert "max.connections.per.ip" in process.output()
    assert kfk("configs", "--alter", "--broker-defaults", "--delete-config", "max.connections.per.ip",
               *server).returncode == 0
    many = [socket.create_connection(("127.0.0.1", process.port)) for _ in range(6)]
    try:
        many[5].settimeout(0.5)
        with pytest.raises(socket.timeout):
            many[5].recv(1)
    finally:
        for probe in many:
            probe.close()


def test_broker_loggers_change_a_level_at_run_time(kfk_broker_process) -> None:
    process = kfk_broker_process
    server = ["--bootstrap-server", process.bootstrap_servers]
    logger = "kfk.replication.replica_manager"
    described = kfk("configs", "--describe", "--broker-logger", "1", *server)
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert lines[0] == "Dynamic configs for broker-logger 1 are:"
    assert "  root=INFO sensitive=false synonyms={}" in lines and f"  {logger}=INFO sensitive=false synonyms={{}}" \
        in lines

    assert kfk("topics", "create", "--topic", "small", "--config", "max.message.bytes=100", *server).returncode == 0
    altered = kfk("configs", "--alter", "--entity-type", "broker-loggers", "--entity-name", "1",
                  "--add-config", f"{logger}=DEBUG", *server)
    assert (altered.returncode, altered.stdout) == (0, "Completed updating config for broker-logger 1.\n")
    assert f"  {logger}=DEBUG sensitive=false synonyms={{}}" in kfk(
        "configs", "--describe", "--broker-logger", "1", *server).stdout.splitlines()
    assert produce(process.bootstrap_servers, "small", 1, 1000) == ["MSG_SIZE_TOO_LARGE"]
    assert f"DEBUG {logger}: Produce to small-0 failed" in process.output()
    assert f"WARNING kfk.server.broker_loggers: Updated the log level of {logger} to DEBUG" in process.output()

    assert kfk("configs", "--alter", "--broker-logger", "1", "--delete-config", logger, *server).returncode == 0
    assert f"  {logger}=INFO sensitive=false synonyms={{}}" in kfk(
        "configs", "--describe", "--broker-logger", "1", *server).stdout.splitlines()

    for flags, message in [
        ([f"{logger}=LOUD"], f"Cannot set the log level of {logger} to LOUD as it is not a supported log level. "
                             "Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"),
        (["no.such.logger=INFO"], "Logger no.such.logger does not exist!"),
    ]:
        refused = kfk("configs", "--alter", "--broker-logger", "1", "--add-config", *flags, *server)
        assert refused.returncode == 1 and message in refused.stderr and len(refused.stderr.splitlines()) == 1
    refused = kfk("configs", "--alter", "--broker-logger", "1", "--delete-config", "root", *server)
    assert refused.returncode == 1 and "Removing the log level of the root logger is not allowed" in refused.stderr
