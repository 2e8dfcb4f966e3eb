"""`kfk transactions`: flag checks, then a hanging transaction found and repaired against a real broker.

The hanging transaction is made as it happens in the field: a transactional batch in a partition's log whose
producer id no coordinator knows (its coordinator state was lost), appended with kfk.storage while the broker is
stopped. After the restart a read_committed consumer is stuck behind it; `find-hanging` lists it, `abort` writes its
ABORT marker, and the consumer reads on. `dump-log` then shows the marker and the `.txnindex` entry.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from typer.testing import CliRunner

from kfk.cli import app
from kfk.client import Admin, Consumer, NewTopic, Producer, TopicPartition
from kfk.config import LogConfig
from kfk.records import MemoryRecordsBuilder
from kfk.storage.log import Log
from kfk.testing.broker import BrokerProcess

runner = CliRunner()

HANGING_PRODUCER_ID = 4242
HOUR_MS = 3_600_000


def test_help_lists_kafkas_subcommands() -> None:
    result = runner.invoke(app, ["transactions", "--help"])
    assert result.exit_code == 0
    for command in ("list", "describe", "describe-producers", "find-hanging", "abort"):
        assert command in result.output


@pytest.mark.parametrize(("args", "message"), [
    (["find-hanging"], "find-hanging needs --topic or --broker-id"),
    (["find-hanging", "--broker-id", "1", "--partition", "0"], "--partition needs --topic"),
    (["abort", "--topic", "t", "--partition", "0"], "name the transaction to abort with --start-offset"),
    (["abort", "--topic", "t", "--partition", "0", "--producer-id", "5"], "--producer-id needs --producer-epoch"),
    (["abort", "--topic", "t", "--partition", "0", "--start-offset", "3", "--producer-id", "5"],
     "give --start-offset or --producer-id, not both"),
    (["describe", "--transactional-id", "x", "--bootstrap-server", "127.0.0.1:1"], "kfk: "),
])
def test_bad_arguments_are_one_line(args: list[str], message: str) -> None:
    result = runner.invoke(app, ["transactions", *args])
    assert result.exit_code == 1 and message in result.output
    assert len(result.output.strip().splitlines()) == 1


def read_committed(bootstrap: str, tp: TopicPartition, expected: int) -> tuple[list[bytes], int]:
    """What a read_committed consumer returns from the start of ``tp`` (waiting for ``expected`` values, then a
    little longer so that hidden records would show), and its end offset (the last stable offset)."""
    with Consumer({"bootstrap.servers": bootstrap, "isolation.level": "read_committed"}) as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning()
        values: list[bytes] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and len(values) < expected:
            values.extend(record.value for record in consumer.poll(0.5))
        values.extend(record.value for record in consumer.poll(1.0))
        return values, consumer.end_offsets([tp])[tp]


def append_hanging_transactions(broker: BrokerProcess, partitions: list[TopicPartition]) -> list[int]:
    """Stop the broker, append an hour-old transactional batch of an unknown producer to each partition's log,
    restart; returns the batches' offsets."""
    assert broker.stop() == 0
    now_ms = int(time.time() * 1000)
    offsets = []
    for tp in partitions:
        log = Log.open(str(broker.log_dir / f"{tp.topic}-{tp.partition}"), LogConfig(), now_ms=now_ms,
                       had_clean_shutdown=True)
        try:
            offsets.append(log.log_end_offset)
            builder = MemoryRecordsBuilder(base_offset=log.log_end_offset, producer_id=HANGING_PRODUCER_ID,
                                           producer_epoch=0, base_sequence=0, is_transactional=True,
                                           partition_leader_epoch=log.latest_epoch() or 0)
            builder.append(now_ms - HOUR_MS, None, b"hanging")
            log.append_as_follower(bytes(builder.close()), now_ms)
            log.flush()
        finally:
            log.close()
    broker.start()
    return offsets


