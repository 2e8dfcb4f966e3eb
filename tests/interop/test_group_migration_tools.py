"""A group in the middle of its online migration (a classic consumer, then a consumer with group.protocol=consumer
joining: the broker upgraded the group and serves both), described by Kafka's kafka-consumer-groups.sh on kfk and on
Apache Kafka: the same lines once member ids are blanked."""

from __future__ import annotations

import re
import threading
import time

from confluent_kafka import Consumer, Producer

from tests.interop.jvm import kafka_tool, kfk_server, unique_name  # noqa: F401
from tests.interop.test_kafka_tools import GROUPS, Target, both, both_raw, lines_with, targets  # noqa: F401
from tests.interop.test_kfk_tools_print_kafka_lines import kfk as kfk_command

#: Member ids: librdkafka's classic ones (client id, then a UUID) and the consumer protocol's (a base64 UUID).
MEMBER_ID = re.compile(r"(?<![\w/+-])(?:[\w.-]+-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
                       r"|(?=[\w/+-]*[A-Z])[A-Za-z0-9+/_-]{22})(?![\w/+-])")


class Member(threading.Thread):
    """A consumer polling until told to stop; `owns` is set once it holds a partition."""

    def __init__(self, bootstrap: str, group: str, topic: str, protocol: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        config = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": protocol,
                  "client.id": protocol, "auto.offset.reset": "earliest"}
        if protocol == "classic":
            config.update({"partition.assignment.strategy": "cooperative-sticky", "session.timeout.ms": 10000,
                           "heartbeat.interval.ms": 500})
        self.consumer = Consumer(config)
        self.topic = topic
        self.stop_event = stop
        self.owns = threading.Event()

    def run(self) -> None:
        self.consumer.subscribe([self.topic])
        try:
            while not self.stop_event.is_set():
                self.consumer.poll(0.1)
                if self.consumer.assignment():
                    self.owns.set()
                else:
                    self.owns.clear()
        finally:
            self.consumer.close()


def test_a_mixed_group_is_described_as_apache_kafka_describes_it(targets: dict[str, Target]) -> None:
    topic, group = unique_name("tool-mixed"), unique_name("tool-mixed")
    both(targets, "topics", ["--bootstrap-server", "{bootstrap}", "--create", "--topic", topic, "--partitions", "2"])
    for target in targets.values():
        producer = Producer({"bootstrap.servers": target.bootstrap})
        for index in range(4):
            producer.produce(topic, value=f"v{index}", partition=index % 2)
        assert producer.flush(30) == 0
    stop = threading.Event()
    members: list[Member] = []
    try:
        classic = {name: Member(target.bootstrap, group, topic, "classic", stop) for name, target in targets.items()}
        members += classic.values()
        for member in classic.values():
            member.start()
        for name, member in classic.items():
            assert member.owns.wait(60), f"the classic member on {name} got no partition"
        consumers = {name: Member(target.bootstrap, group, topic, "consumer", stop)
                     for name, target in targets.items()}
        members += consumers.values()
        for member in consumers.values():
            member.start()
        deadline = time.monotonic() + 90
        while not all(member.owns.is_set() for member in members):
            assert time.monotonic() < deadline, "the mixed groups did not settle with a partition for each member"
            time.sleep(0.2)
        for view in (["--describe", "--members"], ["--describe", "--members", "--verbose"], ["--describe", "--state"]):
            outputs = both_raw(targets, "consumer-groups", [*GROUPS, "--group", group, *view])
            kfk, apache = (sorted(MEMBER_ID.sub("MEMBER", outputs[name]).splitlines()) for name in ("kfk", "apache"))
            assert kfk == apache, view
            # kfk's own tool prints, byte for byte, what Kafka's prints for the group on kfk's broker.
            args = [arg.replace("{bootstrap}", targets["kfk"].bootstrap) for arg in [*GROUPS, "--group", group, *view]]
            ours, theirs = kfk_command("consumer-groups", *args), kafka_tool("consumer-groups", args)
            assert (ours.returncode, ours.stdout) == (0, theirs.stdout), (view, ours.stderr)
        state = lines_with(outputs["kfk"], group)[0].split()
        assert state[-2:] == ["Stable", "2"], state
    finally:
        stop.set()
        for member in members:
            member.join(30)
