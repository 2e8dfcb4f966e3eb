"""Where a query's partitions live: a cluster (``kafka.bootstrap.servers``) or a stopped broker's log dirs
(``logDir``). The data source and the export job ask here and never care which."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa

from kfk.spark.offsets import OffsetRange, PartitionCatalog
from kfk.spark.options import SourceOptions

__all__ = ["open_catalog", "read_range"]


def open_catalog(options: SourceOptions) -> PartitionCatalog:
    if options.log_dir is not None:
        from kfk.spark.log_dir_source import LogDirCatalog

        return LogDirCatalog(options)
    from kfk.spark.broker_source import BrokerCatalog

    return BrokerCatalog(options)


def read_range(options: SourceOptions, offset_range: OffsetRange) -> Iterator[pa.RecordBatch]:
    """The records of one offset range as Arrow batches; runs in the Spark task, which opens its own files or
    connections here."""
    if options.log_dir is not None:
        from kfk.spark.log_dir_source import read_log_dir_range

        return read_log_dir_range(options, offset_range)
    from kfk.spark.broker_source import read_broker_range

    return read_broker_range(options, offset_range)
