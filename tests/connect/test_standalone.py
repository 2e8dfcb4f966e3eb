"""`kfk connect standalone` beside Apache Kafka's connect-standalone (Connect 4.3.1), on one kfk broker.

Both workers run the same FileStreamSource connectors on the same file (JsonConverter with and without schemas):
the records' bytes must be equal, the offsets files must hold the same entries, and kfk must resume from the
offsets file Java wrote. The REST API is compared call by call (status codes, JSON shapes, messages). One Java
worker serves the module.
"""

from __future__ import annotations

import json
import shutil

import pytest

from kfk.client import Producer
from kfk.connect.errors import ConnectException
from kfk.connect.offsets import read_java_hashmap
from kfk.testing.broker import start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.connect.workers import read_topic, start_java_worker, start_kfk_worker, wait_for

pytestmark = pytest.mark.integration

LINES = ["line one", "line two", "tab\there", "quote \" and \\", "bell \x07", ""]
#: Kafka's positions count characters but a restart skips bytes, so only ASCII files resume exactly (in both
#: runtimes): non-ASCII text is read by the other connector, whose offsets no test resumes from.
UNICODE_LINES = ["ünïcode ✓", "emoji 🙂 counts twice", "crlf ended"]
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = start_broker(tmp_path_factory.mktemp("connect-broker"), dict(TEST_OVERRIDES))
    yield process.bootstrap_servers
    process.stop()


def worker_properties(bootstrap: str, offsets_file) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap, "key.converter": JSON_CONVERTER, "value.converter": JSON_CONVERTER,
            "offset.storage.file.filename": str(offsets_file), "offset.flush.interval.ms": "500"}


def source_connectors(directory, prefix: str) -> list[dict[str, str]]:
    return [
        {"name": "file-source-schemas", "connector.class": "FileStreamSource", "file": str(directory / "input.txt"),
         "topic": f"{prefix}-schemas"},
        {"name": "file-source-plain", "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
         "file": str(directory / "unicode.txt"), "topic": f"{prefix}-plain", "value.converter": JSON_CONVERTER,
         "value.converter.schemas.enable": "false"},
    ]


def offsets_entries(path) -> dict:
    """The offsets file's entries; none while it is absent, empty or half written (both workers rewrite it in place,
    so a poll can read it mid-write)."""
    try:
        return read_java_hashmap(path.read_bytes()) if path.exists() and path.stat().st_size else {}
    except ConnectException:
        return {}


