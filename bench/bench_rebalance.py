"""Rebalance time and heartbeat throughput: the classic group protocol against the consumer protocol (KIP-848), on
kfk and on Apache Kafka in the same run.

    python bench/bench_rebalance.py [--repeat 3] [--members 10] [--heartbeat-members 200] [--seconds 5]
                                    [--brokers kfk,kafka]

Figures (medians over --repeat runs, each broker started fresh with the same settings: offsets replication 1, no
initial rebalance delay, heartbeat intervals of 500 ms for both protocols):
- join: a group of --members confluent-kafka consumers (2 partitions each) is stable; one more member subscribes.
  The time from its subscribe() until every partition is owned by exactly one member and every member owns some,
  for the classic protocol with the eager range assignor, with cooperative-sticky, and for the consumer protocol
  (group.protocol=consumer, the broker's uniform assignor). One Python thread polls every consumer in turn, as an
  application would drive a few consumers; the same for every broker.
- heartbeats/s: --heartbeat-members members of one consumer-protocol group, joined beforehand, each sending
  ConsumerGroupHeartbeat at its epoch with nothing changed, pipelined on one connection (a round of one heartbeat
  per member, then every answer read): what one coordinator answers per second when no heartbeat needs a write.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.protocol.connection import ClientConnection, Response
from kfk.protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest
from kfk.protocol.messages.find_coordinator import FindCoordinatorRequest
from kfk.testing.apache_kafka import ApacheKafka
from kfk.testing.broker import start_broker

BROKER_SETTINGS = {
    "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.consumer.heartbeat.interval.ms": "500",
}
HEARTBEAT_INTERVAL_MS = 500
MODES: dict[str, dict[str, str]] = {
    "classic eager (range)": {"partition.assignment.strategy": "range",
                              "heartbeat.interval.ms": str(HEARTBEAT_INTERVAL_MS), "session.timeout.ms": "10000"},
    "classic cooperative-sticky": {"partition.assignment.strategy": "cooperative-sticky",
                                   "heartbeat.interval.ms": str(HEARTBEAT_INTERVAL_MS),
                                   "session.timeout.ms": "10000"},
    "consumer protocol": {"group.protocol": "consumer"},
}


@contextmanager
def kfk_broker() -> Iterator[str]:
    broker = start_broker(tempfile.mkdtemp(prefix="bench-rebalance-kfk-"), dict(BROKER_SETTINGS))
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


@contextmanager
def kafka_broker() -> Iterator[str]:
    node = ApacheKafka(tempfile.mkdtemp(prefix="bench-rebalance-kafka-"), config=dict(BROKER_SETTINGS)).start()
    try:
        yield node.bootstrap_server
    finally:
        node.stop()


BROKERS: dict[str, Callable] = {"kfk": kfk_broker, "kafka": kafka_broker}


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(60)


def settled(consumers: list[Consumer], partitions: int) -> bool:
    owned = [{tp.partition for tp in c.assignment()} for c in consumers]
    return all(owned) and sum(map(len, owned)) == partitions and len(set().union(*owned)) == partitions


def poll_until(consumers: list[Consumer], condition: Callable[[], bool], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError("the group did not settle")
        for consumer in consumers:
            consumer.poll(0)
        time.sleep(0.001)


def join_time(bootstrap: str, mode: str, members: int, run: int) -> float:
    """Seconds from the new member's subscribe() until the group of members + 1 is settled."""
    topic, group = f"rebalance-{run}-{uuid.uuid4().hex[:6]}", f"bench-{run}-{uuid.uuid4().hex[:6]}"
    partitions = members * 2
    create_topic(bootstrap, topic, partitions)

    def consumer() -> Consumer:
        return Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "latest",
                         "enable.auto.commit": False, **MODES[mode]})

    consumers = [consumer() for _ in range(members)]
    try:
        for c in consumers:
            c.subscribe([topic])
        poll_until(consumers, lambda: settled(consumers, partitions))
        joining = consumer()
        consumers.append(joining)
        started = time.monotonic()
        joining.subscribe([topic])
        poll_until(consumers, lambda: settled(consumers, partitions))
        return time.monotonic() - started
    finally:
        for c in consumers:
            c.close()


