"""Kafka Connect's eager group protocol: the bytes of member metadata and assignments (Java's ConnectProtocol
reads them: tests/connect/test_distributed.py runs a Java worker and a kfk worker in one group) and the leader's
round-robin assignment."""

from kfk.connect.connect_protocol import (
    Assignment,
    WorkerState,
    decode_assignment,
    decode_metadata,
    eager_assign,
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
