"""TransactionCoordinatorConfig: the broker properties the transaction coordinator reads (Kafka's TransactionConfig,
TransactionLogConfig and TransactionStateManagerConfig)."""

from __future__ import annotations

import dataclasses

from kfk.config import BrokerConfig

#: How long a failed marker write or a Complete* write waits before it is tried again (Kafka's inter-broker
#: retry.backoff.ms default).
RETRY_BACKOFF_MS = 100
#: How long a __transaction_state write (acks=-1) may wait for the in-sync replicas (Kafka's request timeout).
WRITE_TIMEOUT_MS = 30_000


@dataclasses.dataclass(frozen=True, slots=True)
class TransactionCoordinatorConfig:
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    transaction_state_log_segment_bytes: int = 100 * 1024 * 1024
    transaction_max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 7 * 24 * 60 * 60 * 1000
    abort_timed_out_transactions_interval_ms: int = 10_000
    remove_expired_transactional_ids_interval_ms: int = 3_600_000
    #: The cluster's finalized transaction.version feature level: from 1 records are written flexible
    #: (TransactionLogValue v1); from 2 clients may end transactions with an epoch bump (EndTxn v5+).
    transaction_version_level: int = 2
    #: AddOffsetsToTxn adds the group's __consumer_offsets partition: the group coordinator's partition count.
    offsets_topic_num_partitions: int = 50
    retry_backoff_ms: int = RETRY_BACKOFF_MS
    write_timeout_ms: int = WRITE_TIMEOUT_MS

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> TransactionCoordinatorConfig:
        return cls(
            transaction_state_log_num_partitions=config.transaction_state_log_num_partitions,
            transaction_state_log_replication_factor=config.transaction_state_log_replication_factor,
            transaction_state_log_min_isr=config.transaction_state_log_min_isr,
            transaction_state_log_segment_bytes=config.transaction_state_log_segment_bytes,
            transaction_max_timeout_ms=config.transaction_max_timeout_ms,
            transactional_id_expiration_ms=config.transactional_id_expiration_ms,
            offsets_topic_num_partitions=config.offsets_topic_num_partitions,
            abort_timed_out_transactions_interval_ms=config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            remove_expired_transactional_ids_interval_ms=
            config.transaction_remove_expired_transaction_cleanup_interval_ms,
        )
