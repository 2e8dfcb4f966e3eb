"""The group leader's task assignment (kfk.streams.assignment, through kfk.streams.metadata.StreamsAssignor): stateful
tasks stay on instances caught up on them while warm-up replicas restore them where the range assignor's target
puts them (KIP-441), standbys (spread over client tags, KIP-708), and the probing rebalance the leader asks for; every expectation is worked out here
from the lags each case sets up."""

from __future__ import annotations

from collections import Counter
from random import Random

from kfk.client.consumer.assignors import Subscription
from kfk.common.structs import TopicPartition
from kfk.streams.assignment import LATEST_OFFSET, AssignmentConfigs, ClientState, assign_tasks, task_lag
from kfk.streams.metadata import (PartitionsByHost, StreamsAssignor, StreamsSubscription, decode_streams_assignment,
                                  decode_streams_subscription, encode_streams_subscription)
from kfk.streams.processor import TaskId

SOURCE, CHANGELOG = "app-repartition", "app-counts-changelog"
#: Three tasks of one stateful sub-topology (1) fed by SOURCE, and the stateless sub-topology 0 fed by "lines".
TOPIC_SUBTOPOLOGY = {"lines": 0, SOURCE: 1}


def _task_of(partition: TopicPartition) -> TaskId:
    return TaskId(TOPIC_SUBTOPOLOGY[partition.topic], partition.partition)


def _tasks(assignment: dict[str, list[TopicPartition]]) -> dict[str, list[str]]:
    return {member: sorted({str(_task_of(partition)) for partition in partitions})
            for member, partitions in assignment.items()}


#: The range assignor's target over two members "a-1" (instance A) and "b-1" (instance B): partitions 0 and 1 to
#: a-1, 2 to b-1.
TARGET = {"a-1": [TopicPartition(SOURCE, 0), TopicPartition(SOURCE, 1)], "b-1": [TopicPartition(SOURCE, 2)]}
STATEFUL = {TaskId(1, partition) for partition in range(3)}
ENDS = {task: 50_000 for task in STATEFUL}


def test_lag_of_a_running_task_a_checkpoint_no_state_and_a_state_past_the_end() -> None:
    assert task_lag(LATEST_OFFSET, 500) == 0
    assert task_lag(480, 500) == 20
    assert task_lag(None, 500) == 500
    assert task_lag(900, 500) == 500, "state of an older changelog restores from scratch"


def test_a_task_whose_target_lags_stays_where_it_is_caught_up_and_its_target_warms_up() -> None:
    """A runs every task, B is new (no state): the target gives B task 1_0, which stays on A while B warms it up."""
    target = {"a-1": [TopicPartition(SOURCE, 1), TopicPartition(SOURCE, 2)], "b-1": [TopicPartition(SOURCE, 0)]}
    clients = {"A": ClientState(["a-1"], {task: LATEST_OFFSET for task in STATEFUL}), "B": ClientState(["b-1"], {})}
    decided = assign_tasks(target, clients, _task_of, STATEFUL, ENDS, AssignmentConfigs())
    assert _tasks(decided.partitions) == {"a-1": ["1_0", "1_1", "1_2"], "b-1": []}
    assert decided.warmups == {"b-1": {TaskId(1, 0)}} and decided.standbys == {"b-1": {TaskId(1, 0)}}
    assert decided.probing


def test_a_caught_up_warm_up_takes_its_task() -> None:
    """B's warm-up of 1_2 lags 10 000 records (acceptable.recovery.lag, caught up), nothing else moves."""
    clients = {"A": ClientState(["a-1"], {task: LATEST_OFFSET for task in STATEFUL}),
               "B": ClientState(["b-1"], {TaskId(1, 2): 40_000})}
    decided = assign_tasks(TARGET, clients, _task_of, STATEFUL, ENDS, AssignmentConfigs())
    assert _tasks(decided.partitions) == {"a-1": ["1_0", "1_1"], "b-1": ["1_2"]}
    assert decided.warmups == {} and decided.standbys == {} and not decided.probing


