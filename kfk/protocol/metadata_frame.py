"""The frame around each KRaft metadata record (Kafka's MetadataRecordSerde): the value of a record of a
__cluster_metadata batch is an unsigned varint frame version (1), an unsigned varint record type (the schema's
apiKey), an unsigned varint record version, then the record's body at that version. One reader for the broker's
metadata log and for dump-log's --cluster-metadata-decoder."""

from __future__ import annotations

from kfk.errors import CorruptRecordError
from kfk.protocol.message import Buffer
from kfk.protocol.primitives import read_unsigned_varint, unsigned_varint

FRAME_VERSION = 1


def frame_header(record_type: int, version: int) -> bytes:
    return unsigned_varint(FRAME_VERSION) + unsigned_varint(record_type) + unsigned_varint(version)


def read_frame_header(value: Buffer) -> tuple[int, int, int]:
    """(record type, record version, position of the body); CorruptRecordError for another frame version."""
    frame_version, position = read_unsigned_varint(value, 0)
    if frame_version != FRAME_VERSION:
        raise CorruptRecordError(f"Unsupported metadata record frame version {frame_version}")
    record_type, position = read_unsigned_varint(value, position)
    version, position = read_unsigned_varint(value, position)
    return record_type, version, position
