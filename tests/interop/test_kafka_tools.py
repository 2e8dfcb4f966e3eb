"""Apache Kafka's own command-line tools (4.4.0, the kafka-*.sh main classes) pointed at kfk and at Apache Kafka.

Every command runs against both brokers with the same arguments and names; the outputs must be the same lines once
what legitimately differs is normalised: the bootstrap address, log dir, topic ids, producer ids, times, sizes and
rates. Where kfk differs from Apache Kafka on purpose (or not yet), the test says so next to the command.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from kfk.testing.apache_kafka import ApacheKafka
from kfk.testing.broker import BrokerProcess
from tests.interop.jvm import kafka_tool, kfk_server, unique_name  # noqa: F401
from tests.interop.test_java_clients import read_partition
from tests.interop.test_kfk_tools_print_kafka_lines import kfk as kfk_command


@dataclass(frozen=True)
class Target:
    """One broker the tools are pointed at: where it listens and where it keeps its logs."""

    bootstrap: str
    log_dir: Path


@pytest.fixture(scope="module")
def targets(kfk_server: BrokerProcess, apache_kafka: ApacheKafka) -> dict[str, Target]:
    return {"kfk": Target(kfk_server.bootstrap_servers, kfk_server.log_dir),
            "apache": Target(apache_kafka.bootstrap_server, apache_kafka.log_dir)}


LOG_PREFIX = re.compile(r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+\] ", re.MULTILINE)
TOPIC_ID = re.compile(r"TopicId: \S+")
LOG_DIR_SIZE = re.compile(r'"size":\d+')
#: Apache Kafka 4.4 formats its node with ELR (eligible.leader.replicas.version 1, KIP-966), and its controller then
#: sets min.insync.replicas cluster-wide, which kafka-topics.sh --describe lists among a topic's configs and
#: kafka-configs.sh among its synonyms; kfk has no ELR (the differential suite documents the same difference).
ELR_MIN_INSYNC_REPLICAS = re.compile(r"(?<=Configs: )min\.insync\.replicas=1,?|"
                                     r"DYNAMIC_DEFAULT_BROKER_CONFIG:min\.insync\.replicas=1, ")


def normalise(text: str, target: Target) -> str:
    text = text.replace(target.bootstrap, "BOOTSTRAP").replace(str(target.log_dir), "LOG_DIR")
    return ELR_MIN_INSYNC_REPLICAS.sub("", TOPIC_ID.sub("TopicId: ID", LOG_PREFIX.sub("", text)))


@dataclass
class Outputs:
    """One command's result on each broker, normalised."""

    returncode: dict[str, int]
    stdout: dict[str, str]
    stderr: dict[str, str]

    @property
    def kfk(self) -> str:
        return self.stdout["kfk"]


def both(targets: dict[str, Target], tool: str, args: list[str], *, ok: bool = True, input: str | None = None,
         same_stderr: bool = False, sizes: bool = False, same_stdout: bool = True) -> Outputs:
    """Run kafka-`tool` against both brokers at once ("{bootstrap}" in args is each broker's address) and assert the
    same exit code and normalised stdout (and stderr when asked). sizes=True also blanks log-dirs' byte sizes
    (the same records take different room when the producers batched them differently). same_stdout=False leaves
    the comparison to the caller: listings of the shared brokers hold other tests' topics and groups too."""

    def run(target: Target) -> subprocess.CompletedProcess:
        return kafka_tool(tool, [arg.replace("{bootstrap}", target.bootstrap) for arg in args], ok=ok, input=input)

    with ThreadPoolExecutor(len(targets)) as pool:
        results = dict(zip(targets, pool.map(run, targets.values())))
    stdout = {name: normalise(result.stdout, targets[name]) for name, result in results.items()}
    if sizes:
        stdout = {name: LOG_DIR_SIZE.sub('"size":0', text) for name, text in stdout.items()}
    outputs = Outputs({name: result.returncode for name, result in results.items()}, stdout,
                      {name: normalise(result.stderr, targets[name]) for name, result in results.items()})
    assert outputs.returncode["kfk"] == outputs.returncode["apache"], (tool, args, outputs)
    if same_stdout:
        assert outputs.stdout["kfk"] == outputs.stdout["apache"], (tool, args)
    if same_stderr:
        assert outputs.stderr["kfk"] == outputs.stderr["apache"], (tool, args)
    return outputs


