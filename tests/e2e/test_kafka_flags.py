"""Kafka's own flags and output formats through the real CLI (`python -m kfk` in a subprocess) against one real
broker: what an operator types from kafka-topics.sh, kafka-consumer-groups.sh, the console tools, the perf tests
and kafka-dump-log.sh habits works and prints what Kafka prints."""

from __future__ import annotations

import json
import re
import signal
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from kfk.client import Consumer, Producer, TopicPartition
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    process = start_broker(tmp_path_factory.mktemp("flags-broker"), dict(TEST_OVERRIDES))
    yield process
    process.stop()


@pytest.fixture
def server(broker: BrokerProcess) -> list[str]:
    return ["--bootstrap-server", broker.bootstrap_servers]


def kfk(*args: str, stdin: str | bytes | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """`python -m kfk ...`, so that the tree under test runs (PYTHONPATH), as a user would run `kfk ...`."""
    return subprocess.run([sys.executable, "-m", "kfk", *args], input=stdin, capture_output=True,
                          text=not isinstance(stdin, bytes), timeout=timeout)


def one_line_error(result: subprocess.CompletedProcess, message: str, code: int = 1) -> None:
    assert result.returncode == code, (result.stdout, result.stderr)
    assert result.stderr.startswith(f"kfk: {message}"), result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --- kafka-topics.sh -----------------------------------------------------------------------------------------------

TOPIC_ID = r"[A-Za-z0-9_-]{22}"


def test_topics_in_kafka_spelling(server: list[str]) -> None:
    base = unique("flags")
    plain, tuned = f"{base}.plain", f"{base}_tuned"
    # A '.' or '_' in the name: kafka-topics.sh's warning first (tests/commands/test_broker_logs.py compares it).
    assert kfk("topics", "--create", "--topic", plain, "--partitions", "2", *server).stdout == (
        "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could collide. "
        f"To avoid issues it is best to use either, but not both.\nCreated topic {plain}.\n")
    created = kfk("topics", "--create", "--topic", tuned, "--config", "retention.ms=60000", *server)
    assert created.returncode == 0, created.stderr
    offsets = kfk("consumer-groups", "--reset-offsets", "--group", unique("g"), "--topic", plain, "--to-earliest",
                  "--execute", *server)  # commits an offset, so that __consumer_offsets exists
    assert offsets.returncode == 0, offsets.stderr

    listed = kfk("topics", "--list", *server).stdout.splitlines()
    assert {plain, tuned, "__consumer_offsets"} <= set(listed)
    assert "__consumer_offsets" not in kfk("topics", "--list", "--exclude-internal", *server).stdout.split()
    assert kfk("topics", "--list", "--topic", re.escape(base) + r"\..*", *server).stdout == f"{plain}\n"
    both = kfk("topics", "list", "--topic", f"{plain},{tuned}", *server).stdout
    assert both.splitlines() == sorted([plain, tuned])

    described = kfk("topics", "--describe", "--topic", f"{re.escape(base)}.*", *server)
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    assert len(lines) == 5
    # min.insync.replicas=1: the cluster-wide value eligible leader replicas keep (a dynamic default, which Kafka's
    # tool lists, as Apache Kafka 4.4 does on its own default cluster).
    assert re.fullmatch(f"Topic: {re.escape(plain)}\tTopicId: {TOPIC_ID}\tPartitionCount: 2\t"
                        f"ReplicationFactor: 1\tConfigs: min.insync.replicas=1", lines[0])
    for partition in (0, 1):
        assert lines[1 + partition] == (f"\tTopic: {plain}\tPartition: {partition}\tLeader: 1\tReplicas: 1\tIsr: 1"
                                        f"\tElr: \tLastKnownElr: "), "an ISR at min.insync.replicas: no ELR"
    assert re.fullmatch(f"Topic: {tuned}\tTopicId: {TOPIC_ID}\tPartitionCount: 1\tReplicationFactor: 1\t"
                        f"Configs: min.insync.replicas=1,retention.ms=60000", lines[3])

    overrides = kfk("topics", "--describe", "--topics-with-overrides", "--exclude-internal", *server).stdout
    assert tuned in overrides and plain in overrides and "\tPartition:" not in overrides  # the dynamic default too
    internal = kfk("topics", "--describe", "--topics-with-overrides", *server).stdout
    assert "Topic: __consumer_offsets\t" in internal and "cleanup.policy=compact" in internal
    at_min = kfk("topics", "--describe", "--at-min-isr-partitions", "--topic", plain, *server).stdout
    assert at_min.splitlines() == lines[1:3], "min.insync.replicas=1 and an ISR of one: every partition, no header"
    for report in ("--under-replicated-partitions", "--under-min-isr-partitions", "--unavailable-partitions"):
        result = kfk("topics", "--describe", report, "--topic", plain, *server)
        assert (result.returncode, result.stdout) == (0, ""), report

    pretty = kfk("topics", "describe", "--topic", tuned, "--pretty", *server).stdout
    assert "PARTITION" in pretty and "ISR" in pretty and "Configs: min.insync.replicas=1,retention.ms=60000" in pretty
    [entry] = json.loads(kfk("topics", "--describe", "--topic", tuned, "--json", *server).stdout)
    assert entry["configs"] == {"min.insync.replicas": "1", "retention.ms": "60000"}
    assert entry["partitions"][0]["isr"] == [1]

    altered = kfk("topics", "--alter", "--topic", f"{re.escape(base)}.*", "--partitions", "3", *server)
    assert altered.stdout.splitlines() == [f"Topic {plain} now has 3 partitions.",
                                           f"Topic {tuned} now has 3 partitions."]
    deleted = kfk("topics", "--delete", "--topic", f"{re.escape(base)}.*", *server)
    assert deleted.stdout.splitlines() == [f"Deleted topic {plain}.", f"Deleted topic {tuned}."]
    one_line_error(kfk("topics", "--delete", "--topic", f"{re.escape(base)}.*", *server), "topic ")
    assert kfk("topics", "--delete", "--topic", plain, "--if-exists", *server).returncode == 0


@pytest.mark.parametrize(("args", "message"), [
    (["--list", "--describe"], "Command must include exactly one action"),
    (["--bootstrap-server", "127.0.0.1:1"], "Command must include exactly one action"),
    (["--create"], "--create needs --topic"),
    (["--alter", "--topic", "t"], "--alter needs --partitions"),
    (["--describe", "list"], "give either the subcommand 'list' or --describe"),
    (["--describe", "--topic", "a[", "--bootstrap-server", "127.0.0.1:1"], "--topic 'a[' is not a valid regular"),
])
def test_topics_flag_mistakes_are_one_line(args: list[str], message: str) -> None:
    one_line_error(kfk("topics", *args), message)


# --- kafka-consumer-groups.sh --------------------------------------------------------------------------------------

def test_consumer_groups_flags(broker: BrokerProcess, server: list[str], tmp_path) -> None:
    topic, group, idle = unique("cg"), unique("cg-group"), unique("cg-idle")
    assert kfk("topics", "--create", "--topic", topic, "--partitions", "2", *server).returncode == 0
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        for n in range(20):
            producer.send(topic, str(n).encode(), partition=n % 2)

    with Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group, "client.id": "flags-client",
                   "auto.offset.reset": "earliest", "heartbeat.interval.ms": 100,
                   "enable.auto.commit": False}) as consumer:
        consumer.subscribe([topic])
        for _ in range(100):
            if len(consumer.assignment()) == 2:
                break
            consumer.poll(0.1)
        verbose = kfk("consumer-groups", "--describe", "--group", group, "--members", "--verbose", *server)
        assert verbose.returncode == 0, verbose.stderr
        blank, header, row = verbose.stdout.splitlines()  # kafka-consumer-groups.sh's lines
        assert blank == "" and header.split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                                                  "CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH",
                                                  "TARGET-ASSIGNMENT"]
        assert row.split()[3:] == ["flags-client", "2", "-", f"{topic}:0,1", "-", "-"]
        stable = kfk("consumer-groups", "--list", "--state", "stable", *server).stdout
        assert group in stable and "Stable" in stable
        assert group not in kfk("consumer-groups", "--list", "--state", "Empty", *server).stdout
        refused = kfk("consumer-groups", "--delete-offsets", "--group", group, "--topic", topic, *server)
        assert refused.returncode == 1, "the group still subscribes to the topic: GROUP_SUBSCRIBED_TO_TOPIC"
        assert refused.stderr == "Encounter some partition level error, see the follow-up details:\n"
        assert refused.stdout.count("Error: ") == 2 and "subscribed" in refused.stdout
        consumer.commit_sync({TopicPartition(topic, 0): 4, TopicPartition(topic, 1): 6})

    listed = kfk("consumer-groups", "--list", "--state", *server).stdout
    assert [group, "Empty"] in [line.split() for line in listed.splitlines()], listed
    one_line_error(kfk("consumer-groups", "--describe", "--group", idle, *server),
                   f"Consumer group '{idle}' does not exist.")
    state = kfk("consumer-groups", "--describe", "--group", group, "--state", *server).stdout
    assert state.splitlines()[2].split() == [group, broker.bootstrap_servers, "(1)", "-", "Empty", "0"], state
    offsets = kfk("consumer-groups", "--describe", "--group", group, "--offsets", "--timeout", "3000", *server)
    assert "CURRENT-OFFSET" in offsets.stdout and "has no active members" in offsets.stderr

    exported = kfk("consumer-groups", "--reset-offsets", "--group", group, "--all-topics", "--shift-by", "-1",
                   "--export", *server)
    assert exported.returncode == 0, exported.stderr
    assert sorted(exported.stdout.strip().splitlines()) == [f"{topic},0,3", f"{topic},1,5"]  # in Kafka's order
    plan = tmp_path / "plan.csv"
    plan.write_text(f"{topic},0,1\n{topic},1,99\n")
    from_file = kfk("consumer-groups", "--reset-offsets", "--group", group, "--from-file", str(plan), "--execute",
                    "--json", *server)
    assert [row["new_offset"] for row in json.loads(from_file.stdout)] == [1, 10], "99 is past the end: clamped"
    future = kfk("consumer-groups", "--reset-offsets", "--group", group, "--all-topics", "--by-duration", "PT0S",
                 "--export", *server)
    assert sorted(future.stdout.strip().splitlines()) == [f"{topic},0,10", f"{topic},1,10"], "nothing newer: the end"
    past = kfk("consumer-groups", "--reset-offsets", "--group", group, "--all-topics", "--by-duration", "P1DT1H",
               "--export", *server)
    assert sorted(past.stdout.strip().splitlines()) == [f"{topic},0,0", f"{topic},1,0"]

    deleted = kfk("consumer-groups", "--delete-offsets", "--group", group, "--topic", f"{topic}:1", *server)
    assert deleted.returncode == 0, deleted.stderr
    assert deleted.stdout.startswith(f"Request succeeded for deleting offsets from group {group}.\n")
    assert "Successful" in deleted.stdout
    rows = json.loads(kfk("consumer-groups", "--describe", "--group", group, "--json", *server).stdout)[0]["offsets"]
    assert [(row["partition"], row["current_offset"]) for row in rows] == [(0, 1)]
    one_line_error(kfk("consumer-groups", "--delete-offsets", "--group", idle, "--topic", topic, *server),
                   f"'{idle}' does not exist.")


