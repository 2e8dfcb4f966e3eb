"""`kfk consumer-groups`, `kfk transactions` and `kfk acls` print the lines of Kafka 4.0.2's own tools, so that a
script written for kafka-consumer-groups.sh, kafka-transactions.sh or kafka-acls.sh reads kfk's output alike.

Each scenario is set up once on one kfk broker; then Kafka's tool and kfk's command, given the same flags, read the
same groups, members, offsets, transactions and ACLs from it, and must print the same stdout line for line: padding,
trailing spaces and tabs, blank lines and row order included. Masked is only what legitimately differs between the
two runs: a transaction's running time, the order of `consumer-groups --list` and `transactions list` (kfk's Admin
sorts the groups and transactional ids, Kafka's lists them in the broker's order), and the order kafka-acls.sh
prints resources and entries in (a HashMap over enums, whose hash codes change from one JVM to the next).
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kfk.client import Admin
from kfk.errors import GroupIdNotFoundError
from kfk.testing.broker import BrokerProcess, start_broker
from kfk.testing.plugin import TEST_OVERRIDES
from tests.interop.jvm import kafka_tool, unique_name

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A kfk broker with an authorizer (for the ACLs); the tools connect as User:ANONYMOUS, its super user."""
    process = start_broker(tmp_path_factory.mktemp("kafka-lines"), {
        **TEST_OVERRIDES, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS"})
    yield process
    process.stop()


def kfk(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kfk", *args], input=stdin, capture_output=True, text=True,
                          timeout=120)


def same_output(tool: str, args: list[str], kfk_args: list[str] | None = None, *, stderr: bool = False) -> str:
    """Run kafka-`tool` and `kfk <tool> ...` (kfk_args, else the same args) against the broker; both must exit 0 and
    print the same stdout (and stderr if asked). Returns it."""
    kafka = kafka_tool(tool, args)
    ours = kfk(tool, *(args if kfk_args is None else kfk_args))
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.splitlines() == kafka.stdout.splitlines(), (args, kafka.stdout, ours.stdout)
    assert ours.stdout == kafka.stdout, args  # the final newline too
    if stderr:
        assert ours.stderr == kafka.stderr, (args, kafka.stderr, ours.stderr)
    return ours.stdout


# --- kafka-consumer-groups.sh --------------------------------------------------------------------------------------

def test_consumer_groups_describe_list_and_reset_print_kafkas_lines(broker: BrokerProcess) -> None:
    """A live group of two confluent-kafka consumers (one owns all three partitions and committed an offset for one of
    them; the other owns none) and two groups without members (offsets committed, no consumer): --describe in each
    view, --list --state, --reset-offsets (dry run, --execute, --export) and --delete-offsets."""
    bootstrap = broker.bootstrap_servers
    orders, payments = unique_name("orders"), unique_name("payments")
    live, idle, other = unique_name("live"), unique_name("idle"), unique_name("idle")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(orders, 2, 1), NewTopic(payments, 1, 1)]).values():
        future.result(60)
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(10):
        producer.produce(orders, value=b"v", partition=n % 2)
        producer.produce(payments, value=b"v", partition=0)
    assert producer.flush(30) == 0
    for group, offsets in ((idle, {(orders, 0): 3, (orders, 1): 5, (payments, 0): 10}), (other, {(orders, 1): 2})):
        committer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        committer.commit(offsets=[TopicPartition(topic, partition, offset)
                                  for (topic, partition), offset in offsets.items()], asynchronous=False)
        committer.close()

    stop = threading.Event()

    def member(number: int, topics: list[str]) -> None:
        # client.id starts the member id, so member-0 sorts first and the range assignor gives it every partition.
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": live, "client.id": f"member-{number}",
                             "partition.assignment.strategy": "range", "enable.auto.commit": False})
        consumer.subscribe(topics)
        committed = False
        try:
            while not stop.is_set():
                consumer.poll(0.2)
                if number == 0 and not committed and TopicPartition(orders, 0) in consumer.assignment():
                    consumer.commit(offsets=[TopicPartition(orders, 0, 2)], asynchronous=False)
                    committed = True
        finally:
            consumer.close()

    members = [threading.Thread(target=member, args=(0, [orders, payments])),
               threading.Thread(target=member, args=(1, [payments]))]
    for thread in members:
        thread.start()
    try:
        with Admin({"bootstrap.servers": bootstrap}) as kfk_admin:
            deadline = time.monotonic() + 90
            while True:
                try:
                    description = kfk_admin.describe_consumer_groups([live])[live]
                except GroupIdNotFoundError:  # no member has joined yet
                    description = None
                if description is not None and description.state == "Stable" and len(description.members) == 2 \
                        and sum(len(m.assignment) for m in description.members) == 3 \
                        and kfk_admin.list_consumer_group_offsets(live):
                    break
                assert time.monotonic() < deadline, f"the group did not settle: {description}"
                time.sleep(0.2)
        server = ["--bootstrap-server", bootstrap, "--timeout", "60000"]
        groups = ["--group", live, "--group", other, "--group", idle]
        for view in ([], ["--offsets", "--verbose"], ["--members"], ["--members", "--verbose"], ["--state"],
                     ["--state", "--verbose"]):
            same_output("consumer-groups", [*server, "--describe", *groups, *view], stderr=True)
        described = same_output("consumer-groups", [*server, "--describe", "--group", live])
    finally:
        stop.set()
        for thread in members:
            thread.join(60)
    # What the comparison covered: a partition without a committed offset shows "-" for it and its lag.
    assert sorted(line.split()[1:6] for line in described.splitlines()[2:]) == sorted([
        [payments, "0", "-", "10", "-"], [orders, "0", "2", "5", "3"], [orders, "1", "-", "5", "-"]])

    # The groups come in the broker's order to Kafka's tool, sorted by id to kfk's (its Admin sorts them).
    for flags in (["--list"], ["--list", "--state"]):
        kafka = kafka_tool("consumer-groups", [*server, *flags]).stdout.splitlines()
        ours = kfk("consumer-groups", *server, *flags).stdout.splitlines()
        with_header = len(flags) - 1
        assert ours[:with_header] == kafka[:with_header] and sorted(ours) == sorted(kafka), (kafka, ours)
    assert sorted(line.split() for line in ours[1:]) == sorted([[live, "Empty"], [idle, "Empty"], [other, "Empty"]])
    reset = ["--reset-offsets", "--group", idle, "--group", other, "--all-topics"]
    planned = same_output("consumer-groups", [*server, *reset, "--to-earliest"], stderr=True)
    assert len(planned.splitlines()) == 2 + 4
    same_output("consumer-groups", [*server, *reset, "--shift-by", "-1", "--dry-run"], stderr=True)
    same_output("consumer-groups", [*server, "--reset-offsets", "--group", idle, "--all-topics", "--to-latest",
                                    "--export"])
    same_output("consumer-groups", [*server, *reset, "--to-offset", "1", "--execute"], stderr=True)
    same_output("consumer-groups", [*server, "--delete-offsets", "--group", idle, "--topic", payments],
                stderr=True)


