"""kfk's Kafka client: Producer, Consumer and Admin, speaking only the Kafka protocol (so they work against any
Kafka-compatible broker, Apache Kafka included).

    from kfk.client import Producer, Consumer, Admin, NewTopic, TopicPartition
"""

from kfk.client.admin import Admin
from kfk.client.consumer import Consumer, ConsumerRebalanceListener, ConsumerRecords
from kfk.client.producer import FutureRecordMetadata, Producer
from kfk.client.structs import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigResourceType,
    ConsumerGroupMetadata,
    ConsumerRecord,
    ElectionType,
    NewPartitionReassignment,
    NewTopic,
    OffsetAndMetadata,
    OffsetAndTimestamp,
    PartitionReassignment,
    RecordMetadata,
    TopicPartition,
)

__all__ = [
    "Admin",
    "AlterConfigOp",
    "AlterConfigOpType",
    "ConfigResource",
    "ConfigResourceType",
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
    "TopicPartition",
]
