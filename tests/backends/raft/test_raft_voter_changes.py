"""Dynamic voters (KIP-853) on the Raft state machine: what the leader refuses and why (Kafka's error codes), what it
does (the new voter set in force once appended, answered once committed), a removed leader handing over, and the
voter set history following the log (simulation.py's quorum, reliable network)."""

from __future__ import annotations

import uuid

from kfk.backends.embedded.quorum_state import ElectionState, FileQuorumStateStore
from kfk.backends.embedded.raft.voter_set import Voter, VoterSet, VoterSetHistory
from kfk.errors import ErrorCode
from kfk.protocol.messages.remove_raft_voter import RemoveRaftVoterRequest
from tests.backends.raft.simulation import Simulation


def leader_of(simulation: Simulation, within_ms: int = 10_000) -> int:
    deadline = simulation.now_ms + within_ms
    while simulation.now_ms < deadline:
        simulation.run_until(simulation.now_ms + 50)
        leaders = [replica for replica in simulation.leaders() if replica.high_watermark > replica.epoch_start_offset]
        if leaders:
            return max(leaders, key=lambda replica: replica.epoch).node_id
    raise AssertionError("no leader committed an entry of its epoch")


def answer(simulation: Simulation, request_id: int, within_ms: int = 5_000) -> int:
    deadline = simulation.now_ms + within_ms
    while request_id not in simulation.voter_change_results and simulation.now_ms < deadline:
        simulation.run_until(simulation.now_ms + 20)
    return simulation.voter_change_results[request_id]


def test_a_static_quorum_refuses_voter_changes() -> None:
    simulation = Simulation(seed=1, voters=3)
    leader = leader_of(simulation)
    assert answer(simulation, simulation.change_voters(leader, remove=3)) == ErrorCode.UNSUPPORTED_VERSION


def test_a_controller_is_added_once_caught_up_and_removed_again() -> None:
    simulation = Simulation(seed=2, voters=1, dynamic=True, spares=1)
    leader = leader_of(simulation)
    assert leader == 1
    simulation.run_until(simulation.now_ms + 1_000)  # the spare finds the leader through its bootstrap server
    assert simulation.replicas[200].leader_id == 1 and not simulation.replicas[200].is_voter
    assert answer(simulation, simulation.change_voters(leader, add=200)) == ErrorCode.NONE
    assert simulation.replicas[1].voters == {1, 200}
    simulation.run_until(simulation.now_ms + 500)
    assert simulation.replicas[200].is_voter and simulation.replicas[200].voters == {1, 200}
    assert answer(simulation, simulation.change_voters(leader, add=200)) == ErrorCode.DUPLICATE_VOTER
    assert answer(simulation, simulation.change_voters(leader, remove=7)) == ErrorCode.VOTER_NOT_FOUND
    wrong_directory = RemoveRaftVoterRequest(voter_id=200, voter_directory_id=uuid.uuid4())
    simulation.replicas[leader].handle_request(simulation.now_ms, ("admin", 0, 99), wrong_directory)
    simulation._send(leader)
    assert simulation.voter_change_results[99] == ErrorCode.VOTER_NOT_FOUND
    assert answer(simulation, simulation.change_voters(leader, remove=200)) == ErrorCode.NONE
    simulation.run_until(simulation.now_ms + 500)
    assert simulation.replicas[200].voters == {1} and not simulation.replicas[200].is_voter


def test_a_controller_that_has_not_caught_up_is_refused_and_one_change_at_a_time() -> None:
    simulation = Simulation(seed=3, voters=3, dynamic=True, spares=2)
    leader = leader_of(simulation)
    simulation.crash(200, lose_unflushed=False)  # never fetches: never caught up
    assert answer(simulation, simulation.change_voters(leader, add=200)) == ErrorCode.REQUEST_TIMED_OUT
    simulation.run_until(simulation.now_ms + 1_000)
    first = simulation.change_voters(leader, add=201)
    second = simulation.change_voters(leader, remove=2)  # while the first is not committed
    assert answer(simulation, second) == ErrorCode.REQUEST_TIMED_OUT
    assert answer(simulation, first) == ErrorCode.NONE
    assert simulation.replicas[leader].voters == {1, 2, 3, 201}


