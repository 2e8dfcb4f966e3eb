"""DelayedFetch: a fetch waiting for min_bytes of data or max_wait_ms (Kafka's DelayedFetch).

A consumer's long poll: the first read found less than min_bytes, so the request waits, parked on its partitions.
Appends and high-watermark moves on those partitions call `try_complete`, which completes the fetch when the bytes
now readable (up to the bound of its isolation level) reach min_bytes, or at once when something about a partition
changed under it (no longer hosted, no longer leader, leader epoch moved, log truncated below the fetch offset). At
completion — condition or deadline — the partitions are read again and that read is the response.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kfk.common.structs import TopicPartition
from kfk.errors import KafkaError
from kfk.replication.fetch_params import FetchParams, FetchPartitionRequest, LogReadResult
from kfk.replication.partition import Partition
from kfk.replication.purgatory import DelayedOperation
from kfk.storage.fetch_data_info import FetchIsolation

ReadFromLocalLog = Callable[[FetchParams, list[FetchPartitionRequest]], list[LogReadResult]]


class DelayedFetch(DelayedOperation):
    def __init__(self, deadline_ms: int, params: FetchParams, partitions: list[FetchPartitionRequest],
                 get_partition: Callable[[TopicPartition], Partition | None], read_from_local_log: ReadFromLocalLog,
                 future: asyncio.Future | None = None) -> None:
        super().__init__(deadline_ms)
        self.params = params
        self.partitions = partitions
        self.get_partition = get_partition
        self.read_from_local_log = read_from_local_log
        self.future = future
        self.leader_epochs = {request.topic_partition: self._leader_epoch(request.topic_partition)
                              for request in partitions}

    def _leader_epoch(self, topic_partition: TopicPartition) -> int | None:
        partition = self.get_partition(topic_partition)
        return None if partition is None else partition.leader_epoch

    def try_complete(self) -> bool:
        params = self.params
        isolation = params.isolation
        accumulated = 0
        for request in self.partitions:
            partition = self.get_partition(request.topic_partition)
            if partition is None or partition.leader_epoch != self.leader_epochs[request.topic_partition]:
                return self.force_complete()  # gone, or a new leader epoch: answer now with what the read finds
            if not params.is_from_follower and not partition.is_leader:
                return self.force_complete()
            log = partition.log
            if request.fetch_offset > log.log_end_offset:
                return self.force_complete()  # truncated below the fetch offset: the read answers out of range
            if isolation is FetchIsolation.LOG_END:
                end_offset = log.log_end_offset
            elif isolation is FetchIsolation.HIGH_WATERMARK:
                end_offset = log.high_watermark
            else:
                end_offset = log.last_stable_offset
            if end_offset <= request.fetch_offset:
                continue
            if params.min_bytes <= 1:
                return self.force_complete()  # any batch is at least one byte
            try:
                region = log.read(request.fetch_offset, request.partition_max_bytes, isolation, True).records
            except KafkaError:
                return self.force_complete()  # e.g. the log start moved past the fetch offset
            accumulated += min(len(region), request.partition_max_bytes)
            if accumulated >= params.min_bytes:
                return self.force_complete()
        return False

    def on_complete(self) -> None:
        try:
            results = self.read_from_local_log(self.params, self.partitions)
        except Exception as error:  # noqa: BLE001 - the waiting request must hear of it, not hang
            if self.future is not None and not self.future.done():
                self.future.set_exception(error)
            return
        if self.future is not None and not self.future.done():
            self.future.set_result(results)
