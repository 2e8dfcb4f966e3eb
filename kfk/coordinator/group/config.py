"""GroupCoordinatorConfig: the broker properties the group coordinator reads (Kafka's GroupCoordinatorConfig)."""

from __future__ import annotations

import dataclasses

from kfk.config import BrokerConfig

#: How long a new member's JoinGroup may wait for the rebalance before it is dropped (Kafka's internal default for
#: group.new.member.join.timeout: clients that time out and retry must not pile up as phantom members).
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclasses.dataclass(frozen=True, slots=True)
class GroupCoordinatorConfig:
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 100 * 1024 * 1024
    offsets_retention_ms: int = 7 * 24 * 60 * 60 * 1000
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4096
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 2**31 - 1
    new_member_join_timeout_ms: int = NEW_MEMBER_JOIN_TIMEOUT_MS
    #: How long a coordinator write (acks=-1) may wait for the in-sync replicas (Kafka's offsets.commit.timeout.ms).
    offsets_commit_timeout_ms: int = 5000

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> GroupCoordinatorConfig:
        return cls(
            offsets_topic_num_partitions=config.offsets_topic_num_partitions,
            offsets_topic_replication_factor=config.offsets_topic_replication_factor,
            offsets_topic_segment_bytes=config.offsets_topic_segment_bytes,
            offsets_retention_ms=config.offsets_retention_minutes * 60 * 1000,
            offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
            offset_metadata_max_bytes=config.offset_metadata_max_bytes,
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            max_size=config.group_max_size,
            offsets_commit_timeout_ms=config.offsets_commit_timeout_ms,
        )
