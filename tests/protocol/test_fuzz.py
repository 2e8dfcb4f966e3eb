"""Fuzz the request (and response) decoders with golden frames that were bit-flipped, truncated, spliced, had
their length fields corrupted or were replaced with random bytes. Only three outcomes are allowed: a decoded
message, ProtocolError or UnsupportedVersionError. A decoded message must also re-encode to bytes that decode
and re-encode to the same bytes (nothing the decoder accepts leaves a message the encoder cannot write).

The loop is seeded: a failure names the seed, the iteration and the frame in hex. Run another seed with
KFK_FUZZ_SEED=<n>, and more iterations with KFK_FUZZ_ITERATIONS=<n>.
"""

from __future__ import annotations

import os
import random
import struct

import pytest

from kfk.errors import ProtocolError, UnsupportedVersionError
from kfk.protocol.headers import (
    RequestHeader,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    request_header_version,
)
from kfk.protocol.messages import API_SCHEMAS, request_class, response_class

from .golden import frame, request_entries, response_entries

SEED = int(os.environ.get("KFK_FUZZ_SEED", "1729"))
REQUEST_ITERATIONS = int(os.environ.get("KFK_FUZZ_ITERATIONS", "200000"))
RESPONSE_ITERATIONS = REQUEST_ITERATIONS // 4
ALLOWED = (ProtocolError, UnsupportedVersionError)

