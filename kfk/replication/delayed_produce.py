"""DelayedProduce: an acks=all produce waiting until every in-sync replica has its records (Kafka's DelayedProduce).

The records are already in the leader's log when the operation is created. For each partition that appended without
error it waits until the high watermark reaches the end of the appended records; a partition whose leadership moved
meanwhile completes with NOT_LEADER_OR_FOLLOWER. Partitions still waiting at the deadline (the request's timeout_ms)
are answered REQUEST_TIMED_OUT — their records stay in the log, as in Kafka. On one node the high watermark follows
the log end offset at once, so the operation normally completes when it is created, without waiting.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode
from kfk.replication.partition import Partition
from kfk.replication.purgatory import DelayedOperation


@dataclasses.dataclass(slots=True)
class ProducePartitionResult:
    """One partition's answer to a produce (the fields of Kafka's PartitionProduceResponse)."""

    error: ErrorCode
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: list[tuple[int, str | None]] = dataclasses.field(default_factory=list)
    error_message: str | None = None


@dataclasses.dataclass(slots=True)
class ProducePartitionStatus:
    required_offset: int  # the offset after the appended records: the high watermark must reach it
    result: ProducePartitionResult
    acks_pending: bool = False


class DelayedProduce(DelayedOperation):
    def __init__(self, deadline_ms: int, statuses: dict[TopicPartition, ProducePartitionStatus],
                 get_partition: Callable[[TopicPartition], Partition | None],
                 future: asyncio.Future | None = None) -> None:
        super().__init__(deadline_ms)
        self.statuses = statuses
        self.get_partition = get_partition
        self.future = future
        for status in statuses.values():
            if status.result.error == ErrorCode.NONE:
                status.acks_pending = True
                status.result.error = ErrorCode.REQUEST_TIMED_OUT  # what the deadline leaves behind
            else:
                status.acks_pending = False

    def try_complete(self) -> bool:
        for topic_partition, status in self.statuses.items():
            if not status.acks_pending:
                continue
            partition = self.get_partition(topic_partition)
            if partition is None:
                reached, error = False, ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                reached, error = partition.check_enough_replicas_reach_offset(status.required_offset)
            if error != ErrorCode.NONE:
                status.acks_pending = False
                status.result.error = error
            elif reached:
                status.acks_pending = False
                status.result.error = ErrorCode.NONE
        if any(status.acks_pending for status in self.statuses.values()):
            return False
        return self.force_complete()

    def on_complete(self) -> None:
        if self.future is not None and not self.future.done():
            self.future.set_result({tp: status.result for tp, status in self.statuses.items()})