def test_a_warm_up_one_record_short_of_caught_up_does_not() -> None:
    clients = {"A": ClientState(["a-1"], {task: LATEST_OFFSET for task in STATEFUL}),
               "B": ClientState(["b-1"], {TaskId(1, 2): 39_999})}
    decided = assign_tasks(TARGET, clients, _task_of, STATEFUL, ENDS, AssignmentConfigs())
    assert _tasks(decided.partitions) == {"a-1": ["1_0", "1_1", "1_2"], "b-1": []}
    assert decided.warmups == {"b-1": {TaskId(1, 2)}} and decided.probing


def test_small_state_goes_to_the_target_at_once() -> None:
    """Every instance is caught up on a task whose changelog holds no more than acceptable.recovery.lag."""
    clients = {"A": ClientState(["a-1"], {task: LATEST_OFFSET for task in STATEFUL}), "B": ClientState(["b-1"], {})}
    decided = assign_tasks(TARGET, clients, _task_of, STATEFUL, {task: 10_000 for task in STATEFUL},
                           AssignmentConfigs())
    assert _tasks(decided.partitions) == _tasks(TARGET)
    assert decided.warmups == {} and not decided.probing


def test_a_task_no_instance_is_caught_up_on_goes_to_its_target() -> None:
    clients = {"A": ClientState(["a-1"], {TaskId(1, 2): 1}), "B": ClientState(["b-1"], {})}
    decided = assign_tasks(TARGET, clients, _task_of, STATEFUL, ENDS, AssignmentConfigs())
    assert _tasks(decided.partitions) == _tasks(TARGET) and not decided.probing


def test_no_end_offsets_means_the_target() -> None:
    clients = {"A": ClientState(["a-1"], {task: LATEST_OFFSET for task in STATEFUL}), "B": ClientState(["b-1"], {})}
    decided = assign_tasks(TARGET, clients, _task_of, STATEFUL, None, AssignmentConfigs())
    assert _tasks(decided.partitions) == _tasks(TARGET) and not decided.probing


def test_at_most_max_warmup_replicas_and_the_least_lagging_least_loaded_caught_up_instance() -> None:
    """Three instances, six tasks, the target spreads them two by two; A runs 1_0..1_3, C runs 1_4 and 1_5 and has
    a checkpoint of 1_2 a little behind, B is new: B's target tasks 1_2 and 1_3 stay on A, and only the first gets
    a warm-up (max.warmup.replicas=1)."""
    tasks = {TaskId(1, partition) for partition in range(6)}
    target = {member: [TopicPartition(SOURCE, 2 * index), TopicPartition(SOURCE, 2 * index + 1)]
              for index, member in enumerate(["a-1", "b-1", "c-1"])}
    clients = {"A": ClientState(["a-1"], {TaskId(1, p): LATEST_OFFSET for p in range(4)}),
               "B": ClientState(["b-1"], {}),
               "C": ClientState(["c-1"], {TaskId(1, 2): 49_000, TaskId(1, 4): LATEST_OFFSET,
                                          TaskId(1, 5): LATEST_OFFSET})}
    decided = assign_tasks(target, clients, _task_of, tasks, {task: 50_000 for task in tasks},
                           AssignmentConfigs(max_warmup_replicas=1))
    # 1_2: A (lag 0) before C (lag 1000); 1_3: only A is caught up
    assert _tasks(decided.partitions) == {"a-1": ["1_0", "1_1", "1_2", "1_3"], "b-1": [], "c-1": ["1_4", "1_5"]}
    assert decided.warmups == {"b-1": {TaskId(1, 2)}} and decided.probing


