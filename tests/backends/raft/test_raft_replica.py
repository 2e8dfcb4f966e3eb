"""The Raft rules one at a time, on a single RaftReplica driven by hand (the simulation checks them together)."""

from __future__ import annotations

import random

from kfk.backends.embedded.quorum_state import ElectionState
from kfk.backends.embedded.raft import OutboundRequest, OutboundResponse, RaftConfig, RaftReplica, Role, messages
from kfk.errors import ErrorCode
from kfk.protocol.messages.end_quorum_epoch import EndQuorumEpochRequest
from kfk.protocol.messages.vote import VoteRequest
from tests.backends.raft.simulation import InMemoryLog, InMemoryStore

CONFIG = RaftConfig()
VOTERS = (1, 2, 3)


class RecordingStore(InMemoryStore):
    """Remembers every write, so a test can tell whether the vote was durable before the response left."""

    def __init__(self, state: ElectionState | None = None) -> None:
        super().__init__()
        self.state = state
        self.writes: list[ElectionState] = []

    def write(self, state: ElectionState) -> None:
        super().write(state)
        self.writes.append(state)


def replica(node_id: int = 1, entries=(), state: ElectionState | None = None, now_ms: int = 0,
            voters=VOTERS) -> tuple[RaftReplica, InMemoryLog, RecordingStore]:
    log, store = InMemoryLog(), RecordingStore(state)
    log.entries.extend(entries)
    log.flush()
    return RaftReplica(node_id, voters, CONFIG, log, store, random.Random(7), now_ms), log, store


def responses(raft: RaftReplica) -> list:
    return [item.response for item in raft.take_outbox() if isinstance(item, OutboundResponse)]


def requests(raft: RaftReplica) -> list[OutboundRequest]:
    return [item for item in raft.take_outbox() if isinstance(item, OutboundRequest)]


def vote(raft: RaftReplica, candidate: int, epoch: int, last_epoch: int, end_offset: int, pre_vote: bool = False,
         now_ms: int = 0):
    raft.handle_request(now_ms, "token", messages.vote_request("", candidate, epoch, raft.node_id, last_epoch,
                                                               end_offset, pre_vote))
    (response,) = responses(raft)
    return response.topics[0].partitions[0]


def elect(raft: RaftReplica, now_ms: int) -> None:
    """Take `raft` from unattached through pre-vote and vote to leader, the other voters granting."""
    raft.poll(now_ms)
    for _ in range(2):  # the pre-vote, then the vote (the voters answer in their epoch: the candidate's, once raised)
        for outbound in requests(raft):
            raft.handle_response(now_ms, outbound.request_id,
                                 messages.vote_response(ErrorCode.NONE, -1, raft.epoch, True))
        raft.poll(now_ms)
    assert raft.is_leader


def test_a_vote_goes_only_to_an_up_to_date_candidate_and_is_durable_before_it_is_granted() -> None:
    raft, _, store = replica(entries=[(1, "a"), (1, "b"), (2, "c")], state=ElectionState(2, -1, -1, VOTERS))
    assert not vote(raft, 2, 3, last_epoch=1, end_offset=10).vote_granted  # an older last epoch loses
    assert not vote(raft, 2, 3, last_epoch=2, end_offset=2).vote_granted  # same epoch, shorter log
    assert raft.state.voted_id == -1 and raft.epoch == 3  # the higher epoch was adopted, no vote given
    raft.handle_request(0, "token", messages.vote_request("", 2, 3, 1, 2, 3, False))
    assert store.state == ElectionState(3, -1, 2, VOTERS)  # written before the response exists
    (granted,) = responses(raft)
    assert granted.topics[0].partitions[0].vote_granted
    assert not vote(raft, 3, 3, last_epoch=2, end_offset=3).vote_granted  # one vote per epoch
    assert vote(raft, 2, 3, last_epoch=2, end_offset=3).vote_granted  # the same candidate may ask again


def test_a_pre_vote_changes_nothing_and_a_follower_that_hears_its_leader_refuses_it() -> None:
    raft, _, store = replica(state=ElectionState(4, 2, -1, VOTERS))  # restarts as follower of 2 in epoch 4
    assert raft.state.role is Role.FOLLOWER
    writes = len(store.writes)
    raft.poll(0)
    (fetch,) = requests(raft)
    raft.handle_response(10, fetch.request_id, messages.fetch_response(ErrorCode.NONE, 2, 4, 0))
    assert not vote(raft, 3, 5, 0, 0, pre_vote=True, now_ms=20).vote_granted  # its leader is alive
    assert (raft.epoch, raft.state.role, len(store.writes)) == (4, Role.FOLLOWER, writes)
    assert vote(raft, 3, 5, 0, 0, pre_vote=True, now_ms=20 + CONFIG.fetch_timeout_ms).vote_granted
    assert (raft.epoch, raft.state.voted_id, len(store.writes)) == (4, -1, writes)


