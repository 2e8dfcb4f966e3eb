"""Rack-aware standbys (KIP-708) on kfk: three instances of a word count over six partitions, two in zone "a" and one
in zone "b" (client.tag.zone), num.standby.replicas=1 and rack.aware.assignment.tags=zone: every stateful task's
standby runs in the other zone than its active task, so the four tasks active in zone "a" all keep their standbys on
the one instance of zone "b" (the least-loaded placement alone would spread the standbys two per instance)."""

from __future__ import annotations

import time

from kfk.client import Admin, NewTopic
from kfk.streams import KafkaStreams, State
from kfk.streams.processor import TaskId
from tests.streams.conftest import create_input, unique_name
from tests.streams.topologies import wordcount

ZONES = {"first": "a", "second": "a", "third": "b"}
STATEFUL = {TaskId(1, partition) for partition in range(6)}


def test_each_standby_runs_in_another_zone_than_its_active_task(streams_broker, tmp_path) -> None:
    bootstrap = streams_broker.bootstrap_servers
    input_topic, output, application_id = unique_name("lines"), unique_name("counts"), unique_name("zones")
    create_input(bootstrap, input_topic, 6, [(f"k{index}", f"w{index % 9} w{index % 5}") for index in range(60)])
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(output, 6, 1)])
    instances = {name: KafkaStreams(wordcount(input_topic, output), {
        "application.id": application_id, "bootstrap.servers": bootstrap, "state.dir": str(tmp_path / name),
        "default.key.serde": "string", "default.value.serde": "string", "commit.interval.ms": 100,
        "num.standby.replicas": 1, "rack.aware.assignment.tags": "zone", "client.tag.zone": zone})
        for name, zone in ZONES.items()}
    try:
        for streams in instances.values():
            streams.start()
        deadline = time.monotonic() + 90
        while True:
            active = {task: name for name, streams in instances.items()
                      for task in list(streams._threads[0].tasks) if task.subtopology == 1}
            standby = {name: set(streams.standby_updater.tasks) for name, streams in instances.items()}
            settled = (set(active) == STATEFUL and sorted(task for tasks in standby.values() for task in tasks)
                       == sorted(STATEFUL) and all(streams.state is State.RUNNING for streams in instances.values()))
            if settled and all(ZONES[name] != ZONES[active[task]] for name, tasks in standby.items()
                               for task in tasks):
                break
            assert time.monotonic() < deadline, f"actives {active}, standbys {standby}"
            assert all(streams.error is None for streams in instances.values())
            time.sleep(0.2)
        assert standby["third"] == {task for task, name in active.items() if ZONES[name] == "a"}, (
            "zone b's one instance keeps the standbys of every task active in zone a")
    finally:
        for streams in instances.values():
            assert streams.close()
