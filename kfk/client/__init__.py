"""kfk's Kafka client: Producer, Consumer, ShareConsumer and Admin, speaking only the Kafka protocol (so they work
against any Kafka-compatible broker, Apache Kafka included).

    from kfk.client import Producer, Consumer, Admin, NewTopic, TopicPartition
"""

from kfk.client.admin import Admin
from kfk.client.consumer import Consumer, ConsumerRebalanceListener, ConsumerRecords
from kfk.client.producer import FutureRecordMetadata, Producer
from kfk.client.share_consumer import AcknowledgeType, ShareConsumer, ShareConsumerRecord
from kfk.client.structs import (
    AlterConfigOp,
    AlterConfigOpType,
    ClientQuotaAlteration,
    ClientQuotaFilterComponent,
    ConfigResource,
    ConsumerGroupMetadata,
    ConsumerRecord,
    ElectionType,
    NewPartitionReassignment,
    NewTopic,
    OffsetAndTimestamp,
    PartitionReassignment,
    RecordMetadata,
)
from kfk.common.client_quotas import ClientQuotaEntity
from kfk.common.config_types import ConfigEntry, ConfigResourceType, ConfigSource
from kfk.common.structs import OffsetAndMetadata, TopicPartition

__all__ = [
    "AcknowledgeType",
    "Admin",
    "AlterConfigOp",
    "AlterConfigOpType",
    "ClientQuotaAlteration",
    "ClientQuotaEntity",
    "ClientQuotaFilterComponent",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "ConfigSource",
    "Consumer",
    "ConsumerGroupMetadata",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "ConsumerRecords",
    "ElectionType",
    "FutureRecordMetadata",
    "NewPartitionReassignment",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "PartitionReassignment",
    "Producer",
    "RecordMetadata",
    "ShareConsumer",
    "ShareConsumerRecord",
    "TopicPartition",
]
