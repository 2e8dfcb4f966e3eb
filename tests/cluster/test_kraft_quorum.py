"""A real multi-voter KRaft quorum: three combined nodes (`process.roles=broker,controller`, every node a voter of
`controller.quorum.voters`) as `kfk server start` subprocesses, talking Raft to each other over their listeners.

They elect one leader (the active controller); a topic created on it is replicated through the metadata log to the
others; kill -9 of the leader elects a new one within the fetch timeout plus an election, and nothing committed is
lost; a leader stopped (SIGSTOP) past the fetch timeout is deposed and catches up once resumed; a minority of the
voters never elects a leader. DescribeQuorum (answered by the leader) and Metadata are read over the wire.
"""

from __future__ import annotations

import signal
import threading
import time

import pytest

from tests.cluster.kraft_quorum import ELECTION_TIMEOUT_MS, FETCH_TIMEOUT_MS, Quorum


@pytest.fixture
def quorum(tmp_path):
    quorum = Quorum(tmp_path)
    yield quorum
    quorum.stop()


def test_three_voters_elect_one_leader_and_replicate_the_metadata_to_voters_and_observers(tmp_path) -> None:
    quorum = Quorum(tmp_path, observers=1)  # node 4: process.roles=broker, not a voter
    try:
        quorum.start()
        all_up = time.monotonic()
        leader_id, epoch = quorum.wait_for_leader()
        print(f"first election: {time.monotonic() - all_up:.2f} s after the last node was up")
        quorum.create_topic(leader_id, "replicated")
        for node_id in quorum.nodes:
            quorum.wait_for_topic(node_id, "replicated")
        described = quorum.describe(leader_id)
        assert (described.leader_id, described.leader_epoch) == (leader_id, epoch)
        assert sorted(voter.replica_id for voter in described.current_voters) == [1, 2, 3]
        assert all(voter.log_end_offset > 0 for voter in described.current_voters)
        assert [observer.replica_id for observer in described.observers] == [4]
        others = [node_id for node_id in quorum.voter_ids if node_id != leader_id]
        assert all(quorum.describe(node_id) is None for node_id in others)  # only the leader describes the quorum
        assert quorum.describe(4).leader_id == leader_id  # a broker forwards DescribeQuorum to the leader
    finally:
        quorum.stop()


def test_a_leader_shut_down_cleanly_hands_over_before_the_fetch_timeout(quorum: Quorum) -> None:
    quorum.start()
    leader_id, epoch = quorum.wait_for_leader()
    quorum.create_topic(leader_id, "before-the-shutdown")
    stopping = time.monotonic()
    quorum.nodes[leader_id].process.send_signal(signal.SIGTERM)  # EndQuorumEpoch names the successors
    survivors = tuple(node_id for node_id in quorum.voter_ids if node_id != leader_id)
    new_leader, _ = quorum.wait_for_leader(among=survivors, newer_than=epoch)
    handed_over_s = time.monotonic() - stopping
    print(f"graceful handover: new leader {handed_over_s:.2f} s after SIGTERM")
    assert handed_over_s < FETCH_TIMEOUT_MS / 1000
    assert quorum.nodes[leader_id].process.wait(20) == 0  # and the shutdown completes
    assert "before-the-shutdown" in quorum.topics(new_leader)


def test_kill_9_of_the_leader_elects_a_new_one_and_loses_nothing_committed(quorum: Quorum) -> None:
    quorum.start()
    leader_id, epoch = quorum.wait_for_leader()
    quorum.create_topic(leader_id, "before-the-crash")
    for node_id in quorum.nodes:
        quorum.wait_for_topic(node_id, "before-the-crash")
    killed = time.monotonic()
    quorum.nodes[leader_id].kill()
    survivors = tuple(node_id for node_id in quorum.nodes if node_id != leader_id)
    new_leader, new_epoch = quorum.wait_for_leader(among=survivors, newer_than=epoch)
    elected_s = time.monotonic() - killed
    created_s = elected_s + quorum.create_topic(new_leader, "after-the-crash")
    print(f"failover: new leader {elected_s:.2f} s after kill -9, first CreateTopics {created_s:.2f} s after")
    # A follower notices its leader is gone after the fetch timeout; an election takes at most one more
    # randomized election timeout (up to twice the configured one), then a few round trips.
    assert elected_s < (FETCH_TIMEOUT_MS + 2 * ELECTION_TIMEOUT_MS) / 1000 + 0.5
    for node_id in survivors:
        quorum.wait_for_topic(node_id, "after-the-crash")
        assert "before-the-crash" in quorum.topics(node_id)
    # The crashed node comes back as a follower and catches up.
    quorum.start(leader_id)
    quorum.wait_for_topic(leader_id, "after-the-crash")
    assert quorum.wait_for_leader(among=survivors) == (new_leader, new_epoch)


def test_a_stopped_leader_is_deposed_and_catches_up_when_resumed(quorum: Quorum) -> None:
    quorum.start()
    leader_id, epoch = quorum.wait_for_leader()
    stopped = quorum.nodes[leader_id].process
    stopped.send_signal(signal.SIGSTOP)
    try:
        survivors = tuple(node_id for node_id in quorum.nodes if node_id != leader_id)
        new_leader, new_epoch = quorum.wait_for_leader(among=survivors, newer_than=epoch)
        quorum.create_topic(new_leader, "while-stopped")
        time.sleep(FETCH_TIMEOUT_MS / 1000)  # well past the fetch timeout
    finally:
        stopped.send_signal(signal.SIGCONT)
    # Resumed, it learns the new epoch (its check-quorum, or the first answer from a voter), follows, catches up.
    quorum.wait_for_topic(leader_id, "while-stopped")
    assert quorum.describe(leader_id) is None
    described = quorum.describe(new_leader)
    assert described.leader_epoch == new_epoch
    deadline = time.monotonic() + 10
    while True:
        described = quorum.describe(new_leader)
        offsets = {voter.replica_id: voter.log_end_offset for voter in described.current_voters}
        if offsets[leader_id] >= described.high_watermark:
            break
        assert time.monotonic() < deadline, offsets
        time.sleep(0.05)


def test_a_minority_of_the_voters_cannot_elect_a_leader(quorum: Quorum) -> None:
    # Node 1 alone is not ready (its broker waits for a controller to unfence it) but serves its controller listener.
    first = threading.Thread(target=quorum.start, args=(1,), kwargs={"timeout": 90.0})
    first.start()
    time.sleep(3 * (FETCH_TIMEOUT_MS + 2 * ELECTION_TIMEOUT_MS) / 1000 / 2)
    assert quorum.describe(1) is None
    assert "no leader" in str(pytest.raises(AssertionError, quorum.wait_for_leader, timeout=1.0).value)
    quorum.start(2)  # a majority now: two of three
    first.join()
    assert quorum.nodes[1].process is not None  # and node 1 became ready with it
    leader_id, _ = quorum.wait_for_leader(among=(1, 2))
    assert leader_id in (1, 2)