def test_each_task_goes_to_its_own_caught_up_instance() -> None:
    tasks = {TaskId(1, partition) for partition in range(3)}
    target = {"a-1": [TopicPartition(SOURCE, 0), TopicPartition(SOURCE, 1)], "b-1": [],
              "c-1": [TopicPartition(SOURCE, 2)]}
    clients = {"A": ClientState(["a-1"], {TaskId(1, 2): LATEST_OFFSET}), "B": ClientState(["b-1"], {}),
               "C": ClientState(["c-1"], {TaskId(1, 0): LATEST_OFFSET})}
    decided = assign_tasks(target, clients, _task_of, tasks, {task: 50_000 for task in tasks}, AssignmentConfigs())
    # 1_0: target A lags, C is caught up; 1_1: nobody is caught up (A's target); 1_2: target C lags, A caught up
    assert _tasks(decided.partitions) == {"a-1": ["1_1", "1_2"], "b-1": [], "c-1": ["1_0"]}
    assert decided.warmups == {"a-1": {TaskId(1, 0)}, "c-1": {TaskId(1, 2)}}


def test_the_least_loaded_of_equally_caught_up_instances_keeps_the_task() -> None:
    """1_0's target A lags; B and C both hold it at the changelog's end, and C has more tasks."""
    tasks = {TaskId(1, partition) for partition in range(4)}
    target = {"a-1": [TopicPartition(SOURCE, 0)], "b-1": [TopicPartition(SOURCE, 1)],
              "c-1": [TopicPartition(SOURCE, 2), TopicPartition(SOURCE, 3)]}
    clients = {"A": ClientState(["a-1"], {}), "B": ClientState(["b-1"], {TaskId(1, 0): 50_000}),
               "C": ClientState(["c-1"], {TaskId(1, 0): 50_000})}
    decided = assign_tasks(target, clients, _task_of, tasks, {task: 50_000 for task in tasks}, AssignmentConfigs())
    assert _tasks(decided.partitions) == {"a-1": [], "b-1": ["1_0", "1_1"], "c-1": ["1_2", "1_3"]}


def test_a_kept_task_moves_to_the_least_loaded_thread_of_its_instance() -> None:
    target = {"a-1": [TopicPartition(SOURCE, 0)], "a-2": [TopicPartition(SOURCE, 1)],
              "b-1": [TopicPartition(SOURCE, 2)]}
    clients = {"A": ClientState(["a-1", "a-2"], {TaskId(1, 2): LATEST_OFFSET}), "B": ClientState(["b-1"], {})}
    decided = assign_tasks(target, clients, _task_of, STATEFUL, ENDS, AssignmentConfigs())
    assert _tasks(decided.partitions) == {"a-1": ["1_0", "1_2"], "a-2": ["1_1"], "b-1": []}


def test_a_standby_on_the_target_is_its_warm_up() -> None:
    clients = {"A": ClientState(["a-1"], {task: LATEST_OFFSET for task in STATEFUL}), "B": ClientState(["b-1"], {})}
    decided = assign_tasks(TARGET, clients, _task_of, STATEFUL, ENDS, AssignmentConfigs(num_standby_replicas=1))
    assert _tasks(decided.partitions) == {"a-1": ["1_0", "1_1", "1_2"], "b-1": []}
    assert decided.standbys == {"b-1": STATEFUL} and decided.warmups == {} and decided.probing


def test_stateless_tasks_follow_the_target() -> None:
    target = {"a-1": [TopicPartition("lines", 0), TopicPartition(SOURCE, 0)],
              "b-1": [TopicPartition("lines", 1), TopicPartition(SOURCE, 1)]}
    tasks = {TaskId(1, 0), TaskId(1, 1)}
    clients = {"A": ClientState(["a-1"], {task: LATEST_OFFSET for task in tasks}), "B": ClientState(["b-1"], {})}
    decided = assign_tasks(target, clients, _task_of, tasks, {task: 50_000 for task in tasks}, AssignmentConfigs())
    assert _tasks(decided.partitions) == {"a-1": ["0_0", "1_0", "1_1"], "b-1": ["0_1"]}