# --- kafka-transactions.sh -----------------------------------------------------------------------------------------

def test_transactions_list_describe_and_describe_producers_print_kafkas_table(broker: BrokerProcess) -> None:
    """A committed transaction and an open one over three partitions (confluent-kafka's transactional producers)."""
    bootstrap = broker.bootstrap_servers
    orders, payments = unique_name("txn-orders"), unique_name("txn-payments")
    done, open_id = unique_name("tx-done"), unique_name("tx-open")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(orders, 2, 1), NewTopic(payments, 1, 1)]).values():
        future.result(60)
    committed = Producer({"bootstrap.servers": bootstrap, "transactional.id": done})
    committed.init_transactions(60)
    committed.begin_transaction()
    committed.produce(payments, value=b"committed", partition=0)
    committed.commit_transaction(60)
    pending = Producer({"bootstrap.servers": bootstrap, "transactional.id": open_id})
    pending.init_transactions(60)
    pending.begin_transaction()
    for topic, partition in ((payments, 0), (orders, 1), (orders, 0)):
        pending.produce(topic, value=b"open", partition=partition)
    assert pending.flush(30) == 0
    try:
        server = ["--bootstrap-server", bootstrap]

        def both(*command: str) -> tuple[list[str], list[str]]:
            kafka = kafka_tool("transactions", [*server, *command]).stdout
            ours = kfk("transactions", *command, *server)
            assert ours.returncode == 0, ours.stderr
            return kafka.splitlines(), ours.stdout.splitlines()

        kafka, ours = both("list")
        assert ours[0] == kafka[0]
        assert [cell.rstrip() for cell in ours[0].split("\t")] == [
            "TransactionalId", "Coordinator", "ProducerId", "TransactionState", ""]
        assert sorted(ours[1:]) == sorted(kafka[1:]) and len(ours) == 3

        kafka, ours = both("describe", "--transactional-id", open_id)

        def running_time_masked(lines: list[str]) -> list[str]:
            cells = [line.split("\t") for line in lines]
            duration = cells[0].index("TransactionDurationMs")
            for row in cells[1:]:
                row[duration] = "#" * len(row[duration])  # padded to the header: the same width on both
            return ["\t".join(row) for row in cells]

        assert running_time_masked(ours) == running_time_masked(kafka)
        assert sorted(ours[1].split("\t")[-2].split(",")) == sorted([f"{payments}-0", f"{orders}-0", f"{orders}-1"])

        kafka, ours = both("describe-producers", "--topic", payments, "--partition", "0")
        assert ours == kafka and len(ours) == 3
    finally:
        pending.abort_transaction(60)


