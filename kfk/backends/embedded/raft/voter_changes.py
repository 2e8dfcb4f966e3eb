"""The leader's rules for changing the voter set (KIP-853's AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter).

A change is a new VotersRecord appended by the leader; it is in force as soon as it is appended, and answered once
it commits. Raft's single-server changes are safe only one at a time, and only once the leader has committed an
entry of its own epoch (otherwise a change of a previous leader, still uncommitted, could be overtaken by this one:
the majorities of two sets two changes apart need not overlap). So the leader refuses, as Kafka does:

- any change while the quorum runs static voters (kraft.version 0): UNSUPPORTED_VERSION;
- any change before its epoch's first entry is committed, or while a previous change is uncommitted:
  REQUEST_TIMED_OUT (the caller retries);
- adding a voter that is already one: DUPLICATE_VOTER; one that names no endpoint on the controller listener the
  voters use: INVALID_REQUEST; one that is not an observer caught up with the leader's log within the last fetch
  timeout: REQUEST_TIMED_OUT (it would slow every commit while it catches up);
- removing or updating a replica that is not a voter (id and directory id): VOTER_NOT_FOUND; removing the last
  voter: INVALID_REQUEST.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from kfk.backends.embedded.raft.leader_state import LeaderState
from kfk.backends.embedded.raft.voter_set import Voter, VoterSet
from kfk.errors import ErrorCode


@dataclass(frozen=True, slots=True)
class PendingVoterChange:
    """A change appended at `offset`, answered to `token` (the request's) once the high watermark passes it (token
    None: answered when appended)."""

    offset: int
    token: Any
    request_type: type


#: (error code, message) of a refused change; None when it may go ahead.
Refusal = tuple[int, str] | None


def check_can_change(dynamic: bool, leader: LeaderState, high_watermark: int,
                     pending: PendingVoterChange | None, last_voters_offset: int) -> Refusal:
    if not dynamic:
        return (ErrorCode.UNSUPPORTED_VERSION,
                "The quorum's voters are static (controller.quorum.voters, kraft.version 0): they cannot change")
    if high_watermark <= leader.epoch_start_offset:
        return ErrorCode.REQUEST_TIMED_OUT, "The leader has not yet committed an entry of its epoch"
    if pending is not None or last_voters_offset >= high_watermark:
        return ErrorCode.REQUEST_TIMED_OUT, "Another change of the voter set is not yet committed"
    return None


def check_voter_change(voters: VoterSet, kind: str, voter_id: int, directory_id: uuid.UUID,
                       listeners: tuple[tuple[str, str, int], ...], listener_name: str | None,
                       caught_up: bool) -> Refusal:
    """The checks of one request (`kind`: "add", "remove" or "update") against the current voter set, after
    check_can_change."""
    current = voters.get(voter_id)
    if kind == "add":
        if current is not None:
            return ErrorCode.DUPLICATE_VOTER, f"Node {voter_id} is already a voter"
        if Voter(voter_id, directory_id, listeners).endpoint(listener_name) is None:
            return ErrorCode.INVALID_REQUEST, f"Node {voter_id} names no endpoint on listener {listener_name}"
        if not caught_up:
            return (ErrorCode.REQUEST_TIMED_OUT,
                    f"Node {voter_id} has not caught up with the leader's log: start it (as an observer) first")
        return None
    if current is None or current.directory_id != directory_id:
        return ErrorCode.VOTER_NOT_FOUND, f"Node {voter_id} with directory id {directory_id} is not a voter"
    if kind == "remove" and len(voters) == 1:
        return ErrorCode.INVALID_REQUEST, "The last voter of the quorum cannot be removed"
    return None
