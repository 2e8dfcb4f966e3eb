"""What `kfk storage format` writes for KRaft besides meta.properties, as Kafka 4.0's kafka-storage format does:

- `bootstrap.checkpoint` in every log dir: a snapshot (snapshots/writer.py's layout, epoch 0, no KRaft version
  records) holding the bootstrap records: the FeatureLevelRecord of the metadata.version the cluster starts at, then
  a UserScramCredentialRecord per `--add-scram` (KIP-900). The active controller appends them to the metadata log
  when it first leads an empty one (`read_bootstrap_records` reads them back from the metadata log dir);
- for a dynamic quorum (KIP-853: --standalone or --initial-controllers), the first snapshot of the metadata log,
  `__cluster_metadata-0/00000000000000000000-0000000000.checkpoint`: no metadata records, only the header batch
  with KRaftVersion 1 and the initial voter set (each voter's id, directory id and controller endpoints). Every
  voter is formatted with the same set, which is how the quorum knows its members before anything was written.
  Kafka 4.0 keeps the bootstrap records out of this snapshot (only bootstrap.checkpoint has them), and so does kfk.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from typing import Sequence

from kfk.backends.embedded.metadata_log import METADATA_TOPIC_PARTITION
from kfk.backends.embedded.raft.voter_set import Voter, VoterSet
from kfk.backends.embedded.snapshots import SnapshotId, read_snapshot, write_snapshot
from kfk.backends.embedded.snapshots.writer import snapshot_bytes
from kfk.backends.embedded.voters_record import to_voters_record
from kfk.errors import InvalidConfigurationError
from kfk.protocol.message import Message
from kfk.storage.checkpoint import atomic_write
from kfk.storage.log_files import BOOTSTRAP_SNAPSHOT_FILE, log_dir_name
from kfk.common.uuids import uuid_from_base64


@dataclass(frozen=True)
class InitialController:
    """One voter of a new dynamic quorum: `--initial-controllers` entry `id@host:port:directory-id`."""

    node_id: int
    directory_id: uuid.UUID
    endpoints: tuple[tuple[str, str, int], ...]  # (listener name, host, port)


def parse_initial_controllers(text: str, listener_name: str) -> list[InitialController]:
    """`1@host:9093:<dir-uuid>,2@...` -> the voters, each reached on `listener_name` (the first of
    controller.listener.names). InvalidConfigurationError for an entry that does not parse."""
    controllers = []
    for entry in filter(None, (part.strip() for part in text.split(","))):
        try:
            node, _, address = entry.partition("@")
            address, _, directory = address.rpartition(":")
            host, _, port = address.rpartition(":")
            if not host or not directory:
                raise ValueError
            controllers.append(InitialController(int(node), uuid_from_base64(directory),
                                                 ((listener_name, host.strip("[]"), int(port)),)))
        except ValueError:
            raise InvalidConfigurationError(
                f"Invalid --initial-controllers entry {entry!r}: expected id@hostname:port:directory-id") from None
    ids = [controller.node_id for controller in controllers]
    if not ids or len(set(ids)) != len(ids):
        raise InvalidConfigurationError(f"--initial-controllers must name each controller once: {text!r}")
    return controllers


def write_bootstrap_checkpoint(log_dir: str, records: Sequence[Message], now_ms: int) -> None:
    atomic_write(os.path.join(log_dir, BOOTSTRAP_SNAPSHOT_FILE),
                 snapshot_bytes(records, epoch=0, last_contained_log_timestamp=0, now_ms=now_ms))


def read_bootstrap_records(metadata_log_dir: str) -> list[Message] | None:
    """The bootstrap records of the metadata log dir's bootstrap.checkpoint (kfk's or Apache Kafka's format), None
    when there is none (a dir formatted by `kfk server start` itself, or by a kfk before bootstrap files existed).
    CorruptRecordError when the file is not a whole snapshot: a controller must not bootstrap a cluster from half of
    one."""
    path = os.path.join(metadata_log_dir, BOOTSTRAP_SNAPSHOT_FILE)
    if not os.path.exists(path):
        return None
    return read_snapshot(path).records


def write_initial_voters(metadata_log_dir: str, controllers: list[InitialController], now_ms: int) -> str:
    """The metadata log's 0-0 snapshot with the initial voter set; returns its path."""
    directory = os.path.join(metadata_log_dir, log_dir_name(METADATA_TOPIC_PARTITION))
    os.makedirs(directory, exist_ok=True)
    return write_snapshot(directory, SnapshotId(0, 0), [], last_contained_log_timestamp=now_ms, now_ms=now_ms,
                          voters=to_voters_record(VoterSet.of(
                              Voter(controller.node_id, controller.directory_id, controller.endpoints)
                              for controller in controllers)))