def test_a_leader_that_removes_itself_hands_over_once_the_change_commits() -> None:
    simulation = Simulation(seed=4, voters=3, dynamic=True)
    leader = leader_of(simulation)
    assert answer(simulation, simulation.change_voters(leader, remove=leader)) == ErrorCode.NONE
    others = {1, 2, 3} - {leader}
    new_leader = leader_of(simulation)
    assert new_leader in others
    assert simulation.replicas[new_leader].voters == others
    assert not simulation.replicas[leader].is_voter and not simulation.replicas[leader].is_leader
    assert simulation.append(new_leader) is not None


def test_the_voter_set_history_follows_truncation() -> None:
    first, second = VoterSet.of([Voter(1)]), VoterSet.of([Voter(1), Voter(2)])
    history = VoterSetHistory(first, [(5, second)])
    assert history.latest == second and history.latest_offset == 5
    assert history.as_of(5) == first and history.as_of(6) == second
    history.truncate_to(5)
    assert history.latest == first and history.latest_offset == -1


def test_a_dynamic_quorum_writes_quorum_state_version_1(tmp_path) -> None:
    store = FileQuorumStateStore(str(tmp_path), data_version=1)
    store.write(ElectionState(epoch=4, leader_id=2, voted_id=2, voters=(1, 2, 3)))
    text = (tmp_path / "quorum-state").read_text()
    assert text == ('{"leaderId":2,"leaderEpoch":4,"votedId":2,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA",'
                    '"data_version":1}')
    assert store.read() == ElectionState(4, 2, 2, ())


def test_a_voter_started_on_new_listeners_has_the_leader_update_them() -> None:
    simulation = Simulation(seed=5, voters=3, dynamic=True)
    leader = leader_of(simulation)
    follower = min({1, 2, 3} - {leader})
    moved = (("CONTROLLER", f"node-{follower}", 19093),)
    simulation.replicas[follower].listeners = moved  # as if restarted with another controller port
    simulation.run_until(simulation.now_ms + 3_000)
    assert all(simulation.replicas[node].voter_set.get(follower).listeners == moved for node in (1, 2, 3))
    assert simulation.replicas[leader].voters == {1, 2, 3}


def test_a_controller_started_after_the_log_was_trimmed_learns_the_voters_from_the_snapshot() -> None:
    """The VotersRecord that added 201 is gone from every log when 200 first starts: 200 learns the voters from the
    leader's snapshot (FetchSnapshot), is added, and with 201 elects a leader once the first voter is gone."""
    simulation = Simulation(seed=6, voters=1, dynamic=True, spares=2)
    simulation.crash(200, lose_unflushed=False)
    leader = leader_of(simulation)
    simulation.run_until(simulation.now_ms + 1_000)
    assert answer(simulation, simulation.change_voters(leader, add=201)) == ErrorCode.NONE
    for _ in range(20):
        simulation.append(leader)
        simulation.run_until(simulation.now_ms + 20)
    simulation.run_until(simulation.now_ms + 1_000)
    snapshot_ids = {node: simulation.snapshot(node) for node in (leader, 201)}
    assert all(not simulation.logs[node].voter_sets() for node in (leader, 201)), snapshot_ids

    simulation.start(200)
    simulation.run_until(simulation.now_ms + 2_000)
    assert simulation.snapshots[200].fetched == [snapshot_ids[leader]]
    assert simulation.logs[200].start == snapshot_ids[leader].offset
    assert simulation.replicas[200].voters == {1, 201} and not simulation.replicas[200].is_voter
    assert answer(simulation, simulation.change_voters(leader, add=200)) == ErrorCode.NONE
    simulation.run_until(simulation.now_ms + 500)
    assert simulation.replicas[200].is_voter and simulation.replicas[200].voters == {1, 200, 201}

    simulation.crash(leader, lose_unflushed=False)
    new_leader = leader_of(simulation)
    assert new_leader in (200, 201)
    assert simulation.append(new_leader) is not None
