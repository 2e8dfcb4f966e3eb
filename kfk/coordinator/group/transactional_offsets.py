"""Transactional offset commits waiting for their transaction's outcome (Kafka's pendingTransactionalOffsets and
openTransactionsByGroup), per group and producer id.

A TxnOffsetCommit writes ordinary offset commit records, but in a transactional batch of the producer (its producer
id and epoch). Those offsets belong to the group only once the transaction coordinator has written the producer's
COMMIT marker to the group's __consumer_offsets partition; an ABORT marker drops them. Until then they are pending
here: invisible to OffsetFetch, reported as UNSTABLE_OFFSET_COMMIT to a fetch that requires stable offsets, and
keeping their group and partitions from expiring.

An entry is pending from the moment the request is accepted (so a fetch that requires stable offsets cannot miss a
commit being written); `record_order` is None until its record is committed to the log, then its place in the log
order (see OffsetMetadataManager: the later record of a partition wins when a transaction commits).
"""

from __future__ import annotations

import dataclasses

from kfk.coordinator.group.record_serde import CommittedOffset

TopicPartitionKey = tuple[str, int]


@dataclasses.dataclass(eq=False, slots=True)
class PendingOffset:
    """One pending transactional offset. Compared by identity: a write completing finds out whether its entry was
    replaced or resolved meanwhile."""

    offset: CommittedOffset
    record_order: int | None = None


class PendingTransactionalOffsets:
    def __init__(self) -> None:
        #: group id -> producer id -> (topic, partition) -> the latest pending offset of that producer.
        self._by_group: dict[str, dict[int, dict[TopicPartitionKey, PendingOffset]]] = {}

    def put(self, group_id: str, producer_id: int, topic: str, partition: int, pending: PendingOffset) -> None:
        self._by_group.setdefault(group_id, {}).setdefault(producer_id, {})[(topic, partition)] = pending

    def get(self, group_id: str, producer_id: int, topic: str, partition: int) -> PendingOffset | None:
        return self._by_group.get(group_id, {}).get(producer_id, {}).get((topic, partition))

    def discard(self, group_id: str, producer_id: int, topic: str, partition: int, pending: PendingOffset) -> None:
        """Drop `pending` if it is still the producer's entry for the partition (its write failed)."""
        if self.get(group_id, producer_id, topic, partition) is not pending:
            return
        producers = self._by_group[group_id]
        del producers[producer_id][(topic, partition)]
        if not producers[producer_id]:
            del producers[producer_id]
        if not producers:
            del self._by_group[group_id]

    def take(self, group_id: str, producer_id: int) -> dict[TopicPartitionKey, PendingOffset]:
        """Remove and return what the producer has pending for the group (its transaction ended)."""
        producers = self._by_group.get(group_id)
        if producers is None:
            return {}
        taken = producers.pop(producer_id, {})
        if not producers:
            del self._by_group[group_id]
        return taken

    def group_ids(self) -> list[str]:
        return list(self._by_group)

    def groups_of_producer(self, producer_id: int) -> list[str]:
        return [group_id for group_id, producers in self._by_group.items() if producer_id in producers]

    def has_group(self, group_id: str) -> bool:
        return group_id in self._by_group

    def has_partition(self, group_id: str, topic: str, partition: int) -> bool:
        return any((topic, partition) in offsets for offsets in self._by_group.get(group_id, {}).values())

    def partitions_of(self, group_id: str) -> set[TopicPartitionKey]:
        return {key for offsets in self._by_group.get(group_id, {}).values() for key in offsets}

    def remove_partition(self, group_id: str, topic: str, partition: int) -> None:
        """An offset tombstone: every producer's pending offset of the partition goes too (as in Kafka)."""
        producers = self._by_group.get(group_id)
        if producers is None:
            return
        for producer_id in list(producers):
            producers[producer_id].pop((topic, partition), None)
            if not producers[producer_id]:
                del producers[producer_id]
        if not producers:
            del self._by_group[group_id]

    def remove_group(self, group_id: str) -> None:
        self._by_group.pop(group_id, None)
