"""Codec framing as Kafka writes it, and the guards against corrupt or inflating payloads."""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import lz4.frame
import pytest
import xxhash
import zstandard

from kfk.errors import CorruptRecordError, UnsupportedCompressionTypeError
from kfk.records import CompressionType, compress, decompress

PAYLOAD = b'{"id": 12345, "name": "kafka", "tags": ["a", "b"]}\n' * 3_000  # ~150 KiB, several snappy blocks
CODECS = [CompressionType.GZIP, CompressionType.SNAPPY, CompressionType.LZ4, CompressionType.ZSTD]


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip(codec: CompressionType) -> None:
    compressed = compress(codec, PAYLOAD)
    assert len(compressed) < len(PAYLOAD)
    assert decompress(codec, compressed) == PAYLOAD
    assert decompress(codec, compress(codec, b"")) == b""


def test_gzip_is_a_plain_gzip_stream() -> None:
    compressed = compress(CompressionType.GZIP, PAYLOAD)
    assert compressed[:3] == b"\x1f\x8b\x08"
    assert gzip.decompress(compressed) == PAYLOAD
    assert decompress(CompressionType.GZIP, gzip.compress(PAYLOAD)) == PAYLOAD


def test_gzip_reads_concatenated_members() -> None:
    assert decompress(CompressionType.GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"


def test_snappy_uses_xerial_framing_with_32_kib_blocks() -> None:
    compressed = compress(CompressionType.SNAPPY, PAYLOAD)
    assert compressed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    position, blocks, inflated = 16, 0, b""
    while position < len(compressed):
        (length,) = struct.unpack_from(">i", compressed, position)
        block = bytes(cramjam.snappy.decompress_raw(compressed[position + 4:position + 4 + length]))
        assert len(block) <= 32 * 1024
        inflated += block
        position += 4 + length
        blocks += 1
    assert inflated == PAYLOAD and blocks == -(-len(PAYLOAD) // (32 * 1024))


def test_snappy_accepts_a_raw_block_as_librdkafka_writes_it() -> None:
    raw = bytes(cramjam.snappy.compress_raw(PAYLOAD))
    assert decompress(CompressionType.SNAPPY, raw) == PAYLOAD


def test_lz4_frame_has_kafkas_descriptor_for_magic_1_and_2() -> None:
    compressed = compress(CompressionType.LZ4, PAYLOAD)
    assert compressed[:4] == b"\x04\x22\x4d\x18"
    assert compressed[4] == 0x60  # version 01, independent blocks, no checksums, no content size
    assert compressed[5] == 0x40  # 64 KiB maximum block size
    assert compressed[6] == (xxhash.xxh32(compressed[4:6]).intdigest() >> 8) & 0xFF
    assert lz4.frame.decompress(compressed) == PAYLOAD
    assert compress(CompressionType.LZ4, PAYLOAD, magic=1)[:7] == compressed[:7]


def test_lz4_magic_0_carries_kafkas_broken_header_checksum() -> None:
    compressed = compress(CompressionType.LZ4, PAYLOAD, magic=0)
    assert compressed[6] == (xxhash.xxh32(compressed[0:6]).intdigest() >> 8) & 0xFF  # frame magic hashed too
    assert compressed[6] != (xxhash.xxh32(compressed[4:6]).intdigest() >> 8) & 0xFF
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(compressed)  # a correct LZ4 reader refuses it...
    assert decompress(CompressionType.LZ4, compressed, magic=0) == PAYLOAD  # ...Kafka's magic-0 reader does not
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.LZ4, compressed, magic=1)  # magic 1 checks the checksum


def test_zstd_reads_frames_without_a_content_size() -> None:
    streamed = zstandard.ZstdCompressor(write_content_size=False).compress(PAYLOAD)
    assert decompress(CompressionType.ZSTD, streamed) == PAYLOAD
    two_frames = zstandard.ZstdCompressor().compress(b"ab") + zstandard.ZstdCompressor().compress(b"cd")
    assert decompress(CompressionType.ZSTD, two_frames) == b"abcd"


def test_zstd_is_refused_below_magic_2() -> None:
    with pytest.raises(UnsupportedCompressionTypeError):
        compress(CompressionType.ZSTD, PAYLOAD, magic=1)


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_payload_is_corrupt(codec: CompressionType) -> None:
    compressed = compress(codec, PAYLOAD)
    for cut in (1, 7, len(compressed) // 2):
        with pytest.raises(CorruptRecordError):
            decompress(codec, compressed[:-cut])


@pytest.mark.parametrize("codec", CODECS)
def test_garbage_payload_is_corrupt(codec: CompressionType) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(codec, b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" * 2 + b"\x7f\xff\xff\xff" + b"nonsense" * 4
                   if codec == CompressionType.SNAPPY else b"\x04\x22\x4d\x18garbage!" + b"\x00" * 20)


@pytest.mark.parametrize("codec", CODECS)
def test_inflating_past_the_cap_is_corrupt(codec: CompressionType) -> None:
    bomb = compress(codec, b"\x00" * (4 * 1024 * 1024))
    assert len(bomb) < 300_000
    with pytest.raises(CorruptRecordError, match="inflates"):
        decompress(codec, bomb, max_size=1024 * 1024)
    assert len(decompress(codec, bomb, max_size=4 * 1024 * 1024)) == 4 * 1024 * 1024


def test_zstd_bomb_without_content_size_stops_early() -> None:
    bomb = zstandard.ZstdCompressor(write_content_size=False).compress(b"\x00" * (64 * 1024 * 1024))
    with pytest.raises(CorruptRecordError, match="inflates"):
        decompress(CompressionType.ZSTD, bomb, max_size=1024 * 1024)


def test_gzip_trailing_bytes_that_are_not_a_member_are_ignored_like_gzipinputstream() -> None:
    assert decompress(CompressionType.GZIP, gzip.compress(b"abc") + b"\x00\x00") == b"abc"
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.GZIP, zlib.compress(b"abc"))  # zlib, not gzip