# --- kafka-acls.sh -------------------------------------------------------------------------------------------------

def acls_in_any_order(text: str) -> list[tuple[str, ...]]:
    """kafka-acls.sh's output as blocks (a line, then the entry lines after it, each after a tab), the blocks sorted
    and each block's entries sorted in place: each line keeps its own prefix (the first entry of an "Adding" block
    follows a space)."""
    blocks: list[tuple[str, list[str]]] = []
    for line in text.split("\n"):
        if line.startswith(("\t", " \t")):
            blocks[-1][1].append(line)
        else:
            blocks.append((line, []))
    return sorted((title, *(entry[:entry.index("(")] + content for entry, content in
                            zip(entries, sorted(entry[entry.index("("):] for entry in entries))))
                  for title, entries in blocks)


def test_acls_add_list_and_remove_print_kafkas_lines(broker: BrokerProcess) -> None:
    server = ["--bootstrap-server", broker.bootstrap_servers]
    topic, transactional_id = unique_name("acl-topic"), unique_name("acl-tx")

    def both(*args: str) -> str:
        kafka = kafka_tool("acls", [*server, *args]).stdout
        ours = kfk("acls", *args, *server)
        assert ours.returncode == 0, ours.stderr
        assert acls_in_any_order(ours.stdout) == acls_in_any_order(kafka), (args, kafka, ours.stdout)
        assert ours.stdout.split("\n")[0] == kafka.split("\n")[0] or not kafka.startswith("ACLs for principal")
        return ours.stdout

    pattern = f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)"
    entry = "(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"
    # Adding an ACL that exists already changes nothing: both tools can add the same ones in turn.
    assert both("--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic) == \
        f"Adding ACLs for resource `{pattern}`: \n \t{entry}\n\n"
    both("--add", "--allow-principal", "User:alice", "--allow-principal", "User:carol", "--operation", "Write",
         "--operation", "Describe", "--topic", topic)
    both("--add", "--producer", "--idempotent", "--allow-principal", "User:bob", "--topic", topic,
         "--transactional-id", transactional_id)
    both("--add", "--deny-principal", "User:mallory", "--deny-host", "10.0.0.9", "--topic", topic,
         "--resource-pattern-type", "prefixed")
    listed = both("--list", "--topic", topic)
    assert listed.startswith(f"Current ACLs for resource `{pattern}`:\n\t")
    both("--list")
    both("--list", "--principal", "User:bob")

    # Without --force the tool asks first. (Kafka's reads the answer from the console, and without one it fails
    # after the question: compare up to it.)
    for args in (["--remove", "--topic", topic], ["--remove", "--allow-principal", "User:carol", "--operation",
                                                  "Write", "--topic", topic]):
        kafka = run_kafka_acls_without_a_console(server, args)
        ours = kfk("acls", *args, *server, stdin="n\n")
        assert ours.returncode == 0, ours.stderr
        assert ours.stdout.endswith("? (y/n)\n") and kafka.startswith(ours.stdout), (kafka, ours.stdout)
    # With --force nothing is printed, and nothing listed afterwards (Kafka 3.x's tool listed what was left).
    both("--remove", "--allow-principal", "User:carol", "--operation", "Write", "--topic", topic, "--force")
    assert both("--remove", "--topic", topic, "--resource-pattern-type", "any", "--force") == ""
    assert both("--list", "--topic", topic, "--resource-pattern-type", "any") == ""


def run_kafka_acls_without_a_console(server: list[str], args: list[str]) -> str:
    """kafka-acls.sh's stdout when it asks and there is no console to answer (it then exits 1)."""
    result = kafka_tool("acls", [*server, *args], ok=False)
    assert result.returncode == 1 and "System.console()" in result.stdout, result.stdout
    return result.stdout
