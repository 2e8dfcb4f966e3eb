"""The leader's view of the other replicas: how far each voter and observer has fetched, the high watermark it
derives from the voters, and check-quorum.

The high watermark is the largest offset that a majority of voters (the leader included, counting only what it
has flushed) has in its log, but it only moves once that offset is past the start of the leader's own epoch: an
entry of an earlier epoch counts as committed only when an entry of the current epoch above it is (Raft's rule
that keeps a new leader from declaring committed what a later leader could still overwrite).

Check-quorum: the leader expects to hear a fetch from a majority of voters within 1.5 fetch timeouts (Kafka's
factor); if it does not, it is probably cut off from them and resigns rather than keep answering as leader.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kfk.backends.embedded.raft.election import majority

#: Kafka's leader waits this many fetch timeouts for a majority of voters before it resigns.
CHECK_QUORUM_TIMEOUT_FACTOR = 1.5


@dataclass(slots=True)
class ReplicaProgress:
    """One replica as the leader sees it (DescribeQuorum's ReplicaState)."""

    replica_id: int
    log_end_offset: int = -1
    last_fetch_timestamp: int = -1
    last_caught_up_timestamp: int = -1
    #: The high watermark this replica was last told (in a fetch response): one that does not know the current
    #: one is answered at once rather than held.
    told_high_watermark: int = -1


@dataclass(slots=True)
class LeaderState:
    node_id: int
    epoch: int
    #: The log end offset when this leader was elected: its LEADER_CHANGE batch starts there.
    epoch_start_offset: int
    voters: frozenset[int]
    check_quorum_timeout_ms: int
    check_quorum_deadline_ms: int
    high_watermark: int
    voter_progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    observer_progress: dict[int, ReplicaProgress] = field(default_factory=dict)
    #: Voters that must still hear BeginQuorumEpoch (acknowledged by a response or by a fetch in this epoch).
    unacknowledged: set[int] = field(default_factory=set)
    #: Voters heard from since the check-quorum timer last restarted.
    fetched_since_check: set[int] = field(default_factory=set)
    #: When each voter that does not fetch is told BeginQuorumEpoch again.
    begin_quorum_epoch_due_ms: dict[int, int] = field(default_factory=dict)

    @classmethod
    def start(cls, node_id: int, epoch: int, epoch_start_offset: int, voters: frozenset[int], high_watermark: int,
              fetch_timeout_ms: int, now_ms: int) -> LeaderState:
        timeout = int(fetch_timeout_ms * CHECK_QUORUM_TIMEOUT_FACTOR)
        return cls(node_id, epoch, epoch_start_offset, voters, timeout, now_ms + timeout, high_watermark,
                   voter_progress={voter: ReplicaProgress(voter) for voter in voters},
                   unacknowledged=set(voters) - {node_id})

    def update_voters(self, voters: frozenset[int]) -> bool:
        """The voter set changed (a VotersRecord appended): replicas move between voters and observers with what
        is known of them, a new voter is told BeginQuorumEpoch; True if the high watermark moved. A leader removed
        from the voters keeps leading until the change commits, but its own log no longer counts."""
        everyone = {**self.observer_progress, **self.voter_progress}
        self.voters = voters
        self.voter_progress = {voter: everyone.get(voter) or ReplicaProgress(voter) for voter in sorted(voters)}
        self.observer_progress = {replica: progress for replica, progress in everyone.items()
                                  if replica not in voters and replica != self.node_id}
        self.unacknowledged = {voter for voter in self.unacknowledged if voter in voters} | {
            voter for voter in voters if voter not in everyone and voter != self.node_id}
        self.fetched_since_check &= voters
        return self._maybe_advance_high_watermark()

    def is_caught_up(self, replica_id: int, now_ms: int, fetch_timeout_ms: int) -> bool:
        """Whether `replica_id` fetched at this leader's log end within the last fetch timeout."""
        progress = self.observer_progress.get(replica_id) or self.voter_progress.get(replica_id)
        return progress is not None and progress.last_caught_up_timestamp >= 0 \
            and now_ms - progress.last_caught_up_timestamp < fetch_timeout_ms

    def update_local(self, flushed_end_offset: int, now_ms: int) -> bool:
        """The leader's own durable log end; True if the high watermark moved."""
        progress = self.voter_progress.get(self.node_id) or ReplicaProgress(self.node_id)
        progress.log_end_offset = flushed_end_offset
        progress.last_fetch_timestamp = progress.last_caught_up_timestamp = now_ms
        return self._maybe_advance_high_watermark()

    def update_replica(self, replica_id: int, fetch_offset: int, leader_end_offset: int, now_ms: int) -> bool:
        """A fetch from `replica_id` at `fetch_offset` (validated against this leader's log); True if the high
        watermark moved."""
        self.unacknowledged.discard(replica_id)
        if replica_id in self.voters:
            progress = self.voter_progress[replica_id]
            self.fetched_since_check.add(replica_id)
        else:
            progress = self.observer_progress.setdefault(replica_id, ReplicaProgress(replica_id))
        progress.log_end_offset = fetch_offset
        progress.last_fetch_timestamp = now_ms
        if fetch_offset >= leader_end_offset:
            progress.last_caught_up_timestamp = now_ms
        return replica_id in self.voters and self._maybe_advance_high_watermark()

    def heard_from(self, replica_id: int, now_ms: int) -> None:
        """A FetchSnapshot from `replica_id`: it follows this leader (check-quorum, BeginQuorumEpoch acknowledged),
        though its log end offset stays what it was until it fetches the log again."""
        self.unacknowledged.discard(replica_id)
        if replica_id in self.voters:
            self.fetched_since_check.add(replica_id)
            self.voter_progress[replica_id].last_fetch_timestamp = now_ms
        elif replica_id in self.observer_progress:
            self.observer_progress[replica_id].last_fetch_timestamp = now_ms

    def knows_high_watermark(self, replica_id: int) -> bool:
        progress = self.voter_progress.get(replica_id) or self.observer_progress.get(replica_id)
        return progress is not None and progress.told_high_watermark == self.high_watermark

    def told(self, replica_id: int) -> None:
        progress = self.voter_progress.get(replica_id) or self.observer_progress.get(replica_id)
        if progress is not None:
            progress.told_high_watermark = self.high_watermark

    def _maybe_advance_high_watermark(self) -> bool:
        offsets = sorted((progress.log_end_offset for progress in self.voter_progress.values()), reverse=True)
        if not offsets:
            return False
        committed = offsets[majority(len(self.voters)) - 1]
        if committed > self.epoch_start_offset and committed > self.high_watermark:
            self.high_watermark = committed
            return True
        return False

    def check_quorum(self, now_ms: int) -> bool:
        """False once the leader has gone a whole check-quorum period without a majority of voters fetching."""
        if len(self.fetched_since_check | ({self.node_id} & self.voters)) >= majority(len(self.voters)):
            self.fetched_since_check.clear()
            self.check_quorum_deadline_ms = now_ms + self.check_quorum_timeout_ms
            return True
        return now_ms < self.check_quorum_deadline_ms

    def voters_to_begin(self, now_ms: int, fetch_timeout_ms: int) -> list[int]:
        """The voters to send BeginQuorumEpoch to now: those that never acknowledged it, and (every half fetch
        timeout) those not heard from within a fetch timeout: a voter stuck in a later epoch that this leader
        never learnt about answers with that epoch, and the leader steps down so that a new election can include
        it (otherwise it would wait forever on pre-votes that the leader's followers refuse)."""
        due = []
        for voter, progress in self.voter_progress.items():
            if voter == self.node_id:
                continue
            if voter in self.unacknowledged:
                due.append(voter)  # retried as fast as failures allow, until it fetches or answers
            elif now_ms >= self._next_reminder_ms(voter, progress, fetch_timeout_ms):
                due.append(voter)
                self.begin_quorum_epoch_due_ms[voter] = now_ms + fetch_timeout_ms // 2
        return due

    def next_reminder_ms(self, now_ms: int, fetch_timeout_ms: int) -> int | None:
        """When voters_to_begin next has a voter to remind (None: not before something else happens)."""
        times = [self._next_reminder_ms(voter, progress, fetch_timeout_ms)
                 for voter, progress in self.voter_progress.items()
                 if voter != self.node_id and voter not in self.unacknowledged]
        future = [time for time in times if time > now_ms]
        return min(future) if future else None

    def _next_reminder_ms(self, voter: int, progress: ReplicaProgress, fetch_timeout_ms: int) -> int:
        return max(self.begin_quorum_epoch_due_ms.get(voter, 0), progress.last_fetch_timestamp + fetch_timeout_ms)

    def preferred_successors(self) -> list[int]:
        """The other voters, most caught up first: the order EndQuorumEpoch asks them to run in."""
        others = [progress for voter, progress in self.voter_progress.items() if voter != self.node_id]
        return [progress.replica_id for progress in sorted(others, key=lambda p: (-p.log_end_offset, p.replica_id))]
