"""RaftReplica: one replica of the metadata quorum as a pure state machine (KIP-595 Raft, KIP-996 pre-vote).

Time comes in (`now_ms` on every call), messages come in (`handle_request`, `handle_response`), and what to do comes
out: requests to send and responses to return (`take_outbox`), and the time by which `poll` must run again. No
clock, socket or event loop is touched here (DESIGN.md decision 9): the asyncio driver (kfk/backends/embedded/
raft_driver.py) and the simulation tests (tests/backends/raft/) both run this same class.

Safety rests on what is written before anything is said: the epoch and vote go to the QuorumStateStore before a
vote is granted or an epoch acted on, and a leader counts its own log only up to what it has flushed. The rules are
KafkaRaftClient's: a vote goes only to a candidate whose log is at least as up to date (last epoch, then end offset);
the high watermark is what a majority of voters has, once an entry of the leader's epoch is among it; followers
fetch with the epoch of their last batch and truncate where the leader says they diverged; a leader that has not
heard from a majority within 1.5 fetch timeouts resigns (check-quorum); a leader shutting down sends EndQuorumEpoch
naming its most caught-up voters, so they run at once instead of waiting out an election timeout.

Observers (replicas that are not voters: brokers) fetch the log too, are listed by DescribeQuorum, never vote and
never run; one that does not know the leader fetches from any voter (or, in a dynamic quorum, from a bootstrap
server: `controller.quorum.bootstrap.servers`, given the ids -2, -3, ... as Kafka does), which answers with the
leader it knows and where it listens.

Snapshots (KIP-630): every replica may trim its log behind its newest snapshot, so a fetch can ask for what the
leader's log no longer holds. The leader then answers with the SnapshotId of its newest snapshot instead of
records; the fetcher sends FetchSnapshot for it chunk by chunk (the leader reads them from its RaftSnapshots),
writes them into a partial snapshot, and once it is whole and checked, empties its log to start at the snapshot's
end offset (which was committed: a leader only snapshots what is) and fetches the log from there. What the
snapshot holds is not this class's business: its owner loads it (the backend's image and listeners), but for the
voter set it carries, from which the replica's voter set history starts again.

Dynamic voters (KIP-853, kraft.version 1): the voter set is the newest in the log (voter_set.py), and changes with
it, as leader (AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter, one at a time: voter_changes.py says when one is
allowed) or follower (a VotersRecord fetched, or truncated away). Any replica grants a vote to an up-to-date
candidate that is not in its own voter set, since its set may be the stale one; a candidate counts only the votes
of its own voters. A leader removed from the voters leads until the change commits, then resigns.
"""

from __future__ import annotations

import itertools
import random
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Protocol, Sequence

from kfk.backends.embedded.quorum_state import ElectionState
from kfk.backends.embedded.raft import messages
from kfk.backends.embedded.raft.config import RaftConfig
from kfk.backends.embedded.raft.election import (
    EpochState,
    Role,
    election_backoff_ms,
    election_timeout_ms,
    majority,
    successor_backoff_ms,
)
from kfk.backends.embedded.raft.fetch_state import FetchState
from kfk.backends.embedded.raft.leader_state import LeaderState, ReplicaProgress
from kfk.backends.embedded.raft.log import OffsetAndEpoch, RaftLog, RaftSnapshots
from kfk.backends.embedded.raft.voter_changes import PendingVoterChange, check_can_change, check_voter_change
from kfk.backends.embedded.raft.voter_set import ZERO_UUID, Voter, VoterSet, VoterSetHistory
from kfk.backends.embedded.raft.config import VoterEndpoint
from kfk.common.constants import NO_NODE
from kfk.errors import ErrorCode, NotLeaderOrFollowerError
from kfk.protocol.message import Message
from kfk.protocol.messages.add_raft_voter import AddRaftVoterRequest
from kfk.protocol.messages.begin_quorum_epoch import BeginQuorumEpochRequest, BeginQuorumEpochResponse
from kfk.protocol.messages.end_quorum_epoch import EndQuorumEpochRequest, EndQuorumEpochResponse
from kfk.protocol.messages.fetch import FetchRequest, FetchResponse
from kfk.protocol.messages.fetch_snapshot import FetchSnapshotRequest, FetchSnapshotResponse
from kfk.protocol.messages.remove_raft_voter import RemoveRaftVoterRequest
from kfk.protocol.messages.update_raft_voter import UpdateRaftVoterRequest
from kfk.protocol.messages.vote import VoteRequest, VoteResponse


class QuorumStateStore(Protocol):
    def read(self) -> ElectionState | None: ...

    def write(self, state: ElectionState) -> None: ...


@dataclass(frozen=True, slots=True)
class OutboundRequest:
    """A request for the driver to send to `destination`; its response (or None for a failure) comes back
    through `handle_response` with the same `request_id`."""

    request_id: int
    destination: int
    request: Message


@dataclass(frozen=True, slots=True)
class OutboundResponse:
    """The response to the request the driver handed in with `token`."""

    token: Any
    response: Message


@dataclass(frozen=True, slots=True)
class _InFlight:
    request_id: int
    destination: int
    deadline_ms: int
    kind: type
    epoch: int
    role: Role
    #: For fetches: the log end offset the fetch asked from (a response that no longer fits it is dropped).
    fetch_offset: int = -1


@dataclass(frozen=True, slots=True)
class _ParkedFetch:
    token: Any
    replica_id: int
    partition: FetchRequest.FetchPartition
    deadline_ms: int


class RaftError(RuntimeError):
    """A broken Raft invariant (e.g. an order to truncate committed entries): this replica must stop."""