def lines_with(text: str, word: str) -> list[str]:
    return [line for line in text.splitlines() if word in line]


def test_topics_tool(targets: dict[str, Target]) -> None:
    topic = unique_name("tool-topics")
    created = both(targets, "topics", ["--bootstrap-server", "{bootstrap}", "--create", "--topic", topic,
                                       "--partitions", "3", "--config", "retention.ms=1000000"])
    assert created.kfk == f"Created topic {topic}.\n"
    described = both(targets, "topics", ["--bootstrap-server", "{bootstrap}", "--describe", "--topic", topic])
    assert described.kfk.splitlines()[0] == (f"Topic: {topic}\tTopicId: ID\tPartitionCount: 3\tReplicationFactor: 1"
                                             "\tConfigs: retention.ms=1000000")
    assert described.kfk.splitlines()[1] == (f"\tTopic: {topic}\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\t"
                                             "Elr: \tLastKnownElr: ")

    both(targets, "topics", ["--bootstrap-server", "{bootstrap}", "--alter", "--topic", topic, "--partitions", "5"])
    described = both(targets, "topics", ["--bootstrap-server", "{bootstrap}", "--describe", "--topic", topic])
    assert "PartitionCount: 5" in described.kfk and len(lines_with(described.kfk, "Partition: ")) == 5
    # Other tests' topics share the brokers: compare only this test's.
    listed = both(targets, "topics", ["--bootstrap-server", "{bootstrap}", "--list"], same_stdout=False)
    assert lines_with(listed.stdout["kfk"], topic) == lines_with(listed.stdout["apache"], topic) == [topic]

    existing = both(targets, "topics", ["--bootstrap-server", "{bootstrap}", "--create", "--topic", topic],
                    ok=False)
    assert existing.returncode["kfk"] == 1
    assert existing.kfk == f"Error while executing topic command : Topic '{topic}' already exists.\n"
    fewer = both(targets, "topics", ["--bootstrap-server", "{bootstrap}", "--alter", "--topic", topic,
                                     "--partitions", "2"], ok=False)
    assert fewer.returncode["kfk"] == 1 and "5 partition(s); 2 would not be an increase" in fewer.kfk

    both(targets, "topics", ["--bootstrap-server", "{bootstrap}", "--delete", "--topic", topic])
    missing = both(targets, "topics", ["--bootstrap-server", "{bootstrap}", "--describe", "--topic", topic],
                   ok=False)
    # (Kafka's own wording: 4.4's tool no longer prints 4.0's Optional[...] around the name.)
    assert missing.kfk == f"Error while executing topic command : Topic '{topic}' does not exist as expected\n"


GROUPS = ["--bootstrap-server", "{bootstrap}", "--timeout", "60000"]


