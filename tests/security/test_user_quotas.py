"""User quotas with authenticated principals: SASL/PLAIN users on a real broker, each throttled by the quota of its
own user (shared by all its client-ids), a user+client-id quota overriding the user's (Kafka's precedence), a user
without a quota never throttled; confluent-kafka reports the broker's throttle times."""

from __future__ import annotations

import time
import uuid

import confluent_kafka
import pytest

from kfk.client import Admin, ClientQuotaAlteration, ClientQuotaEntity, NewTopic
from kfk.testing.broker import start_broker

from tests.security.test_sasl_clients import confluent_config, kfk_config, sasl_overrides

pytestmark = pytest.mark.integration

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    process = start_broker(tmp_path_factory.mktemp("user-quotas"), sasl_overrides(), listener_name="SASL_PLAINTEXT")
    yield process
    process.stop()


def throttled_while_producing(bootstrap: str, user: str, client_id: str, topic: str, seconds: float) -> list[float]:
    """Produce as fast as the client can for `seconds` as `user`; the throttle times the client was told of."""
    throttles: list[float] = []
    producer = confluent_kafka.Producer(confluent_config(
        bootstrap, "PLAIN", user, PASSWORDS[user], **{"client.id": client_id, "linger.ms": 5,
                                                      "throttle_cb": lambda event: throttles.append(
                                                          event.throttle_time)}))
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            producer.produce(topic, b"u" * 1024)
        except BufferError:
            producer.poll(0.01)
            continue
        producer.poll(0)
    producer.purge()
    producer.flush(10)
    return [throttle for throttle in throttles if throttle > 0]


def test_user_quotas_follow_the_authenticated_principal(broker) -> None:
    bootstrap = broker.bootstrap_servers
    topic = f"user-quotas-{uuid.uuid4().hex[:8]}"
    alice = ClientQuotaEntity.of([("user", "alice")])
    alice_vip = ClientQuotaEntity.of([("user", "alice"), ("client-id", "vip")])
    with Admin(kfk_config(bootstrap, "PLAIN", "admin", "admin-secret")) as admin:
        assert admin.create_topics([NewTopic(topic, 1, 1)]) == {topic: None}
        assert admin.alter_client_quotas([ClientQuotaAlteration(alice, {"producer_byte_rate": 50_000}),
                                          ClientQuotaAlteration(alice_vip, {"producer_byte_rate": 1e12})]) == {
            alice: None, alice_vip: None}
        assert admin.describe_client_quotas() == {alice: {"producer_byte_rate": 50_000.0},
                                                  alice_vip: {"producer_byte_rate": 1e12}}
    assert throttled_while_producing(bootstrap, "alice", "first", topic, 3)  # alice's own quota
    assert throttled_while_producing(bootstrap, "alice", "second", topic, 1)  # shared by her client-ids: still over
    assert throttled_while_producing(bootstrap, "alice", "vip", topic, 3) == []  # user+client-id comes first
    assert throttled_while_producing(bootstrap, "admin", "first", topic, 3) == []  # no quota for admin
