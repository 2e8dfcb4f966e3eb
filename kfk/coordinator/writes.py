"""What a coordinator hands its owner to make durable: records for one partition of its internal topic, and the
continuation to run once they are committed.

Defined below every coordinator's modules so that the state machine (which collects writes) and the managers
(which produce them) do not import each other for a type, and so that the group coordinator and a transaction
coordinator share one shape of write that one owner loop can append.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from kfk.errors import ErrorCode
from kfk.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID

Record = tuple[bytes, bytes | None]
"""A key and value (None: a tombstone) for the coordinator's compacted topic."""

WriteCallback = Callable[[ErrorCode, int], None]
"""Runs with the append's outcome (NONE once committed) and the time it completed."""

WriteFunction = Callable[[str, list[Record], WriteCallback | None], None]
"""Queues records for the partition that owns the key (a group id, a transactional id)."""


@dataclasses.dataclass(slots=True)
class CoordinatorWrite:
    """Records to append to the internal topic's `partition` with acks=-1; `on_complete(error, now_ms)` runs when
    they are committed (error NONE) or the append failed. With a producer id they go in a transactional batch of that
    producer and epoch (a TxnOffsetCommit), which the log checks against the producer's epoch."""

    partition: int
    records: list[Record]
    on_complete: WriteCallback | None
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
