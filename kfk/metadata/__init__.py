"""The cluster image: brokers, topics, partitions, configs. Written only by the controller, read by everyone."""

from kfk.metadata.image import BrokerRegistration, Endpoint, MetadataImage, PartitionRegistration, TopicImage

__all__ = [
    "BrokerRegistration",
    "Endpoint",
    "MetadataImage",
    "PartitionRegistration",
    "TopicImage",
]
