"""The golden frames: real client requests and tansu 0.6.0 responses, copied from the shared capture into
tests/data/golden/ (README.md there says how they were captured and which ones are known to be odd)."""

from __future__ import annotations

import functools
import json
from pathlib import Path

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"

#: librdkafka requests with bytes after the body (README "Client quirks"): they decode but cannot round trip.
TRAILING_BYTES_REQUESTS = {
    "frames/confluent-kafka/0006-Metadata-v12-req.bin": 3,
    "frames/confluent-kafka/0168-AlterUserScramCredentials-v0-req.bin": 1,
}

#: tansu 0.6.0 responses that are malformed (README "Verification"): decoding must raise ProtocolError.
MALFORMED_RESPONSES = {
    "frames/confluent-kafka/0019-DescribeUserScramCredentials-v0-resp.bin",
    "frames/confluent-kafka/0157-ListOffsets-v0-resp.bin",
    "frames/confluent-kafka/0158-ListOffsets-v0-resp.bin",
    "frames/confluent-kafka/0159-CreateAcls-v2-resp.bin",
    "frames/kafka-python/0141-CreateAcls-v3-resp.bin",
    "frames/kafka-python/0144-DescribeUserScramCredentials-v0-resp.bin",
    "frames/aiokafka/0067-OffsetFetch-v3-resp.bin",
    "frames/kcat/0007-ListOffsets-v0-resp.bin",
}


@functools.cache
def index() -> tuple[dict, ...]:
    lines = (GOLDEN / "index.jsonl").read_text(encoding="utf-8").splitlines()
    return tuple(json.loads(line) for line in lines if line.strip())


@functools.cache
def frame(relative_path: str) -> bytes:
    return (GOLDEN / relative_path).read_bytes()


def request_entries() -> list[dict]:
    return list(index())


def response_entries() -> list[dict]:
    return [entry for entry in index() if entry["response"]]
