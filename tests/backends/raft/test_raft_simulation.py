"""Seeded random schedules over the Raft state machine (simulation.py): message loss, delay and reordering,
partitions, crashes with and without the loss of unflushed data, snapshots that trim a replica's log (so that one
that was away catches up through FetchSnapshot, in chunks of a few entries), and in a dynamic quorum (KIP-853)
voters added and removed at random, both in the same schedules. The invariants are checked after every event; at
the end of each schedule the faults heal (a minority may stay down; in a dynamic quorum everyone comes back) and a
leader must be elected and commit.

KFK_RAFT_SCHEDULES raises the number of schedules for a soak run (the default keeps CI's run short); a failure
names its seed, which replays it exactly: `KFK_RAFT_SEED=<seed> [KFK_RAFT_DYNAMIC=1] pytest tests/backends/raft -k one_seed`.
"""

from __future__ import annotations

import os
import random

import pytest

from kfk.backends.embedded.raft import RaftConfig
from kfk.errors import ErrorCode
from tests.backends.raft.simulation import Simulation

SCHEDULES = int(os.environ.get("KFK_RAFT_SCHEDULES", "2000"))
CHUNKS = 10


def run_schedule(seed: int, dynamic: bool = False) -> Simulation:
    rng = random.Random(seed)
    simulation = Simulation(seed, voters=rng.choice((1, 3, 3, 5)), observers=rng.choice((0, 0, 1)),
                            loss=rng.choice((0.0, 0.01, 0.1, 0.3)), max_delay_ms=rng.choice((2, 20, 200)),
                            config=RaftConfig(fetch_snapshot_max_bytes=rng.choice((1, 3, 1000))),
                            dynamic=dynamic, spares=rng.choice((1, 2)))
    voters = simulation.voter_ids
    crashed: set[int] = set()
    chaos_end_ms = rng.randrange(3_000, 15_000)
    while simulation.now_ms < chaos_end_ms:
        simulation.run_until(simulation.now_ms + rng.randrange(1, 300))
        action = rng.random()
        if dynamic and action < 0.15:
            change_voters_at_random(simulation, rng)
        elif action < 0.6:
            for leader in simulation.leaders():
                simulation.append(leader.node_id)
        elif action < 0.7 and len(crashed) < len(simulation.node_ids):
            node = rng.choice([node for node in simulation.node_ids if node not in crashed])
            simulation.crash(node, lose_unflushed=rng.random() < 0.5)
            crashed.add(node)
        elif action < 0.8 and crashed:
            node = rng.choice(sorted(crashed))
            crashed.discard(node)
            simulation.start(node)
        elif action < 0.87:
            a, b = rng.sample(simulation.node_ids, 2) if len(simulation.node_ids) > 1 else (0, 0)
            simulation.cut.add(frozenset((a, b)))
        elif action < 0.95:
            simulation.snapshot(rng.choice(simulation.node_ids))
        else:
            simulation.cut.clear()
    # Heal: the network is reliable again and all but a minority of the voters come back.
    simulation.cut.clear()
    simulation.loss = 0.0
    stay_down = set() if dynamic else set(rng.sample(voters, rng.randrange(0, (len(voters) - 1) // 2 + 1)))
    for node in sorted(crashed - stay_down):
        simulation.start(node)
    for node in sorted(stay_down - crashed):
        simulation.crash(node, lose_unflushed=False)
    live = [node for node in voters if node not in stay_down]
    # Within a few election rounds (randomized timeouts make a split vote ever less likely) a leader is elected, and
    # a value it appends is committed and known committed by every live voter.
    deadline = simulation.now_ms + 30_000
    offset = leader_epoch = None
    while simulation.now_ms < deadline:
        leader = max(simulation.leaders(), key=lambda replica: replica.epoch, default=None)
        if leader is not None and (offset is None or leader.epoch != leader_epoch):
            # (Again after a change of leader: the last value may have been lost uncommitted.)
            leader_epoch = leader.epoch
            offset = simulation.append(leader.node_id)
        simulation.run_until(simulation.now_ms + 50)
        if dynamic and leader is not None:
            live = sorted(leader.voters)  # the voters are what the log says they are
        if offset is not None and all(simulation.replicas[node].high_watermark > offset for node in live):
            break
    else:
        raise AssertionError(f"seed {seed}: nothing committed on all of voters {live} within 30 s of healing "
                             f"(leaders: {[replica.node_id for replica in simulation.leaders()]})")
    assert len(simulation.committed) > offset
    return simulation


def change_voters_at_random(simulation: Simulation, rng: random.Random) -> None:
    """The newest leader is asked to add a controller that is not a voter (a spare, or a voter removed before) or
    to remove one of its voters."""
    leader = max(simulation.leaders(), key=lambda replica: replica.epoch, default=None)
    if leader is None:
        return
    addable = [node for node in simulation.voter_ids + simulation.spare_ids if node not in leader.voters]
    if addable and (len(leader.voters) == 1 or rng.random() < 0.5):
        simulation.change_voters(leader.node_id, add=rng.choice(addable))
    elif len(leader.voters) > 1:
        simulation.change_voters(leader.node_id, remove=rng.choice(sorted(leader.voters)))


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_random_dynamic_schedules_keep_the_invariants(chunk: int) -> None:
    """Voters added and removed under the same faults: the same invariants, and the changes do happen, in schedules
    where replicas catch up through FetchSnapshot too."""
    results: dict[int, int] = {}
    fetched = 0
    for seed in range(chunk, SCHEDULES // 2, CHUNKS):
        simulation = run_schedule(seed, dynamic=True)
        results.update({(seed, request): error for request, error in simulation.voter_change_results.items()})
        fetched += sum(len(snapshots.fetched) for snapshots in simulation.snapshots.values())
    assert ErrorCode.NONE in results.values(), results
    assert fetched > 0


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_random_schedules_keep_the_invariants(chunk: int) -> None:
    events = 0
    for seed in range(chunk, SCHEDULES, CHUNKS):
        events += run_schedule(seed).events_run
    assert events > 0


def test_one_seed() -> None:
    """Replays KFK_RAFT_SEED (default 0) alone, for debugging a failed schedule."""
    simulation = run_schedule(int(os.environ.get("KFK_RAFT_SEED", "0")),
                              dynamic=os.environ.get("KFK_RAFT_DYNAMIC", "") == "1")
    assert simulation.committed