@pytest.mark.parametrize(("args", "message"), [
    (["--reset-offsets", "--group", "g", "--all-topics", "--by-duration", "1h"], "--by-duration '1h' is not"),
    (["--reset-offsets", "--group", "g", "--from-file", "/nonexistent.csv"], "cannot read /nonexistent.csv"),
    (["--list", "--state", "Sleeping"], "unknown group state 'Sleeping'"),
    (["--list", "Stable"], "unexpected argument 'Stable'"),
    (["--describe", "--group", "g", "--members", "--state"], "--describe takes at most one of"),
    (["--delete-offsets", "--group", "g"], "--delete-offsets needs one --group and --topic"),
    (["--describe", "--group", "g", "--export"], "--export goes with --reset-offsets"),
])
def test_consumer_groups_flag_mistakes_are_one_line(args: list[str], message: str) -> None:
    one_line_error(kfk("consumer-groups", *args), message)


# --- kafka-console-producer.sh / kafka-console-consumer.sh ---------------------------------------------------------

def test_console_produce_keeps_a_space_separator_and_shows_bad_lines_as_text(server: list[str]) -> None:
    topic = unique("spaced")
    produced = kfk("console-produce", "--topic", topic, "--property", "parse.key=true", "--property",
                   "key.separator= ", *server, stdin="k1 first value\nk2 second\n")
    assert produced.returncode == 0, produced.stderr
    consumed = kfk("console-consume", "--topic", topic, "--from-beginning", "--max-messages", "2", "--property",
                   "print.key=true", "--property", "key.separator=|", *server)
    assert consumed.stdout == "k1|first value\nk2|second\n"
    bad = kfk("console-produce", "--topic", topic, "--property", "parse.key=true", *server, stdin="no tab here\n")
    one_line_error(bad, "no key separator found on line number 1: 'no tab here'")


