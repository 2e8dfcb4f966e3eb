"""What a fetch asks of the replica manager and what it gets back, free of wire versions (Kafka's FetchParams,
FetchRequest.PartitionData and LogReadResult)."""

from __future__ import annotations

import dataclasses

from kfk.common.structs import TopicPartition
from kfk.errors import ErrorCode
from kfk.storage.fetch_data_info import EMPTY_REGION, FetchIsolation, FileRegion
from kfk.storage.transaction_index import AbortedTxn

#: replica_id of a consumer's fetch (a follower sends its broker id).
CONSUMER_REPLICA_ID = -1
READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclasses.dataclass(frozen=True, slots=True)
class FetchParams:
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    #: Fetch v0-v2 have no "at least one batch" rule: a first batch above the size limit comes back cut short.
    hard_max_bytes_limit: bool = False

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def isolation(self) -> FetchIsolation:
        if self.is_from_follower:
            return FetchIsolation.LOG_END
        if self.isolation_level == READ_COMMITTED:
            return FetchIsolation.TXN_COMMITTED
        return FetchIsolation.HIGH_WATERMARK


@dataclasses.dataclass(frozen=True, slots=True)
class FetchPartitionRequest:
    topic_partition: TopicPartition
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # a follower's own log start offset


@dataclasses.dataclass(frozen=True, slots=True)
class LogReadResult:
    """One partition's part of a fetch response. `records` is a region of a segment file (sent with sendfile)."""

    error: ErrorCode = ErrorCode.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    records: FileRegion = EMPTY_REGION
    aborted_transactions: list[AbortedTxn] | None = None
    leader_id: int = -1
    leader_epoch: int = -1
    error_message: str | None = None

    @property
    def size(self) -> int:
        return len(self.records)
