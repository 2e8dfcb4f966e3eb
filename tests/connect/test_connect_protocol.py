"""Kafka Connect's group protocols: the bytes of member metadata and assignments, eager (version 0) and incremental
cooperative (version 1; Java's ConnectProtocol and IncrementalCooperativeConnectProtocol read them:
tests/connect/test_distributed.py runs Java and kfk workers in one group), and the leaders' assignors."""

from kfk.connect.assignors import IncrementalCooperativeAssignor, eager_assign
from kfk.connect.connect_protocol import (
    Assignment,
    WorkerState,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
)


def test_metadata_bytes():
    encoded = encode_metadata(WorkerState("http://w:8083/", 41))
    # version 0, the url as an int16-length string, the config offset as int64
    assert encoded == b"\x00\x00" + b"\x00\x0ehttp://w:8083/" + (41).to_bytes(8, "big")
    assert decode_metadata(encoded) == WorkerState("http://w:8083/", 41)


def test_assignment_bytes_name_the_connector_as_task_minus_one():
    assignment = Assignment(0, "leader-1", "http://l/", 7, connectors=["a"], tasks=[("a", 0), ("b", 2)])
    encoded = encode_assignment(assignment)
    assert encoded == (b"\x00\x00" + b"\x00\x00" + b"\x00\x08leader-1" + b"\x00\x09http://l/"
                       + (7).to_bytes(8, "big") + (2).to_bytes(4, "big")
                       + b"\x00\x01a" + (2).to_bytes(4, "big") + (-1).to_bytes(4, "big", signed=True)
                       + (0).to_bytes(4, "big")
                       + b"\x00\x01b" + (1).to_bytes(4, "big") + (2).to_bytes(4, "big"))
    assert decode_assignment(encoded) == assignment


def test_eager_assignment_deals_connectors_then_tasks_round_robin():
    members = {"w2": WorkerState("u2", 0), "w1": WorkerState("u1", 0)}
    result = eager_assign(members, {"sink": 1, "source": 2})
    assert (result["w1"].connectors, result["w1"].tasks) == (["sink"], [("sink", 0), ("source", 1)])
    assert (result["w2"].connectors, result["w2"].tasks) == (["source"], [("source", 0)])


def test_cooperative_metadata_carries_the_allocation_as_nullable_bytes():
    empty = encode_metadata(WorkerState("http://w/", 3, None, 1))
    assert empty == b"\x00\x01" + b"\x00\x09http://w/" + (3).to_bytes(8, "big") + (-1).to_bytes(4, "big", signed=True)
    assert decode_metadata(empty) == WorkerState("http://w/", 3, None, 1)
    allocation = Assignment(0, "l", "http://l/", 3, connectors=["a"], tasks=[("a", 0)], version=1)
    encoded = encode_metadata(WorkerState("http://w/", 3, allocation, 1))
    inner = encode_assignment(allocation)
    assert encoded.endswith(len(inner).to_bytes(4, "big") + inner)
    assert decode_metadata(encoded).allocation == allocation


def test_cooperative_assignment_bytes_add_the_revoked_and_the_delay():
    assignment = Assignment(0, "l", "u", 9, connectors=[], tasks=[("a", 1)], revoked_connectors=["b"],
                            revoked_tasks=[("b", 0)], delay=1500, version=1)
    encoded = encode_assignment(assignment)
    assert encoded == (b"\x00\x01\x00\x00" + b"\x00\x01l" + b"\x00\x01u" + (9).to_bytes(8, "big")
                       + (1).to_bytes(4, "big") + b"\x00\x01a" + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")
                       + (1).to_bytes(4, "big") + b"\x00\x01b" + (2).to_bytes(4, "big")
                       + (-1).to_bytes(4, "big", signed=True) + (0).to_bytes(4, "big")
                       + (1500).to_bytes(4, "big"))
    assert decode_assignment(encoded) == assignment


def member(connectors=(), tasks=()) -> WorkerState:
    allocation = Assignment(0, "", "", 0, list(connectors), list(tasks), version=1) if connectors or tasks else None
    return WorkerState("u", 0, allocation, 1)