def test_console_consume_formatters_deserializers_and_include(broker: BrokerProcess, server: list[str]) -> None:
    base = unique("typed")
    numbers, other = f"{base}-numbers", f"{base}-other"
    record_id = uuid.UUID("0f5e4b6a-1c2d-4e3f-8a9b-0c1d2e3f4a5b")
    with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
        producer.send(numbers, struct.pack(">d", 1e10),
                      key=struct.pack(">q", -42), headers=[("id", str(record_id).encode())])
        producer.send(numbers, struct.pack(">d", 0.25), key=struct.pack(">q", 7))
        producer.send(other, b"bin\x00\\ary", key=str(record_id).encode())
        producer.flush()
    read = ["--from-beginning", "--max-messages", "2", *server]

    typed = kfk("console-consume", "--topic", numbers, "--property", "print.key=true", "--key-deserializer",
                "long", "--value-deserializer", "org.apache.kafka.common.serialization.DoubleDeserializer", *read)
    assert typed.stdout == "-42\t1.0E10\n7\t0.25\n", typed.stderr
    escaped = kfk("console-consume", "--topic", other, "--property", "print.key=true", "--key-deserializer", "uuid",
                  "--value-deserializer", "bytes", "--max-messages", "1", *read[:1], *server)
    assert escaped.stdout == f"{record_id}\tbin\\x00\\x5Cary\n"

    included = kfk("console-consume", "--include", f"{re.escape(base)}-.*", "--formatter", "json",
                   "--from-beginning", "--max-messages", "3", *server)
    assert included.returncode == 0, included.stderr
    rows = [json.loads(line) for line in included.stdout.splitlines()]
    assert sorted(row["topic"] for row in rows) == [numbers, numbers, other]
    assert {row["value"] for row in rows if row["topic"] == other} == {"bin\x00\\ary"}
    assert [row["headers"] for row in rows if row["offset"] == 0 and row["topic"] == numbers] == [
        [["id", str(record_id)]]]

    logged = kfk("console-consume", "--topic", other, "--formatter",
                 "org.apache.kafka.tools.consumer.LoggingMessageFormatter", "--max-messages", "1", *read[:1], *server)
    assert logged.stdout == "bin\x00\\ary\n"
    assert re.search(rf"INFO CreateTime:\d+, key:{record_id}, value:bin", logged.stderr), logged.stderr

    stopped = kfk("console-consume", "--topic", other, "--value-deserializer", "int", *read)
    assert stopped.returncode == 1 and "Size of data received by IntegerDeserializer is not 4" in stopped.stderr
    assert stopped.stderr.startswith("Processed a total of 1 messages\nkfk: Size of data")
    skipped = kfk("console-consume", "--topic", numbers, "--value-deserializer", "int", "--skip-message-on-error",
                  *read)
    assert skipped.returncode == 0 and skipped.stdout == ""
    assert skipped.stderr.count("Error processing message, skipping this message") == 2

    for args, message in ((["--topic", numbers, "--include", "x"], "Exactly one of --include/--topic is required."),
                          (["--topic", numbers, "--formatter", "xml"], "unknown formatter 'xml'"),
                          (["--topic", numbers, "--key-deserializer", "Avro"], "unknown deserializer 'Avro'")):
        one_line_error(kfk("console-consume", *args, *server), message)