@pytest.fixture(scope="module")
def workers(broker, tmp_path_factory):
    """A Java worker and a kfk worker, each having read LINES from the same file through both connectors."""
    directory = tmp_path_factory.mktemp("connect-workers")
    input_file = directory / "input.txt"
    input_file.write_text("".join(line + "\n" for line in LINES))
    unicode_text = "".join(line + "\r\n" for line in UNICODE_LINES)
    (directory / "unicode.txt").write_text(unicode_text, newline="")
    java = start_java_worker(directory, worker_properties(broker, directory / "java.offsets"),
                             source_connectors(directory, "java"))
    kfk = None
    try:
        kfk = start_kfk_worker(directory, worker_properties(broker, directory / "kfk.offsets"),
                               source_connectors(directory, "kfk"))
        # positions count UTF-16 characters as Java's String does (the emoji twice)
        positions = {b'{"position":%d}' % len(input_file.read_text()),
                     b'{"position":%d}' % (len(unicode_text.encode("utf-16-le")) // 2)}
        for path in (directory / "java.offsets", directory / "kfk.offsets"):
            wait_for(lambda: set(offsets_entries(path).values()) == positions, f"offsets flushed to {path}")
        yield java, kfk, directory, input_file
    finally:
        if kfk is not None:
            kfk.stop()
        java.stop()


def test_same_records_as_kafkas_worker_with_and_without_schemas(broker, workers):
    for converter, lines in (("schemas", LINES), ("plain", UNICODE_LINES)):
        java_records = read_topic(broker, f"java-{converter}", len(lines))
        kfk_records = read_topic(broker, f"kfk-{converter}", len(lines))
        assert [record.value for record in kfk_records] == [record.value for record in java_records]
        assert [record.key for record in kfk_records] == [None] * len(lines)
        assert len(java_records) == len(lines)
    assert java_records[0].value == '"ünïcode ✓"'.encode()


def test_same_offsets_file_and_kfk_resumes_kafkas(broker, workers, tmp_path):
    java, kfk, directory, input_file = workers
    assert offsets_entries(directory / "kfk.offsets") == offsets_entries(directory / "java.offsets")
    # a second kfk worker starts from Java's offsets file: it emits only the lines appended since
    shutil.copy(directory / "java.offsets", tmp_path / "resumed.offsets")
    connector = {"name": "file-source-schemas", "connector.class": "FileStreamSource", "file": str(input_file),
                 "topic": "resumed"}
    resumed = start_kfk_worker(tmp_path, worker_properties(broker, tmp_path / "resumed.offsets"), [connector])
    try:
        resumed.wait_running("file-source-schemas")
        with open(input_file, "a") as handle:
            handle.write("appended after Kafka's worker\n")
        records = read_topic(broker, "resumed", 1)
        assert [record.value for record in records] == \
            [b'{"schema":{"type":"string","optional":false},"payload":"appended after Kafka\'s worker"}']
    finally:
        resumed.stop()


def without_worker(body):
    """A status body without what differs between any two workers: the worker's address and the plugin version."""
    if isinstance(body, dict) and "connector" in body:
        for part in [body["connector"], *body.get("tasks", [])]:
            part.pop("worker_id", None), part.pop("version", None)
    return body


def shape(value):
    """The JSON shape: keys and value types, recursively (lists by their first element)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


def test_rest_api_answers_as_kafkas(workers):
    java, kfk, directory, _ = workers
    both = (java, kfk)
    for path in ("/connectors/file-source-plain/status", "/connectors?expand=status&expand=info",
                 "/connectors/file-source-plain/tasks", "/connectors/file-source-plain",
                 "/connectors/file-source-plain/topics", "/"):
        (java_status, java_body), (kfk_status, kfk_body) = (worker.call("GET", path) for worker in both)
        assert (kfk_status, shape(kfk_body)) == (java_status, shape(java_body)), path
    for path in ("/connectors/file-source-plain/offsets", "/connectors/nope", "/connectors/nope/status",
                 "/connector-plugins", "/no/such/path"):
        (java_status, java_body), (kfk_status, kfk_body) = (worker.call("GET", path) for worker in both)
        if path == "/connector-plugins":
            for plugin in java_body + kfk_body:
                plugin.pop("version")
            # kfk ships Confluent's JDBC connectors too; the Java worker has only Kafka's own
            kfk_body = [plugin for plugin in kfk_body if not plugin["class"].startswith("io.confluent.connect.jdbc.")]
        assert (kfk_status, kfk_body) == (java_status, java_body), path
    # errors of writes, in Kafka's words
    calls = [("POST", "/connectors", {"name": "file-source-plain", "config": {"connector.class": "FileStreamSource",
                                                                              "topic": "x"}}),
             ("POST", "/connectors", {"name": "bad", "config": {"connector.class": "FileStreamSource"}}),
             ("DELETE", "/connectors/file-source-plain/offsets", None),
             ("PATCH", "/connectors/nope/offsets", {"offsets": []}),
             ("PUT", "/connector-plugins/Nope/config/validate", {})]
    for method, path, body in calls:
        assert kfk.call(method, path, body) == java.call(method, path, body), (method, path)
    # config validation: the same keys in the same order, with the same errors
    request = {"connector.class": "FileStreamSource", "batch.size": "x"}
    _, java_infos = java.call("PUT", "/connector-plugins/FileStreamSource/config/validate", request)
    _, kfk_infos = kfk.call("PUT", "/connector-plugins/FileStreamSource/config/validate", request)
    assert (kfk_infos["error_count"], kfk_infos["groups"]) == (java_infos["error_count"], java_infos["groups"])
    summary = [(item["definition"]["name"], item["definition"]["type"], item["definition"]["required"],
                item["value"]["errors"]) for item in java_infos["configs"]]
    assert [(item["definition"]["name"], item["definition"]["type"], item["definition"]["required"],
             item["value"]["errors"]) for item in kfk_infos["configs"]] == summary
    assert shape(kfk_infos) == shape(java_infos)


def test_lifecycle_and_offsets_api_as_kafkas(broker, workers, tmp_path):
    java, kfk, _, _ = workers
    config = {"connector.class": "FileStreamSource", "file": str(tmp_path / "absent.txt"), "topic": "probe"}
    for worker in (java, kfk):
        status, info = worker.call("PUT", "/connectors/probe/config", config)
        assert (status, info["type"], info["tasks"]) == (201, "source", [{"connector": "probe", "task": 0}])
        assert worker.call("PUT", "/connectors/probe/config", config)[0] == 200
        worker.wait_running("probe")
    steps = [("PUT", "/connectors/probe/pause", None), ("PUT", "/connectors/probe/resume", None),
             ("PATCH", "/connectors/probe/config", {"batch.size": "10", "tasks.max": None}),
             ("GET", "/connectors/probe/config", None),
             ("PATCH", "/connectors/nope/config", {"batch.size": "10"}),
             ("POST", "/connectors/probe/restart", None),
             ("POST", "/connectors/probe/restart?includeTasks=true&onlyFailed=true", None),
             ("PUT", "/connectors/probe/stop", None),
             ("GET", "/connectors/probe/status", None),
             ("PATCH", "/connectors/probe/offsets",
              {"offsets": [{"partition": {"filename": "/f"}, "offset": {"position": 9}}]}),
             ("GET", "/connectors/probe/offsets", None),
             ("PATCH", "/connectors/probe/offsets", {"offsets": [{"partition": {"file": "/f"},
                                                                  "offset": {"position": 9}}]}),
             ("PATCH", "/connectors/probe/offsets", {"offsets": [{"partition": {"filename": "/f"},
                                                                  "offset": {"position": -1}}]}),
             ("PATCH", "/connectors/probe/offsets", {}),
             ("DELETE", "/connectors/probe/offsets", None), ("GET", "/connectors/probe/offsets", None),
             ("POST", "/connectors/probe/tasks/5/restart", None),
             ("DELETE", "/connectors/probe", None), ("GET", "/connectors/probe", None)]
    for method, path, body in steps:
        java_status, java_body = java.call(method, path, body)
        kfk_status, kfk_body = kfk.call(method, path, body)
        assert (kfk_status, without_worker(kfk_body)) == (java_status, without_worker(java_body)), (method, path)


def test_failed_task_has_its_trace_and_tolerated_errors_go_to_the_dead_letter_queue(broker, workers, tmp_path):
    _, kfk, _, _ = workers
    with Producer({"bootstrap.servers": broker}) as producer:
        for value in (b'{"schema":{"type":"string","optional":false},"payload":"good"}', b"not json"):
            producer.send("sink-input", value, headers=[("origin", b"test")])
        producer.flush()
    strict = {"connector.class": "FileStreamSink", "topics": "sink-input", "file": str(tmp_path / "strict.txt")}
    assert kfk.call("PUT", "/connectors/strict/config", strict)[0] == 201

    def failed():
        body = kfk.call("GET", "/connectors/strict/status")[1]
        return body if body["tasks"] and body["tasks"][0]["state"] == "FAILED" else None
    status = wait_for(failed, "the strict sink's task to fail")
    assert "DataException" in status["tasks"][0]["trace"]
    assert status["connector"]["state"] == "RUNNING"
    tolerant = {**strict, "file": str(tmp_path / "tolerant.txt"), "errors.tolerance": "all",
                "errors.deadletterqueue.topic.name": "sink-dlq", "errors.deadletterqueue.topic.replication.factor": "1",
                "errors.deadletterqueue.context.headers.enable": "true", "errors.log.enable": "true"}
    assert kfk.call("PUT", "/connectors/tolerant/config", tolerant)[0] == 201
    kfk.wait_running("tolerant")
    [dead] = read_topic(broker, "sink-dlq", 1)
    headers = dict(dead.headers)
    assert dead.value == b"not json"
    assert headers["origin"] == b"test"
    assert (headers["__connect.errors.topic"], headers["__connect.errors.partition"],
            headers["__connect.errors.offset"], headers["__connect.errors.connector.name"],
            headers["__connect.errors.task.id"], headers["__connect.errors.stage"]) == (
        b"sink-input", b"0", b"1", b"tolerant", b"0", b"VALUE_CONVERTER")
    assert b"DataException" in headers["__connect.errors.exception.class.name"]
    wait_for(lambda: (tmp_path / "tolerant.txt").exists() and (tmp_path / "tolerant.txt").read_text() == "good\n",
             "the good record in the sink's file")
    for name in ("strict", "tolerant"):
        assert kfk.call("DELETE", f"/connectors/{name}")[0] == 204


def test_file_sink_writes_what_kafkas_writes_and_reports_its_offsets_as_kafka(broker, workers, tmp_path):
    java, kfk, _, _ = workers
    outputs = {}
    for worker, name in ((java, "java-file-sink"), (kfk, "kfk-file-sink")):
        outputs[name] = tmp_path / f"{name}.txt"
        config = {"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "topics": "java-plain",
                  "file": str(outputs[name]), "value.converter": JSON_CONVERTER,
                  "value.converter.schemas.enable": "false"}
        assert worker.call("PUT", f"/connectors/{name}/config", config)[0] == 201
    expected = "".join(line + "\n" for line in UNICODE_LINES)
    for name, output in outputs.items():
        wait_for(lambda: output.exists() and output.read_text() == expected, f"{name}'s file")

    def committed(worker, name):
        body = worker.call("GET", f"/connectors/{name}/offsets")[1]
        return body if body["offsets"] else None
    java_offsets = wait_for(lambda: committed(java, "java-file-sink"), "Java's sink offsets")
    kfk_offsets = wait_for(lambda: committed(kfk, "kfk-file-sink"), "kfk's sink offsets")
    assert kfk_offsets == java_offsets == {"offsets": [{"partition": {"kafka_topic": "java-plain",
                                                                      "kafka_partition": 0},
                                                        "offset": {"kafka_offset": len(UNICODE_LINES)}}]}
    # KIP-875 on a stopped sink: alter, read back, reset; Kafka's answers
    answers = {}
    for worker, name in ((java, "java-file-sink"), (kfk, "kfk-file-sink")):
        partition = {"kafka_topic": "java-plain", "kafka_partition": 0}
        answers[name] = [
            worker.call("PATCH", f"/connectors/{name}/offsets", {"offsets": [{"partition": partition,
                                                                              "offset": {"kafka_offset": 1}}]}),
            worker.call("PUT", f"/connectors/{name}/stop"),
            worker.call("PATCH", f"/connectors/{name}/offsets", {"offsets": [{"partition": partition,
                                                                              "offset": {"kafka_offset": 1}}]}),
            worker.call("GET", f"/connectors/{name}/offsets"),
            worker.call("PATCH", f"/connectors/{name}/offsets", {"offsets": [{"partition": {"kafka_topic": "x"},
                                                                              "offset": {"kafka_offset": 1}}]}),
            worker.call("DELETE", f"/connectors/{name}/offsets"),
            worker.call("GET", f"/connectors/{name}/offsets"),
            worker.call("DELETE", f"/connectors/{name}"),
        ]
    assert json.loads(json.dumps(answers["kfk-file-sink"]).replace("kfk-file-sink", "java-file-sink")) == \
        json.loads(json.dumps(answers["java-file-sink"]))
