"""__transaction_state records as Kafka writes them (TransactionLog).

Every record is one transactional id's whole state; the topic is compacted, so the last record of a key wins:
- key: int16 0 (the transaction log record type), then TransactionLogKey v0 (the transactional id);
- value: int16 version, then TransactionLogValue at that version; a null value is the tombstone of an expired id.
  Version 1 (flexible, with previous/next producer ids and the client's transaction version as tagged fields) is
  written once the cluster's transaction.version feature is 1 or more, version 0 before; both are read.
  A tagged field at its default (-1, or 0 for the transaction version) is not written, so an ordinary transaction's
  values are Apache Kafka 4.0.2's bytes (tests/interop/test_transaction_state_agrees.py). Kafka 4.0.2 never
  writes the previous and next producer ids (KAFKA-20310, fixed after 4.0); kfk writes them when they are set,
  only around a producer id rotation, so a coordinator that loads the partition mid-rotation can still finish it
  and recognise the client's retry.
An Empty state is written without a partition list (null), as Kafka does.

The coordinator of a transactional id is the leader of partition
`partition_for(transactional_id, transaction.state.log.num.partitions)` (kfk.coordinator.partitioning).
"""

from __future__ import annotations

import dataclasses
import struct
from collections import defaultdict

from kfk.common.structs import TopicPartition
from kfk.coordinator.transaction.metadata import TransactionState, TxnTransitMetadata
from kfk.errors import CorruptRecordError, KafkaError
from kfk.protocol.message import Buffer
from kfk.protocol.transaction_records.transaction_log_key import TransactionLogKey
from kfk.protocol.transaction_records.transaction_log_value import TransactionLogValue

#: The key's record type (Kafka's CoordinatorRecordType.TRANSACTION_LOG), also the key schema's version.
TRANSACTION_LOG_KEY_TYPE = 0

_INT16 = struct.Struct(">h")


def value_version_for(transaction_version_level: int) -> int:
    """TransactionLogValue version for the cluster's transaction.version: flexible (1) from level 1."""
    return 1 if transaction_version_level >= 1 else 0


def transaction_log_key(transactional_id: str) -> bytes:
    key = TransactionLogKey(transactional_id=transactional_id)
    return _INT16.pack(TRANSACTION_LOG_KEY_TYPE) + key.encode(TRANSACTION_LOG_KEY_TYPE)


def transaction_log_value(transit: TxnTransitMetadata, version: int) -> bytes:
    if transit.state is TransactionState.EMPTY and transit.topic_partitions:
        raise ValueError(f"An Empty transaction has no partitions: {transit}")
    partitions: list[TransactionLogValue.PartitionsSchema] | None = None
    if transit.state is not TransactionState.EMPTY:
        by_topic: dict[str, list[int]] = defaultdict(list)
        for topic, partition in sorted(transit.topic_partitions):
            by_topic[topic].append(partition)
        partitions = [TransactionLogValue.PartitionsSchema(topic=topic, partition_ids=ids)
                      for topic, ids in by_topic.items()]
    value = TransactionLogValue(
        producer_id=transit.producer_id,
        producer_epoch=transit.producer_epoch,
        transaction_timeout_ms=transit.txn_timeout_ms,
        transaction_status=transit.state.state_id,
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=transit.txn_last_update_timestamp,
        transaction_start_timestamp_ms=transit.txn_start_timestamp,
    )
    if version >= 1:  # tagged fields: absent from version 0
        value.previous_producer_id = transit.previous_producer_id
        value.next_producer_id = transit.next_producer_id
        value.client_transaction_version = transit.client_transaction_version
    return _INT16.pack(version) + value.encode(version)


@dataclasses.dataclass(frozen=True, slots=True)
class TransactionLogRecord:
    """A decoded record: the id's state (last producer epoch unknown, as Kafka loads it), or None (tombstone)."""

    transactional_id: str
    value: TxnTransitMetadata | None


def _read_version(buffer: Buffer, what: str) -> int:
    if len(buffer) < 2:
        raise CorruptRecordError(f"__transaction_state {what} of {len(buffer)} bytes has no version")
    return _INT16.unpack_from(buffer, 0)[0]


def deserialize_record(key: Buffer | None, value: Buffer | None) -> TransactionLogRecord | None:
    """One record of __transaction_state; None for a key type this version does not know (skipped on load, as
    Kafka does). CorruptRecordError for anything malformed."""
    if key is None:
        raise CorruptRecordError("__transaction_state record without a key")
    key_type = _read_version(key, "key")
    if key_type != TRANSACTION_LOG_KEY_TYPE:
        return None
    try:
        transactional_id = TransactionLogKey.decode(key, TRANSACTION_LOG_KEY_TYPE, 2).transactional_id
        if value is None:
            return TransactionLogRecord(transactional_id, None)
        version = _read_version(value, "value")
        if not TransactionLogValue.LOWEST_VERSION <= version <= TransactionLogValue.HIGHEST_VERSION:
            raise CorruptRecordError(f"Unknown TransactionLogValue version {version}")
        decoded = TransactionLogValue.decode(value, version, 2)
        state = TransactionState.from_id(decoded.transaction_status)
    except CorruptRecordError:
        raise
    except (KafkaError, ValueError, struct.error) as error:
        raise CorruptRecordError(f"Malformed __transaction_state record: {error}") from error
    partitions: frozenset[TopicPartition] = frozenset()
    if state is not TransactionState.EMPTY and decoded.transaction_partitions:
        partitions = frozenset(TopicPartition(entry.topic, partition)
                               for entry in decoded.transaction_partitions for partition in entry.partition_ids)
    return TransactionLogRecord(transactional_id, TxnTransitMetadata(
        producer_id=decoded.producer_id,
        previous_producer_id=decoded.previous_producer_id,
        next_producer_id=decoded.next_producer_id,
        producer_epoch=decoded.producer_epoch,
        last_producer_epoch=-1,
        txn_timeout_ms=decoded.transaction_timeout_ms,
        state=state,
        topic_partitions=partitions,
        txn_start_timestamp=decoded.transaction_start_timestamp_ms,
        txn_last_update_timestamp=decoded.transaction_last_update_timestamp_ms,
        client_transaction_version=decoded.client_transaction_version,
    ))
