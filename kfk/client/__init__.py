"""kfk's Kafka client: Producer, Consumer and Admin, speaking only the Kafka protocol (so they work against any
Kafka-compatible broker, Apache Kafka included).

    from kfk.client import Producer, Consumer, Admin, NewTopic, TopicPartition
"""

from kfk.client.admin import (
    Admin,
    AlterConfigOp,
    AlterConfigOpType,
    ConfigResource,
    NewTopic,
)
from kfk.client.consumer import Consumer, ConsumerRebalanceListener, ConsumerRecords
from kfk.client.producer import FutureRecordMetadata, Producer
from kfk.client.structs import ConsumerRecord, OffsetAndTimestamp, RecordMetadata
from kfk.common.config_types import ConfigEntry, ConfigResourceType, ConfigSource
from kfk.common.structs import OffsetAndMetadata, TopicPartition

__all__ = [
    "Admin",
    "AlterConfigOp",
    "AlterConfigOpType",
    "ConfigEntry",
    "ConfigResource",
    "ConfigResourceType",
    "ConfigSource",
    "Consumer",
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
