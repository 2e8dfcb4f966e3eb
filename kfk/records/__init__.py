"""SANS-I/O record formats: record batch v2, legacy message sets v0/v1, control batches and the four codecs.

Everything the broker stores and serves and everything the client produces passes through here. Nothing in this
package touches sockets, files or asyncio; it works on bytes, bytearrays, memoryviews and mmaps.
"""

from kfk.records.batch import (
    RECORD_BATCH_OVERHEAD,
    RecordBatch,
    complete_entries_length,
    entry_at,
    iter_batches,
    set_base_offset,
    set_last_offset,
    set_log_append_time,
    set_max_timestamp,
    set_partition_leader_epoch,
)
from kfk.records.builder import MemoryRecordsBuilder, build_empty_batch
from kfk.records.compression import compress, decompress
from kfk.records.control import (
    ControlRecordType,
    EndTransactionMarker,
    LeaderChangeMessage,
    Voter,
    build_end_transaction_marker_batch,
    build_leader_change_batch,
    control_record_type,
)
from kfk.records.conversion import down_convert, up_convert
from kfk.records.legacy import LegacyRecordBatch, LegacyRecordsBuilder
from kfk.records.record import (
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_VALUE_V0,
    MAGIC_VALUE_V1,
    MAGIC_VALUE_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    CompressionType,
    Record,
    TimestampType,
)

__all__ = [
    "LOG_OVERHEAD",
    "RECORD_BATCH_OVERHEAD",
    "MAGIC_OFFSET",
    "MAGIC_VALUE_V0",
    "MAGIC_VALUE_V1",
    "MAGIC_VALUE_V2",
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_TIMESTAMP",
    "CompressionType",
    "TimestampType",
    "Record",
    "RecordBatch",
    "LegacyRecordBatch",
    "iter_batches",
    "complete_entries_length",
    "entry_at",
    "set_base_offset",
    "set_last_offset",
    "set_partition_leader_epoch",
    "set_max_timestamp",
    "set_log_append_time",
    "MemoryRecordsBuilder",
    "LegacyRecordsBuilder",
    "build_empty_batch",
    "compress",
    "decompress",
    "ControlRecordType",
    "EndTransactionMarker",
    "LeaderChangeMessage",
    "Voter",
    "build_end_transaction_marker_batch",
    "build_leader_change_batch",
    "control_record_type",
    "down_convert",
    "up_convert",
]
