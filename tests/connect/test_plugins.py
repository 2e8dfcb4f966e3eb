"""A third-party Python plugin found through its entry point, run by the worker with offsets and flushes. A worker
stopped by SIGTERM stops its tasks first (Kafka's shutdown hook): what a source task's poll() returns as it is stopped
is delivered and its offset committed, as Kafka's worker sends the batch a poll returned whether or not it is
stopping and then makes its final offset commit."""

import os
from pathlib import Path

import pytest

from kfk.testing.broker import start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from kfk.client import Consumer, TopicPartition
from tests.connect.workers import read_topic, start_kfk_worker, wait_for

pytestmark = pytest.mark.integration

PLUGIN_DIRECTORY = Path(__file__).parent / "plugin_example"


@pytest.fixture
def plugin_path(monkeypatch):
    """The example plugin's directory on the worker's path, as `pip install` would put the package."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(PLUGIN_DIRECTORY),
                                                                   os.environ.get("PYTHONPATH")])))


def test_entry_point_plugins_run_and_resume_from_their_offsets(plugin_path, tmp_path_factory):
    directory = tmp_path_factory.mktemp("plugins")
    broker = start_broker(directory / "broker", dict(TEST_OVERRIDES))
    worker_config = {"bootstrap.servers": broker.bootstrap_servers,
                     "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                     "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                     "value.converter.schemas.enable": "false",
                     "offset.storage.file.filename": str(directory / "offsets"), "offset.flush.interval.ms": "300"}
    source = {"name": "counter", "connector.class": "example.CounterSource", "topic": "counts", "limit": "5"}
    sink = {"name": "collector", "connector.class": "example.CollectingSink", "topics": "counts",
            "file": str(directory / "collected.txt")}
    stops = {"name": "stops", "connector.class": "example.StopSource", "topic": "stops"}
    try:
        worker = start_kfk_worker(directory, worker_config, [source, sink, stops])
        try:
            plugins = worker.call("GET", "/connector-plugins")[1]
            assert {"class": "example.CounterSource", "type": "source"} in [
                {key: plugin[key] for key in ("class", "type")} for plugin in plugins]
            expected = "".join(f"label-{n}={n}\n" for n in range(5))
            wait_for(lambda: (directory / "collected.txt").exists()
                     and (directory / "collected.txt").read_text() == expected, "the sink's flushed lines")
            assert [record.value for record in read_topic(broker.bootstrap_servers, "counts", 5)] == \
                [b'{"n":%d,"label":"label-%d"}' % (n, n) for n in range(5)]
            wait_for(lambda: worker.call("GET", "/connectors/counter/offsets")[1]["offsets"] ==
                     [{"partition": {"counter": "main"}, "offset": {"next": 5}}], "the counter's offset")
            # the stop source's second poll is waiting for stop() once its first record is on the topic
            assert [record.key for record in read_topic(broker.bootstrap_servers, "stops", 1)] == [b"first-0"]
        finally:
            worker.stop()
        # a new worker on the same offsets file counts on from 5 (the limit raised), never from 0; the stop source goes
        # on after the record it returned when stopped
        worker = start_kfk_worker(directory, worker_config, [{**source, "limit": "7"}, stops])
        try:
            records = read_topic(broker.bootstrap_servers, "counts", 7)
            assert [record.key for record in records] == [f"label-{n}".encode() for n in range(7)]
            assert len(read_topic(broker.bootstrap_servers, "stops", 3)) == 3
        finally:
            worker.stop()
        expected = [b"first-0", b"at-stop-1", b"first-2", b"at-stop-3"]
        assert [record.key for record in read_topic(broker.bootstrap_servers, "stops", 4)] == expected
        with Consumer({"bootstrap.servers": broker.bootstrap_servers}) as consumer:
            assert consumer.end_offsets([TopicPartition("stops", 0)]) == {TopicPartition("stops", 0): 4}
    finally:
        broker.stop()
