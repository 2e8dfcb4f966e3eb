"""Three brokers on ZooKeeper whose one listener, and so their inter-broker listener, is SASL_PLAINTEXT or SASL_SSL
(PLAIN between the brokers, sasl.mechanism.inter.broker.protocol): the replica fetchers, the controller channel and
the transaction markers authenticate, a topic stays fully in sync under acks=all and fails over when its leader is
killed; SCRAM credentials set through one broker (written to /config/users in ZooKeeper) let a user in on every
broker."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.client import Admin
from kfk.client.structs import UserScramCredentialUpsertion

from tests.cluster.helpers import wait_until
from tests.security.cluster_checks import fail_over_and_read_back, partition_zero, produce_acks_all
from tests.security.conftest import Certificates
from tests.security.test_sasl_clients import PLAIN_JAAS

pytestmark = [pytest.mark.integration, pytest.mark.zookeeper]


def _client(protocol: str, certificates: Certificates, bootstrap: str, mechanism: str = "PLAIN",
            user: str = "alice", password: str = "alice-secret") -> dict[str, str]:
    config = {"bootstrap.servers": bootstrap, "security.protocol": protocol, "sasl.mechanism": mechanism,
              "sasl.username": user, "sasl.password": password}
    if protocol == "SASL_SSL":
        config["ssl.ca.location"] = str(certificates.ca)
    return config




@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_a_sasl_inter_broker_listener_replicates_and_fails_over(kfk_cluster_factory, certificates,
                                                                protocol: str) -> None:
    overrides = {"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256", "sasl.mechanism.inter.broker.protocol": "PLAIN",
                 f"listener.name.{protocol.lower()}.plain.sasl.jaas.config": PLAIN_JAAS, "min.insync.replicas": "2"}
    if protocol == "SASL_SSL":
        overrides.update(certificates.broker_overrides("none"))
    cluster = kfk_cluster_factory(3, overrides, listener_name=protocol)
    config = _client(protocol, certificates, cluster.bootstrap_servers)
    admin = AdminClient(config)
    topic = f"sasl-replicated-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    first = [f"before-{index}".encode() for index in range(200)]
    produce_acks_all(config, topic, first)
    # acks=all with min.insync.replicas=2 succeeded and the ISR holds all three: the followers authenticated.
    wait_until(lambda: len(partition_zero(admin, topic).isrs) == 3, 20, what="three in-sync replicas")
    kfk_config = {**{key: value for key, value in config.items() if key != "ssl.ca.location"},
                  **({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(certificates.ca)}
                     if protocol == "SASL_SSL" else {})}
    with Admin(kfk_config) as kfk_admin:
        assert kfk_admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion("scrammy", "SCRAM-SHA-256", 4096, "scrammy-secret")]) == {"scrammy": None}
    for broker in cluster.brokers.values():  # every broker read the credential from ZooKeeper
        scram = _client(protocol, certificates, broker.bootstrap_servers, "SCRAM-SHA-256", "scrammy",
                        "scrammy-secret")
        wait_until(lambda: _logs_in(scram), 20, what=f"SCRAM login at broker {broker.node_id}")
    fail_over_and_read_back(cluster, admin, topic, first, lambda bootstrap: _client(protocol, certificates, bootstrap))


def _logs_in(config: dict[str, str]) -> bool:
    errors: list = []
    producer = Producer({**config, "error_cb": errors.append, "log_level": 0, "socket.timeout.ms": 5000})
    metadata_ok = True
    try:
        producer.list_topics(timeout=5)
    except Exception:  # noqa: BLE001 - refused: not yet
        metadata_ok = False
    return metadata_ok and not errors
