"""The broker's log through `python -m kfk server start`: JSON lines (--log-format json), a rotated log.file, a
start-up that says one line per log dir and listener instead of one per partition, and nothing Apache Kafka's broker
does not say."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Producer

from kfk.testing.apache_kafka import run_kafka_tool
from kfk.testing.broker import BrokerProcess


def kfk(*args: str, stdin: str | None = None) -> str:
    """The command's stdout; it must succeed."""
    done = subprocess.run([sys.executable, "-m", "kfk", *args], input=stdin, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def records(text: str) -> list[dict]:
    """Every line must be one JSON object."""
    return [json.loads(line) for line in text.splitlines()]


def test_json_lines_a_rotated_log_file_and_a_quiet_start(tmp_path: Path) -> None:
    log_file = tmp_path / "kfk.log"
    broker = BrokerProcess(log_dir=tmp_path / "data", log_path=tmp_path / "stderr.log", extra_args=[
        "--log-format", "json", "--log-level", "debug"], overrides={
        "log.file": str(log_file), "log.file.max.bytes": "20000", "log.file.backups": "2"})
    broker.start(timeout=60)
    try:
        address = broker.bootstrap_servers
        kfk("topics", "create", "--topic", "many", "--partitions", "20", "--bootstrap-server", address)
        kfk("console-produce", "--topic", "many", "--bootstrap-server", address, stdin="a\nb\n")
        kfk("console-consume", "--topic", "many", "--group", "g", "--from-beginning", "--max-messages", "2",
            "--bootstrap-server", address)
    finally:
        assert broker.stop() == 0
    first_run = records(broker.output())
    assert {"time", "level", "logger", "message"} <= set(first_run[0])
    assert any(entry["level"] == "DEBUG" for entry in first_run)
    # log.file gets the same JSON lines, rotated: at most log.file.backups old files, none bigger than the limit.
    rotated = sorted(path.name for path in tmp_path.glob("kfk.log*"))
    assert rotated == ["kfk.log", "kfk.log.1", "kfk.log.2"]
    for path in tmp_path.glob("kfk.log*"):
        assert path.stat().st_size <= 20000 + 2000
        records(path.read_text())

    # Restarted at the default level: one INFO line per log dir and listener, not one per partition (70 here).
    broker.extra_args = ["--log-format", "json"]
    before = len(broker.output().splitlines())
    broker.start(timeout=60)
    try:
        started = records("\n".join(broker.output().splitlines()[before:]))
    finally:
        assert broker.stop() == 0
    messages = [entry["message"] for entry in started if entry["level"] == "INFO"]
    ready = next(index for index, message in enumerate(messages) if message.startswith("kfk broker 1 started"))
    assert f"log dir {broker.log_dir}: 70 partition logs loaded (the dir is locked while the broker runs)" in messages
    assert sum(message.startswith("listener PLAINTEXT://127.0.0.1:") for message in messages) == 1
    # The start's own lines only: listener, log dir, metadata log, quorum leader, registration, unfencing (said by
    # the controller and by the broker), the configuration note, ready.
    assert ready < 10, messages[:ready + 1]


def test_a_coordinator_topic_that_cannot_be_created_is_explained_at_warn(tmp_path: Path) -> None:
    """offsets.topic.replication.factor=3 on a single broker: __consumer_offsets cannot be created, the group
    consumer waits; the broker says why, and what to change, once (not at every retry of the consumer)."""
    broker = BrokerProcess(log_dir=tmp_path / "data", log_path=tmp_path / "broker.log",
                           overrides={"offsets.topic.replication.factor": "3"})
    broker.start(timeout=60)
    consumer = None
    try:
        kfk("topics", "create", "--topic", "t", "--bootstrap-server", broker.bootstrap_servers)
        consumer = subprocess.Popen([sys.executable, "-m", "kfk", "console-consume", "--topic", "t", "--group", "g",
                                     "--bootstrap-server", broker.bootstrap_servers],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while "WARNING" not in broker.output() and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3)  # the consumer keeps asking for its coordinator meanwhile
    finally:
        if consumer is not None:
            consumer.kill()
            consumer.wait()
        assert broker.stop() == 0
    warnings = [line for line in broker.output().splitlines() if " WARNING " in line]
    assert len(warnings) == 1, warnings
    assert warnings[0].endswith(
        "WARNING kfk.server: cannot create __consumer_offsets, so consumer groups wait for a coordinator: "
        "INVALID_REPLICATION_FACTOR (Unable to replicate the partition 3 time(s): The target replication factor of 3 "
        "cannot be reached because only 1 broker(s) are registered.); start more brokers or lower "
        "offsets.topic.replication.factor (now 3) to at most the number of live brokers")


def test_the_start_note_describes_the_initial_rebalance_delay_it_names(tmp_path: Path) -> None:
    """Without a server.properties the start note names group.initial.rebalance.delay.ms; set to 3000 it must not
    say (as it did whatever the value) that a new group's first rebalance does not wait."""
    broker = BrokerProcess(log_dir=tmp_path / "data", log_path=tmp_path / "broker.log",
                           overrides={"group.initial.rebalance.delay.ms": "3000"})
    broker.start(timeout=60)
    assert broker.stop() == 0
    notes = [line for line in broker.output().splitlines() if "no server.properties given" in line]
    assert len(notes) == 1 and notes[0].endswith(
        "group.initial.rebalance.delay.ms=3000 (a new consumer group's first rebalance waits 3,000 ms for more "
        "members, and longer while more join)"), notes


def test_topic_names_with_a_period_or_underscore_are_the_tools_warning_not_the_brokers(tmp_path: Path) -> None:
    """Apache Kafka's broker logs nothing about '.' and '_' in topic names (its controller only refuses names that
    collide); kafka-topics.sh --create prints a WARNING line for such a name. kfk's broker logged that warning for
    every new topic with either character, its own internal topics included, and `kfk topics create` said nothing."""
    broker = BrokerProcess(log_dir=tmp_path / "data", log_path=tmp_path / "broker.log", overrides={})
    broker.start(timeout=60)
    try:
        address = broker.bootstrap_servers
        warned = kfk("topics", "create", "--topic", "orders.eu", "--bootstrap-server", address)
        plain = kfk("topics", "create", "--topic", "orders", "--bootstrap-server", address)
        # Kafka's own tool against the same broker: what it prints for such a name is the reference.
        kafka = run_kafka_tool("topics", ["--bootstrap-server", address, "--create", "--topic", "orders_us"])
        # The internal topics, created by the broker: __consumer_offsets for a group, __transaction_state for a
        # transactional producer.
        kfk("console-produce", "--topic", "orders", "--bootstrap-server", address, stdin="a\n")
        kfk("console-consume", "--topic", "orders", "--group", "g", "--from-beginning", "--max-messages", "1",
            "--bootstrap-server", address)
        producer = Producer({"bootstrap.servers": address, "transactional.id": "collisions"})
        producer.init_transactions(60)
        producer.begin_transaction()
        producer.produce("orders", b"b")
        producer.commit_transaction(60)
    finally:
        assert broker.stop() == 0
    assert kafka.returncode == 0, kafka.stderr
    assert kafka.stdout == ("WARNING: Due to limitations in metric names, topics with a period ('.') or underscore "
                            "('_') could collide. To avoid issues it is best to use either, but not both.\n"
                            "Created topic orders_us.\n")
    assert warned == kafka.stdout.replace("orders_us", "orders.eu")
    assert plain == "Created topic orders.\n"
    assert {"__consumer_offsets-0", "__transaction_state-0"} <= {path.name for path in broker.log_dir.iterdir()}
    assert [line for line in broker.output().splitlines() if "could collide" in line] == []
