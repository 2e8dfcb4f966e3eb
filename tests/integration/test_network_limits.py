"""The broker process keeps its network resources bounded (issue 16): request memory, connection quotas from
server.properties, and no warning storm when writing to clients that left."""

from __future__ import annotations

import socket
import struct
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer

from kfk.errors import ErrorCode
from kfk.protocol.headers import RequestHeader, encode_request
from kfk.protocol.messages.metadata import MetadataRequest
from kfk.protocol.primitives import INT32
from tests.integration.wire import api_versions_request, connect, is_closed, request

pytestmark = pytest.mark.integration


def vm_rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def produce_and_consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for index in range(count):
        producer.produce(topic, value=b"v%d" % index)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    consumer.close()
    return values


def test_announced_request_sizes_cost_no_memory_and_clients_keep_being_served(kfk_broker_factory) -> None:
    broker = kfk_broker_factory()
    pid = broker.process.pid
    assert produce_and_consume(broker.bootstrap_servers, "warm-up", 10) == [b"v%d" % i for i in range(10)]
    before = vm_rss_bytes(pid)
    hostile = []
    for _ in range(50):  # each announces a 100 MB request (socket.request.max.bytes) and sends a few bytes of it
        sock = connect(broker.bootstrap_servers)
        sock.sendall(INT32.pack(100 * 1024 * 1024) + b"\x00\x00\x00\x0c" + b"x" * 16)
        hostile.append(sock)
    values = produce_and_consume(broker.bootstrap_servers, "served", 100)
    assert values == [b"v%d" % i for i in range(100)]
    rss = vm_rss_bytes(pid)
    assert rss < 200 * 1024 * 1024, f"broker RSS {rss >> 20} MB (before the 50 sockets: {before >> 20} MB)"
    assert not any(is_closed_now(sock) for sock in hostile)  # still within socket.request.receive.timeout.ms
    for sock in hostile:
        sock.close()


def is_closed_now(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True
    finally:
        sock.setblocking(True)


def test_stalled_requests_are_closed_after_the_receive_timeout_and_logged_once(kfk_broker_factory) -> None:
    broker = kfk_broker_factory({"socket.request.receive.timeout.ms": "500"})
    stalled = [connect(broker.bootstrap_servers) for _ in range(5)]
    for sock in stalled:
        sock.sendall(INT32.pack(1024 * 1024) + b"abc")
    assert all(is_closed(sock) for sock in stalled)
    with connect(broker.bootstrap_servers) as good:
        assert request(good, api_versions_request(), 3).error_code == ErrorCode.NONE
    assert broker.output().count("socket.request.receive.timeout.ms") == 1


def test_per_ip_limit_from_server_properties_closes_the_excess_and_logs_once(kfk_broker_factory) -> None:
    broker = kfk_broker_factory({"max.connections.per.ip": "100", "max.connections.per.ip.overrides": "127.0.0.1:3"})
    kept = [connect(broker.bootstrap_servers) for _ in range(3)]
    for sock in kept:
        assert request(sock, api_versions_request(), 3).error_code == ErrorCode.NONE
    refused = [connect(broker.bootstrap_servers) for _ in range(10)]
    assert all(is_closed(sock) for sock in refused)
    kept[0].close()
    time.sleep(0.3)
    with connect(broker.bootstrap_servers) as again:
        assert request(again, api_versions_request(), 3).error_code == ErrorCode.NONE
    assert broker.output().count("max.connections.per.ip") == 1


def test_responses_to_a_client_that_left_are_dropped_without_warnings(kfk_broker_factory) -> None:
    broker = kfk_broker_factory()
    header = RequestHeader(request_api_key=MetadataRequest.API_KEY, request_api_version=12, correlation_id=0,
                           client_id="gone")
    frame = encode_request(header, MetadataRequest(topics=None))
    for _ in range(20):  # pipelined requests, then a close without reading a single response
        sock = connect(broker.bootstrap_servers)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST on close
        sock.sendall(frame * 200)
        sock.close()
    with connect(broker.bootstrap_servers) as good:
        assert request(good, api_versions_request(), 3).error_code == ErrorCode.NONE
    time.sleep(0.5)
    assert "socket.send() raised exception" not in broker.output()
