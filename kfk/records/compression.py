"""The four codecs, framed exactly as Kafka frames them inside a batch or a legacy wrapper message.

The libraries do the compressing; this module only writes and reads Kafka's framing around them:

- gzip: a plain gzip stream (RFC 1952), as java.util.zip.GZIPOutputStream writes it.
- snappy: the Java client writes snappy-java's "xerial" stream: a 16-byte header (magic ``\\x82SNAPPY\\x00``,
  int32 version 1, int32 minimum compatible version 1) then blocks of at most 32 KiB, each an int32 compressed
  length and a raw snappy block. librdkafka writes the same framing; snappy-java reads a payload without the magic
  as one raw snappy block, so that is accepted on read too.
- lz4: the LZ4 frame format with 64 KiB independent blocks and no content size or checksums, as Kafka's
  KafkaLZ4BlockOutputStream writes it. Magic 0 messages carry Kafka's old bug: the frame descriptor checksum (HC)
  was computed over the 4 frame-magic bytes as well as the descriptor. Kafka still writes that broken checksum for
  magic 0 and ignores HC when reading magic 0, and so do we.
- zstd: a zstd frame (magic 2 only).

Every decompressor stops at ``max_size`` bytes of output: a payload that would inflate further, or that is not a
complete stream of its codec, raises CorruptRecordError.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.frame
import zstandard
from xxhash import xxh32_intdigest

from kfk.errors import CorruptRecordError, UnsupportedCompressionTypeError
from kfk.records.record import DEFAULT_MAX_DECOMPRESSED_BYTES, MAGIC_VALUE_V0, MAGIC_VALUE_V2, CompressionType

__all__ = ["compress", "decompress", "DEFAULT_COMPRESSION_LEVELS", "XERIAL_SNAPPY_HEADER"]

DEFAULT_COMPRESSION_LEVELS = {
    CompressionType.GZIP: 6,  # java.util.zip.Deflater.DEFAULT_COMPRESSION
    CompressionType.LZ4: 9,  # compression.lz4.level default (KIP-390)
    CompressionType.ZSTD: 3,  # compression.zstd.level default (KIP-390)
}
"""Kafka's default level per codec (snappy has none). Used when the caller gives no level."""

XERIAL_SNAPPY_MAGIC = b"\x82SNAPPY\x00"
XERIAL_SNAPPY_HEADER = XERIAL_SNAPPY_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java SnappyOutputStream's default block size
_INT32 = struct.Struct(">i")

_LZ4_FRAME_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK_SIZE = lz4.frame.BLOCKSIZE_MAX64KB

_ZSTD_INPUT_STEP = 2048
"""zstd has no output limit per call, so input is fed in steps this small: one step can inflate by at most ~32768x
(run-length blocks), which bounds the overshoot past ``max_size`` to 64 MiB."""


def compress(compression_type: CompressionType, data: bytes | bytearray | memoryview, *, level: int | None = None,
             magic: int = MAGIC_VALUE_V2) -> bytes:
    """Compress ``data`` into the payload of a batch (or of a legacy wrapper message when ``magic`` < 2)."""
    if level is None:
        level = DEFAULT_COMPRESSION_LEVELS.get(compression_type)
    if compression_type == CompressionType.GZIP:
        compressor = zlib.compressobj(level, zlib.DEFLATED, 31)
        return compressor.compress(data) + compressor.flush()
    if compression_type == CompressionType.SNAPPY:
        return _xerial_snappy_compress(data)
    if compression_type == CompressionType.LZ4:
        framed = lz4.frame.compress(data, compression_level=level, block_size=_LZ4_BLOCK_SIZE, block_linked=False,
                                    content_checksum=False, store_size=False)
        if magic == MAGIC_VALUE_V0:
            return _with_broken_lz4_header_checksum(framed)
        return framed
    if compression_type == CompressionType.ZSTD:
        if magic < MAGIC_VALUE_V2:
            raise UnsupportedCompressionTypeError("zstd needs record batch magic 2")
        return zstandard.ZstdCompressor(level=level).compress(data)
    raise UnsupportedCompressionTypeError(f"Cannot compress with compression type {compression_type!r}")


