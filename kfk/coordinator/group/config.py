"""GroupCoordinatorConfig: the broker properties the group coordinator reads (Kafka's GroupCoordinatorConfig),
checked as Kafka checks them when the coordinator starts (the consumer protocol's timeouts within their bounds)."""

from __future__ import annotations

import dataclasses

from kfk.config import BrokerConfig
from kfk.errors import InvalidConfigurationError

#: group.coordinator.rebalance.protocols' names of the two group protocols.
CLASSIC_PROTOCOL = "classic"
CONSUMER_PROTOCOL = "consumer"

#: group.consumer.assignors takes Kafka's short names or its assignor classes.
ASSIGNOR_CLASS_NAMES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}

#: group.consumer.migration.policy's values (Kafka's ConsumerGroupMigrationPolicy): which of the online conversions
#: (a classic group upgraded by its first consumer-protocol member, a consumer group downgraded when its last one
#: leaves) the coordinator makes.
MIGRATION_POLICIES = ("disabled", "downgrade", "upgrade", "bidirectional")

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
    rebalance_protocols: tuple[str, ...] = (CLASSIC_PROTOCOL, CONSUMER_PROTOCOL)
    consumer_group_assignors: tuple[str, ...] = ("uniform", "range")
    consumer_group_session_timeout_ms: int = 45000
    consumer_group_heartbeat_interval_ms: int = 5000
    consumer_group_max_size: int = 2**31 - 1
    #: group.consumer.migration.policy: which online conversions between the protocols are allowed.
    consumer_group_migration_policy: str = "bidirectional"

    @property
    def consumer_protocol_enabled(self) -> bool:
        """Whether ConsumerGroupHeartbeat and ConsumerGroupDescribe are served: the one place to add the
        group.version feature's check (Kafka serves the consumer protocol when group.version >= 1 and
        group.coordinator.rebalance.protocols names it)."""
        return CONSUMER_PROTOCOL in self.rebalance_protocols

    @property
    def online_upgrade_enabled(self) -> bool:
        return self.consumer_group_migration_policy in ("upgrade", "bidirectional")

    @property
    def online_downgrade_enabled(self) -> bool:
        return self.consumer_group_migration_policy in ("downgrade", "bidirectional")

    @classmethod
    def from_broker_config(cls, config: BrokerConfig) -> GroupCoordinatorConfig:
        validate_consumer_group_config(config)
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
            rebalance_protocols=tuple(protocol.strip().lower() for protocol in
                                      config.group_coordinator_rebalance_protocols),
            consumer_group_assignors=tuple(_assignor_name(name) for name in config.group_consumer_assignors),
            consumer_group_session_timeout_ms=config.group_consumer_session_timeout_ms,
            consumer_group_heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
            consumer_group_max_size=config.group_consumer_max_size,
            consumer_group_migration_policy=config.group_consumer_migration_policy.strip().lower(),
        )


def _assignor_name(name: str) -> str:
    name = name.strip()
    short = ASSIGNOR_CLASS_NAMES.get(name, name)
    if short not in ASSIGNOR_CLASS_NAMES.values():
        raise InvalidConfigurationError(
            f"Invalid value {name} for configuration group.consumer.assignors: kfk has the assignors "
            f"{', '.join(ASSIGNOR_CLASS_NAMES.values())} (Kafka's UniformAssignor and RangeAssignor)")
    return short


def validate_consumer_group_config(config: BrokerConfig) -> None:
    """Kafka's GroupCoordinatorConfig requirements on the consumer protocol's timeouts (the broker refuses to start
    otherwise)."""
    _require_between("group.consumer.session.timeout.ms", config.group_consumer_session_timeout_ms,
                     "group.consumer.min.session.timeout.ms", config.group_consumer_min_session_timeout_ms,
                     "group.consumer.max.session.timeout.ms", config.group_consumer_max_session_timeout_ms)
    _require_between("group.consumer.heartbeat.interval.ms", config.group_consumer_heartbeat_interval_ms,
                     "group.consumer.min.heartbeat.interval.ms", config.group_consumer_min_heartbeat_interval_ms,
                     "group.consumer.max.heartbeat.interval.ms", config.group_consumer_max_heartbeat_interval_ms)
    if config.group_consumer_heartbeat_interval_ms >= config.group_consumer_session_timeout_ms:
        raise InvalidConfigurationError("group.consumer.heartbeat.interval.ms must be less than "
                                        "group.consumer.session.timeout.ms")
    unknown = [protocol for protocol in config.group_coordinator_rebalance_protocols
               if protocol.strip().lower() not in (CLASSIC_PROTOCOL, CONSUMER_PROTOCOL)]
    if unknown:
        raise InvalidConfigurationError(f"Invalid value {unknown[0]} for configuration "
                                        f"group.coordinator.rebalance.protocols: String must be one of: "
                                        f"{CLASSIC_PROTOCOL}, {CONSUMER_PROTOCOL}")
    for name in config.group_consumer_assignors:
        _assignor_name(name)
    if config.group_consumer_migration_policy.strip().lower() not in MIGRATION_POLICIES:
        raise InvalidConfigurationError(
            f"Invalid value {config.group_consumer_migration_policy} for configuration "
            f"group.consumer.migration.policy: String must be one of (case insensitive): "
            f"{', '.join(policy.upper() for policy in MIGRATION_POLICIES)}")


def _require_between(key: str, value: int, minimum: str, minimum_value: int, maximum: str,
                     maximum_value: int) -> None:
    if value < minimum_value:
        raise InvalidConfigurationError(f"{key} must be greater than or equal to {minimum}")
    if value > maximum_value:
        raise InvalidConfigurationError(f"{key} must be less than or equal to {maximum}")
