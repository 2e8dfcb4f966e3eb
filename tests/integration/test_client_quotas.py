"""Client quotas enforced on a real broker with real clients: a confluent-kafka producer held to its client-id's
producer_byte_rate and told so (throttle events), a consumer slowed by consumer_byte_rate, request_percentage
throttling a client that keeps the broker busy (throttle_time_ms on the wire, then a muted connection), and quotas
altered while clients run taking effect at once. Quotas are set through kfk's Admin (AlterClientQuotas).

The broker measures rates over quota.window.num=2 windows of 1 s instead of Kafka's default 11: a client with a new
quota may take all but one window's worth at once (Kafka's Rate measures a young rate over at least that span), and
when that burst leaves the window the client may burst again. With 11 windows that is ten seconds of quota at a time
(a producer saturating 1 MB/s from a cold start averages 1.3 MB/s over its first 20 s, on kfk as on Kafka); with 2 it
is one second, so 20 s show the steady rate."""

from __future__ import annotations

import time

import confluent_kafka
import pytest

from kfk.client.admin import Admin
from kfk.client.structs import ClientQuotaAlteration, NewTopic
from kfk.common.client_quotas import ClientQuotaEntity
from kfk.protocol.messages.metadata import MetadataRequest
from kfk.testing.broker import start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.integration import wire

pytestmark = pytest.mark.integration

MB = 1024 * 1024
RECORD = b"q" * 1024


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    """One broker for the module; each test quotas a client-id of its own."""
    broker = start_broker(tmp_path_factory.mktemp("quota-broker"), dict(TEST_OVERRIDES, **{"quota.window.num": "2"}))
    yield broker.bootstrap_servers
    broker.stop()


def set_quotas(bootstrap: str, client_id: str, **quotas: float | None) -> None:
    entity = ClientQuotaEntity.of([("client-id", client_id)])
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.alter_client_quotas([ClientQuotaAlteration(entity, quotas)]) == {entity: None}


def create_topic(bootstrap: str, name: str) -> None:
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.create_topics([NewTopic(name, 1, 1)]) == {name: None}


class Throttles:
    """librdkafka's throttle events (the broker's throttle_time_ms, as the client reports it)."""

    def __init__(self) -> None:
        self.times_ms: list[int] = []

    def __call__(self, event) -> None:
        if event.throttle_time > 0:
            self.times_ms.append(int(event.throttle_time * 1000))


def produce_for(bootstrap: str, client_id: str, topic: str, seconds: float, throttles: Throttles,
                after_first_throttle: bool = False) -> int:
    """Produce 1 KiB records as fast as the client can for `seconds` (counted from the first throttle event if
    `after_first_throttle`: the burst a new quota allows is over); the value bytes delivered in that time."""
    delivered = 0
    deadline = float("inf") if after_first_throttle else time.monotonic() + seconds

    def on_delivery(error, message) -> None:
        nonlocal delivered
        if error is None and time.monotonic() < deadline and (throttles.times_ms or not after_first_throttle):
            delivered += len(message.value())

    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                                         "acks": 1, "throttle_cb": throttles, "batch.size": 128 * 1024,
                                         "queue.buffering.max.kbytes": 64 * 1024})
    give_up = time.monotonic() + seconds + 10
    while time.monotonic() < min(deadline, give_up):
        if after_first_throttle and throttles.times_ms and deadline == float("inf"):
            deadline = time.monotonic() + seconds
        try:
            producer.produce(topic, RECORD, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.01)
            continue
        producer.poll(0)
    producer.poll(0)
    producer.purge()
    producer.flush(10)
    return delivered


def test_a_producer_is_held_to_its_client_id_quota_and_sees_throttle_time(bootstrap: str) -> None:
    create_topic(bootstrap, "limited")
    set_quotas(bootstrap, "limited-producer", producer_byte_rate=MB)
    throttles = Throttles()
    seconds = 20
    delivered = produce_for(bootstrap, "limited-producer", "limited", seconds, throttles, after_first_throttle=True)
    rate = delivered / seconds
    assert 0.9 * MB <= rate <= 1.1 * MB, f"{rate / MB:.3f} MB/s"
    assert throttles.times_ms and max(throttles.times_ms) > 0


def test_quotas_altered_live_take_effect(bootstrap: str) -> None:
    create_topic(bootstrap, "live")
    set_quotas(bootstrap, "live-producer", producer_byte_rate=100_000)
    throttles = Throttles()
    delivered = produce_for(bootstrap, "live-producer", "live", 3, throttles)
    assert delivered <= 1.5 * 100_000 * (3 + 1) and throttles.times_ms
    set_quotas(bootstrap, "live-producer", producer_byte_rate=None)
    throttles = Throttles()
    delivered = produce_for(bootstrap, "live-producer", "live", 3, throttles)
    assert delivered > 5 * MB and throttles.times_ms == []


def test_a_consumer_is_slowed_by_its_consumer_byte_rate(bootstrap: str) -> None:
    create_topic(bootstrap, "to-read")
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for _ in range(4 * 1024):
        producer.produce("to-read", RECORD)
        producer.poll(0)
    assert producer.flush(30) == 0

    def consume(client_id: str, seconds: float) -> tuple[int, Throttles]:
        throttles = Throttles()
        consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "client.id": client_id,
                                             "group.id": client_id, "auto.offset.reset": "earliest",
                                             "throttle_cb": throttles, "enable.auto.commit": False})
        consumer.subscribe(["to-read"])
        received = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and received < 4 * MB:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                received += len(message.value())
        consumer.close()
        return received, throttles

    received, throttles = consume("unlimited-consumer", 15)
    assert received == 4 * MB and throttles.times_ms == []
    set_quotas(bootstrap, "limited-consumer", consumer_byte_rate=100_000)
    received, throttles = consume("limited-consumer", 6)
    # A window's worth at once (a fetch is cut to that much), then the quota's pace.
    assert 0 < received <= 1.5 * 100_000 * (6 + 1), received
    assert throttles.times_ms


def test_request_percentage_throttles_a_busy_client_and_mutes_its_connection(bootstrap: str) -> None:
    set_quotas(bootstrap, "busy", request_percentage=0.01)  # 0.1 ms of the broker's time per second
    with wire.connect(bootstrap) as sock:
        throttle_ms = 0
        for correlation_id in range(1, 200):
            response = wire.request(sock, MetadataRequest(topics=None), 12, correlation_id, client_id="busy")
            throttle_ms = response.throttle_time_ms
            if throttle_ms:
                break
        assert 0 < throttle_ms <= 1000  # bounded by one quota window, as Kafka bounds request throttling
        started = time.monotonic()
        response = wire.request(sock, MetadataRequest(topics=None), 12, 1000, client_id="busy")
        assert time.monotonic() - started >= throttle_ms / 1000 * 0.9  # muted: the next request waited
    with wire.connect(bootstrap) as sock:  # another client-id is not throttled
        for correlation_id in range(1, 50):
            response = wire.request(sock, MetadataRequest(topics=None), 12, correlation_id, client_id="idle")
            assert response.throttle_time_ms == 0
