"""Kafka Connect's group protocol, eager version (Kafka's ConnectProtocol, protocol name ``default``, version 0):
the bytes distributed workers exchange through JoinGroup and SyncGroup, and the leader's round-robin assignment.

Formats (Kafka's Schema types: int16, int64, int32-counted arrays, int16-length strings), written so that a Java
worker reads them and kfk reads a Java worker's:

- member metadata: version (int16, 0), url (string: the worker's REST URL), config_offset (int64: how far the
  worker has read the config topic);
- assignment: version (int16, 0), error (int16: 0, or 1 CONFIG_MISMATCH), leader (string: member id), leader_url
  (string), config_offset (int64), assignment (array of {connector (string), tasks (array of int32)}), where task
  id -1 stands for the connector itself.

Only the eager protocol is implemented: every rebalance stops all connectors and tasks and the leader hands them out
again from scratch. Kafka's default is ``sessioned`` (incremental cooperative, KIP-415, with a session key for
internal requests); kfk workers offer only ``default``, which Java workers offer too, so a mixed group settles on it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from itertools import cycle

__all__ = ["CONNECT_PROTOCOL_TYPE", "EAGER_PROTOCOL", "CONNECTOR_TASK", "WorkerState", "Assignment",
           "encode_metadata", "decode_metadata", "encode_assignment", "decode_assignment", "eager_assign"]

CONNECT_PROTOCOL_TYPE = "connect"
EAGER_PROTOCOL = "default"
CONNECT_PROTOCOL_V0 = 0
CONNECTOR_TASK = -1
NO_ERROR = 0
CONFIG_MISMATCH = 1


@dataclass(frozen=True)
class WorkerState:
    url: str
    config_offset: int


@dataclass
class Assignment:
    error: int
    leader: str
    leader_url: str
    config_offset: int
    connectors: list[str] = field(default_factory=list)
    tasks: list[tuple[str, int]] = field(default_factory=list)


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


def encode_metadata(state: WorkerState) -> bytes:
    return struct.pack(">h", CONNECT_PROTOCOL_V0) + _string(state.url) + struct.pack(">q", state.config_offset)


def decode_metadata(data: bytes) -> WorkerState:
    """Any version: the later ones (1 compatible, 2 sessioned) start with the same fields."""
    reader = _Reader(data)
    reader.unpack(">h")
    return WorkerState(reader.string(), reader.unpack(">q"))


def encode_assignment(assignment: Assignment) -> bytes:
    by_connector: dict[str, list[int]] = {}
    for connector in assignment.connectors:
        by_connector.setdefault(connector, []).append(CONNECTOR_TASK)
    for connector, task in assignment.tasks:
        by_connector.setdefault(connector, []).append(task)
    parts = [struct.pack(">hh", CONNECT_PROTOCOL_V0, assignment.error), _string(assignment.leader),
             _string(assignment.leader_url), struct.pack(">qi", assignment.config_offset, len(by_connector))]
    for connector, tasks in by_connector.items():
        parts.append(_string(connector) + struct.pack(">i", len(tasks)) + struct.pack(f">{len(tasks)}i", *tasks))
    return b"".join(parts)


def decode_assignment(data: bytes) -> Assignment:
    reader = _Reader(data)
    reader.unpack(">h")
    assignment = Assignment(reader.unpack(">h"), reader.string(), reader.string(), reader.unpack(">q"))
    for _ in range(reader.unpack(">i")):
        connector = reader.string()
        for _ in range(reader.unpack(">i")):
            task = reader.unpack(">i")
            if task == CONNECTOR_TASK:
                assignment.connectors.append(connector)
            else:
                assignment.tasks.append((connector, task))
    return assignment


def eager_assign(members: dict[str, WorkerState], tasks_by_connector: dict[str, int]) -> dict[str, Assignment]:
    """Kafka's eager assignment: members sorted by id, connectors (sorted) dealt round-robin, then every task
    (sorted by connector and id) continuing the same round. The leader, url and offset are filled by the caller."""
    result = {member: Assignment(NO_ERROR, "", "", 0) for member in members}
    if not members:
        return result
    turn = cycle(sorted(members))
    for connector in sorted(tasks_by_connector):
        result[next(turn)].connectors.append(connector)
    for connector in sorted(tasks_by_connector):
        for task in range(tasks_by_connector[connector]):
            result[next(turn)].tasks.append((connector, task))
    return result
