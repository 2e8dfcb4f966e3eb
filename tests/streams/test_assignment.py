"""The group leader's task assignment (kfk.streams.assignment, through kfk.streams.metadata.StreamsAssignor): stateful
tasks stay on instances caught up on them while warm-up replicas restore them where the range assignor's target
puts them (KIP-441), standbys, and the probing rebalance the leader asks for; every expectation is worked out here
from the lags each case sets up."""

from __future__ import annotations

from kfk.client.consumer.assignors import Subscription
from kfk.common.structs import TopicPartition
from kfk.streams.assignment import LATEST_OFFSET, AssignmentConfigs, ClientState, assign_tasks, task_lag
from kfk.streams.metadata import (PartitionsByHost, StreamsAssignor, StreamsSubscription, decode_streams_assignment,
                                  encode_streams_subscription)
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
