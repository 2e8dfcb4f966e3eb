"""kfk connect runs against any Kafka: a file -> topic -> file round trip on Apache Kafka's broker."""

import uuid

import pytest

from tests.connect.workers import start_kfk_worker, wait_for

pytestmark = pytest.mark.integration


def test_file_round_trip_on_apache_kafka(apache_kafka, tmp_path):
    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    lines = [f"record {index}" for index in range(200)]
    source.write_text("".join(line + "\n" for line in lines))
    converter = "org.apache.kafka.connect.storage.StringConverter"
    topic = f"connect-lines-{uuid.uuid4().hex[:8]}"  # the Apache Kafka broker is shared with other modules
    worker = start_kfk_worker(tmp_path, {
        "bootstrap.servers": apache_kafka.bootstrap_server, "key.converter": converter, "value.converter": converter,
        "offset.storage.file.filename": str(tmp_path / "offsets"), "offset.flush.interval.ms": "500",
    }, [{"name": "lines-in", "connector.class": "FileStreamSource", "file": str(source), "topic": topic},
        {"name": "lines-out", "connector.class": "FileStreamSink", "file": str(sink), "topics": topic,
         "transforms": "upper", "transforms.upper.type": "org.apache.kafka.connect.transforms.RegexRouter",
         "transforms.upper.regex": "connect-(.*)", "transforms.upper.replacement": "routed-$1"}])
    try:
        try:
            wait_for(lambda: sink.exists() and sink.read_text().count("\n") == len(lines), "the sink's file")
        except AssertionError as error:  # say why: the worker's log
            raise AssertionError(f"{error}\n{worker.log_path.read_text()[-5000:]}") from None
        assert sink.read_text().splitlines() == lines
        status = worker.wait_running("lines-out")
        assert status["type"] == "sink"
        body = wait_for(lambda: worker.call("GET", "/connectors/lines-out/offsets")[1]["offsets"], "sink offsets")
        assert body == [{"partition": {"kafka_topic": topic, "kafka_partition": 0},
                         "offset": {"kafka_offset": len(lines)}}]
    finally:
        worker.stop()