class Wire:
    """One pipelined connection speaking the protocol itself (kfk's sans-I/O codec)."""

    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.split(",")[0].rsplit(":", 1)
        self.socket = socket.create_connection((host, int(port)), timeout=60)
        self.connection: ClientConnection[None] = ClientConnection("bench-rebalance")

    def round(self, requests: list[tuple[object, int]]) -> list:
        self.socket.sendall(b"".join(self.connection.send_request(request, version, None)
                                     for request, version in requests))
        answers: list = []
        while len(answers) < len(requests):
            data = self.socket.recv(1 << 20)
            if not data:
                raise RuntimeError("the broker closed the connection")
            answers += [event.message for event in self.connection.receive_data(data) if isinstance(event, Response)]
        return answers


def heartbeat_rate(bootstrap: str, members: int, seconds: float) -> float:
    topic, group = f"heartbeats-{uuid.uuid4().hex[:6]}", f"bench-heartbeats-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 1)
    wire = Wire(bootstrap)
    deadline = time.monotonic() + 60
    while wire.round([(FindCoordinatorRequest(key=group, key_type=0), 2)])[0].error_code != 0:
        if time.monotonic() > deadline:
            raise RuntimeError("no coordinator")
        time.sleep(0.1)
    ids = [uuid.uuid4().hex for _ in range(members)]
    epochs: dict[str, int] = {}
    for member_id in ids:  # joined one by one: each answer is written to __consumer_offsets first
        answer = wire.round([(ConsumerGroupHeartbeatRequest(
            group_id=group, member_id=member_id, member_epoch=0, rebalance_timeout_ms=60_000,
            subscribed_topic_names=[topic], topic_partitions=[]), 0)])[0]
        if answer.error_code != 0:
            raise RuntimeError(f"join refused: error {answer.error_code} {answer.error_message}")
        epochs[member_id] = answer.member_epoch

    def steady_round() -> int:
        answers = wire.round([(ConsumerGroupHeartbeatRequest(group_id=group, member_id=member_id,
                                                             member_epoch=epochs[member_id]), 0)
                              for member_id in ids])
        for member_id, answer in zip(ids, answers):
            if answer.error_code != 0:
                raise RuntimeError(f"heartbeat refused: error {answer.error_code} {answer.error_message}")
            epochs[member_id] = answer.member_epoch
        return len(answers)

    for _ in range(3):
        steady_round()  # every member at the group's epoch
    sent = 0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        sent += steady_round()
    return sent / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--members", type=int, default=10)
    parser.add_argument("--heartbeat-members", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--brokers", default="kfk,kafka")
    args = parser.parse_args()
    brokers = [name.strip() for name in args.brokers.split(",") if name.strip()]
    joins: dict[tuple[str, str], list[float]] = {}
    rates: dict[str, list[float]] = {}
    for broker in brokers:
        with BROKERS[broker]() as bootstrap:
            for run in range(args.repeat):
                for mode in MODES:
                    joins.setdefault((broker, mode), []).append(join_time(bootstrap, mode, args.members, run))
                rates.setdefault(broker, []).append(heartbeat_rate(bootstrap, args.heartbeat_members, args.seconds))
    print(f"\nA member joining a group of {args.members} (seconds, median of {args.repeat}):")
    print(f"{'protocol':<30}" + "".join(f"{broker:>10}" for broker in brokers))
    for mode in MODES:
        print(f"{mode:<30}" + "".join(f"{statistics.median(joins[(broker, mode)]):>10.2f}" for broker in brokers))
    print(f"\nConsumerGroupHeartbeat/s, {args.heartbeat_members} members, one connection (median of {args.repeat}):")
    for broker in brokers:
        print(f"{broker:<30}{statistics.median(rates[broker]):>10.0f}")


if __name__ == "__main__":
    main()
