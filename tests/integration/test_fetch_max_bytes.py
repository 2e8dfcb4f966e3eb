"""The broker's fetch.max.bytes (KIP-541) caps every fetch response, whatever max_bytes the request asks, and the
first batch still comes whole when it alone is larger; a read-only config. Each check runs against kfk and against
Apache Kafka 4.0 itself with the same settings, through raw Fetch requests (kfk's codec over a socket)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
from confluent_kafka.error import KafkaException

from kfk.protocol.messages.fetch import FetchRequest
from kfk.testing.apache_kafka import ApacheKafka, ApacheKafkaStartError, ApacheKafkaUnavailable
from kfk.testing.broker import BrokerStartError, start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.integration.test_clients import create_topic, produce_all
from tests.integration.wire import connect, request

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
FETCH_MAX_BYTES = MIB
#: Room for the one record larger than fetch.max.bytes (the first-batch rule).
MESSAGE_MAX_BYTES = 4 * MIB
EVERYTHING = 2**31 - 1
CONFIG = {"fetch.max.bytes": str(FETCH_MAX_BYTES), "message.max.bytes": str(MESSAGE_MAX_BYTES)}


@pytest.fixture(scope="module", params=["kfk", "apache-kafka"])
def bootstrap(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A broker with fetch.max.bytes = 1 MiB: kfk's, or Apache Kafka itself."""
    if request.param == "kfk":
        broker = start_broker(tmp_path_factory.mktemp("kfk-broker"), {**TEST_OVERRIDES, **CONFIG})
        yield broker.bootstrap_servers
        broker.stop()
        return
    try:
        node = ApacheKafka(tmp_path_factory.mktemp("apache-kafka"), config=CONFIG).start()
    except (ApacheKafkaUnavailable, ApacheKafkaStartError) as error:
        pytest.fail(f"Apache Kafka could not be started: {error}")
    yield node.bootstrap_server
    node.stop()


def fetch_everything(bootstrap: str, topic: str, partitions: int) -> list[bytes]:
    """One Fetch v12 from offset 0 of each partition asking for as much as the protocol can say; the records of
    each partition as returned."""
    fetch = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=EVERYTHING, isolation_level=0, topics=[
        FetchRequest.FetchTopic(topic=topic, partitions=[
            FetchRequest.FetchPartition(partition=partition, fetch_offset=0, partition_max_bytes=EVERYTHING)
            for partition in range(partitions)])])
    with connect(bootstrap) as sock:
        response = request(sock, fetch, 12)
    (topic_response,) = response.responses
    assert [p.error_code for p in topic_response.partitions] == [0] * partitions
    return [bytes(p.records or b"") for p in sorted(topic_response.partitions, key=lambda p: p.partition_index)]


def batch_size(records: bytes, position: int = 0) -> int:
    """The size of the record batch at `position`: its batchLength (after baseOffset) plus 12."""
    return 12 + int.from_bytes(records[position + 8:position + 12], "big")


def test_a_fetch_asking_for_everything_gets_at_most_fetch_max_bytes(bootstrap: str) -> None:
    """3 MiB in each of two partitions, a Fetch of both with max_bytes 2**31-1: 1 MiB in all, all of it from the
    first partition (the limit is the response's, not each partition's), cut inside a batch as Kafka cuts it."""
    create_topic(bootstrap, "capped", 2)
    value = bytes(10_000)
    produce_all(bootstrap, "capped", [(partition, None, value, []) for partition in (0, 1) for _ in range(300)],
                **{"batch.size": 64 * 1024})
    first, second = fetch_everything(bootstrap, "capped", 2)
    assert (len(first), len(second)) == (FETCH_MAX_BYTES, 0)


def test_the_first_batch_comes_whole_even_above_fetch_max_bytes(bootstrap: str) -> None:
    create_topic(bootstrap, "big-first-batch", 1)
    producer_config = {"message.max.bytes": MESSAGE_MAX_BYTES, "compression.type": "none"}
    produce_all(bootstrap, "big-first-batch", [(0, None, bytes(3 * FETCH_MAX_BYTES // 2), [])], **producer_config)
    produce_all(bootstrap, "big-first-batch", [(0, None, b"small", [])], **producer_config)  # a batch of its own
    (records,) = fetch_everything(bootstrap, "big-first-batch", 1)
    assert len(records) == batch_size(records) > FETCH_MAX_BYTES  # that batch, and nothing of the next


def test_fetch_max_bytes_is_read_only(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[  # both brokers are node 1
        ConfigEntry("fetch.max.bytes", "2048", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException, match="Cannot update these configs dynamically: .*fetch.max.bytes"):
        admin.incremental_alter_configs([resource])[resource].result(30)


def test_fetch_max_bytes_below_1024_stops_the_broker_from_starting(tmp_path_factory: pytest.TempPathFactory) -> None:
    config = {**TEST_OVERRIDES, "fetch.max.bytes": "1023"}
    with pytest.raises(BrokerStartError, match="fetch.max.bytes"):
        start_broker(tmp_path_factory.mktemp("kfk-broker"), config).stop()
    with pytest.raises(ApacheKafkaStartError, match="Invalid value 1023 for configuration fetch.max.bytes"):
        ApacheKafka(tmp_path_factory.mktemp("apache-kafka"), config=config).start().stop()