# Values that make length and count fields interesting: null, negative, zero, one, and near the type limits.
INT32_VALUES = [0, 1, 2, -1, -2, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, -0x80000000, 0x7FFFFFFE]
INT16_VALUES = [0, 1, -1, -2, 0x7F, 0x80, 0x7FFF, -0x8000]
VARINT_BYTES = [b"\x00", b"\x01", b"\x7f", b"\x80\x01", b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x80\x01", b"\xff"]


def position(rng: random.Random, data: bytearray, body_start: int) -> int:
    """A byte to mutate: in the body four times out of five, so most frames get past the header."""
    if body_start < len(data) and rng.random() < 0.8:
        return rng.randrange(body_start, len(data))
    return rng.randrange(len(data))


def corrupt_length(rng: random.Random, data: bytearray, body_start: int) -> None:
    """Overwrite what may be an int32, int16 or varint length with an extreme value."""
    kind = rng.randrange(3)
    at = position(rng, data, body_start)
    if kind == 0:
        data[at : at + 4] = struct.pack(">i", rng.choice(INT32_VALUES + [len(data) - at - 4, len(data) - at - 3]))
    elif kind == 1:
        data[at : at + 2] = struct.pack(">h", rng.choice(INT16_VALUES + [len(data) - at - 2, len(data) - at - 1]))
    else:
        data[at : at + 1] = rng.choice(VARINT_BYTES)


def mutate(rng: random.Random, frames: list[tuple[bytes, int]]) -> tuple[bytes, bytes]:
    """A mutated frame and the golden frame it came from; `frames` holds golden frames with the offset where
    their body starts."""
    original, body_start = rng.choice(frames)
    data = bytearray(original)
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        if not data:
            data = bytearray(rng.randbytes(rng.randrange(1, 32)))
        kind = rng.randrange(8)
        if kind == 0:  # bit flips
            for _ in range(rng.randint(1, 4)):
                data[position(rng, data, body_start)] ^= 1 << rng.randrange(8)
        elif kind == 1:  # truncation
            del data[rng.randrange(len(data) + 1) :]
        elif kind == 2:  # splice: head of this frame, tail of another
            other = rng.choice(frames)[0]
            data = data[: rng.randrange(len(data) + 1)] + other[rng.randrange(len(other) + 1) :]
        elif kind == 3:
            corrupt_length(rng, data, body_start)
        elif kind == 4:  # random byte values at random places
            for _ in range(rng.randint(1, 8)):
                data[position(rng, data, body_start)] = rng.randrange(256)
        elif kind == 5:  # insert or delete a few bytes
            at = position(rng, data, body_start)
            if rng.random() < 0.5:
                data[at:at] = rng.randbytes(rng.randint(1, 6))
            else:
                del data[at : at + rng.randint(1, 6)]
        elif kind == 6:  # the golden frame's header over a random body
            data = bytearray(original[:body_start] + rng.randbytes(rng.randrange(64)))
        else:  # random bytes; a random api key and version in front half of the time
            data = bytearray(rng.randbytes(rng.randrange(48)))
            if rng.random() < 0.5:
                key = rng.choice(list(API_SCHEMAS))
                data[0:4] = struct.pack(">hh", key, rng.randint(0, API_SCHEMAS[key].highest_version + 1))
    return bytes(data), original


def check_stable(message, version: int) -> None:
    wire = message.encode(version)
    again = type(message).decode(wire, version).encode(version)
    assert again == wire, "a decoded message does not re-encode stably"


def check_request(data: bytes, original: bytes) -> None:
    try:
        header, body = decode_request(data)
    except ALLOWED:
        return
    check_stable(body, header.request_api_version)
    check_stable(header, request_header_version(header.request_api_key, header.request_api_version))


def request_frames() -> list[tuple[bytes, int]]:
    """The golden requests, plus a request of every API and version at its defaults, so mutations also reach
    the APIs no client in the capture sent (inter-broker, KRaft, share groups)."""
    frames = [frame(entry["request"]) for entry in request_entries()]
    for api_key, schema in sorted(API_SCHEMAS.items()):
        cls = request_class(api_key)
        for version in range(schema.lowest_version, schema.highest_version + 1):
            header = RequestHeader(request_api_key=api_key, request_api_version=version, correlation_id=version,
                                   client_id="fuzz")
            frames.append(encode_request(header, cls())[4:])
    return [(data, decode_request_header(data)[1]) for data in frames]


def fuzz(name: str, iterations: int, frames: list[tuple[bytes, int]], check) -> None:
    rng = random.Random(f"{name}-{SEED}")
    decoded = 0
    for iteration in range(iterations):
        data, original = mutate(rng, frames)
        try:
            check(data, original)
        except Exception as error:  # noqa: BLE001 - the point is to name any other exception with its input
            raise AssertionError(
                f"{name}: KFK_FUZZ_SEED={SEED} iteration {iteration}: {type(error).__name__}: {error}\n"
                f"frame ({len(data)} bytes): {data.hex()}"
            ) from error
        decoded += 1
    assert decoded == iterations


@pytest.mark.slow
def test_fuzz_decode_request() -> None:
    fuzz("request", REQUEST_ITERATIONS, request_frames(), check_request)


@pytest.mark.slow
def test_fuzz_decode_response() -> None:
    keyed = {frame(entry["response"]): (entry["api_key"], entry["api_version"]) for entry in response_entries()}
    for api_key, schema in sorted(API_SCHEMAS.items()):  # and a default response of every API and version
        for version in range(schema.lowest_version, schema.highest_version + 1):
            chunks = encode_response(version, api_key, version, response_class(api_key)())
            keyed[b"".join(chunks)[4:]] = (api_key, version)
    frames = [(data, 0) for data in keyed]
    rng = random.Random(f"choice-{SEED}")

    def check_response(data: bytes, original: bytes) -> None:
        # A response does not name its API: decode it as the answer to the request of the frame it came from,
        # and one time in ten as the answer to some other request.
        api_key, version = keyed[original] if rng.random() < 0.9 else rng.choice(list(keyed.values()))
        try:
            _, body = decode_response(data, api_key, version)
        except ALLOWED:
            return
        check_stable(body, version)

    fuzz("response", RESPONSE_ITERATIONS, frames, check_response)


def test_mutations_are_reproducible_and_varied() -> None:
    frames = request_frames()[:40]
    first, again = random.Random(7), random.Random(7)
    assert [mutate(first, frames) for _ in range(50)] == [mutate(again, frames) for _ in range(50)]
    rng = random.Random(7)
    sample = [mutate(rng, frames)[0] for _ in range(500)]
    assert len(set(sample)) > 400
    outcomes = {"decoded": 0, "error": 0}
    for data in sample:
        try:
            decode_request(data)
            outcomes["decoded"] += 1
        except ALLOWED:
            outcomes["error"] += 1
    # The mix must reach past the header: some mutated frames still decode, most do not.
    assert outcomes["decoded"] > 25 and outcomes["error"] > 250
