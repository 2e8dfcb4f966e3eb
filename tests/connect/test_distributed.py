"""`kfk connect distributed`: two kfk workers in one group on a kfk broker run a FileStreamSource → topic →
FileStreamSink pipeline; one is killed -9 and the other takes its connectors and tasks over. The internal topics
hold Kafka's record formats. One broker serves the module.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import pytest

from kfk.client import Admin, Consumer, NewTopic, TopicPartition
from kfk.testing.broker import start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from kfk.testing.apache_kafka import CONNECT_DISTRIBUTED_MAIN_CLASS
from kfk.protocol.messages.describe_groups import DescribeGroupsRequest
from tests.connect.workers import start_java_worker, start_kfk_worker, units_per_worker, wait_for
from tests.integration.wire import connect, request

pytestmark = pytest.mark.integration

STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = start_broker(tmp_path_factory.mktemp("connect-distributed-broker"), dict(TEST_OVERRIDES))
    yield process.bootstrap_servers
    process.stop()


def distributed_properties(bootstrap: str, group: str) -> dict[str, str]:
    # session.timeout.ms at the broker's minimum (6 s) so that a killed worker, and its sink task's consumer, leave
    # their groups soon; a departed worker's work waits 2 s for it to come back (Kafka's default: 5 minutes)
    return {"bootstrap.servers": bootstrap, "group.id": group, "config.storage.topic": f"{group}-configs",
            "offset.storage.topic": f"{group}-offsets", "status.storage.topic": f"{group}-status",
            "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1", "key.converter": STRING_CONVERTER,
            "value.converter": STRING_CONVERTER, "offset.flush.interval.ms": "500", "session.timeout.ms": "6000",
            "heartbeat.interval.ms": "1000", "consumer.session.timeout.ms": "6000",
            "consumer.heartbeat.interval.ms": "1000", "scheduled.rebalance.max.delay.ms": "2000"}


def read_all(bootstrap: str, topic: str) -> list:
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as consumer:
        partitions = [TopicPartition(topic, partition) for partition in consumer.partitions_for(topic)]
        consumer.assign(partitions)
        end = consumer.end_offsets(partitions)
        records: list = []
        while any(consumer.position(partition) < end[partition] for partition in partitions):
            records.extend(consumer.poll(1.0))
        return records


def output_lines(path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_two_workers_split_the_pipeline_and_survive_a_kill(broker, tmp_path):
    group = "connect-kill"
    properties = distributed_properties(broker, group)
    first = start_kfk_worker(tmp_path, properties, [], mode="distributed", name="first")
    second = None
    try:
        second = start_kfk_worker(tmp_path, properties, [], mode="distributed", name="second")
        input_file, output_file = tmp_path / "input.txt", tmp_path / "output.txt"
        lines = [f"line {number}" for number in range(3000)]
        input_file.write_text("".join(line + "\n" for line in lines))
        source = {"connector.class": "FileStreamSource", "file": str(input_file), "topic": "pipeline",
                  "tasks.max": "1"}
        sink = {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                "file": str(output_file), "topics": "pipeline", "tasks.max": "1"}

        def created(worker, name, config):
            status, body = worker.call("POST", "/connectors", {"name": name, "config": config})
            return (status, body) if status != 409 or "rebalance" not in body["message"] else None

        # writes go to the leader whichever worker takes them (and answer 409 during a rebalance)
        assert wait_for(lambda: created(second, "source", source), "source created")[0] == 201
        assert wait_for(lambda: created(first, "sink", sink), "sink created")[0] == 201
        assert wait_for(lambda: created(second, "sink", sink), "sink refused") == (
            409, {"error_code": 409, "message": "Connector sink already exists"})
        assert first.call("GET", "/connectors")[1] == ["sink", "source"] == second.call("GET", "/connectors")[1]

        def placed() -> dict | None:
            statuses = {name: first.call("GET", f"/connectors/{name}/status") for name in ("source", "sink")}
            if any(code != 200 or len(body["tasks"]) != 1 or body["connector"]["state"] != "RUNNING"
                   or body["tasks"][0]["state"] != "RUNNING" for code, body in statuses.values()):
                return None
            return {name: body for name, (_, body) in statuses.items()}

        statuses = wait_for(placed, "both connectors and their tasks running")
        workers = {body["connector"]["worker_id"] for body in statuses.values()} | {
            body["tasks"][0]["worker_id"] for body in statuses.values()}
        assert len(workers) == 2  # eager round robin: one connector and one task on each worker
        assert second.call("GET", "/connectors/source/status")[1] == statuses["source"]
        wait_for(lambda: len(output_lines(output_file)) > 0, "the sink's first lines")

        # kill the worker running the source task; the other one takes everything over
        victim_id = statuses["source"]["tasks"][0]["worker_id"]
        victim, survivor = (first, second) if first.url.endswith(victim_id.rsplit(":", 1)[1]) else (second, first)
        victim.process.kill()
        victim.process.wait()
        more = [f"line {number}" for number in range(3000, 5000)]
        with open(input_file, "a") as handle:
            handle.write("".join(line + "\n" for line in more))
        (survivor_id,) = workers - {victim_id}

        def taken_over() -> bool:
            for name in ("source", "sink"):
                code, body = survivor.call("GET", f"/connectors/{name}/status")
                if code != 200 or body["connector"]["worker_id"] != survivor_id or any(
                        task["worker_id"] != survivor_id or task["state"] != "RUNNING" for task in body["tasks"]):
                    return False
            return True

        wait_for(taken_over, "the survivor running both connectors and both tasks")
        everything = lines + more
        wait_for(lambda: set(output_lines(output_file)) >= set(everything), "every line in the sink's file")
        # at-least-once: every line arrives; a line may arrive twice when the killed worker had sent it but not
        # yet committed its offset (the survivor resumes from the last committed offset)
        counts = Counter(output_lines(output_file))
        assert set(counts) == set(everything)
        assert all(count in (1, 2) for count in counts.values())

        # KIP-875 through the group: stop the source (no tasks left), rewind its offset, read it back from the other
        # worker too
        assert survivor.call_between_rebalances("PUT", "/connectors/source/stop")[0] == 204
        wait_for(lambda: (lambda body: body["connector"]["state"] == "STOPPED" and body["tasks"] == [])(
            survivor.call("GET", "/connectors/source/status")[1]), "the source STOPPED without tasks")
        rewound = [{"partition": {"filename": str(input_file)}, "offset": {"position": 0}}]
        code, body = survivor.call_between_rebalances("PATCH", "/connectors/source/offsets", {"offsets": rewound})
        assert code == 200, body
        assert survivor.call("GET", "/connectors/source/offsets") == (200, {"offsets": rewound})

        # the internal topics hold Kafka's record formats
        configs = {record.key.decode(): record.value for record in read_all(broker, f"{group}-configs")}
        assert json.loads(configs["connector-source"]) == {"properties": {**source, "name": "source"}}
        assert json.loads(configs["commit-source"]) == {"tasks": 0}  # stopped
        assert json.loads(configs["target-state-source"]) == {"state": "PAUSED", "state.v2": "STOPPED"}
        assert json.loads(configs["task-source-0"])["properties"]["file"] == str(input_file)
        offsets = {record.key: record.value for record in read_all(broker, f"{group}-offsets")}
        key = json.dumps(["source", {"filename": str(input_file)}], separators=(",", ":")).encode()
        assert json.loads(offsets[key]) == {"position": 0}
        status_values = {record.key.decode(): json.loads(record.value)
                         for record in read_all(broker, f"{group}-status")}
        assert set(status_values["status-task-source-0"]) == {"state", "trace", "worker_id", "generation", "version"}
        with Consumer({"bootstrap.servers": broker}) as consumer:
            assert [len(consumer.partitions_for(f"{group}-{kind}")) for kind in ("configs", "offsets", "status")] \
                == [1, 25, 5]
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_three_workers_balance_the_work_and_rebalance_when_one_stops(broker, tmp_path):
    """Three workers, three source connectors of one task each: every worker runs two of the six (a connector and
    a task, as Kafka's round robin deals them); one worker stops, and its connector and task move to the other
    two, which then run three each, and every source goes on producing."""
    group = "connect-three"
    properties = distributed_properties(broker, group)
    workers = [start_kfk_worker(tmp_path, properties, [], mode="distributed", name=f"worker{index}")
               for index in range(3)]
    try:
        files = {f"source{index}": tmp_path / f"input{index}.txt" for index in range(3)}
        for name, path in files.items():
            path.write_text("".join(f"{name} line {number}\n" for number in range(100)))
            config = {"connector.class": "FileStreamSource", "file": str(path), "topic": f"{group}-{name}",
                      "tasks.max": "1"}
            wait_for(lambda: (lambda answer: answer if answer[0] == 201 else None)(
                workers[0].call("POST", "/connectors", {"name": name, "config": config})), f"{name} created")

        ids = {worker.url.removeprefix("http://") for worker in workers}
        balanced = wait_for(lambda: (lambda found: found if found and set(found) == ids else None)(
            units_per_worker(workers[1], files)), "six units on three workers")
        assert sorted(balanced.values()) == [2, 2, 2], balanced

        stopped, remaining = workers[2], workers[:2]
        stopped.stop()
        left = ids - {stopped.url.removeprefix("http://")}
        rebalanced = wait_for(lambda: (lambda found: found if found and set(found) == left else None)(
            units_per_worker(remaining[0], files)), "the stopped worker's work moved to the other two")
        assert sorted(rebalanced.values()) == [3, 3], rebalanced
        for name, path in files.items():
            with open(path, "a") as handle:
                handle.write(f"{name} after the rebalance\n")
        for name in files:
            wait_for(lambda: any(record.value == f"{name} after the rebalance".encode()
                                 for record in read_all(broker, f"{group}-{name}")), f"{name} producing again")
    finally:
        for worker in workers:
            worker.stop()


def status_history(bootstrap: str, group: str, key: str) -> list[tuple[str, str]]:
    """Every (state, worker id) written for one status key, oldest first."""
    return [(value["state"], value["worker_id"]) for record in read_all(bootstrap, f"{group}-status")
            if record.key == key.encode() and (value := json.loads(record.value)) is not None]


def test_cooperative_rebalances_move_only_what_must_move(broker, tmp_path):
    """Incremental cooperative rebalancing (KIP-415, the group's `compatible` protocol): a worker that joins takes
    half the tasks while the other keeps running the rest (their statuses never leave RUNNING); a worker killed -9
    leaves its tasks unassigned for scheduled.rebalance.max.delay.ms rather than piling them on the survivor, and
    the worker started in its place gets them when the delay is over."""
    group = "connect-cooperative"
    properties = {**distributed_properties(broker, group), "scheduled.rebalance.max.delay.ms": "12000",
                  "connect.protocol": "compatible"}  # the other tests' groups use sessioned, the default
    with Admin({"bootstrap.servers": broker}) as admin:
        admin.create_topics([NewTopic(f"{group}-input", 4, 1)])
    sink = {"connector.class": "FileStreamSink", "file": str(tmp_path / "out.txt"), "topics": f"{group}-input",
            "tasks.max": "4"}
    first = start_kfk_worker(tmp_path, properties, [], mode="distributed", name="first")
    workers = [first]
    try:
        assert first.call_between_rebalances("POST", "/connectors", {"name": "sink", "config": sink})[0] == 201
        first_id = first.url.removeprefix("http://")
        assert wait_for(lambda: units_per_worker(first, ["sink"]), "the sink on the first worker") == {first_id: 5}

        second = start_kfk_worker(tmp_path, properties, [], mode="distributed", name="second")
        workers.append(second)
        second_id = second.url.removeprefix("http://")
        assert wait_for(lambda: (lambda found: found if found and len(found) == 2 else None)(
            units_per_worker(first, ["sink"])), "the tasks shared") == {first_id: 3, second_id: 2}
        tasks = {task["id"]: task["worker_id"] for task in first.call("GET", "/connectors/sink/status")[1]["tasks"]}
        stayed = [task for task, owner in tasks.items() if owner == first_id]
        moved = [task for task, owner in tasks.items() if owner == second_id]
        for task in stayed:  # never stopped: an eager rebalance would have written UNASSIGNED in between
            assert set(status_history(broker, group, f"status-task-sink-{task}")) == {("RUNNING", first_id)}
        for task in moved:
            assert status_history(broker, group, f"status-task-sink-{task}")[-3:] == [
                ("RUNNING", first_id), ("UNASSIGNED", first_id), ("RUNNING", second_id)]

        # one task restarted through either worker: it is forwarded to the leader, and by it to the task's worker
        for task, through in ((moved[0], first), (stayed[0], second)):
            key = f"status-task-sink-{task}"
            before = status_history(broker, group, key)
            assert through.call_between_rebalances("POST", f"/connectors/sink/tasks/{task}/restart") == (204, None)
            wait_for(lambda: status_history(broker, group, key) == [*before, before[-1]], f"task {task} restarted")
        assert first.call("POST", "/connectors/sink/tasks/9/restart") == (
            404, {"error_code": 404, "message": "Task sink-9 not found"})

        second.process.kill()
        second.process.wait()
        killed = time.monotonic()
        third = start_kfk_worker(tmp_path, properties, [], mode="distributed", name="third")
        workers.append(third)
        third_id = third.url.removeprefix("http://")
        assert wait_for(lambda: (lambda found: found if found and set(found) == {first_id, third_id} else None)(
            units_per_worker(first, ["sink"])), "the killed worker's tasks on its replacement") == {
            first_id: 3, third_id: 2}
        # the session timeout (6 s) plus the delay (12 s) at least
        assert time.monotonic() - killed > 12
        for task in moved:  # held back for the killed worker's return, never run by the survivor meanwhile
            history = status_history(broker, group, f"status-task-sink-{task}")
            assert history[-1] == ("RUNNING", third_id)
            assert ("RUNNING", first_id) not in history[history.index(("RUNNING", second_id)):]
    finally:
        for worker in workers:
            worker.stop()


@pytest.fixture(scope="module")
def java_group(broker, tmp_path_factory):
    """Properties of a Java connect-distributed 4.3.1 worker group sharing its offsets topic with a kfk group."""
    directory = tmp_path_factory.mktemp("connect-java-distributed")
    return directory, {**distributed_properties(broker, "java-connect"), "offset.storage.topic": "shared-offsets"}


def topic_values(bootstrap: str, topic: str) -> list[str]:
    return [record.value.decode() for record in read_all(bootstrap, topic)]


def test_java_and_kfk_resume_from_each_others_offsets_topic(broker, java_group, tmp_path):
    """kfk's distributed worker writes source offsets that Java's connect-distributed resumes from, and the
    reverse: both keep them in the same topic in the same record format."""
    directory, java_properties = java_group
    kfk_properties = {**distributed_properties(broker, "kfk-connect"), "offset.storage.topic": "shared-offsets"}
    input_file = tmp_path / "resume.txt"
    first_lines = [f"first {number}" for number in range(100)]
    input_file.write_text("".join(line + "\n" for line in first_lines))
    connector = {"connector.class": "FileStreamSource", "file": str(input_file), "tasks.max": "1"}

    def run_until(worker, topic: str, expected: list[str]) -> None:
        code, body = worker.call_between_rebalances("PUT", "/connectors/resume/config", {**connector, "topic": topic})
        assert code in (200, 201), body
        wait_for(lambda: topic_values(broker, topic) == expected if topic in worker_topics() else False,
                 f"{topic} holding {len(expected)} lines")
        key = json.dumps(["resume", {"filename": str(input_file)}], separators=(",", ":")).encode()
        position = len(input_file.read_text())
        wait_for(lambda: {record.key: record.value for record in read_all(broker, "shared-offsets")}.get(key)
                 == b'{"position":%d}' % position, "the offset committed")

    def worker_topics() -> set[str]:
        with Consumer({"bootstrap.servers": broker}) as consumer:
            return set(consumer.list_topics())

    kfk = start_kfk_worker(tmp_path, kfk_properties, [], mode="distributed", name="kfk-resume")
    try:
        run_until(kfk, "from-kfk", first_lines)
    finally:
        kfk.stop()
    second_lines = [f"second {number}" for number in range(50)]
    with open(input_file, "a") as handle:
        handle.write("".join(line + "\n" for line in second_lines))
    java = start_java_worker(directory, java_properties, [], main_class=CONNECT_DISTRIBUTED_MAIN_CLASS,
                             name="java-distributed")
    try:
        run_until(java, "from-java", second_lines)  # Java starts where kfk's offset says
    finally:
        java.stop()
    third_lines = [f"third {number}" for number in range(30)]
    with open(input_file, "a") as handle:
        handle.write("".join(line + "\n" for line in third_lines))
    kfk = start_kfk_worker(tmp_path, kfk_properties, [], mode="distributed", name="kfk-resumed")
    try:
        run_until(kfk, "from-kfk", first_lines + third_lines)  # and kfk where Java's says
    finally:
        kfk.stop()


def group_protocol(bootstrap: str, group: str) -> str:
    """The protocol the group coordinator chose for a (stable) group: DescribeGroups."""
    sock = connect(bootstrap)
    try:
        (described,) = request(sock, DescribeGroupsRequest(groups=[group]), 5).groups
    finally:
        sock.close()
    assert (described.error_code, described.protocol_type) == (0, "connect"), described
    return described.protocol_data


@pytest.mark.parametrize("java_protocol, group_protocol_chosen, leader", [
    ("eager", "default", "kfk"), ("sessioned", "sessioned", "kfk"), ("sessioned", "sessioned", "java")])
def test_a_java_worker_and_a_kfk_worker_share_one_group(broker, java_group, tmp_path, java_protocol,
                                                         group_protocol_chosen, leader):
    """A Java worker and a kfk worker in one group: the group coordinator picks the protocol both offer (Java's
    eager `default`, or both runtimes' default, the incremental cooperative `sessioned`), the leader's assignment is
    read by the other runtime (the worker started first leads: a Java follower hands its connector's task configs to
    the kfk leader through the internal REST endpoint, signed with the session key the kfk leader wrote when
    sessioned; a kfk follower reads the Java leader's incremental assignments and session key), each reads the
    configs and statuses the other wrote, and both answer the REST API alike, unsigned internal requests
    included."""
    directory, _ = java_group
    group = f"mixed-connect-{java_protocol}-{leader}"
    properties = distributed_properties(broker, group)
    java = kfk = None

    def start(runtime: str) -> None:
        nonlocal java, kfk
        if runtime == "kfk":
            kfk = start_kfk_worker(tmp_path, properties, [], mode="distributed", name="kfk-mixed")
        else:
            java = start_java_worker(directory, {**properties, "connect.protocol": java_protocol}, [],
                                     main_class=CONNECT_DISTRIBUTED_MAIN_CLASS, name=f"java-mixed-{group}")

    try:
        start(leader)
        start("java" if leader == "kfk" else "kfk")
        input_file, output_file = tmp_path / "mixed.txt", tmp_path / "mixed-output.txt"
        lines = [f"mixed {number}" for number in range(500)]
        input_file.write_text("".join(line + "\n" for line in lines))
        connectors = {
            "mixed-source": {"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                             "file": str(input_file), "topic": group, "tasks.max": "1"},
            "mixed-sink": {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                           "file": str(output_file), "topics": group, "tasks.max": "1"}}
        for (name, config), worker in zip(connectors.items(), (kfk, java)):
            code, body = worker.call_between_rebalances("POST", "/connectors", {"name": name, "config": config})
            assert code == 201, body
        wait_for(lambda: sorted(output_lines(output_file)) == sorted(lines), "every line in the sink's file")

        def settled() -> dict | None:
            statuses = {}
            for name in connectors:
                answers = [worker.call("GET", f"/connectors/{name}/status") for worker in (java, kfk)]
                if answers[0] != answers[1] or answers[0][0] != 200 or len(answers[0][1]["tasks"]) != 1 or any(
                        part["state"] != "RUNNING" for part in [answers[0][1]["connector"], *answers[0][1]["tasks"]]):
                    return None
                statuses[name] = answers[0][1]
            return statuses

        statuses = wait_for(settled, "both workers reporting the same statuses")
        assert group_protocol(broker, group) == group_protocol_chosen
        if java_protocol == "sessioned":  # Kafka's answers to internal requests without a valid signature
            tasks = [{"task.class": "x"}]
            unsigned = java.call("POST", "/connectors/mixed-source/tasks", tasks)
            assert unsigned == (400, {"error_code": 400, "message": "Internal request missing required signature"})
            assert kfk.call("POST", "/connectors/mixed-source/tasks", tasks) == unsigned
            headers = {"X-Connect-Authorization": "AAAA", "X-Connect-Request-Signature-Algorithm": "HmacSHA256"}
            forged = java.call("POST", "/connectors/mixed-source/tasks", tasks, headers)
            assert forged == (403, {"error_code": 403, "message": "Internal request contained invalid signature."})
            assert kfk.call("POST", "/connectors/mixed-source/tasks", tasks, headers) == forged
        owners = {status["connector"]["worker_id"] for status in statuses.values()}
        assert owners == {java.url.removeprefix("http://"), kfk.url.removeprefix("http://")}
        for path in ("/connectors", "/connectors?expand=status&expand=info", "/connectors/mixed-source/config",
                     "/connectors/mixed-sink/tasks", "/connectors/missing", "/connectors/missing/status"):
            assert java.call("GET", path) == kfk.call("GET", path), path
        # errors of writes, in Kafka's words (kfk's worker answers or forwards to the leader)
        for body in ({"name": "mixed-sink", "config": connectors["mixed-sink"]},
                     {"name": "bad", "config": {"connector.class": "FileStreamSource"}}):
            assert java.call("POST", "/connectors", body) == kfk.call("POST", "/connectors", body), body
        # target states written by one runtime are applied by the other (one task of each runs on each worker)
        for action, state in (("pause", "PAUSED"), ("resume", "RUNNING")):
            for name in connectors:
                assert kfk.call_between_rebalances("PUT", f"/connectors/{name}/{action}")[0] == 202

            def applied() -> bool:
                for name in connectors:
                    answers = [worker.call("GET", f"/connectors/{name}/status")[1] for worker in (java, kfk)]
                    if answers[0] != answers[1] or any(part["state"] != state for part in [
                            answers[0]["connector"], *answers[0]["tasks"]]):
                        return False
                return True

            wait_for(applied, f"every connector and task {state}")
        # a restart through the group: Kafka's restart-connector record, read by both runtimes
        code, body = kfk.call_between_rebalances("POST", "/connectors/mixed-source/restart?includeTasks=true")
        assert code == 202 and body["connector"]["state"] == "RESTARTING", body
        assert [task["state"] for task in body["tasks"]] == ["RESTARTING"]
        wait_for(applied, "every connector and task RUNNING after the restart")
    finally:
        for worker in (java, kfk):
            if worker is not None:
                worker.stop()


def test_a_worker_stops_in_bounded_time_when_its_cluster_is_gone(tmp_path):
    """SIGTERM to a worker whose Kafka cluster died: it stops its tasks and tries to leave the group for at most
    Kafka's herder stop timeout (14 s), then exits, instead of waiting out every write's own timeout (over two
    minutes)."""
    own_broker = start_broker(tmp_path / "broker", dict(TEST_OVERRIDES))
    worker = start_kfk_worker(tmp_path, distributed_properties(own_broker.bootstrap_servers, "connect-orphan"), [],
                              mode="distributed")
    try:
        source = tmp_path / "input.txt"
        source.write_text("a line\n" * 100)
        config = {"connector.class": "FileStreamSource", "file": str(source), "topic": "orphan"}
        wait_for(lambda: (lambda answer: answer if answer[0] == 201 else None)(
            worker.call("POST", "/connectors", {"name": "orphan", "config": config})), "the connector created")
        worker.wait_running("orphan")
        own_broker.kill()
        started = time.monotonic()
        worker.process.terminate()
        worker.process.wait(90)
        assert time.monotonic() - started < 45, worker.log_path.read_text()[-3000:]
        assert "did not finish within 14 s" in worker.log_path.read_text()
    finally:
        worker.stop()
        own_broker.stop()
