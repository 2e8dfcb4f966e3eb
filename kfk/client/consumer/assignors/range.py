"""RangeAssignor ("range"): per topic, consecutive ranges of partitions to the members that subscribe to it.

For a topic with P partitions and C subscribers (sorted by group.instance.id if they have one, else member id, as
Java sorts them), each gets P // C partitions and the first P % C get one more. Members subscribing to the same
topics get the same partition numbers of every topic (co-partitioned joins rely on that); the price is imbalance
when many topics have fewer partitions than members.
"""

from __future__ import annotations

from collections.abc import Mapping

from kfk.client.consumer.assignors.protocol import RebalanceProtocol, Subscription
from kfk.common.structs import TopicPartition

__all__ = ["RangeAssignor", "member_sort_key"]


def member_sort_key(member_id: str, subscriptions: Mapping[str, Subscription]) -> tuple:
    """Static members first by instance id, then dynamic members by member id (Java's MemberInfo ordering)."""
    instance_id = subscriptions[member_id].group_instance_id
    return (0, instance_id, member_id) if instance_id is not None else (1, member_id, "")


class RangeAssignor:
    name = "range"
    supported_protocols = (RebalanceProtocol.EAGER,)

    def subscription_user_data(self, topics: list[str], owned: list[TopicPartition], generation_id: int) -> None:
        return None

    def assign(self, partitions_per_topic: Mapping[str, int],
               subscriptions: Mapping[str, Subscription]) -> dict[str, list[TopicPartition]]:
        assignment: dict[str, list[TopicPartition]] = {member: [] for member in subscriptions}
        subscribers: dict[str, list[str]] = {}
        for member, subscription in subscriptions.items():
            for topic in subscription.topics:
                subscribers.setdefault(topic, []).append(member)
        for topic in sorted(subscribers):
            count = partitions_per_topic.get(topic)
            if not count:
                continue
            members = sorted(subscribers[topic], key=lambda m: member_sort_key(m, subscriptions))
            per_member, extra = divmod(count, len(members))
            for index, member in enumerate(members):
                start = per_member * index + min(index, extra)
                length = per_member + (1 if index < extra else 0)
                assignment[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
        return assignment

    def on_assignment(self, assignment: list[TopicPartition], generation_id: int) -> None:
        pass
