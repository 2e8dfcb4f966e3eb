"""A load generator that speaks the wire protocol directly (kfk's codec, no client library): what a broker sustains
when the client costs almost nothing per record.

librdkafka builds and parses records one by one (and confluent-kafka adds Python per record), so on two shared cores
a real client tops out near 400 MB/s of 1 KiB records, whichever broker it talks to. This client sends the same
pre-built batch of records again and again (the broker assigns the offsets), pipelined like a producer's in-flight
requests, and fetches by reading whole responses and walking batch headers only. Used by bench/run.py for both
brokers alike, next to the real clients.
"""

from __future__ import annotations

import socket
import time
from collections import deque

from kfk.protocol.headers import RequestHeader, decode_response, encode_request
from kfk.protocol.messages.fetch import FetchRequest
from kfk.protocol.messages.produce import ProduceRequest
from kfk.records import MemoryRecordsBuilder, iter_batches

PRODUCE_VERSION = 9
FETCH_VERSION = 12


class _Connection:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation_id = 0
        self._buffer = bytearray(64 * 1024 * 1024)
        self._view = memoryview(self._buffer)

    def frame(self, message: object, version: int) -> tuple[int, bytes]:
        self.correlation_id += 1
        header = RequestHeader(request_api_key=message.API_KEY, request_api_version=version,
                               correlation_id=self.correlation_id, client_id="kfk-bench-wire")
        return self.correlation_id, encode_request(header, message)

    def read_response(self) -> memoryview:
        size = int.from_bytes(self._read(4), "big")
        if size > len(self._buffer):
            self._buffer = bytearray(size)
            self._view = memoryview(self._buffer)
        return self._read(size)

    def _read(self, size: int) -> memoryview:
        view = self._view
        received = 0
        while received < size:
            count = self.sock.recv_into(view[received:size])
            if not count:
                raise ConnectionError("the broker closed the connection")
            received += count
        return view[:size]

    def close(self) -> None:
        self.sock.close()


def build_batch(record_size: int, batch_bytes: int) -> tuple[bytes, int]:
    """One batch of `record_size`-byte values, about `batch_bytes` long; returns it and its record count."""
    builder = MemoryRecordsBuilder()
    value = (bytes(range(256)) * (record_size // 256 + 1))[:record_size]
    count = 0
    while builder.estimated_size_in_bytes() + record_size + 32 <= batch_bytes:
        builder.append(int(time.time() * 1000), None, value)
        count += 1
    return bytes(builder.close()), count


def produce(bootstrap: str, topic: str, total_records: int, record_size: int, batch_bytes: int = 1 << 20,
            in_flight: int = 5) -> tuple[float, int]:
    """acks=1 produce of the same batch until `total_records` went out; returns (seconds, records sent)."""
    batch, per_batch = build_batch(record_size, batch_bytes)
    request = ProduceRequest(acks=1, timeout_ms=30_000, topic_data=[ProduceRequest.TopicProduceData(
        name=topic, partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    connection = _Connection(bootstrap)
    outstanding: deque[int] = deque()
    batches = max(1, total_records // per_batch)
    start = time.perf_counter()
    try:
        for _ in range(batches):
            if len(outstanding) >= in_flight:
                _check_produce(connection, outstanding.popleft())
            correlation_id, frame = connection.frame(request, PRODUCE_VERSION)
            connection.sock.sendall(frame)
            outstanding.append(correlation_id)
        while outstanding:
            _check_produce(connection, outstanding.popleft())
    finally:
        connection.close()
    return time.perf_counter() - start, batches * per_batch


def _check_produce(connection: _Connection, correlation_id: int) -> None:
    answered, response = decode_response(connection.read_response(), ProduceRequest.API_KEY, PRODUCE_VERSION)
    if answered != correlation_id:
        raise RuntimeError(f"response {answered} to request {correlation_id}")
    for topic in response.responses:
        for partition in topic.partition_responses:
            if partition.error_code:
                raise RuntimeError(f"produce failed with error {partition.error_code}")


def fetch(bootstrap: str, topic: str, end_offset: int, max_bytes: int = 52_428_800,
          partition_max_bytes: int = 10_485_760) -> tuple[float, int]:
    """Fetch partition 0 from offset 0 to `end_offset`; returns (seconds, bytes of record batches received)."""
    connection = _Connection(bootstrap)
    offset = 0
    received = 0
    start = time.perf_counter()
    try:
        while offset < end_offset:
            request = FetchRequest(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=max_bytes,
                                   isolation_level=0, topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                                       FetchRequest.FetchPartition(partition=0, fetch_offset=offset,
                                                                   partition_max_bytes=partition_max_bytes)])])
            correlation_id, frame = connection.frame(request, FETCH_VERSION)
            connection.sock.sendall(frame)
            answered, response = decode_response(connection.read_response(), FetchRequest.API_KEY, FETCH_VERSION)
            data = response.responses[0].partitions[0]
            if answered != correlation_id or data.error_code:
                raise RuntimeError(f"fetch failed with error {data.error_code}")
            records = data.records or b""
            received += len(records)
            for batch in iter_batches(records):
                offset = max(offset, batch.last_offset + 1)
    finally:
        connection.close()
    return time.perf_counter() - start, received