def decompress(compression_type: CompressionType, data: bytes | bytearray | memoryview, *,
               magic: int = MAGIC_VALUE_V2, max_size: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytes:
    """Inflate a batch payload; CorruptRecordError if it is not a whole stream or inflates past ``max_size``."""
    try:
        if compression_type == CompressionType.GZIP:
            return _gzip_decompress(data, max_size)
        if compression_type == CompressionType.SNAPPY:
            return _snappy_decompress(data, max_size)
        if compression_type == CompressionType.LZ4:
            return _lz4_decompress(data, max_size, magic)
        if compression_type == CompressionType.ZSTD:
            return _zstd_decompress(data, max_size)
    except CorruptRecordError:
        raise
    except (zlib.error, cramjam.DecompressionError, zstandard.ZstdError, RuntimeError, ValueError) as error:
        raise CorruptRecordError(f"Failed to decompress {compression_type.name} payload: {error}") from error
    raise CorruptRecordError(f"Unknown compression type id {int(compression_type)}")


def _too_large(max_size: int) -> CorruptRecordError:
    return CorruptRecordError(f"Compressed payload inflates to more than {max_size} bytes")


def _gzip_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    remaining_input = bytes(data)
    while True:
        inflater = zlib.decompressobj(31)
        chunk = inflater.decompress(remaining_input, max_size - total + 1)
        total += len(chunk)
        if total > max_size:
            raise _too_large(max_size)
        if not inflater.eof:
            raise CorruptRecordError("gzip payload is truncated")
        chunks.append(chunk)
        remaining_input = inflater.unused_data
        # GZIPInputStream reads on into a following member and ignores trailing bytes that are not one.
        if not remaining_input.startswith(b"\x1f\x8b"):
            return b"".join(chunks)


def _xerial_snappy_compress(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    parts = [XERIAL_SNAPPY_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start:start + _XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _raw_snappy_decompress(block: bytes | memoryview, budget: int, max_size: int) -> bytes:
    if cramjam.snappy.decompress_raw_len(block) > budget:
        raise _too_large(max_size)
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != XERIAL_SNAPPY_MAGIC:
        return _raw_snappy_decompress(view, max_size, max_size)
    if len(view) < len(XERIAL_SNAPPY_HEADER):
        raise CorruptRecordError("Snappy payload ends inside the xerial header")
    chunks: list[bytes] = []
    total = 0
    position = len(XERIAL_SNAPPY_HEADER)
    end = len(view)
    while position < end:
        if end - position < 4:
            raise CorruptRecordError("Snappy payload ends inside a block length")
        (block_length,) = _INT32.unpack_from(view, position)
        position += 4
        if block_length < 0 or block_length > end - position:
            raise CorruptRecordError(f"Snappy block length {block_length} exceeds the payload")
        chunk = _raw_snappy_decompress(view[position:position + block_length], max_size - total, max_size)
        position += block_length
        total += len(chunk)
        chunks.append(chunk)
    return b"".join(chunks)


def _lz4_decompress(data: bytes | bytearray | memoryview, max_size: int, magic: int) -> bytes:
    payload = bytes(data)
    if magic == MAGIC_VALUE_V0:
        payload = _with_correct_lz4_header_checksum(payload)
    chunks: list[bytes] = []
    total = 0
    while True:
        decompressor = lz4.frame.LZ4FrameDecompressor()
        chunk = decompressor.decompress(payload, max_length=max_size - total + 1)
        total += len(chunk)
        if total > max_size:
            raise _too_large(max_size)
        if not decompressor.eof:
            raise CorruptRecordError("LZ4 payload is truncated")
        chunks.append(chunk)
        payload = decompressor.unused_data
        if not payload:
            return b"".join(chunks)


def _zstd_decompress(data: bytes | bytearray | memoryview, max_size: int) -> bytes:
    view = memoryview(data)
    decompressor = zstandard.ZstdDecompressor()
    chunks: list[bytes] = []
    total = 0
    position = 0
    end = len(view)
    while position < end:
        stream = decompressor.decompressobj()
        while not stream.eof:
            if position >= end:
                raise CorruptRecordError("zstd payload is truncated")
            step = view[position:position + _ZSTD_INPUT_STEP]
            position += len(step)
            chunk = stream.decompress(step)
            total += len(chunk)
            if total > max_size:
                raise _too_large(max_size)
            chunks.append(chunk)
        position -= len(stream.unused_data)
    if not chunks and end:
        raise CorruptRecordError("zstd payload holds no frame")
    return b"".join(chunks)


def _lz4_descriptor_end(frame: bytes) -> int:
    """Offset of the HC byte: after magic, FLG, BD and the optional content size (8) and dictionary id (4)."""
    if len(frame) < 7 or frame[:4] != _LZ4_FRAME_MAGIC:
        raise CorruptRecordError("LZ4 payload does not start with an LZ4 frame header")
    flags = frame[4]
    end = 6 + (8 if flags & 0x08 else 0) + (4 if flags & 0x01 else 0)
    if len(frame) <= end:
        raise CorruptRecordError("LZ4 payload ends inside the frame descriptor")
    return end


def _with_broken_lz4_header_checksum(frame: bytes) -> bytes:
    """The frame with HC as magic-0 Kafka writes it. HC is the second byte of an xxHash32 (seed 0)."""
    end = _lz4_descriptor_end(frame)
    checksum = (xxh32_intdigest(frame[:end]) >> 8) & 0xFF  # Kafka's magic-0 bug: the frame magic is hashed too
    return frame[:end] + bytes((checksum,)) + frame[end + 1:]


def _with_correct_lz4_header_checksum(frame: bytes) -> bytes:
    """The frame with HC over the descriptor alone, as the LZ4 frame format defines it."""
    end = _lz4_descriptor_end(frame)
    checksum = (xxh32_intdigest(frame[4:end]) >> 8) & 0xFF
    return frame[:end] + bytes((checksum,)) + frame[end + 1:]
