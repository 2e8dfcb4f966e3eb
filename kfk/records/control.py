"""Control batches: transaction markers and the KRaft leader-change record, as Kafka writes them.

A control batch has the control attribute bit set and holds control records. Every control record's key is
``int16 version (0), int16 type``; the value's schema depends on the type:

- ABORT / COMMIT (transaction markers, EndTransactionMarker): ``int16 version (0), int32 coordinator_epoch``. The
  batch is transactional and carries the producer id and epoch of the transaction it ends; baseSequence is -1.
- LEADER_CHANGE: a LeaderChangeMessage (message/LeaderChangeMessage.json, flexible from version 0) written at
  version 0, the version also being its first field. Not transactional, no producer id.

Kafka writes each marker as a batch of its own, uncompressed, with CreateTime.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from enum import IntEnum

from kfk.errors import CorruptRecordError
from kfk.records._varint import encode_unsigned_varint, read_unsigned_varint
from kfk.records.builder import MemoryRecordsBuilder
from kfk.records.record import NO_SEQUENCE, Record

__all__ = [
    "ControlRecordType",
    "EndTransactionMarker",
    "LeaderChangeMessage",
    "Voter",
    "control_record_key",
    "control_record_type",
    "build_end_transaction_marker_batch",
    "build_leader_change_batch",
]

CURRENT_CONTROL_RECORD_KEY_VERSION = 0
CURRENT_END_TXN_MARKER_VERSION = 0
LEADER_CHANGE_CURRENT_VERSION = 0

_KEY = struct.Struct(">hh")
_END_TXN_MARKER_VALUE = struct.Struct(">hi")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class ControlRecordType(IntEnum):
    """The type in a control record's key (Kafka's ControlRecordType)."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


def control_record_key(record_type: ControlRecordType) -> bytes:
    if record_type == ControlRecordType.UNKNOWN:
        raise ValueError("Cannot serialize the UNKNOWN control record type")
    return _KEY.pack(CURRENT_CONTROL_RECORD_KEY_VERSION, record_type)


def control_record_type(key: bytes | None) -> ControlRecordType:
    """The type of a control record from its key; UNKNOWN for a type this version does not know (to be ignored)."""
    if key is None or len(key) < _KEY.size:
        raise CorruptRecordError(f"Control record key must have at least {_KEY.size} bytes")
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"Invalid control record key version {version}")
    try:
        return ControlRecordType(type_id)
    except ValueError:
        return ControlRecordType.UNKNOWN


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """A COMMIT or ABORT marker and the epoch of the transaction coordinator that wrote it."""

    control_type: ControlRecordType
    coordinator_epoch: int

    def __post_init__(self) -> None:
        if self.control_type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            raise ValueError(f"Invalid control type for an end transaction marker: {self.control_type!r}")

    def serialize_key(self) -> bytes:
        return control_record_key(self.control_type)

    def serialize_value(self) -> bytes:
        return _END_TXN_MARKER_VALUE.pack(CURRENT_END_TXN_MARKER_VERSION, self.coordinator_epoch)

    @classmethod
    def deserialize(cls, record: Record) -> EndTransactionMarker:
        record_type = control_record_type(record.key)
        if record_type not in (ControlRecordType.COMMIT, ControlRecordType.ABORT):
            raise CorruptRecordError(f"Control record of type {record_type.name} is not a transaction marker")
        value = record.value
        if value is None or len(value) < _END_TXN_MARKER_VALUE.size:
            raise CorruptRecordError("End transaction marker value is shorter than 6 bytes")
        version, coordinator_epoch = _END_TXN_MARKER_VALUE.unpack_from(value)
        if version < 0:
            raise CorruptRecordError(f"Invalid end transaction marker version {version}")
        return cls(record_type, coordinator_epoch)


@dataclass(frozen=True, slots=True)
class Voter:
    voter_id: int
    voter_directory_id: uuid.UUID = uuid.UUID(int=0)
    """Version 1 only (KIP-853); the zero UUID otherwise."""


