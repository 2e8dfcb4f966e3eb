"""Fetch responses over TLS, whose records the broker reads from the segment files and encrypts a chunk at a time
(kfk.server.network: TLS_FILE_CHUNK_BYTES) where plaintext sends them with sendfile: a raw Fetch of a partition many
chunks long gets the very bytes over SSL that it gets over PLAINTEXT, and confluent-kafka reads such a partition over
SSL completely and in order."""

from __future__ import annotations

import ssl
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer

from kfk.protocol.messages.fetch import FetchRequest
from kfk.server.network import TLS_FILE_CHUNK_BYTES
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.integration.test_clients import create_topic, produce_all
from tests.integration.wire import connect, request

from .conftest import Certificates

pytestmark = pytest.mark.integration

#: Records of 10 KB, this many: the partition is about 12 chunks long.
RECORDS = 12 * TLS_FILE_CHUNK_BYTES // 10_000
EVERYTHING = 2**31 - 1


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, certificates: Certificates) -> Iterator[BrokerProcess]:
    """A broker with a PLAINTEXT and an SSL listener, and a topic "chunks" of RECORDS numbered records."""
    process = start_broker(tmp_path_factory.mktemp("tls-fetch"), {**TEST_OVERRIDES, **certificates.broker_overrides()},
                           extra_listeners=["SSL://127.0.0.1:0"])
    plaintext = process.bootstrap_servers
    create_topic(plaintext, "chunks")
    produce_all(plaintext, "chunks", [(0, None, record_value(index), []) for index in range(RECORDS)],
                **{"batch.size": 100_000, "compression.type": "none"})
    yield process
    process.stop()


def record_value(index: int) -> bytes:
    return f"{index:06d}".encode().ljust(10_000, b".")


def fetch_records(address: str, context: ssl.SSLContext | None) -> bytes:
    fetch = FetchRequest(max_wait_ms=0, min_bytes=1, max_bytes=EVERYTHING, isolation_level=0, topics=[
        FetchRequest.FetchTopic(topic="chunks", partitions=[
            FetchRequest.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=EVERYTHING)])])
    with connect(address) as raw:
        sock = context.wrap_socket(raw, server_hostname="localhost") if context is not None else raw
        response = request(sock, fetch, 12)
    (partition,) = response.responses[0].partitions
    assert partition.error_code == 0 and partition.high_watermark == RECORDS
    return bytes(partition.records)


def test_a_fetch_over_ssl_gets_the_same_bytes_as_over_plaintext(broker: BrokerProcess,
                                                                certificates: Certificates) -> None:
    plaintext = fetch_records(broker.bootstrap_servers, None)
    encrypted = fetch_records(f"127.0.0.1:{broker.ports['SSL']}",
                              ssl.create_default_context(cafile=str(certificates.ca)))
    assert len(plaintext) > RECORDS * 10_000 > 10 * TLS_FILE_CHUNK_BYTES  # the whole partition, many chunks long
    assert encrypted == plaintext


def test_confluent_kafka_reads_a_partition_many_chunks_long_over_ssl_in_order(broker: BrokerProcess,
                                                                              certificates: Certificates) -> None:
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{broker.ports['SSL']}", "security.protocol": "SSL",
                         "ssl.ca.location": str(certificates.ca), "group.id": f"g-{uuid.uuid4().hex[:6]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "max.partition.fetch.bytes": 16 * 1024 * 1024})  # the whole partition in a fetch
    consumer.subscribe(["chunks"])
    received: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 60
    try:
        while len(received) < RECORDS and time.monotonic() < deadline:
            received += [(m.offset(), m.value()) for m in consumer.consume(1000, 0.5) if m.error() is None]
    finally:
        consumer.close()
    assert received == [(index, record_value(index)) for index in range(RECORDS)]
