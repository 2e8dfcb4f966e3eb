"""Who the voters are (KIP-853): the voter set, and its history along the log.

A static quorum (`controller.quorum.voters`, kraft.version 0) has one voter set for ever. A dynamic quorum
(`controller.quorum.bootstrap.servers`, kraft.version 1) keeps it in the log: the bootstrap snapshot written by
`kfk storage format --standalone | --initial-controllers` holds the first VotersRecord, and every change is a
VotersRecord control batch appended by the leader. A replica uses the newest voter set *in its log*, committed or
not (Raft's single-server membership changes): the leader allows one change at a time, and only once it has
committed an entry of its own epoch, so that the majorities of any two consecutive voter sets overlap. Because an
uncommitted change can be truncated away, the history keeps each set with the offset of the record that made it,
and truncating the log truncates the history with it.

Plain values only: the log decodes VotersRecords into VoterSets (kfk/backends/embedded/voters_record.py).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Iterable, Iterator

from kfk.backends.embedded.raft.config import VoterEndpoint

ZERO_UUID = uuid.UUID(int=0)
#: The kraft.version range a kfk controller supports (KIP-853's 1: a dynamic voter set in the log).
KRAFT_VERSION_RANGE = (0, 1)


@dataclass(frozen=True, slots=True)
class Voter:
    """One voter: its id, the directory id of its metadata log dir (the zero uuid for a static voter), its
    listeners `(name, host, port)` and the kraft.version range it supports."""

    node_id: int
    directory_id: uuid.UUID = ZERO_UUID
    listeners: tuple[tuple[str, str, int], ...] = ()
    kraft_version_range: tuple[int, int] = KRAFT_VERSION_RANGE

    def endpoint(self, listener_name: str | None) -> VoterEndpoint | None:
        """Where to reach it on `listener_name` (None: its first listener)."""
        for name, host, port in self.listeners:
            if listener_name is None or name.upper() == listener_name.upper():
                return VoterEndpoint(self.node_id, host, port)
        return None


@dataclass(frozen=True, slots=True)
class VoterSet:
    voters: tuple[Voter, ...] = ()

    @classmethod
    def of(cls, voters: Iterable[Voter]) -> VoterSet:
        return cls(tuple(sorted(voters, key=lambda voter: voter.node_id)))

    @classmethod
    def static(cls, endpoints: Iterable[VoterEndpoint | int], listener_name: str = "CONTROLLER") -> VoterSet:
        """`controller.quorum.voters`: ids with their host:port (or bare ids, for a sole voter)."""
        return cls.of(Voter(entry) if isinstance(entry, int)
                      else Voter(entry.node_id, listeners=((listener_name, entry.host, entry.port),))
                      for entry in endpoints)

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(voter.node_id for voter in self.voters)

    def get(self, node_id: int) -> Voter | None:
        return next((voter for voter in self.voters if voter.node_id == node_id), None)

    def __iter__(self) -> Iterator[Voter]:
        return iter(self.voters)

    def __len__(self) -> int:
        return len(self.voters)

    def with_voter(self, voter: Voter) -> VoterSet:
        return VoterSet.of([*(other for other in self.voters if other.node_id != voter.node_id), voter])

    def without(self, node_id: int) -> VoterSet:
        return VoterSet.of(voter for voter in self.voters if voter.node_id != node_id)

    def with_listeners(self, node_id: int, listeners: tuple[tuple[str, str, int], ...],
                       kraft_version_range: tuple[int, int]) -> VoterSet:
        return VoterSet.of(replace(voter, listeners=listeners, kraft_version_range=kraft_version_range)
                           if voter.node_id == node_id else voter for voter in self.voters)


class VoterSetHistory:
    """The voter sets of a log, each with the offset of the VotersRecord that set it (-1: from before the log,
    the static configuration or a snapshot)."""

    def __init__(self, initial: VoterSet, entries: Iterable[tuple[int, VoterSet]] = ()) -> None:
        self._entries: list[tuple[int, VoterSet]] = [(-1, initial)]
        for offset, voters in entries:
            self.add(offset, voters)

    @property
    def latest(self) -> VoterSet:
        return self._entries[-1][1]

    @property
    def latest_offset(self) -> int:
        """The offset of the newest VotersRecord in the log; -1 if the voter set comes from before the log."""
        return self._entries[-1][0]

    def add(self, offset: int, voters: VoterSet) -> None:
        if offset <= self._entries[-1][0]:
            raise ValueError(f"voter set at offset {offset} is not after {self._entries[-1][0]}")
        self._entries.append((offset, voters))

    def truncate_to(self, offset: int) -> None:
        """The log lost everything from `offset` on: so did the voter sets set there."""
        while len(self._entries) > 1 and self._entries[-1][0] >= offset:
            self._entries.pop()

    def as_of(self, offset: int) -> VoterSet:
        """The voter set in force once every record below `offset` is applied (what a snapshot there holds)."""
        return next(voters for at, voters in reversed(self._entries) if at < offset)