@dataclass(frozen=True, slots=True)
class LeaderChangeMessage:
    """The value of a LEADER_CHANGE control record (message/LeaderChangeMessage.json)."""

    leader_id: int
    voters: list[Voter] = field(default_factory=list)
    granting_voters: list[Voter] = field(default_factory=list)
    version: int = LEADER_CHANGE_CURRENT_VERSION

    def serialize(self) -> bytes:
        """Flexible encoding at ``version``: compact arrays and an empty tagged-field section per struct."""
        if self.version not in (0, 1):
            raise ValueError(f"LeaderChangeMessage has versions 0-1, not {self.version}")
        parts = [_INT16.pack(self.version), _INT32.pack(self.leader_id)]
        for voters in (self.voters, self.granting_voters):
            parts.append(encode_unsigned_varint(len(voters) + 1))
            for voter in voters:
                parts.append(_INT32.pack(voter.voter_id))
                if self.version >= 1:
                    parts.append(voter.voter_directory_id.bytes)
                parts.append(b"\x00")
        parts.append(b"\x00")
        return b"".join(parts)

    @classmethod
    def deserialize(cls, data: bytes) -> LeaderChangeMessage:
        """Decode a value written at any version this schema has (the version is the first field)."""
        try:
            (version,) = _INT16.unpack_from(data, 0)
            if version not in (0, 1):
                raise CorruptRecordError(f"Unsupported LeaderChangeMessage version {version}")
            (leader_id,) = _INT32.unpack_from(data, 2)
            position = 6
            arrays: list[list[Voter]] = []
            for _ in range(2):
                length_plus_one, position = read_unsigned_varint(data, position)
                if length_plus_one == 0:
                    raise CorruptRecordError("LeaderChangeMessage voters array is null")
                voter_size = 4 + (16 if version >= 1 else 0) + 1
                if (length_plus_one - 1) * voter_size > len(data) - position:
                    raise CorruptRecordError("LeaderChangeMessage voters array exceeds the value")
                voters = []
                for _ in range(length_plus_one - 1):
                    (voter_id,) = _INT32.unpack_from(data, position)
                    position += 4
                    directory_id = uuid.UUID(int=0)
                    if version >= 1:
                        directory_id = uuid.UUID(bytes=bytes(data[position:position + 16]))
                        position += 16
                    position = _skip_tagged_fields(data, position)
                    voters.append(Voter(voter_id, directory_id))
                arrays.append(voters)
            position = _skip_tagged_fields(data, position)
        except struct.error:
            raise CorruptRecordError("LeaderChangeMessage value is truncated") from None
        return cls(leader_id, arrays[0], arrays[1], version)

    @classmethod
    def from_record(cls, record: Record) -> LeaderChangeMessage:
        if control_record_type(record.key) != ControlRecordType.LEADER_CHANGE:
            raise CorruptRecordError("Control record is not a LEADER_CHANGE record")
        if record.value is None:
            raise CorruptRecordError("LEADER_CHANGE record has a null value")
        return cls.deserialize(record.value)


def _skip_tagged_fields(data: bytes, position: int) -> int:
    count, position = read_unsigned_varint(data, position)
    for _ in range(count):
        _, position = read_unsigned_varint(data, position)
        size, position = read_unsigned_varint(data, position)
        if size > len(data) - position:
            raise CorruptRecordError("Tagged field exceeds the value")
        position += size
    return position


def build_end_transaction_marker_batch(*, base_offset: int, timestamp: int, partition_leader_epoch: int,
                                       producer_id: int, producer_epoch: int,
                                       marker: EndTransactionMarker) -> bytes:
    """One transactional control batch holding one COMMIT/ABORT marker (Kafka's withEndTransactionMarker)."""
    builder = MemoryRecordsBuilder(base_offset=base_offset, producer_id=producer_id, producer_epoch=producer_epoch,
                                   base_sequence=NO_SEQUENCE, is_transactional=True, is_control_batch=True,
                                   partition_leader_epoch=partition_leader_epoch)
    builder.append(timestamp, marker.serialize_key(), marker.serialize_value())
    return builder.close()


def build_leader_change_batch(*, base_offset: int, timestamp: int, partition_leader_epoch: int,
                              message: LeaderChangeMessage) -> bytes:
    """One control batch holding one LEADER_CHANGE record (Kafka's withLeaderChangeMessage)."""
    if partition_leader_epoch < 0:
        raise ValueError(f"Partition leader epoch must be valid, not {partition_leader_epoch}")
    builder = MemoryRecordsBuilder(base_offset=base_offset, is_control_batch=True,
                                   partition_leader_epoch=partition_leader_epoch)
    builder.append(timestamp, control_record_key(ControlRecordType.LEADER_CHANGE), message.serialize())
    return builder.close()
