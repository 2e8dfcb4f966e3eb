"""The quorum's election state, persisted in `__cluster_metadata-0/quorum-state` (Kafka's FileQuorumStateStore).

Raft's safety rests on two facts surviving a crash: the highest epoch a node has seen and whom it voted for in that
epoch. A node that forgot either could vote twice in one epoch, or lead an epoch that another leader already holds,
so both are written durably (temporary file, fsync, rename, fsync of the folder) *before* the node acts on them.

The file is Kafka's JSON (QuorumStateData, scripts/kafka-protocol/raft/QuorumStateData.json). A static voter set
(`controller.quorum.voters`) writes data version 0, with the voters:

    {"clusterId":"","leaderId":1,"leaderEpoch":3,"votedId":1,"appliedOffset":0,"currentVoters":[{"voterId":1}],
     "data_version":0}

a dynamic quorum (KIP-853, kraft.version 1: the voters are in the log, not here) version 1:

    {"leaderId":1,"leaderEpoch":3,"votedId":1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from kfk.common.constants import NO_NODE
from kfk.errors import KafkaStorageError
from kfk.storage.checkpoint import atomic_write

QUORUM_STATE_FILE = "quorum-state"
DATA_VERSION = 0
ZERO_UUID_BASE64 = "AAAAAAAAAAAAAAAAAAAAAA"


@dataclass(frozen=True)
class ElectionState:
    """Kafka's ElectionState: the epoch, the leader known for it (-1: none yet) and this node's vote in it."""

    epoch: int = 0
    leader_id: int = NO_NODE
    voted_id: int = NO_NODE
    voters: tuple[int, ...] = field(default_factory=tuple)

    @property
    def has_leader(self) -> bool:
        return self.leader_id != NO_NODE


class FileQuorumStateStore:
    def __init__(self, directory: str, data_version: int = DATA_VERSION) -> None:
        """`data_version` 1 for a dynamic quorum (kraft.version 1), 0 for static voters."""
        self.path = os.path.join(directory, QUORUM_STATE_FILE)
        self.data_version = data_version

    def read(self) -> ElectionState | None:
        """The stored state, None if there is no file yet; KafkaStorageError if it cannot be read."""
        try:
            with open(self.path, "rb") as file:
                data = json.loads(file.read())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            raise KafkaStorageError(f"Error while reading the quorum state file {self.path}: {error}") from error
        try:
            version = data["data_version"]
            if version not in (0, 1):
                raise ValueError(f"unknown data_version {version}")
            voters = tuple(int(voter["voterId"]) for voter in data.get("currentVoters") or ())
            return ElectionState(int(data["leaderEpoch"]), int(data["leaderId"]), int(data["votedId"]), voters)
        except (KeyError, TypeError, ValueError) as error:
            raise KafkaStorageError(f"Quorum state file {self.path} is not valid: {error!r}") from error

    def write(self, state: ElectionState) -> None:
        data: dict = {"leaderId": state.leader_id, "leaderEpoch": state.epoch, "votedId": state.voted_id}
        if self.data_version == 0:
            data = {"clusterId": "", **data, "appliedOffset": 0,
                    "currentVoters": [{"voterId": voter} for voter in state.voters]}
        else:
            # kfk's replicas vote by id; the directory id of the vote is not tracked (the zero uuid).
            data["votedDirectoryId"] = ZERO_UUID_BASE64
        data["data_version"] = self.data_version
        atomic_write(self.path, json.dumps(data, separators=(",", ":")).encode("utf-8"))
