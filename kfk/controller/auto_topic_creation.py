"""What a topic gets when it is created because a client asked for it (Kafka's AutoTopicCreationManager).

A Metadata request for an unknown topic with auto.create.topics.enable creates it: an ordinary topic with the
broker's num.partitions and default.replication.factor; the internal topics of the coordinators with their own
sizes and the configs their coordinators require (compacted, and for __transaction_state uncompressed with unclean
election off and its own min ISR; __share_group_state kept whole, not compacted), as Kafka creates them on first use.
"""

from __future__ import annotations

from kfk.common.internal_topics import (
    GROUP_METADATA_TOPIC_NAME,
    SHARE_GROUP_STATE_TOPIC_NAME,
    TRANSACTION_STATE_TOPIC_NAME,
)
from kfk.config import MIN_SEGMENT_BYTES, BrokerConfig
from kfk.protocol.messages.create_topics import CreateTopicsRequest

CreatableTopic = CreateTopicsRequest.CreatableTopic
CreatableTopicConfig = CreateTopicsRequest.CreatableTopicConfig


def _configs(values: dict[str, object]) -> list[CreatableTopicConfig]:
    return [CreatableTopicConfig(name=name, value=str(value)) for name, value in values.items()]


def _segment_bytes(segment_bytes: int) -> dict[str, object]:
    """An internal topic's segment size: offsets.topic.segment.bytes may be below segment.bytes' 1 MiB floor
    (small segments, so that compaction shows in tests); such a value goes in internal.segment.bytes."""
    if segment_bytes < MIN_SEGMENT_BYTES:
        return {"internal.segment.bytes": segment_bytes}
    return {"segment.bytes": segment_bytes}


def creatable_topic(name: str, config: BrokerConfig) -> CreatableTopic:
    if name == GROUP_METADATA_TOPIC_NAME:
        return CreatableTopic(name=name, num_partitions=config.offsets_topic_num_partitions,
                              replication_factor=config.offsets_topic_replication_factor,
                              configs=_configs({"cleanup.policy": "compact", "compression.type": "producer",
                                                **_segment_bytes(config.offsets_topic_segment_bytes)}))
    if name == TRANSACTION_STATE_TOPIC_NAME:
        return CreatableTopic(name=name, num_partitions=config.transaction_state_log_num_partitions,
                              replication_factor=config.transaction_state_log_replication_factor,
                              configs=_configs({"unclean.leader.election.enable": "false",
                                                "compression.type": "uncompressed", "cleanup.policy": "compact",
                                                "min.insync.replicas": config.transaction_state_log_min_isr}))
    if name == SHARE_GROUP_STATE_TOPIC_NAME:
        # Not compacted: the share coordinator's updates only mean something after their snapshot, so the log is
        # kept whole (retention.ms -1), as Kafka's share coordinator creates it.
        return CreatableTopic(name=name, num_partitions=config.share_coordinator_state_topic_num_partitions,
                              replication_factor=config.share_coordinator_state_topic_replication_factor,
                              configs=_configs({"cleanup.policy": "delete", "compression.type": "producer",
                                                "retention.ms": -1,
                                                "min.insync.replicas": config.share_coordinator_state_topic_min_isr,
                                                **_segment_bytes(config.share_coordinator_state_topic_segment_bytes)}))
    return CreatableTopic(name=name, num_partitions=config.num_partitions,
                          replication_factor=config.default_replication_factor)
