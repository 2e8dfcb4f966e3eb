"""The consumer: Consumer (public API), Fetcher, SubscriptionState, ConsumerCoordinator (group membership,
heartbeats, commits) and the partition assignors."""

from kfk.client.consumer.consumer import Consumer, ConsumerRecords
from kfk.client.consumer.coordinator import ConsumerRebalanceListener

__all__ = ["Consumer", "ConsumerRecords", "ConsumerRebalanceListener"]
