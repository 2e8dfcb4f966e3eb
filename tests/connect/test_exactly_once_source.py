"""Exactly-once source (KIP-618) on kfk's distributed workers: two workers with exactly.once.source.support=enabled
run FileStreamSource over 100,000 lines; the worker running the source task is killed -9 mid-way (an open
transaction left behind) and the other takes the task over, fencing the dead one's transactional producer. Read
with read_committed, the topic then holds every line exactly once, in order; the offsets went to the offsets topic
inside the same transactions."""

from __future__ import annotations

import pytest

from kfk.client import Admin, Consumer, NewTopic, TopicPartition
from kfk.testing.broker import start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.connect.test_distributed import distributed_properties
from tests.connect.workers import start_kfk_worker, wait_for

pytestmark = pytest.mark.integration

FIRST, SECOND = 60_000, 40_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = start_broker(tmp_path_factory.mktemp("connect-eos-broker"), dict(TEST_OVERRIDES))
    yield process.bootstrap_servers
    process.stop()


def committed_values(bootstrap: str, topic: str) -> list[bytes]:
    with Consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed"}) as consumer:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        end = consumer.end_offsets([partition])[partition]  # the last stable offset, read_committed
        values: list[bytes] = []
        while consumer.position(partition) < end:
            values.extend(record.value for record in consumer.poll(0.5))
        return values


def test_a_killed_workers_source_task_resumes_without_duplicates(broker, tmp_path):
    group = "connect-eos"
    properties = {**distributed_properties(broker, group), "exactly.once.source.support": "enabled"}
    with Admin({"bootstrap.servers": broker}) as admin:
        assert admin.create_topics([NewTopic("eos-lines", 1, 1)]) == {"eos-lines": None}
    input_file = tmp_path / "input.txt"
    lines = [f"line {number}" for number in range(FIRST + SECOND)]
    input_file.write_text("".join(line + "\n" for line in lines[:FIRST]))
    workers = [start_kfk_worker(tmp_path, properties, [], mode="distributed", name=name)
               for name in ("first", "second")]
    try:
        source = {"connector.class": "FileStreamSource", "file": str(input_file), "topic": "eos-lines",
                  "tasks.max": "1", "batch.size": "500", "exactly.once.support": "required"}

        def created():
            status, body = workers[0].call("POST", "/connectors", {"name": "source", "config": source})
            return (status, body) if status != 409 or "rebalance" not in body["message"] else None

        assert wait_for(created, "source created")[0] == 201

        def task_worker() -> str | None:
            code, body = workers[0].call("GET", "/connectors/source/status")
            if code != 200 or not body["tasks"] or body["tasks"][0]["state"] != "RUNNING":
                return None
            return body["tasks"][0]["worker_id"]

        victim_id = wait_for(task_worker, "the source task running")
        wait_for(lambda: len(committed_values(broker, "eos-lines")) >= 5_000, "5,000 lines committed")
        victim = next(worker for worker in workers if worker.url.endswith(victim_id.rsplit(":", 1)[1]))
        survivor = next(worker for worker in workers if worker is not victim)
        victim.process.kill()
        victim.process.wait()
        with open(input_file, "a") as handle:
            handle.write("".join(line + "\n" for line in lines[FIRST:]))

        def taken_over() -> bool:
            code, body = survivor.call("GET", "/connectors/source/status")
            return code == 200 and bool(body["tasks"]) and body["tasks"][0]["state"] == "RUNNING" and \
                body["tasks"][0]["worker_id"] != victim_id

        wait_for(taken_over, "the survivor running the source task", timeout=120)
        wait_for(lambda: len(committed_values(broker, "eos-lines")) >= len(lines), "every line committed",
                 timeout=180)
        assert committed_values(broker, "eos-lines") == [line.encode() for line in lines]
        # The offset went through the same transactions: the last one read back is the end of the file.
        code, body = survivor.call("GET", "/connectors/source/offsets")
        assert code == 200, body
        assert body["offsets"] == [{"partition": {"filename": str(input_file)},
                                    "offset": {"position": len("".join(line + "\n" for line in lines))}}]
        # The task's transactional id is Kafka's <group.id>-<connector>-<task>; the survivor's producer took it
        # over with a new epoch, which fenced the dead worker's.
        with Admin({"bootstrap.servers": broker}) as admin:
            described = admin.describe_transactions([f"{group}-source-0"])[f"{group}-source-0"]
        assert described.state == "CompleteCommit" and described.producer_epoch >= 1, described
    finally:
        for worker in workers:
            worker.stop()