def test_console_tools_and_consumer_groups(targets: dict[str, Target]) -> None:
    """Kafka's console producer and consumer, then kafka-consumer-groups on the group the consumer left behind.
    (--timeout: the tool's default of 5 s for each admin call is short on a busy test machine.)"""
    topic = unique_name("tool-console")
    group = unique_name("tool-group")
    both(targets, "topics", ["--bootstrap-server", "{bootstrap}", "--create", "--topic", topic, "--partitions", "1"])
    both(targets, "console-producer", ["--bootstrap-server", "{bootstrap}", "--topic", topic, "--reader-property",
                                       "parse.key=true", "--reader-property", "key.separator=:"],
         input="a:one\nb:two\nc:three\n")
    # What kfk stored from Kafka's console producer, read with another client.
    messages = read_partition(targets["kfk"].bootstrap, topic, 0, 3)
    assert [(m.key(), m.value()) for m in messages] == [(b"a", b"one"), (b"b", b"two"), (b"c", b"three")]

    consumed = both(targets, "console-consumer", [
        "--bootstrap-server", "{bootstrap}", "--topic", topic, "--from-beginning", "--max-messages", "2",
        "--group", group, "--formatter-property", "print.key=true", "--formatter-property", "print.offset=true",
        "--formatter-property", "print.partition=true"], same_stderr=True)
    assert consumed.kfk == "Partition:0\tOffset:0\ta\tone\nPartition:0\tOffset:1\tb\ttwo\n"
    assert consumed.stderr["kfk"].endswith("Processed a total of 2 messages\n")  # after 4.4's KIP-848 notice

    listed = both(targets, "consumer-groups", [*GROUPS, "--list", "--state"], same_stdout=False)
    # The columns are as wide as the longest group name of each broker's listing: compare the fields.
    assert [line.split() for line in lines_with(listed.stdout["kfk"], group)] == \
        [line.split() for line in lines_with(listed.stdout["apache"], group)]
    assert lines_with(listed.kfk, group)[0].split() == [group, "Empty"]
    # The console consumer committed what it printed (2 of 3): lag 1, and no member left.
    described = both(targets, "consumer-groups", [*GROUPS, "--describe", "--group",
                                                  group], same_stderr=True)
    assert lines_with(described.kfk, topic)[0].split() == [group, topic, "0", "2", "3", "1", "-", "-", "-"]
    assert described.stderr["kfk"].strip() == f"Consumer group '{group}' has no active members."
    state = both(targets, "consumer-groups", [*GROUPS, "--describe", "--group", group,
                                              "--state"])
    assert lines_with(state.kfk, group)[0].split()[-3:] == ["-", "Empty", "0"]

    reset = both(targets, "consumer-groups", [*GROUPS, "--reset-offsets", "--group",
                                              group, "--topic", topic, "--to-earliest", "--execute"])
    assert lines_with(reset.kfk, topic)[0].split() == [group, topic, "0", "0"]
    shifted = both(targets, "consumer-groups", [*GROUPS, "--reset-offsets", "--group",
                                                group, "--topic", f"{topic}:0", "--shift-by", "5", "--dry-run"],
                   same_stderr=True)
    assert lines_with(shifted.kfk, topic)[0].split() == [group, topic, "0", "3"]  # capped at the log end
    assert "New offset (5) is higher than latest offset" in shifted.stderr["kfk"]
    deleted_offsets = both(targets, "consumer-groups", [*GROUPS, "--delete-offsets",
                                                        "--group", group, "--topic", topic])
    assert lines_with(deleted_offsets.kfk, topic)[-1].split() == [topic, "0", "Successful"]
    deleted = both(targets, "consumer-groups", [*GROUPS, "--delete", "--group", group])
    assert deleted.kfk.strip() == f"Deletion of requested consumer groups ('{group}') was successful."
    unknown = both(targets, "consumer-groups", [*GROUPS, "--delete", "--group", group])
    assert f"Group '{group}' could not be deleted due to: org.apache.kafka.common.errors.GroupIdNotFoundException" \
        in unknown.kfk


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def test_consumer_groups_with_an_active_member(targets: dict[str, Target]) -> None:
    """A live confluent-kafka consumer in the group: its member id, host, client id and assignment as the tool
    decodes them from DescribeGroups (the member ids end in a random UUID, blanked)."""
    topic = unique_name("tool-members")
    group = unique_name("tool-active")
    both(targets, "topics", ["--bootstrap-server", "{bootstrap}", "--create", "--topic", topic, "--partitions", "2"])
    assigned = {name: threading.Event() for name in targets}
    stop = threading.Event()

    def member(name: str) -> None:
        consumer = Consumer({"bootstrap.servers": targets[name].bootstrap, "group.id": group,
                             "client.id": "member", "partition.assignment.strategy": "range"})
        consumer.subscribe([topic], on_assign=lambda _consumer, partitions: assigned[name].set())
        try:
            while not stop.is_set():
                consumer.poll(0.2)
        finally:
            consumer.close()

    threads = [threading.Thread(target=member, args=(name,)) for name in targets]
    for thread in threads:
        thread.start()
    try:
        for name, event in assigned.items():
            assert event.wait(60), f"the consumer on {name} got no assignment"
        outputs = {}
        for view in (["--describe"], ["--describe", "--members", "--verbose"], ["--describe", "--state"]):
            both_outputs = both_raw(targets, "consumer-groups", [*GROUPS, "--group", group, *view])
            outputs[view[-1]] = {name: UUID.sub("UUID", text) for name, text in both_outputs.items()}
            assert outputs[view[-1]]["kfk"] == outputs[view[-1]]["apache"], view
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    rows = [line.split() for line in lines_with(outputs["--describe"]["kfk"], topic)]
    assert sorted(rows) == [[group, topic, str(partition), "-", "0", "-", "member-UUID", "/127.0.0.1", "member"]
                            for partition in range(2)]
    assert lines_with(outputs["--verbose"]["kfk"], group)[0].split() == [
        group, "member-UUID", "/127.0.0.1", "member", "2", "-", f"{topic}:0,1", "-", "-"]
    assert lines_with(outputs["--state"]["kfk"], group)[0].split()[-3:] == ["range", "Stable", "1"]


