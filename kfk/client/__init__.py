"""kfk's Kafka client: Producer, Consumer and Admin, speaking only the Kafka protocol (so they work against any
Kafka-compatible broker, Apache Kafka included).

    from kfk.client import Producer, Consumer, Admin, NewTopic, TopicPartition
"""

from kfk.client.admin import (
    Admin,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    ConfigResourceType,
    NewTopic,
)
from kfk.client.consumer import Consumer, ConsumerRebalanceListener, ConsumerRecords
from kfk.client.producer import FutureRecordMetadata, Producer
from kfk.client.structs import (
    ConsumerGroupMetadata,
    ConsumerRecord,
    OffsetAndMetadata,
    OffsetAndTimestamp,
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
    "FutureRecordMetadata",
    "NewTopic",
    "OffsetAndMetadata",
    "OffsetAndTimestamp",
    "Producer",
    "RecordMetadata",
    "TopicPartition",
]
