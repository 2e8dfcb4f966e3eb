"""Client configs: Kafka's names and defaults, snake_case keywords, one clear error for bad input."""

from __future__ import annotations

import pytest

from kfk.client import Consumer, Producer
from kfk.client.config import (
    CONSUMER_CONFIG_DEF,
    PRODUCER_CONFIG_DEF,
    ClientConfig,
    max_response_bytes,
    parse_bootstrap_servers,
)
from kfk.errors import InvalidConfigurationError, InvalidGroupIdError


def test_defaults_are_kafkas() -> None:
    producer = ClientConfig(PRODUCER_CONFIG_DEF, "producer")
    assert (producer.acks, producer.batch_size, producer.linger_ms, producer.buffer_memory) == ("all", 16384, 5,
                                                                                               33554432)
    assert producer.delivery_timeout_ms == 120_000 and producer.max_in_flight_requests_per_connection == 5
    consumer = ClientConfig(CONSUMER_CONFIG_DEF, "consumer")
    assert consumer.partition_assignment_strategy == ["range", "cooperative-sticky"]
    assert (consumer.auto_offset_reset, consumer.max_poll_records, consumer.session_timeout_ms) == ("latest", 500,
                                                                                                   45000)


def test_dotted_names_and_snake_case_keywords_mean_the_same() -> None:
    config = ClientConfig(PRODUCER_CONFIG_DEF, "producer", {"linger.ms": "20"}, batch_size=100)
    assert config.linger_ms == 20 and config["batch.size"] == 100
    assert "linger.ms" in config.given and "batch.size" in config.given


@pytest.mark.parametrize(("properties", "message"), [
    ({"linger.msec": 1}, "Unknown producer config name: linger.msec"),
    ({"acks": "2"}, "Invalid value 2 for configuration acks"),
    ({"batch.size": "big"}, "Invalid value big for configuration batch.size: Not a number of type INT"),
    ({"compression.type": "brotli"}, "compression.type"),
])
def test_bad_configs_fail_with_the_key_named(properties: dict, message: str) -> None:
    with pytest.raises(InvalidConfigurationError, match=message):
        ClientConfig(PRODUCER_CONFIG_DEF, "producer", properties)


def test_unknown_keyword_fails() -> None:
    with pytest.raises(InvalidConfigurationError, match="Unknown consumer config name: group"):
        ClientConfig(CONSUMER_CONFIG_DEF, "consumer", group="g")


def test_bootstrap_servers_parse_like_kafkas() -> None:
    assert parse_bootstrap_servers(["a:1", " b ", "[::1]:9093"]) == [("a", 1), ("b", 9092), ("::1", 9093)]
    for bad in (["a:x"], ["a:0"], [""], [":9"]):
        with pytest.raises(InvalidConfigurationError):
            parse_bootstrap_servers(bad)


def test_explicit_idempotence_with_a_conflicting_setting_is_an_error() -> None:
    with pytest.raises(InvalidConfigurationError, match="acks must be all"):
        Producer({"enable.idempotence": True, "acks": "1", "bootstrap.servers": "127.0.0.1:1"})


def test_idempotence_is_on_by_default_and_off_when_acks_is_not_all() -> None:
    producer = Producer({"bootstrap.servers": "127.0.0.1:1"})
    other = Producer({"bootstrap.servers": "127.0.0.1:1", "acks": "1"})
    try:
        assert producer.idempotent and not other.idempotent
    finally:
        producer.close(0)
        other.close(0)


def test_a_transactional_id_implies_idempotence_and_refuses_settings_that_conflict() -> None:
    producer = Producer({"transactional.id": "t", "bootstrap.servers": "127.0.0.1:1"})
    try:
        assert producer.idempotent and producer.acks == -1 and producer.config.transaction_timeout_ms == 60_000
    finally:
        producer.close(0)
    with pytest.raises(InvalidConfigurationError, match="transactional.id needs enable.idempotence"):
        Producer({"transactional.id": "t", "enable.idempotence": False, "bootstrap.servers": "127.0.0.1:1"})
    with pytest.raises(InvalidConfigurationError, match="acks must be all"):
        Producer({"transactional.id": "t", "acks": "1", "bootstrap.servers": "127.0.0.1:1"})


def test_consumers_read_committed_by_default_as_librdkafka() -> None:
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1"})
    try:
        assert consumer.config.isolation_level == "read_committed"
    finally:
        consumer.close()


def test_an_empty_group_id_is_refused_and_group_calls_need_one() -> None:
    with pytest.raises(InvalidGroupIdError):
        Consumer({"group.id": "", "bootstrap.servers": "127.0.0.1:1"})
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1"})
    try:
        with pytest.raises(InvalidGroupIdError, match="subscribe"):
            consumer.subscribe(["t"])
    finally:
        consumer.close()


def test_the_response_bound_is_librdkafkas_and_holds_a_consumers_largest_fetch() -> None:
    assert max_response_bytes(ClientConfig(PRODUCER_CONFIG_DEF, "producer")) == 100_000_000
    assert max_response_bytes(ClientConfig(CONSUMER_CONFIG_DEF, "consumer")) == 100_000_000
    raised = ClientConfig(CONSUMER_CONFIG_DEF, "consumer", {"fetch.max.bytes": 200_000_000})
    assert max_response_bytes(raised) == 200_000_512
    lowered = ClientConfig(CONSUMER_CONFIG_DEF, "consumer", {"fetch.max.bytes": 1000,
                                                            "receive.message.max.bytes": 2000})
    assert max_response_bytes(lowered) == 2000
    with pytest.raises(InvalidConfigurationError, match=r"receive.message.max.bytes \(2000\) must be at least"):
        max_response_bytes(ClientConfig(CONSUMER_CONFIG_DEF, "consumer", {"receive.message.max.bytes": 2000}))


@pytest.mark.parametrize(("properties", "message"), [
    ({"group.protocol": "consumer", "session.timeout.ms": 10000},
     "session.timeout.ms cannot be set when group.protocol=CONSUMER"),
    ({"group.protocol": "Consumer", "partition.assignment.strategy": "range", "heartbeat.interval.ms": 100},
     "partition.assignment.strategy, heartbeat.interval.ms cannot be set when group.protocol=CONSUMER"),
    ({"group.remote.assignor": "uniform"}, "group.remote.assignor cannot be set when group.protocol=CLASSIC"),
    ({"group.protocol": "eager"},
     "Invalid value eager for configuration group.protocol: String must be one of (case insensitive): CLASSIC, "
     "CONSUMER"),
])
def test_each_group_protocol_refuses_the_other_ones_configs_as_the_java_consumer(properties: dict,
                                                                                 message: str) -> None:
    with pytest.raises(InvalidConfigurationError) as raised:
        Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", **properties})
    assert str(raised.value) == message


def test_group_protocol_is_classic_by_default_and_case_insensitive() -> None:
    assert ClientConfig(CONSUMER_CONFIG_DEF, "consumer").group_protocol == "classic"
    consumer = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "group.protocol": "CONSUMER",
                         "group.remote.assignor": "range"})
    try:
        assert consumer._coordinator.membership.server_assignor == "range"
    finally:
        consumer.close()