#: A member id librdkafka makes for the consumer protocol (a random UUID in base64: 22 characters, some upper case,
#: unlike the test's lower-case names).
MEMBER_ID = re.compile(r"(?<![\w/+-])(?=[\w/+-]*[A-Z])[A-Za-z0-9+/_-]{22}(?![\w/+-])")
#: A member epoch followed by an assignment column (topic:partitions) in --members --verbose.


def test_consumer_groups_of_the_consumer_protocol(targets: dict[str, Target]) -> None:
    """A live confluent-kafka consumer with group.protocol=consumer (KIP-848): kafka-consumer-groups --list (with
    --type and --state) and --describe (offsets, members, state) read the group through ListGroups and
    ConsumerGroupDescribe: the same lines from both brokers (member ids blanked). Once the member left,
    --reset-offsets and --delete work on the empty group."""
    topic = unique_name("tool-kip848")
    group = unique_name("tool-consumer")
    both(targets, "topics", ["--bootstrap-server", "{bootstrap}", "--create", "--topic", topic, "--partitions", "2"])
    for target in targets.values():
        producer = Producer({"bootstrap.servers": target.bootstrap})
        for index in range(4):
            producer.produce(topic, value=f"v{index}", partition=index % 2)
        assert producer.flush(30) == 0
    consumed = {name: threading.Event() for name in targets}
    stop = threading.Event()

    def member(name: str) -> None:
        consumer = Consumer({"bootstrap.servers": targets[name].bootstrap, "group.id": group,
                             "group.protocol": "consumer", "client.id": "member", "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        seen = 0
        try:
            while not stop.is_set():
                message = consumer.poll(0.2)
                if message is not None and message.error() is None:
                    seen += 1
                    if seen == 4:
                        consumer.commit(asynchronous=False)
                        consumed[name].set()
        finally:
            consumer.close()

    threads = [threading.Thread(target=member, args=(name,)) for name in targets]
    for thread in threads:
        thread.start()
    try:
        for name, event in consumed.items():
            assert event.wait(60), f"the consumer on {name} consumed nothing"
        outputs = {}
        for view in (["--describe"], ["--describe", "--members", "--verbose"], ["--describe", "--state"]):
            both_outputs = both_raw(targets, "consumer-groups", [*GROUPS, "--group", group, *view])
            outputs[view[-1]] = {name: MEMBER_ID.sub("MEMBER", text) for name, text in both_outputs.items()}
            assert outputs[view[-1]]["kfk"] == outputs[view[-1]]["apache"], view
            # kfk's own tool prints the lines Kafka's prints (for the same group on the same broker).
            ours = kfk_command("consumer-groups", *[arg.replace("{bootstrap}", targets["kfk"].bootstrap)
                                                    for arg in [*GROUPS, "--group", group, *view]])
            assert ours.returncode == 0, ours.stderr
            assert MEMBER_ID.sub("MEMBER", normalise(ours.stdout, targets["kfk"])) == outputs[view[-1]]["kfk"], view
        # (--type filters through ListGroups' types filter, and prints each group's type and state.)
        listed = both(targets, "consumer-groups", [*GROUPS, "--list", "--type", "consumer", "--state"],
                      same_stdout=False)
        assert [line.split() for line in lines_with(listed.stdout["kfk"], group)] == \
            [line.split() for line in lines_with(listed.stdout["apache"], group)]
        assert lines_with(listed.kfk, group)[0].split() == [group, "Consumer", "Stable"]
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    rows = [line.split() for line in lines_with(outputs["--describe"]["kfk"], topic)]
    assert sorted(rows) == [[group, topic, str(partition), "2", "2", "0", "MEMBER", "/127.0.0.1", "member"]
                            for partition in range(2)]
    assert lines_with(outputs["--state"]["kfk"], group)[0].split()[-3:] == ["uniform", "Stable", "1"]
    # The members left (epoch -1): the empty group's offsets can be reset, then the group deleted.
    reset = both(targets, "consumer-groups", [*GROUPS, "--reset-offsets", "--group", group, "--topic", topic,
                                              "--to-earliest", "--execute"])
    assert sorted(line.split() for line in lines_with(reset.kfk, topic)) == [
        [group, topic, str(partition), "0"] for partition in range(2)]
    deleted = both(targets, "consumer-groups", [*GROUPS, "--delete", "--group", group])
    assert deleted.kfk.strip() == f"Deletion of requested consumer groups ('{group}') was successful."


PERF_NUMBERS = re.compile(r"\d+(\.\d+)?")


def test_perf_tools(targets: dict[str, Target]) -> None:
    """Timings differ run to run: the lines must have the same shape, and the record counts must be exact."""
    topic = unique_name("tool-perf")
    both(targets, "topics", ["--bootstrap-server", "{bootstrap}", "--create", "--topic", topic, "--partitions", "2"])
    with ThreadPoolExecutor(2) as pool:
        produced = dict(zip(targets, pool.map(lambda target: kafka_tool("producer-perf-test", [
            "--topic", topic, "--num-records", "2000", "--record-size", "100", "--throughput", "-1",
            "--producer-props", f"bootstrap.servers={target.bootstrap}", "acks=all", "compression.type=lz4"]),
            targets.values())))
        consumed = dict(zip(targets, pool.map(lambda target: kafka_tool("consumer-perf-test", [
            "--bootstrap-server", target.bootstrap, "--topic", topic, "--messages", "2000"]), targets.values())))
    # The producer prints a progress line every 5 s before its summary (how many depends on the machine's load): its
    # summary is compared; the consumer's table, from its header on.
    def summary(tool_output: str) -> str:
        lines = tool_output.splitlines()
        starts = [index for index, line in enumerate(lines) if line.startswith("start.time")]
        return "\n".join(lines[starts[0]:] if starts else lines[-1:])

    for outputs in (produced, consumed):
        shapes = {name: PERF_NUMBERS.sub("N", summary(result.stdout)) for name, result in outputs.items()}
        assert shapes["kfk"] == shapes["apache"]
    assert produced["kfk"].stdout.splitlines()[-1].startswith("2000 records sent, ")
    lines = consumed["kfk"].stdout.strip().splitlines()
    at = next(index for index, line in enumerate(lines) if line.startswith("start.time"))
    header, row = lines[at:at + 2]
    columns = dict(zip([name.strip() for name in header.split(",")], [value.strip() for value in row.split(",")]))
    assert columns["data.consumed.in.nMsg"] == "2000"
    assert float(columns["data.consumed.in.MB"]) == pytest.approx(2000 * 100 / 1024 / 1024, abs=0.001)


def test_offsets_configs_records_log_dirs_and_elections(targets: dict[str, Target]) -> None:
    topic = unique_name("tool-offsets")
    both(targets, "topics", ["--bootstrap-server", "{bootstrap}", "--create", "--topic", topic, "--partitions", "2"])
    base_timestamp = int(time.time() * 1000) - 60_000  # recent: retention must not take the records mid-test
    for target in targets.values():
        producer = Producer({"bootstrap.servers": target.bootstrap})
        for index in range(10):
            producer.produce(topic, value=f"v{index}", partition=index % 2, timestamp=base_timestamp + index)
        assert producer.flush(30) == 0

    latest = both(targets, "get-offsets", ["--bootstrap-server", "{bootstrap}", "--topic", topic])
    assert latest.kfk == f"{topic}:0:5\n{topic}:1:5\n"
    by_time = both(targets, "get-offsets", ["--bootstrap-server", "{bootstrap}", "--topic-partitions",
                                            f"{topic}:0,{topic}:1", "--time", str(base_timestamp + 5)])
    assert by_time.kfk == f"{topic}:0:3\n{topic}:1:2\n"  # partition 0 has 0, 2, 4, 6, 8; partition 1 the odd ones
    records_file = targets["kfk"].log_dir.parent / f"{topic}-delete.json"
    records_file.write_text(f'{{"partitions": [{{"topic": "{topic}", "partition": 0, "offset": 3}}], "version": 1}}')
    deleted = both(targets, "delete-records", ["--bootstrap-server", "{bootstrap}", "--offset-json-file",
                                               str(records_file)])
    assert lines_with(deleted.kfk, "low_watermark") == [f"partition: {topic}-0\tlow_watermark: 3"]
    earliest = both(targets, "get-offsets", ["--bootstrap-server", "{bootstrap}", "--topic", topic, "--time", "-2"])
    assert earliest.kfk == f"{topic}:0:3\n{topic}:1:0\n"

    entity = ["--bootstrap-server", "{bootstrap}", "--entity-type", "topics", "--entity-name", topic]
    altered = both(targets, "configs", [*entity, "--alter", "--add-config", "retention.ms=5000"])
    assert altered.kfk == f"Completed updating config for topic {topic}.\n"
    # Deleting a config the topic does not set: Kafka 4.4's tool sends it (4.0's refused it before any request).
    unset = both(targets, "configs", [*entity, "--alter", "--delete-config", "max.message.bytes"])
    assert unset.kfk == f"Completed updating config for topic {topic}.\n"
    described = both(targets, "configs", [*entity, "--describe"])
    assert described.kfk == (f"Dynamic configs for topic {topic} are:\n  retention.ms=5000 sensitive=false "
                             "synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=5000}\n")
    # Every topic config with its value, source and synonyms. This found kfk's message.timestamp.after.max.ms
    # default (Long.MAX instead of Kafka 4.0's hour).
    every = both(targets, "configs", [*entity, "--describe", "--all"])
    assert "  message.timestamp.after.max.ms=3600000 sensitive=false " \
           "synonyms={DEFAULT_CONFIG:log.message.timestamp.after.max.ms=3600000}" in every.kfk.splitlines()
    # Not compared: altering broker configs (kafka-configs --entity-type brokers --alter). kfk refuses some that
    # Apache Kafka 4.0 updates dynamically (log.cleaner.threads, a cluster default log.retention.ms); that work is
    # its dynamic broker configs' own (tconf), and a changed Apache Kafka default would leak into other tests.

    log_dirs = both(targets, "log-dirs", ["--bootstrap-server", "{bootstrap}", "--describe", "--topic-list", topic],
                    sizes=True)
    (report,) = [json.loads(line) for line in log_dirs.kfk.splitlines() if line.startswith("{")]
    (broker_dirs,) = report["brokers"]
    (log_dir,) = broker_dirs["logDirs"]
    assert (broker_dirs["broker"], log_dir["logDir"], log_dir["error"]) == (1, "LOG_DIR", None)
    assert sorted(partition["partition"] for partition in log_dir["partitions"]) == [f"{topic}-0", f"{topic}-1"]

    # One broker: the preferred leader leads already.
    elected = both(targets, "leader-election", ["--bootstrap-server", "{bootstrap}", "--election-type", "preferred",
                                                "--topic", topic, "--partition", "1"])
    assert elected.kfk == f"Valid replica already elected for partitions {topic}-1\n"


def test_transactions_tool(targets: dict[str, Target]) -> None:
    """A committed and an open transaction (confluent-kafka's transactional producer) as kafka-transactions sees
    them. Producer ids, start times and durations differ between brokers: the tables are compared cell by cell
    with those columns blanked."""
    topic = unique_name("tool-txn")
    done, open_id = unique_name("tx-done"), unique_name("tx-open")
    both(targets, "topics", ["--bootstrap-server", "{bootstrap}", "--create", "--topic", topic, "--partitions", "1"])
    open_producers = []
    for target in targets.values():
        committed = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": done})
        committed.init_transactions(60)
        committed.begin_transaction()
        committed.produce(topic, key=b"k", value=b"committed", partition=0)
        committed.commit_transaction(60)
        pending = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": open_id})
        pending.init_transactions(60)
        pending.begin_transaction()
        pending.produce(topic, key=b"k", value=b"open", partition=0)
        assert pending.flush(30) == 0
        open_producers.append(pending)

    def table(text: str, blank: set[str]) -> list[dict[str, str]]:
        # Each line is stripped alike (the tool pads cells and ends lines with a tab; which row comes last depends
        # on the other transactions of the shared brokers), and the padding's empty column is dropped.
        lines = [line.rstrip() for line in text.splitlines() if line.strip()]
        header, *rows = [[cell.strip() for cell in line.split("\t")] for line in lines]
        return [{column: "-" if column in blank else cell for column, cell in zip(header, row) if column}
                for row in rows]

    tool = ["--bootstrap-server", "{bootstrap}"]
    listed = {name: table(text, {"ProducerId"})
              for name, text in both_raw(targets, "transactions", [*tool, "list"]).items()}
    # Both brokers list transactional ids in no set order (Kafka's from a hash map): compared as sets of rows.
    ours = {name: sorted((row for row in rows if row["TransactionalId"] in (done, open_id)),
                         key=lambda row: row["TransactionalId"])
            for name, rows in listed.items()}
    assert ours["kfk"] == ours["apache"]
    assert sorted((row["TransactionalId"], row["TransactionState"]) for row in ours["kfk"]) == [
        (done, "CompleteCommit"), (open_id, "Ongoing")]

    timing = {"ProducerId", "CurrentTransactionStartTimeMs", "TransactionDurationMs"}
    described = {name: table(text, timing) for name, text in
                 both_raw(targets, "transactions", [*tool, "describe", "--transactional-id", open_id]).items()}
    assert described["kfk"] == described["apache"]
    assert described["kfk"] == [{
        "CoordinatorId": "1", "TransactionalId": open_id, "ProducerId": "-", "ProducerEpoch": "0",
        "TransactionState": "Ongoing", "TransactionTimeoutMs": "60000", "CurrentTransactionStartTimeMs": "-",
        "TransactionDurationMs": "-", "TopicPartitions": f"{topic}-0"}]

    producers = {name: table(text, {"ProducerId", "LastTimestamp"}) for name, text in both_raw(
        targets, "transactions", [*tool, "describe-producers", "--topic", topic, "--partition", "0"]).items()}
    assert producers["kfk"] == producers["apache"]
    # Two producers wrote: the committed one has no open transaction; the other's began at offset 2, after the
    # first record and its commit marker.
    assert sorted(row["CurrentTransactionStartOffset"] for row in producers["kfk"]) == ["2", "None"]
    for pending in open_producers:
        pending.abort_transaction(60)


def both_raw(targets: dict[str, Target], tool: str, args: list[str]) -> dict[str, str]:
    """Run kafka-`tool` on both brokers (each must exit 0) and return each normalised stdout, for commands whose
    output holds values that differ by nature and that the caller blanks."""
    with ThreadPoolExecutor(len(targets)) as pool:
        results = pool.map(lambda target: kafka_tool(tool, [arg.replace("{bootstrap}", target.bootstrap)
                                                            for arg in args]), targets.values())
        return {name: normalise(result.stdout, targets[name]) for name, result in zip(targets, results)}