@pytest.mark.integration
def test_find_hanging_and_abort_unblock_a_read_committed_consumer(kfk_broker_process: BrokerProcess) -> None:
    broker = kfk_broker_process
    bootstrap = broker.bootstrap_servers
    flags = ["--bootstrap-server", bootstrap]
    topic = f"t-{uuid.uuid4().hex[:10]}"
    tp, other = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with Admin({"bootstrap.servers": bootstrap}) as admin:
        assert admin.create_topics([NewTopic(topic, 2, 1)]) == {topic: None}
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        producer.send(topic, b"before", partition=0).get(10)

    assert append_hanging_transactions(broker, [tp, other]) == [1, 0]
    start_offset = 1
    with Producer({"bootstrap.servers": bootstrap}) as producer:
        for value in (b"after-1", b"after-2"):
            producer.send(topic, value, partition=0).get(10)
    values, last_stable_offset = read_committed(bootstrap, tp, 1)
    assert values == [b"before"] and last_stable_offset == start_offset  # stuck behind the hanging transaction

    producers = runner.invoke(app, ["transactions", "describe-producers", "--topic", topic, "--partition", "0",
                                    *flags])
    assert producers.exit_code == 0, producers.output
    assert "CurrentTransactionStartOffset" in producers.output and str(HANGING_PRODUCER_ID) in producers.output

    found = runner.invoke(app, ["transactions", "find-hanging", "--broker-id", "1", *flags, "--json"])
    assert found.exit_code == 0, found.output
    rows = json.loads(found.output)
    assert [(row["Partition"], row["StartOffset"]) for row in rows] == [(0, start_offset), (1, 0)]
    row = rows[0]
    assert (row["Topic"], row["Partition"], row["ProducerId"], row["ProducerEpoch"], row["StartOffset"]) == (
        topic, 0, HANGING_PRODUCER_ID, 0, start_offset)
    assert row["CoordinatorEpoch"] == -1 and row["Duration(min)"] >= 59
    table = runner.invoke(app, ["transactions", "find-hanging", "--topic", topic, *flags])
    assert table.exit_code == 0
    for header in ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                   "LastTimestamp", "Duration(min)"):
        assert header in table.output
    assert str(HANGING_PRODUCER_ID) in table.output
    # A transaction younger than the longest allowed timeout may still be ended by its coordinator: not listed.
    patient = runner.invoke(app, ["transactions", "find-hanging", "--topic", topic, "--max-transaction-timeout",
                                  "120", *flags, "--json"])
    assert patient.exit_code == 0 and json.loads(patient.output) == []

    elsewhere = runner.invoke(app, ["transactions", "describe-producers", "--topic", topic, "--partition", "0",
                                    "--broker-id", "7", *flags])
    assert elsewhere.exit_code == 1 and "broker 7 is not in the cluster" in elsewhere.output
    assert len(elsewhere.output.strip().splitlines()) == 1
    unknown = runner.invoke(app, ["transactions", "describe", "--transactional-id", "nobody", *flags])
    assert unknown.exit_code == 1 and "could not be found" in unknown.output
    assert len(unknown.output.strip().splitlines()) == 1
    listed = runner.invoke(app, ["transactions", "list", *flags, "--json"])
    assert listed.exit_code == 0 and HANGING_PRODUCER_ID not in {row["ProducerId"] for row in json.loads(listed.output)}

    wrong = runner.invoke(app, ["transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", "2",
                                *flags])
    assert wrong.exit_code == 1 and "no open transaction starts at offset 2" in wrong.output

    aborted = runner.invoke(app, ["transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset",
                                  str(start_offset), *flags])
    assert aborted.exit_code == 0, aborted.output

    values, last_stable_offset = read_committed(bootstrap, tp, 3)
    assert values == [b"before", b"after-1", b"after-2"]
    assert last_stable_offset == 5  # before, hanging, after-1, after-2, the ABORT marker
    still = runner.invoke(app, ["transactions", "find-hanging", "--broker-id", "1", *flags, "--json"])
    assert still.exit_code == 0 and [row["Partition"] for row in json.loads(still.output)] == [1]
    # Kafka's form for brokers older than 3.0: the producer named outright; coordinator epoch -1 (no marker yet)
    # is sent as 0.
    by_id = runner.invoke(app, ["transactions", "abort", "--topic", topic, "--partition", "1", "--producer-id",
                                str(HANGING_PRODUCER_ID), "--producer-epoch", "0", "--coordinator-epoch", "-1",
                                *flags])
    assert by_id.exit_code == 0, by_id.output
    after = runner.invoke(app, ["transactions", "find-hanging", "--broker-id", "1", *flags, "--json"])
    assert after.exit_code == 0 and json.loads(after.output) == []

    segment = broker.log_dir / f"{topic}-0" / f"{0:020d}"
    txn_index = runner.invoke(app, ["dump-log", "--files", f"{segment}.txnindex"])
    assert txn_index.exit_code == 0, txn_index.output
    assert (f"version: 0 producerId: {HANGING_PRODUCER_ID} firstOffset: {start_offset} lastOffset: 4 "
            f"lastStableOffset: ") in txn_index.output
    log = runner.invoke(app, ["dump-log", "--files", f"{segment}.log", "--deep-iteration"])
    assert log.exit_code == 0, log.output
    assert "isControl: true" in log.output and "endTxnMarker: ABORT coordinatorEpoch: 0" in log.output
