"""One broker's partition logs on local disk, in Kafka's on-disk format (segments, indexes, checkpoints).

Knows files only: no sockets, no brokers, no metadata (DESIGN.md). Every method is synchronous and takes the time
from its caller (`now_ms`); the broker runs the blocking ones in an executor.
"""

from kfk.storage.cleaner import CleanerStats, LogCleaner
from kfk.storage.fetch_data_info import (
    FetchDataInfo,
    FetchIsolation,
    FileRegion,
    LogOffsetMetadata,
    TimestampAndOffset,
)
from kfk.storage.log import Log, UnexpectedAppendOffsetError
from kfk.storage.log_manager import LogManager
from kfk.storage.log_validator import LogAppendInfo, LogValidator
from kfk.storage.producer_state import AppendOrigin
from kfk.storage.segment import LogSegment
from kfk.storage.transaction_index import AbortedTxn

__all__ = [
    "AbortedTxn",
    "AppendOrigin",
    "CleanerStats",
    "FetchDataInfo",
    "FetchIsolation",
    "FileRegion",
    "Log",
    "LogAppendInfo",
    "LogCleaner",
    "LogManager",
    "LogValidator",
    "LogOffsetMetadata",
    "LogSegment",
    "TimestampAndOffset",
    "UnexpectedAppendOffsetError",
]
