"""kfk's transaction coordinator writes the __transaction_state records Apache Kafka 4.4.0 writes, byte for byte.

Both brokers serve the same transactional workload: a transactional producer's InitProducerId, then a committed,
an aborted and a committed transaction. Each record's key and value are compared as bytes once what legitimately
differs between two runs is zeroed: the producer id (each broker hands out its own) and the timestamps
(txnLastUpdateTimestamp, txnStartTimestamp). Everything else must be the same bytes: the value version, the
epochs, the states, the partition lists, and which tagged fields are written (Kafka 4.4.0 writes PreviousProducerId
always, the id each transition started from; NextProducerId only during a rotation; ClientTransactionVersion only
when it is not 0).

Two clients: librdkafka (confluent-kafka, the files-both-ways workload of tests/interop/conftest.py), whose
EndTxn leaves the epoch alone (transaction version 0), and Kafka's own Java producer 4.4, which uses transaction
version 2 (KIP-890: the epoch bumped at every commit or abort, the client's version written in every record).
"""

from __future__ import annotations

import struct
import time
import uuid
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from kfk.coordinator.transaction.record_serde import deserialize_record
from kfk.records import iter_batches
from kfk.testing.apache_kafka import ApacheKafka, compile_java, run_java
from kfk.testing.broker import BrokerProcess

from .conftest import TRANSACTIONAL_ID, WrittenLogDir

_INT64 = struct.Struct(">q")
STATES = ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "Ongoing", "PrepareAbort", "CompleteAbort",
          "Ongoing", "PrepareCommit", "CompleteCommit"]

JAVA_WORKLOAD = """
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.StringSerializer;

/** args: bootstrap servers, transactional id, topic. A committed, an aborted and a committed transaction. */
public class TransactionalWorkload {
    public static void main(String[] args) {
        Properties config = new Properties();
        config.put("bootstrap.servers", args[0]);
        config.put("transactional.id", args[1]);
        config.put("key.serializer", StringSerializer.class.getName());
        config.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(config)) {
            producer.initTransactions();
            boolean[] commits = {true, false, true};
            for (int i = 0; i < commits.length; i++) {
                producer.beginTransaction();
                producer.send(new ProducerRecord<>(args[2], "txn", "value-" + i));
                producer.flush();
                if (commits[i]) producer.commitTransaction(); else producer.abortTransaction();
            }
        }
    }
}
"""


def transaction_state_records(log_dir: Path, transactional_id: str) -> list[tuple[bytes, bytes]]:
    """(key, value) of every record of `transactional_id` in __transaction_state, in offset order (one partition
    holds them all). Reads the files as they are, of a stopped broker or a running one."""
    found = []
    for log in sorted(log_dir.glob("__transaction_state-*/*.log")):
        for batch in iter_batches(log.read_bytes()):
            for record in batch:
                key, value = bytes(record.key), record.value and bytes(record.value)
                decoded_record = deserialize_record(key, value)
                if decoded_record is not None and decoded_record.transactional_id == transactional_id:
                    found.append((key, value))
    return found


def normalised(key: bytes, value: bytes) -> tuple[bytes, bytes]:
    """The value with its producer id and timestamps zeroed where they are written (their 8 bytes each)."""
    record = deserialize_record(key, value)
    assert record is not None and record.value is not None
    written = record.value
    for number in (written.producer_id, written.txn_last_update_timestamp, written.txn_start_timestamp):
        if number >= 0:  # -1 (no start yet) is the same on both sides
            value = value.replace(_INT64.pack(number), bytes(8))
    return key, value


def assert_same_bytes(kafka_records: list[tuple[bytes, bytes]], kfk_records: list[tuple[bytes, bytes]]) -> None:
    kafka = [normalised(*record) for record in kafka_records]
    kfk = [normalised(*record) for record in kfk_records]
    differences = [f"{state}:\n  Kafka: {expected[1].hex()}\n  kfk:   {actual[1].hex()}"
                   for state, expected, actual in zip(STATES, kafka, kfk) if expected != actual]
    assert not differences and len(kfk) == len(kafka), "\n".join(differences) or f"{len(kfk)} records from kfk"


def decoded(records: list[tuple[bytes, bytes]]) -> list:
    return [deserialize_record(*record).value for record in records]


def test_transaction_state_values_are_kafkas_bytes(kfk_written_log_dir: WrittenLogDir,
                                                   apache_kafka_written_log_dir: WrittenLogDir) -> None:
    kafka = transaction_state_records(apache_kafka_written_log_dir.path, TRANSACTIONAL_ID)
    assert [value.state.state_name for value in decoded(kafka)] == STATES
    # No partition list, one tagged field (PreviousProducerId; the client's transaction version is 0): 45 bytes.
    assert {len(value) for (_, value), state in zip(kafka, STATES) if state.startswith(("Empty", "Complete"))} == {45}
    assert_same_bytes(kafka, transaction_state_records(kfk_written_log_dir.path, TRANSACTIONAL_ID))


def _run_java_workload(bootstrap: str, log_dir: Path, classes: Path, transactional_id: str) -> list:
    topic = f"{transactional_id}-topic"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the result arrives
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    result = run_java("TransactionalWorkload", [bootstrap, transactional_id, topic], extra_classpath=[classes])
    assert result.returncode == 0, result.stderr[-4000:]
    # The producer has its answers once the Prepare* records are written; each Complete* record follows.
    deadline = time.monotonic() + 30
    while True:
        records = transaction_state_records(log_dir, transactional_id)
        if len(records) >= len(STATES) or time.monotonic() > deadline:
            return records
        time.sleep(0.2)


def test_transaction_version_2_values_are_kafkas_bytes(apache_kafka: ApacheKafka, kfk_broker_process: BrokerProcess,
                                                       tmp_path: Path) -> None:
    source = tmp_path / "TransactionalWorkload.java"
    source.write_text(JAVA_WORKLOAD)
    classes = compile_java(source)
    transactional_id = f"tv2-{uuid.uuid4().hex[:8]}"  # the Apache Kafka node is shared with other tests
    kafka = _run_java_workload(apache_kafka.bootstrap_server, apache_kafka.log_dir, classes, transactional_id)
    values = decoded(kafka)
    assert [value.state.state_name for value in values] == STATES
    # Transaction version 2: every commit and abort bumps the epoch, and records the client's version.
    assert [value.producer_epoch for value in values] == [0, 0, 1, 1, 1, 2, 2, 2, 3, 3]
    assert [value.client_transaction_version for value in values] == [0] + [2] * 9
    kfk = _run_java_workload(kfk_broker_process.bootstrap_servers, kfk_broker_process.log_dir, classes,
                             transactional_id)
    assert_same_bytes(kafka, kfk)
