"""kfk.testing.apache_kafka: Apache Kafka resolves, starts, serves a real client, runs its tools and Java code."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from kfk.testing.apache_kafka import (
    APACHE_KAFKA_VERSION,
    TOOL_MAIN_CLASSES,
    ApacheKafka,
    JavaCompileError,
    compile_java,
    run_java,
    run_kafka_tool,
)


def test_classpath_is_the_vendored_release(kafka_classpath_fixture: str) -> None:
    names = {Path(jar).name for jar in kafka_classpath_fixture.split(":")}
    for artifact in ("kafka_2.13", "kafka-tools", "kafka-clients"):
        assert f"{artifact}-{APACHE_KAFKA_VERSION}.jar" in names
    assert any(name.startswith("log4j-slf4j-impl-") for name in names)


def test_every_tool_main_class_exists(kafka_classpath_fixture: str, tmp_path: Path) -> None:
    """One JVM checks that each kafka-*.sh main class is on the classpath (a typo would only show when used)."""
    source = tmp_path / "LoadClasses.java"
    source.write_text("public class LoadClasses { public static void main(String[] args) throws Exception {"
                      " for (String name : args) Class.forName(name, false, LoadClasses.class.getClassLoader()); } }")
    classes = compile_java(source)
    result = run_java("LoadClasses", list(TOOL_MAIN_CLASSES.values()) + ["kafka.Kafka"], extra_classpath=[classes])
    assert result.returncode == 0, result.stderr


def test_compile_java_reports_javac_errors(kafka_classpath_fixture: str, tmp_path: Path) -> None:
    source = tmp_path / "Broken.java"
    source.write_text("public class Broken { int x = ; }")
    with pytest.raises(JavaCompileError, match="Broken.java"):
        compile_java(source)


def test_tools_and_a_python_client_against_apache_kafka(apache_kafka: ApacheKafka) -> None:
    topic = f"runner-{uuid.uuid4().hex[:8]}"
    created = run_kafka_tool("topics", ["--bootstrap-server", apache_kafka.bootstrap_server, "--create",
                                        "--topic", topic, "--partitions", "2"])
    assert created.returncode == 0, created.stderr
    assert f"Created topic {topic}." in created.stdout

    producer = Producer({"bootstrap.servers": apache_kafka.bootstrap_server})
    for index in range(5):
        producer.produce(topic, key=b"k", value=f"v{index}".encode())
    assert producer.flush(30) == 0

    consumed = run_kafka_tool("console-consumer", ["--bootstrap-server", apache_kafka.bootstrap_server, "--topic",
                                                   topic, "--from-beginning", "--max-messages", "5"], timeout=60)
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == [f"v{index}" for index in range(5)]

    consumer = Consumer({"bootstrap.servers": apache_kafka.bootstrap_server, "group.id": topic,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    try:
        while len(values) < 5:
            message = consumer.poll(10)
            assert message is not None, f"only {values} arrived"
            assert message.error() is None, message.error()
            values.append(message.value().decode())
    finally:
        consumer.close()
    assert values == [f"v{index}" for index in range(5)]


def test_factory_node_takes_config_and_restarts_on_its_data(apache_kafka_factory) -> None:
    node = apache_kafka_factory({"num.partitions": "3"})
    assert "num.partitions=3" in (node.data_dir / "server.properties").read_text()
    topic = f"runner-{uuid.uuid4().hex[:8]}"
    producer = Producer({"bootstrap.servers": node.bootstrap_server})
    producer.produce(topic, value=b"kept")
    assert producer.flush(30) == 0
    node.stop()
    node.stop()  # idempotent
    assert (node.log_dir / ".kafka_cleanshutdown").exists()
    assert sorted(path.name for path in node.log_dir.glob(f"{topic}-*")) == [f"{topic}-{p}" for p in range(3)]
    node.start()
    described = run_kafka_tool("topics", ["--bootstrap-server", node.bootstrap_server, "--describe", "--topic",
                                          topic])
    assert "PartitionCount: 3" in described.stdout, described.stdout + described.stderr


def test_unknown_tool_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown Kafka tool"):
        run_kafka_tool("no-such-tool", [])
