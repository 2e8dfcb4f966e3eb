"""Batches that librdkafka (confluent-kafka) produces, captured on a socket and decoded by kfk, for every codec.

The listener below is a capture device, not a broker: it answers ApiVersions, Metadata (v0) and Produce just well
enough for librdkafka to send its batches, and keeps every Produce request's records.
"""

from __future__ import annotations

import socketserver
import struct
import threading
from collections.abc import Iterator

import confluent_kafka
import pytest

from kfk.records import CompressionType, RecordBatch, iter_batches
from tests.records.produce_frames import produce_records

TOPIC = "capture"
CODECS = {"none": CompressionType.NONE, "gzip": CompressionType.GZIP, "snappy": CompressionType.SNAPPY,
          "lz4": CompressionType.LZ4, "zstd": CompressionType.ZSTD}
MESSAGES = [
    (b"key-0", b'{"n": 0, "text": "hello hello hello hello"}' * 20, [("trace", b"t-0"), ("null", None)]),
    (None, b'{"n": 1, "text": "null key"}' * 20, []),
    (b"tombstone", None, [("reason", b"gone")]),
    (b"big", b"0123456789abcdef" * 16_384, []),  # 256 KiB
    (b"", b"", [("empty", b"")]),
]
# Produce, Fetch, Metadata, FindCoordinator, ApiVersions. librdkafka derives features from these: MsgVer2 needs
# Produce v3 + Fetch v4, zstd Produce v7 + Fetch v10, and lz4 is keyed on FindCoordinator (introduced with it).
ADVERTISED = {0: (0, 7), 1: (0, 11), 3: (0, 0), 10: (0, 0), 18: (0, 3)}


def _string(value: str) -> bytes:
    encoded = value.encode()
    return struct.pack(">h", len(encoded)) + encoded


def _api_versions_body(version: int) -> bytes:
    if version >= 3:
        body = struct.pack(">h", 0) + bytes([len(ADVERTISED) + 1])
        body += b"".join(struct.pack(">hhh", key, low, high) + b"\x00" for key, (low, high) in ADVERTISED.items())
        return body + struct.pack(">i", 0) + b"\x00"
    body = struct.pack(">hi", 0, len(ADVERTISED))
    body += b"".join(struct.pack(">hhh", key, low, high) for key, (low, high) in ADVERTISED.items())
    return body + (struct.pack(">i", 0) if version >= 1 else b"")


def _metadata_v0_body(port: int) -> bytes:
    brokers = struct.pack(">ii", 1, 0) + _string("127.0.0.1") + struct.pack(">i", port)
    partition = struct.pack(">hiii", 0, 0, 0, 1) + struct.pack(">i", 0) + struct.pack(">ii", 1, 0)
    topics = struct.pack(">ih", 1, 0) + _string(TOPIC) + struct.pack(">i", 1) + partition
    return brokers + topics


def _produce_body(version: int, partitions: list[tuple[bytes, int, bytes]]) -> bytes:
    body = struct.pack(">i", len(partitions))
    for topic, partition, _ in partitions:
        body += _string(topic.decode()) + struct.pack(">iihq", 1, partition, 0, 0)
        if version >= 2:
            body += struct.pack(">q", -1)
        if version >= 5:
            body += struct.pack(">q", 0)
    return body + (struct.pack(">i", 0) if version >= 1 else b"")


class _CaptureHandler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        server: _CaptureServer = self.server  # type: ignore[assignment]
        while True:
            size_bytes = self._read(4)
            if size_bytes is None:
                return
            frame = self._read(struct.unpack(">i", size_bytes)[0])
            if frame is None:
                return
            api_key, api_version, correlation_id = struct.unpack_from(">hhi", frame)
            if api_key == 18:
                body = _api_versions_body(api_version)
            elif api_key == 3:
                body = _metadata_v0_body(server.server_address[1])
            elif api_key == 0:
                partitions = produce_records(frame)
                server.captured.extend(records for _, _, records in partitions)
                body = _produce_body(api_version, partitions)
            else:
                return  # not needed for capture: hang up
            response = struct.pack(">i", correlation_id) + body
            self.request.sendall(struct.pack(">i", len(response)) + response)

    def _read(self, size: int) -> bytes | None:
        chunks = b""
        while len(chunks) < size:
            chunk = self.request.recv(size - len(chunks))
            if not chunk:
                return None
            chunks += chunk
        return chunks


class _CaptureServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _CaptureHandler)
        self.captured: list[bytes] = []


@pytest.fixture(scope="module")
def captured() -> Iterator[dict[str, list[bytes]]]:
    """codec name -> the records fields librdkafka sent with that compression.type."""
    server = _CaptureServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    results: dict[str, list[bytes]] = {}
    try:
        for name in CODECS:
            server.captured = []
            producer = confluent_kafka.Producer({
                "bootstrap.servers": f"127.0.0.1:{server.server_address[1]}",
                "compression.type": name, "acks": 1, "linger.ms": 50, "message.timeout.ms": 10_000,
                "broker.address.family": "v4", "enable.idempotence": False})
            for key, value, headers in MESSAGES:
                producer.produce(TOPIC, value=value, key=key, headers=headers, partition=0, timestamp=1_700_000_000_000)
            assert producer.flush(10) == 0, f"librdkafka did not deliver with compression.type={name}"
            results[name] = list(server.captured)
    finally:
        server.shutdown()
        server.server_close()
    yield results


@pytest.mark.parametrize("name", list(CODECS))
def test_kfk_decodes_librdkafka_batches(captured: dict[str, list[bytes]], name: str) -> None:
    decoded = []
    batches = [entry for records in captured[name] for entry in iter_batches(records)]
    assert batches
    for batch in batches:
        assert isinstance(batch, RecordBatch)
        batch.validate()
        assert batch.compression_type == CODECS[name]
        decoded.extend(batch)
    assert [(record.key, record.value, record.headers) for record in decoded] == [
        (key, value, headers) for key, value, headers in MESSAGES]
    assert {record.timestamp for record in decoded} == {1_700_000_000_000}