class RaftReplica:
    def __init__(self, node_id: int, voters: Iterable[int] | VoterSetHistory, config: RaftConfig, log: RaftLog,
                 store: QuorumStateStore, rng: random.Random, now_ms: int, cluster_id: str = "", *,
                 snapshots: RaftSnapshots | None = None, dynamic: bool = False, directory_id: uuid.UUID = ZERO_UUID,
                 listeners: tuple[tuple[str, str, int], ...] = (), listener_name: str | None = None,
                 bootstrap_servers: Sequence[VoterEndpoint] = ()) -> None:
        """`voters`: the static voter ids, or the voter set history of the log (a dynamic quorum: `dynamic`, with
        this replica's metadata `directory_id`, its own controller `listeners`, the `listener_name` it reaches the
        voters on, and the `bootstrap_servers` an observer looks for the leader through). `snapshots`: those beside
        the log (None for a replica that never has any)."""
        self.node_id = node_id
        self.voter_history = voters if isinstance(voters, VoterSetHistory) else VoterSetHistory(VoterSet.static(voters))
        self.dynamic = dynamic
        self.directory_id = directory_id
        self.listeners = listeners
        self.listener_name = listener_name
        #: Bootstrap servers by their negative ids (-2, -3, ...): where an observer asks who leads.
        self.bootstrap_servers = {-2 - index: VoterEndpoint(-2 - index, server.host, server.port)
                                  for index, server in enumerate(bootstrap_servers)}
        #: Leaders' endpoints learnt from fetch responses (a leader not yet in this replica's voter set).
        self._learned_endpoints: dict[int, VoterEndpoint] = {}
        self._voter_change: PendingVoterChange | None = None
        #: When this voter may next ask the leader to update its listeners (UpdateRaftVoter).
        self._update_due_ms = 0
        self.config = config
        self.log = log
        self.store = store
        #: The snapshots beside the log; None for a replica that never has any (then it never trims its log).
        self.snapshots = snapshots
        self.rng = rng
        self.cluster_id = cluster_id
        #: The committed offset as this replica knows it: everything below it is on a majority of voters.
        self.high_watermark = 0
        self.leader_state: LeaderState | None = None
        self.fetch_state: FetchState | None = None
        self._outbox: list[OutboundRequest | OutboundResponse] = []
        self._in_flight: dict[int, _InFlight] = {}
        self._next_send_ms: dict[int, int] = {}
        self._request_ids = itertools.count(1)
        self._parked: list[_ParkedFetch] = []
        self._unflushed = False
        self._preferred_successors: list[int] = []
        #: An observer's leader that stopped answering: (epoch, leader id, until when its hints are not followed).
        self._lost_leader: tuple[int, int, int] | None = None
        if self.voters == {node_id}:
            # A sole voter is the whole majority: everything in its (flushed) log is committed.
            self.high_watermark = log.log_end_offset
        stored = store.read()
        self._persisted = (stored.epoch, stored.leader_id, stored.voted_id) if stored is not None else None
        epoch = stored.epoch if stored is not None else 0
        voted_id = stored.voted_id if stored is not None else NO_NODE
        if stored is not None and stored.leader_id not in (NO_NODE, node_id):
            self.state = EpochState(Role.UNATTACHED, epoch, voted_id=voted_id)
            self._become_follower(now_ms, epoch, stored.leader_id)
        else:
            # Never leader again in an epoch led before a restart: what it appended then is unknown (Resigned).
            self.state = EpochState(Role.UNATTACHED, epoch, voted_id=voted_id)
            self._become_unattached(now_ms, epoch, voted_id, self._first_election_delay())

    # -- what the driver reads -------------------------------------------------------------------------------------

    @property
    def voter_set(self) -> VoterSet:
        """The newest voter set in this replica's log (in force from when it was appended)."""
        return self.voter_history.latest

    @property
    def voters(self) -> frozenset[int]:
        return self.voter_history.latest.ids

    @property
    def is_voter(self) -> bool:
        voter = self.voter_history.latest.get(self.node_id)
        return voter is not None and (not self.dynamic or voter.directory_id in (ZERO_UUID, self.directory_id))

    def _may_run(self) -> bool:
        """A voter runs for leader; so does a replica removed by a change not yet known committed (Raft's rule: until
        the change commits, the old voters may still be needed to elect the leader that commits it)."""
        if self.is_voter:
            return True
        history = self.voter_history
        return self.dynamic and history.latest_offset >= self.high_watermark \
            and self.node_id in history.as_of(history.latest_offset).ids

    def _removed_and_committed(self) -> bool:
        """A leader that is not one of the voters leads only until the change that removed it commits."""
        return not self.is_voter and self.high_watermark > self.voter_history.latest_offset

    def endpoint(self, node_id: int) -> VoterEndpoint | None:
        """Where requests to `node_id` go: its voter entry's listener, a leader's learnt endpoint, or a bootstrap
        server."""
        voter = self.voter_set.get(node_id)
        endpoint = voter.endpoint(self.listener_name) if voter is not None else None
        return endpoint or self._learned_endpoints.get(node_id) or self.bootstrap_servers.get(node_id)

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        """The leader of the current epoch when known (a prospective's remembered leader is not one)."""
        return self.state.leader_id if self.state.role in (Role.LEADER, Role.FOLLOWER) else NO_NODE

    @property
    def is_leader(self) -> bool:
        return self.state.role is Role.LEADER

    @property
    def epoch_start_offset(self) -> int | None:
        """Where the current leader's epoch starts in its log, on the leader; None elsewhere."""
        return self.leader_state.epoch_start_offset if self.leader_state is not None else None

    def take_outbox(self) -> list[OutboundRequest | OutboundResponse]:
        outbox, self._outbox = self._outbox, []
        return outbox

    def describe(self, now_ms: int) -> tuple[list[ReplicaProgress], list[ReplicaProgress]] | None:
        """(voters, observers) as this leader sees them; None unless leader (which is caught up with itself now)."""
        if self.leader_state is None:
            return None
        state = self.leader_state
        own = state.voter_progress.get(self.node_id)
        if own is not None:
            own.last_fetch_timestamp = own.last_caught_up_timestamp = now_ms
        return ([state.voter_progress[voter] for voter in sorted(state.voter_progress)],
                [state.observer_progress[replica] for replica in sorted(state.observer_progress)])

    # -- the leader's writes ---------------------------------------------------------------------------------------

    def append(self, now_ms: int, records: Sequence[Any]) -> int:
        """Append one batch as leader; its last offset. Committed once the high watermark passes it."""
        if self.state.role is not Role.LEADER:
            raise NotLeaderOrFollowerError(f"node {self.node_id} is not the leader of epoch {self.state.epoch}")
        last_offset = self.log.append_as_leader(records, self.state.epoch)
        self._unflushed = True
        self._complete_parked_fetches(now_ms)
        return last_offset

    def run_election(self, now_ms: int) -> None:
        """Run for leader now (a leader first resigns its epoch): how a sole voter is elected, when its owner
        asks, since it has nobody to wait for."""
        if not self._may_run():
            return
        if self.state.role is Role.LEADER:
            self._become_resigned(now_ms)
        self._become_prospective(now_ms)

    def resign(self, now_ms: int) -> None:
        """Graceful shutdown of a leader: append nothing more, and ask the most caught-up voters to run now."""
        if self.state.role is Role.LEADER:
            self._become_resigned(now_ms)

    # -- time ------------------------------------------------------------------------------------------------------

    def poll(self, now_ms: int) -> int:
        """Run every timer that is due; the time by which poll must be called again."""
        self._expire_in_flight(now_ms)
        state = self.state
        role = state.role
        if role in (Role.UNATTACHED, Role.PROSPECTIVE, Role.CANDIDATE, Role.RESIGNED) \
                and state.election_deadline_ms is not None and now_ms >= state.election_deadline_ms:
            self._on_election_timeout(now_ms)
        elif role is Role.FOLLOWER and self.fetch_state.timed_out(now_ms):
            if self._may_run():
                self._become_prospective(now_ms)
            else:
                self._lose_leader_as_observer(now_ms)
        elif role is Role.LEADER and (self._removed_and_committed() or not self.leader_state.check_quorum(now_ms)):
            self._become_resigned(now_ms)
        self._flush(now_ms)
        self._send_due_requests(now_ms)
        self._expire_parked_fetches(now_ms)
        return self._next_deadline(now_ms)

    def _lose_leader_as_observer(self, now_ms: int) -> None:
        """An observer's leader stopped answering, or resigned: look for the leader among the voters. Voters that
        have not noticed yet still name the lost leader: following it again would cost another fetch timeout while
        the voters elect its successor (and a broker's controller requests would go to it meanwhile)."""
        state = self.state
        self._lost_leader = (state.epoch, state.leader_id, now_ms + self.config.fetch_timeout_ms)
        self._become_unattached(now_ms, state.epoch, state.voted_id, None)

    def _on_election_timeout(self, now_ms: int) -> None:
        role = self.state.role
        if role is Role.PROSPECTIVE:
            self._lose_pre_vote(now_ms)
        elif role is Role.CANDIDATE:
            self._become_unattached(now_ms, self.state.epoch, self.state.voted_id,
                                    election_backoff_ms(self.config, self.rng))
        elif self._may_run():
            self._become_prospective(now_ms)
        else:  # no longer a voter (removed): an observer now
            self._become_unattached(now_ms, self.state.epoch, self.state.voted_id, None)

    def _first_election_delay(self) -> int | None:
        if not self._may_run():
            return None
        if self.voters == {self.node_id}:
            # A static sole voter runs when its owner says so (run_election): nobody else could ever disrupt it. A
            # dynamic one runs at once, and leads on its own until voters are added.
            return 0 if self.dynamic else None
        return election_timeout_ms(self.config, self.rng)

    def _flush(self, now_ms: int) -> None:
        """Make the leader's appends durable, then let them count towards the high watermark."""
        if self._unflushed:
            self.log.flush()
            self._unflushed = False
        if self.leader_state is not None and self.leader_state.update_local(self.log.log_end_offset, now_ms):
            self._on_high_watermark(now_ms)

    def _on_high_watermark(self, now_ms: int) -> None:
        self.high_watermark = self.leader_state.high_watermark
        self._complete_parked_fetches(now_ms)
        change = self._voter_change
        if change is not None and change.offset < self.high_watermark:
            self._voter_change = None
            if change.token is not None:  # else answered when appended (AddRaftVoter v1's ack_when_committed=false)
                self._outbox.append(OutboundResponse(change.token, messages.voter_change_response(
                    change.request_type, ErrorCode.NONE, None, self.node_id, self.state.epoch)))

    # -- transitions -----------------------------------------------------------------------------------------------

    def _persist(self) -> None:
        state = self.state
        leader_id = state.leader_id if state.role in (Role.LEADER, Role.FOLLOWER, Role.RESIGNED) else NO_NODE
        key = (state.epoch, leader_id, state.voted_id)
        if key != self._persisted:
            self.store.write(ElectionState(state.epoch, leader_id, state.voted_id, tuple(sorted(self.voters))))
            self._persisted = key

    def _enter(self, now_ms: int, state: EpochState) -> None:
        was_leader = self.state.role is Role.LEADER
        if self.fetch_state is not None and self.fetch_state.snapshot_id is not None:
            self.snapshots.abort_fetch()  # a new leader or epoch: its log may not want that snapshot
        change = self._voter_change if was_leader else None
        if change is not None:
            self._voter_change = None
            if change.token is not None:  # else answered already (ack_when_committed=false)
                self._outbox.append(OutboundResponse(change.token, messages.voter_change_response(
                    change.request_type, ErrorCode.NOT_LEADER_OR_FOLLOWER,
                    "The leader lost its leadership before the voter change committed", NO_NODE, state.epoch)))
        self.state = state
        self.leader_state = None if state.role is not Role.LEADER else self.leader_state
        self.fetch_state = None
        self._in_flight.clear()
        self._next_send_ms.clear()
        self._persist()
        if was_leader:
            self._complete_parked_fetches(now_ms)

    def _become_unattached(self, now_ms: int, epoch: int, voted_id: int, delay_ms: int | None) -> None:
        deadline = None if delay_ms is None or not self._may_run() else now_ms + delay_ms
        self._enter(now_ms, EpochState(Role.UNATTACHED, epoch, voted_id=voted_id, election_deadline_ms=deadline))

    def _become_follower(self, now_ms: int, epoch: int, leader_id: int) -> None:
        voted_id = self.state.voted_id if epoch == self.state.epoch else NO_NODE
        self._enter(now_ms, EpochState(Role.FOLLOWER, epoch, leader_id=leader_id, voted_id=voted_id))
        self.fetch_state = FetchState.start(self.config.fetch_timeout_ms, now_ms)

    def _become_prospective(self, now_ms: int) -> None:
        state = self.state
        remembered_leader = state.leader_id if state.role is Role.FOLLOWER else NO_NODE
        self._enter(now_ms, EpochState(Role.PROSPECTIVE, state.epoch, leader_id=remembered_leader,
                                       voted_id=state.voted_id, granted={self.node_id},
                                       election_deadline_ms=now_ms + election_timeout_ms(self.config, self.rng)))
        self._count_votes(now_ms)

    def _lose_pre_vote(self, now_ms: int) -> None:
        state = self.state
        if state.leader_id != NO_NODE:
            self._become_follower(now_ms, state.epoch, state.leader_id)
        else:
            self._become_unattached(now_ms, state.epoch, state.voted_id, election_timeout_ms(self.config, self.rng))

    def _become_candidate(self, now_ms: int) -> None:
        self._enter(now_ms, EpochState(Role.CANDIDATE, self.state.epoch + 1, voted_id=self.node_id,
                                       granted={self.node_id},
                                       election_deadline_ms=now_ms + election_timeout_ms(self.config, self.rng)))
        self._count_votes(now_ms)

    def _become_leader(self, now_ms: int) -> None:
        epoch = self.state.epoch
        epoch_start_offset = self.log.log_end_offset
        self.leader_state = LeaderState.start(self.node_id, epoch, epoch_start_offset, self.voters,
                                              self.high_watermark, self.config.fetch_timeout_ms, now_ms)
        self._enter(now_ms, EpochState(Role.LEADER, epoch, leader_id=self.node_id, voted_id=self.node_id))
        self.log.append_leader_change(epoch, self.node_id, sorted(self.voters))
        self._unflushed = True
        if self.dynamic and self.voter_history.latest_offset < 0:
            # The voter set is only in the bootstrap snapshot: write it into the log, where observers (new
            # controllers among them) fetching from the log's start learn it.
            self.voter_history.add(self.log.append_voters(epoch, self.voter_set), self.voter_set)

    def _become_resigned(self, now_ms: int) -> None:
        successors = self.leader_state.preferred_successors()
        self._enter(now_ms, EpochState(Role.RESIGNED, self.state.epoch, leader_id=self.node_id,
                                       voted_id=self.state.voted_id,
                                       election_deadline_ms=now_ms + election_timeout_ms(self.config, self.rng)))
        self._preferred_successors = successors

    def _on_epoch(self, now_ms: int, epoch: int, leader_id: int) -> bool:
        """React to an epoch and leader another replica told; True if this replica changed state."""
        state = self.state
        if epoch > state.epoch:
            if leader_id not in (NO_NODE, self.node_id):
                self._become_follower(now_ms, epoch, leader_id)
            else:
                self._become_unattached(now_ms, epoch, NO_NODE, election_timeout_ms(self.config, self.rng))
            return True
        if epoch == state.epoch and leader_id not in (NO_NODE, self.node_id) \
                and state.role in (Role.UNATTACHED, Role.PROSPECTIVE, Role.CANDIDATE):
            if state.role is Role.PROSPECTIVE and leader_id == state.leader_id:
                return False  # the leader this prospective stopped hearing from: others still follow it
            lost = self._lost_leader
            if lost is not None and (epoch, leader_id) == lost[:2] and now_ms < lost[2]:
                return False  # the leader this observer stopped hearing from, named by a voter that still follows it
            self._become_follower(now_ms, epoch, leader_id)
            return True
        return False

    # -- sending ---------------------------------------------------------------------------------------------------

    def _can_send(self, now_ms: int, destination: int) -> bool:
        return destination not in self._in_flight and self._next_send_ms.get(destination, 0) <= now_ms

    def _send(self, now_ms: int, destination: int, request: Message, fetch_offset: int = -1) -> None:
        request_id = next(self._request_ids)
        self._in_flight[destination] = _InFlight(request_id, destination, now_ms + self.config.request_timeout_ms,
                                                 type(request), self.state.epoch, self.state.role, fetch_offset)
        self._outbox.append(OutboundRequest(request_id, destination, request))

    def _send_due_requests(self, now_ms: int) -> None:
        state = self.state
        role = state.role
        if role in (Role.PROSPECTIVE, Role.CANDIDATE):
            pre_vote = role is Role.PROSPECTIVE
            for voter in sorted(self.voters - state.granted - state.rejected):
                if self._can_send(now_ms, voter):
                    self._send(now_ms, voter, messages.vote_request(
                        self.cluster_id, self.node_id, state.epoch + 1 if pre_vote else state.epoch, voter,
                        self.log.last_fetched_epoch, self.log.log_end_offset, pre_vote))
        elif role is Role.LEADER:
            for voter in self.leader_state.voters_to_begin(now_ms, self.config.fetch_timeout_ms):
                if self._can_send(now_ms, voter):
                    self._send(now_ms, voter, messages.begin_quorum_epoch_request(
                        self.cluster_id, self.node_id, state.epoch, voter))
        elif role is Role.RESIGNED:
            for voter in self._preferred_successors:
                if voter not in state.granted and self._can_send(now_ms, voter):
                    self._send(now_ms, voter, messages.end_quorum_epoch_request(
                        self.cluster_id, self.node_id, state.epoch, self._preferred_successors))
        elif role is Role.FOLLOWER:
            self._send_fetch(now_ms, state.leader_id)
            self._maybe_update_voter(now_ms)
        elif role is Role.UNATTACHED and not self.is_voter and not self._in_flight and self._leader_finders():
            self._send_fetch(now_ms, self.rng.choice(self._leader_finders()))  # an observer looking for the leader

    def _leader_finders(self) -> list[int]:
        """Whom an observer asks who leads: the voters it knows, and a dynamic quorum's bootstrap servers (all it
        has before it learns the voters from the log)."""
        return sorted(self.voters - {self.node_id}) + sorted(self.bootstrap_servers)

    def _maybe_update_voter(self, now_ms: int) -> None:
        """A dynamic voter whose listeners in the voter set are not the ones it runs with asks the leader to
        update them (UpdateRaftVoter), again every fetch timeout until the new voter set reaches it (the answer
        itself is not awaited: the leader may refuse while another change is uncommitted)."""
        own = self.voter_set.get(self.node_id)
        if not self.dynamic or not self.is_voter or not self.listeners or own is None \
                or own.listeners == self.listeners or now_ms < self._update_due_ms:
            return
        self._update_due_ms = now_ms + self.config.fetch_timeout_ms
        self._outbox.append(OutboundRequest(next(self._request_ids), self.state.leader_id,
                                            messages.update_raft_voter_request(
                                                self.cluster_id, self.state.epoch,
                                                Voter(self.node_id, self.directory_id, self.listeners))))

    def _send_fetch(self, now_ms: int, destination: int) -> None:
        if not self._can_send(now_ms, destination):
            return
        if self.fetch_state is not None and self.fetch_state.snapshot_id is not None:
            position = self.snapshots.fetched_size
            self._send(now_ms, destination, messages.fetch_snapshot_request(
                self.cluster_id, self.node_id, self.state.epoch, self.fetch_state.snapshot_id, position,
                self.config.fetch_snapshot_max_bytes), fetch_offset=position)
            return
        log = self.log
        self._send(now_ms, destination, messages.fetch_request(
            self.cluster_id, self.node_id, self.state.epoch, log.log_end_offset, log.last_fetched_epoch,
            self.config.fetch_max_wait_ms), fetch_offset=log.log_end_offset)

    def _expire_in_flight(self, now_ms: int) -> None:
        for in_flight in [entry for entry in self._in_flight.values() if entry.deadline_ms <= now_ms]:
            self.handle_response(now_ms, in_flight.request_id, None)

    def _next_deadline(self, now_ms: int) -> int:
        deadlines = [now_ms + self.config.fetch_timeout_ms]
        state = self.state
        if state.election_deadline_ms is not None:
            deadlines.append(state.election_deadline_ms)
        if self.fetch_state is not None:
            deadlines.append(self.fetch_state.fetch_deadline_ms)
        if self.leader_state is not None:
            deadlines.append(self.leader_state.check_quorum_deadline_ms)
            reminder = self.leader_state.next_reminder_ms(now_ms, self.config.fetch_timeout_ms)
            if reminder is not None:
                deadlines.append(reminder)
        deadlines += [entry.deadline_ms for entry in self._in_flight.values()]
        deadlines += [parked.deadline_ms for parked in self._parked]
        deadlines += [when for when in self._next_send_ms.values() if when > now_ms]
        if state.role is Role.UNATTACHED and not self.is_voter and not self._in_flight and self._leader_finders():
            deadlines.append(now_ms + self.config.retry_backoff_ms)
        return max(now_ms, min(deadlines))

    # -- requests --------------------------------------------------------------------------------------------------

    def handle_request(self, now_ms: int, token: Any, request: Message) -> None:
        """A request from another replica; its response goes to the outbox now, or later for a fetch the leader
        holds until there is something new for it (up to the fetch's max wait)."""
        if isinstance(request, FetchRequest):
            self._handle_fetch(now_ms, token, request)
            return
        if isinstance(request, FetchSnapshotRequest):
            response = self._handle_fetch_snapshot(now_ms, request)
        elif isinstance(request, VoteRequest):
            response = self._handle_vote(now_ms, request)
        elif isinstance(request, BeginQuorumEpochRequest):
            response = self._handle_begin_quorum_epoch(now_ms, request)
        elif isinstance(request, EndQuorumEpochRequest):
            response = self._handle_end_quorum_epoch(now_ms, request)
        elif isinstance(request, (AddRaftVoterRequest, RemoveRaftVoterRequest, UpdateRaftVoterRequest)):
            response = self._handle_voter_change(now_ms, token, request)
            if response is None:
                return  # answered once the new voter set commits
        else:
            raise ValueError(f"{type(request).__name__} is not a Raft request")
        self._outbox.append(OutboundResponse(token, response))

    def _cluster_mismatch(self, cluster_id: str | None) -> bool:
        return bool(cluster_id) and bool(self.cluster_id) and cluster_id != self.cluster_id

    def _is_up_to_date(self, last_offset_epoch: int, last_offset: int) -> bool:
        """Raft's election restriction: the candidate's log is at least as up to date as this one."""
        return (last_offset_epoch, last_offset) >= (self.log.last_fetched_epoch, self.log.log_end_offset)

    def _handle_vote(self, now_ms: int, request: VoteRequest) -> VoteResponse:
        partition = messages.vote_partition(request)
        if partition is None:
            return VoteResponse(error_code=ErrorCode.INVALID_REQUEST)
        if self._cluster_mismatch(request.cluster_id):
            return VoteResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
        candidate, candidate_epoch = partition.replica_id, partition.replica_epoch
        if not self.dynamic and (not self.is_voter or candidate not in self.voters):
            return messages.vote_response(ErrorCode.INCONSISTENT_VOTER_SET, self.leader_id, self.state.epoch, False)
        up_to_date = self._is_up_to_date(partition.last_offset_epoch, partition.last_offset)
        if partition.pre_vote:
            # Never changes this replica's state: a pre-vote only asks whether a vote would be granted.
            state = self.state
            granted = (candidate_epoch > state.epoch and up_to_date and state.role is not Role.LEADER
                       and not (state.role is Role.FOLLOWER and self.fetch_state.heard_from_leader(now_ms)))
            return messages.vote_response(ErrorCode.NONE, self.leader_id, state.epoch, granted)
        if candidate_epoch > self.state.epoch:
            self._become_unattached(now_ms, candidate_epoch, NO_NODE, election_timeout_ms(self.config, self.rng))
        state = self.state
        granted = False
        if candidate_epoch == state.epoch and state.role in (Role.UNATTACHED, Role.PROSPECTIVE) \
                and state.voted_id in (NO_NODE, candidate) and up_to_date:
            # The vote is durable before it is granted: a restart must not let this replica vote twice.
            self._become_unattached(now_ms, state.epoch, candidate, election_timeout_ms(self.config, self.rng))
            granted = True
        return messages.vote_response(ErrorCode.NONE, self.leader_id, self.state.epoch, granted)

    def _handle_begin_quorum_epoch(self, now_ms: int,
                                   request: BeginQuorumEpochRequest) -> BeginQuorumEpochResponse:
        partition = messages.begin_quorum_epoch_partition(request)
        if partition is None:
            return BeginQuorumEpochResponse(error_code=ErrorCode.INVALID_REQUEST)
        if self._cluster_mismatch(request.cluster_id):
            return BeginQuorumEpochResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
        leader_id, epoch = partition.leader_id, partition.leader_epoch
        state = self.state
        if epoch < state.epoch:
            return messages.begin_quorum_epoch_response(ErrorCode.FENCED_LEADER_EPOCH, self.leader_id, state.epoch)
        if epoch == state.epoch and state.role in (Role.LEADER, Role.RESIGNED) or leader_id == self.node_id:
            return messages.begin_quorum_epoch_response(ErrorCode.INVALID_REQUEST, self.leader_id, state.epoch)
        if not (state.role is Role.FOLLOWER and state.epoch == epoch and state.leader_id == leader_id):
            self._become_follower(now_ms, epoch, leader_id)
        return messages.begin_quorum_epoch_response(ErrorCode.NONE, leader_id, epoch)

    def _handle_end_quorum_epoch(self, now_ms: int, request: EndQuorumEpochRequest) -> EndQuorumEpochResponse:
        partition = messages.end_quorum_epoch_partition(request)
        if partition is None:
            return EndQuorumEpochResponse(error_code=ErrorCode.INVALID_REQUEST)
        if self._cluster_mismatch(request.cluster_id):
            return EndQuorumEpochResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
        leader_id, epoch = partition.leader_id, partition.leader_epoch
        state = self.state
        if epoch < state.epoch:
            return messages.end_quorum_epoch_response(ErrorCode.FENCED_LEADER_EPOCH, self.leader_id, state.epoch)
        if epoch > state.epoch or (state.role is Role.FOLLOWER and state.leader_id == leader_id):
            successors = messages.preferred_successors(partition)
            delay = (successor_backoff_ms(self.config, successors.index(self.node_id))
                     if self.node_id in successors else election_timeout_ms(self.config, self.rng))
            self._become_unattached(now_ms, epoch, state.voted_id if epoch == state.epoch else NO_NODE, delay)
        return messages.end_quorum_epoch_response(ErrorCode.NONE, self.leader_id, self.state.epoch)

    def _handle_voter_change(self, now_ms: int, token: Any,
                             request: AddRaftVoterRequest | RemoveRaftVoterRequest | UpdateRaftVoterRequest) -> Any:
        """AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter on the leader (voter_changes.py): a refusal now, or
        None once the new VotersRecord is appended (answered when it commits; an update, at once)."""
        kind = type(request)

        def answer(error_code: int, message: str | None) -> Any:
            leader_id = self.leader_id
            return messages.voter_change_response(kind, error_code, message, leader_id, self.state.epoch,
                                                  self.endpoint(leader_id) if leader_id >= 0 else None)

        if self._cluster_mismatch(request.cluster_id):
            return answer(ErrorCode.INCONSISTENT_CLUSTER_ID, None)
        leader = self.leader_state
        if self.state.role is not Role.LEADER or leader is None:
            return answer(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"Node {self.node_id} does not lead the quorum")
        refusal = check_can_change(self.dynamic, leader, self.high_watermark, self._voter_change,
                                   self.voter_history.latest_offset)
        name = {AddRaftVoterRequest: "add", RemoveRaftVoterRequest: "remove"}.get(kind, "update")
        listeners = messages.listeners_of(request) if name != "remove" else ()
        if refusal is None:
            refusal = check_voter_change(
                self.voter_set, name, request.voter_id, request.voter_directory_id, listeners,
                self.listener_name,
                caught_up=leader.is_caught_up(request.voter_id, now_ms, self.config.fetch_timeout_ms))
        if refusal is not None:
            return answer(*refusal)
        if name == "add":
            voters = self.voter_set.with_voter(Voter(request.voter_id, request.voter_directory_id, listeners))
        elif name == "remove":
            voters = self.voter_set.without(request.voter_id)
        else:
            feature = request.k_raft_version_feature
            voters = self.voter_set.with_listeners(request.voter_id, listeners, (feature.min_supported_version,
                                                                                 feature.max_supported_version))
        offset = self._append_voters(now_ms, voters)
        if name == "update":
            return answer(ErrorCode.NONE, None)
        if name == "add" and not request.ack_when_committed:
            # KIP-1186: answered once appended; the change still blocks the next one until it commits.
            self._voter_change = PendingVoterChange(offset, None, kind)
            return answer(ErrorCode.NONE, None)
        self._voter_change = PendingVoterChange(offset, token, kind)
        return None

    def _append_voters(self, now_ms: int, voters: VoterSet) -> int:
        """The leader appends a new voter set: in force at once (the high watermark now counts its voters)."""
        offset = self.log.append_voters(self.state.epoch, voters)
        self.voter_history.add(offset, voters)
        self._unflushed = True
        if self.leader_state.update_voters(voters.ids):
            self._on_high_watermark(now_ms)
        self._complete_parked_fetches(now_ms)
        return offset

    def _handle_fetch(self, now_ms: int, token: Any, request: FetchRequest) -> None:
        partition = messages.fetch_partition(request)
        if partition is None:
            response = FetchResponse(error_code=ErrorCode.INVALID_REQUEST)
        elif self._cluster_mismatch(request.cluster_id):
            response = FetchResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
        else:
            replica_id = messages.fetch_replica_id(request)
            response = self._try_fetch(now_ms, replica_id, partition, may_wait=request.max_wait_ms > 0)
            if response is None:
                self._parked.append(_ParkedFetch(token, replica_id, partition, now_ms + request.max_wait_ms))
                return
        self._outbox.append(OutboundResponse(token, response))

    def _try_fetch(self, now_ms: int, replica_id: int, partition: FetchRequest.FetchPartition,
                   may_wait: bool) -> FetchResponse | None:
        """The leader's answer to a fetch; None when it should wait for new data."""
        state = self.state
        if state.role is not Role.LEADER:
            leader_id = self.leader_id
            return messages.fetch_response(ErrorCode.NOT_LEADER_OR_FOLLOWER, leader_id, state.epoch,
                                           leader_endpoint=self.endpoint(leader_id) if leader_id >= 0 else None)
        own = self.endpoint(self.node_id) if self.dynamic else None
        if partition.current_leader_epoch < state.epoch:
            return messages.fetch_response(ErrorCode.FENCED_LEADER_EPOCH, self.node_id, state.epoch,
                                           leader_endpoint=own)
        if partition.current_leader_epoch > state.epoch:
            return messages.fetch_response(ErrorCode.UNKNOWN_LEADER_EPOCH, self.node_id, state.epoch,
                                           leader_endpoint=own)
        log = self.log
        fetch_offset = partition.fetch_offset
        if fetch_offset < 0:
            return messages.fetch_response(ErrorCode.INVALID_REQUEST, self.node_id, state.epoch)
        snapshot_id = self._snapshot_to_send(fetch_offset, partition.last_fetched_epoch)
        if snapshot_id is not None:
            if replica_id >= 0:
                self.leader_state.heard_from(replica_id, now_ms)
            return messages.fetch_response(ErrorCode.NONE, self.node_id, state.epoch, self.high_watermark,
                                           snapshot_id=snapshot_id, log_start_offset=log.log_start_offset,
                                           leader_endpoint=own)
        if fetch_offset > 0:
            end = log.end_offset_for_epoch(partition.last_fetched_epoch)
            if end.epoch != partition.last_fetched_epoch or fetch_offset > end.offset:
                return messages.fetch_response(ErrorCode.NONE, self.node_id, state.epoch, self.high_watermark,
                                               diverging=(end.offset, end.epoch))
        moved = replica_id >= 0 and self.leader_state.update_replica(replica_id, fetch_offset,
                                                                     log.log_end_offset, now_ms)
        if moved:
            self._on_high_watermark(now_ms)
        records = log.read(fetch_offset, messages.FETCH_MAX_BYTES) if fetch_offset < log.log_end_offset else None
        if records is None and may_wait and self.leader_state.knows_high_watermark(replica_id):
            return None  # nothing new: held until there is (a new high watermark is news too)
        self.leader_state.told(replica_id)
        return messages.fetch_response(ErrorCode.NONE, self.node_id, state.epoch, self.high_watermark, records,
                                       leader_endpoint=own)

    def _snapshot_to_send(self, fetch_offset: int, last_fetched_epoch: int) -> OffsetAndEpoch | None:
        """The snapshot a fetcher must load before it can fetch the log (Kafka's rule): its fetch offset is below
        this log's start; or this log starts at a snapshot and the fetcher is at that start from another epoch, or
        its last epoch is older than that snapshot's (so where it diverged is no longer in this log)."""
        if self.snapshots is None:
            return None
        start, latest = self.log.log_start_offset, self.snapshots.latest_snapshot_id
        if start == 0 or latest is None:
            return None
        if fetch_offset < start:
            return latest
        at_start = latest.offset == start
        if at_start and (last_fetched_epoch < latest.epoch
                         or (fetch_offset == start and last_fetched_epoch != latest.epoch)):
            return latest
        return None

    def _handle_fetch_snapshot(self, now_ms: int, request: FetchSnapshotRequest) -> FetchSnapshotResponse:
        """The leader sends one chunk of a snapshot it has (KIP-630's errors for what it cannot send)."""
        partition = messages.fetch_snapshot_partition(request)
        if partition is None:
            return FetchSnapshotResponse(error_code=ErrorCode.INVALID_REQUEST)
        if self._cluster_mismatch(request.cluster_id):
            return FetchSnapshotResponse(error_code=ErrorCode.INCONSISTENT_CLUSTER_ID)
        state = self.state
        if state.role is not Role.LEADER:
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER
        elif partition.current_leader_epoch < state.epoch:
            error = ErrorCode.FENCED_LEADER_EPOCH
        elif partition.current_leader_epoch > state.epoch:
            error = ErrorCode.UNKNOWN_LEADER_EPOCH
        else:
            error = ErrorCode.NONE
        if error != ErrorCode.NONE:
            return messages.fetch_snapshot_response(error, self.leader_id, state.epoch)
        snapshot_id = OffsetAndEpoch(partition.snapshot_id.end_offset, partition.snapshot_id.epoch)
        max_bytes = max(0, min(request.max_bytes, self.config.fetch_snapshot_max_bytes))
        found = (self.snapshots.read_chunk(snapshot_id, max(0, partition.position), max_bytes)
                 if self.snapshots is not None else None)
        if found is None:
            return messages.fetch_snapshot_response(ErrorCode.SNAPSHOT_NOT_FOUND, self.node_id, state.epoch)
        chunk, size = found
        if not 0 <= partition.position < size:
            return messages.fetch_snapshot_response(ErrorCode.POSITION_OUT_OF_RANGE, self.node_id, state.epoch)
        if request.replica_id >= 0:
            self.leader_state.heard_from(request.replica_id, now_ms)
        return messages.fetch_snapshot_response(ErrorCode.NONE, self.node_id, state.epoch, snapshot_id, size,
                                                partition.position, chunk)

    def _complete_parked_fetches(self, now_ms: int) -> None:
        parked, self._parked = self._parked, []
        for fetch in parked:
            response = self._try_fetch(now_ms, fetch.replica_id, fetch.partition, may_wait=False)
            self._outbox.append(OutboundResponse(fetch.token, response))

    def _expire_parked_fetches(self, now_ms: int) -> None:
        if any(fetch.deadline_ms <= now_ms for fetch in self._parked):
            due = [fetch for fetch in self._parked if fetch.deadline_ms <= now_ms]
            self._parked = [fetch for fetch in self._parked if fetch.deadline_ms > now_ms]
            for fetch in due:
                response = self._try_fetch(now_ms, fetch.replica_id, fetch.partition, may_wait=False)
                self._outbox.append(OutboundResponse(fetch.token, response))

    # -- responses -------------------------------------------------------------------------------------------------

    def handle_response(self, now_ms: int, request_id: int, response: Message | None) -> None:
        """The response to an OutboundRequest, or None when it failed or timed out. Late responses (to a request
        this replica has given up on, or sent in an earlier state) are dropped."""
        in_flight = next((entry for entry in self._in_flight.values() if entry.request_id == request_id), None)
        if in_flight is None:
            return
        del self._in_flight[in_flight.destination]
        current = in_flight.epoch == self.state.epoch and in_flight.role is self.state.role
        if response is None or response.error_code != ErrorCode.NONE:
            self._on_failure(now_ms, in_flight)
            return
        handler: Callable[[int, _InFlight, Any, bool], None] = {
            VoteResponse: self._handle_vote_response,
            BeginQuorumEpochResponse: self._handle_begin_quorum_epoch_response,
            EndQuorumEpochResponse: self._handle_end_quorum_epoch_response,
            FetchResponse: self._handle_fetch_response,
            FetchSnapshotResponse: self._handle_fetch_snapshot_response,
        }[type(response)]
        handler(now_ms, in_flight, response, current)

    def _on_failure(self, now_ms: int, in_flight: _InFlight) -> None:
        self._next_send_ms[in_flight.destination] = now_ms + self.config.retry_backoff_ms

    def _handle_vote_response(self, now_ms: int, in_flight: _InFlight, response: VoteResponse,
                              current: bool) -> None:
        partition = messages.vote_response_partition(response)
        if partition is None or partition.error_code != ErrorCode.NONE:
            self._on_failure(now_ms, in_flight)
            return
        if self._on_epoch(now_ms, partition.leader_epoch, partition.leader_id) or not current:
            return
        state = self.state
        (state.granted if partition.vote_granted else state.rejected).add(in_flight.destination)
        self._count_votes(now_ms)

    def _count_votes(self, now_ms: int) -> None:
        state = self.state
        needed = majority(len(self.voters))
        if not self._may_run():  # removed from the voters meanwhile (a VotersRecord it holds): no election
            self._become_unattached(now_ms, state.epoch, state.voted_id, None)
        elif len(state.granted & self.voters) >= needed:
            if state.role is Role.PROSPECTIVE:
                self._become_candidate(now_ms)
            else:
                self._become_leader(now_ms)
        elif len(state.rejected & self.voters) > len(self.voters) - needed:
            if state.role is Role.PROSPECTIVE:
                self._lose_pre_vote(now_ms)
            else:
                self._become_unattached(now_ms, state.epoch, state.voted_id,
                                        election_backoff_ms(self.config, self.rng))

    def _handle_begin_quorum_epoch_response(self, now_ms: int, in_flight: _InFlight,
                                            response: BeginQuorumEpochResponse, current: bool) -> None:
        partition = messages.begin_quorum_epoch_partition(response)
        if partition is None or partition.error_code != ErrorCode.NONE:
            if partition is not None:
                self._on_epoch(now_ms, partition.leader_epoch, partition.leader_id)
            self._on_failure(now_ms, in_flight)
            return
        if current and self.leader_state is not None:
            self.leader_state.unacknowledged.discard(in_flight.destination)

    def _handle_end_quorum_epoch_response(self, now_ms: int, in_flight: _InFlight,
                                          response: EndQuorumEpochResponse, current: bool) -> None:
        partition = messages.end_quorum_epoch_partition(response)
        if partition is None or partition.error_code != ErrorCode.NONE:
            self._on_failure(now_ms, in_flight)
            return
        if current:
            self.state.granted.add(in_flight.destination)

    def _handle_fetch_response(self, now_ms: int, in_flight: _InFlight, response: FetchResponse,
                               current: bool) -> None:
        partition = messages.fetch_response_partition(response)
        if partition is None:
            self._on_failure(now_ms, in_flight)
            return
        leader_id, leader_epoch = messages.leader_hint(partition)
        endpoint = messages.fetch_leader_endpoint(response, leader_id)
        if endpoint is not None and self.voter_set.get(leader_id) is None:
            self._learned_endpoints[leader_id] = endpoint
        if partition.error_code != ErrorCode.NONE:
            state = self.state
            if not self.is_voter and state.role is Role.FOLLOWER and in_flight.destination == state.leader_id \
                    and partition.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER \
                    and (leader_epoch, leader_id) == (state.epoch, NO_NODE):
                # Its leader says it leads no more (it resigned, shutting down): voters learn of it through
                # EndQuorumEpoch, an observer from this answer, not after a fetch timeout.
                self._lose_leader_as_observer(now_ms)
            elif not self._on_epoch(now_ms, leader_epoch, leader_id):
                self._on_failure(now_ms, in_flight)
            return
        # A successful fetch comes from the leader of leader_epoch: an observer (or a lagging follower) that did
        # not know it follows it from now on.
        if leader_epoch > self.state.epoch or (self.state.role is not Role.FOLLOWER and current):
            # (A bootstrap server, asked under its negative id, names itself in the response.)
            source = in_flight.destination if in_flight.destination >= 0 else leader_id
            if not self._on_epoch(now_ms, leader_epoch, source):
                return
        elif not current:
            return
        state = self.state
        if state.role is not Role.FOLLOWER or state.leader_id != in_flight.destination \
                or state.epoch != leader_epoch or self.log.log_end_offset != in_flight.fetch_offset:
            return
        log = self.log
        diverging = partition.diverging_epoch
        snapshot_id = messages.response_snapshot_id(partition)
        if snapshot_id is not None:
            if self.snapshots is None or min(snapshot_id) < 0:
                self._on_failure(now_ms, in_flight)
                return
            # The leader's log no longer reaches back to this fetch offset: fetch its snapshot first.
            self.fetch_state.snapshot_id = OffsetAndEpoch(*snapshot_id)
            self.snapshots.begin_fetch(self.fetch_state.snapshot_id)
        elif diverging.end_offset >= 0 and diverging.epoch >= 0:
            # The leader's log ends `diverging.epoch` at `diverging.end_offset`; this log may end that epoch
            # sooner: it agrees with the leader up to the smaller of the two.
            truncation_offset = min(diverging.end_offset, log.end_offset_for_epoch(diverging.epoch).offset)
            if truncation_offset < self.high_watermark:
                raise RaftError(f"node {self.node_id} was told to truncate to {truncation_offset}, below its "
                                f"high watermark {self.high_watermark}")
            log.truncate_to(truncation_offset)
            log.flush()
            self.voter_history.truncate_to(truncation_offset)
        elif partition.records is not None:
            for offset, voters in log.append_as_follower(partition.records):
                self.voter_history.add(offset, voters)
            log.flush()
            self.high_watermark = max(self.high_watermark, min(partition.high_watermark, log.log_end_offset))
        else:
            self.high_watermark = max(self.high_watermark, min(partition.high_watermark, log.log_end_offset))
        self.fetch_state.succeeded(now_ms)

    def _handle_fetch_snapshot_response(self, now_ms: int, in_flight: _InFlight, response: FetchSnapshotResponse,
                                        current: bool) -> None:
        partition = messages.fetch_snapshot_partition(response)
        if partition is None:
            self._on_failure(now_ms, in_flight)
            return
        leader_id, leader_epoch = messages.leader_hint(partition)
        fetch = self.fetch_state
        if partition.error_code != ErrorCode.NONE:
            if partition.error_code in (ErrorCode.SNAPSHOT_NOT_FOUND, ErrorCode.POSITION_OUT_OF_RANGE) \
                    and current and fetch is not None and fetch.snapshot_id is not None:
                # The leader dropped that snapshot (it wrote a newer one): the next Fetch names the one it has.
                fetch.snapshot_id = None
                self.snapshots.abort_fetch()
            elif self._on_epoch(now_ms, leader_epoch, leader_id):
                return
            self._on_failure(now_ms, in_flight)
            return
        state = self.state
        received_id = OffsetAndEpoch(partition.snapshot_id.end_offset, partition.snapshot_id.epoch)
        if not current or state.role is not Role.FOLLOWER or state.leader_id != in_flight.destination \
                or state.epoch != leader_epoch or fetch.snapshot_id != received_id \
                or partition.position != in_flight.fetch_offset or partition.position != self.snapshots.fetched_size:
            return
        self.snapshots.append_fetched(partition.unaligned_records)
        fetch.succeeded(now_ms)
        if self.snapshots.fetched_size < partition.size:
            return
        fetch.snapshot_id = None
        if not self.snapshots.complete_fetch():
            self._on_failure(now_ms, in_flight)  # it did not read whole: the next Fetch starts over
            return
        # Everything the snapshot covers was committed: the log restarts at its end, the high watermark with it.
        self.log.truncate_fully_and_start_at(received_id.offset, received_id.epoch)
        self.high_watermark = max(self.high_watermark, received_id.offset)
        voters = self.snapshots.fetched_voters
        if voters is not None:
            # A dynamic quorum's snapshot holds the voter set as of its end: the history starts again from it, as
            # the VotersRecords it had (some perhaps never the leader's) went with the log.
            self.voter_history = VoterSetHistory(voters)
