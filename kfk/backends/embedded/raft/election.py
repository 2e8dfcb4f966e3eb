"""The roles a replica of the quorum takes (Kafka's QuorumState and its EpochState classes), as plain data.

- Unattached: an epoch is known but no leader for it. A voter runs for election when its election timer expires;
  an observer looks for the leader by fetching from any voter.
- Prospective (KIP-996 pre-vote): asks the voters whether they *would* vote for it, without raising any epoch, so a
  voter cut off from the quorum cannot disrupt a healthy leader when it comes back.
- Candidate: has raised the epoch and voted for itself (persisted first), and asks for the voters' votes.
- Leader: appends, and commits what a majority of voters has fetched (leader_state.py).
- Follower: fetches from the epoch's leader (fetch_state.py).
- Resigned: a leader that stepped down (graceful shutdown, or check-quorum: no majority heard from within the fetch
  timeout); it appends nothing more in its epoch and waits for the next election.

Election timeouts are randomized (between once and twice `controller.quorum.election.timeout.ms`) so that voters
rarely run at the same moment; after a lost election a replica backs off by a random delay up to
`controller.quorum.election.backoff.max.ms`.
"""

from __future__ import annotations

import enum
import random
from dataclasses import dataclass, field

from kfk.backends.embedded.raft.config import RaftConfig
from kfk.common.constants import NO_NODE


class Role(enum.Enum):
    UNATTACHED = "Unattached"
    PROSPECTIVE = "Prospective"
    CANDIDATE = "Candidate"
    LEADER = "Leader"
    FOLLOWER = "Follower"
    RESIGNED = "Resigned"


@dataclass(slots=True)
class EpochState:
    """This replica's role in `epoch`. `leader_id` is NO_NODE unless a leader is known (Follower, Leader, and a
    Prospective that timed out on a leader it still remembers); `voted_id` is this replica's persisted vote."""

    role: Role
    epoch: int
    leader_id: int = NO_NODE
    voted_id: int = NO_NODE
    #: When an unattached, prospective, candidate or resigned voter (re)runs for election.
    election_deadline_ms: int | None = None
    #: Voters that granted (rejected) this prospective's pre-vote or this candidate's vote.
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)


def election_timeout_ms(config: RaftConfig, rng: random.Random) -> int:
    """A fresh randomized election timeout: [T, 2T) for T the configured timeout."""
    return config.election_timeout_ms + rng.randrange(max(1, config.election_timeout_ms))


def election_backoff_ms(config: RaftConfig, rng: random.Random) -> int:
    """The random wait after a lost election, so that competing candidates spread out."""
    return 1 + rng.randrange(max(1, config.election_backoff_max_ms))


def successor_backoff_ms(config: RaftConfig, position: int) -> int:
    """How long a voter told by EndQuorumEpoch that it is the `position`th preferred successor waits before it
    runs: the first at once, the next ones exponentially later (up to the backoff maximum), so that the most
    caught-up voter usually wins without a contest."""
    if position <= 0:
        return 0
    return min(config.election_backoff_max_ms, config.retry_backoff_ms * (2 ** position))


def majority(voter_count: int) -> int:
    return voter_count // 2 + 1
