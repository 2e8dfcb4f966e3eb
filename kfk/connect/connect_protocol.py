"""Kafka Connect's group protocols: the bytes distributed workers exchange through JoinGroup and SyncGroup (Kafka's
ConnectProtocol and IncrementalCooperativeConnectProtocol), written so that a Java worker reads them and kfk reads a
Java worker's. The assignors are in kfk.connect.assignors.

Three protocols, by name and version: ``default`` (0, eager: every rebalance stops everything and the leader deals
it all out again), ``compatible`` (1, incremental cooperative, KIP-415: workers keep running what they are not told
to give up) and ``sessioned`` (2, the same with a session key for the workers' internal REST requests, KIP-507).
Formats (Kafka's Schema types: int16, int32, int64, int16-length strings, int32-counted arrays and bytes, -1 for
null):

- member metadata: version (int16), url (string: the worker's REST URL), config_offset (int64: how far the worker
  has read the config topic); from version 1, allocation (nullable bytes: the worker's current assignment, encoded
  as below, null before it has one);
- assignment: version (int16), error (int16: 0, or 1 CONFIG_MISMATCH), leader (string: member id), leader_url
  (string), config_offset (int64), assignment (array of {connector (string), tasks (array of int32)}, task id -1
  standing for the connector itself); from version 1, revoked (nullable array, the same shape) and delay (int32: ms
  until the worker should rejoin, when the leader holds back what a departed worker ran). In versions 1 and 2 the
  assignment holds only what the worker starts now: it keeps what it already runs, less what is revoked.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

__all__ = ["CONNECT_PROTOCOL_TYPE", "EAGER_PROTOCOL", "COMPATIBLE_PROTOCOL", "SESSIONED_PROTOCOL", "PROTOCOL_VERSIONS",
           "CONNECTOR_TASK", "NO_ERROR", "CONFIG_MISMATCH", "WorkerState", "Assignment", "encode_metadata",
           "decode_metadata", "encode_assignment", "decode_assignment"]

CONNECT_PROTOCOL_TYPE = "connect"
EAGER_PROTOCOL = "default"
COMPATIBLE_PROTOCOL = "compatible"
SESSIONED_PROTOCOL = "sessioned"
#: Each protocol's version: the first int16 of its metadata and assignments.
PROTOCOL_VERSIONS = {EAGER_PROTOCOL: 0, COMPATIBLE_PROTOCOL: 1, SESSIONED_PROTOCOL: 2}
CONNECTOR_TASK = -1
NO_ERROR = 0
CONFIG_MISMATCH = 1


@dataclass
class Assignment:
    """Kafka's ExtendedAssignment. `connectors` and `tasks` are what to start (eager: everything the worker runs),
    `revoked_connectors` and `revoked_tasks` what to stop, `delay` the ms after which to rejoin."""
    error: int
    leader: str
    leader_url: str
    config_offset: int
    connectors: list[str] = field(default_factory=list)
    tasks: list[tuple[str, int]] = field(default_factory=list)
    revoked_connectors: list[str] = field(default_factory=list)
    revoked_tasks: list[tuple[str, int]] = field(default_factory=list)
    delay: int = 0
    version: int = 0


@dataclass(frozen=True)
class WorkerState:
    url: str
    config_offset: int
    #: What the worker runs now (versions 1 and 2), None before its first assignment.
    allocation: Assignment | None = None
    version: int = 0


def _string(value: str) -> bytes:
    data = value.encode()
    return struct.pack(">h", len(data)) + data


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.position = data, 0

    def unpack(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.position)
        self.position += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        size = self.unpack(">h")
        value = self.data[self.position:self.position + size].decode()
        self.position += size
        return value

    def bytes(self) -> bytes | None:
        size = self.unpack(">i")
        if size < 0:
            return None
        value = self.data[self.position:self.position + size]
        self.position += size
        return value

    def at_end(self) -> bool:
        return self.position >= len(self.data)


def encode_metadata(state: WorkerState) -> bytes:
    encoded = struct.pack(">h", state.version) + _string(state.url) + struct.pack(">q", state.config_offset)
    if state.version == 0:
        return encoded
    if state.allocation is None:
        return encoded + struct.pack(">i", -1)
    allocation = encode_assignment(state.allocation)
    return encoded + struct.pack(">i", len(allocation)) + allocation


def decode_metadata(data: bytes) -> WorkerState:
    """Any version (a later one's extra fields are skipped, as Kafka's schemas skip them)."""
    reader = _Reader(data)
    version = reader.unpack(">h")
    url, config_offset = reader.string(), reader.unpack(">q")
    allocation = None
    if version >= 1 and not reader.at_end():
        encoded = reader.bytes()
        allocation = decode_assignment(encoded) if encoded is not None else None
    return WorkerState(url, config_offset, allocation, version)


def _encode_connector_assignments(connectors: list[str], tasks: list[tuple[str, int]]) -> list[bytes]:
    by_connector: dict[str, list[int]] = {}
    for connector in connectors:
        by_connector.setdefault(connector, []).append(CONNECTOR_TASK)
    for connector, task in tasks:
        by_connector.setdefault(connector, []).append(task)
    parts = [struct.pack(">i", len(by_connector))]
    for connector, task_ids in by_connector.items():
        parts.append(_string(connector) + struct.pack(f">i{len(task_ids)}i", len(task_ids), *task_ids))
    return parts


def _decode_connector_assignments(reader: _Reader) -> tuple[list[str], list[tuple[str, int]]]:
    connectors: list[str] = []
    tasks: list[tuple[str, int]] = []
    for _ in range(max(reader.unpack(">i"), 0)):  # -1: a null array
        connector = reader.string()
        for _ in range(reader.unpack(">i")):
            task = reader.unpack(">i")
            if task == CONNECTOR_TASK:
                connectors.append(connector)
            else:
                tasks.append((connector, task))
    return connectors, tasks


def encode_assignment(assignment: Assignment) -> bytes:
    parts = [struct.pack(">hh", assignment.version, assignment.error), _string(assignment.leader),
             _string(assignment.leader_url), struct.pack(">q", assignment.config_offset),
             *_encode_connector_assignments(assignment.connectors, assignment.tasks)]
    if assignment.version >= 1:
        parts += _encode_connector_assignments(assignment.revoked_connectors, assignment.revoked_tasks)
        parts.append(struct.pack(">i", assignment.delay))
    return b"".join(parts)


def decode_assignment(data: bytes) -> Assignment:
    reader = _Reader(data)
    version = reader.unpack(">h")
    assignment = Assignment(reader.unpack(">h"), reader.string(), reader.string(), reader.unpack(">q"),
                            version=version)
    assignment.connectors, assignment.tasks = _decode_connector_assignments(reader)
    if version >= 1 and not reader.at_end():
        assignment.revoked_connectors, assignment.revoked_tasks = _decode_connector_assignments(reader)
        assignment.delay = reader.unpack(">i")
    return assignment
