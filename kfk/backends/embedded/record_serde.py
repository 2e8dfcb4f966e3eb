"""Metadata records in and out of the __cluster_metadata log, framed as KRaft frames them (MetadataRecordSerde).

Each metadata record is the value of one record of a v2 batch (key null). The value is:

    unsigned varint  frame version (1)
    unsigned varint  record type (the schema's apiKey: 2 TopicRecord, 3 PartitionRecord, 4 ConfigRecord, ...)
    unsigned varint  record version
    body             the record at that version (every metadata schema is flexible: compact fields, tagged fields)

so a log written by kfk reads with Kafka's tools (kafka-dump-log --cluster-metadata-decoder, kafka-metadata-shell)
and the other way round. Records are written at the versions the metadata.version in force gives them
(kfk.controller.features.record_version) and read at whatever version the frame says.
"""

from __future__ import annotations

from kfk.common.features import METADATA_VERSION_FEATURE_NAME
from kfk.controller.features import record_version
from kfk.errors import CorruptRecordError, KafkaError
from kfk.protocol.message import Buffer, Message
from kfk.protocol.metadata_frame import frame_header, read_frame_header
from kfk.protocol.metadata_records import RECORD_TYPES, record_type_class


def serialize_record(record: Message, metadata_version_level: int) -> bytes:
    version = record_version(record, metadata_version_level)
    return frame_header(record.API_KEY, version) + record.encode(version)


def metadata_version_after(record: Message, metadata_version_level: int) -> int:
    """The metadata.version in force after `record`: a batch or snapshot that finalizes metadata.version (the
    bootstrap batch, every snapshot's first record, an upgrade) writes the records after it at the new level."""
    if record.NAME == "FeatureLevelRecord" and record.name == METADATA_VERSION_FEATURE_NAME:
        return record.feature_level
    return metadata_version_level


def deserialize_record(value: Buffer) -> Message:
    """Decode one framed record; CorruptRecordError for anything that is not a whole known record."""
    try:
        record_type, version, position = read_frame_header(value)
        if record_type not in RECORD_TYPES:
            raise CorruptRecordError(f"Unknown metadata record type {record_type}")
        cls = record_type_class(record_type)
        if not cls.LOWEST_VERSION <= version <= cls.HIGHEST_VERSION:
            raise CorruptRecordError(f"Unsupported version {version} of {cls.NAME}")
        record, end = cls.decode_from(value, version, position)
    except CorruptRecordError:
        raise
    except (KafkaError, IndexError) as error:
        raise CorruptRecordError(f"Malformed metadata record: {error}") from error
    if end != len(value):
        raise CorruptRecordError(f"{cls.NAME} v{version} leaves {len(value) - end} unread bytes in its record")
    return record