def test_the_high_watermark_moves_only_once_an_entry_of_the_leaders_epoch_is_on_a_majority() -> None:
    raft, log, _ = replica(entries=[(1, "a"), (1, "b")], state=ElectionState(1, -1, -1, VOTERS))
    elect(raft, 2 * CONFIG.election_timeout_ms)
    assert raft.epoch == 2 and log.entries[2] == (2, ("leader-change", 1))
    raft.poll(2 * CONFIG.election_timeout_ms)  # flushes the leader change: the leader alone holds offset 3
    assert raft.high_watermark == 0

    def fetch(replica_id: int, offset: int, last_epoch: int, now_ms: int) -> None:
        raft.handle_request(now_ms, replica_id, messages.fetch_request("", replica_id, 2, offset, last_epoch, 0))
        raft.take_outbox()

    fetch(2, 2, 1, 2005)  # a majority has the two entries of epoch 1, not yet the leader change
    assert raft.high_watermark == 0
    fetch(2, 3, 2, 2006)
    assert raft.high_watermark == 3
    fetch(100, 3, 2, 2007)  # an observer counts for nothing, but is described
    voters, observers = raft.describe(2008)
    assert [v.replica_id for v in voters] == [1, 2, 3] and [o.replica_id for o in observers] == [100]


def test_a_leader_that_no_majority_fetches_from_resigns_and_names_its_successors() -> None:
    raft, _, _ = replica()
    elected_ms = 2 * CONFIG.election_timeout_ms
    elect(raft, elected_ms)
    requests(raft)
    timeout = int(CONFIG.fetch_timeout_ms * 1.5)
    raft.poll(elected_ms + timeout - 1)
    assert raft.is_leader
    raft.poll(elected_ms + timeout + 1)
    assert raft.state.role is Role.RESIGNED
    sent = [item.request for item in requests(raft) if isinstance(item.request, EndQuorumEpochRequest)]
    assert {messages.end_quorum_epoch_partition(request).leader_epoch for request in sent} == {raft.epoch}


def test_the_first_preferred_successor_runs_at_once() -> None:
    raft, _, _ = replica(node_id=2, state=ElectionState(3, 1, -1, VOTERS))
    raft.poll(0)
    requests(raft)
    raft.handle_request(5, "token", messages.end_quorum_epoch_request("", 1, 3, [2, 3]))
    responses(raft)
    raft.poll(5)
    assert raft.state.role is Role.PROSPECTIVE
    pre_votes = [item.request for item in requests(raft) if isinstance(item.request, VoteRequest)]
    assert sorted(request.voter_id for request in pre_votes) == [1, 3]
    assert all(messages.vote_partition(request).pre_vote for request in pre_votes)


def test_an_observer_that_lost_its_leader_does_not_follow_it_again_on_a_lagging_voters_word() -> None:
    """The active controller dies: the voters elect its successor once their own fetch timeouts pass, and until then
    they still name it. An observer (a broker) that timed out first must keep asking instead of following the dead
    leader for another fetch timeout (its controller requests would go there meanwhile); once the window has passed,
    a leader that is named again is followed (it was only unreachable for a while)."""
    raft, _, _ = replica(node_id=100, state=ElectionState(4, 2, -1, VOTERS))
    assert (raft.state.role, raft.leader_id) == (Role.FOLLOWER, 2)
    now = CONFIG.fetch_timeout_ms
    raft.poll(now)
    assert raft.state.role is Role.UNATTACHED and raft.leader_id == -1

    def answer(now_ms: int, leader_id: int, epoch: int) -> None:
        raft.poll(now_ms)
        outbound = [request for request in requests(raft) if request.request.NAME == "FetchRequest"][-1]
        raft.handle_response(now_ms, outbound.request_id,
                             messages.fetch_response(ErrorCode.NOT_LEADER_OR_FOLLOWER, leader_id, epoch))

    answer(now + 10, 2, 4)  # a voter that has not timed out yet
    assert raft.state.role is Role.UNATTACHED and raft.leader_id == -1
    answer(now + 50, 3, 5)  # a voter that knows the new leader
    assert (raft.state.role, raft.leader_id, raft.epoch) == (Role.FOLLOWER, 3, 5)

    raft, _, _ = replica(node_id=100, state=ElectionState(4, 2, -1, VOTERS))
    raft.poll(now)
    answer(now + CONFIG.fetch_timeout_ms, 2, 4)  # the window has passed: leader 2 of epoch 4 is followed again
    assert (raft.state.role, raft.leader_id) == (Role.FOLLOWER, 2)


def test_an_observer_whose_leader_resigned_looks_for_the_successor_at_once() -> None:
    """A leader shutting down resigns: its EndQuorumEpoch goes to the voters, and it answers an observer's fetch
    with NOT_LEADER_OR_FOLLOWER and no leader; the observer looks for the successor at once instead of waiting out
    its fetch timeout on the leader it followed."""
    raft, _, _ = replica(node_id=100, state=ElectionState(4, 2, -1, VOTERS))
    raft.poll(10)
    (fetch,) = requests(raft)
    raft.handle_response(20, fetch.request_id, messages.fetch_response(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, 4))
    assert raft.state.role is Role.UNATTACHED and raft.leader_id == -1
    raft.poll(40)
    (search,) = requests(raft)
    assert search.destination in VOTERS
    raft.handle_response(50, search.request_id, messages.fetch_response(ErrorCode.NOT_LEADER_OR_FOLLOWER, 3, 5))
    assert (raft.state.role, raft.leader_id, raft.epoch) == (Role.FOLLOWER, 3, 5)
