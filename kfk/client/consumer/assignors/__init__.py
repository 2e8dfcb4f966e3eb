"""Partition assignors for consumer groups, by Kafka's protocol names: range, roundrobin, sticky,
cooperative-sticky; and the consumer protocol's subscription and assignment encodings."""

from kfk.client.consumer.assignors.protocol import (
    CONSUMER_PROTOCOL_TYPE,
    ConsumerPartitionAssignor,
    RebalanceProtocol,
    Subscription,
    decode_assignment,
    decode_assignment_user_data,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from kfk.client.consumer.assignors.range import RangeAssignor
from kfk.client.consumer.assignors.round_robin import RoundRobinAssignor
from kfk.client.consumer.assignors.sticky import CooperativeStickyAssignor, StickyAssignor

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "ConsumerPartitionAssignor",
    "RebalanceProtocol",
    "Subscription",
    "RangeAssignor",
    "RoundRobinAssignor",
    "StickyAssignor",
    "CooperativeStickyAssignor",
    "ASSIGNORS",
    "create_assignor",
    "decode_assignment",
    "decode_assignment_user_data",
    "decode_subscription",
    "encode_assignment",
    "encode_subscription",
]

ASSIGNORS: dict[str, type] = {
    RangeAssignor.name: RangeAssignor,
    RoundRobinAssignor.name: RoundRobinAssignor,
    StickyAssignor.name: StickyAssignor,
    CooperativeStickyAssignor.name: CooperativeStickyAssignor,
}


def create_assignor(name: str) -> ConsumerPartitionAssignor:
    """An assignor by its protocol name (partition.assignment.strategy also accepts Java's class names)."""
    short = {"org.apache.kafka.clients.consumer.RangeAssignor": "range",
             "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
             "org.apache.kafka.clients.consumer.StickyAssignor": "sticky",
             "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky"}.get(name, name)
    return ASSIGNORS[short]()
