"""Client quotas through the tools, on both metadata backends: `kfk configs` and Apache Kafka's own
kafka-configs.sh alter and describe users / clients quotas on a kfk broker, each sees what the other wrote, and they
print the same lines. On ZooKeeper the quotas are Kafka's znodes (/config/clients/<id>, /config/users/<default>,
/config/users/<user>/clients/<id>, with config change notifications), and a quota another tool writes there is
picked up."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from kfk.security.sasl.scram import ScramMechanism, credential_from_password, format_credential
from tests.interop.jvm import kafka_tool

pytestmark = pytest.mark.integration


def kfk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfk", *args], capture_output=True, text=True, timeout=60)


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(params=["embedded", "zookeeper"])
def broker(request):
    if request.param == "embedded":
        process = request.getfixturevalue("kfk_broker_factory")()
    else:
        process = request.getfixturevalue("kfk_cluster_factory")(size=1, overrides={
            "offsets.topic.replication.factor": "1", "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1"}).broker(1)
    return request.param, process


def test_kfk_and_kafka_configs_alter_and_describe_client_quotas(broker) -> None:
    backend, process = broker
    server = ["--bootstrap-server", process.bootstrap_servers]

    assert ok(kfk("configs", "--alter", "--add-config", "producer_byte_rate=1048576", "--entity-type", "clients",
                  "--entity-name", "c1", *server)) == "Completed updating config for client c1.\n"
    assert ok(kfk("configs", "--alter", "--add-config", "consumer_byte_rate=2048,request_percentage=12.5",
                  "--entity-type", "users", "--entity-default", *server)) \
        == "Completed updating default config for users in the cluster.\n"
    assert ok(kfk("configs", "--alter", "--user", "alice", "--client", "c1", "--add-config",
                  "controller_mutation_rate=10", *server)) == "Completed updating config for user alice.\n"
    # Apache Kafka's tool writes one too.
    kafka_tool("configs", [*server, "--alter", "--add-config", "producer_byte_rate=20000000", "--entity-type",
                           "clients", "--entity-default"])

    c1 = "Quota configs for client-id 'c1' are producer_byte_rate=1048576.0\n"
    default_client = "Quota configs for the default client-id are producer_byte_rate=2.0E7\n"
    pair = "Quota configs for user-principal 'alice', client-id 'c1' are controller_mutation_rate=10.0\n"
    for flags, expected, also_kafka in [
        (["--entity-type", "clients", "--entity-name", "c1"], c1, False),
        (["--entity-type", "clients", "--entity-default"], default_client, False),
        (["--entity-type", "clients"], default_client + c1, True),
        (["--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "c1"],
         pair, True),
    ]:
        if also_kafka:  # each JVM start costs seconds: Kafka's tool describes the lists, kfk every case
            assert kafka_tool("configs", [*server, "--describe", *flags]).stdout == expected, flags
        if flags.count("--entity-type") == 1:
            assert ok(kfk("configs", "--describe", *flags, *server)) == expected, flags
    assert ok(kfk("configs", "--describe", "--user", "alice", "--client", "c1", *server)) == pair
    assert ok(kfk("configs", "--describe", "--user-defaults", *server)) \
        == "Quota configs for the default user-principal are consumer_byte_rate=2048.0, request_percentage=12.5\n"
    assert json.loads(ok(kfk("configs", "--describe", "--client", "c1", "--json", *server))) == [
        {"entity": {"client-id": "c1"}, "quotas": {"producer_byte_rate": 1048576.0}}]

    # Refused as Kafka refuses: one line, exit 1.
    for flags, message in [
        (["--client", "c1", "--add-config", "bogus_rate=1"], "Invalid configuration key bogus_rate"),
        (["--client", "c1", "--add-config", "producer_byte_rate=1.5"], "producer_byte_rate cannot be a fractional"),
        (["--client", "c1", "--add-config", "request_percentage=0"], "Quota request_percentage must be greater than 0"),
    ]:
        refused = kfk("configs", "--alter", *flags, *server)
        assert refused.returncode == 1 and message in refused.stderr and len(refused.stderr.splitlines()) == 1, \
            refused

    if backend == "zookeeper":
        from kazoo.client import KazooClient

        client = KazooClient(hosts=process.overrides["zookeeper.connect"])
        client.start()
        try:
            def config(path: str) -> dict:
                return json.loads(client.get(path)[0])

            assert config("/config/clients/c1") == {"version": 1, "config": {"producer_byte_rate": "1048576"}}
            assert config("/config/clients/<default>") == {"version": 1,
                                                           "config": {"producer_byte_rate": "20000000"}}
            assert config("/config/users/<default>") == {"version": 1, "config": {
                "consumer_byte_rate": "2048", "request_percentage": "12.5"}}
            assert config("/config/users/alice/clients/c1") == {"version": 1,
                                                                "config": {"controller_mutation_rate": "10.0"}}
            changes = [json.loads(client.get(f"/config/changes/{child}")[0])["entity_path"]
                       for child in client.get_children("/config/changes")]
            assert {"clients/c1", "clients/<default>", "users/<default>", "users/alice/clients/c1"} <= set(changes)
            # Written by another tool (as Kafka's ZooKeeper-mode tools did): a new client-id's quota, and a SCRAM
            # credential in alice's znode, which kfk reads and keeps when it rewrites the znode for her quota.
            client.create("/config/clients/zk%20tool", json.dumps(
                {"version": 1, "config": {"consumer_byte_rate": "4096"}}).encode())
            # kfk created alice's znode (empty) as the parent of her client-id's.
            assert config("/config/users/alice") == {"version": 1, "config": {}}
            credential = format_credential(credential_from_password(ScramMechanism.SCRAM_SHA_256, "alice-secret"))
            client.set("/config/users/alice", json.dumps({"version": 1, "config": {
                "SCRAM-SHA-256": credential}}).encode())
            expected = ("Quota configs for client-id 'zk tool' are consumer_byte_rate=4096.0\n",
                        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096\n")

            def seen() -> tuple[str, str]:
                return (ok(kfk("configs", "--describe", "--client", "zk tool", *server)),
                        ok(kfk("configs", "--describe", "--user", "alice", *server)))

            for _ in range(20):  # the broker's watches fire soon after the writes
                if seen() == expected:
                    break
            assert seen() == expected
            ok(kfk("configs", "--alter", "--user", "alice", "--add-config", "producer_byte_rate=100", *server))
            assert config("/config/users/alice") == {"version": 1, "config": {
                "SCRAM-SHA-256": credential, "producer_byte_rate": "100"}}
        finally:
            client.stop()

    # Removing the last key removes the entity; a restart reads the rest back from the metadata.
    assert ok(kfk("configs", "--alter", "--client", "c1", "--delete-config", "producer_byte_rate", *server)) \
        == "Completed updating config for client c1.\n"
    assert ok(kfk("configs", "--describe", "--client", "c1", *server)) == ""
    process.stop()
    process.start()
    assert ok(kfk("configs", "--describe", "--entity-type", "clients", "--entity-default", *server)) \
        == default_client