def test_console_consume_stops_on_sigterm_like_ctrl_c(broker: BrokerProcess, server: list[str]) -> None:
    topic, group = unique("term"), unique("term-group")
    assert kfk("console-produce", "--topic", topic, *server, stdin="one\ntwo\n").returncode == 0
    process = subprocess.Popen([sys.executable, "-m", "kfk", "console-consume", "--topic", topic, "--group", group,
                                "--from-beginning", *server], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        assert process.stdout is not None
        assert [process.stdout.readline(), process.stdout.readline()] == ["one\n", "two\n"]
        process.send_signal(signal.SIGTERM)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 0 and stdout == ""
    assert stderr.strip().splitlines()[-1] == "Processed a total of 2 messages" and "Traceback" not in stderr
    state = kfk("consumer-groups", "--describe", "--group", group, "--state", "--json", *server)
    assert json.loads(state.stdout)[0]["state"] == "Empty", "the consumer left its group on the way out"



@pytest.mark.parametrize("how", [["--from-beginning"], ["--group", "waiting-group", "--from-beginning"],
                                 ["--partition", "0", "--offset", "earliest"]], ids=["alone", "group", "partition"])
def test_console_consume_waits_for_a_missing_topic(broker: BrokerProcess, server: list[str], how: list[str]) -> None:
    """As kafka-console-consumer.sh 4.0.2 (alone, with --group, with --partition): no exit on a missing topic; its
    Metadata requests let the broker auto-create it (auto.create.topics.enable, on here); a record produced then by
    another client is printed and --max-messages ends it."""
    topic = unique("awaited")
    how = [unique(arg) if arg == "waiting-group" else arg for arg in how]
    process = subprocess.Popen([sys.executable, "-m", "kfk", "console-consume", "--topic", topic, "--max-messages",
                                "1", *how, *server], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with Consumer({"bootstrap.servers": broker.bootstrap_servers, "allow.auto.create.topics": False}) as probe:
            deadline = time.monotonic() + 30
            while topic not in probe.list_topics():
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, "the consumer's Metadata requests did not create the topic"
                time.sleep(0.1)
        with Producer({"bootstrap.servers": broker.bootstrap_servers}) as producer:
            producer.send(topic, b"late arrival", partition=0)
            producer.flush()
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
    assert (process.returncode, stdout) == (0, "late arrival\n"), stderr
    assert stderr.strip().splitlines()[-1] == "Processed a total of 1 messages"

# --- kafka-producer-perf-test.sh / kafka-consumer-perf-test.sh -----------------------------------------------------

def test_perf_test_flags(broker: BrokerProcess, server: list[str]) -> None:
    topic, transactional_id = unique("perf"), unique("perf-tx")
    # --throughput spreads the 3000 records over ~1.5 s, so transactions of 20 ms are several whatever the speed.
    produced = kfk("perf-test", "produce", "--topic", topic, "--num-records", "3000", "--record-size", "20",
                   "--throughput", "2000", "--producer-props", "acks=all", "linger.ms=5", "client.id=flags-perf", "--transactional-id",
                   transactional_id, "--transaction-duration-ms", "20", "--print-metrics", *server)
    assert produced.returncode == 0, produced.stderr
    summary, blank, header, *metrics = produced.stdout.splitlines()
    assert summary.startswith("3000 records sent, ") and blank == ""
    assert re.fullmatch(r"Metric Name +Value", header)
    rows = dict(re.fullmatch(r"producer-metrics:([a-z-]+):\{client-id=flags-perf\} +: ([\d.]+)", row).groups()
                for row in metrics)
    assert rows["record-send-total"] == "3000.000" and rows["record-size-avg"] == "20.000"
    assert rows["record-error-total"] == "0.000"

    listed = kfk("transactions", "describe", "--transactional-id", transactional_id, *server)
    assert "CompleteCommit" in listed.stdout, listed.stdout + listed.stderr
    segment = broker.log_dir / f"{topic}-0" / "00000000000000000000.log"
    dumped = kfk("dump-log", "--files", str(segment), "--deep-iteration")
    assert dumped.stdout.count("endTxnMarker: COMMIT") > 1, "one transaction per 20 ms: several commits"

    detailed = kfk("perf-test", "consume", "--topic", topic, "--messages", "3000", "--show-detailed-stats",
                   "--reporting-interval", "1", "--consumer-props", "isolation.level=read_committed", *server)
    assert detailed.returncode == 0, detailed.stderr
    header, *lines = detailed.stdout.splitlines()
    assert header.startswith("time, threadId, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                             "rebalance.time.ms")
    assert lines and all(re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}, 0, [\d.]+, [\d.]+, \d+, [\d.]+, \d+, "
                                      r"-?\d+, [\d.]+, [\d.]+", line) for line in lines), lines
    assert lines[-1].split(", ")[4] == "3000", "every committed record is read"

    one_line_error(kfk("perf-test", "produce", "--topic", topic, "--num-records", "1", "--record-size", "1",
                       "linger.ms=5", *server), "unexpected argument 'linger.ms=5'")
    one_line_error(kfk("perf-test", "produce", "--topic", topic, "--num-records", "1", "--record-size", "1",
                       "--transaction-duration-ms", "0", *server), "--transaction-duration-ms should be greater")


# --- kafka-dump-log.sh ---------------------------------------------------------------------------------------------

def test_dump_log_decoders_and_a_live_active_segment(broker: BrokerProcess, server: list[str]) -> None:
    topic, group, transactional_id = unique("dump"), unique("dump-group"), unique("dump-tx")
    assert kfk("topics", "--create", "--topic", topic, *server).returncode == 0
    with Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": transactional_id}) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for n in range(5):
            producer.send(topic, f"v{n}".encode(), partition=0)
        producer.commit_transaction()
    committed = kfk("consumer-groups", "--reset-offsets", "--group", group, "--topic", topic, "--to-offset", "3",
                    "--execute", *server)
    assert committed.returncode == 0, committed.stderr

    data = broker.log_dir
    active = data / f"{topic}-0" / "00000000000000000000"
    checked = kfk("dump-log", "--files", f"{active}.index,{active}.timeindex", "--index-sanity-check")
    assert checked.returncode == 0, checked.stdout
    # A few small records leave the offset index without entries: Kafka's tool says so ("is empty."); the time
    # index, preallocated with zeros on a live broker, passes once its zero tail is ignored.
    assert f"{active}.index is empty." in checked.stdout
    assert f"{active}.timeindex passed sanity check." in checked.stdout and "failed" not in checked.stdout

    first_batch = kfk("dump-log", "--files", f"{active}.log", "--max-bytes", "1")
    assert first_batch.stdout.count("baseOffset: ") == 1, "--max-bytes stops after the batch at position 0"
    assert kfk("dump-log", "--files", f"{active}.log").stdout.count("baseOffset: ") == 2, "records and marker"

    def segments(prefix: str) -> str:
        return ",".join(str(path) for path in sorted(data.glob(f"{prefix}-*/00000000000000000000.log")))

    offsets = kfk("dump-log", "--files", segments("__consumer_offsets"), "--offsets-decoder").stdout
    key = json.dumps({"type": "1", "data": {"group": group, "topic": topic, "partition": 0}}, separators=(",", ":"))
    [line] = [line for line in offsets.splitlines() if f"key: {key}" in line]
    payload = json.loads(line.split(" payload: ", 1)[1])
    assert payload["version"] == "3" and payload["data"]["offset"] == 3 and payload["data"]["commitTimestamp"] > 0

    transactions = kfk("dump-log", "--files", segments("__transaction_state"), "--transaction-log-decoder").stdout
    states = [json.loads(line.split(" payload: ", 1)[1])["data"] for line in transactions.splitlines()
              if f'"transactionalId":"{transactional_id}"' in line]
    assert [state["transactionStatus"] for state in states][-2:] == [2, 4], "PrepareCommit, then CompleteCommit"
    assert {"topic": topic, "partitionIds": [0]} in states[-2]["transactionPartitions"]

    metadata = kfk("dump-log", "--files", str(data / "__cluster_metadata-0" / "00000000000000000000.log"),
                   "--cluster-metadata-decoder").stdout
    topics = [json.loads(line.split(" payload: ", 1)[1]) for line in metadata.splitlines()
              if '"type":"TOPIC_RECORD"' in line]
    assert any(record["data"]["name"] == topic and len(record["data"]["topicId"]) == 22 for record in topics)

    one_line_error(kfk("dump-log", "--files", f"{active}.log", "--offsets-decoder", "--cluster-metadata-decoder"),
                   "give at most one of --offsets-decoder")