def work(assignment: Assignment) -> tuple[list, list, list, list]:
    return assignment.connectors, assignment.tasks, assignment.revoked_connectors, assignment.revoked_tasks


def test_a_joining_worker_takes_half_the_tasks_without_the_others_stopping_the_rest():
    assignor = IncrementalCooperativeAssignor(max_delay_ms=0)
    first = assignor.assign({"w1": member()}, {"c": 4}, -1, 1, 0)
    assert work(first["w1"]) == (["c"], [("c", 0), ("c", 1), ("c", 2), ("c", 3)], [], [])
    running = {"w1": member(["c"], [("c", i) for i in range(4)]), "w2": member()}
    second = assignor.assign(running, {"c": 4}, 1, 2, 0)
    # w1 gives up two tasks (and keeps its connector), w2 gets nothing yet
    assert work(second["w1"]) == ([], [], [], [("c", 2), ("c", 3)])
    assert work(second["w2"]) == ([], [], [], [])
    running = {"w1": member(["c"], [("c", 0), ("c", 1)]), "w2": member()}
    third = assignor.assign(running, {"c": 4}, 2, 3, 0)
    assert work(third["w1"]) == ([], [], [], [])
    assert work(third["w2"]) == ([], [("c", 2), ("c", 3)], [], [])


def test_a_departed_workers_tasks_wait_for_the_delay_then_go_to_the_worker_that_came_back():
    assignor = IncrementalCooperativeAssignor(max_delay_ms=10_000)
    assignor.assign({"w1": member(), "w2": member()}, {"c": 2}, -1, 1, 0)
    both = {"w1": member(["c"], [("c", 0)]), "w2": member([], [("c", 1)])}
    assignor.assign(both, {"c": 2}, 1, 2, 0)  # nothing moves
    alone = assignor.assign({"w1": member(["c"], [("c", 0)])}, {"c": 2}, 2, 3, 1_000)
    assert work(alone["w1"]) == ([], [], [], []) and alone["w1"].delay == 10_000
    back = {"w1": member(["c"], [("c", 0)]), "w3": member()}
    waiting = assignor.assign(back, {"c": 2}, 3, 4, 5_000)
    assert work(waiting["w3"]) == ([], [], [], []) and waiting["w3"].delay == 6_000
    after = assignor.assign(back, {"c": 2}, 4, 5, 11_000)
    assert work(after["w3"]) == ([], [("c", 1)], [], []) and after["w3"].delay == 0
    assert work(after["w1"]) == ([], [], [], [])


def test_without_a_departed_worker_missing_tasks_are_handed_out_at_once():
    assignor = IncrementalCooperativeAssignor(max_delay_ms=10_000)
    assignor.assign({"w1": member(), "w2": member()}, {"c": 2}, -1, 1, 0)
    # w2 missed its assignment (it runs nothing): no one left, so no delay
    result = assignor.assign({"w1": member(["c"], [("c", 0)]), "w2": member()}, {"c": 2}, 1, 2, 0)
    assert work(result["w2"]) == ([], [("c", 1)], [], []) and result["w2"].delay == 0


def test_deleted_and_duplicated_work_is_revoked():
    assignor = IncrementalCooperativeAssignor(max_delay_ms=0)
    members = {"w1": member(["gone", "c"], [("gone", 0), ("c", 0)]), "w2": member([], [("c", 0), ("c", 1)])}
    result = assignor.assign(members, {"c": 2}, -1, 1, 0)
    assert work(result["w1"]) == ([], [], ["gone"], [("c", 0), ("gone", 0)])
    assert work(result["w2"]) == ([], [], [], [("c", 0)])
    # next round: the duplicated task is placed once
    members = {"w1": member(["c"]), "w2": member([], [("c", 1)])}
    result = assignor.assign(members, {"c": 2}, 1, 2, 0)
    assert work(result["w1"]) == ([], [("c", 0)], [], []) and work(result["w2"]) == ([], [], [], [])
