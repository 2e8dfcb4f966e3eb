"""The producer: Producer (public API), RecordAccumulator (batches), Sender (network side), the murmur2 and sticky
partitioners, and the idempotence state."""

from kfk.client.producer.future import FutureRecordMetadata
from kfk.client.producer.partitioner import murmur2, partition_for_key
from kfk.client.producer.producer import Producer

__all__ = ["Producer", "FutureRecordMetadata", "murmur2", "partition_for_key"]