def test_the_assignor_reads_the_reported_lags_and_sends_warm_ups_and_one_probing_delay() -> None:
    """Through StreamsAssignor and the user data: two threads of A (one reporting a checkpoint, the other running
    the task) and B; the changelog's ends come from the leader's reader."""
    asked: list[list[TopicPartition]] = []

    def end_offsets(partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        asked.append(sorted(partitions))
        return dict.fromkeys(partitions, 50_000)

    configs = AssignmentConfigs(probing_rebalance_interval_ms=60_000)
    assignor = StreamsAssignor(StreamsSubscription("A", None), PartitionsByHost(), configs, TOPIC_SUBTOPOLOGY,
                               {1: [CHANGELOG]}, dict, end_offsets)

    def subscription(process_id: str, offset_sums: dict[TaskId, int]) -> Subscription:
        return Subscription([SOURCE], encode_streams_subscription(StreamsSubscription(process_id, None, offset_sums)))

    subscriptions = {"a-1": subscription("A", {TaskId(1, 0): 49_000, TaskId(1, 1): LATEST_OFFSET}),
                     "a-2": subscription("A", {TaskId(1, 0): LATEST_OFFSET, TaskId(1, 2): LATEST_OFFSET}),
                     "b-1": subscription("B", {TaskId(1, 1): 100})}
    assignment = assignor.assign({SOURCE: 3}, subscriptions)
    assert asked == [[TopicPartition(CHANGELOG, partition) for partition in range(3)]]
    # the range target gives a-1 1_0, a-2 1_1 and b-1 1_2; B is caught up on none of them, A on all
    assert _tasks(assignment) == {"a-1": ["1_0", "1_2"], "a-2": ["1_1"], "b-1": []}
    received = {member: decode_streams_assignment(data)
                for member, data in assignor.assignment_user_data(assignment, subscriptions).items()}
    assert {member: sorted(map(str, got.warmup_tasks)) for member, got in received.items()} == {
        "a-1": [], "a-2": [], "b-1": ["1_2"]}
    assert received["b-1"].standby_tasks == {TaskId(1, 2)}
    assert {member: got.probing_rebalance_ms for member, got in received.items()} == {
        "a-1": 60_000, "a-2": None, "b-1": None}


def test_one_instance_needs_no_end_offsets() -> None:
    def end_offsets(partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        raise AssertionError("one instance has nowhere else to run its tasks")

    assignor = StreamsAssignor(StreamsSubscription("A", None), PartitionsByHost(), AssignmentConfigs(),
                               TOPIC_SUBTOPOLOGY, {1: [CHANGELOG]}, dict, end_offsets)
    subscriptions = {"a-1": Subscription([SOURCE], encode_streams_subscription(StreamsSubscription("A", None)))}
    assert _tasks(assignor.assign({SOURCE: 3}, subscriptions)) == {"a-1": ["1_0", "1_1", "1_2"]}


# --- rack-aware standbys (KIP-708) -------------------------------------------------------------------------------

def _tagged_clients(tags: dict[str, dict[str, str]]) -> dict[str, ClientState]:
    return {process_id: ClientState([f"{process_id}-1"], {}, client_tags) for process_id, client_tags in tags.items()}


def _placements(tasks: set[TaskId], clients: dict[str, ClientState], replicas: int, tag_keys: tuple[str, ...]
                ) -> dict[TaskId, tuple[str, list[str]]]:
    """Each task's active instance (the target: one task per instance in turn) and standby instances."""
    names = sorted(clients)
    target = {f"{name}-1": [] for name in names}
    for task in sorted(tasks):
        target[f"{names[task.partition % len(names)]}-1"].append(TopicPartition(SOURCE, task.partition))
    decided = assign_tasks(target, clients, _task_of, tasks, None,
                           AssignmentConfigs(num_standby_replicas=replicas, rack_aware_assignment_tags=tag_keys))
    active = {_task_of(partition): member[:-2] for member, partitions in decided.partitions.items()
              for partition in partitions}
    return {task: (active[task], sorted(member[:-2] for member, standby in decided.standbys.items() if task in standby))
            for task in tasks}


def test_standbys_go_to_other_zones_and_clusters() -> None:
    """Six instances, three zones by two clusters, two standbys: a task's active and standbys are in three zones,
    and the first standby (a zone and a cluster of its own) makes both clusters appear."""
    clients = _tagged_clients({f"{zone}{cluster}": {"zone": zone, "cluster": cluster}
                               for zone in "abc" for cluster in ("1", "2")})
    tasks = {TaskId(1, partition) for partition in range(24)}
    placements = _placements(tasks, clients, 2, ("zone", "cluster"))
    for task, (active, standbys) in placements.items():
        assert len(standbys) == 2 and active not in standbys, (task, active, standbys)
        placed = [active, *standbys]
        assert len({clients[name].tags["zone"] for name in placed}) == 3, (task, placed)
        assert len({clients[name].tags["cluster"] for name in placed}) == 2, (task, placed)
    held = Counter(name for _, standbys in placements.values() for name in standbys)
    assert max(held.values()) - min(held.values()) <= 2, f"the standbys are spread: {held}"


def test_a_standby_is_never_in_its_active_zone_while_another_zone_has_room() -> None:
    """Random instances over three zones (seeded), one standby: never in the active's zone."""
    random = Random(708)
    for round_ in range(20):
        zones = [random.choice("xyz") for _ in range(random.randint(2, 9))]
        if len(set(zones)) < 2:
            continue
        clients = _tagged_clients({f"c{index}": {"zone": zone, "rack": str(random.randint(0, 3))}
                                   for index, zone in enumerate(zones)})
        tasks = {TaskId(1, partition) for partition in range(random.randint(1, 30))}
        for task, (active, standbys) in _placements(tasks, clients, 1, ("zone",)).items():
            assert clients[standbys[0]].tags["zone"] != clients[active].tags["zone"], (round_, task, zones)


def test_a_task_with_no_other_zone_left_still_gets_its_standbys() -> None:
    """Every instance in one zone: the tag cannot spread the standbys, the least loaded others take them."""
    clients = _tagged_clients({name: {"zone": "a"} for name in ("p", "q", "r")})
    tasks = {TaskId(1, partition) for partition in range(6)}
    placements = _placements(tasks, clients, 1, ("zone",))
    assert all(len(standbys) == 1 and active not in standbys for active, standbys in placements.values())
    assert sorted(Counter(name for _, standbys in placements.values() for name in standbys).values()) == [2, 2, 2]


def test_two_standbys_over_two_zones_take_both_then_any() -> None:
    """Zones a (p, q) and b (r, s), two standbys: the first in the other zone, the second (both zones taken) on
    any other instance."""
    clients = _tagged_clients({"p": {"zone": "a"}, "q": {"zone": "a"}, "r": {"zone": "b"}, "s": {"zone": "b"}})
    tasks = {TaskId(1, partition) for partition in range(8)}
    for task, (active, standbys) in _placements(tasks, clients, 2, ("zone",)).items():
        assert len(standbys) == 2 and active not in standbys
        zones = [clients[name].tags["zone"] for name in standbys]
        assert any(zone != clients[active].tags["zone"] for zone in zones), (task, active, standbys)


def test_without_tags_the_standbys_only_avoid_the_active() -> None:
    clients = _tagged_clients({"p": {"zone": "a"}, "q": {"zone": "a"}, "r": {"zone": "b"}})
    tasks = {TaskId(1, partition) for partition in range(6)}
    placements = _placements(tasks, clients, 1, ())
    assert all(len(standbys) == 1 and active not in standbys for active, standbys in placements.values())
    # the least loaded: each instance keeps two standbys, so some stay in their active's zone
    assert sorted(Counter(name for _, standbys in placements.values() for name in standbys).values()) == [2, 2, 2]
    assert any(clients[standbys[0]].tags["zone"] == clients[active].tags["zone"]
               for active, standbys in placements.values())


def test_client_tags_travel_in_the_subscription() -> None:
    subscription = StreamsSubscription("A", None, {TaskId(0, 1): 5}, {"zone": "eu-1", "rack": "r7"})
    assert decode_streams_subscription(encode_streams_subscription(subscription)) == subscription
