"""RoundRobinAssignor ("roundrobin"): all subscribed partitions, sorted by topic then partition, dealt in turn to
the members (sorted as the range assignor sorts them), skipping members that do not subscribe to a partition's
topic. Balanced to within one partition when every member subscribes to the same topics.
"""

from __future__ import annotations

from collections.abc import Mapping

from kfk.client.consumer.assignors.protocol import RebalanceProtocol, Subscription
from kfk.client.consumer.assignors.range import member_sort_key
from kfk.common.structs import TopicPartition

__all__ = ["RoundRobinAssignor"]


class RoundRobinAssignor:
    name = "roundrobin"
    supported_protocols = (RebalanceProtocol.EAGER,)

    def subscription_user_data(self, topics: list[str], owned: list[TopicPartition], generation_id: int) -> None:
        return None

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        members = sorted(subscriptions, key=lambda m: member_sort_key(m, subscriptions))
        if not members:
            return assignment
        topics = sorted({topic for subscription in subscriptions.values() for topic in subscription.topics})
        subscribed = {member: set(subscriptions[member].topics) for member in members}
        position = 0
        for topic in topics:
            for partition in range(partitions_per_topic.get(topic, 0)):
                while topic not in subscribed[members[position % len(members)]]:
                    position += 1
                assignment[members[position % len(members)]].append(TopicPartition(topic, partition))
                position += 1
        return assignment

    def on_assignment(self, assignment: list[TopicPartition], generation_id: int) -> None:
        pass
