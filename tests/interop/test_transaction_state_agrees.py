"""kfk's transaction coordinator writes the __transaction_state records Apache Kafka 4.0.2 writes, byte for byte.

Both brokers ran the same transactional workload (tests/interop/conftest.py: a transactional producer's
InitProducerId, then a committed, an aborted and a committed transaction). Each record's key and value are compared
as bytes once what legitimately differs between two runs is zeroed: the producer id (each broker hands out its own)
and the timestamps (txnLastUpdateTimestamp, txnStartTimestamp). Everything else must be the same bytes: the value
version, the epochs, the states, the partition lists, and which tagged fields are written (Kafka 4.0.2 writes
neither PreviousProducerId nor NextProducerId for these transitions).
"""

from __future__ import annotations

import mmap
import struct

from kfk.coordinator.transaction.record_serde import deserialize_record
from kfk.records import iter_batches

from .conftest import TRANSACTIONAL_ID, WrittenLogDir

_INT64 = struct.Struct(">q")


def transaction_state_records(log_dir: WrittenLogDir) -> list[tuple[bytes, bytes]]:
    """(key, value) of every record in the one non-empty __transaction_state partition, in offset order."""
    logs = log_dir.non_empty_logs("__transaction_state")
    assert len(logs) == 1, logs
    with open(logs[0], "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        return [(bytes(record.key), bytes(record.value)) for batch in iter_batches(data) for record in batch]


def normalised(key: bytes, value: bytes) -> tuple[bytes, bytes]:
    """The value with its producer id and timestamps zeroed where they are written (their 8 bytes each)."""
    record = deserialize_record(key, value)
    assert record is not None and record.value is not None
    assert record.transactional_id == TRANSACTIONAL_ID
    written = record.value
    for number in (written.producer_id, written.txn_last_update_timestamp, written.txn_start_timestamp):
        if number >= 0:  # -1 (no start yet) is the same on both sides
            value = value.replace(_INT64.pack(number), bytes(8))
    return key, value


def test_transaction_state_values_are_kafkas_bytes(kfk_written_log_dir: WrittenLogDir,
                                                   apache_kafka_written_log_dir: WrittenLogDir) -> None:
    kafka = [normalised(*record) for record in transaction_state_records(apache_kafka_written_log_dir)]
    kfk = [normalised(*record) for record in transaction_state_records(kfk_written_log_dir)]
    states = [deserialize_record(*record).value.state.state_name for record in kafka]
    assert states == ["Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "Ongoing", "PrepareAbort",
                      "CompleteAbort", "Ongoing", "PrepareCommit", "CompleteCommit"]
    # No partition list and no tagged field but the client's transaction version (0: not written).
    assert {len(value) for state, (_, value) in zip(states, kafka) if state.startswith(("Empty", "Complete"))} == {35}
    differences = [f"{state}:\n  Kafka: {expected[1].hex()}\n  kfk:   {actual[1].hex()}"
                   for state, expected, actual in zip(states, kafka, kfk) if expected != actual]
    assert not differences and len(kfk) == len(kafka), "\n".join(differences) or f"{len(kfk)} records from kfk"
